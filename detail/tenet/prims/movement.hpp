#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The movement prims: reshape, permute, expand (broadcast_in_dim), slice (any step, negative
// included), pad (XLA's pad: low/high/interior, negative low/high crop) and unfold (the window view
// of torch.Tensor.unfold). Their parameters are run-time values held by the op (permute's and a
// static unfold's are template arguments, so their result shapes are computed at compile time).
//
// Every movement prim except pad_ is a view (is_view_prim): backend/views.hpp's view_of returns
// a strided view of the child's value, never a copy (reshape copies only when the strides cannot
// be viewed, as torch.reshape); no backend runs a kernel for it. pad_ is a kernel.
//
// @post for every prim p and index i of the result, p(x)(i) == x(f_p(i)) for p's index map f_p
//       (pad_: the value where f_p(i) falls outside x or between interior elements); tests/test_conv.cpp.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <tenet/error.hpp>
#include <tenet/expr/concepts.hpp>
#include <tenet/shape/rules.hpp>


namespace tenet::prim {

struct movement_group {};

namespace detail_movement {
template <std::size_t R>
std::string ints_text(const std::array<std::int64_t, R>& a) {
  std::string t = "(";
  for (std::size_t i = 0; i < R; ++i) t += (i ? ", " : "") + std::to_string(a[i]);
  return t + ")";
}
}  // namespace detail_movement

/// reshape_<S>: the same elements in row-major order with sizes `target` (shape type S).
template <class S>
struct reshape_ {
  static constexpr bool is_prim = true;
  using group = movement_group;
  static constexpr std::string_view name = "reshape";
  sizes_t<S::rank> target{};
  template <class C>
  using result_type = value_type_of<C>;
  template <class C>
  using result_shape = S;
  template <class C>
  sizes_t<S::rank> sizes(const C& c) const {
    const auto s = c.sizes();
    std::int64_t from = 1, to = 1;
    for (auto v : s) from *= v;
    bool negative = false;
    for (auto v : target) to *= v, negative = negative || v < 0;
    if (from != to || negative)
      throw shape_error("tenet: reshape: cannot view " + detail::sizes_text(s) + " (" + std::to_string(from) +
                        " elements) as " + detail::sizes_text(target) + " (" + std::to_string(to) + " elements)");
    tenet::detail::check_sizes_match<S>(target, "reshape");
    return target;
  }
};

/// permute_<P...>: result dim i is input dim P[i].
template <std::int64_t... P>
struct permute_ {
  static constexpr bool is_prim = true;
  using group = movement_group;
  static constexpr std::string_view name = "permute";
  static constexpr std::size_t rank = sizeof...(P);
  static constexpr std::array<std::int64_t, rank> perm{P...};
  static constexpr bool valid = [] {
    std::array<bool, rank> seen{};
    for (auto p : perm) {
      if (p < 0 || p >= static_cast<std::int64_t>(rank) || seen[static_cast<std::size_t>(p)]) return false;
      seen[static_cast<std::size_t>(p)] = true;
    }
    return true;
  }();
  static_assert(valid, "tenet: permute_<P...> needs each dim 0..rank-1 exactly once");
  template <class C>
  using result_type = value_type_of<C>;
  template <class C>
  using result_shape = shape<shape_of<C>::template extent<static_cast<std::size_t>(P)>...>;
  template <class C>
  static sizes_t<rank> sizes(const C& c) {
    static_assert(rank_of<C> == rank, "tenet: permute_ needs one dim per dimension of its input");
    const auto s = c.sizes();
    return {s[static_cast<std::size_t>(P)]...};
  }
};

/// expand_<S> (broadcast_in_dim): the input's dims are the trailing dims of the result; each has
/// the target extent or 1 (broadcast); new leading dims broadcast.
template <class S>
struct expand_ {
  static constexpr bool is_prim = true;
  using group = movement_group;
  static constexpr std::string_view name = "expand";
  sizes_t<S::rank> target{};
  template <class C>
  using result_type = value_type_of<C>;
  template <class C>
  using result_shape = S;
  template <class C>
  sizes_t<S::rank> sizes(const C& c) const {
    constexpr std::size_t r = rank_of<C>, R = S::rank;
    static_assert(r <= R, "tenet: expand_ cannot lower the rank");
    const auto s = c.sizes();
    for (std::size_t i = 0; i < r; ++i) {
      const auto t = target[i + R - r];
      if (s[i] != t && s[i] != 1)
        throw shape_error("tenet: expand: cannot expand " + detail::sizes_text(s) + " to " +
                          detail::sizes_text(target) + " (dim " + std::to_string(i + R - r) + ": " +
                          std::to_string(s[i]) + " vs " + std::to_string(t) + ")");
    }
    tenet::detail::check_sizes_match<S>(target, "expand");
    return target;
  }
};

/// slice_<R>: per dim, the elements start, start+step, ... strictly before stop (step > 0:
/// 0 <= start <= stop <= n; step < 0: -1 <= stop <= start <= n-1, so flip is start n-1, stop -1,
/// step -1). No clamping and no negative-index wraparound: builders normalize Python indices.
template <std::size_t R>
struct slice_ {
  static constexpr bool is_prim = true;
  using group = movement_group;
  static constexpr std::string_view name = "slice";
  sizes_t<R> start{}, stop{}, step{};
  template <class C>
  using result_type = value_type_of<C>;
  template <class C>
  using result_shape = dyn_shape<R>;
  static std::int64_t count(std::int64_t a, std::int64_t b, std::int64_t st) {
    return st > 0 ? (b - a + st - 1) / st : (a - b + (-st) - 1) / (-st);
  }
  template <class C>
  sizes_t<R> sizes(const C& c) const {
    static_assert(rank_of<C> == R, "tenet: slice_<R> needs an input of rank R");
    const auto s = c.sizes();
    sizes_t<R> out{};
    for (std::size_t d = 0; d < R; ++d) {
      const auto n = s[d], a = start[d], b = stop[d], st = step[d];
      const bool ok = st > 0 ? (0 <= a && a <= b && b <= n) : st < 0 ? (-1 <= b && b <= a && a <= n - 1) : false;
      if (!ok)
        throw index_error("tenet: slice: start " + std::to_string(a) + ", stop " + std::to_string(b) + ", step " +
                          std::to_string(st) + " is out of range for dim " + std::to_string(d) + " of size " +
                          std::to_string(n) + " (sizes " + detail::sizes_text(s) + ")");
      out[d] = count(a, b, st);
    }
    return out;
  }
};

/// pad_<R>: XLA's pad. Per dim, `low` values before, `high` after and `interior` between
/// neighbours, all equal to `value`; a negative low/high removes elements from that end.
/// Result extent: low + high + n + max(n - 1, 0) * interior (must not be negative).
template <std::size_t R>
struct pad_ {
  static constexpr bool is_prim = true;
  using group = movement_group;
  static constexpr std::string_view name = "pad";
  sizes_t<R> low{}, high{}, interior{};
  double value = 0.0;
  template <class C>
  using result_type = value_type_of<C>;
  template <class C>
  using result_shape = dyn_shape<R>;
  template <class C>
  sizes_t<R> sizes(const C& c) const {
    static_assert(rank_of<C> == R, "tenet: pad_<R> needs an input of rank R");
    const auto s = c.sizes();
    sizes_t<R> out{};
    for (std::size_t d = 0; d < R; ++d) {
      if (interior[d] < 0)
        throw value_error("tenet: pad: interior padding must not be negative, got " + std::to_string(interior[d]) +
                          " for dim " + std::to_string(d));
      const auto n = s[d];
      out[d] = low[d] + high[d] + n + (n > 0 ? (n - 1) * interior[d] : 0);
      if (out[d] < 0)
        throw shape_error("tenet: pad: low " + detail_movement::ints_text(low) + ", high " +
                          detail_movement::ints_text(high) + " would give dim " + std::to_string(d) +
                          " a negative size " + std::to_string(out[d]) + " (input sizes " + detail::sizes_text(s) +
                          ")");
    }
    return out;
  }
};

namespace detail_movement {
template <class S, std::size_t D, std::int64_t Size, std::int64_t Step>
struct unfold_shape {
  static constexpr auto count_extent() {
    if constexpr (Size >= 0 && Step > 0 && S::info[D].is_fixed()) {
      constexpr std::int64_t n = S::info[D].value;
      static_assert(Size <= n, "tenet: unfold: the window is larger than the (static) dim");
      return static_cast<int>((n - Size) / Step + 1);
    } else {
      return dyn;
    }
  }
  static constexpr auto window_extent() {
    if constexpr (Size >= 0)
      return static_cast<int>(Size);
    else
      return dyn;
  }
  using type = tenet::detail::concat_shapes_t<tenet::detail::set_extent_t<S, D, count_extent()>,
                                              shape<window_extent()>>;
};
}  // namespace detail_movement

/// unfold_<D, Size, Step>: torch.Tensor.unfold(D, size, step): dim D becomes the window index
/// ((n - size) / step + 1 windows) and a new last dim of extent size holds each window.
/// Size and Step are template arguments when known at compile time (the result shape is then
/// static where the input's dim is), else -1 and the run-time members `size`, `step` hold them.
template <std::int64_t D, std::int64_t Size = -1, std::int64_t Step = -1>
struct unfold_ {
  static constexpr bool is_prim = true;
  using group = movement_group;
  static constexpr std::string_view name = "unfold";
  std::int64_t size = Size, step = Step;
  template <class C>
  static constexpr std::size_t dim = static_cast<std::size_t>(D < 0 ? D + static_cast<std::int64_t>(rank_of<C>) : D);
  template <class C>
  using result_type = value_type_of<C>;
  template <class C>
  using result_shape = typename detail_movement::unfold_shape<shape_of<C>, dim<C>, Size, Step>::type;
  template <class C>
  sizes_t<rank_of<C> + 1> sizes(const C& c) const {
    static_assert(D >= -static_cast<std::int64_t>(rank_of<C>) && D < static_cast<std::int64_t>(rank_of<C>),
                  "tenet: unfold_<D>: D out of range for the input's rank");
    constexpr std::size_t d = dim<C>;
    const auto s = c.sizes();
    if (step <= 0) throw value_error("tenet: unfold: step must be positive, got " + std::to_string(step));
    if (size < 0 || size > s[d])
      throw shape_error("tenet: unfold: window size " + std::to_string(size) + " does not fit dim " +
                        std::to_string(d) + " of size " + std::to_string(s[d]) + " (sizes " + detail::sizes_text(s) +
                        ")");
    sizes_t<rank_of<C> + 1> out{};
    for (std::size_t i = 0; i < rank_of<C>; ++i) out[i] = s[i];
    out[d] = (s[d] - size) / step + 1;
    out[rank_of<C>] = size;
    return out;
  }
};

/// The movement prims that are strided views of their operand (no kernel on any backend).
template <class Op>
inline constexpr bool is_view_prim = false;
template <class S>
inline constexpr bool is_view_prim<reshape_<S>> = true;
template <std::int64_t... P>
inline constexpr bool is_view_prim<permute_<P...>> = true;
template <class S>
inline constexpr bool is_view_prim<expand_<S>> = true;
template <std::size_t R>
inline constexpr bool is_view_prim<slice_<R>> = true;
template <std::int64_t D, std::int64_t Size, std::int64_t Step>
inline constexpr bool is_view_prim<unfold_<D, Size, Step>> = true;

}  // namespace tenet::prim
