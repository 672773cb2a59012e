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
// With options given as run-time values results have run-time extents (dyn) except where noted;
// given as template arguments (conv2d<conv2d_options{...}>(x, w), max_pool2d<2>(x),
// adaptive_avg_pool2d<1>(x)) the output extents are static where the input's are, computed on
// types by torch's rule. Inputs are batched: conv1d (N, C, L), the 2-D ops (N, C, H, W).
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

#include <tenet/backend/evaluate.hpp>
#include <tenet/decomp/conv.hpp>
#include <tenet/prims/conv_rules.hpp>
#include <tenet/prims/movement.hpp>

namespace tenet {

/// N integers, from one value (repeated) or N values: `.stride = 2`, `.stride = {2, 1}`.
template <std::size_t N>
struct ints {
  std::array<std::int64_t, N> v{};
  constexpr ints() = default;
  constexpr ints(std::int64_t x) { v.fill(x); }  // NOLINT: implicit on purpose
  // The member-wise constructors of ints, maybe and conv_pad are for nvcc: its front end writes a
  // class-type template argument back out as the braced list of its members ({{{1, 1}}} for an
  // ints<2>), which the host compiler accepts only through such a constructor.
  constexpr ints(const std::array<std::int64_t, N>& a) : v(a) {}  // NOLINT
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

/// An optional value that can be part of a template argument (std::optional is not a structural
/// type, so options holding one could not be): empty (`has` false), or holding `held`. Reads as
/// std::optional: `if (m)`, `*m`, `m == v`, `m.value_or(d)`.
template <class T>
struct maybe {
  bool has = false;
  T held{};
  constexpr maybe() = default;
  constexpr maybe(std::nullopt_t) {}            // NOLINT: implicit, as std::optional's
  constexpr maybe(T v) : has(true), held(v) {}  // NOLINT
  constexpr maybe(bool h, T v) : has(h), held(v) {}  // member-wise, for nvcc (ints' comment)
  constexpr explicit operator bool() const { return has; }
  constexpr bool has_value() const { return has; }
  constexpr const T& operator*() const { return held; }
  constexpr T value_or(T d) const { return has ? held : d; }
  friend constexpr bool operator==(const maybe& m, const T& v) { return m.has && m.held == v; }
};

/// conv padding as a string in torch: "same" (output size = input size, stride 1) or "valid" (none).
enum class conv_padding { same, valid };
template <std::size_t N>
struct conv_pad : ints<N> {
  maybe<conv_padding> mode;
  // (ints' constructors written out, not inherited: GCC 12 does not define an inherited constructor
  // in time for a template argument given in a template, "used before its definition")
  constexpr conv_pad(std::int64_t x) : ints<N>(x) {}  // NOLINT: implicit on purpose
  template <std::integral... I>
    requires(sizeof...(I) == N && N > 1)
  constexpr conv_pad(I... i) : ints<N>(i...) {}  // NOLINT
  constexpr conv_pad() = default;
  constexpr conv_pad(conv_padding m) : mode(m) {}  // NOLINT
  constexpr conv_pad(const ints<N>& p, maybe<conv_padding> m) : ints<N>(p), mode(m) {}  // member-wise, for nvcc
};

/// conv1d's and conv2d's options. Like the pooling options below, a structural type: given as a
/// template argument (`conv2d<conv2d_options{.stride = 2, .padding = 1}>(x, w)`, `nn::Conv2d<1, 8, 3,
/// conv2d_options{.padding = 1}>`) they are known to the compiler, and so are the output extents of
/// an input whose spatial extents are static ("Static shapes through CNNs" in docs/ops.md).
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
  maybe<std::int64_t> divisor_override{};
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

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Static output extents. With options given as a template argument and an input whose spatial
// extents are static, a window op's output extents are computed here, on types, by torch's rule;
// the op is built as with run-time options and its result given that shape by a reshape_ to its
// own sizes (a view on every backend; check_sizes_match holds the two computations equal, so a
// disagreement would be a shape_error, never a wrong extent).
namespace compile_error {
template <class InputShape, class Dim, class Extents>
struct window_larger_than_input {
  static_assert(always_false<InputShape>,
                "tenet: a convolution or pooling output extent would not be positive: in "
                "'window_larger_than_input<input shape, dim<d>, extents<window, padded input extent>>' above, the "
                "window (dilation * (kernel size - 1) + 1) is larger than the input's extent d plus its padding; "
                "use a smaller kernel or dilation, more padding, or a larger input");
};
template <class InputShape, class WeightShape, class Extents>
struct conv_channel_mismatch {
  static_assert(always_false<InputShape>,
                "tenet: convolution channel mismatch in 'conv_channel_mismatch<input shape, weight shape, "
                "extents<input channels, weight dim 1 * groups>>' above: the input's dim 1 must equal the weight's "
                "dim 1 times groups");
};
}  // namespace compile_error

namespace detail {

/// The geometry of a window op along N spatial dims, all static; kernel -1 where it is known at
/// run time only (a weight with run-time extents).
template <std::size_t N>
struct window_spec {
  std::array<std::int64_t, N> kernel{}, stride{}, pad_low{}, pad_high{}, dilation{};
  bool ceil_mode = false;
};

/// torch's output extent of a window op: floor((n + lo + hi - span) / s) + 1 with
/// span = d (k - 1) + 1, or ceil with ceil_mode, where the last window must also start inside
/// the input or the left padding (it is dropped otherwise). With ceil_mode one window may be
/// longer than the padded input (torch: max_pool2d(ones(1, 1, 2, 5), 3, ceil_mode=True) has 1 row).
/// -1 when no window fits. The run-time twins are window_count (decomp/conv.hpp) and plan_pool.
constexpr std::int64_t window_extent(std::int64_t n, std::int64_t k, std::int64_t s, std::int64_t lo,
                                     std::int64_t hi, std::int64_t d, bool ceil_mode) {
  const std::int64_t span = d * (k - 1) + 1, num = n + lo + hi - span + (ceil_mode ? s - 1 : 0);
  if (num < 0) return -1;
  std::int64_t out = num / s + 1;
  if (ceil_mode && (out - 1) * s >= n + lo) --out;
  return out >= 1 ? out : -1;
}

/// The result shape (SX's batch, Channels, the N output extents) of a window op with geometry G
/// over an input of shape SX whose last N dims are spatial; an output extent is static when the
/// input extent and the kernel are, and a window that does not fit a static input is a compile
/// error naming the input shape, the dim and both extents.
template <class SX, auto Channels, std::size_t N, window_spec<N> G>
struct window_output {
  static constexpr std::size_t first = SX::rank - N;
  template <std::size_t I>
  static constexpr auto extent() {
    constexpr extent_info in = SX::info[first + I];
    if constexpr (!in.is_fixed() || G.kernel[I] < 0) {
      return dyn;
    } else {
      constexpr std::int64_t out = window_extent(in.value, G.kernel[I], G.stride[I], G.pad_low[I], G.pad_high[I],
                                                 G.dilation[I], G.ceil_mode);
      if constexpr (out < 0) {
        (void)sizeof(compile_error::window_larger_than_input<
                     SX, compile_error::dim<static_cast<std::int64_t>(first + I)>,
                     compile_error::extents<G.dilation[I] * (G.kernel[I] - 1) + 1,
                                            in.value + G.pad_low[I] + G.pad_high[I]>>);
        return dyn;
      } else {
        return static_cast<int>(out);
      }
    }
  }
  template <std::size_t... I>
  static auto make(std::index_sequence<I...>) -> shape<SX::template extent<0>, Channels, extent<I>()...>;
  using type = decltype(make(std::make_index_sequence<N>{}));
};

/// Whether every value is positive / in [lo, hi]; for the static_asserts on static options.
template <std::size_t N>
constexpr bool all_positive(const ints<N>& v) {
  for (std::size_t i = 0; i < N; ++i)
    if (v[i] <= 0) return false;
  return true;
}

/// conv's geometry from static options O and a weight of shape SW (O, C/groups, k...), checked:
/// positive stride and dilation, padding not negative, "same" only with stride 1.
template <std::size_t N, conv_options<N> O, class SW>
constexpr window_spec<N> conv_spec() {
  static_assert(all_positive(O.stride) && all_positive(O.dilation) && O.groups > 0,
                "tenet: conv: stride, dilation and groups must be positive");
  static_assert(!(O.padding.mode == conv_padding::same) || [] {
    for (std::size_t i = 0; i < N; ++i)
      if (O.stride[i] != 1) return false;
    return true;
  }(), "tenet: conv: padding 'same' needs stride 1 (as torch)");
  static_assert(O.padding.mode || [] {
    for (std::size_t i = 0; i < N; ++i)
      if (O.padding[i] < 0) return false;
    return true;
  }(), "tenet: conv: negative padding is not supported");
  window_spec<N> g;
  for (std::size_t i = 0; i < N; ++i) {
    const extent_info k = SW::info[SW::rank - N + i];
    g.kernel[i] = k.is_fixed() ? k.value : -1;
    g.stride[i] = O.stride[i];
    g.dilation[i] = O.dilation[i];
    if (O.padding.mode == conv_padding::same) {
      const std::int64_t total = k.is_fixed() ? O.dilation[i] * (k.value - 1) : 0;
      g.pad_low[i] = total / 2;
      g.pad_high[i] = total - total / 2;
    } else if (!O.padding.mode) {
      g.pad_low[i] = g.pad_high[i] = O.padding[i];
    }
  }
  return g;
}

/// The result shape of conv1d/conv2d<O>(x, w) for x of shape SX (N, C, spatial...) and w of
/// shape SW (O, C/groups, k...); static channel counts that do not fit are a compile error.
template <std::size_t N, conv_options<N> O, class SX, class SW>
struct conv_output {
  static_assert(SX::rank == N + 2 && SW::rank == N + 2,
                "tenet: conv needs x (N, C, spatial...) and w (O, C/groups, kernel...) of the same rank");
  static constexpr bool channels_checked = [] {
    constexpr extent_info c = SX::info[1], cw = SW::info[1];
    if constexpr (c.is_fixed() && cw.is_fixed()) {
      if constexpr (c.value != cw.value * O.groups)
        (void)sizeof(compile_error::conv_channel_mismatch<
                     SX, SW, compile_error::extents<c.value, cw.value * O.groups>>);
    }
    return true;
  }();
  static_assert(channels_checked);
  using type = typename window_output<SX, SW::template extent<0>, N, conv_spec<N, O, SW>()>::type;
};

/// A pooling op's geometry from static values (stride 0: the kernel size), checked as torch does.
template <ints<2> K, ints<2> Stride, ints<2> Padding, ints<2> Dilation, bool CeilMode>
constexpr window_spec<2> pool_spec() {
  static_assert(all_positive(K), "tenet: pooling: the kernel size must be positive");
  static_assert(Stride[0] >= 0 && Stride[1] >= 0, "tenet: pooling: the stride must be positive (0: the kernel size)");
  static_assert(all_positive(Dilation), "tenet: pooling: the dilation must be positive");
  static_assert(Padding[0] >= 0 && Padding[1] >= 0 && Padding[0] <= K[0] / 2 && Padding[1] <= K[1] / 2,
                "tenet: pooling: the padding must be in [0, kernel size / 2] (as torch)");
  window_spec<2> g;
  for (std::size_t i = 0; i < 2; ++i) {
    g.kernel[i] = K[i];
    g.stride[i] = Stride[i] == 0 ? K[i] : Stride[i];
    g.pad_low[i] = g.pad_high[i] = Padding[i];
    g.dilation[i] = Dilation[i];
  }
  g.ceil_mode = CeilMode;
  return g;
}

/// e with the shape S (the same sizes, with more extents known), checked now: a reshape_ to its
/// own sizes, which every backend runs as a view (no kernel, no copy); e itself when S is its shape.
template <class S, class E>
auto with_static_shape(const E& e, const char* what) {
  if constexpr (std::is_same_v<S, shape_of<E>>) {
    return e;
  } else {
    const auto s = e.sizes();
    check_sizes_match<S>(s, what);
    return make_node(prim::reshape_<S>{s}, e);
  }
}

}  // namespace detail


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

/// conv2d<options>(x, w[, bias]): conv2d with options known to the compiler; the output's spatial
/// extents are static where x's are (and w's kernel extents), so is its channel count where w's is,
/// and a kernel larger than the padded input or a static channel mismatch is a compile error.
/// The same kernels and values as conv2d(x, w, options).
template <conv2d_options O, Expression X, Expression W>
auto conv2d(const X& x, const W& w) {
  static_assert(rank_of<X> == 4 && rank_of<W> == 4, "tenet: conv2d needs x (N, C, H, W) and w (O, C/groups, kh, kw)");
  using S = typename detail::conv_output<2, O, shape_of<X>, shape_of<W>>::type;
  return detail::with_static_shape<S>(conv2d(x, w, O), "conv2d");
}
template <conv2d_options O, Expression X, Expression W, Expression B>
auto conv2d(const X& x, const W& w, const B& bias) {
  return detail::add_channel_bias<4>(conv2d<O>(x, w), bias, w.sizes()[0], "conv2d");
}

namespace detail {
/// conv1d as a conv2d over a height of 1, its result of shape S3.
template <class S3, class X, class W>
auto conv1d_as(const X& x, const W& w, const conv1d_options& o) {
  static_assert(rank_of<X> == 3 && rank_of<W> == 3, "tenet: conv1d needs x (N, C, L) and w (O, C/groups, k)");
  check_conv_args<X, W>("conv1d");
  const auto xs = x.sizes();
  const auto ws = w.sizes();
  auto x4 = make_node(prim::reshape_<dyn_shape<4>>{{xs[0], xs[1], 1, xs[2]}}, x);
  auto w4 = make_node(prim::reshape_<dyn_shape<4>>{{ws[0], ws[1], 1, ws[2]}}, w);
  auto y = make_node(conv2d_op<1>({ws[2]}, o, "conv1d"), x4, w4);
  const auto ys = y.sizes();
  const sizes_t<3> s{ys[0], ys[1], ys[3]};
  check_sizes_match<S3>(s, "conv1d");
  return make_node(prim::reshape_<S3>{s}, y);
}
}  // namespace detail

/// conv1d(x, w[, bias], options): x (N, C, L), w (O, C/groups, k); a conv2d over a height of 1.
template <Expression X, Expression W>
auto conv1d(const X& x, const W& w, const conv1d_options& o = {}) {
  return detail::conv1d_as<dyn_shape<3>>(x, w, o);
}
template <Expression X, Expression W, Expression B>
auto conv1d(const X& x, const W& w, const B& bias, const conv1d_options& o = {}) {
  return detail::add_channel_bias<3>(conv1d(x, w, o), bias, w.sizes()[0], "conv1d");
}
/// conv1d<options>(x, w[, bias]): as conv2d<options>, with static extents where x's and w's are.
template <conv1d_options O, Expression X, Expression W>
auto conv1d(const X& x, const W& w) {
  static_assert(rank_of<X> == 3 && rank_of<W> == 3, "tenet: conv1d needs x (N, C, L) and w (O, C/groups, k)");
  return detail::conv1d_as<typename detail::conv_output<1, O, shape_of<X>, shape_of<W>>::type>(x, w, O);
}
template <conv1d_options O, Expression X, Expression W, Expression B>
auto conv1d(const X& x, const W& w, const B& bias) {
  return detail::add_channel_bias<3>(conv1d<O>(x, w), bias, w.sizes()[0], "conv1d");
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
    const std::int64_t out = window_extent(n, pl.k[i], pl.s[i], pl.p[i], pl.p[i], pl.d[i], ceil_mode);
    if (out < 0)
      throw shape_error(std::string("tenet: ") + what + ": kernel of extent " + std::to_string(span) +
                        " is larger than the padded input extent " + std::to_string(n + 2 * pl.p[i]) +
                        (ceil_mode ? " and no window starts inside the input" : "") + " (input sizes " +
                        sizes_text(xs) + ")");
    pl.out[i] = out;
    pl.extra[i] = std::max<std::int64_t>(0, (out - 1) * pl.s[i] + span - (n + 2 * pl.p[i]));
  }
  return pl;
}
}  // namespace detail



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

/// max_pool2d<kernel, options>(x): max_pool2d with its geometry known to the compiler; the
/// output's spatial extents are static where x's are (torch's rule, ceil_mode's included), and a
/// window larger than the padded input is a compile error. `max_pool2d<2>(x)`,
/// `max_pool2d<3, max_pool2d_options{.stride = 2, .padding = 1}>(x)`, `max_pool2d<ints<2>{2, 3}>(x)`.
template <ints<2> K, max_pool2d_options O = max_pool2d_options{}, Expression X>
auto max_pool2d(const X& x) {
  static_assert(rank_of<X> == 4, "tenet: max_pool2d needs x (N, C, H, W)");
  using SX = shape_of<X>;
  using S = typename detail::window_output<SX, SX::template extent<1>, 2,
                                           detail::pool_spec<K, O.stride, O.padding, O.dilation, O.ceil_mode>()>::type;
  return detail::with_static_shape<S>(max_pool2d(x, K, O), "max_pool2d");
}

namespace detail {
/// The shape of avg_pool2d's divisors: the output's spatial extents (static ones too: a static 1
/// against a run-time extent would broadcast to a run-time extent).
template <class S>
struct pool_divisor_shape {
  using type = take_extents_t<S, 2, 4>;
};
template <>
struct pool_divisor_shape<void> {
  using type = dyn_shape<2>;
};
/// avg_pool2d, the window sums given the shape S (void: as they come).
template <class S, class X>
auto avg_pool2d_as(const X& x, const ints<2>& kernel, const avg_pool2d_options& o) {
  static_assert(rank_of<X> == 4, "tenet: avg_pool2d needs x (N, C, H, W)");
  using T = value_type_of<X>;
  detail::check_conv_dtype<T>("avg_pool2d");
  const auto xs = x.sizes();
  const auto pl = detail::plan_pool(xs, kernel, o.stride, o.padding, 1, o.ceil_mode, "avg_pool2d");
  if (o.divisor_override && *o.divisor_override == 0)
    throw value_error("tenet: avg_pool2d: divisor_override must not be zero");
  // the divisor of each output position (torch's rule: windows clipped to the padded input, then
  // to the input unless count_include_pad)
  Tensor<T, typename pool_divisor_shape<S>::type> divisor(sizes_t<2>{pl.out[0], pl.out[1]}, tenet::cpu);  // host-written, then moved
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
  if constexpr (std::is_void_v<S>)
    return make_node(prim::div_{}, sums, divisor.to(detail::expr_device(x)));
  else
    return make_node(prim::div_{}, with_static_shape<S>(sums, "avg_pool2d"), divisor.to(detail::expr_device(x)));
}
}  // namespace detail

/// avg_pool2d(x, kernel, {.stride = kernel, .padding, .ceil_mode, .count_include_pad = true, .divisor_override}).
template <Expression X>
auto avg_pool2d(const X& x, const ints<2>& kernel, const avg_pool2d_options& o = {}) {
  return detail::avg_pool2d_as<void>(x, kernel, o);
}
/// avg_pool2d<kernel, options>(x): as max_pool2d<kernel, options>.
template <ints<2> K, avg_pool2d_options O = avg_pool2d_options{}, Expression X>
auto avg_pool2d(const X& x) {
  static_assert(rank_of<X> == 4, "tenet: avg_pool2d needs x (N, C, H, W)");
  static_assert(!O.divisor_override || *O.divisor_override != 0, "tenet: avg_pool2d: divisor_override must not be zero");
  using SX = shape_of<X>;
  using S = typename detail::window_output<SX, SX::template extent<1>, 2,
                                           detail::pool_spec<K, O.stride, O.padding, 1, O.ceil_mode>()>::type;
  return detail::avg_pool2d_as<S>(x, K, O);
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

/// adaptive_avg_pool2d with its result of shape S (void: as it comes).
template <class S, class X>
auto adaptive_avg_pool2d_as(const X& x, const ints<2>& output_size) {
  static_assert(rank_of<X> == 4, "tenet: adaptive_avg_pool2d needs x (N, C, H, W)");
  using T = value_type_of<X>;
  check_conv_dtype<T>("adaptive_avg_pool2d");
  const auto xs = x.sizes();
  auto windows = [&](std::int64_t n, std::int64_t out) {
    if (out < 0) throw value_error("tenet: adaptive_avg_pool2d: negative output size " + std::to_string(out));
    if (n == 0 && out > 0)
      throw shape_error("tenet: adaptive_avg_pool2d: cannot pool an empty extent (input sizes " + sizes_text(xs) + ")");
    std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> w;
    for (std::int64_t i = 0; i < out; ++i) {
      w.first.push_back((i * n) / out);
      w.second.push_back(((i + 1) * n + out - 1) / out);
    }
    return w;
  };
  const auto [r0, r1] = windows(xs[2], output_size[0]);
  const auto [c0, c1] = windows(xs[3], output_size[1]);
  auto y = average_windows_along<2>(average_windows_along<3>(x, c0, c1), r0, r1);
  if constexpr (std::is_void_v<S>)
    return y;
  else
    return with_static_shape<S>(y, "adaptive_avg_pool2d");
}
}  // namespace detail

/// adaptive_avg_pool2d(x, output_size): output cell i averages input rows
/// [floor(i H / oh), ceil((i + 1) H / oh)) (likewise for columns), any oh, ow. Each output reads
/// only its window (a NaN or inf stays in the outputs whose windows hold it, as torch).
template <Expression X>
auto adaptive_avg_pool2d(const X& x, const ints<2>& output_size) {
  return detail::adaptive_avg_pool2d_as<void>(x, output_size);
}
/// adaptive_avg_pool2d<output_size>(x): the output's spatial extents are static (whatever x's are);
/// `adaptive_avg_pool2d<1>(x)`, `adaptive_avg_pool2d<ints<2>{2, 3}>(x)`.
template <ints<2> Size, Expression X>
auto adaptive_avg_pool2d(const X& x) {
  static_assert(rank_of<X> == 4, "tenet: adaptive_avg_pool2d needs x (N, C, H, W)");
  static_assert(Size[0] >= 0 && Size[1] >= 0, "tenet: adaptive_avg_pool2d: the output size must not be negative");
  using SX = shape_of<X>;
  using S = shape<SX::template extent<0>, SX::template extent<1>, static_cast<int>(Size[0]), static_cast<int>(Size[1])>;
  return detail::adaptive_avg_pool2d_as<S>(x, Size);
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
