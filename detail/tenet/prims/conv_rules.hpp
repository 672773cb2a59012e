#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The rule-table entries (prims/rule_table.hpp) of the convolution and pooling composites
// (decomp/conv.hpp): autograd keeps conv2d and max_pool2d whole.
#include <cstdint>
#include <limits>

#include <tenet/autograd/jvp.hpp>
#include <tenet/autograd/record.hpp>  // autograd_backend
#include <tenet/autograd/vjp.hpp>
#include <tenet/decomp/conv.hpp>

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
