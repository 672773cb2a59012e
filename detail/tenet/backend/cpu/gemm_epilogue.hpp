#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// GEMM with a fused pointwise epilogue (schedule/fusion.hpp decides when): out = tree(A · B, ...)
// where `tree` is an elementwise expression that reads the product at the same index it writes
// (bias, activation, residual add, scale, ...). gemm_ex calls the epilogue on every finished C tile
// while the tile is in cache; the epilogue runs the pointwise kernel's tree (`pointwise_tree`, the same code as
// the standalone pointwise kernel, so results are identical) over the tile, reading the tile's
// product through the tree's leaf that views C, and writes the tile in place.
#include <array>
#include <cstdint>
#include <type_traits>

#include <tenet/backend/cpu/elementwise.hpp>
#include <tenet/backend/cpu/gemm.hpp>

namespace tenet::detail::cpu {

/// The epilogue functor: `tree` is a pointwise_tree<E, R> over out's sizes (R >= 2); C's rows are out's leading
/// dims flattened, its columns out's last dim.
template <class T, class Tree, std::size_t R>
struct pointwise_epilogue {
  const Tree* tree;
  sizes_t<R> sizes;

  void operator()(T* c, std::int64_t ldc, std::int64_t row0, std::int64_t col0, std::int64_t rows,
                  std::int64_t cols) const {
    Tree t = *tree;  // per-tile row pointers
    std::array<std::int64_t, R> idx{};
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t rem = row0 + r;
      for (std::size_t d = R - 1; d-- > 0;) {
        idx[d] = rem % sizes[d];
        rem /= sizes[d];
      }
      t.set_row(idx.data(), R);
      T* crow = c + r * ldc - col0;
      std::int64_t i = col0;
      const std::int64_t end = col0 + cols;
      if constexpr (Tree::simd && !Tree::mask && std::is_same_v<typename Tree::lane, T>) {
        using B = xsimd::batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        if (t.unit_inner())
          for (; i + W <= end; i += W) t.template load<B>(i).store_unaligned(crow + i);
      }
      for (; i < end; ++i) crow[i] = static_cast<T>(t.get(i));
    }
  }
};

/// out[..., M, N] = tree, where the tree's product leaf views out itself and the product is
/// a (rows x K, any strides) · b (K x N, any strides); rows = out's leading dims flattened.
template <class T, class S, class E>
void run_gemm_epilogue(const Tensor<T, S>& out, const E& tree_expr, const T* a, std::int64_t ars, std::int64_t acs,
                       const T* b, std::int64_t brs, std::int64_t bcs, std::int64_t rows, std::int64_t N,
                       std::int64_t K) {
  constexpr std::size_t R = S::rank;
  static_assert(R >= 2);
  using tree_t = pointwise_tree<E, R>;
  const tree_t tree(tree_expr, out.sizes());
  gemm_ex<T>(a, ars, acs, b, brs, bcs, out.data(), N, rows, N, K, pointwise_epilogue<T, tree_t, R>{&tree, out.sizes()});
}

}  // namespace tenet::detail::cpu
