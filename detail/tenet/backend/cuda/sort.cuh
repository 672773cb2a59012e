#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CUDA kernel of sort_ (nvcc only): torch.sort(stable=True) along one dim, values and / or
// int64 indices, with the CPU backend's order (backend/cpu/sort.hpp): NaN is the largest value
// (last ascending, first descending, NaNs in input order), -0.0 and 0.0 are equal, equal values
// keep their input order.
//
// Each element becomes a (key, index) pair. The key is an unsigned integer that orders as the
// value does: floats (fp16 / bf16 through fp32) by their bits, the sign bit flipped for positives
// and every bit for negatives, every NaN the largest key, -0.0 as 0.0; signed integers with the
// sign bit flipped; descending inverts the key. Pairs compare by key, then by index, so every pair
// is distinct and any sorting network gives the one stable order. The values are then read from
// the input at the sorted indices (NaN payloads and -0.0 come through bit for bit).
//
// Sorting network: bitonic, on the line padded to a power of two P with (max key, max index).
//   - P <= 4096 (sort_tile): a block per line (grid-stride over lines), the pairs in shared
//     memory (4096 x 12 bytes at most), log2(P) (log2(P) + 1) / 2 compare-exchange steps.
//   - longer lines: the padded pairs of every line in a global buffer; 4096-element tiles are
//     sorted in shared memory (alternating directions), then for each merge size k = 8192 ... P the
//     steps with distance >= 4096 run one kernel each over global memory and the rest as one
//     shared-memory tile pass. Correct, not fast: log2(P/4096) (log2(P/4096) + 1) / 2 global passes
//     plus log2(P/4096) tile passes (100,000 elements: 15 + 5), each reading and writing the
//     whole buffer; a radix sort would be the fast path for long lines.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include <tenet/backend/cuda/scan_argreduce.cuh>  // line_map
#include <tenet/backend/cuda/pointwise.cuh>  // grid_for
#include <tenet/backend/cuda/runtime.hpp>
#include <tenet/prims/sort.hpp>

namespace tenet::detail::cuda {

/// The sort key of an element of type T: 64 bits for 8-byte types, 32 bits otherwise.
template <class T>
using sort_key_t = std::conditional_t<sizeof(T) == 8, unsigned long long, unsigned int>;

template <class T>
__device__ TENET_INLINE sort_key_t<T> sort_key(T x, bool descending) {
  using K = sort_key_t<T>;
  constexpr K top = K{1} << (8 * sizeof(K) - 1);
  using A = compute_t<T>;
  K k;
  if constexpr (std::is_floating_point_v<A>) {
    static_assert(sizeof(A) == sizeof(K));
    A v = static_cast<A>(x);
    if (v != v) {
      k = ~K{0};  // every NaN: the largest key, the index orders NaNs
    } else {
      if (v == A(0)) v = A(0);  // -0.0 ties with 0.0, as the CPU's comparison
      K u;
      memcpy(&u, &v, sizeof(K));
      k = (u & top) ? ~u : (u | top);
    }
  } else if constexpr (std::is_same_v<T, bool>) {
    k = x ? 1u : 0u;
  } else if constexpr (std::is_signed_v<T>) {
    using SK = std::make_signed_t<K>;
    k = static_cast<K>(static_cast<SK>(x)) ^ top;
  } else {
    k = static_cast<K>(x);
  }
  return descending ? static_cast<K>(~k) : k;
}

inline constexpr int sort_tile = 4096;  // pairs per shared-memory tile (48 KiB with 64-bit keys)

/// The bitonic steps (k, j) for k = kfrom ... kto (doubling) and j = jfrom (for k = kfrom) or
/// k / 2 (later k) down to 1, on a tile of `tile` pairs in shared memory whose first element is at
/// position `base` of its (padded) line: pairs go up where bit k of their position is clear.
/// Ends with a __syncthreads().
template <class K>
__device__ void bitonic_steps(K* sk, int* si, int tile, std::int64_t base, std::int64_t kfrom, std::int64_t kto,
                              std::int64_t jfrom) {
  for (std::int64_t k = kfrom; k <= kto; k <<= 1) {
    for (int j = static_cast<int>(k == kfrom ? jfrom : k >> 1); j > 0; j >>= 1) {
      for (int t = threadIdx.x; t < tile / 2; t += blockDim.x) {
        const int i = 2 * t - (t & (j - 1));  // the t-th position with bit j clear
        const int p = i + j;
        const bool up = ((base + i) & k) == 0;
        const K a = sk[i], b = sk[p];
        const int ia = si[i], ib = si[p];
        const bool greater = a > b || (a == b && ia > ib);
        if (greater == up) {
          sk[i] = b, sk[p] = a;
          si[i] = ib, si[p] = ia;
        }
      }
      __syncthreads();
    }
  }
}

/// Lines of n <= sort_tile elements (padded to P): a block per line, sorted in shared memory,
/// values and / or indices written (strides os along the dim, bases from L).
template <class T, std::size_t R>
__global__ void sort_shared_kernel(T* __restrict__ vout, std::int64_t* __restrict__ iout, const T* __restrict__ x,
                                   line_map<R> L, std::int64_t lines, int n, std::int64_t xs, std::int64_t os, int P,
                                   bool descending) {
  using K = sort_key_t<T>;
  extern __shared__ __align__(16) unsigned char sort_smem[];
  K* sk = reinterpret_cast<K*>(sort_smem);
  int* si = reinterpret_cast<int*>(sk + P);
  for (std::int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
    std::int64_t a, b;
    L.base(l, a, b);
    for (int i = threadIdx.x; i < P; i += blockDim.x) {
      if (i < n) {
        sk[i] = sort_key(x[a + i * xs], descending);
        si[i] = i;
      } else {
        sk[i] = ~K{0};
        si[i] = INT_MAX;
      }
    }
    __syncthreads();
    bitonic_steps(sk, si, P, 0, 2, P, 1);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const int j = si[i];
      if (vout) vout[b + i * os] = x[a + j * xs];
      if (iout) iout[b + i * os] = j;
    }
    __syncthreads();  // the next line overwrites the tile
  }
}

/// Long lines, first pass: the padded pairs of tile t (every line's P positions, one after the
/// other) made from x and sorted in shared memory (bitonic steps k = 2 ... sort_tile).
/// Later passes (from_x = false): the tile loaded from the buffer, steps (k, sort_tile / 2 ... 1).
template <class T, std::size_t R>
__global__ void sort_tile_kernel(sort_key_t<T>* __restrict__ gk, int* __restrict__ gi, const T* __restrict__ x,
                                 line_map<R> L, std::int64_t tiles, std::int64_t n, std::int64_t xs, std::int64_t P,
                                 bool descending, bool from_x, std::int64_t k) {
  using K = sort_key_t<T>;
  extern __shared__ __align__(16) unsigned char sort_smem[];
  K* sk = reinterpret_cast<K*>(sort_smem);
  int* si = reinterpret_cast<int*>(sk + sort_tile);
  for (std::int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const std::int64_t g0 = t * sort_tile;
    const std::int64_t pos0 = g0 & (P - 1);
    if (from_x) {
      std::int64_t a, b;
      L.base(g0 / P, a, b);
      for (int i = threadIdx.x; i < sort_tile; i += blockDim.x) {
        const std::int64_t pos = pos0 + i;
        if (pos < n) {
          sk[i] = sort_key(x[a + pos * xs], descending);
          si[i] = static_cast<int>(pos);
        } else {
          sk[i] = ~K{0};
          si[i] = INT_MAX;
        }
      }
    } else {
      for (int i = threadIdx.x; i < sort_tile; i += blockDim.x) sk[i] = gk[g0 + i], si[i] = gi[g0 + i];
    }
    __syncthreads();
    if (from_x)
      bitonic_steps(sk, si, sort_tile, pos0, 2, sort_tile, 1);
    else
      bitonic_steps(sk, si, sort_tile, pos0, k, k, sort_tile / 2);
    for (int i = threadIdx.x; i < sort_tile; i += blockDim.x) gk[g0 + i] = sk[i], gi[g0 + i] = si[i];
    __syncthreads();
  }
}

/// One bitonic step (k, j) (j >= sort_tile) over the global buffer of every line's P pairs.
template <class K>
__global__ void sort_global_step_kernel(K* __restrict__ gk, int* __restrict__ gi, std::int64_t pairs, std::int64_t P,
                                        std::int64_t k, std::int64_t j) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < pairs; t += step) {
    const std::int64_t i = 2 * t - (t & (j - 1));
    const std::int64_t p = i + j;
    const bool up = ((i & (P - 1)) & k) == 0;
    const K a = gk[i], b = gk[p];
    const int ia = gi[i], ib = gi[p];
    const bool greater = a > b || (a == b && ia > ib);
    if (greater == up) {
      gk[i] = b, gk[p] = a;
      gi[i] = ib, gi[p] = ia;
    }
  }
}

/// Long lines, last pass: the first n sorted indices of each line, and the values they pick.
template <class T, std::size_t R>
__global__ void sort_write_kernel(T* __restrict__ vout, std::int64_t* __restrict__ iout, const int* __restrict__ gi,
                                  const T* __restrict__ x, line_map<R> L, std::int64_t total, std::int64_t n,
                                  std::int64_t xs, std::int64_t os, std::int64_t P) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < total; g += step) {
    const std::int64_t l = g / n, i = g - l * n;
    std::int64_t a, b;
    L.base(l, a, b);
    const std::int64_t j = gi[l * P + i];
    if (vout) vout[b + i * os] = x[a + j * xs];
    if (iout) iout[b + i * os] = j;
  }
}

/// Sorts x (any strides, rank >= 1) along dim d into vout and / or iout (either may be null): both
/// of x's sizes with the strides ostr, on x's device.
template <class T, std::size_t R, class S>
void run_sort_lines(T* vout, std::int64_t* iout, const sizes_t<R>& ostr, const Tensor<T, S>& x, std::size_t d,
                    bool descending) {
  static_assert(R >= 1);
  using K = sort_key_t<T>;
  const std::int64_t n = x.sizes()[d];
  std::int64_t lines = 1;
  for (std::size_t i = 0; i < R; ++i)
    if (i != d) lines *= x.sizes()[i];
  if (lines == 0 || n == 0) return;
  if (n > (std::int64_t{1} << 30))
    throw value_error("tenet: sort on CUDA: a line of " + std::to_string(n) +
                      " elements is longer than the kernel's limit of 2^30 (sizes " + sizes_text(x.sizes()) + ")");
  const device dev = x.device();
  device_context ctx(dev);
  const cudaStream_t s = current_stream();
  const int di = dev.index;
  const auto L = make_line_map<R>(x.sizes(), d, x.strides(), ostr);
  const std::int64_t xs = x.strides()[d], os = ostr[d];
  std::int64_t P = 1;
  while (P < n) P <<= 1;
  const std::size_t pair_bytes = sizeof(K) + sizeof(int);
  if (P <= sort_tile) {
    const int threads = static_cast<int>(std::clamp<std::int64_t>(P / 2, 32, 512));
    const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(lines, 65535LL * 8));
    sort_shared_kernel<T, R><<<blocks, threads, static_cast<std::size_t>(P) * pair_bytes, s>>>(
        vout, iout, x.data(), L, lines, static_cast<int>(n), xs, os, static_cast<int>(P), descending);
    check_launch("the sort kernel launch");
    return;
  }
  // long lines: the padded pairs of every line in global memory
  const std::int64_t total = lines * P, tiles = total / sort_tile;
  Tensor<std::int64_t, shape<dyn>> keys_buf(sizes_t<1>{(total * static_cast<std::int64_t>(sizeof(K)) + 7) / 8}, dev);
  Tensor<std::int32_t, shape<dyn>> idx_buf(sizes_t<1>{total}, dev);
  K* gk = reinterpret_cast<K*>(keys_buf.data());
  int* gi = idx_buf.data();
  const unsigned tile_blocks = static_cast<unsigned>(std::min<std::int64_t>(tiles, 65535LL * 8));
  const std::size_t tile_bytes = static_cast<std::size_t>(sort_tile) * pair_bytes;
  sort_tile_kernel<T, R><<<tile_blocks, 512, tile_bytes, s>>>(gk, gi, x.data(), L, tiles, n, xs, P, descending, true, 0);
  check_launch("the sort kernel launch");
  for (std::int64_t k = 2 * sort_tile; k <= P; k <<= 1) {
    for (std::int64_t j = k >> 1; j >= sort_tile; j >>= 1) {
      sort_global_step_kernel<K><<<grid_for(total / 2, 256, di), 256, 0, s>>>(gk, gi, total / 2, P, k, j);
      check_launch("the sort kernel launch");
    }
    sort_tile_kernel<T, R><<<tile_blocks, 512, tile_bytes, s>>>(gk, gi, x.data(), L, tiles, n, xs, P, descending, false, k);
    check_launch("the sort kernel launch");
  }
  sort_write_kernel<T, R><<<grid_for(lines * n, 256, di), 256, 0, s>>>(vout, iout, gi, x.data(), L, lines * n, n, xs,
                                                                         os, P);
  check_launch("the sort kernel launch");
  // the buffers go back to the caching allocator on this stream when the tensors die here
}

/// values and / or indices (contiguous, x's sizes, on x's device; either may be null) = x sorted
/// along dim d.
template <class T, class S, class TV, class SV, class SI>
void run_sort(const Tensor<T, S>& x, std::size_t d, bool descending, const Tensor<TV, SV>* values,
              const Tensor<std::int64_t, SI>* indices) {
  static_assert(std::is_same_v<T, TV>);
  if constexpr (S::rank == 0) {
    const auto x1 = x.template reshape<1>();
    T* vp = values ? values->data() : nullptr;
    std::int64_t* ip = indices ? indices->data() : nullptr;
    run_sort_lines<T, 1>(vp, ip, sizes_t<1>{1}, x1, 0, descending);
  } else {
    sizes_t<S::rank> ostr{};
    if (values)
      for (std::size_t i = 0; i < S::rank; ++i) ostr[i] = values->strides()[i];
    else
      for (std::size_t i = 0; i < S::rank; ++i) ostr[i] = indices->strides()[i];
    if (values && indices)
      for (std::size_t i = 0; i < S::rank; ++i)
        if (values->strides()[i] != indices->strides()[i] && x.sizes()[i] > 1)
          throw value_error("tenet: sort on CUDA: values and indices need one layout");
    run_sort_lines<T, S::rank>(values ? values->data() : nullptr, indices ? indices->data() : nullptr, ostr, x, d,
                               descending);
  }
}

template <class Op>
struct sort_op : std::false_type {};
template <std::int64_t D, prim::sort_output O>
struct sort_op<prim::sort_<D, O>> : std::true_type {
  static constexpr bool values = O == prim::sort_output::values;
};

}  // namespace tenet::detail::cuda
