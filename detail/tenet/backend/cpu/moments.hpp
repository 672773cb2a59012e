#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// var / std as one CPU kernel (aten::var_, a composite whose decomposition in ops.hpp is the
// reference: mean, centered squares, sum, divide; four kernels there, one here).
//
// The iteration space is the reduction kernel's (backend/cpu/reduce.hpp): kept dims first,
// reduced dims last, each group coalesced; the input is a pointwise tree, so an elementwise
// producer (`var(x * s)`) is fused. The reduced values of one output are taken in chunks of
// `var_chunk` elements copied into a small buffer that stays in L1; each chunk gets two passes
// (its sum, taken while it is copied; then, over the buffer, the sum of squared deviations from
// its mean, corrected for the rounding of the mean: no cancellation of E[x^2] - E[x]^2), and chunk results are merged with
// Chan's formula in double in a fixed order. When there are fewer outputs than threads the
// reduced range is also split into parts per thread, merged the same way, so the input is read
// from memory once and the result does not depend on the thread count for a given split.
// An epilogue (the `sqrt` of std) runs on the finished outputs, as for the reduction kernel.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include <tenet/backend/cpu/elementwise.hpp>
#include <tenet/backend/cpu/reduce.hpp>
#include <tenet/backend/cpu/simd.hpp>

namespace tenet::detail::cpu {

inline constexpr std::int64_t var_chunk = 2048;  // 8 KiB of float: two passes in L1

/// Count, mean and sum of squared deviations of a set of values (double).
struct moments {
  double n = 0, mean = 0, m2 = 0;
  /// Merges the moments of a disjoint set (Chan et al.).
  void merge(const moments& b) {
    if (b.n == 0) return;
    if (n == 0) {
      *this = b;
      return;
    }
    const double t = n + b.n, d = b.mean - mean;
    mean += d * (b.n / t);
    m2 += b.m2 + d * d * (n * b.n / t);
    n = t;
  }
};

/// The moments of x[0, n) (n > 0) whose sum s the caller took while filling x (pass 1); pass 2
/// reads x again (in L1).
template <class T>
moments chunk_moments(const T* x, std::int64_t n, double s) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  std::int64_t i = 0;
  const T m = static_cast<T>(s / static_cast<double>(n));
  const B bm(m);
  B d0(T(0)), d1(T(0)), q0(T(0)), q1(T(0));
  for (; i + 2 * W <= n; i += 2 * W) {
    const B a = B::load_unaligned(x + i) - bm, b = B::load_unaligned(x + i + W) - bm;
    d0 += a;
    d1 += b;
    q0 = xsimd::fma(a, a, q0);
    q1 = xsimd::fma(b, b, q1);
  }
  double sd = static_cast<double>(hsum(d0 + d1)), q = static_cast<double>(hsum(q0 + q1));
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i] - m);
    sd += d;
    q += d * d;
  }
  const double nn = static_cast<double>(n);
  // the mean was rounded to T: correct both moments for it (sd is the sum of deviations from m)
  double m2 = q - sd * sd / nn;
  if (m2 < 0) m2 = 0;  // (rounding; a NaN stays NaN)
  return {nn, static_cast<double>(m) + sd / nn, m2};
}

/// out = var(child) over the dims marked in `mask` with `correction` (out: fresh, contiguous,
/// any keepdim; T float or double); ep runs on finished outputs.
template <class T, class OS, class C, std::size_t Rin, class Ep = no_reduce_epilogue>
void run_var(const Tensor<T, OS>& out, const C& child, const std::array<bool, Rin>& mask_in, double correction,
             const Ep& ep = {}) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "run_var: float or double");
  static_assert(std::is_same_v<value_type_of<C>, T>, "run_var: the input has the output's dtype");
  constexpr std::size_t R = Rin == 0 ? 1 : Rin;
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

  // kept dims, then reduced dims, each group coalesced (as run_reduce)
  const auto arrays = stride_arrays(tree);
  const auto space = coalesce_reduction(in, mask, arrays);
  const std::int64_t K = space.K, N = space.N;
  if (K == 0) return;
  T* o = out.data();
  // the decomposition's divisor: max(0, n - correction) in T (0 / 0 and x / 0 as torch: nan, inf)
  const T denom = static_cast<T>(std::max(0.0, static_cast<double>(N) - correction));
  if (N == 0) {
    for (std::int64_t k = 0; k < K; ++k) o[k] = T(0) / denom;
    ep(o, 0, K);
    return;
  }
  const std::int64_t P = reduce_parts(K, N);
  const std::int64_t chunk = (N + P - 1) / P;
  std::vector<moments> parts(static_cast<std::size_t>(K * P));
  for_reduce_items(K * P, K, N, [&](std::int64_t item) {
    const std::int64_t k = item / P, j = item % P;
    alignas(64) T buf[var_chunk];
    std::int64_t filled = 0;
    moments acc;
    using B = xsimd::batch<T>;
    B vsum(T(0));       // the chunk's sum, taken while it is copied (pass 1)
    double ssum = 0;  // its scalar part
    const std::int64_t e = std::min(N, j * chunk + chunk);
    tree_t t = tree;
    walk_reduced_range(t, space, k, j * chunk, e, [&](std::int64_t col, std::int64_t stop, std::int64_t pos) TENET_INLINE_LAMBDA {
      stop = std::min(stop, col + (var_chunk - filled));
      std::int64_t i = col;
      if constexpr (tree_t::simd && !tree_t::mask && std::is_same_v<typename tree_t::lane, T>) {
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        if (t.unit_inner())
          for (; i + W <= stop; i += W) {
            const B v = t.template load<B>(i);
            v.store_unaligned(buf + filled + (i - col));
            vsum += v;
          }
      }
      for (; i < stop; ++i) {
        const T v = static_cast<T>(t.get(i));
        buf[filled + (i - col)] = v;
        ssum += static_cast<double>(v);
      }
      filled += stop - col;
      if (filled == var_chunk || pos + (stop - col) == e) {
        acc.merge(chunk_moments(buf, filled, static_cast<double>(hsum(vsum)) + ssum));
        filled = 0;
        vsum = B(T(0));
        ssum = 0;
      }
      return stop - col;
    });
    parts[static_cast<std::size_t>(item)] = acc;
  });
  combine_parts(
      parts, K, P, [](moments& a, const moments& b) { a.merge(b); },
      [&](std::int64_t k, const moments& m) { o[k] = static_cast<T>(m.m2) / denom; }, o, ep);
}

}  // namespace tenet::detail::cpu
