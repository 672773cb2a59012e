#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The random prims inside CUDA's fused kernels (nvcc only). The cuda_gpu decomposition turns each
// uniform_ node into a uniform_leaf (backend/cuda/native.hpp: prim_leaf); its pointwise_tree here is a
// virtual contiguous tensor of the draw's extents whose element at offset k is element k of the
// draw: the CPU's Philox range fill element (runtime/philox.hpp: it depends on (seed, offset, k)
// only), computed where the pointwise, reduction or row kernel reads it. So `dropout(x)` on a GPU
// tensor is one kernel reading x and writing y, and gives the CPU's mask bit for bit for one
// manual_seed. Strides are those of a contiguous tensor of the draw's own extents (0 where the
// expression broadcasts it), so every kernel's coalescing and index math treat it as a tensor leaf.
#include <cstdint>

#include <tenet/backend/cuda/native.hpp>     // uniform_leaf
#include <tenet/backend/cuda/pointwise.cuh>  // pointwise_tree, grid_for
#include <tenet/runtime/philox.hpp>

namespace tenet::detail::cuda {

template <class T, class S, std::size_t R>
struct pointwise_tree<uniform_leaf<T, S>, R>;
template <class T, class S, std::size_t R>
struct dpw_draws<pointwise_tree<uniform_leaf<T, S>, R>> : std::true_type {};

template <class T, class S, std::size_t R>
struct pointwise_tree<uniform_leaf<T, S>, R> {
  using value_type = T;
  static constexpr unsigned words = uniform_words_per_element<T>();
  static constexpr int per_block = words == 1 ? 4 : 2;  // elements per Philox block
  std::uint64_t seed, offset;
  std::int64_t st[R];

  pointwise_tree(const uniform_leaf<T, S>& u, const sizes_t<R>& out) : seed(u.seed), offset(u.offset), st{} {
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
    return draws_from<N>(i);
  }
  /// Rows and two-dim layouts (as the tensor leaf's load_rows / load_at).
  template <int N>
  __device__ TENET_INLINE group<N> load_rows(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t j) const {
    std::int64_t k = i0 * st[0];
    if constexpr (R >= 2) k += i1 * st[1];
    if constexpr (R >= 3) k += i2 * st[2];
    if (!st[R - 1]) return group<N>::filled(draw(k));
    return draws_from<N>(k + j);
  }
  template <int N>
  __device__ TENET_INLINE group<N> load_at(std::int64_t i0, std::int64_t i1) const {
    return load_rows<N>(i0, 0, 0, i1);
  }
  /// Elements k .. k + N - 1.
  template <int N>
  __device__ TENET_INLINE group<N> draws_from(std::int64_t k0) const {
    group<N> g;
    uint4x32 block{};
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const std::int64_t k = k0 + j;
      if (j == 0 || k % per_block == 0) block = philox_block(seed, offset, philox_block_of(k, words));
      g.v[j] = uniform_element<T>(block, k, 0.0, 1.0);
    }
    return g;
  }
};

// --- the random factories (rand, randn, randint, *_like) on a CUDA tensor ---------------------
// Each thread fills runs of 4 consecutive elements: one Philox block for one-word kinds, two for
// two-word kinds (double, wide randint), through the range fill the CPU runs, so every element is
// the CPU's for one seed.
template <class T, random_fill::kind_t Kind>
__global__ void fill_random_kernel(T* __restrict__ out, std::int64_t n, random_fill r) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x * 4;
  for (std::int64_t b = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4; b < n; b += step) {
    const std::int64_t e = b + 4 < n ? b + 4 : n;
    if constexpr (Kind == random_fill::uniform)
      fill_uniform_range(out + b, b, e, r.seed, r.offset, r.a, r.b);
    else if constexpr (Kind == random_fill::normal)
      fill_normal_range(out + b, b, e, r.seed, r.offset, r.a, r.b);
    else
      fill_randint_range(out + b, b, e, r.seed, r.offset, r.low, r.high);
  }
}
template <class T>
void fill_random(device dev, T* out, std::int64_t n, const random_fill& r) {
  if (n == 0) return;
  device_context ctx(dev);
  const unsigned grid = grid_for((n + 3) / 4, 256, dev.index);
  if (r.kind == random_fill::randint) {
    fill_random_kernel<T, random_fill::randint><<<grid, 256, 0, current_stream()>>>(out, n, r);
  } else if constexpr (is_floating_v<T>) {
    if (r.kind == random_fill::uniform)
      fill_random_kernel<T, random_fill::uniform><<<grid, 256, 0, current_stream()>>>(out, n, r);
    else
      fill_random_kernel<T, random_fill::normal><<<grid, 256, 0, current_stream()>>>(out, n, r);
  }
  check_launch("the random fill kernel launch");
}

}  // namespace tenet::detail::cuda

namespace tenet::detail {
/// The CUDA backend's random fill (include/tenet/factories.hpp fill_random).
template <class T>
bool run_fill_random(cuda_gpu, device dev, T* out, std::int64_t n, const random_fill& r) {
  cuda::fill_random<T>(dev, out, n, r);
  return true;
}
}  // namespace tenet::detail
