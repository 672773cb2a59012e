#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// node<Op, Children...>: one op applied to its children, data only.
//
// An Op type supplies
//   template <class... C> using result_type   the dtype (C++ element type) of the result
//   template <class... C> using result_shape  the shape type of the result
//   sizes(children...)                        the run-time sizes (throws shape_error on mismatch)
// and, for ATen-level ops, `decompose(children...)`; prims have `is_prim = true` (prims/*.hpp).
// Children are held by value: tensors are handles, so `auto e = a + b;` never dangles.
#include <concepts>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include <tenet/expr/apply_tuple.hpp>
#include <tenet/expr/concepts.hpp>
#include <tenet/shape.hpp>

namespace tenet::prim {
/// The one thing the expression layer knows of an op: whether it is elementwise (its `group`
/// derives from elementwise_group; prims/elementwise.hpp names the groups). share() and the
/// lowering decide by it whether a subtree can be recomputed inside a fused loop.
struct elementwise_group {};
template <class Op>
concept is_elementwise_op = requires { typename Op::group; } && std::is_base_of_v<elementwise_group, typename Op::group>;
}  // namespace tenet::prim

namespace tenet {

/// The members of a Tensor that an unevaluated expression answers to as well (`(pred == y).to<float>()`,
/// `(a + b).t()`): to<U>() is a lazy cast (tenet::cast); the views evaluate the expression first,
/// as the free functions do (`transpose<0, 1>(a + b)`), and view the result. Declared here, defined
/// after those functions (tensor/views.hpp; to<U>() in ops.hpp).
template <class D>
struct expr_members {
  template <class U>
  auto to() const;
  template <auto... E, std::integral... N>
  auto reshape(N... n) const;
  template <auto... E, std::integral... N>
  auto view(N... n) const;
  template <auto... E, std::integral... N>
  auto expand(N... n) const;
  template <class E>
  auto expand_as(const E& other) const;
  template <std::int64_t... P>
  auto permute() const;
  template <std::int64_t D0, std::int64_t D1>
  auto transpose() const;
  auto transpose(std::int64_t d0, std::int64_t d1) const;
  auto t() const;
  auto mT() const;
  template <std::int64_t Dim>
  auto slice(std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  template <std::int64_t Dim>
  auto narrow(std::int64_t start, std::int64_t length) const;
  template <std::int64_t Dim>
  auto select(std::int64_t index) const;
  template <std::int64_t Dim>
  auto unsqueeze() const;
  template <std::int64_t Dim>
  auto squeeze() const;
  auto squeeze() const;
  template <std::int64_t Start = 0, std::int64_t End = -1>
  auto flatten() const;
  /// The value as a fresh contiguous tensor (an expression's value is always fresh).
  auto contiguous() const;
  auto clone() const;

 protected:
  const D& derived() const { return static_cast<const D&>(*this); }
};

template <class Op, class... Children>
struct node : expr_members<node<Op, Children...>> {
  static constexpr bool is_expression = true;
  using op_type = Op;
  using value_type = typename Op::template result_type<Children...>;
  using shape_type = typename Op::template result_shape<Children...>;
  static constexpr std::size_t rank = shape_type::rank;

  Op op;
  std::tuple<Children...> children;

  node(Op o, Children... c) : op(std::move(o)), children(std::move(c)...) {}

  sizes_t<rank> sizes() const {
    return detail::apply_tuple([&](const Children&... c) { return op.sizes(c...); }, children);
  }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto s : sizes()) n *= s;
    return n;
  }
};

/// A C++ number in an expression: a 0-dim operand of type T.
template <class T>
struct scalar {
  static constexpr bool is_expression = true;
  using value_type = T;
  using shape_type = shape<>;
  static constexpr std::size_t rank = 0;
  T value;
  sizes_t<0> sizes() const { return {}; }
};

namespace detail {
template <class T>
struct is_node : std::false_type {};
template <class Op, class... C>
struct is_node<node<Op, C...>> : std::true_type {};
template <class T>
struct is_scalar_leaf : std::false_type {};
template <class T>
struct is_scalar_leaf<scalar<T>> : std::true_type {};
}  // namespace detail

template <class E>
concept Node = detail::is_node<std::remove_cvref_t<E>>::value;
template <class E>
concept ScalarLeaf = detail::is_scalar_leaf<std::remove_cvref_t<E>>::value;
template <class E>
concept Leaf = TensorType<E> || ScalarLeaf<E>;

template <class Op, class... C>
auto make_node(Op op, C... c) {
  return node<Op, C...>(std::move(op), std::move(c)...);
}

}  // namespace tenet
