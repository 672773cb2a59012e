#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// shared_node<E, S>: a subexpression used more than once in a tree, evaluated at most once.
//
// Expression trees copy their children, so a decomposition that names its input twice
// (var: x - mean(x), softmax: exp(x - amax(x)) / sum(...)) would run an expensive input (a matmul,
// a reduction) once per use. share(x) wraps such an input: every copy of the wrapper holds the same
// cache, and the first evaluation fills it. Small inputs that are only elementwise are not wrapped:
// they recompute inside the fused loop for free (large ones are: see max_recomputed_tree).
#include <memory>
#include <optional>
#include <type_traits>

#include <tenet/expr/node.hpp>
#include <tenet/tensor.hpp>

namespace tenet {

template <class E, class S = shape_of<E>>
struct shared_node {
  static constexpr bool is_expression = true;
  using value_type = value_type_of<E>;
  using shape_type = S;
  static constexpr std::size_t rank = S::rank;
  using tensor_type = Tensor<value_type, S>;

  E expr;
  std::shared_ptr<std::optional<tensor_type>> cache;

  sizes_t<rank> sizes() const { return expr.sizes(); }
};

namespace detail {
template <class T>
struct is_shared_node : std::false_type {};
template <class E, class S>
struct is_shared_node<shared_node<E, S>> : std::true_type {};
}  // namespace detail

template <class E>
concept SharedNode = detail::is_shared_node<std::remove_cvref_t<E>>::value;

namespace detail {

/// True when evaluating E runs anything but elementwise ops (a reduction, matmul, composite ...).
template <class E>
constexpr bool has_non_pointwise() {
  if constexpr (SharedNode<E>) {
    return has_non_pointwise<decltype(std::declval<E>().expr)>();
  } else if constexpr (!Node<E>) {
    return false;
  } else {
    return []<class Op, class... C>(std::type_identity<node<Op, C...>>) {
      return !prim::is_elementwise_op<Op> || (has_non_pointwise<C>() || ...);
    }(std::type_identity<E>{});
  }
}

/// The number of nodes and leaves of E's tree, a shared value counting as one leaf (it is a
/// tensor by the time a kernel reads it).
template <class E>
constexpr std::size_t tree_size() {
  if constexpr (!Node<E> || SharedNode<E>) {
    return 1;
  } else {
    return []<class Op, class... C>(std::type_identity<node<Op, C...>>) {
      return (std::size_t{1} + ... + tree_size<C>());
    }(std::type_identity<E>{});
  }
}
/// The largest elementwise tree that share() leaves to be recomputed at each use inside the fused
/// loop. A composite that names its input k times (hypot: 6, copysign: 3) copies it k times into
/// its tree, so nesting such composites d deep made a tree of k^d copies: hypot(hypot(a, a), c)
/// took cc1plus past 18 GB (issue 26). A larger input is evaluated once into a temporary, and the
/// kernel's size grows linearly with the nesting depth.
inline constexpr std::size_t max_recomputed_tree = 16;

/// e itself, or e wrapped so that all its uses share one evaluation (see above).
template <class E>
auto share(const E& e) {
  if constexpr (Node<E> && (has_non_pointwise<E>() || tree_size<E>() > max_recomputed_tree))
    return shared_node<E>{e, std::make_shared<std::optional<Tensor<value_type_of<E>, shape_of<E>>>>()};
  else
    return e;
}

/// The same shared value, its expression rewritten (the cache stays shared).
template <class D, class E, class S>
shared_node<D, S> with_expr(const shared_node<E, S>& s, D d) {
  return shared_node<D, S>{std::move(d), s.cache};
}

}  // namespace detail
}  // namespace tenet
