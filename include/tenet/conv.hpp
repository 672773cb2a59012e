#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Convolution, pooling, interpolation and padding (torch.nn.functional's conv1d, conv2d,
// conv_transpose2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d, interpolate, pad) and flip/roll,
// as decompositions into the movement prims (pad_, unfold_, slice_, reshape_, permute_, expand_),
// reductions and matmul:
//   conv2d            pad_ -> two unfold_ (window view) -> slice_ (dilation) -> reshape_/permute_
//                     (im2col) -> matmul_ with the weight -> permute_/reshape_; the CPU runs it
//                     natively (im2col + GEMM, backend/cpu/conv.hpp)
//   conv_transpose2d  pad_ with interior padding (stride) and crop -> conv2d with the weight
//                     flipped (slice_ step -1) and its channels swapped
//   max/avg_pool2d    pad_ (-inf / 0) -> unfold_ windows -> amax / sum (/ divisor)
//   adaptive_avg_pool2d, interpolate   per dim (columns, then rows): gather_ the source rows
//                     (index_select), then sum the masked windows / mix the two neighbours
//   pad               constant: one pad_; reflect/replicate: slices (flipped / expanded) put side by
//                     side with pad_ + add
//   flip, roll        slice_ with step -1; two slices put side by side
// Sizes and options are run-time values, so results have run-time extents (dyn) except where
// noted. Inputs are batched: conv1d (N, C, L), the 2-D ops (N, C, H, W).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <tenet/error.hpp>
#include <tenet/indexing.hpp>  // index_select
#include <tenet/ops.hpp>
#include <tenet/tensor.hpp>

#include <tenet/backend/cpu/conv.hpp>
#include <tenet/backend/evaluate.hpp>
#include <tenet/prims/movement.hpp>

namespace tenet {

/// N integers, from one value (repeated) or N values: `.stride = 2`, `.stride = {2, 1}`.
template <std::size_t N>
struct ints {
  std::array<std::int64_t, N> v{};
  constexpr ints() = default;
  constexpr ints(std::int64_t x) { v.fill(x); }  // NOLINT: implicit on purpose
  template <std::integral... I>
    requires(sizeof...(I) == N && N > 1)
  constexpr ints(I... i) : v{static_cast<std::int64_t>(i)...} {}  // NOLINT
  constexpr std::int64_t operator[](std::size_t i) const { return v[i]; }
};
/// Two scale factors, from one value or two.
struct scales2 {
  std::array<double, 2> v{1.0, 1.0};
  constexpr scales2(double x) : v{x, x} {}  // NOLINT
  constexpr scales2(double a, double b) : v{a, b} {}
};

/// conv padding as a string in torch: "same" (output size = input size, stride 1) or "valid" (none).
enum class conv_padding { same, valid };
template <std::size_t N>
struct conv_pad : ints<N> {
  std::optional<conv_padding> mode;
  using ints<N>::ints;
  constexpr conv_pad() = default;
  constexpr conv_pad(conv_padding m) : mode(m) {}  // NOLINT
};

template <std::size_t N>
struct conv_options {
  ints<N> stride = 1;
  conv_pad<N> padding = 0;
  ints<N> dilation = 1;
  std::int64_t groups = 1;
};
using conv1d_options = conv_options<1>;
using conv2d_options = conv_options<2>;
struct conv_transpose2d_options {
  ints<2> stride = 1;
  ints<2> padding = 0;
  ints<2> output_padding = 0;
  std::int64_t groups = 1;
  ints<2> dilation = 1;
};
struct max_pool2d_options {
  ints<2> stride = 0;  // 0: the kernel size (torch's default)
  ints<2> padding = 0;
  ints<2> dilation = 1;
  bool ceil_mode = false;
};
struct avg_pool2d_options {
  ints<2> stride = 0;  // 0: the kernel size (torch's default)
  ints<2> padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<std::int64_t> divisor_override{};
};
enum class interpolate_mode { nearest, bilinear };
struct interpolate_options {
  ints<2> size = 0;             // give size (positive) or scale_factor (positive), not both
  scales2 scale_factor = 0.0;
  interpolate_mode mode = interpolate_mode::nearest;
  std::optional<bool> align_corners{};  // bilinear only; default false
};
enum class pad_mode { constant, reflect, replicate };

namespace detail {

inline std::string pair_text(std::int64_t a, std::int64_t b) {
  return "(" + std::to_string(a) + ", " + std::to_string(b) + ")";
}

template <class T>
constexpr void check_conv_dtype(const char* what) {
  (void)what;
  static_assert(is_floating_v<T>, "tenet: convolution, average pooling and interpolation need a floating dtype (as "
                                  "torch on the CPU); convert with .to<float>()");
}

/// Output extent of a window op: floor/ceil((n + pads - d*(k-1) - 1) / s) + 1.
inline std::int64_t window_count(std::int64_t n, std::int64_t pads, std::int64_t k, std::int64_t s, std::int64_t d,
                                 const char* what, const std::string& sizes) {
  const std::int64_t span = d * (k - 1) + 1;
  if (n + pads < span)
    throw shape_error(std::string("tenet: ") + what + ": kernel of extent " + std::to_string(span) +
                      " (size " + std::to_string(k) + ", dilation " + std::to_string(d) +
                      ") is larger than the padded input extent " + std::to_string(n + pads) + " (input sizes " +
                      sizes + ")");
  return (n + pads - span) / s + 1;
}

inline void check_positive(const char* what, const char* name, std::int64_t v) {
  if (v <= 0)
    throw value_error(std::string("tenet: ") + what + ": " + name + " must be positive, got " + std::to_string(v));
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// conv2d: the composite (the CPU runs it natively; decompose() is the reference)
namespace aten {
struct conv2d {
  static constexpr bool is_prim = false;
  static constexpr std::string_view name = "conv2d";
  std::array<std::int64_t, 2> stride{1, 1}, dilation{1, 1}, pad_low{0, 0}, pad_high{0, 0};
  std::int64_t groups = 1;

  template <class X, class W>
  using result_type = value_type_of<X>;
  template <class X, class W>
  using result_shape = shape<shape_of<X>::template extent<0>, shape_of<W>::template extent<0>, dyn, dyn>;

  /// The geometry for input sizes xs and weight sizes ws; throws shape_error when they do not fit.
  detail::cpu::conv2d_geometry geometry(const sizes_t<4>& xs, const sizes_t<4>& ws) const {
    detail::cpu::conv2d_geometry g;
    g.N = xs[0], g.C = xs[1], g.H = xs[2], g.W = xs[3];
    g.O = ws[0], g.kh = ws[2], g.kw = ws[3], g.groups = groups;
    g.stride_h = stride[0], g.stride_w = stride[1], g.dil_h = dilation[0], g.dil_w = dilation[1];
    g.pad_top = pad_low[0], g.pad_left = pad_low[1], g.pad_bottom = pad_high[0], g.pad_right = pad_high[1];
    const std::string sizes = detail::sizes_text(xs) + ", weight " + detail::sizes_text(ws);
    if (g.C % groups != 0 || g.O % groups != 0)
      throw shape_error("tenet: conv2d: groups = " + std::to_string(groups) + " must divide the input channels (" +
                        std::to_string(g.C) + ") and the output channels (" + std::to_string(g.O) + "); input " +
                        sizes);
    if (ws[1] * groups != g.C)
      throw shape_error("tenet: conv2d: the input has " + std::to_string(g.C) + " channels, the weight expects " +
                        std::to_string(ws[1] * groups) + " (weight dim 1 = " + std::to_string(ws[1]) + " times groups " +
                        std::to_string(groups) + "); input " + sizes);
    g.oh = detail::window_count(g.H, g.pad_top + g.pad_bottom, g.kh, g.stride_h, g.dil_h, "conv2d", sizes);
    g.ow = detail::window_count(g.W, g.pad_left + g.pad_right, g.kw, g.stride_w, g.dil_w, "conv2d", sizes);
    return g;
  }
  template <class X, class W>
  sizes_t<4> sizes(const X& x, const W& w) const {
    const auto g = geometry(x.sizes(), w.sizes());
    return {g.N, g.O, g.oh, g.ow};
  }

  /// The reference: pad, window view, im2col as reshape, matmul with the weight.
  template <class X, class W>
  auto decompose(const X& x, const W& w) const {
    const auto g = geometry(x.sizes(), w.sizes());
    const std::int64_t Cg = g.C / g.groups, Og = g.O / g.groups;
    const std::int64_t keh = g.dil_h * (g.kh - 1) + 1, kew = g.dil_w * (g.kw - 1) + 1;
    prim::pad_<4> pad{{0, 0, g.pad_top, g.pad_left}, {0, 0, g.pad_bottom, g.pad_right}, {0, 0, 0, 0}, 0.0};
    prim::unfold_<2> uh;
    uh.size = keh, uh.step = g.stride_h;
    prim::unfold_<3> uw;
    uw.size = kew, uw.step = g.stride_w;
    auto windows = make_node(uw, make_node(uh, make_node(pad, x)));  // N, C, oh, ow, keh, kew
    prim::slice_<6> dil{{0, 0, 0, 0, 0, 0}, {g.N, g.C, g.oh, g.ow, keh, kew}, {1, 1, 1, 1, g.dil_h, g.dil_w}};
    auto split = make_node(prim::reshape_<dyn_shape<7>>{{g.N, g.groups, Cg, g.oh, g.ow, g.kh, g.kw}},
                           make_node(dil, windows));
    auto cols = make_node(prim::reshape_<dyn_shape<4>>{{g.N, g.groups, g.oh * g.ow, Cg * g.kh * g.kw}},
                          make_node(prim::permute_<0, 1, 3, 4, 2, 5, 6>{}, split));  // N, g, L, K
    auto wt = make_node(prim::permute_<0, 2, 1>{},
                        make_node(prim::reshape_<dyn_shape<3>>{{g.groups, Og, Cg * g.kh * g.kw}}, w));  // g, K, Og
    auto y = make_node(prim::permute_<0, 1, 3, 2>{}, make_node(prim::matmul_{}, cols, wt));  // N, g, Og, L
    return make_node(prim::reshape_<result_shape<X, W>>{{g.N, g.O, g.oh, g.ow}}, y);
  }
};

/// conv2d's weight gradient (autograd's VJP of conv2d, below): children x (N, C, H, W) and the
/// output gradient g (N, O, oh, ow); the result has the weight's sizes. Decomposed into a
/// convolution of x (channels as the batch) with g (images as the channels); CUDA runs it as
/// im2col + one GEMM over all positions per group (backend/cuda/conv.cuh).
struct conv2d_weight {
  static constexpr bool is_prim = false;
  static constexpr std::string_view name = "conv2d_weight";
  conv2d forward;          // the convolution differentiated
  sizes_t<4> weight_sizes{};
  template <class X, class G>
  using result_type = value_type_of<X>;
  template <class X, class G>
  using result_shape = dyn_shape<4>;
  template <class X, class G>
  sizes_t<4> sizes(const X&, const G&) const {
    return weight_sizes;
  }
  /// dw = conv2d(x as (C/G, G*N, H, W), g as (O, N, oh, ow); stride dil, dilation stride, the
  /// forward's padding, groups G) = (C/G, O, kh', kw') with kh' >= kh, sliced to kh, kw and
  /// permuted to (O, C/G, kh, kw).
  template <class X, class G>
  auto decompose(const X& x, const G& g) const {
    const auto xs = x.sizes();
    const auto geo = forward.geometry(xs, weight_sizes);
    const std::int64_t groups = geo.groups, Cg = geo.C / groups;
    auto x5 = make_node(prim::reshape_<dyn_shape<5>>{{xs[0], groups, Cg, geo.H, geo.W}}, x);
    auto xt = make_node(prim::reshape_<dyn_shape<4>>{{Cg, groups * xs[0], geo.H, geo.W}},
                        make_node(prim::permute_<2, 1, 0, 3, 4>{}, x5));
    auto gt = make_node(prim::permute_<1, 0, 2, 3>{}, g);
    conv2d op;
    op.groups = groups;
    for (std::size_t i = 0; i < 2; ++i) {
      op.stride[i] = forward.dilation[i];
      op.dilation[i] = forward.stride[i];
      op.pad_low[i] = forward.pad_low[i];
      op.pad_high[i] = forward.pad_high[i];
    }
    auto full = make_node(op, xt, gt);  // (C/G, O, kh', kw')
    auto cut = make_node(prim::slice_<4>{{0, 0, 0, 0}, {Cg, geo.O, geo.kh, geo.kw}, {1, 1, 1, 1}}, full);
    return make_node(prim::permute_<1, 0, 2, 3>{}, cut);
  }
};
}  // namespace aten

namespace detail {
template <class X, class W>
void check_conv_args(const char* what) {
  static_assert(std::is_same_v<value_type_of<X>, value_type_of<W>>,
                "tenet: the input and the weight of a convolution must have the same dtype (as torch)");
  check_conv_dtype<value_type_of<X>>(what);
}

/// Adds bias (O) to y (N, O, ...) over dim 1.
template <std::size_t R, class Y, class B>
auto add_channel_bias(const Y& y, const B& b, std::int64_t channels, const char* what) {
  static_assert(rank_of<B> == 1, "tenet: a convolution bias is 1-D (one value per output channel)");
  static_assert(std::is_same_v<value_type_of<B>, value_type_of<Y>>,
                "tenet: the bias of a convolution must have the input's dtype (as torch)");
  if (b.sizes()[0] != channels)
    throw shape_error(std::string("tenet: ") + what + ": the bias has " + std::to_string(b.sizes()[0]) +
                      " values, the output has " + std::to_string(channels) + " channels");
  sizes_t<R - 1> bs{};
  bs.fill(1);
  bs[0] = channels;
  return make_node(prim::add_{}, y, make_node(prim::reshape_<dyn_shape<R - 1>>{bs}, b));
}

template <std::size_t N>
aten::conv2d conv2d_op(const std::array<std::int64_t, N>& kernel, const conv_options<N>& o, const char* what) {
  aten::conv2d op;
  for (std::size_t i = 0; i < N; ++i) {
    check_positive(what, "stride", o.stride[i]);
    check_positive(what, "dilation", o.dilation[i]);
  }
  check_positive(what, "groups", o.groups);
  op.groups = o.groups;
  for (std::size_t i = 0; i < N; ++i) {
    const std::size_t j = i + 2 - N;  // conv1d uses the width
    op.stride[j] = o.stride[i];
    op.dilation[j] = o.dilation[i];
    if (o.padding.mode == conv_padding::same) {
      if (o.stride[i] != 1)
        throw value_error(std::string("tenet: ") + what + ": padding 'same' needs stride 1 (as torch), got " +
                          std::to_string(o.stride[i]));
      const std::int64_t total = o.dilation[i] * (kernel[i] - 1);
      op.pad_low[j] = total / 2;
      op.pad_high[j] = total - total / 2;
    } else if (!o.padding.mode) {
      if (o.padding[i] < 0)
        throw value_error(std::string("tenet: ") + what + ": negative padding " + std::to_string(o.padding[i]) +
                          " is not supported");
      op.pad_low[j] = op.pad_high[j] = o.padding[i];
    }
  }
  return op;
}
}  // namespace detail

/// conv2d(x, w[, bias], {.stride, .padding (ints or conv_padding::same / valid), .dilation, .groups}):
/// torch.nn.functional.conv2d for x (N, C, H, W), w (O, C/groups, kh, kw), bias (O).
template <Expression X, Expression W>
auto conv2d(const X& x, const W& w, const conv2d_options& o = {}) {
  static_assert(rank_of<X> == 4 && rank_of<W> == 4, "tenet: conv2d needs x (N, C, H, W) and w (O, C/groups, kh, kw)");
  detail::check_conv_args<X, W>("conv2d");
  const auto ws = w.sizes();
  auto n = make_node(detail::conv2d_op<2>({ws[2], ws[3]}, o, "conv2d"), x, w);
  (void)n.sizes();  // shape errors now, with the sizes in the message
  return n;
}
template <Expression X, Expression W, Expression B>
auto conv2d(const X& x, const W& w, const B& bias, const conv2d_options& o = {}) {
  return detail::add_channel_bias<4>(conv2d(x, w, o), bias, w.sizes()[0], "conv2d");
}

/// conv1d(x, w[, bias], options): x (N, C, L), w (O, C/groups, k); a conv2d over a height of 1.
template <Expression X, Expression W>
auto conv1d(const X& x, const W& w, const conv1d_options& o = {}) {
  static_assert(rank_of<X> == 3 && rank_of<W> == 3, "tenet: conv1d needs x (N, C, L) and w (O, C/groups, k)");
  detail::check_conv_args<X, W>("conv1d");
  const auto xs = x.sizes();
  const auto ws = w.sizes();
  auto x4 = make_node(prim::reshape_<dyn_shape<4>>{{xs[0], xs[1], 1, xs[2]}}, x);
  auto w4 = make_node(prim::reshape_<dyn_shape<4>>{{ws[0], ws[1], 1, ws[2]}}, w);
  auto y = make_node(detail::conv2d_op<1>({ws[2]}, o, "conv1d"), x4, w4);
  const auto ys = y.sizes();
  return make_node(prim::reshape_<dyn_shape<3>>{{ys[0], ys[1], ys[3]}}, y);
}
template <Expression X, Expression W, Expression B>
auto conv1d(const X& x, const W& w, const B& bias, const conv1d_options& o = {}) {
  return detail::add_channel_bias<3>(conv1d(x, w, o), bias, w.sizes()[0], "conv1d");
}

/// conv_transpose2d(x, w[, bias], {.stride, .padding, .output_padding, .groups, .dilation}):
/// x (N, C_in, H, W), w (C_in, C_out/groups, kh, kw). The input is spread by interior padding
/// (stride - 1 zeros between elements), padded by dilation*(k-1) - padding (a crop where negative)
/// plus output_padding at the end, and convolved (stride 1) with the flipped, channel-swapped weight.
template <Expression X, Expression W>
auto conv_transpose2d(const X& x, const W& w, const conv_transpose2d_options& o = {}) {
  static_assert(rank_of<X> == 4 && rank_of<W> == 4,
                "tenet: conv_transpose2d needs x (N, C_in, H, W) and w (C_in, C_out/groups, kh, kw)");
  detail::check_conv_args<X, W>("conv_transpose2d");
  const char* what = "conv_transpose2d";
  const auto xs = x.sizes();
  const auto ws = w.sizes();
  const std::int64_t g = o.groups;
  detail::check_positive(what, "groups", g);
  for (std::size_t i = 0; i < 2; ++i) {
    detail::check_positive(what, "stride", o.stride[i]);
    detail::check_positive(what, "dilation", o.dilation[i]);
    if (o.padding[i] < 0 || o.output_padding[i] < 0)
      throw value_error("tenet: conv_transpose2d: negative padding or output_padding is not supported");
    if (o.output_padding[i] >= o.stride[i] && o.output_padding[i] >= o.dilation[i])
      throw value_error("tenet: conv_transpose2d: output_padding " + std::to_string(o.output_padding[i]) +
                        " must be smaller than either stride " + std::to_string(o.stride[i]) + " or dilation " +
                        std::to_string(o.dilation[i]) + " (as torch)");
  }
  const std::string sizes = detail::sizes_text(xs) + ", weight " + detail::sizes_text(ws);
  if (ws[0] != xs[1])
    throw shape_error("tenet: conv_transpose2d: the input has " + std::to_string(xs[1]) +
                      " channels, the weight expects " + std::to_string(ws[0]) + " (weight dim 0); input " + sizes);
  if (xs[1] % g != 0)
    throw shape_error("tenet: conv_transpose2d: groups = " + std::to_string(g) + " must divide the input channels (" +
                      std::to_string(xs[1]) + "); input " + sizes);
  std::array<std::int64_t, 2> lo{}, hi{};
  for (std::size_t i = 0; i < 2; ++i) {
    const std::int64_t k = ws[2 + i], n = xs[2 + i];
    const std::int64_t out = (n - 1) * o.stride[i] - 2 * o.padding[i] + o.dilation[i] * (k - 1) + o.output_padding[i] + 1;
    if (out <= 0)
      throw shape_error("tenet: conv_transpose2d: the output extent would be " + std::to_string(out) +
                        " (not positive) for input " + sizes);
    lo[i] = o.dilation[i] * (k - 1) - o.padding[i];
    hi[i] = lo[i] + o.output_padding[i];
  }
  const std::int64_t cin_g = xs[1] / g, cout_g = ws[1];
  auto spread = make_node(prim::pad_<4>{{0, 0, lo[0], lo[1]}, {0, 0, hi[0], hi[1]},
                                        {0, 0, o.stride[0] - 1, o.stride[1] - 1}, 0.0},
                          x);
  auto flipped = make_node(prim::slice_<4>{{0, 0, ws[2] - 1, ws[3] - 1}, {ws[0], ws[1], -1, -1}, {1, 1, -1, -1}}, w);
  auto w5 = make_node(prim::reshape_<dyn_shape<5>>{{g, cin_g, cout_g, ws[2], ws[3]}}, flipped);
  auto wc = make_node(prim::reshape_<dyn_shape<4>>{{g * cout_g, cin_g, ws[2], ws[3]}},
                      make_node(prim::permute_<0, 2, 1, 3, 4>{}, w5));
  aten::conv2d op;
  op.groups = g;
  op.dilation = {o.dilation[0], o.dilation[1]};
  auto n = make_node(op, spread, wc);
  (void)n.sizes();
  return n;
}
template <Expression X, Expression W, Expression B>
auto conv_transpose2d(const X& x, const W& w, const B& bias, const conv_transpose2d_options& o = {}) {
  return detail::add_channel_bias<4>(conv_transpose2d(x, w, o), bias, w.sizes()[1] * o.groups, "conv_transpose2d");
}

// ---------------------------------------------------------------------------------------------
// pooling
namespace detail {
struct pool_plan {
  std::array<std::int64_t, 2> k{}, s{}, p{}, d{}, out{}, extra{};
};
/// torch's pooling output size (ceil_mode: the last window must start inside the input or the
/// left padding) and the extra high padding that makes every window fit the padded input.
inline pool_plan plan_pool(const sizes_t<4>& xs, const ints<2>& kernel, const ints<2>& stride,
                           const ints<2>& padding, const ints<2>& dilation, bool ceil_mode, const char* what) {
  pool_plan pl;
  for (std::size_t i = 0; i < 2; ++i) {
    pl.k[i] = kernel[i];
    pl.s[i] = stride[i] == 0 ? kernel[i] : stride[i];
    pl.p[i] = padding[i];
    pl.d[i] = dilation[i];
    check_positive(what, "kernel size", pl.k[i]);
    check_positive(what, "stride", pl.s[i]);
    check_positive(what, "dilation", pl.d[i]);
    if (pl.p[i] < 0 || pl.p[i] > pl.k[i] / 2)
      throw value_error(std::string("tenet: ") + what + ": padding " + std::to_string(pl.p[i]) +
                        " must be in [0, kernel size / 2] = [0, " + std::to_string(pl.k[i] / 2) + "] (as torch)");
    const std::int64_t n = xs[2 + i];
    const std::int64_t span = pl.d[i] * (pl.k[i] - 1) + 1;
    const std::int64_t num = n + 2 * pl.p[i] - span;
    if (num < 0)
      throw shape_error(std::string("tenet: ") + what + ": kernel of extent " + std::to_string(span) +
                        " is larger than the padded input extent " + std::to_string(n + 2 * pl.p[i]) +
                        " (input sizes " + sizes_text(xs) + ")");
    std::int64_t out = (ceil_mode ? (num + pl.s[i] - 1) / pl.s[i] : num / pl.s[i]) + 1;
    if (ceil_mode && (out - 1) * pl.s[i] >= n + pl.p[i]) --out;
    pl.out[i] = out;
    pl.extra[i] = std::max<std::int64_t>(0, (out - 1) * pl.s[i] + span - (n + 2 * pl.p[i]));
  }
  return pl;
}
/// The windows (N, C, oh, ow, kh, kw) of x padded with `value`.
template <class X>
auto pool_windows(const X& x, const pool_plan& pl, double value) {
  const auto xs = x.sizes();
  const std::int64_t keh = pl.d[0] * (pl.k[0] - 1) + 1, kew = pl.d[1] * (pl.k[1] - 1) + 1;
  prim::unfold_<2> uh;
  uh.size = keh, uh.step = pl.s[0];
  prim::unfold_<3> uw;
  uw.size = kew, uw.step = pl.s[1];
  auto padded = make_node(
      prim::pad_<4>{{0, 0, pl.p[0], pl.p[1]}, {0, 0, pl.p[0] + pl.extra[0], pl.p[1] + pl.extra[1]}, {0, 0, 0, 0}, value},
      x);
  prim::slice_<6> pick{{0, 0, 0, 0, 0, 0}, {xs[0], xs[1], pl.out[0], pl.out[1], keh, kew}, {1, 1, 1, 1, pl.d[0], pl.d[1]}};
  return make_node(pick, make_node(uw, make_node(uh, padded)));
}
}  // namespace detail

namespace aten {
/// max_pool2d as a composite: the windows' amax (decompose) or, on the CPU, a direct loop.
struct max_pool2d {
  static constexpr bool is_prim = false;
  static constexpr std::string_view name = "max_pool2d";
  detail::pool_plan plan;
  template <class X>
  using result_type = value_type_of<X>;
  template <class X>
  using result_shape = shape<shape_of<X>::template extent<0>, shape_of<X>::template extent<1>, dyn, dyn>;
  template <class X>
  sizes_t<4> sizes(const X& x) const {
    const auto xs = x.sizes();
    return {xs[0], xs[1], plan.out[0], plan.out[1]};
  }
  template <class T>
  static constexpr double lowest() {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<double>::infinity()
                                                : static_cast<double>(std::numeric_limits<T>::lowest());
  }
  /// The reference: pad with -inf (the lowest value for integers), window view, amax.
  template <class X>
  auto decompose(const X& x) const {
    return make_node(prim::reduce_<prim::amax_kind, false, 4, 5>{},
                     detail::pool_windows(x, plan, lowest<value_type_of<X>>()));
  }
};
}  // namespace aten


/// max_pool2d(x, kernel, {.stride = kernel, .padding, .dilation, .ceil_mode}) for x (N, C, H, W);
/// NaN propagates. The CPU runs it natively (one pass per window).
template <Expression X>
auto max_pool2d(const X& x, const ints<2>& kernel, const max_pool2d_options& o = {}) {
  static_assert(rank_of<X> == 4, "tenet: max_pool2d needs x (N, C, H, W)");
  static_assert(!std::is_same_v<value_type_of<X>, bool>, "tenet: max_pool2d of bool is not supported (as torch)");
  aten::max_pool2d op;
  op.plan = detail::plan_pool(x.sizes(), kernel, o.stride, o.padding, o.dilation, o.ceil_mode, "max_pool2d");
  return make_node(op, x);
}

/// avg_pool2d(x, kernel, {.stride = kernel, .padding, .ceil_mode, .count_include_pad = true, .divisor_override}).
template <Expression X>
auto avg_pool2d(const X& x, const ints<2>& kernel, const avg_pool2d_options& o = {}) {
  static_assert(rank_of<X> == 4, "tenet: avg_pool2d needs x (N, C, H, W)");
  using T = value_type_of<X>;
  detail::check_conv_dtype<T>("avg_pool2d");
  const auto xs = x.sizes();
  const auto pl = detail::plan_pool(xs, kernel, o.stride, o.padding, 1, o.ceil_mode, "avg_pool2d");
  if (o.divisor_override && *o.divisor_override == 0)
    throw value_error("tenet: avg_pool2d: divisor_override must not be zero");
  // the divisor of each output position (torch's rule: windows clipped to the padded input, then
  // to the input unless count_include_pad)
  Tensor<T, dyn_shape<2>> divisor(sizes_t<2>{pl.out[0], pl.out[1]}, tenet::cpu);  // host-written, then moved
  T* dv = divisor.data();
  for (std::int64_t i = 0; i < pl.out[0]; ++i) {
    for (std::int64_t j = 0; j < pl.out[1]; ++j) {
      std::int64_t h0 = i * pl.s[0] - pl.p[0], w0 = j * pl.s[1] - pl.p[1];
      std::int64_t h1 = std::min(h0 + pl.k[0], xs[2] + pl.p[0]), w1 = std::min(w0 + pl.k[1], xs[3] + pl.p[1]);
      std::int64_t count = (h1 - h0) * (w1 - w0);
      h0 = std::max<std::int64_t>(h0, 0), w0 = std::max<std::int64_t>(w0, 0);
      h1 = std::min(h1, xs[2]), w1 = std::min(w1, xs[3]);
      if (!o.count_include_pad) count = (h1 - h0) * (w1 - w0);
      if (o.divisor_override) count = *o.divisor_override;
      dv[i * pl.out[1] + j] = static_cast<T>(count);
    }
  }
  auto sums = make_node(prim::reduce_<prim::sum_kind, false, 4, 5>{}, detail::pool_windows(x, pl, 0.0));
  return make_node(prim::div_{}, sums, divisor.to(detail::expr_device(x)));
}

namespace detail {
// Resampling along one spatial dim D (2: rows, 3: columns) of x (N, C, H, W) by gathering the
// rows each output reads (index_select), so an output sees only its own window or stencil: a NaN
// or inf in x reaches exactly the outputs (and its gradient comes from exactly the outputs) whose
// windows hold it, as in torch's kernels, where a product with a dense averaging or interpolation
// matrix spreads it to whole rows as 0 * inf = NaN. Index and weight tensors are built on the host
// and copied to x's device (`to` returns a tensor already there as it is).

/// A host vector as a 1-D tensor on device d.
template <class T>
Tensor<T, dyn_shape<1>> vector_on(const std::vector<T>& v, device d) {
  Tensor<T, dyn_shape<1>> t(sizes_t<1>{static_cast<std::int64_t>(v.size())}, tenet::cpu);  // written here, on the host
  std::copy(v.begin(), v.end(), t.data());
  return t.to(d);
}
/// v (out values) as a 4-D tensor of sizes 1 but `out` at dim D, on device d: per-output weights
/// that broadcast over the other dims.
template <std::size_t D, class T>
Tensor<T, dyn_shape<4>> weights_along(const std::vector<T>& v, device d) {
  sizes_t<4> s{1, 1, 1, 1};
  s[D] = static_cast<std::int64_t>(v.size());
  Tensor<T, dyn_shape<4>> t(s, tenet::cpu);  // written here, on the host
  std::copy(v.begin(), v.end(), t.data());
  return t.to(d);
}
/// Output i along D is x's row idx[i] (nearest interpolation).
template <std::size_t D, class X>
auto pick_along(const X& x, const std::vector<std::int64_t>& idx) {
  return index_select<static_cast<std::int64_t>(D)>(x, vector_on(idx, expr_device(x)));
}
/// Output i along D: x's row i0[i] when `copy` (nearest), else w0[i] x[i0[i]] + w1[i] x[i1[i]] (linear
/// interpolation; both terms are read even with a weight of 0, as torch's kernel). One expression
/// type for both modes (the mode is a run-time option): where() picks, and does not pass the branch
/// it does not take on (nor its gradient).
template <std::size_t D, class X, class T>
auto resample_along(const X& x0, bool copy, const std::vector<std::int64_t>& i0, const std::vector<std::int64_t>& i1,
                    const std::vector<T>& w0, const std::vector<T>& w1) {
  const device d = expr_device(x0);
  auto x = share(x0);
  auto a = share(pick_along<D>(x, i0));
  return make_node(prim::where_{}, scalar<bool>{copy}, a,
                   weights_along<D>(w0, d) * a + weights_along<D>(w1, d) * pick_along<D>(x, i1));
}
/// Output i along D is the mean of x's rows [start[i], stop[i]) (adaptive average pooling): the
/// windows are gathered to the longest one's length k (shorter ones repeat their first row, masked
/// out), reshaped to (..., out, k, ...), summed over k and divided by each window's length.
template <std::size_t D, class X>
auto average_windows_along(const X& x, const std::vector<std::int64_t>& start, const std::vector<std::int64_t>& stop) {
  using T = value_type_of<X>;
  const device dev = expr_device(x);
  const std::int64_t out = static_cast<std::int64_t>(start.size());
  std::int64_t k = 1;
  for (std::int64_t i = 0; i < out; ++i) k = std::max(k, stop[i] - start[i]);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(out * k));
  std::vector<bool> inside(static_cast<std::size_t>(out * k));
  std::vector<T> count(static_cast<std::size_t>(out));
  for (std::int64_t i = 0; i < out; ++i) {
    for (std::int64_t j = 0; j < k; ++j) {
      const bool in = j < stop[i] - start[i];
      idx[static_cast<std::size_t>(i * k + j)] = in ? start[i] + j : start[i];
      inside[static_cast<std::size_t>(i * k + j)] = in;
    }
    count[static_cast<std::size_t>(i)] = static_cast<T>(stop[i] - start[i]);
  }
  const auto xs = x.sizes();
  sizes_t<5> split{}, mask_sizes{1, 1, 1, 1, 1};
  for (std::size_t i = 0, j = 0; i < 4; ++i, ++j) {
    if (i == D) {
      split[j] = out, split[j + 1] = k;
      mask_sizes[j] = out, mask_sizes[j + 1] = k;
      ++j;
    } else {
      split[j] = xs[i];
    }
  }
  Tensor<bool, dyn_shape<5>> mask(mask_sizes, tenet::cpu);  // written on the host, then moved
  std::copy(inside.begin(), inside.end(), mask.data());
  auto windows = make_node(prim::reshape_<dyn_shape<5>>{split}, pick_along<D>(x, idx));
  auto sums = make_node(prim::reduce_<prim::sum_kind, false, static_cast<std::int64_t>(D + 1)>{},
                        make_node(prim::where_{}, mask.to(dev), windows, scalar<T>{T(0)}));
  return make_node(prim::div_{}, sums, weights_along<D>(count, dev));
}
}  // namespace detail

/// adaptive_avg_pool2d(x, output_size): output cell i averages input rows
/// [floor(i H / oh), ceil((i + 1) H / oh)) (likewise for columns), any oh, ow. Each output reads
/// only its window (a NaN or inf stays in the outputs whose windows hold it, as torch).
template <Expression X>
auto adaptive_avg_pool2d(const X& x, const ints<2>& output_size) {
  static_assert(rank_of<X> == 4, "tenet: adaptive_avg_pool2d needs x (N, C, H, W)");
  using T = value_type_of<X>;
  detail::check_conv_dtype<T>("adaptive_avg_pool2d");
  const auto xs = x.sizes();
  auto windows = [&](std::int64_t n, std::int64_t out) {
    if (out < 0) throw value_error("tenet: adaptive_avg_pool2d: negative output size " + std::to_string(out));
    if (n == 0 && out > 0)
      throw shape_error("tenet: adaptive_avg_pool2d: cannot pool an empty extent (input sizes " +
                        detail::sizes_text(xs) + ")");
    std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> w;
    for (std::int64_t i = 0; i < out; ++i) {
      w.first.push_back((i * n) / out);
      w.second.push_back(((i + 1) * n + out - 1) / out);
    }
    return w;
  };
  const auto [r0, r1] = windows(xs[2], output_size[0]);
  const auto [c0, c1] = windows(xs[3], output_size[1]);
  return detail::average_windows_along<2>(detail::average_windows_along<3>(x, c0, c1), r0, r1);
}

/// interpolate(x, {.size | .scale_factor, .mode = nearest | bilinear, .align_corners}) for x (N, C, H, W),
/// as torch.nn.functional.interpolate (recompute_scale_factor = None): nearest gathers the source
/// rows and columns, bilinear mixes the two neighbours along the columns, then along the rows, with
/// torch's source coordinates and weights (a dim whose extent does not change is copied). An output
/// reads only its own source elements (a NaN or inf reaches the outputs whose stencil holds it, as
/// torch, including those that weigh it by 0).
template <Expression X>
auto interpolate(const X& x, const interpolate_options& o) {
  static_assert(rank_of<X> == 4, "tenet: interpolate needs x (N, C, H, W)");
  using T = value_type_of<X>;
  detail::check_conv_dtype<T>("interpolate");
  const bool by_size = o.size[0] != 0 || o.size[1] != 0;
  const bool by_scale = o.scale_factor.v[0] != 0.0 || o.scale_factor.v[1] != 0.0;
  if (by_size == by_scale)
    throw value_error("tenet: interpolate: give exactly one of size and scale_factor");
  if (by_scale && !(o.scale_factor.v[0] > 0.0 && o.scale_factor.v[1] > 0.0))
    throw value_error("tenet: interpolate: scale factors must be positive");
  const bool nearest = o.mode == interpolate_mode::nearest;
  if (nearest && o.align_corners)
    throw value_error("tenet: interpolate: align_corners can only be set with mode bilinear (as torch)");
  const bool align = o.align_corners.value_or(false);
  const auto xs = x.sizes();
  // the source positions of one dim: nearest: i0 (w0 = 1); bilinear: i0, i1 with weights w0, w1;
  // a bilinear dim whose extent does not change is copied (torch reads no neighbour there)
  struct stencil {
    bool copy = false;
    std::vector<std::int64_t> i0, i1;
    std::vector<T> w0, w1;
  };
  auto plan = [&](std::size_t dim) {  // (nearest: i1 = i0 and weights 1, 0, read by no output)
    const std::int64_t n = xs[2 + dim];
    std::int64_t out;
    if (by_size)
      out = o.size[dim];
    else
      out = static_cast<std::int64_t>(std::floor(static_cast<double>(n) * o.scale_factor.v[dim]));
    if (out <= 0 || n <= 0)
      throw shape_error("tenet: interpolate: input and output sizes must be positive, got input " +
                        detail::sizes_text(xs) + " and output extent " + std::to_string(out) + " for dim " +
                        std::to_string(2 + dim));
    stencil st;
    st.copy = nearest || out == n;
    // torch computes the source coordinate in float (its accumulate type for float and half)
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const A scale = by_scale ? static_cast<A>(1.0 / o.scale_factor.v[dim])
                        : static_cast<A>(static_cast<A>(n) / static_cast<A>(out));
    for (std::int64_t i = 0; i < out; ++i) {
      if (st.copy) {
        const auto i0 = nearest ? std::min(static_cast<std::int64_t>(std::floor(static_cast<A>(i) * scale)), n - 1) : i;
        st.i0.push_back(i0);
        st.i1.push_back(i0);
        st.w0.push_back(T(1));
        st.w1.push_back(T(0));
      } else {
        A src;
        if (align)
          src = out > 1 ? static_cast<A>(i) * (static_cast<A>(n - 1) / static_cast<A>(out - 1)) : A(0);
        else
          src = std::max(A(0), (static_cast<A>(i) + A(0.5)) * scale - A(0.5));
        const auto i0 = std::min(static_cast<std::int64_t>(src), n - 1);
        const A l1 = std::min(std::max(src - static_cast<A>(i0), A(0)), A(1));
        st.i0.push_back(i0);
        st.i1.push_back(std::min(i0 + 1, n - 1));
        st.w0.push_back(static_cast<T>(A(1) - l1));
        st.w1.push_back(static_cast<T>(l1));
      }
    }
    return st;
  };
  const stencil rows = plan(0), cols = plan(1);
  return detail::resample_along<2>(detail::resample_along<3>(x, cols.copy, cols.i0, cols.i1, cols.w0, cols.w1), rows.copy,
                                   rows.i0, rows.i1, rows.w0, rows.w1);
}
// ---------------------------------------------------------------------------------------------
// flip, roll, pad
namespace detail {
/// The pieces side by side along dim D (same extents elsewhere): each piece padded with zeros to
/// the full length at its offset, then added (x + 0 is x; a -0.0 becomes +0.0).
template <std::size_t D, class P>
auto place_piece(const P& piece, std::int64_t at, std::int64_t total) {
  prim::pad_<rank_of<P>> p{};
  p.low[D] = at;
  p.high[D] = total - at - piece.sizes()[D];
  return make_node(p, piece);
}
template <std::size_t D, class A, class B>
auto cat_by_padding(const A& a, const B& b) {
  const std::int64_t la = a.sizes()[D], lb = b.sizes()[D];
  return make_node(prim::add_{}, place_piece<D>(a, 0, la + lb), place_piece<D>(b, la, la + lb));
}
template <std::size_t D, class A, class B, class C>
auto cat_by_padding(const A& a, const B& b, const C& c) {
  const std::int64_t la = a.sizes()[D], lb = b.sizes()[D], t = la + lb + c.sizes()[D];
  return make_node(prim::add_{},
                   make_node(prim::add_{}, place_piece<D>(a, 0, t), place_piece<D>(b, la, t)),
                   place_piece<D>(c, la + lb, t));
}

/// x[start : stop : step] along dim D (other dims whole), in slice_'s exact convention.
template <std::size_t D, class X>
auto slice_dim(const X& x, std::int64_t start, std::int64_t stop, std::int64_t step) {
  constexpr std::size_t R = rank_of<X>;
  const auto s = x.sizes();
  prim::slice_<R> op{};
  for (std::size_t d = 0; d < R; ++d) op.start[d] = 0, op.stop[d] = s[d], op.step[d] = 1;
  op.start[D] = start, op.stop[D] = stop, op.step[D] = step;
  return make_node(op, x);
}

template <std::size_t D, class X>
auto roll_dim(const X& x0, std::int64_t shift) {
  auto x = share(x0);
  const std::int64_t n = x.sizes()[D];
  const std::int64_t s = n == 0 ? 0 : ((shift % n) + n) % n;
  return cat_by_padding<D>(slice_dim<D>(x, n - s, n, 1), slice_dim<D>(x, 0, n - s, 1));
}
template <std::size_t I, std::int64_t... Dims, class X, std::size_t K>
auto roll_dims(const X& x, const std::array<std::int64_t, K>& shifts) {
  if constexpr (I == K) {
    return x;
  } else {
    constexpr std::array<std::int64_t, K> dims{Dims...};
    constexpr std::size_t d = static_cast<std::size_t>(dims[I] < 0 ? dims[I] + static_cast<std::int64_t>(rank_of<X>) : dims[I]);
    return roll_dims<I + 1, Dims...>(roll_dim<d>(x, shifts[I]), shifts);
  }
}
template <pad_mode M, std::size_t D, class X>
auto pad_dim(const X& x0, std::int64_t lo, std::int64_t hi) {
  auto x = share(x0);
  const auto s = x.sizes();
  const std::int64_t n = s[D];
  if (lo < 0 || hi < 0)
    throw value_error("tenet: pad: negative padding is supported in mode constant only, got (" + std::to_string(lo) +
                      ", " + std::to_string(hi) + ")");
  if constexpr (M == pad_mode::reflect) {
    if (lo >= n || hi >= n)
      throw value_error("tenet: pad: reflect padding (" + std::to_string(lo) + ", " + std::to_string(hi) +
                        ") must be smaller than the input extent " + std::to_string(n) + " of dim " +
                        std::to_string(D) + " (input sizes " + sizes_text(s) + ")");
    return cat_by_padding<D>(slice_dim<D>(x, lo, 0, -1), x, slice_dim<D>(x, n - 2, n - 2 - hi, -1));
  } else {
    if (n == 0 && (lo > 0 || hi > 0))
      throw value_error("tenet: pad: replicate padding of an empty dim " + std::to_string(D) + " (input sizes " +
                        sizes_text(s) + ")");
    auto edge = [&](std::int64_t at, std::int64_t len) {
      auto t = s;
      t[D] = len;
      return make_node(prim::expand_<dyn_shape<rank_of<X>>>{t}, slice_dim<D>(x, at, n == 0 ? 0 : at + 1, 1));
    };
    return cat_by_padding<D>(edge(0, lo), x, edge(n == 0 ? 0 : n - 1, hi));
  }
}
template <pad_mode M, std::size_t J, std::size_t K, class X>
auto pad_dims(const X& x, const std::int64_t (&pads)[2 * K]) {
  if constexpr (J == K) {
    return x;
  } else {
    constexpr std::size_t D = rank_of<X> - 1 - J;  // pairs start at the last dim
    return pad_dims<M, J + 1, K>(pad_dim<M, D>(x, pads[2 * J], pads[2 * J + 1]), pads);
  }
}
}  // namespace detail

/// flip<dims...>(x): torch.flip, as one slice_ with step -1 on those dims.
template <std::int64_t... Dims, Expression X>
auto flip(const X& x) {
  constexpr std::size_t R = rank_of<X>;
  constexpr auto dims = detail::reduce_dims<shape_of<X>, Dims...>::mask;  // checks the dims at compile time
  const auto s = x.sizes();
  prim::slice_<R> op{};
  for (std::size_t d = 0; d < R; ++d) {
    if (dims[d] && sizeof...(Dims) > 0)
      op.start[d] = s[d] - 1, op.stop[d] = -1, op.step[d] = -1;
    else
      op.start[d] = 0, op.stop[d] = s[d], op.step[d] = 1;
  }
  return make_node(op, x);
}

/// roll<dims...>(x, {shifts...}): torch.roll along the given dims; roll(x, shift) rolls the
/// flattened tensor.
template <std::int64_t... Dims, Expression X>
  requires(sizeof...(Dims) > 0)
auto roll(const X& x, const std::array<std::int64_t, sizeof...(Dims)>& shifts) {
  constexpr std::size_t R = rank_of<X>;
  static_assert(((Dims >= -static_cast<std::int64_t>(R) && Dims < static_cast<std::int64_t>(R)) && ...),
                "tenet: roll: dim out of range");
  return detail::roll_dims<0, Dims...>(x, shifts);
}
template <Expression X>
auto roll(const X& x, std::int64_t shift) {
  const auto s = x.sizes();
  std::int64_t n = 1;
  for (auto v : s) n *= v;
  auto flat = make_node(prim::reshape_<shape<dyn>>{{n}}, x);
  return make_node(prim::reshape_<shape_of<X>>{s}, detail::roll_dim<0>(flat, shift));
}

/// pad<mode>(x, {left, right, top, bottom, ...}, value): torch.nn.functional.pad; pairs start at the
/// last dim. constant: negative pads crop; reflect/replicate: non-negative pads, reflect's smaller
/// than the extent.
template <pad_mode M = pad_mode::constant, Expression X, std::size_t N>
auto pad(const X& x, const std::int64_t (&pads)[N], double value = 0.0) {
  constexpr std::size_t R = rank_of<X>;
  static_assert(N % 2 == 0 && N / 2 <= R, "tenet: pad needs an even number of pads, two per padded dim (from the last)");
  if constexpr (M == pad_mode::constant) {
    prim::pad_<R> op{};
    op.value = value;
    for (std::size_t j = 0; j < N / 2; ++j) op.low[R - 1 - j] = pads[2 * j], op.high[R - 1 - j] = pads[2 * j + 1];
    auto n = make_node(op, x);
    (void)n.sizes();
    return n;
  } else {
    static_assert(!std::is_same_v<value_type_of<X>, bool>, "tenet: reflect/replicate pad of bool is not supported");
    if (value != 0.0) throw value_error("tenet: pad: a value is only used by mode constant");
    return detail::pad_dims<M, 0, N / 2>(x, pads);
  }
}

}  // namespace tenet

// ---------------------------------------------------------------------------------------------
// conv2d's own rules, its entry of the rule table (prims/rule_table.hpp; autograd keeps conv2d
// whole). Its JVP is bilinear; its VJP's two gradients are convolutions, so they run
// on each backend's native conv2d (im2col + GEMM) instead of the decomposition's window views
// and scatter-adds. With x (N, C, H, W), w (O, C/G, kh, kw), g (N, O, oh, ow):
//   dx = conv2d(g spread by stride - 1 zeros and padded by dil*(k-1) - pad_low (a crop where
//        negative) / whatever reaches H at the end, w flipped with its channel dims swapped per
//        group; dilation dil, groups G)
//   dw = aten::conv2d_weight(x, g) (above: a convolution of x with g, or CUDA's own GEMMs).
namespace tenet::detail {
template <class X, class W>
inline constexpr bool runs_natively<ag::autograd_backend, aten::conv2d, X, W> = true;
}  // namespace tenet::detail

namespace tenet::detail::ag {
template <>
struct rules<aten::conv2d> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    const auto& w = std::get<1>(e.children);
    const auto xs = x.sizes(), ws = w.sizes();
    const auto geo = e.op.geometry(xs, ws);
    const auto gv = value(exact(g, e.sizes()));
    if (xs[0] == 0 || geo.O == 0 || geo.oh * geo.ow == 0 || ws[1] == 0) {
      // nothing to convolve: the decomposition's VJP gives the zeros
      backprop(detail::apply_tuple([&](const auto&... c) { return e.op.decompose(c...); }, e.children), g);
      return;
    }
    const std::int64_t groups = geo.groups, Cg = geo.C / groups, Og = geo.O / groups;
    const std::int64_t k[2] = {geo.kh, geo.kw}, st[2] = {geo.stride_h, geo.stride_w}, dil[2] = {geo.dil_h, geo.dil_w};
    // (the far-side padding follows from in, out and the low side: spread.high below)
    const std::int64_t plo[2] = {geo.pad_top, geo.pad_left};
    const std::int64_t in[2] = {geo.H, geo.W}, out[2] = {geo.oh, geo.ow};
    if (needs_grad(x)) {
      const auto wv = forward_value(w);
      prim::pad_<4> spread{};
      aten::conv2d op;
      op.groups = groups;
      for (std::size_t i = 0; i < 2; ++i) {
        spread.interior[2 + i] = st[i] - 1;
        spread.low[2 + i] = dil[i] * (k[i] - 1) - plo[i];
        spread.high[2 + i] = in[i] + plo[i] - (out[i] - 1) * st[i] - 1;
        op.dilation[i] = dil[i];
      }
      auto flipped = make_node(prim::slice_<4>{{0, 0, k[0] - 1, k[1] - 1}, {ws[0], ws[1], -1, -1}, {1, 1, -1, -1}}, wv);
      auto w5 = make_node(prim::reshape_<dyn_shape<5>>{{groups, Og, Cg, k[0], k[1]}}, flipped);
      auto wt = make_node(prim::reshape_<dyn_shape<4>>{{geo.C, Og, k[0], k[1]}},
                          make_node(prim::permute_<0, 2, 1, 3, 4>{}, w5));
      backprop(x, make_node(op, make_node(spread, gv), wt));
    }
    if (needs_grad(w)) backprop(w, make_node(aten::conv2d_weight{e.op, ws}, forward_value(x), gv));
  }
  /// The tangent: conv2d is bilinear, conv(tx, w) + conv(x, tw).
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    const auto& x = std::get<0>(e.children);
    const auto& w = std::get<1>(e.children);
    return pw::add(value(make_node(e.op, value(tangent(x, ctx)), forward_value(w))),
                   value(make_node(e.op, forward_value(x), value(tangent(w, ctx)))));
  }
};
}  // namespace tenet::detail::ag

// ---------------------------------------------------------------------------------------------
// max_pool2d's own VJP and JVP (autograd keeps it whole): each output's gradient goes to ONE
// element of its window, torch's max index: the first maximum, the last NaN when the window holds
// NaNs, the first element inside the input when the whole window is -inf. The decomposition's
// amax rule would split a tie evenly and send NaN to every element of a window holding a NaN (and
// a NaN output gradient to all of them). Computed with prims on any device: the windows' argmax,
// then a where() against the window positions (not a product, so a NaN output gradient reaches
// only the chosen element, as torch's scatter).
namespace tenet::detail {
template <class X>
inline constexpr bool runs_natively<ag::autograd_backend, aten::max_pool2d, X> = true;
}  // namespace tenet::detail

namespace tenet::detail::ag {
template <>
struct rules<aten::max_pool2d> {
  /// (N, C, oh, ow, kh kw) sizes of the flattened windows.
  template <class E>
  static sizes_t<5> flat_sizes(const E& e) {
    const auto ys = e.sizes();
    return {ys[0], ys[1], ys[2], ys[3], e.op.plan.k[0] * e.op.plan.k[1]};
  }
  /// The windows of v (pad value `pad`) as (N, C, oh, ow, kh kw).
  template <class V>
  static auto flat_windows(const V& v, const pool_plan& pl, const sizes_t<5>& fs, double pad) {
    return make_node(prim::reshape_<dyn_shape<5>>{fs}, pool_windows(v, pl, pad));
  }
  /// Whether each window position (N, C, oh, ow, kh kw) is the one the output's gradient goes to.
  template <class E>
  static auto chosen(const E& e) {
    using T = value_type_of<E>;
    const auto& pl = e.op.plan;
    const auto fs = flat_sizes(e);
    const std::int64_t K = fs[4];
    const device dev = forward_value(e).device();
    const auto flat = value(flat_windows(forward_value(std::get<0>(e.children)), pl, fs, aten::max_pool2d::lowest<T>()));
    const auto first_max = value(make_node(prim::reduce_<prim::argmax_kind, true, 4>{}, flat));
    // the last NaN: the first one of the reversed window
    const auto nan_rev = value(make_node(flip_dim<5>(fs, 4), make_node(prim::convert_element_type_<std::int64_t>{},
                                                                        make_node(prim::isnan_{}, flat))));
    const auto last_nan = value(make_node(prim::sub_{}, scalar<std::int64_t>{K - 1},
                                          make_node(prim::reduce_<prim::argmax_kind, true, 4>{}, nan_rev)));
    // an all -inf window: torch's first element inside the input (not a padding position)
    Tensor<std::int64_t, dyn_shape<5>> first_inside(sizes_t<5>{1, 1, fs[2], fs[3], 1}, tenet::cpu);  // host-written
    for (std::int64_t oy = 0; oy < fs[2]; ++oy) {
      for (std::int64_t ox = 0; ox < fs[3]; ++ox) {
        std::int64_t i = 0, j = 0;
        while (i + 1 < pl.k[0] && oy * pl.s[0] - pl.p[0] + i * pl.d[0] < 0) ++i;
        while (j + 1 < pl.k[1] && ox * pl.s[1] - pl.p[1] + j * pl.d[1] < 0) ++j;
        first_inside.data()[oy * fs[3] + ox] = i * pl.k[1] + j;
      }
    }
    const auto y5 = as_sizes<5>(forward_value(e), sizes_t<5>{fs[0], fs[1], fs[2], fs[3], 1});
    const auto at = value(make_node(
        prim::where_{}, make_node(prim::isnan_{}, y5), last_nan,
        make_node(prim::where_{}, make_node(prim::eq_{}, y5, scalar<T>{-std::numeric_limits<T>::infinity()}),
                  first_inside.to(dev), first_max)));
    Tensor<std::int64_t, dyn_shape<5>> positions(sizes_t<5>{1, 1, 1, 1, K}, tenet::cpu);
    for (std::int64_t k = 0; k < K; ++k) positions.data()[k] = k;
    return value(make_node(prim::eq_{}, at, positions.to(dev)));
  }
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    using T = value_type_of<E>;
    const auto& x = std::get<0>(e.children);
    const auto& pl = e.op.plan;
    const auto fs = flat_sizes(e);
    const auto g5 = as_sizes<5>(exact(g, e.sizes()), sizes_t<5>{fs[0], fs[1], fs[2], fs[3], 1});
    const auto gw = value(make_node(prim::where_{}, chosen(e), g5, scalar<T>{T(0)}));
    const sizes_t<6> ws{fs[0], fs[1], fs[2], fs[3], pl.k[0], pl.k[1]};
    backprop(pool_windows(x, pl, aten::max_pool2d::lowest<T>()), as_sizes<6>(gw, ws));
  }
  /// The tangent: each output's tangent is its chosen element's.
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    using T = value_type_of<E>;
    const auto tx = value(tangent(std::get<0>(e.children), ctx));
    const auto fs = flat_sizes(e);
    return make_node(prim::reduce_<prim::sum_kind, false, 4>{},
                     make_node(prim::where_{}, chosen(e), flat_windows(tx, e.op.plan, fs, 0.0), scalar<T>{T(0)}));
  }
};
}  // namespace tenet::detail::ag
