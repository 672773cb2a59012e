#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// CUDA reductions (sum, prod, amax, amin) over any set of dims, with the pointwise child fused
// in as a prologue (nvcc only).
//
// The host reorders the iteration space as the CPU kernel does (kept dims first, reduced dims
// last), coalesces each group, then picks one of two kernels:
// - rows (the innermost input dim is reduced): one block per output, the block's threads stride
//   over the reduced elements, then warp shuffles and one shared-memory step combine them;
// - columns (the innermost dim is kept): one thread per output walks the reduced elements, so
//   that neighbouring threads read neighbouring addresses.
// When there are too few outputs to fill the card and the reduction is long, the reduced range is
// split over grid.y: each part writes a partial result and a second kernel combines the parts.
// Accumulation: float for fp16/bf16/fp32, double for fp64, int64 for integer sums and products.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include <tenet/backend/cuda/pointwise.hpp>
#include <tenet/prims/reduce.hpp>

namespace tenet::detail::cuda {

template <class Kind, class T>
using reduce_acc_t =
    std::conditional_t<(std::is_same_v<Kind, prim::sum_kind> || std::is_same_v<Kind, prim::prod_kind>) &&
                           (std::is_integral_v<T>),
                       std::int64_t, compute_t<T>>;

template <std::size_t R>
struct reduce_layout {
  std::int64_t ksz[R];  // kept sizes (coalesced), nk of them
  std::int64_t rsz[R];  // reduced sizes (coalesced), nr of them
  int nk, nr;
  std::int64_t outputs, length;  // products of ksz and rsz
  std::int64_t chunk;            // reduced elements per split part
};

/// The kept part of the index of output o (once per output).
template <std::size_t R>
__device__ TENET_INLINE void kept_index(const reduce_layout<R>& L, std::int64_t o, std::int64_t* idx) {
  for (int d = L.nk - 1; d >= 0; --d) {
    const std::int64_t q = o / L.ksz[d];
    idx[d] = o - q * L.ksz[d];
    o = q;
  }
}
/// The reduced part of the index of reduced element r (no division when one reduced dim is left).
template <std::size_t R>
__device__ TENET_INLINE void reduced_index(const reduce_layout<R>& L, std::int64_t r, std::int64_t* idx) {
  if (L.nr == 1) {
    idx[L.nk] = r;
    return;
  }
  for (int d = L.nr - 1; d >= 0; --d) {
    const std::int64_t q = r / L.rsz[d];
    idx[L.nk + d] = r - q * L.rsz[d];
    r = q;
  }
}

template <class A>
__device__ TENET_INLINE A shfl_down(A v, int o) {
  if constexpr (sizeof(A) == 8) {
    long long x;
    memcpy(&x, &v, 8);
    x = __shfl_down_sync(0xffffffffu, x, o);
    memcpy(&v, &x, 8);
    return v;
  } else {
    return __shfl_down_sync(0xffffffffu, v, o);
  }
}

/// The combination of every thread's v in the block (valid in thread 0).
template <class Kind, class A>
__device__ A block_reduce(A v, A init) {
  __shared__ alignas(16) unsigned char raw[32 * sizeof(A)];
  A* smem = reinterpret_cast<A*>(raw);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = Kind::combine(v, shfl_down(v, o));
  if (blockDim.x <= 32) return v;
  __syncthreads();  // smem may still be read by a previous call
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  if (warp == 0) {
    v = lane < warps ? smem[lane] : init;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = Kind::combine(v, shfl_down(v, o));
  }
  return v;
}

/// Rows: block (x: outputs, y: split part).
template <class Kind, class A, class Dst, std::size_t R, class Tree>
__global__ void reduce_rows_kernel(Dst* __restrict__ dst, Tree tree, reduce_layout<R> L, A init) {
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * L.chunk;
  const std::int64_t r1 = r0 + L.chunk < L.length ? r0 + L.chunk : L.length;
  for (std::int64_t o = blockIdx.x; o < L.outputs; o += gridDim.x) {
    A acc = init;
    std::int64_t idx[R];
    kept_index(L, o, idx);
    for (std::int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
      reduced_index(L, r, idx);
      acc = Kind::combine(acc, static_cast<A>(tree.at(idx, L.nk + L.nr)));
    }
    acc = block_reduce<Kind>(acc, init);
    if (threadIdx.x == 0) dst[o * gridDim.y + blockIdx.y] = static_cast<Dst>(acc);
  }
}

/// Columns: thread per output (x), split part (y).
template <class Kind, class A, class Dst, std::size_t R, class Tree>
__global__ void reduce_cols_kernel(Dst* __restrict__ dst, Tree tree, reduce_layout<R> L, A init) {
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * L.chunk;
  const std::int64_t r1 = r0 + L.chunk < L.length ? r0 + L.chunk : L.length;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < L.outputs; o += step) {
    A acc = init;
    std::int64_t idx[R];
    kept_index(L, o, idx);
    for (std::int64_t r = r0; r < r1; ++r) {
      reduced_index(L, r, idx);
      acc = Kind::combine(acc, static_cast<A>(tree.at(idx, L.nk + L.nr)));
    }
    dst[o * gridDim.y + blockIdx.y] = static_cast<Dst>(acc);
  }
}

/// out[o] = combine of partial[o * parts .. o * parts + parts).
template <class Kind, class A, class OutT>
__global__ void reduce_parts_kernel(OutT* __restrict__ out, const A* __restrict__ partial, std::int64_t outputs,
                                    int parts, A init) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs; o += step) {
    A acc = init;
    for (int p = 0; p < parts; ++p) acc = Kind::combine(acc, partial[o * parts + p]);
    out[o] = static_cast<OutT>(acc);
  }
}

/// out = reduce<Kind>(child) over the dims marked in mask (out: fresh, contiguous, on the device).
template <class Kind, class OutT, class OS, class C, std::size_t Rin>
void run_reduce(const Tensor<OutT, OS>& out, const C& child, const std::array<bool, Rin>& mask_in) {
  if constexpr (prim::is_arg_kind<Kind>) {
    // argmax / argmin run in lines.hpp (run_arg_reduce); evaluate.hpp never sends them here
    throw device_error(std::string("tenet: internal: ") + std::string(Kind::name) +
                       " reached the CUDA value-reduction kernel");
  } else {
    constexpr std::size_t R = Rin == 0 ? 1 : Rin;
    using T = value_type_of<C>;
    using A = reduce_acc_t<Kind, T>;
    device_context ctx(out.device());
    const int dev = out.device().index;
    const cudaStream_t s = current_stream();
    sizes_t<R> in{};
    std::array<bool, R> mask{};
    if constexpr (Rin == 0) {
      in[0] = 1;
      mask[0] = true;
    } else {
      in = child.sizes();
      mask = mask_in;
    }
    using tree_t = dpw<C, R>;
    tree_t tree(child, in);
    // every leaf's strides reordered (kept dims first, reduced dims last) and coalesced, as on the CPU
    const auto arrays = cpu::stride_arrays(tree);
    const auto space = cpu::coalesce_reduction(in, mask, arrays);
    reduce_layout<R> L{};
    L.nk = static_cast<int>(space.nk);
    L.nr = static_cast<int>(space.nd - space.nk);
    for (std::size_t d = 0; d < space.nk; ++d) L.ksz[d] = space.sizes[d];
    for (std::size_t d = space.nk; d < space.nd; ++d) L.rsz[d - space.nk] = space.sizes[d];
    const std::int64_t outputs = space.K, length = space.N;
    L.outputs = outputs;
    L.length = length;
    if (outputs == 0) return;
    const A init = Kind::template identity<A>();
    if (length == 0) {
      if constexpr (!Kind::has_identity) {
        throw value_error(std::string("tenet: ") + std::string(Kind::name) +
                          "(): cannot reduce over an empty dim (sizes " + sizes_text(in) + "), as PyTorch");
      } else {
        run_pointwise(out, scalar<OutT>{static_cast<OutT>(init)});
        return;
      }
    }
    // the innermost dim with an extent > 1 decides the kernel
    bool rows = false;
    for (std::size_t d = R; d-- > 0;)
      if (in[d] > 1) {
        rows = mask[d];
        break;
      }
    const int sms = sm_count(dev);
    const int threads = rows ? 256 : 128;
    const std::int64_t blocks_x = rows ? outputs : (outputs + threads - 1) / threads;
    int parts = 1;
    if (blocks_x < 2 * sms && length >= 8192) {
      const std::int64_t want = (4 * sms + blocks_x - 1) / blocks_x;
      parts = static_cast<int>(std::clamp<std::int64_t>(std::min<std::int64_t>(want, length / 2048), 1, 65535));
    }
    L.chunk = (length + parts - 1) / parts;
    parts = static_cast<int>((length + L.chunk - 1) / L.chunk);
    const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>(blocks_x, 65535LL * 16)), static_cast<unsigned>(parts));
    OutT* const o = out.data();
    if (parts == 1) {
      if (rows)
        reduce_rows_kernel<Kind, A, OutT, R, tree_t><<<grid, threads, 0, s>>>(o, tree, L, init);
      else
        reduce_cols_kernel<Kind, A, OutT, R, tree_t><<<grid, threads, 0, s>>>(o, tree, L, init);
      check_launch("the reduction kernel launch");
      return;
    }
    auto& alloc = caching_allocator::instance();
    A* partial = static_cast<A*>(alloc.allocate(static_cast<std::size_t>(outputs) * parts * sizeof(A), dev, s));
    if (rows)
      reduce_rows_kernel<Kind, A, A, R, tree_t><<<grid, threads, 0, s>>>(partial, tree, L, init);
    else
      reduce_cols_kernel<Kind, A, A, R, tree_t><<<grid, threads, 0, s>>>(partial, tree, L, init);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) {
      reduce_parts_kernel<Kind, A, OutT><<<grid_for(outputs, 256, dev), 256, 0, s>>>(o, partial, outputs, parts, init);
      e = cudaGetLastError();
    }
    alloc.deallocate(partial);  // stream-ordered: reused only by later work on the same stream
    check(e, "the split reduction kernel launch");
  }
}

}  // namespace tenet::detail::cuda
