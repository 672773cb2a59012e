#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// softmax / log_softmax over the last dim, run natively (a composite the CPU backend declares).
// One row at a time, three passes over a row that stays in cache: max, exp-and-sum (exp written to
// the output), scale. The decomposition in ops.hpp is the reference it is tested against. The rows
// come from backend/cpu/row_kernel.hpp (a pointwise producer is fused: it writes the row first).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <xsimd/xsimd.hpp>

#include <omp.h>

#include <tenet/backend/cpu/simd.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::cpu {

/// One row: y[0, L) = softmax (or log_softmax) of a[0, L). y may be a (in place): every pass reads
/// and writes the same index.
template <bool Log, class T>
void softmax_row(const T* a, T* y, std::int64_t L) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  // pass 1: max. A NaN need not be tracked here: exp(NaN - m) makes the sum NaN in pass 2, and
  // every output of the row is then NaN, as in PyTorch.
  T m = row_max(a, L);
  if (std::isinf(m) && m < 0) m = T(0);  // all -inf: exp(-inf) = 0, sum 0 -> nan, as torch
  // pass 2: exp(x - m), summed (log_softmax only sums)
  B s0(T(0)), s1(T(0));
  const B bm(m);
  std::int64_t i = 0;
  for (; i + 2 * W <= L; i += 2 * W) {
    const B e0 = xsimd::exp(B::load_unaligned(a + i) - bm);  // x - m <= 0: no overflow
    const B e1 = xsimd::exp(B::load_unaligned(a + i + W) - bm);
    if constexpr (!Log) {
      e0.store_unaligned(y + i);
      e1.store_unaligned(y + i + W);
    }
    s0 += e0;
    s1 += e1;
  }
  for (; i + W <= L; i += W) {
    const B e = xsimd::exp(B::load_unaligned(a + i) - bm);
    if constexpr (!Log) e.store_unaligned(y + i);
    s0 += e;
  }
  T s = hsum(s0 + s1);
  for (; i < L; ++i) {
    const T e = std::exp(a[i] - m);
    if constexpr (!Log) y[i] = e;
    s += e;
  }
  // pass 3
  i = 0;
  if constexpr (Log) {
    // (x - m) - log(s): adding log(s) to m first would round it at m's magnitude
    const T ls = std::log(s);
    const B bl(ls);
    for (; i + W <= L; i += W) ((B::load_unaligned(a + i) - bm) - bl).store_unaligned(y + i);
    for (; i < L; ++i) y[i] = (a[i] - m) - ls;
  } else {
    const T inv = T(1) / s;
    const B bi(inv);
    for (; i + W <= L; i += W) (B::load_unaligned(y + i) * bi).store_unaligned(y + i);
    for (; i < L; ++i) y[i] *= inv;
  }
}

}  // namespace tenet::detail::cpu
