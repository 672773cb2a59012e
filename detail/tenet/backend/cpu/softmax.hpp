#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// softmax / log_softmax over the last dim, run natively (a composite the CPU backend declares).
// One row at a time, three passes over a row that stays in cache: max, exp-and-sum (exp written to
// the output), scale. The decomposition in ops.hpp is the reference it is tested against.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <xsimd/xsimd.hpp>

#include <omp.h>

#include <tenet/backend/cpu/simd.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::cpu {

/// out and x: contiguous, same sizes; rows of length L = last extent.
template <bool Log, class T, class SO, class S>
void run_softmax_last(const Tensor<T, SO>& out, const Tensor<T, S>& x) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  const std::int64_t L = S::rank == 0 ? 1 : x.sizes()[S::rank - 1];
  const std::int64_t rows = n / L;
  const T* in = x.data();
  T* o = out.data();
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  auto row = [&](std::int64_t r) {
    const T* a = in + r * L;
    T* y = o + r * L;
    // pass 1: max. A NaN need not be tracked here: exp(NaN - m) makes the sum NaN in pass 2, and
    // every output of the row is then NaN, as in PyTorch.
    std::int64_t i = 0;
    B m0(-std::numeric_limits<T>::infinity()), m1 = m0;
    for (; i + 2 * W <= L; i += 2 * W) {
      m0 = xsimd::max(m0, B::load_unaligned(a + i));
      m1 = xsimd::max(m1, B::load_unaligned(a + i + W));
    }
    for (; i + W <= L; i += W) m0 = xsimd::max(m0, B::load_unaligned(a + i));
    T m = hmax(xsimd::max(m0, m1));
    for (; i < L; ++i) m = a[i] > m ? a[i] : m;
    if (std::isinf(m) && m < 0) m = T(0);  // all -inf: exp(-inf) = 0, sum 0 -> nan, as torch
    // pass 2: exp(x - m), summed (log_softmax only sums)
    B s0(T(0)), s1(T(0));
    const B bm(m);
    i = 0;
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
  };
  if (rows > 1 && n >= 32768) {
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) row(r);
  } else {
    for (std::int64_t r = 0; r < rows; ++r) row(r);
  }
}

}  // namespace tenet::detail::cpu
