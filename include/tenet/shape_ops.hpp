#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Shape ops: repeat, tile, repeat_interleave, unbind, movedim, diagonal, diag.
//
// Views (movedim, unbind, diagonal) share the input's storage, as Tensor's own views do; the others
// are expressions of the movement prims evaluated now (repeat: reshape_, expand_, reshape_; diag of
// a vector: pad_ with interior padding, reshape_; repeat_interleave with a tensor of counts:
// index_select), so no op here has a kernel of its own and each is differentiable through its
// prims (autograd records the evaluation). Each returns a Tensor (the copies have run-time
// extents: repeat counts are run-time values).
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <tenet/error.hpp>
#include <tenet/ops.hpp>
#include <tenet/tensor.hpp>

#include <tenet/backend/evaluate.hpp>
#include <tenet/tensor/views.hpp>
#include <tenet/indexing.hpp>  // index_select (repeat_interleave with a tensor of counts)

namespace tenet {

namespace detail {
inline void check_repeat_count(std::int64_t r, const char* op) {
  if (r < 0)
    throw value_error(std::string("tenet: ") + op + ": repeat counts must be non-negative, got " + std::to_string(r));
}
/// n * r for a repeated extent, or shape_error when it overflows int64 (issue 27).
inline std::int64_t repeated_extent(std::int64_t n, std::int64_t r, const char* op) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(n, r, &out))
    throw shape_error(std::string("tenet: ") + op + ": size " + std::to_string(n) + " repeated " + std::to_string(r) +
                      " times overflows int64");
  return out;
}

/// x (rank R, viewed as rank K >= R with leading 1s) repeated reps[i] times along dim i: x viewed
/// as [1, n0, 1, n1, ...], expanded to [r0, n0, r1, n1, ...] and reshaped to [r0 n0, r1 n1, ...]
/// (the last reshape copies; torch's repeat). Its VJP sums the gradient over the repeats.
template <std::size_t K, class T, class S>
Tensor<T, dyn_shape<K>> repeat_impl(const Tensor<T, S>& x, const std::array<std::int64_t, K>& reps, const char* op) {
  constexpr std::size_t R = S::rank;
  static_assert(K >= R, "tenet: repeat needs at least one count per dim of the tensor (use tile for fewer)");
  sizes_t<2 * K> pairs{}, expanded{};
  sizes_t<K> out{};
  for (std::size_t i = 0; i < K; ++i) {
    check_repeat_count(reps[i], op);
    const std::int64_t n = i < K - R ? 1 : x.sizes()[i - (K - R)];
    pairs[2 * i] = 1;
    pairs[2 * i + 1] = n;
    expanded[2 * i] = reps[i];
    expanded[2 * i + 1] = n;
    out[i] = repeated_extent(n, reps[i], op);
  }
  (void)checked_numel(out, op);
  return make_node(prim::reshape_<dyn_shape<K>>{out},
                   make_node(prim::expand_<dyn_shape<2 * K>>{expanded}, make_node(prim::reshape_<dyn_shape<2 * K>>{pairs}, x)));
}

/// The positions i repeated repeats[i] times (the indices form of repeat_interleave), on the host.
template <class RS>
Tensor<std::int64_t, shape<dyn>> repeat_positions(const Tensor<std::int64_t, RS>& repeats) {
  const auto reps = repeats.cpu().contiguous();
  const std::int64_t m = reps.numel();
  std::int64_t total = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    check_repeat_count(reps.data()[i], "repeat_interleave");
    if (__builtin_add_overflow(total, reps.data()[i], &total))  // a wrapped total would be written past
      throw shape_error("tenet: repeat_interleave: the repeat counts add up to more than 2^63 - 1");
  }
  Tensor<std::int64_t, shape<dyn>> pos(sizes_t<1>{total}, tenet::cpu);
  for (std::int64_t i = 0, at = 0; i < m; ++i)
    for (std::int64_t k = 0; k < reps.data()[i]; ++k) pos.data()[at++] = i;
  return pos;
}
}  // namespace detail

/// repeat(x, r0, r1, ...): x tiled r_i times along dim i, as torch.Tensor.repeat (at least one count
/// per dim; more counts add leading dims).
template <Expression X, std::integral... N>
auto repeat(const X& x, N... reps) {
  static_assert(sizeof...(N) >= rank_of<X>,
                "tenet: repeat needs at least as many counts as the tensor has dims (torch.Tensor.repeat)");
  return detail::repeat_impl<sizeof...(N)>(eval(x), std::array<std::int64_t, sizeof...(N)>{static_cast<std::int64_t>(reps)...},
                                           "repeat");
}
/// tile(x, r...): as repeat, but fewer counts than dims are padded with leading 1s (torch.tile).
template <Expression X, std::integral... N>
auto tile(const X& x, N... reps) {
  constexpr std::size_t R = rank_of<X>, n = sizeof...(N), K = n > R ? n : R;
  const std::array<std::int64_t, n> given{static_cast<std::int64_t>(reps)...};
  std::array<std::int64_t, K> all{};
  for (std::size_t i = 0; i < K; ++i) all[i] = i < K - n ? 1 : given[i - (K - n)];
  return detail::repeat_impl<K>(eval(x), all, "tile");
}

/// repeat_interleave<D>(x, r): each element repeated r times along D (torch.repeat_interleave):
/// [..., n, ...] viewed as [..., n, 1, ...], expanded to [..., n, r, ...], reshaped (copied) to
/// [..., n r, ...].
template <std::int64_t D, Expression X>
auto repeat_interleave(const X& x0, std::int64_t r) {
  detail::check_repeat_count(r, "repeat_interleave");
  const auto x = eval(x0);
  using S = shape_of<X>;
  constexpr std::size_t R = S::rank;
  constexpr std::size_t d = detail::static_dim<S, D>();
  sizes_t<R + 1> split{}, expanded{};
  sizes_t<R> out{};
  for (std::size_t i = 0, j = 0; i < R; ++i) {
    split[j] = expanded[j] = out[i] = x.sizes()[i];
    ++j;
    if (i == d) split[j] = 1, expanded[j++] = r, out[i] = detail::repeated_extent(out[i], r, "repeat_interleave");
  }
  (void)detail::checked_numel(out, "repeat_interleave");
  using S2 = detail::set_extent_t<S, d, dyn>;
  return Tensor<value_type_of<X>, S2>(make_node(
      prim::reshape_<S2>{out},
      make_node(prim::expand_<dyn_shape<R + 1>>{expanded}, make_node(prim::reshape_<dyn_shape<R + 1>>{split}, x))));
}
/// repeat_interleave(x, r): over the flattened x (1-D result).
template <Expression X>
auto repeat_interleave(const X& x, std::int64_t r) {
  return repeat_interleave<0>(eval(x).template reshape<-1>(), r);
}
/// repeat_interleave<D>(x, repeats): element i along D repeated repeats[i] times; repeats is a 1-D
/// int64 tensor of the size of dim D, or of one element (used for every element). index_select of
/// x by the positions repeat_interleave(repeats), as torch.
template <std::int64_t D, Expression X, class RS>
auto repeat_interleave(const X& x0, const Tensor<std::int64_t, RS>& repeats) {
  static_assert(RS::rank <= 1, "tenet: repeat_interleave: repeats must be a 0-dim or 1-D int64 tensor");
  const auto x = eval(x0);
  using S = shape_of<X>;
  constexpr std::size_t d = detail::static_dim<S, D>();
  using Out = Tensor<value_type_of<X>, detail::set_extent_t<S, d, dyn>>;
  const std::int64_t n = x.sizes()[d];
  const std::int64_t m = repeats.numel();
  if (m == 1) return Out(repeat_interleave<D>(x, repeats.cpu().contiguous().data()[0]));
  if (m != n)
    throw shape_error("tenet: repeat_interleave: repeats has " + std::to_string(m) + " elements but dim " +
                      std::to_string(d) + " of the input has size " + std::to_string(n) + " (give one count per "
                      "element, or a single count)");
  return Out(index_select<D>(x, detail::repeat_positions(repeats).to(x.device())));
}

/// repeat_interleave(repeats): i repeated repeats[i] times, for each i (the indices form of
/// torch.repeat_interleave).
template <class RS>
auto repeat_interleave(const Tensor<std::int64_t, RS>& repeats) {
  static_assert(RS::rank == 1, "tenet: repeat_interleave(repeats) needs a 1-D int64 tensor");
  return detail::repeat_positions(repeats).to(repeats.device());
}

/// unbind<D>(x): the slices of x along D, as views (torch.unbind).
template <std::int64_t D = 0, Expression X>
auto unbind(const X& x0) {
  const auto x = eval(x0);
  constexpr std::size_t d = detail::static_dim<shape_of<X>, D>();
  std::vector<decltype(x.template select<D>(0))> parts;
  parts.reserve(static_cast<std::size_t>(x.sizes()[d]));
  for (std::int64_t i = 0; i < x.sizes()[d]; ++i) parts.push_back(x.template select<D>(i));
  return parts;
}

namespace detail {
/// The permutation that moves dim Src to position Dst, the others keeping their order.
template <std::size_t R, std::size_t Src, std::size_t Dst>
constexpr std::array<std::int64_t, R> movedim_permutation() {
  std::array<std::int64_t, R> p{};
  std::size_t k = 0;
  for (std::size_t i = 0; i < R; ++i) {
    if (i == Dst) continue;
    if (k == Src) ++k;
    p[i] = static_cast<std::int64_t>(k++);
  }
  p[Dst] = static_cast<std::int64_t>(Src);
  return p;
}
}  // namespace detail
/// movedim<Src, Dst>(x): dim Src moved to position Dst (a view, as torch.movedim).
template <std::int64_t Src, std::int64_t Dst, Expression X>
auto movedim(const X& x) {
  using S = shape_of<X>;
  constexpr std::size_t R = S::rank;
  constexpr std::size_t s = detail::static_dim<S, Src>(), t = detail::static_dim<S, Dst>();
  static constexpr auto p = detail::movedim_permutation<R, s, t>();
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return eval(x).template permute<p[I]...>();
  }(std::make_index_sequence<R>{});
}

/// diagonal<D1, D2>(x, offset = 0): the elements x[..., i, ..., i + offset, ...] of dims D1 and D2,
/// as a new last dim (a view, as torch.diagonal).
template <std::int64_t D1 = 0, std::int64_t D2 = 1, Expression X>
auto diagonal(const X& x0, std::int64_t offset = 0) {
  using S = shape_of<X>;
  constexpr std::size_t R = S::rank;
  static_assert(R >= 2, "tenet: diagonal needs a tensor of rank >= 2");
  constexpr std::size_t a = detail::static_dim<S, D1>(), b = detail::static_dim<S, D2>();
  static_assert(a != b, "tenet: diagonal needs two different dims");
  const auto x = eval(x0);
  const std::int64_t na = x.sizes()[a], nb = x.sizes()[b];
  std::int64_t len = offset >= 0 ? std::min(na, nb - offset) : std::min(na + offset, nb);
  len = std::max<std::int64_t>(len, 0);
  std::int64_t start = x.offset();
  if (len > 0) start += offset >= 0 ? offset * x.strides()[b] : -offset * x.strides()[a];
  static constexpr std::array<std::size_t, R - 2> keep = [] {
    std::array<std::size_t, R - 2> k{};
    for (std::size_t i = 0, j = 0; i < R; ++i)
      if (i != a && i != b) k[j++] = i;
    return k;
  }();
  // (no decltype(lambda) here: nvcc's front end mishandles it)
  using S2 = detail::concat_shapes_t<detail::pick_extents_t<S, keep>, shape<dyn>>;
  sizes_t<R - 1> sizes{}, strides{};
  for (std::size_t i = 0, j = 0; i < R; ++i)
    if (i != a && i != b) sizes[j] = x.sizes()[i], strides[j++] = x.strides()[i];
  sizes[R - 2] = len;
  strides[R - 2] = x.strides()[a] + x.strides()[b];
  return x.template with_layout<S2>(sizes, strides, start);
}

/// diag(x, k = 0): for 1-D x the square matrix with x on its k-th diagonal; for 2-D x a copy of
/// its k-th diagonal (torch.diag).
template <Expression X>
auto diag(const X& x0, std::int64_t k = 0) {
  constexpr std::size_t R = rank_of<X>;
  static_assert(R == 1 || R == 2, "tenet: diag needs a 1-D or 2-D tensor");
  using T = value_type_of<X>;
  const auto x = eval(x0);
  if constexpr (R == 1) {
    // row-major, element i sits at i (m + 1) + k (k >= 0) or i (m + 1) - k m (k < 0) of the m x m
    // result: x with m zeros between its elements, padded at both ends, viewed as m x m
    const std::int64_t n = x.sizes()[0], m = n + (k < 0 ? -k : k);
    const std::int64_t low = n == 0 ? 0 : (k >= 0 ? k : -k * m);
    const std::int64_t high = m * m - low - n - (n > 0 ? (n - 1) * m : 0);
    return Tensor<T, shape<dyn, dyn>>(
        make_node(prim::reshape_<shape<dyn, dyn>>{{m, m}}, make_node(prim::pad_<1>{{low}, {high}, {m}, 0.0}, x)));
  } else {
    return Tensor<T, shape<dyn>>(diagonal<0, 1>(x, k).contiguous());
  }
}

}  // namespace tenet
