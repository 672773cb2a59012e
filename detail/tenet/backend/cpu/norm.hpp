#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// layer_norm and rms_norm over the trailing dims, run natively (composites the CPU backend
// declares; decomp/norm.hpp keeps their decompositions as the reference the tests hold these to).
// One row at a time, while it stays in cache: pass 1 sums the row, pass 2 sums the squared
// deviations from the mean (two passes, as the decomposition: no cancellation of E[x^2] - E[x]^2),
// pass 3 writes (x - mean) * rsqrt(var + eps) * w + b. A row of 1024 floats is 4 KiB, so passes 2
// and 3 read L1; the input is read from memory once and the output written once. The rows come
// from backend/cpu/row_kernel.hpp (a pointwise producer such as a residual add is fused).
#include <cmath>
#include <cstdint>
#include <utility>

#include <xsimd/xsimd.hpp>

#include <tenet/backend/cpu/simd.hpp>

namespace tenet::detail::cpu {

/// The row's mean (0 for rms_norm) and inverse std (inverse rms): pass 1 sums the row, pass 2 the
/// squared deviations from the mean (two passes: no cancellation of E[x^2] - E[x]^2).
template <bool Rms, class T>
std::pair<T, T> norm_moments(const T* a, std::int64_t L, double eps) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  const T inv_n = T(1) / static_cast<T>(L);
  T mean = T(0);
  std::int64_t i = 0;
  if constexpr (!Rms) {
    B s0(T(0)), s1(T(0));
    for (; i + 2 * W <= L; i += 2 * W) {
      s0 += B::load_unaligned(a + i);
      s1 += B::load_unaligned(a + i + W);
    }
    for (; i + W <= L; i += W) s0 += B::load_unaligned(a + i);
    T s = hsum(s0 + s1);
    for (; i < L; ++i) s += a[i];
    mean = s * inv_n;
  }
  const B bm(mean);
  B q0(T(0)), q1(T(0));
  i = 0;
  for (; i + 2 * W <= L; i += 2 * W) {
    const B d0 = B::load_unaligned(a + i) - bm, d1 = B::load_unaligned(a + i + W) - bm;
    q0 = xsimd::fma(d0, d0, q0);
    q1 = xsimd::fma(d1, d1, q1);
  }
  for (; i + W <= L; i += W) {
    const B d = B::load_unaligned(a + i) - bm;
    q0 = xsimd::fma(d, d, q0);
  }
  T q = hsum(q0 + q1);
  for (; i < L; ++i) q += (a[i] - mean) * (a[i] - mean);
  const T rstd = T(1) / std::sqrt(q * inv_n + static_cast<T>(eps));
  return {mean, rstd};
}

/// One row: y[0, L) = norm(a[0, L)) * w (+ b). Rms: no mean, no b (b may be null for layer_norm
/// without a bias). y may be a (in place): the last pass reads and writes the same index.
template <bool Rms, class T>
void norm_row(const T* a, T* y, const T* w, const T* b, std::int64_t L, double eps) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  const auto [mean, rstd] = norm_moments<Rms>(a, L, eps);
  const B bm(mean);
  const B br(rstd);
  std::int64_t i = 0;
  if (b) {
    for (; i + W <= L; i += W)
      xsimd::fma((B::load_unaligned(a + i) - bm) * br, B::load_unaligned(w + i), B::load_unaligned(b + i))
          .store_unaligned(y + i);
    for (; i < L; ++i) y[i] = (a[i] - mean) * rstd * w[i] + b[i];
  } else {
    for (; i + W <= L; i += W) (((B::load_unaligned(a + i) - bm) * br) * B::load_unaligned(w + i)).store_unaligned(y + i);
    for (; i < L; ++i) y[i] = (a[i] - mean) * rstd * w[i];
  }
}

/// One row of layer_norm's (rms_norm's) input gradient: dx[0, L) from x, g and w (decomp/norm.hpp,
/// aten::norm_last_grad): the mean and inverse std again (two passes, as the forward), then the
/// sums of g w and g w xhat, then dx = rstd (g w - mean(g w) - xhat mean(g w xhat)). The row's x
/// and g stay in cache across the passes.
template <bool Rms, class T>
void norm_grad_row(const T* x, const T* g, const T* w, T* dx, std::int64_t L, double eps) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  const T inv_n = T(1) / static_cast<T>(L);
  const auto [mean, rstd] = norm_moments<Rms>(x, L, eps);
  const B bm(mean), br(rstd);
  B a0(T(0)), a1(T(0));  // sums of g w and of g w xhat
  std::int64_t i = 0;
  for (; i + W <= L; i += W) {
    const B gw = B::load_unaligned(g + i) * B::load_unaligned(w + i);
    a0 += gw;
    a1 = xsimd::fma(gw, (B::load_unaligned(x + i) - bm) * br, a1);
  }
  T sg = hsum(a0), sgx = hsum(a1);
  for (; i < L; ++i) {
    const T gw = g[i] * w[i];
    sg += gw;
    sgx += gw * (x[i] - mean) * rstd;
  }
  const T mg = Rms ? T(0) : sg * inv_n, mgx = sgx * inv_n;
  const B bmg(mg), bmgx(mgx);
  for (i = 0; i + W <= L; i += W) {
    const B xhat = (B::load_unaligned(x + i) - bm) * br;
    const B gw = B::load_unaligned(g + i) * B::load_unaligned(w + i);
    (br * (gw - bmg - xhat * bmgx)).store_unaligned(dx + i);
  }
  for (; i < L; ++i) dx[i] = rstd * (g[i] * w[i] - mg - (x[i] - mean) * rstd * mgx);
}

}  // namespace tenet::detail::cpu
