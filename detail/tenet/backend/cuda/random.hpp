#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The random prims inside CUDA's fused kernels (nvcc only). The cuda_gpu decomposition turns each
// uniform_ node into a uniform_leaf (backend/cuda/native.hpp: prim_leaf); its dpw here is a
// virtual contiguous tensor of the draw's extents whose element at offset k is element k of the
// draw: the CPU's Philox range fill element (runtime/philox.hpp: it depends on (seed, offset, k)
// only), computed where the pointwise, reduction or row kernel reads it. So `dropout(x)` on a GPU
// tensor is one kernel reading x and writing y, and gives the CPU's mask bit for bit for one
// manual_seed. Strides are those of a contiguous tensor of the draw's own extents (0 where the
// expression broadcasts it), so every kernel's coalescing and index math treat it as a tensor leaf.
#include <cstdint>

#include <tenet/backend/cuda/native.hpp>     // uniform_leaf
#include <tenet/backend/cuda/pointwise.hpp>  // dpw
#include <tenet/runtime/philox.hpp>

namespace tenet::detail::cuda {

template <class T, class S, std::size_t R>
struct dpw<uniform_leaf<T, S>, R> {
  using value_type = T;
  static constexpr unsigned words = uniform_words_per_element<T>();
  static constexpr int per_block = words == 1 ? 4 : 2;  // elements per Philox block
  std::uint64_t seed, offset;
  std::int64_t st[R];

  dpw(const uniform_leaf<T, S>& u, const sizes_t<R>& out) : seed(u.seed), offset(u.offset), st{} {
    constexpr std::size_t r = S::rank;
    static_assert(r <= R);
    std::int64_t stride = 1;
    for (std::size_t k = r; k-- > 0;) {
      const std::size_t i = k + R - r;
      st[i] = u.extents[k] == out[i] ? stride : 0;
      stride *= u.extents[k];
    }
  }
  template <class F>
  void for_each_strides(F&& f) {
    f(st);
  }
  template <class F>
  void for_each_leaf(F&& f) const {
    f(static_cast<const void*>(nullptr), sizeof(T), st);  // no memory: always "aligned"
  }
  __device__ TENET_INLINE T draw(std::int64_t k) const {
    return uniform_element<T>(philox_block(seed, offset, philox_block_of(k, words)), k, 0.0, 1.0);
  }
  __device__ TENET_INLINE T at(const std::int64_t* idx, int nd) const {
    std::int64_t k = 0;
    for (int d = 0; d < nd; ++d) k += idx[d] * st[d];
    return draw(k);
  }
  __device__ TENET_INLINE T flat(std::int64_t i) const { return draw(st[0] ? i : 0); }
  template <int N>
  using group = value_group<T, N>;
  /// N elements from i (flat layout): one Philox block per per_block elements.
  template <int N>
  __device__ TENET_INLINE group<N> load(std::int64_t i) const {
    if (!st[0]) return group<N>::filled(draw(0));
    group<N> g;
    uint4x32 block{};
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const std::int64_t k = i + j;
      if (j == 0 || k % per_block == 0) block = philox_block(seed, offset, philox_block_of(k, words));
      g.v[j] = uniform_element<T>(block, k, 0.0, 1.0);
    }
    return g;
  }
};

}  // namespace tenet::detail::cuda
