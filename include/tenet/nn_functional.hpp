#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// torch.nn.functional (and the linear-algebra helpers torch has beside it), as decompositions
// into prims. First: linear, addmm, bmm, outer, dot; layer_norm and rms_norm (composites the CPU
// and CUDA run natively as one row kernel: decomp/norm.hpp); the regression losses mse, l1,
// smooth_l1, huber.
// The rest of torch.nn.functional: normalizations with statistics (batch_norm, instance_norm,
// group_norm), dropout (through the uniform_ prim), softmin and softmax/log_softmax with a dtype,
// baddbmm, einsum, and the losses kl_div, binary_cross_entropy(_with_logits), cosine_similarity and
// pairwise_distance. Every op is a decomposition into prims; the eager parts are marked:
//   - batch statistics and running-stat updates are computed when the op is called (torch updates
//     running_mean/running_var at call time too), the normalization itself stays lazy;
//   - dropout evaluates now (its result type may not depend on the run-time `training` and `p`);
//   - binary_cross_entropy evaluates its input once to check that it lies in [0, 1], as torch does;
//   - einsum's matmul path evaluates the matmul (its result is a permuted view of it).
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include <tenet/activations.hpp>  // logsigmoid
#include <tenet/error.hpp>
#include <tenet/factories.hpp>
#include <tenet/ops.hpp>
#include <tenet/shape.hpp>

#include <tenet/backend/evaluate.hpp>
#include <tenet/decomp/norm.hpp>
#include <tenet/prims/random.hpp>
#include <tenet/tensor/views.hpp>

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

namespace tenet {

/// An absent optional tensor argument (torch's None): `batch_norm(x, rm, rv, none, bias)`.
struct none_t {};
inline constexpr none_t none{};

namespace detail {
template <class W>
inline constexpr bool is_none = std::is_same_v<std::remove_cvref_t<W>, none_t>;

/// A lazy uniform [0, 1) draw of the given sizes, evaluated on device `where`; its Philox blocks
/// are reserved from the default generator now (as rand<T, S>() reserves them), so two draws never
/// overlap.
template <class T, class S>
auto uniform_draw(const sizes_t<S::rank>& sizes, device where = default_device()) {
  std::int64_t n = 1;
  for (auto s : sizes) n *= s;
  const auto d = default_generator().reserve(n);
  prim::uniform_<T, S> op;
  op.extents = sizes;
  op.seed = d.seed;
  op.offset = d.offset;
  op.placement = where;
  return make_node(op);
}

/// Extent I of the rank-R shape that is 1 everywhere but dim 1, which holds C.
template <std::size_t I, auto C>
constexpr auto channel_extent() {
  if constexpr (I == 1)
    return C;
  else
    return 1;
}
template <std::size_t R, auto C, class Seq = std::make_index_sequence<R>>
struct channel_shape;
template <std::size_t R, auto C, std::size_t... I>
struct channel_shape<R, C, std::index_sequence<I...>> {
  using type = shape<channel_extent<I, C>()...>;
};

/// A per-channel 1-D value viewed as [1, C, 1, ...] (rank R) so that it broadcasts over dim 1 of an
/// input of sizes `input_sizes`; `what` names the argument in the error.
template <std::size_t R, class E>
auto channel_view(const E& e, const sizes_t<R>& input_sizes, const char* op, const char* what) {
  static_assert(rank_of<E> == 1, "tenet: a per-channel argument (weight, bias, running stats) must be 1-D [C]");
  auto t = eval(e);
  if (t.sizes()[0] != input_sizes[1])
    throw shape_error(std::string("tenet: ") + op + ": " + what + " has " + std::to_string(t.sizes()[0]) +
                      " elements, but the input (sizes " + sizes_text(input_sizes) + ") has " +
                      std::to_string(input_sizes[1]) + " channels (dim 1)");
  using S = typename channel_shape<R, shape_of<E>::template extent<0>>::type;
  sizes_t<R> s{}, st{};
  for (std::size_t i = 0; i < R; ++i) s[i] = 1, st[i] = 0;
  s[1] = t.sizes()[0];
  st[1] = t.strides()[0];
  return t.template with_layout<S>(s, st, t.offset());
}

/// y * weight + bias over dim 1, each factor only when given.
template <std::size_t R, class Y, class W, class B>
auto channel_affine(const Y& y, const W& weight, const B& bias, const sizes_t<R>& input_sizes, const char* op) {
  if constexpr (is_none<W> && is_none<B>) {
    return y;
  } else if constexpr (is_none<W>) {
    return y + channel_view<R>(bias, input_sizes, op, "bias");
  } else if constexpr (is_none<B>) {
    return y * channel_view<R>(weight, input_sizes, op, "weight");
  } else {
    return y * channel_view<R>(weight, input_sizes, op, "weight") + channel_view<R>(bias, input_sizes, op, "bias");
  }
}

/// f.template operator()<d...>() with d = the dims of a rank-R tensor from First on, skipping Skip
/// (batch_norm: all but 1; instance_norm: 2 ..).
template <std::size_t R, std::size_t First, std::size_t Skip, class F, std::size_t... I>
auto with_dims_impl(F&& f, std::index_sequence<I...>) {
  constexpr auto dims = [] {
    std::array<std::int64_t, R> d{};
    std::size_t n = 0;
    for (std::size_t i = First; i < R; ++i)
      if (i != Skip) d[n++] = static_cast<std::int64_t>(i);
    return d;
  }();
  return f.template operator()<dims[I]...>();
}
template <std::size_t R, std::size_t First, std::size_t Skip, class F>
auto with_dims(F&& f) {
  constexpr std::size_t n = R - First - (Skip >= First && Skip < R ? 1 : 0);
  return with_dims_impl<R, First, Skip>(std::forward<F>(f), std::make_index_sequence<n>{});
}

template <class RS>
constexpr void check_running_stat() {
  static_assert(is_none<RS> || TensorType<RS>,
                "tenet: running statistics must be tensors (they are updated in place) or tenet::none");
}

inline void check_momentum(const char* op, double momentum) {
  if (!(momentum >= 0.0 && momentum <= 1.0))
    throw value_error(std::string("tenet: ") + op + ": momentum must lie in [0, 1], got " + std::to_string(momentum));
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// normalization with statistics

/// batch_norm(input, running_mean, running_var, weight = none, bias = none, training = false,
///            momentum = 0.1, eps = 1e-5), as torch.nn.functional.batch_norm over dim 1 (channels):
/// training: the batch mean and biased variance over every dim but 1 normalize the input, and
/// running_mean/running_var (when given) become (1 - momentum) running + momentum batch, with the
/// unbiased variance for running_var; eval: the running statistics normalize the input.
/// The statistics are computed and the running tensors updated when batch_norm is called; the
/// returned expression normalizes lazily.
template <Expression X, class RM, class RV, class W = none_t, class B = none_t>
auto batch_norm(const X& input, const RM& running_mean, const RV& running_var, const W& weight = {},
                const B& bias = {}, bool training = false, double momentum = 0.1, double eps = 1e-5) {
  using T = value_type_of<X>;
  constexpr std::size_t R = rank_of<X>;
  static_assert(is_floating_v<T>, "tenet: batch_norm needs a floating input");
  static_assert(R >= 2, "tenet: batch_norm needs an input of rank >= 2, [N, C, ...]");
  static_assert(detail::is_none<RM> == detail::is_none<RV>, "tenet: batch_norm: give both running_mean and running_var, or neither");
  detail::check_running_stat<RM>();
  detail::check_running_stat<RV>();
  detail::check_momentum("batch_norm", momentum);
  using CT = Tensor<T, shape<shape_of<X>::template extent<1>>>;  // one value per channel
  auto x = eval(input);
  const auto s = x.sizes();
  const std::int64_t channels = s[1];
  const std::int64_t per_channel = channels == 0 ? 0 : x.numel() / channels;
  CT mean_c, invstd_c;
  if (training) {
    if (per_channel <= 1)
      throw value_error("tenet: batch_norm: expected more than 1 value per channel when training, got input sizes " +
                        detail::sizes_text(s));
    detail::with_dims<R, 0, 1>([&]<std::int64_t... D>() {
      mean_c = CT(eval(mean<D...>(x)));
      CT biased_var = CT(eval(var<D...>(x, 0.0)));
      invstd_c = CT(eval(rsqrt(biased_var + detail::cast_to<T>(eps))));
      if constexpr (!detail::is_none<RM>) {
        static_assert(std::is_same_v<value_type_of<RM>, T> && std::is_same_v<value_type_of<RV>, T>,
                      "tenet: batch_norm: running statistics must have the input's dtype");
        (void)detail::channel_view<R>(running_mean, s, "batch_norm", "running_mean");  // checks C
        (void)detail::channel_view<R>(running_var, s, "batch_norm", "running_var");
        const auto m = detail::cast_to<T>(momentum), keep = detail::cast_to<T>(1.0 - momentum);
        const auto bessel = detail::cast_to<T>(static_cast<double>(per_channel) / static_cast<double>(per_channel - 1));
        running_mean.copy_(running_mean * keep + mean_c * m);
        running_var.copy_(running_var * keep + biased_var * bessel * m);
      }
    });
  } else {
    if constexpr (detail::is_none<RM>) {
      throw value_error("tenet: batch_norm: running_mean and running_var must be given when training is false");
    } else {
      (void)detail::channel_view<R>(running_mean, s, "batch_norm", "running_mean");
      (void)detail::channel_view<R>(running_var, s, "batch_norm", "running_var");
      mean_c = CT(eval(detail::cast_to<T>(running_mean)));
      invstd_c = CT(eval(rsqrt(detail::cast_to<T>(running_var) + detail::cast_to<T>(eps))));
    }
  }
  auto y = (x - detail::channel_view<R>(mean_c, s, "batch_norm", "mean")) *
           detail::channel_view<R>(invstd_c, s, "batch_norm", "invstd");
  return detail::channel_affine<R>(y, weight, bias, s, "batch_norm");
}

/// instance_norm(input, running_mean = none, running_var = none, weight = none, bias = none,
///               use_input_stats = true, momentum = 0.1, eps = 1e-5), as
/// torch.nn.functional.instance_norm: each (sample, channel) is normalized over dims 2.. with its own
/// mean and biased variance; the running statistics (when given) move towards the batch average of
/// the instance means and unbiased variances. use_input_stats = false normalizes with the running
/// statistics instead.
template <Expression X, class RM = none_t, class RV = none_t, class W = none_t, class B = none_t>
auto instance_norm(const X& input, const RM& running_mean = {}, const RV& running_var = {}, const W& weight = {},
                   const B& bias = {}, bool use_input_stats = true, double momentum = 0.1, double eps = 1e-5) {
  using T = value_type_of<X>;
  constexpr std::size_t R = rank_of<X>;
  static_assert(is_floating_v<T>, "tenet: instance_norm needs a floating input");
  static_assert(R >= 3, "tenet: instance_norm needs an input of rank >= 3, [N, C, spatial...]");
  static_assert(detail::is_none<RM> == detail::is_none<RV>,
                "tenet: instance_norm: give both running_mean and running_var, or neither");
  detail::check_running_stat<RM>();
  detail::check_running_stat<RV>();
  detail::check_momentum("instance_norm", momentum);
  auto x = eval(input);
  const auto s = x.sizes();
  std::int64_t spatial = 1;
  for (std::size_t i = 2; i < R; ++i) spatial *= s[i];
  // per (sample, channel) statistics, kept as [N, C, 1, ...]
  return detail::with_dims<R, 2, R>([&]<std::int64_t... D>() {
    using ST = Tensor<T, typename detail::reduce_shape<shape_of<X>, true, D...>::type>;
    ST mean_nc, invstd_nc;
    if (use_input_stats) {
      if (spatial <= 1)
        throw value_error("tenet: instance_norm: expected more than 1 spatial element when training, got input "
                          "sizes " + detail::sizes_text(s));
      mean_nc = ST(eval(mean<D...>(x, keepdim)));
      ST biased_var = ST(eval(var<D...>(x, keepdim, 0.0)));
      invstd_nc = ST(eval(rsqrt(biased_var + detail::cast_to<T>(eps))));
      if constexpr (!detail::is_none<RM>) {
        static_assert(std::is_same_v<value_type_of<RM>, T> && std::is_same_v<value_type_of<RV>, T>,
                      "tenet: instance_norm: running statistics must have the input's dtype");
        (void)detail::channel_view<R>(running_mean, s, "instance_norm", "running_mean");
        (void)detail::channel_view<R>(running_var, s, "instance_norm", "running_var");
        const auto m = detail::cast_to<T>(momentum), keep = detail::cast_to<T>(1.0 - momentum);
        const auto bessel = detail::cast_to<T>(static_cast<double>(spatial) / static_cast<double>(spatial - 1));
        // the batch average of the per-instance statistics, one value per channel: [C]
        auto batch_mean = mean<0>(mean_nc.template reshape<dyn, dyn>(s[0], s[1]));
        auto batch_var = mean<0>(biased_var.template reshape<dyn, dyn>(s[0], s[1]));
        running_mean.copy_(running_mean * keep + batch_mean * m);
        running_var.copy_(running_var * keep + batch_var * bessel * m);
      }
    } else {
      if constexpr (detail::is_none<RM>) {
        throw value_error("tenet: instance_norm: running_mean and running_var must be given when use_input_stats "
                          "is false");
      } else {
        auto rm = detail::channel_view<R>(running_mean, s, "instance_norm", "running_mean");
        auto rv = detail::channel_view<R>(running_var, s, "instance_norm", "running_var");
        sizes_t<R> ks{};
        for (std::size_t i = 0; i < R; ++i) ks[i] = i < 2 ? s[i] : 1;
        mean_nc = ST(eval(detail::cast_to<T>(rm.template expand_as_shape<typename ST::shape_type>(ks))));
        invstd_nc = ST(eval(rsqrt(detail::cast_to<T>(rv.template expand_as_shape<typename ST::shape_type>(ks)) +
                                  detail::cast_to<T>(eps))));
      }
    }
    return detail::channel_affine<R>((x - mean_nc) * invstd_nc, weight, bias, s, "instance_norm");
  });
}

/// group_norm(input, num_groups, weight = none, bias = none, eps = 1e-5), as
/// torch.nn.functional.group_norm: the channels split into num_groups groups; each (sample, group)
/// is normalized with its mean and biased variance, then scaled and shifted per channel.
template <Expression X, class W = none_t, class B = none_t>
auto group_norm(const X& input, std::int64_t num_groups, const W& weight = {}, const B& bias = {},
                double eps = 1e-5) {
  using T = value_type_of<X>;
  constexpr std::size_t R = rank_of<X>;
  static_assert(is_floating_v<T>, "tenet: group_norm needs a floating input");
  static_assert(R >= 2, "tenet: group_norm needs an input of rank >= 2, [N, C, ...]");
  auto x = eval(input);
  const auto s = x.sizes();
  if (num_groups <= 0)
    throw value_error("tenet: group_norm: num_groups must be positive, got " + std::to_string(num_groups));
  if (s[1] % num_groups != 0)
    throw shape_error("tenet: group_norm: expected the number of channels to be divisible by num_groups, got input "
                      "sizes " + detail::sizes_text(s) + " and num_groups=" + std::to_string(num_groups));
  std::int64_t per_group = s[1] / num_groups;
  for (std::size_t i = 2; i < R; ++i) per_group *= s[i];
  auto grouped = x.template reshape<dyn, dyn, dyn>(s[0], num_groups, per_group);
  auto mu = detail::share(mean<2>(grouped, keepdim));
  auto centered = grouped - mu;
  Tensor<T, dyn_shape<3>> normalized = centered * rsqrt(var<2>(grouped, keepdim, 0.0) + detail::cast_to<T>(eps));
  auto y = normalized.template with_layout<shape_of<X>>(s, detail::contiguous_strides(s), normalized.offset());
  return detail::channel_affine<R>(y, weight, bias, s, "group_norm");
}

// ---------------------------------------------------------------------------------------------
// dropout and random draws

/// A lazy uniform [0, 1) draw of dtype T and shape S (one size argument per dyn extent): the
/// uniform_ prim, on the default device (as rand). The blocks are reserved now from the default
/// generator, in the same way as rand<T, S>(), so after the same manual_seed both give the same
/// values, on every device.
template <class T, class S, std::integral... N>
auto rand_lazy(N... n) {
  static_assert(is_floating_v<T>, "tenet: rand_lazy needs a floating dtype");
  return detail::uniform_draw<T, S>(detail::sizes_from<S>(n...));
}

/// dropout(input, p = 0.5, training = true), as torch.nn.functional.dropout: each element is zeroed
/// with probability p (where a uniform_ draw is < p) and the others scaled by 1 / (1 - p); p = 1
/// zeroes everything (input * 0, so a NaN stays NaN, as torch); training = false or p = 0 returns
/// the input. Evaluates now. The mask follows tenet's Philox stream, not torch's.
template <Expression X>
auto dropout(const X& input, double p = 0.5, bool training = true) {
  using T = value_type_of<X>;
  static_assert(is_floating_v<T>, "tenet: dropout needs a floating input");
  using R = Tensor<T, shape_of<X>>;
  if (!(p >= 0.0 && p <= 1.0))
    throw value_error("tenet: dropout probability has to be between 0 and 1, but got " + std::to_string(p));
  if (!training || p == 0.0) return R(eval(input));
  if (p == 1.0) return R(input * detail::cast_to<T>(0.0));
  auto x = eval(input);
  auto u = detail::uniform_draw<T, shape_of<X>>(x.sizes(), x.device());
  const auto scale = detail::cast_to<T>(1.0 / (1.0 - p));
  return R(x * make_node(prim::where_{}, make_node(prim::lt_{}, u, detail::cast_to<T>(p)), detail::cast_to<T>(0.0),
                         scale));
}

// ---------------------------------------------------------------------------------------------
// softmax family with a dtype

/// softmax<D, DType>(x): x cast to DType first, then softmax (torch's `dtype=` argument).
template <std::int64_t D, class DType, Expression X>
  requires Element<DType>
auto softmax(const X& x) {
  static_assert(is_floating_v<DType>, "tenet: softmax's dtype must be a floating type");
  return softmax<D>(detail::cast_to<DType>(x));
}
template <std::int64_t D, class DType, Expression X>
  requires Element<DType>
auto log_softmax(const X& x) {
  static_assert(is_floating_v<DType>, "tenet: log_softmax's dtype must be a floating type");
  return log_softmax<D>(detail::cast_to<DType>(x));
}
/// softmin<D>(x) = softmax<D>(-x); softmin<D, DType>(x) casts first.
template <std::int64_t D, Expression X>
auto softmin(const X& x) {
  return softmax<D>(neg(detail::cast_to<detail::floating_t<value_type_of<X>>>(x)));
}
template <std::int64_t D, class DType, Expression X>
  requires Element<DType>
auto softmin(const X& x) {
  static_assert(is_floating_v<DType>, "tenet: softmin's dtype must be a floating type");
  return softmax<D>(neg(detail::cast_to<DType>(x)));
}

// ---------------------------------------------------------------------------------------------
// baddbmm

/// baddbmm(c, a, b, beta = 1, alpha = 1): beta c + alpha bmm(a, b); c broadcasts to the [batch, n, p]
/// result. beta = 0 ignores c (NaN or inf in c do not reach the result), as torch.
template <Expression C, Expression A, Expression B>
auto baddbmm(const C& c, const A& a, const B& b, double beta = 1.0, double alpha = 1.0) {
  static_assert(rank_of<C> <= 3, "tenet: baddbmm: the added tensor must broadcast to [batch, n, p]");
  using T = detail::promoted_t<C, A, B>;
  auto product = bmm(a, b);
  const auto ps = product.sizes();
  const auto bs = detail::broadcast_sizes<3>(ps, c.sizes());
  if (bs != ps)
    throw shape_error("tenet: baddbmm: the added tensor of sizes " + detail::sizes_text(c.sizes()) +
                      " does not broadcast to the product's sizes " + detail::sizes_text(ps));
  auto scaled_c = make_node(prim::where_{}, scalar<bool>{beta == 0.0}, scalar<T>{T(0)},
                            detail::cast_to<T>(c) * detail::cast_to<T>(beta));
  return scaled_c + detail::cast_to<T>(product) * detail::cast_to<T>(alpha);
}

// ---------------------------------------------------------------------------------------------
// einsum
namespace detail::einsum_impl {

inline constexpr int max_operands = 3;
inline constexpr int max_labels = 52;

enum class parse_error { none, bad_character, ellipsis, too_many_operands, no_operand, repeated_output_label,
                         unknown_output_label, misplaced_arrow };

struct equation {
  int operands = 0;
  std::array<std::array<char, max_labels>, max_operands> labels{};
  std::array<int, max_operands> ranks{};
  std::array<char, max_labels> out{};
  int out_rank = 0;
  std::array<char, max_labels> contracted{};  // labels not in the output, alphabetical
  int n_contracted = 0;
  parse_error error = parse_error::none;

  constexpr bool in_operand(int k, char c) const {
    for (int j = 0; j < ranks[k]; ++j)
      if (labels[k][j] == c) return true;
    return false;
  }
  constexpr bool in_output(char c) const {
    for (int j = 0; j < out_rank; ++j)
      if (out[j] == c) return true;
    return false;
  }
  constexpr int count(char c) const {
    int n = 0;
    for (int k = 0; k < operands; ++k)
      for (int j = 0; j < ranks[k]; ++j) n += labels[k][j] == c;
    return n;
  }
  /// The global dims: the output labels, then the contracted ones.
  constexpr int total() const { return out_rank + n_contracted; }
  constexpr char global(int g) const { return g < out_rank ? out[g] : contracted[g - out_rank]; }
};

constexpr bool is_label(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
/// a..z, A..Z: the alphabetical order torch uses for an implicit output (upper case first in ASCII;
/// torch sorts A..Z before a..z as well).
constexpr int label_rank(char c) { return c >= 'a' ? 26 + (c - 'a') : c - 'A'; }

template <std::size_t N>
constexpr equation parse(const char (&s)[N]) {
  equation e;
  bool arrow = false;
  int k = 0;
  e.operands = 1;
  for (std::size_t i = 0; i + 1 < N && s[i] != '\0'; ++i) {
    const char c = s[i];
    if (c == ' ') continue;
    if (c == '.') {
      e.error = parse_error::ellipsis;
      return e;
    }
    if (c == '-') {
      if (arrow || i + 2 >= N || s[i + 1] != '>') {
        e.error = parse_error::misplaced_arrow;
        return e;
      }
      arrow = true;
      ++i;
      continue;
    }
    if (c == ',') {
      if (arrow) {
        e.error = parse_error::misplaced_arrow;
        return e;
      }
      if (++k >= max_operands) {
        e.error = parse_error::too_many_operands;
        return e;
      }
      e.operands = k + 1;
      continue;
    }
    if (!is_label(c)) {
      e.error = parse_error::bad_character;
      return e;
    }
    if (arrow) {
      if (e.in_output(c)) {
        e.error = parse_error::repeated_output_label;
        return e;
      }
      e.out[e.out_rank++] = c;
    } else {
      e.labels[k][e.ranks[k]++] = c;
    }
  }
  if (arrow) {
    for (int j = 0; j < e.out_rank; ++j)
      if (e.count(e.out[j]) == 0) {
        e.error = parse_error::unknown_output_label;
        return e;
      }
  } else {  // implicit output: the labels seen exactly once, alphabetical
    for (int r = 0; r < 52; ++r) {
      const char c = r < 26 ? static_cast<char>('A' + r) : static_cast<char>('a' + r - 26);
      if (e.count(c) == 1) e.out[e.out_rank++] = c;
    }
  }
  for (int r = 0; r < 52; ++r) {
    const char c = r < 26 ? static_cast<char>('A' + r) : static_cast<char>('a' + r - 26);
    if (e.count(c) > 0 && !e.in_output(c)) e.contracted[e.n_contracted++] = c;
  }
  return e;
}

template <fixed_string Eq>
inline constexpr equation equation_of = parse(Eq.value);

template <std::int64_t V>
constexpr auto extent_from() {
  if constexpr (V < 0)
    return dyn;
  else if constexpr (V <= 2147483647)
    return static_cast<int>(V);  // as extents are written: shape<4, 4>
  else
    return V;
}
template <std::array A, class Seq = std::make_index_sequence<A.size()>>
struct shape_of_array;
template <std::array A, std::size_t... I>
struct shape_of_array<A, std::index_sequence<I...>> {
  using type = shape<extent_from<A[I]>()...>;
};

/// The static extent of global dim g in operand k of shape S: its extent where the label appears
/// (a fixed number, else -1 for run time), 1 where it does not.
template <const equation& E, int K, class S>
constexpr std::int64_t operand_extent(int g) {
  const char c = E.global(g);
  for (int j = 0; j < E.ranks[K]; ++j)
    if (E.labels[K][j] == c) return S::info[static_cast<std::size_t>(j)].is_fixed() ? S::info[static_cast<std::size_t>(j)].value : -1;
  return 1;
}
template <const equation& E, int K, class S>
constexpr auto aligned_extents() {
  std::array<std::int64_t, static_cast<std::size_t>(E.total())> a{};
  for (int g = 0; g < E.total(); ++g) a[static_cast<std::size_t>(g)] = operand_extent<E, K, S>(g);
  return a;
}
/// Operand k as a view of rank E.total() over the global dims: a repeated label reads the diagonal
/// (its strides add up), a missing label has extent 1.
template <const equation& E, int K, class Tn>
auto aligned_view(const Tn& t) {
  constexpr std::size_t G = static_cast<std::size_t>(E.total());
  using S = typename shape_of_array<aligned_extents<E, K, shape_of<Tn>>()>::type;
  sizes_t<G> sz{}, st{};
  const auto ts = t.sizes();
  const auto tst = t.strides();
  for (std::size_t g = 0; g < G; ++g) {
    const char c = E.global(static_cast<int>(g));
    bool seen = false;
    sz[g] = 1;
    st[g] = 0;
    for (int j = 0; j < E.ranks[K]; ++j) {
      if (E.labels[K][j] != c) continue;
      const auto js = static_cast<std::size_t>(j);
      if (!seen) {
        sz[g] = ts[js];
        st[g] = tst[js];
        seen = true;
      } else {
        if (ts[js] != sz[g])
          throw shape_error(std::string("tenet: einsum: subscript '") + c + "' is repeated for operand " +
                            std::to_string(K) + " but the sizes don't match, " + std::to_string(sz[g]) +
                            " != " + std::to_string(ts[js]) + " (sizes " + sizes_text(ts) + ")");
        st[g] += tst[js];
      }
    }
  }
  return t.template with_layout<S>(sz, st, t.offset());
}

/// Each global dim's size over all operands (equal, or 1 broadcasting); shape_error otherwise.
template <const equation& E, class... Tn>
auto common_sizes(const Tn&... t) {
  constexpr std::size_t G = static_cast<std::size_t>(E.total());
  std::array<std::int64_t, G> common{};
  for (auto& v : common) v = 1;
  int k = 0;
  auto visit = [&](const auto& x) {
    const auto xs = x.sizes();
    for (int j = 0; j < E.ranks[k]; ++j) {
      const char c = E.labels[k][j];
      for (int i = 0; i < j; ++i)  // a repeated label reads a diagonal: its sizes must agree exactly
        if (E.labels[k][i] == c && xs[static_cast<std::size_t>(i)] != xs[static_cast<std::size_t>(j)])
          throw shape_error(std::string("tenet: einsum: subscript '") + c + "' is repeated for operand " +
                            std::to_string(k) + " but the sizes don't match, " +
                            std::to_string(xs[static_cast<std::size_t>(i)]) + " != " +
                            std::to_string(xs[static_cast<std::size_t>(j)]) + " (sizes " + sizes_text(xs) + ")");
      std::size_t g = 0;
      while (E.global(static_cast<int>(g)) != c) ++g;
      const std::int64_t n = xs[static_cast<std::size_t>(j)];
      if (n == common[g] || n == 1) continue;
      if (common[g] != 1)
        throw shape_error(std::string("tenet: einsum: operands do not broadcast over subscript '") + c + "': sizes " +
                          std::to_string(common[g]) + " and " + std::to_string(n) + " (operand " +
                          std::to_string(k) + " has sizes " + sizes_text(xs) + ")");
      common[g] = n;
    }
    ++k;
  };
  (visit(t), ...);
  return common;
}

/// The sum over the global dims out_rank .. total-1 (the contracted labels) of the product.
template <const equation& E, class P, std::size_t... I>
auto sum_contracted(const P& product, std::index_sequence<I...>) {
  if constexpr (sizeof...(I) == 0)
    return product;
  else
    return sum<static_cast<std::int64_t>(E.out_rank + static_cast<int>(I))...>(product);
}

/// Two operands whose contracted labels appear in both and whose other labels all reach the output:
/// one batched matmul [batch, left, k] x [batch, k, right].
template <const equation& E>
constexpr bool use_matmul() {
  if (E.operands != 2 || E.n_contracted == 0) return false;
  for (int i = 0; i < E.n_contracted; ++i)
    if (!(E.in_operand(0, E.contracted[i]) && E.in_operand(1, E.contracted[i]))) return false;
  return true;
}

/// The view over the first `count` global dims listed in `order`, expanded to `common` sizes,
/// reshaped to three dims whose sizes are the products over the groups [0, a), [a, b), [b, count)
/// (the global dims the operand lacks trail with extent 1).
template <class V, std::size_t N>
auto grouped_3d(const V& view, const std::array<std::size_t, N>& order, std::size_t count, std::size_t a,
                std::size_t b, const std::array<std::int64_t, N>& common) {
  sizes_t<N> sz{}, st{};
  const auto vs = view.sizes();
  const auto vst = view.strides();
  std::array<std::int64_t, 3> g{1, 1, 1};
  for (std::size_t i = 0; i < N; ++i) {
    if (i >= count) {
      sz[i] = 1;
      st[i] = 0;
      continue;
    }
    const std::size_t d = order[i];
    sz[i] = common[d];
    st[i] = vs[d] == common[d] ? vst[d] : 0;  // a size-1 operand dim broadcasts
    g[i < a ? 0 : (i < b ? 1 : 2)] *= sz[i];
  }
  auto permuted = view.template with_layout<dyn_shape<N>>(sz, st, view.offset());
  return permuted.template reshape<dyn, dyn, dyn>(g[0], g[1], g[2]);
}

}  // namespace detail::einsum_impl

/// einsum<"bij,bjk->bik">(a, b): Einstein summation over 1 to 3 operands, as torch.einsum, with an
/// explicit output ("ij->ji") or the implicit one (the labels seen once, alphabetical), repeated
/// labels within an operand (diagonals: "ii->i", traces: "ii") and size-1 dims broadcasting.
/// Decomposition: each operand becomes a strided view over all labels (output labels, then the
/// contracted ones); two operands with a real contraction run as one batched matmul (evaluated,
/// then viewed in the output's order); anything else is the broadcast product summed over the
/// contracted labels (lazy). Not supported: "..." (ellipsis), more than 3 operands.
template <fixed_string Eq, Expression... Ops>
auto einsum(const Ops&... ops) {
  namespace ei = detail::einsum_impl;
  static constexpr const ei::equation& E = ei::equation_of<Eq>;
  static_assert(E.error != ei::parse_error::bad_character,
                "tenet: einsum: the equation may hold only letters a-z, A-Z, ',', '->' and spaces");
  static_assert(E.error != ei::parse_error::ellipsis, "tenet: einsum: '...' (ellipsis) is not supported");
  static_assert(E.error != ei::parse_error::too_many_operands, "tenet: einsum takes at most 3 operands");
  static_assert(E.error != ei::parse_error::misplaced_arrow,
                "tenet: einsum: '->' must appear once, after the operands' subscripts");
  static_assert(E.error != ei::parse_error::repeated_output_label,
                "tenet: einsum: an output subscript appears more than once");
  static_assert(E.error != ei::parse_error::unknown_output_label,
                "tenet: einsum: an output subscript does not appear in any operand");
  static_assert(sizeof...(Ops) == static_cast<std::size_t>(E.operands),
                "tenet: einsum: the equation names a different number of operands than given");
  constexpr std::array<std::size_t, sizeof...(Ops)> given_ranks{rank_of<Ops>...};
  static_assert([&] {
    for (std::size_t k = 0; k < given_ranks.size(); ++k)
      if (given_ranks[k] != static_cast<std::size_t>(E.ranks[k])) return false;
    return true;
  }(), "tenet: einsum: an operand's rank differs from the number of its subscripts");
  using T = detail::promoted_t<Ops...>;
  static_assert(!std::is_same_v<T, bool>, "tenet: einsum of bool tensors is not supported");
  constexpr std::size_t G = static_cast<std::size_t>(E.total());
  constexpr std::size_t O = static_cast<std::size_t>(E.out_rank);
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto tensors = std::make_tuple(eval(detail::cast_to<T>(ops))...);
    const auto common = ei::common_sizes<E>(std::get<K>(tensors)...);
    auto views = std::make_tuple(ei::aligned_view<E, static_cast<int>(K)>(std::get<K>(tensors))...);
    if constexpr (ei::use_matmul<E>()) {
      // group the global dims: batch (both operands, output), left (a only), right (b only), k (contracted)
      std::array<std::size_t, G> a_order{}, b_order{};
      std::array<std::size_t, O> out_order{};  // matmul result dim -> global dim
      std::size_t na = 0, nb = 0, nbatch = 0, nleft = 0, nright = 0;
      for (std::size_t g = 0; g < O; ++g)
        if (E.in_operand(0, E.global(static_cast<int>(g))) && E.in_operand(1, E.global(static_cast<int>(g))))
          a_order[na++] = g, b_order[nb++] = g, out_order[nbatch++] = g;
      for (std::size_t g = 0; g < O; ++g)
        if (E.in_operand(0, E.global(static_cast<int>(g))) && !E.in_operand(1, E.global(static_cast<int>(g))))
          a_order[na++] = g, out_order[nbatch + nleft++] = g;
      const std::size_t a_split = na;
      for (std::size_t g = O; g < G; ++g) a_order[na++] = g, b_order[nb++] = g;
      const std::size_t b_split = nb;
      for (std::size_t g = 0; g < O; ++g)
        if (!E.in_operand(0, E.global(static_cast<int>(g))))
          b_order[nb++] = g, out_order[nbatch + nleft + nright++] = g;
      auto a3 = ei::grouped_3d(std::get<0>(views), a_order, na, nbatch, a_split, common);
      auto b3 = ei::grouped_3d(std::get<1>(views), b_order, nb, nbatch, b_split, common);
      Tensor<T, dyn_shape<3>> product = matmul(a3, b3);
      // product dims (batch..., left..., right...) as the output's dims
      sizes_t<O> sz{}, st{};
      std::array<std::int64_t, O> rstride{};
      std::int64_t stride = 1;
      for (std::size_t i = O; i-- > 0;) {
        rstride[i] = stride;
        stride *= common[out_order[i]];
      }
      for (std::size_t i = 0; i < O; ++i) {
        sz[out_order[i]] = common[out_order[i]];
        st[out_order[i]] = rstride[i];
      }
      using SO = shape_of<decltype(ei::sum_contracted<E>(std::get<0>(views) * std::get<1>(views),
                                                          std::make_index_sequence<G - O>{}))>;
      return product.template with_layout<SO>(sz, st, product.offset());
    } else {
      auto product = [&] {
        if constexpr (sizeof...(K) == 1)
          return std::get<0>(views);
        else if constexpr (sizeof...(K) == 2)
          return std::get<0>(views) * std::get<1>(views);
        else
          return std::get<0>(views) * std::get<1>(views) * std::get<2>(views);
      }();
      return ei::sum_contracted<E>(product, std::make_index_sequence<G - O>{});
    }
  }(std::index_sequence_for<Ops...>{});
}

// ---------------------------------------------------------------------------------------------
// losses

/// kl_div<R>(input, target, log_target = false), as torch.nn.functional.kl_div: input holds log
/// probabilities; pointwise target (log target - input), with 0 where target is 0 (xlogy), or
/// exp(target) (target - input) when log_target. reduction::batchmean divides the sum by the
/// batch size (dim 0); reduction::mean (the default, as torch) by the number of elements.
template <reduction R = reduction::mean, Expression X, Expression Y>
auto kl_div(const X& input, const Y& target0, bool log_target = false) {
  using T = detail::floating_t<detail::promoted_t<X, Y>>;
  auto x = detail::cast_to<T>(input);
  auto t = detail::share(detail::cast_to<T>(target0));
  // both forms in one expression type; log_target picks one at run time
  auto xlogy = make_node(prim::where_{}, make_node(prim::eq_{}, t, scalar<T>{T(0)}), scalar<T>{T(0)},
                         make_node(prim::mul_{}, t, log(t)));
  auto plain = make_node(prim::sub_{}, xlogy, make_node(prim::mul_{}, t, x));
  auto logt = make_node(prim::mul_{}, exp(t), make_node(prim::sub_{}, t, x));
  auto pointwise = make_node(prim::where_{}, scalar<bool>{log_target}, logt, plain);
  if constexpr (R == reduction::batchmean) {
    const double batch = rank_of<decltype(pointwise)> == 0 ? 1.0 : static_cast<double>(pointwise.sizes()[0]);
    if constexpr (half_precision<T>)  // a float sum, rounded once (losses.hpp: float_operand)
      return detail::cast_to<T>(
          make_node(prim::div_{}, tenet::sum(detail::cast_to<float>(pointwise)), detail::cast_to<float>(batch)));
    else
      return make_node(prim::div_{}, tenet::sum(pointwise), detail::cast_to<T>(batch));
  } else {
    return detail::reduce_loss<R>(pointwise);
  }
}

namespace detail {
template <class X, class Y>
void require_same_sizes(const X& x, const Y& y, const char* op) {
  static_assert(rank_of<X> == rank_of<Y>, "tenet: the target must have the input's shape");
  if (x.sizes() != y.sizes())
    throw shape_error(std::string("tenet: ") + op + ": the target's sizes " + sizes_text(y.sizes()) +
                      " differ from the input's " + sizes_text(x.sizes()) + "; give a target of the same sizes");
}
}  // namespace detail

/// binary_cross_entropy<R>(input, target, weight = none), as torch: -(t log x + (1 - t) log(1 - x))
/// with each log clamped at -100, times weight (broadcast). The input must lie in [0, 1]
/// (value_error otherwise; checked when called, which evaluates the input).
template <reduction R = reduction::mean, Expression X, Expression Y, class W = none_t>
auto binary_cross_entropy(const X& input, const Y& target, const W& weight = {}) {
  using T = detail::promoted_t<X, Y>;
  static_assert(is_floating_v<T>, "tenet: binary_cross_entropy needs floating input and target");
  static_assert(R != reduction::batchmean, "tenet: reduction::batchmean is for kl_div only");
  detail::require_same_sizes(input, target, "binary_cross_entropy");
  auto x = eval(detail::cast_to<T>(input));
  const bool in_range = eval(all(make_node(prim::bitwise_and_{}, make_node(prim::ge_{}, x, scalar<T>{T(0)}),
                                           make_node(prim::le_{}, x, scalar<T>{T(1)})))).item();
  if (!in_range) throw value_error("tenet: binary_cross_entropy: all elements of input should be between 0 and 1");
  auto t = detail::cast_to<T>(target);
  const auto floor_log = scalar<T>{T(-100)};
  auto log_x = make_node(prim::maximum_{}, log(x), floor_log);
  auto log_1mx = make_node(prim::maximum_{}, log1p(neg(x)), floor_log);
  // (t - 1) log(1 - x) - t log x, as torch's kernel
  auto loss = make_node(prim::sub_{}, make_node(prim::mul_{}, make_node(prim::sub_{}, t, scalar<T>{T(1)}), log_1mx),
                        make_node(prim::mul_{}, t, log_x));
  if constexpr (detail::is_none<W>)
    return detail::reduce_loss<R>(loss);
  else
    return detail::reduce_loss<R>(loss * detail::cast_to<T>(weight));
}

/// binary_cross_entropy_with_logits<R>(input, target, weight = none, pos_weight = none), as torch:
/// (1 - t) x - (1 + (pos_weight - 1) t) logsigmoid(x), times weight; logsigmoid is the stable
/// min(x, 0) - log1p(exp(-|x|)).
template <reduction R = reduction::mean, Expression X, Expression Y, class W = none_t, class PW = none_t>
auto binary_cross_entropy_with_logits(const X& input, const Y& target, const W& weight = {},
                                      const PW& pos_weight = {}) {
  using T = detail::promoted_t<X, Y>;
  static_assert(is_floating_v<T>, "tenet: binary_cross_entropy_with_logits needs floating input and target");
  static_assert(R != reduction::batchmean, "tenet: reduction::batchmean is for kl_div only");
  detail::require_same_sizes(input, target, "binary_cross_entropy_with_logits");
  auto x = detail::share(detail::cast_to<T>(input));
  auto t = detail::share(detail::cast_to<T>(target));
  auto one_minus_t_x = make_node(prim::mul_{}, make_node(prim::sub_{}, scalar<T>{T(1)}, t), x);
  auto loss = [&] {
    if constexpr (detail::is_none<PW>) {
      return make_node(prim::sub_{}, one_minus_t_x, logsigmoid(x));
    } else {
      auto log_weight = make_node(prim::add_{}, scalar<T>{T(1)},
                                  make_node(prim::mul_{}, detail::cast_to<T>(pos_weight) - scalar<T>{T(1)}, t));
      return make_node(prim::sub_{}, one_minus_t_x, make_node(prim::mul_{}, log_weight, logsigmoid(x)));
    }
  }();
  if constexpr (detail::is_none<W>)
    return detail::reduce_loss<R>(loss);
  else
    return detail::reduce_loss<R>(loss * detail::cast_to<T>(weight));
}

/// cosine_similarity<Dim = 1>(x1, x2, eps = 1e-8), as torch 2.x: the operands broadcast, each is
/// divided by its own 2-norm along Dim (clamped below at eps), and the products are summed along Dim.
template <std::int64_t Dim = 1, Expression X1, Expression X2>
auto cosine_similarity(const X1& x1, const X2& x2, double eps = 1e-8) {
  using T = detail::floating_t<detail::promoted_t<X1, X2>>;
  using SB = detail::broadcast_all_t<shape_of<X1>, shape_of<X2>>;
  constexpr std::size_t R = SB::rank;
  const auto bs = detail::broadcast_sizes<R>(x1.sizes(), x2.sizes());
  auto a = eval(detail::cast_to<T>(x1)).template expand_as_shape<SB>(bs);
  auto b = eval(detail::cast_to<T>(x2)).template expand_as_shape<SB>(bs);
  auto e = detail::cast_to<T>(eps);
  // the norms' gradient is 0 at a zero vector (as torch's vector_norm), not 0 * inf = NaN
  auto na = detail::share(maximum(detail::sqrt_masked_at_zero(sum<Dim>(a * a, keepdim)), e));
  auto nb = detail::share(maximum(detail::sqrt_masked_at_zero(sum<Dim>(b * b, keepdim)), e));
  return sum<Dim>((a / na) * (b / nb));
}

/// pairwise_distance(x1, x2, p = 2, eps = 1e-6): the p-norm of x1 - x2 + eps over the last dim, as
/// torch (p is a run-time value, so this evaluates now, like tenet::norm). With keepdim the last
/// dim stays with extent 1.
template <Expression X1, Expression X2>
auto pairwise_distance(const X1& x1, const X2& x2, double p = 2.0, double eps = 1e-6) {
  using T = detail::floating_t<detail::promoted_t<X1, X2>>;
  return norm<-1>(detail::cast_to<T>(x1) - detail::cast_to<T>(x2) + detail::cast_to<T>(eps), p);
}
template <Expression X1, Expression X2>
auto pairwise_distance(const X1& x1, const X2& x2, keepdim_t, double p = 2.0, double eps = 1e-6) {
  return pairwise_distance(x1, x2, p, eps).template unsqueeze<-1>();
}

}  // namespace tenet
