#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CPU kernel the compiled backward's fused regions need beyond a pointwise tree
// (schedule/backward_fusion.hpp declares it): a pointwise gradient written out and summed over
// its rows in the same pass, so bias + gelu's backward is one kernel.
#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <omp.h>

#include <tenet/autograd/graph.hpp>
#include <tenet/backend/cpu/elementwise.hpp>
#include <tenet/backend/evaluate.hpp>  // kernels_launched

namespace tenet::detail::ag {

/// out = x (a fresh contiguous tensor of x's sizes), and rowsum[j] = the sum of out over every dim
/// but the last (a bias gradient), in one pass: each row is summed while it is in L1. The sums are
/// accumulated in double, as reduce_to does (the threads' partial sums are added in thread order).
template <class X>
grad_tensor<value_type_of<X>, rank_of<X>> run_pointwise_rowsum(const X& x, std::vector<double>& rowsum) {
  using T = value_type_of<X>;
  constexpr std::size_t R = rank_of<X>;
  static_assert(R >= 1);
  const auto sizes = x.sizes();
  grad_tensor<T, R> out(sizes);
  const std::int64_t N = sizes[R - 1];
  std::int64_t rows = 1;
  for (std::size_t d = 0; d + 1 < R; ++d) rows *= sizes[d];
  rowsum.assign(static_cast<std::size_t>(N), 0.0);
  ++kernels_launched();
  if (rows * N == 0) return out;
  using tree_t = cpu::pointwise_tree<X, R>;
  const tree_t tree(x, sizes);
  T* const obase = out.data();
  const int threads = rows > 1 && rows * N >= 2 * cpu::pointwise_grain ? omp_get_max_threads() : 1;
  std::vector<std::vector<double>> partial(static_cast<std::size_t>(threads));
  auto body = [&](int tid, int nt) {
    auto& acc = partial[static_cast<std::size_t>(tid)];
    acc.assign(static_cast<std::size_t>(N), 0.0);
    const std::int64_t r0 = rows * tid / nt, r1 = rows * (tid + 1) / nt;
    tree_t t = tree;
    std::array<std::int64_t, R> idx{};
    for (std::int64_t r = r0; r < r1; ++r) {
      std::int64_t rem = r;
      for (std::size_t d = R - 1; d-- > 0;) {
        idx[d] = rem % sizes[d];
        rem /= sizes[d];
      }
      t.set_row(idx.data(), R);
      T* orow = obase + r * N;
      std::int64_t i = 0;
      if constexpr (tree_t::simd && !tree_t::mask && std::is_same_v<typename tree_t::lane, T>) {
        using B = xsimd::batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        if (t.unit_inner())
          for (; i + W <= N; i += W) t.template load<B>(i).store_unaligned(orow + i);
      }
      for (; i < N; ++i) orow[i] = static_cast<T>(t.get(i));
      double* a = acc.data();
      for (std::int64_t j = 0; j < N; ++j) a[j] += static_cast<double>(orow[j]);
    }
  };
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    body(omp_get_thread_num(), omp_get_num_threads());
  } else {
    body(0, 1);
  }
  for (const auto& acc : partial)
    for (std::size_t j = 0; j < acc.size(); ++j) rowsum[j] += acc[j];
  cpu::check_kernel_flags();
  return out;
}

}  // namespace tenet::detail::ag
