#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CPU kernels of the line prims (scan_, sort_) and iota_. A line is the run of elements along
// the prim's dim for one index of the other dims; lines are independent and are split over OpenMP
// threads. The input is any strided tensor (transposed views are read in place); the output is
// contiguous.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <omp.h>

#include <tenet/prims/iota.hpp>
#include <tenet/prims/scan.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::cpu {

/// Work (elements) below which a line kernel runs on one thread.
inline constexpr std::int64_t line_grain = 32768;

/// The lines along dim d of a rank-R index space (a 0-dim tensor is one line of one element).
template <std::size_t R>
struct line_space {
  sizes_t<R> sizes;
  std::size_t d;
  std::int64_t length() const { return R == 0 ? 1 : sizes[d]; }
  std::int64_t count() const {
    std::int64_t n = 1;
    for (std::size_t i = 0; i < R; ++i)
      if (i != d) n *= sizes[i];
    return length() == 0 ? 0 : n;
  }
  /// Offset of the first element of line l in a tensor of strides st.
  std::int64_t base(std::int64_t l, const sizes_t<R>& st) const {
    std::int64_t off = 0;
    for (std::size_t i = R; i-- > 0;) {
      if (i == d) continue;
      off += (l % sizes[i]) * st[i];
      l /= sizes[i];
    }
    return off;
  }
  std::int64_t stride(const sizes_t<R>& st) const { return R == 0 ? 1 : st[d]; }
};

/// Runs body(line) for every line, on several threads when the work is large.
template <class F>
void for_each_line(std::int64_t lines, std::int64_t work, F&& body) {
  if (omp_get_max_threads() > 1 && lines > 1 && work >= line_grain) {
    kernel_flag_collector flags;  // a scan's input may be a tree that divides integers
#pragma omp parallel for schedule(static)
    for (std::int64_t l = 0; l < lines; ++l) {
      body(l);
      flags.collect();
    }
  } else {
    for (std::int64_t l = 0; l < lines; ++l) body(l);
  }
}

/// Scans columns [j0, j1) of the lines that start at a and y (the lines of one group are adjacent
/// along the last dim, strides ij and oj): row by row, so that a row of the block is read once.
template <class Kind, class A, class TO, class TI>
void scan_columns(TO* y, const TI* a, std::int64_t n, std::int64_t is, std::int64_t os, std::int64_t ij,
                  std::int64_t oj, std::int64_t j0, std::int64_t j1) {
  constexpr std::int64_t B = 256;
  A acc[B];
  [[maybe_unused]] std::int64_t at[prim::is_running_arg<Kind> ? B : 1];
  const std::int64_t w = j1 - j0;
  for (std::int64_t i = 0; i < n; ++i) {
    const TI* ar = a + i * is + j0 * ij;
    TO* yr = y + i * os + j0 * oj;
    for (std::int64_t j = 0; j < w; ++j) {
      const A v = static_cast<A>(static_cast<compute_t<TI>>(ar[j * ij]));
      if constexpr (prim::is_running_arg<Kind>) {
        if (i == 0 || Kind::takes_over(v, acc[j])) acc[j] = v, at[j] = i;
        yr[j * oj] = at[j];
      } else {
        acc[j] = i == 0 ? v : Kind::combine(acc[j], v);
        yr[j * oj] = static_cast<TO>(acc[j]);
      }
    }
  }
}

/// out[..., i, ...] = Kind's prefix combination of x along dim d (prims/scan.hpp).
template <class Kind, class TO, class SO, class TI, class SI>
void run_scan(const Tensor<TO, SO>& out, const Tensor<TI, SI>& x, std::size_t d) {
  constexpr std::size_t R = SI::rank;
  const line_space<R> space{x.sizes(), d};
  const std::int64_t n = space.length(), lines = space.count();
  if (lines == 0) return;
  const TI* in = x.data();
  TO* o = out.data();
  const std::int64_t is = space.stride(x.strides()), os = space.stride(out.strides());
  using A = prim::scan_acc_t<Kind, TI>;
  if constexpr (R >= 2) {
    // a scan over an outer dim: lines adjacent along the last dim are scanned together, row by row
    const std::int64_t m = x.sizes()[R - 1];
    if (d != R - 1 && m > 1) {
      constexpr std::int64_t B = 256;
      const std::int64_t groups = lines / m, blocks = (m + B - 1) / B;
      const std::int64_t ij = x.strides()[R - 1], oj = out.strides()[R - 1];
      for_each_line(groups * blocks, lines * n, [&](std::int64_t task) {
        const std::int64_t g = task / blocks, j0 = (task % blocks) * B;
        scan_columns<Kind, A>(o + space.base(g * m, out.strides()), in + space.base(g * m, x.strides()), n, is, os,
                              ij, oj, j0, std::min(m, j0 + B));
      });
      return;
    }
  }
  for_each_line(lines, lines * n, [&](std::int64_t l) {
    const TI* a = in + space.base(l, x.strides());
    TO* y = o + space.base(l, out.strides());
    if constexpr (prim::is_running_arg<Kind>) {
      A best = static_cast<A>(static_cast<compute_t<TI>>(a[0]));
      std::int64_t at = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const A v = static_cast<A>(static_cast<compute_t<TI>>(a[i * is]));
        if (Kind::takes_over(v, best)) best = v, at = i;
        y[i * os] = at;
      }
    } else {
      A acc = static_cast<A>(static_cast<compute_t<TI>>(a[0]));
      y[0] = static_cast<TO>(acc);
      for (std::int64_t i = 1; i < n; ++i) {
        acc = Kind::combine(acc, static_cast<A>(static_cast<compute_t<TI>>(a[i * is])));
        y[i * os] = static_cast<TO>(acc);
      }
    }
  });
}

/// out[i] = op.at(i).
template <class T, class S, class Op>
void run_iota(const Tensor<T, S>& out, const Op& op) {
  T* o = out.data();
  const std::int64_t n = out.numel();
  for_each_line(n, n, [&](std::int64_t i) { o[i] = op.at(i); });
}

}  // namespace tenet::detail::cpu
