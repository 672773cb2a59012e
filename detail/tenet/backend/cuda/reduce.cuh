#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// CUDA reductions (sum, prod, amax, amin) over any set of dims, with the pointwise child fused
// in as a prologue (nvcc only).
//
// Two-dim inputs first: when the iteration space, reordered and coalesced as below, is [K, N]
// (one kept dim, or none, and one reduced dim) and every leaf of the child has stride 0 or 1 on
// the reduced dim (rows) or on the kept dim (columns), each leaf is read as 16-byte groups along
// that dim, its other stride anything (a row-broadcast mean, a sliced row, a transposed view):
// - rows: a warp per row (a block per row, split over grid.y, when there are few long rows),
//   four groups in flight per thread, then warp shuffles;
// - columns: 32 threads side by side each own a group of adjacent outputs, 8 threads of a block
//   go down the rows, and the parts meet in shared memory; the rows are split over grid.y until
//   the card is full.
// Other inputs: the host reorders the iteration space as the CPU kernel does (kept dims first,
// reduced dims last), coalesces each group, then picks one of two kernels:
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

#include <tenet/backend/cuda/pointwise.cuh>
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

/// Rows: output o (times gridDim.y parts) combines elements (o, r0) .. (o, r1 - 1) of the tree's
/// two-dim layout (load_at), r0 and r1 multiples of V. tpr threads per row: 32 (a warp per row,
/// blockDim / 32 rows per block) or blockDim.x (a block per row).
template <class Kind, class A, class Dst, class Tree, int V>
__global__ void reduce_2d_rows_kernel(Dst* __restrict__ dst, Tree tree, std::int64_t K, std::int64_t N,
                                        std::int64_t chunk, int tpr, A init) {
  constexpr int U = 4;
  const int t = static_cast<int>(threadIdx.x) % tpr;
  const int rows_per_block = static_cast<int>(blockDim.x) / tpr;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * chunk;
  const std::int64_t r1 = r0 + chunk < N ? r0 + chunk : N;
  const std::int64_t step = static_cast<std::int64_t>(tpr) * V;
  for (std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * rows_per_block + threadIdx.x / tpr; o < K;
       o += static_cast<std::int64_t>(gridDim.x) * rows_per_block) {
    A lane_acc[V];  // one accumulator per lane of a group: V independent chains, not one
#pragma unroll
    for (int j = 0; j < V; ++j) lane_acc[j] = init;
    for (std::int64_t i = r0 + static_cast<std::int64_t>(t) * V; i < r1; i += U * step) {
      typename Tree::template group<V> v[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (i + u * step < r1) v[u] = tree.template load_at<V>(o, i + u * step);
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (i + u * step < r1) {
#pragma unroll
          for (int j = 0; j < V; ++j) lane_acc[j] = Kind::combine(lane_acc[j], static_cast<A>(v[u][j]));
        }
    }
    A acc = lane_acc[0];
#pragma unroll
    for (int j = 1; j < V; ++j) acc = Kind::combine(acc, lane_acc[j]);
    if (tpr == 32) {
#pragma unroll
      for (int s = 16; s > 0; s >>= 1) acc = Kind::combine(acc, shfl_down(acc, s));
    } else {
      acc = block_reduce<Kind>(acc, init);
    }
    if (t == 0) dst[o * gridDim.y + blockIdx.y] = static_cast<Dst>(acc);
  }
}

/// Columns: element (r, o) of the tree's two-dim layout (load_at: r outer, o along the vector
/// dim). Thread x of a (32, 8) block owns outputs
/// [V * (blockIdx.x * 32 + x), + V); the 8 rows of threads take rows r0 + y, r0 + y + 8, ... < r1
/// and meet in shared memory.
template <class Kind, class A, class Dst, class Tree, int V>
__global__ void reduce_2d_cols_kernel(Dst* __restrict__ dst, Tree tree, std::int64_t K, std::int64_t N,
                                        std::int64_t chunk, A init) {
  constexpr int U = 4;
  __shared__ alignas(16) unsigned char raw[8 * 32 * V * sizeof(A)];
  A(*part)[32][V] = reinterpret_cast<A(*)[32][V]>(raw);
  const std::int64_t c = (static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x) * V;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * chunk;
  const std::int64_t r1 = r0 + chunk < N ? r0 + chunk : N;
  A acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = init;
  if (c < K) {
    for (std::int64_t r = r0 + threadIdx.y; r < r1; r += 8 * U) {
      typename Tree::template group<V> v[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (r + 8 * u < r1) v[u] = tree.template load_at<V>(r + 8 * u, c);
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (r + 8 * u < r1) {
#pragma unroll
          for (int j = 0; j < V; ++j) acc[j] = Kind::combine(acc[j], static_cast<A>(v[u][j]));
        }
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) part[threadIdx.y][threadIdx.x][j] = acc[j];
  __syncthreads();
  if (threadIdx.y == 0 && c < K) {
    for (int y = 1; y < 8; ++y)
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] = Kind::combine(acc[j], part[y][threadIdx.x][j]);
#pragma unroll
    for (int j = 0; j < V; ++j) dst[(c + j) * gridDim.y + blockIdx.y] = static_cast<Dst>(acc[j]);
  }
}

/// out[o] = combine of partial[o * parts .. o * parts + parts): a warp per output, its lanes
/// reading neighbouring parts.
template <class Kind, class A, class OutT>
__global__ void reduce_parts_kernel(OutT* __restrict__ out, const A* __restrict__ partial, std::int64_t outputs,
                                    int parts, A init) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const std::int64_t warps = blockDim.x / 32;
  for (std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * warps + threadIdx.x / 32; o < outputs;
       o += static_cast<std::int64_t>(gridDim.x) * warps) {
    A acc = init;
    for (int p = lane; p < parts; p += 32) acc = Kind::combine(acc, partial[o * parts + p]);
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) acc = Kind::combine(acc, shfl_down(acc, s));
    if (lane == 0) out[o] = static_cast<OutT>(acc);
  }
}

/// Runs launch(dst) with dst = out's data (parts == 1) or a buffer of outputs * parts partial
/// results that reduce_parts_kernel then combines into out.
template <class Kind, class A, class OutT, class F>
void launch_split(OutT* out, std::int64_t outputs, int parts, A init, int dev, cudaStream_t s, F&& launch) {
  if (parts == 1) {
    launch(out);
    check_launch("the reduction kernel launch");
    return;
  }
  auto& alloc = caching_allocator::instance();
  A* partial = static_cast<A*>(alloc.allocate(static_cast<std::size_t>(outputs) * parts * sizeof(A), dev, s));
  launch(partial);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) {
    reduce_parts_kernel<Kind, A, OutT><<<grid_for(outputs * 32, 256, dev), 256, 0, s>>>(out, partial, outputs, parts, init);
    e = cudaGetLastError();
  }
  alloc.deallocate(partial);  // stream-ordered: reused only by later work on the same stream
  check(e, "the split reduction kernel launch");
}

/// Parts to split a reduction of `length` elements into: none when `blocks` already fill the
/// card (`want` blocks) or the reduction is short, else enough for `want`, each part at least
/// `min_part` long.
inline int split_parts(std::int64_t blocks, std::int64_t want, std::int64_t length, std::int64_t min_part) {
  if (blocks >= want || length < 2 * min_part) return 1;
  return static_cast<int>(std::clamp<std::int64_t>(std::min((want + blocks - 1) / blocks, length / min_part), 1, 65535));
}

/// The destination of run_2d_reduce: a pointer, or a callable returning one, called only once the
/// layout is accepted (a buffer allocated then, never for a layout that falls back).
template <class O>
auto out_pointer(O&& o) {
  if constexpr (std::is_pointer_v<std::remove_cvref_t<O>>) return o;
  else return o();
}

/// The two-dim paths (top of the file): false, and nothing launched, when the input allows
/// neither (kept or reduced dims that do not coalesce into one, no dim along which every leaf has
/// stride 0 or 1, rows or columns not a whole number of 16-byte groups, a leaf whose groups would
/// not be aligned). `tree` is a copy: its strides are rewritten for load_at. `dst`: out_pointer.
template <class Kind, class A, class Dst, class Tree, std::size_t R>
bool run_2d_reduce(Dst&& dst, Tree tree, const sizes_t<R>& in, const std::array<bool, R>& mask, A init, int dev,
                     cudaStream_t s) {
  const auto space = cpu::coalesce_reduction(in, mask, cpu::stride_arrays(tree));
  const std::size_t nk = space.nk;
  if (nk > 1 || space.nd != nk + 1) return false;
  const std::int64_t K = space.K, N = space.N;
  bool rows = true, cols = nk == 1;
  tree.for_each_leaf([&](const void*, std::size_t, const std::int64_t* st) {
    if (st[nk] != 0 && st[nk] != 1) rows = false;
    if (nk == 1 && st[0] != 0 && st[0] != 1) cols = false;
  });
  if (!rows && !cols) return false;
  using T = typename Tree::value_type;
  constexpr int VR = 16 / sizeof(T) > 0 ? static_cast<int>(16 / sizeof(T)) : 1;
  constexpr int VC = std::min<int>(VR, std::max<int>(1, static_cast<int>(64 / sizeof(A))));  // <= 16 KB of smem
  const int V = rows ? VR : VC;
  if ((rows ? N : K) % V != 0) return false;
  // the vector dim (stride 0 or 1) and the outer dim of every leaf; a leaf read as vectors must
  // keep every group aligned: its start and its outer stride
  const std::size_t vec = rows ? nk : 0, outer = rows ? 0 : 1;
  bool ok = true;
  tree.for_each_leaf([&](const void* p, std::size_t size, const std::int64_t* st) {
    const std::int64_t o = nk == 1 || !rows ? st[outer] : 0;
    if (st[vec] == 1 && !groups_aligned(p, size, V, o)) ok = false;
  });
  if (!ok) return false;
  if (!rows && (K / VC + 31) / 32 > 0x7fffffffLL) return false;  // the columns kernel's grid.x
  auto* const out = out_pointer(std::forward<Dst>(dst));
  // load_at's layout: the outer stride in slot 0, the vector dim's in slot R - 1
  tree.for_each_strides([&](std::int64_t* st) {
    const std::int64_t v = st[vec], o = nk == 1 || !rows ? st[outer] : 0;
    st[0] = o;
    st[R - 1] = v;
  });
  const int sms = sm_count(dev);
  if (rows) {
    // a warp per row when the rows fill the card or are short, else a block per row
    const bool warp_rows = K >= 16LL * sms || N / V <= 512;
    const int tpr = warp_rows ? 32 : 256;
    const std::int64_t blocks = warp_rows ? (K + 7) / 8 : K;
    int parts = warp_rows ? 1 : split_parts(blocks, 4LL * sms, N, 2048);
    const std::int64_t chunk = ((N + parts - 1) / parts + V - 1) / V * V;
    parts = static_cast<int>((N + chunk - 1) / chunk);
    const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>(blocks, 65535LL * 16)), static_cast<unsigned>(parts));
    launch_split<Kind>(out, K, parts, init, dev, s, [&](auto* dst) {
      using D = std::remove_pointer_t<decltype(dst)>;
      reduce_2d_rows_kernel<Kind, A, D, Tree, VR><<<grid, 256, 0, s>>>(dst, tree, K, N, chunk, tpr, init);
    });
  } else {
    const std::int64_t blocks = (K / VC + 31) / 32;
    int parts = split_parts(blocks, 8LL * sms, N, 32);
    const std::int64_t chunk = (N + parts - 1) / parts;
    parts = static_cast<int>((N + chunk - 1) / chunk);
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(parts)), block(32, 8);
    launch_split<Kind>(out, K, parts, init, dev, s, [&](auto* dst) {
      using D = std::remove_pointer_t<decltype(dst)>;
      reduce_2d_cols_kernel<Kind, A, D, Tree, VC><<<grid, block, 0, s>>>(dst, tree, K, N, chunk, init);
    });
  }
  return true;
}

template <class Kind, class OutT, class OS, class C, std::size_t Rin>
void run_reduce(const Tensor<OutT, OS>& out, const C& child, const std::array<bool, Rin>& mask_in);

/// A kept dim between two reduced ones after coalescing, [K | R1, L] (BatchNorm's statistics over
/// N, H, W of NCHW: K = C, R1 = N, L = H * W), where every leaf steps R1 by K times its kept stride
/// and L by 0 or 1: two two-dim reductions instead of the kernel that computes each element's
/// index. Rows first, R1 * K rows of L into a [R1, K] buffer of accumulators (row o = r1 * K + k
/// starts at o times the kept stride), then columns, the R1 partial results of each output.
/// `tree`'s strides are the coalesced ones (slots 0, 1, 2); false, nothing launched, when the
/// layout does not fit or the rows pass declines it (rows not of whole 16-byte groups, ...).
template <class Kind, class A, class OutT, class OS, class Tree, std::size_t R>
bool run_two_stage_reduce(const Tensor<OutT, OS>& out, const Tree& tree, const cpu::reduce_space<R>& space, A init, int dev,
                          cudaStream_t s) {
  if constexpr (R < 3) {
    return false;
  } else {
    if (space.nk != 1 || space.nd != 3) return false;
    const std::int64_t K = space.sizes[0], R1 = space.sizes[1], L = space.sizes[2];
    bool fits = true;
    Tree rows_tree = tree;  // strides for the rows pass: kept (outer) in slot 0, L's in slot 1
    rows_tree.for_each_strides([&](std::int64_t* st) {
      if ((st[2] != 0 && st[2] != 1) || st[1] != K * st[0]) fits = false;
      st[1] = st[2];
      for (std::size_t d = 2; d < R; ++d) st[d] = 0;
    });
    if (!fits) return false;
    sizes_t<R> in{};
    std::array<bool, R> mask{};
    in.fill(1);
    in[0] = R1 * K;
    in[1] = L;
    mask[1] = true;
    Tensor<A, shape<dyn, dyn>> partial;  // allocated only when the rows pass takes the layout
    const auto make_partial = [&] {
      partial = Tensor<A, shape<dyn, dyn>>(sizes_t<2>{R1, K}, out.device());
      return partial.data();
    };
    if (!run_2d_reduce<Kind>(make_partial, rows_tree, in, mask, init, dev, s)) return false;
    run_reduce<Kind>(out, partial, std::array<bool, 2>{true, false});
    return true;
  }
}

/// out = reduce<Kind>(child) over the dims marked in mask (out: fresh, contiguous, on the device).
template <class Kind, class OutT, class OS, class C, std::size_t Rin>
void run_reduce(const Tensor<OutT, OS>& out, const C& child, const std::array<bool, Rin>& mask_in) {
  if constexpr (prim::is_arg_kind<Kind>) {
    // argmax / argmin run in scan_argreduce.cuh (run_arg_reduce); evaluate.hpp never sends them here
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
    std::int64_t outputs = 1, length = 1;
    for (std::size_t d = 0; d < R; ++d) (mask[d] ? length : outputs) *= in[d];
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
    using tree_t = pointwise_tree<C, R>;
    tree_t tree(child, in);
    OutT* const o = out.data();
    if (run_2d_reduce<Kind>(o, tree, in, mask, init, dev, s)) return;
    // every leaf's strides reordered (kept dims first, reduced dims last) and coalesced, as on the CPU
    const auto arrays = cpu::stride_arrays(tree);
    const auto space = cpu::coalesce_reduction(in, mask, arrays);
    if (run_two_stage_reduce<Kind>(out, tree, space, init, dev, s)) return;
    reduce_layout<R> L{};
    L.nk = static_cast<int>(space.nk);
    L.nr = static_cast<int>(space.nd - space.nk);
    for (std::size_t d = 0; d < space.nk; ++d) L.ksz[d] = space.sizes[d];
    for (std::size_t d = space.nk; d < space.nd; ++d) L.rsz[d - space.nk] = space.sizes[d];
    L.outputs = outputs;
    L.length = length;
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
    int parts = blocks_x < 2LL * sms && length >= 8192 ? split_parts(blocks_x, 4LL * sms, length, 2048) : 1;
    L.chunk = (length + parts - 1) / parts;
    parts = static_cast<int>((length + L.chunk - 1) / L.chunk);
    const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>(blocks_x, 65535LL * 16)), static_cast<unsigned>(parts));
    launch_split<Kind>(o, outputs, parts, init, dev, s, [&](auto* dst) {
      using D = std::remove_pointer_t<decltype(dst)>;
      if (rows)
        reduce_rows_kernel<Kind, A, D, R, tree_t><<<grid, threads, 0, s>>>(dst, tree, L, init);
      else
        reduce_cols_kernel<Kind, A, D, R, tree_t><<<grid, threads, 0, s>>>(dst, tree, L, init);
    });
  }
}

}  // namespace tenet::detail::cuda
