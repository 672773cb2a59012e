#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Row kernels with a fused pointwise producer: out (contiguous) is cut into rows of L elements
// (the trailing dims a row kernel works over); fn(a, y) computes one output row y from an input
// row a. The input is either a contiguous Tensor (rows read in place) or a pointwise tree over
// out's index space (schedule/fusion.hpp: the producer of softmax(x * s), layer_norm(x + r), or a
// non-contiguous view): each thread evaluates a row of the tree into the output row, then runs fn
// in place while the row is in cache. The tree's inputs are read once; no intermediate is made.
#include <cstdint>
#include <type_traits>

#include <omp.h>

#include <tenet/backend/cpu/elementwise.hpp>
#include <tenet/backend/cpu/gemm_epilogue.hpp>
#include <tenet/expr/concepts.hpp>

namespace tenet::detail::cpu {

template <class T, class S, class E, class RowFn>
void run_rows(const Tensor<T, S>& out, const E& src, std::int64_t L, RowFn&& fn) {
  const std::int64_t n = out.numel();
  if (n == 0 || L == 0) return;
  const std::int64_t rows = n / L;
  const bool threads = rows > 1 && n >= 32768;
  T* o = out.data();
  if constexpr (TensorType<E>) {
    if (src.is_contiguous()) {
      const T* in = src.data();
      if (threads) {
#pragma omp parallel for schedule(static)
        for (std::int64_t r = 0; r < rows; ++r) fn(in + r * L, o + r * L);
      } else {
        for (std::int64_t r = 0; r < rows; ++r) fn(in + r * L, o + r * L);
      }
      return;
    }
  }
  constexpr std::size_t R = S::rank;
  static_assert(R >= 1);
  using tree_t = pointwise_tree<E, R>;
  const tree_t tree(src, out.sizes());
  const std::int64_t last = out.sizes()[R - 1];
  const std::int64_t sub = L / last;  // rows of the last dim in one row of the kernel
  const pointwise_epilogue<T, tree_t, R> write_row{&tree, out.sizes()};
  auto one = [&](std::int64_t r) {
    T* y = o + r * L;
    write_row(y, last, r * sub, 0, sub, last);
    fn(y, y);
  };
  if (threads) {
    kernel_flag_collector flags;
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      one(r);
      flags.collect();
    }
  } else {
    for (std::int64_t r = 0; r < rows; ++r) one(r);
  }
  check_kernel_flags();
}

}  // namespace tenet::detail::cpu
