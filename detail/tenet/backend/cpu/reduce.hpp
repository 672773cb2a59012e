#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CPU reduction kernel. Its input is a pointwise tree (pointwise_tree), so an elementwise prologue
// (`sum(x * x)`) is fused into the reduction. The iteration space is reordered as
// [kept dims..., reduced dims...], each group coalesced on its own; the reduced range of every
// output is cut into chunks when there are fewer outputs than threads (a full sum of 64 Mi floats
// runs on every core), and chunk results are combined in a fixed order (results do not depend on
// the thread count for a given chunking).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <tenet/backend/cpu/elementwise.hpp>
#include <tenet/prims/reduce.hpp>

namespace tenet::detail::cpu {

inline constexpr std::int64_t reduce_grain = 16384;

/// A reduction's epilogue: called as ep(o, k0, k1) once the outputs o[k0, k1) are written (a
/// block at a time, while they are in cache); it rewrites them in place (schedule/fusion.hpp: the
/// elementwise consumer of the reduced value, `sum(x) / n` of mean). `no_reduce_epilogue` costs
/// nothing.
struct no_reduce_epilogue {
  template <class O>
  void operator()(O*, std::int64_t, std::int64_t) const {}
};
inline constexpr std::int64_t reduce_epilogue_block = 1024;

/// Runs work(item) for every item in [0, items) of a reduction of K outputs of N elements each:
/// on the OpenMP threads when there is enough work, else on this thread; then reports the
/// kernel's flags (check_kernel_flags).
template <class W>
void for_reduce_items(std::int64_t items, std::int64_t K, std::int64_t N, W&& work) {
  if (omp_get_max_threads() > 1 && items > 1 && K * N >= 2 * reduce_grain) {
    kernel_flag_collector flags;
#pragma omp parallel for schedule(static)
    for (std::int64_t item = 0; item < items; ++item) {
      work(item);
      flags.collect();
    }
  } else {
    for (std::int64_t item = 0; item < items; ++item) work(item);
  }
  check_kernel_flags();
}

/// How many parts each output's reduced range is split into: 1, unless there are too few outputs
/// to keep the threads busy and the range is long (item = k * parts + j; reduce_chunk gives j's range).
inline std::int64_t reduce_parts(std::int64_t K, std::int64_t N) {
  const int threads = omp_get_max_threads();
  return K < 2 * threads && N >= 2 * reduce_grain ? std::min<std::int64_t>(N / reduce_grain, 4 * threads) : 1;
}

/// Positions [b, e) of output k's reduced range in a reduce_space, a row segment at a time: t's
/// row is set (tree.set_row), then f(col, stop, pos) handles columns [col, col + n) of the row
/// for some 0 < n <= stop - col (positions pos .. pos + n) and returns n.
template <std::size_t R, class Tree, class F>
TENET_INLINE void walk_reduced_range(Tree& t, const reduce_space<R>& space, std::int64_t k, std::int64_t b, std::int64_t e, F&& f) {
  const auto& sz = space.sizes;
  const std::size_t nk = space.nk, nd = space.nd;
  const std::int64_t L = sz[nd - 1];
  std::array<std::int64_t, R + 1> idx{};
  std::int64_t rem = k;
  for (std::size_t d = nk; d-- > 0;) {
    idx[d] = rem % sz[d];
    rem /= sz[d];
  }
  for (std::int64_t pos = b; pos < e;) {
    const std::int64_t col = pos % L;
    std::int64_t r = pos / L;
    for (std::size_t d = nd - 1; d-- > nk;) {
      idx[d] = r % sz[d];
      r /= sz[d];
    }
    t.set_row(idx.data(), nd);
    pos += f(col, std::min(L, col + (e - pos)), pos);
  }
}

/// Folds each output's parts (parts[k * P + j], j in [0, P)) with merge(a, b), writes the result
/// with store(k, part), and runs the epilogue a block of outputs at a time.
template <class Part, class Merge, class Store, class O, class Ep>
void combine_parts(std::vector<Part>& parts, std::int64_t K, std::int64_t P, Merge&& merge, Store&& store, O* o,
                   const Ep& ep) {
  for (std::int64_t k = 0; k < K; ++k) {
    Part& p = parts[static_cast<std::size_t>(k * P)];
    for (std::int64_t j = 1; j < P; ++j) merge(p, parts[static_cast<std::size_t>(k * P + j)]);
    store(k, p);
    if constexpr (!std::is_same_v<Ep, no_reduce_epilogue>)
      if ((k + 1) % reduce_epilogue_block == 0 || k + 1 == K) ep(o, k / reduce_epilogue_block * reduce_epilogue_block, k + 1);
  }
}

template <class Kind, class T>
struct reduce_acc {
  using type = typename Kind::template acc<T>;
};
template <class T>
struct reduce_acc<prim::argmax_kind, T> {
  using type = compute_t<T>;
};
template <class T>
struct reduce_acc<prim::argmin_kind, T> {
  using type = compute_t<T>;
};

/// One partial result: the accumulator, and for arg kinds the index of the best element.
template <class A>
struct partial {
  A value;
  std::int64_t index = -1;
};

template <class Kind, class A>
TENET_INLINE void fold(partial<A>& p, A v, std::int64_t idx) {
  if constexpr (prim::is_arg_kind<Kind>) {
    if (p.index < 0 || Kind::better(v, p.value)) {
      p.value = v;
      p.index = idx;
    }
  } else {
    p.value = Kind::combine(p.value, v);
  }
}
template <class Kind, class A>
TENET_INLINE void fold(partial<A>& p, const partial<A>& q) {
  if constexpr (prim::is_arg_kind<Kind>) {
    if (q.index >= 0) fold<Kind>(p, q.value, q.index);
  } else {
    p.value = Kind::combine(p.value, q.value);
  }
}

/// Reduces the segment [b, e) of the current row of tree t into p (idx0: linear reduced index of b).
template <class Kind, class A, class Tree>
TENET_INLINE void reduce_segment(partial<A>& p, const Tree& t, std::int64_t b, std::int64_t e, std::int64_t idx0) {
  using T = typename Tree::value_type;
  std::int64_t i = b;
  constexpr bool vector_kind = std::is_same_v<Kind, prim::sum_kind> || std::is_same_v<Kind, prim::amax_kind> ||
                               std::is_same_v<Kind, prim::amin_kind>;
  constexpr bool acc_ok = std::is_same_v<A, T> || (std::is_same_v<Kind, prim::sum_kind> && std::is_same_v<A, double>);
  if constexpr (vector_kind && Tree::simd && !Tree::mask && std::is_same_v<typename Tree::lane, T> && acc_ok) {
    using B = xsimd::batch<T>;
    constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
    if (t.unit_inner() && e - b >= 4 * W) {
      if constexpr (std::is_same_v<Kind, prim::sum_kind>) {
        constexpr std::int64_t block = 256 * W;  // lanes sum at most 256 values before the flush
        while (i + 4 * W <= e) {
          B a0(T(0)), a1(T(0)), a2(T(0)), a3(T(0));
          const std::int64_t stop = std::min(e, i + block);
          for (; i + 4 * W <= stop; i += 4 * W) {
            a0 += t.template load<B>(i);
            a1 += t.template load<B>(i + W);
            a2 += t.template load<B>(i + 2 * W);
            a3 += t.template load<B>(i + 3 * W);
          }
          p.value += static_cast<A>(hsum((a0 + a1) + (a2 + a3)));
        }
      } else {
        B acc(Kind::template identity<T>());
        auto nan = xsimd::batch_bool<T>(false);
        for (; i + W <= e; i += W) {
          const B x = t.template load<B>(i);
          nan = nan | xsimd::isnan(x);
          if constexpr (std::is_same_v<Kind, prim::amax_kind>)
            acc = xsimd::max(acc, x);
          else
            acc = xsimd::min(acc, x);
        }
        T r = std::is_same_v<Kind, prim::amax_kind> ? hmax(acc) : hmin(acc);
        if (xsimd::any(nan)) r = std::numeric_limits<T>::quiet_NaN();
        p.value = Kind::combine(p.value, r);
      }
    }
  }
  for (; i < e; ++i) fold<Kind>(p, static_cast<A>(static_cast<compute_t<T>>(t.get(i))), idx0 + (i - b));
}

/// The column case: the innermost kept dim has unit (or zero) stride for every operand and the
/// innermost reduced dim does not (e.g. sum<0> of a row-major matrix). Each thread then owns a block
/// of output columns and adds whole vectors of them per reduced position, instead of walking
/// strided scalars. Returns false (nothing done) when the case does not apply.
template <class Kind, class A, class OutT, class Tree, class Ep>
bool column_reduce(OutT* o, const Tree& tree, std::int64_t* const* arrays, std::size_t na, const std::int64_t* sz_in,
                   std::size_t nk, std::size_t nd, std::int64_t K, std::int64_t N, const Ep& ep) {
  using T = typename Tree::value_type;
  constexpr bool vector_kind = std::is_same_v<Kind, prim::sum_kind> || std::is_same_v<Kind, prim::amax_kind> ||
                               std::is_same_v<Kind, prim::amin_kind> || std::is_same_v<Kind, prim::prod_kind>;
  if constexpr (!(vector_kind && Tree::simd && !Tree::mask && std::is_same_v<typename Tree::lane, T>)) {
    return false;
  } else {
    using B = xsimd::batch<T>;
    constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
    if (nk == 0 || nd > 63) return false;  // (the local index arrays below hold 64 dims)
    const std::size_t kl = nk - 1;
    const std::int64_t Lk = sz_in[kl];
    if (Lk < W) return false;
    bool kept_unit = true, reduced_unit = true;
    for (std::size_t a = 0; a < na; ++a) {
      kept_unit = kept_unit && (arrays[a][kl] == 0 || arrays[a][kl] == 1);
      reduced_unit = reduced_unit && (arrays[a][nd - 1] == 0 || arrays[a][nd - 1] == 1);
    }
    if (!kept_unit || reduced_unit) return false;
    // new order: kept-outer..., reduced..., kept-last (the row)
    std::array<std::int64_t, 64> sz{};
    std::size_t j = 0;
    for (std::size_t d = 0; d < kl; ++d) sz[j++] = sz_in[d];
    for (std::size_t d = nk; d < nd; ++d) sz[j++] = sz_in[d];
    sz[j++] = Lk;
    for (std::size_t a = 0; a < na; ++a) {
      std::array<std::int64_t, 64> t{};
      std::size_t q = 0;
      for (std::size_t d = 0; d < kl; ++d) t[q++] = arrays[a][d];
      for (std::size_t d = nk; d < nd; ++d) t[q++] = arrays[a][d];
      t[q++] = arrays[a][kl];
      for (std::size_t d = 0; d < nd; ++d) arrays[a][d] = t[d];
    }
    const std::int64_t Ko = K / Lk;
    constexpr std::int64_t block_cols = 1024;
    const std::int64_t nblocks = (Lk + block_cols - 1) / block_cols;
    const std::int64_t items = Ko * nblocks;
    const std::size_t ndim = nd, nouter = kl;
    auto work = [&](std::int64_t item) {
      const std::int64_t ko = item / nblocks, cb = item % nblocks;
      const std::int64_t c0 = cb * block_cols, c1 = std::min(Lk, c0 + block_cols);
      std::array<std::int64_t, 64> idx{};
      std::int64_t rem = ko;
      for (std::size_t d = nouter; d-- > 0;) {
        idx[d] = rem % sz[d];
        rem /= sz[d];
      }
      alignas(64) T acc[block_cols];
      A total[block_cols];
      const T init = static_cast<T>(Kind::template identity<A>());
      for (std::int64_t c = 0; c < c1 - c0; ++c) acc[c] = init, total[c] = Kind::template identity<A>();
      Tree t = tree;
      for (std::int64_t r = 0; r < N; ++r) {
        std::int64_t rr = r;
        for (std::size_t d = ndim - 1; d-- > nouter;) {
          idx[d] = rr % sz[d];
          rr /= sz[d];
        }
        t.set_row(idx.data(), ndim);
        std::int64_t i = c0;
        for (; i + W <= c1; i += W) {
          const B x = t.template load<B>(i);
          B a = B::load_aligned(acc + (i - c0));
          if constexpr (std::is_same_v<Kind, prim::sum_kind>)
            a += x;
          else if constexpr (std::is_same_v<Kind, prim::prod_kind>)
            a *= x;
          else if constexpr (std::is_same_v<Kind, prim::amax_kind>)
            a = xsimd::select(xsimd::isnan(a), a, xsimd::select(xsimd::isnan(x), x, xsimd::max(a, x)));
          else
            a = xsimd::select(xsimd::isnan(a), a, xsimd::select(xsimd::isnan(x), x, xsimd::min(a, x)));
          a.store_aligned(acc + (i - c0));
        }
        for (; i < c1; ++i) acc[i - c0] = static_cast<T>(Kind::combine(static_cast<A>(acc[i - c0]), static_cast<A>(t.get(i))));
        if constexpr (std::is_same_v<Kind, prim::sum_kind>) {
          if ((r & 255) == 255) {  // flush the float lanes into the wider total every 256 rows
            for (std::int64_t c = 0; c < c1 - c0; ++c) total[c] += static_cast<A>(acc[c]), acc[c] = T(0);
          }
        }
      }
      for (std::int64_t c = 0; c < c1 - c0; ++c) {
        const A v = std::is_same_v<Kind, prim::sum_kind> ? total[c] + static_cast<A>(acc[c]) : static_cast<A>(acc[c]);
        o[ko * Lk + c0 + c] = static_cast<OutT>(v);
      }
      if constexpr (!std::is_same_v<Ep, no_reduce_epilogue>) ep(o, ko * Lk + c0, ko * Lk + c1);
    };
    for_reduce_items(items, K, N, work);
    return true;
  }
}

/// out = reduce<Kind>(child) over the dims marked in `mask` (out: fresh, contiguous, any keepdim).
template <class Kind, class OutT, class OS, class C, std::size_t Rin, class Ep = no_reduce_epilogue>
void run_reduce(const Tensor<OutT, OS>& out, const C& child, const std::array<bool, Rin>& mask_in, const Ep& ep = {}) {
  constexpr std::size_t R = Rin == 0 ? 1 : Rin;
  using T = value_type_of<C>;
  using A = typename reduce_acc<Kind, T>::type;
  sizes_t<R> in{};
  std::array<bool, R> mask{};
  if constexpr (Rin == 0) {
    in[0] = 1;
    mask[0] = true;
  } else {
    in = child.sizes();
    mask = mask_in;
  }
  using tree_t = pointwise_tree<C, R>;
  tree_t tree(child, in);

  const auto arrays = stride_arrays(tree);
  const std::size_t na = arrays.size();
  const auto space = coalesce_reduction(in, mask, arrays);
  const auto& sz = space.sizes;
  const std::size_t nk = space.nk, nd = space.nd;
  const std::int64_t K = space.K, N = space.N;
  OutT* o = out.numel() ? out.data() : nullptr;
  if (K == 0) return;
  if (N == 0) {
    if constexpr (Kind::has_identity) {
      for (std::int64_t k = 0; k < K; ++k) o[k] = static_cast<OutT>(Kind::template identity<A>());
      ep(o, 0, K);
      return;
    } else {
      throw value_error(std::string("tenet: ") + std::string(Kind::name) +
                        "(): cannot reduce over a dim of size 0 (there is no identity); sizes " +
                        sizes_text(in.data(), Rin));
    }
  }
  if (column_reduce<Kind, A>(o, tree, arrays.data(), na, sz.data(), nk, nd, K, N, ep)) return;
  const std::int64_t P = reduce_parts(K, N);
  const std::int64_t chunk = (N + P - 1) / P;
  std::vector<partial<A>> parts(static_cast<std::size_t>(K * P));
  for_reduce_items(K * P, K, N, [&](std::int64_t item) {
    const std::int64_t k = item / P, j = item % P;
    partial<A> p{};
    if constexpr (!prim::is_arg_kind<Kind>) p.value = Kind::template identity<A>();
    tree_t t = tree;
    walk_reduced_range(t, space, k, j * chunk, std::min(N, j * chunk + chunk),
                       [&](std::int64_t col, std::int64_t stop, std::int64_t pos) {
                         reduce_segment<Kind>(p, t, col, stop, pos);
                         return stop - col;
                       });
    parts[static_cast<std::size_t>(item)] = p;
  });
  combine_parts(
      parts, K, P, [](partial<A>& a, const partial<A>& b) { fold<Kind>(a, b); },
      [&](std::int64_t k, const partial<A>& p) {
        if constexpr (prim::is_arg_kind<Kind>)
          o[k] = static_cast<OutT>(p.index);
        else
          o[k] = static_cast<OutT>(p.value);
      },
      o, ep);
}

}  // namespace tenet::detail::cpu
