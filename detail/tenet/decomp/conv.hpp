#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The convolution and pooling composites: conv2d (its geometry and the im2col-as-views
// reference decomposition), conv2d_weight (conv2d's weight gradient) and max_pool2d (the windows'
// amax). The CPU and CUDA run them natively (backend/cpu/conv.hpp, backend/cuda/conv.cuh); their
// differentiation rules are in prims/conv_rules.hpp.
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <tenet/decomp/composite.hpp>
#include <tenet/error.hpp>
#include <tenet/prims/movement.hpp>
#include <tenet/prims/reduce.hpp>

namespace tenet::detail {

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

/// The geometry of one conv2d: input N x C x H x W, weight O x C/groups x kh x kw, output
/// N x O x oh x ow; padding low (top/left) and high (bottom/right) may differ ("same").
struct conv2d_geometry {
  std::int64_t N = 0, C = 0, H = 0, W = 0, O = 0, kh = 0, kw = 0, groups = 1;
  std::int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  std::int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  std::int64_t oh = 0, ow = 0;
};

/// A pooling window plan (extents, strides, padding, dilation, output sizes and the extra high
/// padding that makes every window fit; include/tenet/conv.hpp's plan_pool makes it).
struct pool_plan {
  std::array<std::int64_t, 2> k{}, s{}, p{}, d{}, out{}, extra{};
};

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

}  // namespace tenet::detail

namespace tenet {
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
  detail::conv2d_geometry geometry(const sizes_t<4>& xs, const sizes_t<4>& ws) const {
    detail::conv2d_geometry g;
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
}  // namespace tenet
