#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The roles of the expression layer, one concept each (STYLE.md 1): an Expression has a dtype and a
// shape type and can tell its run-time sizes; a leaf is a Tensor or a scalar; a node is an op with
// children. Nodes are data only: evaluators (backend/cpu/) do the work.
#include <concepts>
#include <cstdint>
#include <type_traits>

#include <tenet/dtype.hpp>
#include <tenet/shape.hpp>

namespace tenet {

template <class T, class S>
class Tensor;

namespace detail {
template <class T>
struct is_tensor : std::false_type {};
template <class T, class S>
struct is_tensor<Tensor<T, S>> : std::true_type {};
}  // namespace detail

template <class E>
concept Expression = requires {
  typename std::remove_cvref_t<E>::value_type;
  typename std::remove_cvref_t<E>::shape_type;
  requires std::remove_cvref_t<E>::is_expression;
};

template <class E>
concept TensorType = detail::is_tensor<std::remove_cvref_t<E>>::value;

/// A C++ number used as an operand (a "Python scalar" in PyTorch's promotion rules).
template <class T>
concept Scalar = std::is_arithmetic_v<std::remove_cvref_t<T>> || std::same_as<std::remove_cvref_t<T>, bfloat16> ||
                 std::same_as<std::remove_cvref_t<T>, float16>;

/// An argument of an op: an expression or a C++ number (tenet::Scalar, a "Python scalar" in
/// PyTorch's promotion rules).
template <class A>
concept ExprOrScalar = Expression<A> || Scalar<std::remove_cvref_t<A>>;

template <Expression E>
using value_type_of = typename std::remove_cvref_t<E>::value_type;
template <Expression E>
using shape_of = typename std::remove_cvref_t<E>::shape_type;
template <Expression E>
inline constexpr std::size_t rank_of = shape_of<E>::rank;

}  // namespace tenet
