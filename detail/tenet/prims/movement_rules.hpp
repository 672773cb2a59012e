#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The differentiation rules of the movement prims (prims/movement.hpp), their entries of the rule
// table (prims/rule_table.hpp). Every movement prim is linear: its tangent is the prim applied to
// the input's tangent; its VJP puts the gradient back where the input's elements went.
#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include <tenet/autograd/jvp.hpp>
#include <tenet/autograd/vjp.hpp>
#include <tenet/prims/movement.hpp>
#include <tenet/prims/rule_table.hpp>

namespace tenet::detail::ag {

/// The JVP the movement prims share (all but pad, whose padding value is a constant): the same
/// movement of the tangent.
struct linear_movement_rule {
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    return make_node(e.op, value(tangent(std::get<0>(e.children), ctx)));
  }
};

template <class S>
struct rules<prim::reshape_<S>> : linear_movement_rule {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    constexpr std::size_t r = rank_of<decltype(x)>;
    backprop(x, as_sizes<r>(exact(g, e.sizes()), x.sizes()));
  }
};

template <std::int64_t... P>
struct rules<prim::permute_<P...>> : linear_movement_rule {
  static constexpr std::size_t n = sizeof...(P);
  static constexpr std::array<std::int64_t, n> inverse = [] {
    constexpr std::array<std::int64_t, n> p{P...};
    std::array<std::int64_t, n> q{};
    for (std::size_t i = 0; i < n; ++i) q[static_cast<std::size_t>(p[i])] = static_cast<std::int64_t>(i);
    return q;
  }();
  template <std::size_t... I>
  static auto inverse_op(std::index_sequence<I...>) {
    return prim::permute_<inverse[I]...>{};
  }
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    backprop(std::get<0>(e.children), make_node(inverse_op(std::make_index_sequence<n>{}), exact(g, e.sizes())));
  }
};

/// expand: the gradient of the expanded value broadcasts onto the input (exact() sums it).
template <class S>
struct rules<prim::expand_<S>> : linear_movement_rule {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    backprop(std::get<0>(e.children), exact(g, e.sizes()));
  }
};

/// slice: the gradient placed back at the sliced positions (zeros elsewhere) with one pad_
/// (a negative step first reverses the gradient).
template <std::size_t R>
struct rules<prim::slice_<R>> : linear_movement_rule {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    const auto xs = x.sizes();
    const auto os = e.sizes();
    prim::slice_<R> rev;
    prim::pad_<R> pad;
    for (std::size_t d = 0; d < R; ++d) {
      const std::int64_t n = xs[d], cnt = os[d], st = e.op.step[d], s = st < 0 ? -st : st;
      rev.start[d] = 0, rev.stop[d] = cnt, rev.step[d] = 1;
      pad.interior[d] = 0;
      if (cnt == 0) {
        pad.low[d] = n, pad.high[d] = 0;
        continue;
      }
      const std::int64_t first = st > 0 ? e.op.start[d] : e.op.start[d] - (cnt - 1) * s;
      const std::int64_t last = first + (cnt - 1) * s;
      pad.low[d] = first, pad.high[d] = n - 1 - last, pad.interior[d] = s - 1;
      if (st < 0) rev.start[d] = cnt - 1, rev.stop[d] = -1, rev.step[d] = -1;
    }
    backprop(x, make_node(pad, make_node(rev, exact(g, os))));
  }
};

/// pad: the gradient at the positions of the input's elements (a slice with the interior step),
/// zeros for elements a negative low/high cropped.
template <std::size_t R>
struct rules<prim::pad_<R>> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    const auto xs = x.sizes();
    const auto os = e.sizes();
    prim::slice_<R> take;
    prim::pad_<R> back;
    for (std::size_t d = 0; d < R; ++d) {
      const std::int64_t n = xs[d], N = os[d], L = e.op.low[d], I = e.op.interior[d] + 1;
      back.interior[d] = 0;
      const std::int64_t lo = L >= 0 ? 0 : (-L + I - 1) / I;
      const std::int64_t hi = N - 1 - L < 0 ? -1 : std::min(n - 1, (N - 1 - L) / I);
      if (n == 0 || lo > hi) {
        take.start[d] = 0, take.stop[d] = 0, take.step[d] = 1;
        back.low[d] = n, back.high[d] = 0;
      } else {
        take.start[d] = L + lo * I, take.stop[d] = L + hi * I + 1, take.step[d] = I;
        back.low[d] = lo, back.high[d] = n - 1 - hi;
      }
    }
    backprop(x, make_node(back, make_node(take, exact(g, os))));
  }
  /// The tangent padded with zeros (the padding value is a constant).
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    auto op = e.op;
    op.value = 0.0;
    return make_node(op, value(tangent(std::get<0>(e.children), ctx)));
  }
};

/// unfold: windows overlap, so the gradient is the view's scatter-add into the input.
template <std::int64_t D, std::int64_t Size, std::int64_t Step>
struct rules<prim::unfold_<D, Size, Step>> : linear_movement_rule {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    using X = std::remove_cvref_t<decltype(x)>;
    using T = value_type_of<E>;
    constexpr std::size_t r = rank_of<X>;
    constexpr std::size_t d = prim::unfold_<D, Size, Step>::template dim<X>;
    const auto xs = x.sizes();
    const auto cs = contiguous_strides(xs);
    sizes_t<r + 1> vst{};
    for (std::size_t i = 0; i < r; ++i) vst[i] = cs[i];
    vst[d] = cs[d] * e.op.step;
    vst[r] = cs[d];
    const auto os = e.sizes();
    backprop(x, view_backward<T, r, r + 1>(exact(g, os), os, vst, 0, xs, cs, 0));
  }
};

}  // namespace tenet::detail::ag
