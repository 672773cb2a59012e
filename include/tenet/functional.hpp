#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// torch.nn.functional-style composites built from the ATen-level ops: linear algebra helpers
// (linear, addmm, bmm, outer, dot), normalizations (layer_norm, rms_norm) and regression losses
// (mse, l1, smooth_l1, huber). Each is a decomposition into prims; layer_norm and rms_norm are
// composites the CPU also runs natively as one row kernel.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <type_traits>

#include <tenet/backend/evaluate.hpp>
#include <tenet/decomp/norm.hpp>
#include <tenet/ops.hpp>

namespace tenet {

// ---------------------------------------------------------------------------------------------
// linear algebra
/// linear(x, w): x · wᵀ (w is [out, in], as torch.nn.functional.linear); linear(x, w, b) adds b.
template <Expression X, Expression W>
auto linear(const X& x, const W& w) {
  static_assert(rank_of<W> == 2, "tenet: linear needs a weight of rank 2, [out_features, in_features]");
  return matmul(x, eval(w).template transpose<0, 1>());
}
template <Expression X, Expression W, Expression B>
auto linear(const X& x, const W& w, const B& b) {
  return linear(x, w) + b;
}
/// addmm(c, a, b, beta = 1, alpha = 1): beta c + alpha (a · b), for 2-D a and b.
template <Expression C, Expression A, Expression B>
auto addmm(const C& c, const A& a, const B& b, double beta = 1.0, double alpha = 1.0) {
  static_assert(rank_of<A> == 2 && rank_of<B> == 2, "tenet: addmm needs 2-D matrices (use matmul for batches)");
  using T = detail::promoted_t<C, A, B>;
  return detail::cast_to<T>(c) * detail::cast_to<T>(beta) + matmul(a, b) * detail::cast_to<T>(alpha);
}
/// bmm(a, b): batched matmul of two 3-D tensors with the same batch (no broadcasting, as torch.bmm).
template <Expression A, Expression B>
auto bmm(const A& a, const B& b) {
  static_assert(rank_of<A> == 3 && rank_of<B> == 3, "tenet: bmm needs 3-D tensors [batch, n, m]");
  static_assert(!(shape_of<A>::info[0].is_fixed() && shape_of<B>::info[0].is_fixed()) ||
                    shape_of<A>::info[0].value == shape_of<B>::info[0].value,
                "tenet: bmm needs equal batch sizes (it does not broadcast; use matmul)");
  if (a.sizes()[0] != b.sizes()[0])
    throw shape_error("tenet: bmm needs equal batch sizes, got " + std::to_string(a.sizes()[0]) + " and " +
                      std::to_string(b.sizes()[0]) + " (bmm does not broadcast; use matmul)");
  return matmul(a, b);
}
/// outer(a, b): a[i] · b[j] for 1-D a and b.
template <Expression A, Expression B>
auto outer(const A& a, const B& b) {
  static_assert(rank_of<A> == 1 && rank_of<B> == 1, "tenet: outer needs 1-D tensors");
  return eval(a).template unsqueeze<1>() * eval(b).template unsqueeze<0>();
}
/// dot(a, b): the inner product of two 1-D tensors of the same length (0-dim result).
template <Expression A, Expression B>
auto dot(const A& a, const B& b) {
  static_assert(rank_of<A> == 1 && rank_of<B> == 1, "tenet: dot needs 1-D tensors");
  return matmul(a, b);
}

// ---------------------------------------------------------------------------------------------
// normalization over the trailing dims that the weight covers



/// layer_norm(x, weight, bias, eps = 1e-5): normalizes over the last rank(weight) dims with the
/// biased variance, then scales and shifts (torch.nn.functional.layer_norm with an affine).
template <Expression X, Expression W, Expression B>
auto layer_norm(const X& x, const W& w, const B& b, double eps = 1e-5) {
  using T = value_type_of<X>;
  static_assert(is_floating_v<T>, "tenet: layer_norm needs a floating input");
  constexpr std::size_t K = rank_of<W>;
  static_assert(K >= 1 && K <= rank_of<X>, "tenet: layer_norm: the weight must cover 1..rank trailing dims of the input");
  static_assert(rank_of<B> == K, "tenet: layer_norm: the bias must have the weight's rank");
  aten::norm_last<K, false> op{eps};
  using Ref = decltype(op.decompose(x, detail::cast_to<T>(w), detail::cast_to<T>(b)));  // static shape checks
  (void)sizeof(Ref*);
  return make_node(op, x, detail::cast_to<T>(w), detail::cast_to<T>(b));
}
/// rms_norm(x, weight, eps): x / sqrt(mean(x^2) + eps) * weight over the last rank(weight) dims
/// (eps defaults to the dtype's epsilon, as torch.nn.functional.rms_norm).
template <Expression X, Expression W>
auto rms_norm(const X& x, const W& w, double eps = -1.0) {
  using T = value_type_of<X>;
  static_assert(is_floating_v<T>, "tenet: rms_norm needs a floating input");
  constexpr std::size_t K = rank_of<W>;
  static_assert(K >= 1 && K <= rank_of<X>, "tenet: rms_norm: the weight must cover 1..rank trailing dims of the input");
  const double e = eps < 0 ? static_cast<double>(std::numeric_limits<T>::epsilon()) : eps;
  aten::norm_last<K, true> op{e};
  using Ref = decltype(op.decompose(x, detail::cast_to<T>(w)));
  (void)sizeof(Ref*);
  return make_node(op, x, detail::cast_to<T>(w));
}

// ---------------------------------------------------------------------------------------------
// losses
/// How a loss reduces: the mean (the default), the sum, or none (elementwise); batchmean (the sum
/// divided by the batch size) is for kl_div only.
enum class reduction { mean, sum, none, batchmean };

namespace detail {
template <reduction R, class E>
auto reduce_loss(const E& e) {
  if constexpr (R == reduction::mean)
    return tenet::mean(e);
  else if constexpr (R == reduction::sum)
    return tenet::sum(e);
  else if constexpr (R == reduction::none)
    return e;
  else
    static_assert(R != reduction::batchmean, "tenet: reduction::batchmean is for kl_div only");
}
}  // namespace detail

/// mse_loss<R>(input, target): (input - target)^2, reduced.
template <reduction R = reduction::mean, Expression X, Expression Y>
auto mse_loss(const X& input, const Y& target) {
  auto d = input - target;
  return detail::reduce_loss<R>(d * d);
}
/// l1_loss<R>(input, target): |input - target|, reduced.
template <reduction R = reduction::mean, Expression X, Expression Y>
auto l1_loss(const X& input, const Y& target) {
  return detail::reduce_loss<R>(abs(input - target));
}
/// smooth_l1_loss<R>(input, target, beta = 1): 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta.
template <reduction R = reduction::mean, Expression X, Expression Y>
auto smooth_l1_loss(const X& input, const Y& target, double beta = 1.0) {
  using T = detail::promoted_t<X, Y>;
  auto a = abs(input - target);
  // beta = 0 is l1: the quadratic branch (0.5 d^2 / 0) is never selected since |d| < 0 is false
  return detail::reduce_loss<R>(where(a < T(beta), a * a * T(0.5 / beta), a - T(0.5 * beta)));
}
/// huber_loss<R>(input, target, delta = 1): 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta).
template <reduction R = reduction::mean, Expression X, Expression Y>
auto huber_loss(const X& input, const Y& target, double delta = 1.0) {
  using T = detail::promoted_t<X, Y>;
  auto a = abs(input - target);
  return detail::reduce_loss<R>(where(a < T(delta), a * a * T(0.5), (a - T(0.5 * delta)) * T(delta)));
}

}  // namespace tenet
