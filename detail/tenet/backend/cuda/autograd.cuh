#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CUDA kernels of autograd's backward that are not tenet expressions (declared in
// autograd/graph.hpp): a gradient summed onto the sizes it was broadcast from (reduce_to), the
// gradient of a strided view scattered back into its base (view_backward), and the fused
// optimizer updates of optim.hpp (SGD, Adam/AdamW) for parameters on a CUDA device.
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <type_traits>

#include <cuda_runtime.h>

#include <tenet/autograd/graph.hpp>  // view_is_injective, offset_span
#include <tenet/backend/cuda/gemm.hpp>  // linear_weight_bias_grad
#include <tenet/backend/cuda/native.hpp>  // cuda_gpu
#include <tenet/backend/cuda/pointwise.cuh>  // grid_for, check_launch
#include <tenet/backend/cuda/runtime.hpp>
#include <tenet/backend/training_spans.hpp>  // grad_span, adam_span
#include <tenet/tensor.hpp>

namespace tenet::detail::cuda {

/// Sizes and strides of a rank-R walk, passed to kernels by value.
template <std::size_t R>
struct ag_layout {
  std::int64_t size[R > 0 ? R : 1];
  std::int64_t stride[R > 0 ? R : 1];
};

/// base + the offset of row-major flat index f under L.
template <std::size_t R>
__device__ __forceinline__ std::int64_t ag_offset(const ag_layout<R>& L, std::int64_t f, std::int64_t base) {
  std::int64_t off = base;
  for (int d = static_cast<int>(R) - 1; d >= 0; --d) {
    const std::int64_t s = L.size[d];
    off += (f % s) * L.stride[d];
    f /= s;
  }
  return off;
}

// --- reduce_to: out (contiguous, target sizes) = g summed over the broadcast dims, in double as
// the CPU does. keep: g's dims that survive (the others size 1); red: the summed dims (the others
// size 1); both with g's strides.
template <class T, std::size_t R>
__global__ void ag_sum_to_thread_kernel(T* __restrict__ out, const T* __restrict__ g, ag_layout<R> keep,
                                        ag_layout<R> red, std::int64_t nout, std::int64_t nred) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < nout; o += stride) {
    const std::int64_t base = ag_offset(keep, o, 0);
    double acc = 0;
    for (std::int64_t j = 0; j < nred; ++j) acc += static_cast<double>(g[ag_offset(red, j, base)]);
    out[o] = static_cast<T>(acc);
  }
}
template <class T, std::size_t R>
__global__ void ag_sum_to_block_kernel(T* __restrict__ out, const T* __restrict__ g, ag_layout<R> keep,
                                       ag_layout<R> red, std::int64_t nout, std::int64_t nred) {
  __shared__ double part[256];
  for (std::int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
    const std::int64_t base = ag_offset(keep, o, 0);
    double acc = 0;
    for (std::int64_t j = threadIdx.x; j < nred; j += blockDim.x) acc += static_cast<double>(g[ag_offset(red, j, base)]);
    part[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
      if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[o] = static_cast<T>(part[0]);
    __syncthreads();
  }
}

/// The row sums of a contiguous [nout, nred] g (the summed dims trail: LayerNorm's mean and
/// variance gradients, keepdim sums): a warp per row, each lane reading every 32nd value
/// (coalesced), a double sum, then the warp's shuffle reduction. Deterministic, no atomics.
template <class T>
__global__ void ag_sum_rows_kernel(T* __restrict__ out, const T* __restrict__ g, std::int64_t nout, std::int64_t nred) {
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; r < nout;
       r += warps) {  // r is the same for the whole warp: the shuffles see every lane
    const T* row = g + r * nred;
    double acc = 0;
    for (std::int64_t j = lane; j < nred; j += 32) acc += static_cast<double>(row[j]);
    for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) out[r] = static_cast<T>(acc);
  }
}

/// The column sums of a contiguous [nred, nout] g (a bias's or a LayerNorm parameter's gradient:
/// the summed dims lead): pass 1, a block of 32 columns x 8 row lanes over one chunk of rows
/// (coalesced: a warp reads 32 neighbouring values of a row), its double partial per column; pass 2
/// adds the chunks' partials in order. Deterministic, no atomics.
template <class T>
__global__ void ag_sum_columns_partial_kernel(double* __restrict__ part, const T* __restrict__ g, std::int64_t nout,
                                              std::int64_t nred, std::int64_t rows_per_chunk) {
  __shared__ double lane[8][33];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * rows_per_chunk;
  const std::int64_t r1 = r0 + rows_per_chunk < nred ? r0 + rows_per_chunk : nred;
  double acc = 0;
  if (c < nout)
    for (std::int64_t r = r0 + threadIdx.y; r < r1; r += 8) acc += static_cast<double>(g[r * nout + c]);
  lane[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < nout) {
    double s = 0;
    for (int y = 0; y < 8; ++y) s += lane[y][threadIdx.x];
    part[static_cast<std::int64_t>(blockIdx.y) * nout + c] = s;
  }
}
template <class T>
__global__ void ag_sum_columns_final_kernel(T* __restrict__ out, const double* __restrict__ part, std::int64_t nout,
                                            std::int64_t chunks) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= nout) return;
  double s = 0;
  for (std::int64_t k = 0; k < chunks; ++k) s += part[k * nout + c];
  out[c] = static_cast<T>(s);
}

template <class T, std::size_t Rg, std::size_t R>
void sum_to_into(const Tensor<T, dyn_shape<Rg>>& g, const Tensor<T, dyn_shape<R>>& out) {
  const std::int64_t nout = out.numel();
  if (nout == 0) return;
  const device dev = out.device();
  device_context ctx(dev);
  constexpr std::size_t lead = Rg - R;
  ag_layout<Rg> keep{}, red{};
  std::int64_t nred = 1;
  for (std::size_t d = 0; d < Rg; ++d) {
    const std::int64_t gs = g.sizes()[d];
    const bool kept = d >= lead && out.sizes()[d - lead] == gs;
    keep.size[d] = kept ? gs : 1;
    red.size[d] = kept ? 1 : gs;
    keep.stride[d] = red.stride[d] = g.strides()[d];
    if (!kept) nred *= gs;
  }
  if (nred == 0) {
    TENET_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, static_cast<std::size_t>(nout) * sizeof(T), current_stream()));
    return;
  }
  // the summed dims all before the kept ones, g contiguous: g is [nred, nout], a column sum
  bool columns = g.is_contiguous() && nout >= 32 && nred >= 256;
  bool seen_kept = false;
  for (std::size_t d = 0; d < Rg; ++d) {
    if (keep.size[d] > 1) seen_kept = true;
    else if (red.size[d] > 1 && seen_kept) columns = false;  // a summed dim after a kept one
  }
  if (columns) {
    const std::int64_t col_blocks = (nout + 31) / 32;
    const std::int64_t chunks = std::max<std::int64_t>(1, std::min<std::int64_t>((nred + 255) / 256, (512 + col_blocks - 1) / col_blocks));
    const std::int64_t rows = (nred + chunks - 1) / chunks;
    Tensor<double, dyn_shape<1>> part(sizes_t<1>{chunks * nout}, dev);
    ag_sum_columns_partial_kernel<T><<<dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(chunks)), dim3(32, 8), 0,
                                       current_stream()>>>(part.data(), g.data(), nout, nred, rows);
    check_launch("autograd's sum_to_size column kernel launch");
    ag_sum_columns_final_kernel<T><<<static_cast<unsigned>((nout + 255) / 256), 256, 0, current_stream()>>>(
        out.data(), part.data(), nout, chunks);
    check_launch("autograd's sum_to_size column kernel launch");
    return;
  }
  // the summed dims all after the kept ones, g contiguous: g is [nout, nred], a row sum
  bool rows = g.is_contiguous() && nred >= 32 && nout >= 32;
  bool seen_red = false;
  for (std::size_t d = 0; d < Rg; ++d) {
    if (red.size[d] > 1) seen_red = true;
    else if (keep.size[d] > 1 && seen_red) rows = false;  // a kept dim after a summed one
  }
  if (rows) {
    ag_sum_rows_kernel<T><<<grid_for(nout * 32, 256, dev.index), 256, 0, current_stream()>>>(out.data(), g.data(),
                                                                                            nout, nred);
    check_launch("autograd's sum_to_size row kernel launch");
    return;
  }
  if (nred >= 256)
    ag_sum_to_block_kernel<T, Rg><<<grid_for(nout * 256, 256, dev.index), 256, 0, current_stream()>>>(
        out.data(), g.data(), keep, red, nout, nred);
  else
    ag_sum_to_thread_kernel<T, Rg><<<grid_for(nout, 256, dev.index), 256, 0, current_stream()>>>(
        out.data(), g.data(), keep, red, nout, nred);
  check_launch("autograd's sum_to_size kernel launch");
}

// --- view_backward: buf (the storage span both layouts touch, zeroed) += g at the positions the
// view reads; out = buf read at the positions the base reads. buf holds compute_t<T> (float for
// bfloat16 / float16: float atomics, and overlapping positions sum before one rounding).
template <class T, class A, std::size_t R>
__global__ void ag_scatter_add_kernel(A* __restrict__ buf, const T* __restrict__ g, ag_layout<R> gl, ag_layout<R> vl,
                                      std::int64_t vbase, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    atomicAdd(buf + ag_offset(vl, i, vbase), static_cast<A>(g[ag_offset(gl, i, 0)]));
}
template <class T, class A, std::size_t R>
__global__ void ag_gather_kernel(T* __restrict__ out, const A* __restrict__ buf, ag_layout<R> bl, std::int64_t bbase,
                                 std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = static_cast<T>(buf[ag_offset(bl, i, bbase)]);
}

template <class T, std::size_t RV, std::size_t RB>
void view_backward_into(const Tensor<T, dyn_shape<RV>>& g, const sizes_t<RV>& vstrides, std::int64_t voffset,
                        const Tensor<T, dyn_shape<RB>>& out, const sizes_t<RB>& bstrides, std::int64_t boffset,
                        std::int64_t lo, std::int64_t hi) {
  const std::int64_t nb = out.numel();
  if (nb == 0) return;
  const device dev = out.device();
  device_context ctx(dev);
  // A contiguous base and an injective view inside it (narrow, select, transpose, and reshapes
  // of them: attention's heads split from one qkv projection): g copied through the view's strides
  // into the base, zeroed first unless the view covers all of it. One pointwise pass instead of
  // a scatter-add into a buffer over both spans and a gather back from it.
  const bool injective = ag::view_is_injective<RV>(g.sizes(), vstrides);
  if (bstrides == contiguous_strides(out.sizes()) && injective) {
    const auto [vlo, vhi] = ag::offset_span<RV>(g.sizes(), vstrides, voffset);
    if (g.numel() == 0 || (vlo >= boffset && vhi < boffset + nb)) {
      if (g.numel() != nb)
        TENET_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, static_cast<std::size_t>(nb) * sizeof(T), current_stream()));
      if (g.numel() > 0)
        run_pointwise(out.template with_layout<dyn_shape<RV>>(g.sizes(), vstrides, out.offset() + (voffset - boffset)), g);
      return;
    }
  }
  // A strided base the view steps through by whole indices (a transpose of a narrowed tensor:
  // attention's heads split from one qkv projection, each a view of a view): the same one copy,
  // through the view's layout relative to the base (ag::relative_layout). Before, a scatter-add
  // into a buffer over both spans and a gather back (GPT-2: 20 ms of a 205 ms step).
  sizes_t<RV> rstrides{};
  std::int64_t roffset = 0;
  if (injective && g.numel() > 0 &&
      ag::relative_layout<RV, RB>(g.sizes(), vstrides, voffset, out.sizes(), bstrides, boffset, rstrides, roffset)) {
    if (g.numel() != nb)
      TENET_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, static_cast<std::size_t>(nb) * sizeof(T), current_stream()));
    run_pointwise(out.template with_layout<dyn_shape<RV>>(g.sizes(), rstrides, out.offset() + roffset), g);
    return;
  }
  const std::int64_t span = std::max<std::int64_t>(hi - lo + 1, 1);
  using A = compute_t<T>;
  Tensor<A, dyn_shape<1>> buf(sizes_t<1>{span}, dev);
  TENET_CUDA_CHECK(cudaMemsetAsync(buf.data(), 0, static_cast<std::size_t>(span) * sizeof(A), current_stream()));
  const std::int64_t nv = g.numel();
  if (nv > 0) {
    ag_layout<RV> gl{}, vl{};
    for (std::size_t d = 0; d < RV; ++d) {
      gl.size[d] = vl.size[d] = g.sizes()[d];
      gl.stride[d] = g.strides()[d];
      vl.stride[d] = vstrides[d];
    }
    ag_scatter_add_kernel<T, A, RV><<<grid_for(nv, 256, dev.index), 256, 0, current_stream()>>>(
        buf.data(), g.data(), gl, vl, voffset - lo, nv);
    check_launch("autograd's view-backward scatter kernel launch");
  }
  ag_layout<RB> bl{};
  for (std::size_t d = 0; d < RB; ++d) bl.size[d] = out.sizes()[d], bl.stride[d] = bstrides[d];
  ag_gather_kernel<T, A, RB><<<grid_for(nb, 256, dev.index), 256, 0, current_stream()>>>(out.data(), buf.data(), bl,
                                                                                        boffset - lo, nb);
  check_launch("autograd's view-backward gather kernel launch");
}

// --- optimizers (optim.hpp): the same per-element formulas as the CPU loops, one thread each.
/// f(k) for every k < n, grid-stride (the update and clip kernels).
template <class F>
__device__ __forceinline__ void for_each_index(std::int64_t n, F&& f) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) f(k);
}
/// The gradient an update uses: g[k], negated for maximize, plus wd * p (L2 weight decay). The
/// update kernels compute in compute_t<T> (float for bfloat16 / float16, as optim.hpp's loops) and
/// round where they store.
template <class T>
__device__ __forceinline__ compute_t<T> update_grad(const T* g, std::int64_t k, compute_t<T> pk, bool maximize,
                                                    bool use_wd, compute_t<T> wd) {
  compute_t<T> d = static_cast<compute_t<T>>(g[k]);
  if (maximize) d = -d;
  if (use_wd) d = d + wd * pk;
  return d;
}
template <class T>
__global__ void optim_sgd_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf, std::int64_t n,
                                 compute_t<T> wd, compute_t<T> mu, compute_t<T> keep, compute_t<T> neg_lr,
                                 bool maximize, bool nesterov, bool use_wd, bool fresh) {
  using A = compute_t<T>;
  for_each_index(n, [&](std::int64_t k) {
    const A pk = static_cast<A>(p[k]);
    A d = update_grad(g, k, pk, maximize, use_wd, wd);
    if (buf) {
      const A b = fresh ? d : A(static_cast<A>(buf[k]) * mu + keep * d);
      buf[k] = static_cast<T>(b);
      d = nesterov ? A(d + mu * b) : b;
    }
    p[k] = static_cast<T>(pk + neg_lr * d);
  });
}
template <class T>
void optim_sgd(device dev, T* p, const T* g, T* buf, std::int64_t n, compute_t<T> wd, compute_t<T> mu,
               compute_t<T> keep, compute_t<T> neg_lr, bool maximize, bool nesterov, bool use_wd, bool fresh) {
  if (n == 0) return;
  device_context ctx(dev);
  optim_sgd_kernel<T><<<grid_for(n, 256, dev.index), 256, 0, current_stream()>>>(p, g, buf, n, wd, mu, keep, neg_lr,
                                                                               maximize, nesterov, use_wd, fresh);
  check_launch("the SGD update kernel launch");
}

template <class A>
__device__ __forceinline__ A ag_sqrt(A x) {  // correctly rounded, as std::sqrt on the host
  if constexpr (std::is_same_v<A, float>) return ::sqrtf(x);
  else return ::sqrt(x);
}
// torch's lerp: a + w (b - a) for w < 0.5, else b - (b - a)(1 - w) (optim.hpp detail::lerp)
template <class A>
__device__ __forceinline__ A ag_lerp(A a, A b, A w) {
  return w < A(0.5) ? A(a + w * (b - a)) : A(b - (b - a) * (A(1) - w));
}
// --- multi-tensor launches: a list of up to mt_max tensors per kernel launch; tensor i owns blocks
// [first[i], first[i + 1]) of the grid, block b its chunk b - first[i] of Chunk elements. (One
// launch per parameter cost GPT-2's step 148 launches each for Adam, the norm and the scale; the
// kernels of its small tensors took a few microseconds each, mostly launch.)
inline constexpr int mt_max = 24;
template <class Span>
struct mt_list {
  Span s[mt_max];
  std::int64_t first[mt_max + 1];
  int count;
};
/// This block's tensor (its index in the list) and chunk.
template <class Span>
__device__ __forceinline__ int mt_entry(const mt_list<Span>& l, std::int64_t& chunk) {
  const std::int64_t b = blockIdx.x;
  int i = 0;
  while (i + 1 < l.count && l.first[i + 1] <= b) ++i;
  chunk = b - l.first[i];
  return i;
}
/// Launches go(list, blocks) for the spans in lists of up to mt_max, Chunk elements a block
/// (empty tensors skipped).
template <int Chunk, class Span, class Go>
void mt_launch(const Span* spans, std::size_t count, Go&& go) {
  mt_list<Span> l{};
  std::int64_t blocks = 0;
  const auto flush = [&] {
    if (l.count > 0) {
      l.first[l.count] = blocks;
      go(l, static_cast<unsigned>(blocks));
    }
    l.count = 0;
    blocks = 0;
  };
  for (std::size_t i = 0; i < count; ++i) {
    const std::int64_t n = spans[i].n;
    if (n == 0) continue;
    const std::int64_t nb = (n + Chunk - 1) / Chunk;
    if (l.count == mt_max || blocks + nb > 0x7fffffffLL) flush();
    l.s[l.count] = spans[i];
    l.first[l.count] = blocks;
    ++l.count;
    blocks += nb;
  }
  flush();
}
inline constexpr int mt_chunk = 4096;  // elements a block of 256 threads updates (16 a thread)

template <class T>
__global__ void optim_adam_kernel(mt_list<adam_span<T>> l, adam_scalars<compute_t<T>> s) {
  using A = compute_t<T>;
  std::int64_t chunk;
  const adam_span<T>& x = l.s[mt_entry(l, chunk)];
  T* __restrict__ p = x.p;
  const T* __restrict__ g = x.g;
  T* __restrict__ m = x.m;
  T* __restrict__ v = x.v;
  T* __restrict__ vmax = x.vmax;
  const std::int64_t hi = (chunk + 1) * mt_chunk < x.n ? (chunk + 1) * mt_chunk : x.n;
#pragma unroll 4
  for (std::int64_t k = chunk * mt_chunk + threadIdx.x; k < hi; k += blockDim.x) {
    A pk = static_cast<A>(p[k]);
    const A d = update_grad(g, k, pk, s.maximize, s.use_wd && !s.decoupled, s.wd);
    if (s.use_wd && s.decoupled) pk = pk * s.decay;
    const A mk = ag_lerp(static_cast<A>(m[k]), d, s.w1);
    const A vk = static_cast<A>(v[k]) * s.b2 + s.w2 * d * d;
    m[k] = static_cast<T>(mk);
    v[k] = static_cast<T>(vk);
    A denom;
    if (vmax) {
      const A old = static_cast<A>(vmax[k]);
      const A mx = old < vk ? vk : old;  // std::max, as the CPU loop
      vmax[k] = static_cast<T>(mx);
      denom = ag_sqrt(mx) / s.bc2_sqrt + s.eps;
    } else {
      denom = ag_sqrt(vk) / s.bc2_sqrt + s.eps;
    }
    p[k] = static_cast<T>(pk + s.neg_step_size * mk / denom);
  }
}
template <class T>
void optim_adam(device dev, const adam_span<T>* spans, std::size_t count, const adam_scalars<compute_t<T>>& s) {
  device_context ctx(dev);
  mt_launch<mt_chunk>(spans, count, [&](const mt_list<adam_span<T>>& l, unsigned blocks) {
    optim_adam_kernel<T><<<blocks, 256, 0, current_stream()>>>(l, s);
    check_launch("the Adam update kernel launch");
  });
}

template <class T>
__global__ void optim_rmsprop_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ sq,
                                     T* __restrict__ buf, T* __restrict__ ga, std::int64_t n, compute_t<T> alpha,
                                     compute_t<T> w, compute_t<T> eps, compute_t<T> wd, compute_t<T> mu,
                                     compute_t<T> neg_lr, bool maximize, bool use_wd) {
  using A = compute_t<T>;
  for_each_index(n, [&](std::int64_t k) {
    const A pk = static_cast<A>(p[k]);
    const A d = update_grad(g, k, pk, maximize, use_wd, wd);
    const A s2 = static_cast<A>(sq[k]) * alpha + w * d * d;
    sq[k] = static_cast<T>(s2);
    A avg;
    if (ga) {
      const A a = ag_lerp(static_cast<A>(ga[k]), d, w);
      ga[k] = static_cast<T>(a);
      avg = ag_sqrt(A(s2 + A(-1) * a * a));
    } else {
      avg = ag_sqrt(s2);
    }
    avg = avg + eps;
    if (buf) {
      const A b = static_cast<A>(buf[k]) * mu + A(1) * d / avg;
      buf[k] = static_cast<T>(b);
      p[k] = static_cast<T>(pk + neg_lr * b);
    } else {
      p[k] = static_cast<T>(pk + neg_lr * d / avg);
    }
  });
}
template <class T>
void optim_rmsprop(device dev, T* p, const T* g, T* sq, T* buf, T* ga, std::int64_t n, compute_t<T> alpha,
                   compute_t<T> w, compute_t<T> eps, compute_t<T> wd, compute_t<T> mu, compute_t<T> neg_lr,
                   bool maximize, bool use_wd) {
  if (n == 0) return;
  device_context ctx(dev);
  optim_rmsprop_kernel<T><<<grid_for(n, 256, dev.index), 256, 0, current_stream()>>>(p, g, sq, buf, ga, n, alpha, w, eps,
                                                                                   wd, mu, neg_lr, maximize, use_wd);
  check_launch("the RMSprop update kernel launch");
}

template <class T>
__global__ void optim_adagrad_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ sum, std::int64_t n,
                                     compute_t<T> neg_clr, compute_t<T> eps, compute_t<T> wd, bool maximize,
                                     bool use_wd) {
  using A = compute_t<T>;
  for_each_index(n, [&](std::int64_t k) {
    const A pk = static_cast<A>(p[k]);
    const A d = update_grad(g, k, pk, maximize, use_wd, wd);
    const A s2 = static_cast<A>(sum[k]) + A(1) * d * d;
    sum[k] = static_cast<T>(s2);
    p[k] = static_cast<T>(pk + neg_clr * d / (ag_sqrt(s2) + eps));
  });
}
template <class T>
void optim_adagrad(device dev, T* p, const T* g, T* sum, std::int64_t n, compute_t<T> neg_clr, compute_t<T> eps,
                   compute_t<T> wd, bool maximize, bool use_wd) {
  if (n == 0) return;
  device_context ctx(dev);
  optim_adagrad_kernel<T><<<grid_for(n, 256, dev.index), 256, 0, current_stream()>>>(p, g, sum, n, neg_clr, eps, wd,
                                                                                   maximize, use_wd);
  check_launch("the Adagrad update kernel launch");
}

// --- nn::utils::clip_grad_norm_ / clip_grad_value_ on device gradients -----------------------
__device__ __forceinline__ double clip_nanmax(double a, double b) {  // nan wins, as the CPU loop
  return (a != a || b != b) ? NAN : (a < b ? b : a);
}
inline constexpr int clip_norm_chunk = 32768;  // elements a partial sum covers (128 a thread)
/// part[chunk] of each gradient = sum |g|^p (or max |g| when inf) over its chunk, in double.
template <class T>
__global__ void clip_norm_partial_kernel(mt_list<grad_span<T>> l, double p, bool inf) {
  __shared__ double sm[32];
  std::int64_t chunk;
  const grad_span<T>& x = l.s[mt_entry(l, chunk)];
  const T* __restrict__ g = x.g;
  const std::int64_t hi = (chunk + 1) * clip_norm_chunk < x.n ? (chunk + 1) * clip_norm_chunk : x.n;
  double acc = 0.0;
#pragma unroll 4
  for (std::int64_t k = chunk * clip_norm_chunk + threadIdx.x; k < hi; k += blockDim.x) {
    const double a = ::fabs(static_cast<double>(g[k]));
    acc = inf ? clip_nanmax(acc, a) : acc + (p == 2.0 ? a * a : ::pow(a, p));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const double u = __shfl_xor_sync(0xffffffffu, acc, o);
    acc = inf ? clip_nanmax(acc, u) : acc + u;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) sm[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double r = sm[0];
    for (int i = 1; i < warps; ++i) r = inf ? clip_nanmax(r, sm[i]) : r + sm[i];
    x.part[chunk] = r;
  }
}
/// How many partial results clip_norm_partials writes for n elements (none for n == 0).
inline std::int64_t clip_norm_blocks(std::int64_t n) { return (n + clip_norm_chunk - 1) / clip_norm_chunk; }
/// For each gradient of the list: part[0, clip_norm_blocks(n)) = sums of |g_i|^p (maxima of |g_i|
/// when inf) over chunks of its n elements of device memory, in double; enqueued on the current
/// stream, nothing waited for (clip_grad_norm_ copies the partials of all gradients on a device to
/// the host at once).
template <class T>
void clip_norm_partials(device dev, const grad_span<T>* spans, std::size_t count, double p, bool inf) {
  device_context ctx(dev);
  mt_launch<clip_norm_chunk>(spans, count, [&](const mt_list<grad_span<T>>& l, unsigned blocks) {
    clip_norm_partial_kernel<T><<<blocks, 256, 0, current_stream()>>>(l, p, inf);
    check_launch("the clip_grad_norm_ kernel launch");
  });
}
/// g *= c (scale) or g = min(max(g, lo), hi) (clamp) over each gradient of the list.
template <class T>
__global__ void clip_apply_kernel(mt_list<grad_span<T>> l, bool clamp, T c, T lo, T hi) {
  std::int64_t chunk;
  const grad_span<T>& x = l.s[mt_entry(l, chunk)];
  T* __restrict__ g = x.g;
  const std::int64_t end = (chunk + 1) * mt_chunk < x.n ? (chunk + 1) * mt_chunk : x.n;
#pragma unroll 4
  for (std::int64_t k = chunk * mt_chunk + threadIdx.x; k < end; k += blockDim.x) {
    const T a = g[k];
    if (clamp) {
      const T m = a < lo ? lo : a;  // std::min(std::max(a, lo), hi), as the CPU loop (nan stays)
      g[k] = hi < m ? hi : m;
    } else {
      g[k] = a * c;
    }
  }
}
template <class T>
void clip_apply(device dev, const grad_span<T>* spans, std::size_t count, bool clamp, T c, T lo, T hi) {
  device_context ctx(dev);
  mt_launch<mt_chunk>(spans, count, [&](const mt_list<grad_span<T>>& l, unsigned blocks) {
    clip_apply_kernel<T><<<blocks, 256, 0, current_stream()>>>(l, clamp, c, lo, hi);
    check_launch("the clip_grad kernel launch");
  });
}

}  // namespace tenet::detail::cuda

// ---------------------------------------------------------------------------------------------
// The CUDA backend's training kernels, found by backend/training.hpp's on_backend calls.
namespace tenet::detail {
// (shapes as template parameters: a rank inside dyn_shape<R> is not deduced)
template <class T, class Sg, class S>
void run_sum_to(cuda_gpu, const Tensor<T, Sg>& g, const Tensor<T, S>& out) {
  cuda::sum_to_into<T, rank_of<Tensor<T, Sg>>, rank_of<Tensor<T, S>>>(g, out);
}
template <class T, class Sx, class Sg, class Sw, class Sb>
bool run_linear_weight_bias_grad(cuda_gpu, const Tensor<T, Sx>& x, const Tensor<T, Sg>& g, const Tensor<T, Sw>& dw,
                                 const Tensor<T, Sb>& db) {
  // under autocast (the backward of a linear written under it: graph.hpp runs it under the
  // forward's state) the GEMM runs in the low dtype, as the forward's matmul did, and its results
  // are rounded to it (torch's dw and db of a bf16 linear, cast to float32)
  bool ran = false;
  const bool autocast_on = cuda::with_autocast_dtype<T>([&](auto low) {
    using L = decltype(low);
    const auto xl = cuda::cast_on_device<L>(x), gl = cuda::cast_on_device<L>(g);
    Tensor<L, Sw> dwl(dw.sizes(), dw.device());
    Tensor<L, Sb> dbl(db.sizes(), db.device());
    ran = cuda::linear_weight_bias_grad<L>(xl, gl, dwl, dbl);
    if (!ran) return;
    cuda::run_pointwise(dw, cast_to<T>(dwl));
    cuda::run_pointwise(db, cast_to<T>(dbl));
  });
  if (autocast_on) return ran;
  return cuda::linear_weight_bias_grad<T>(x, g, dw, db);
}
template <class T, class Sv, class Sb, std::size_t RV, std::size_t RB>
void run_view_backward(cuda_gpu, const Tensor<T, Sv>& g, const sizes_t<RV>& vstrides, std::int64_t voffset,
                       const Tensor<T, Sb>& out, const sizes_t<RB>& bstrides, std::int64_t boffset, std::int64_t lo,
                       std::int64_t hi) {
  cuda::view_backward_into<T, RV, RB>(g, vstrides, voffset, out, bstrides, boffset, lo, hi);
}
template <class T>
void run_sgd(cuda_gpu, device dev, T* p, const T* g, T* buf, std::int64_t n, compute_t<T> wd, compute_t<T> mu,
             compute_t<T> keep, compute_t<T> neg_lr, bool maximize, bool nesterov, bool use_wd, bool fresh) {
  cuda::optim_sgd<T>(dev, p, g, buf, n, wd, mu, keep, neg_lr, maximize, nesterov, use_wd, fresh);
}
template <class T, class S>
void run_adam(cuda_gpu, device dev, const adam_span<T>* spans, std::size_t count, const adam_scalars<S>& s) {
  cuda::optim_adam<T>(dev, spans, count, s);
}
template <class T>
void run_rmsprop(cuda_gpu, device dev, T* p, const T* g, T* sq, T* buf, T* ga, std::int64_t n, compute_t<T> alpha,
                 compute_t<T> w, compute_t<T> eps, compute_t<T> wd, compute_t<T> mu, compute_t<T> neg_lr,
                 bool maximize, bool use_wd) {
  cuda::optim_rmsprop<T>(dev, p, g, sq, buf, ga, n, alpha, w, eps, wd, mu, neg_lr, maximize, use_wd);
}
template <class T>
void run_adagrad(cuda_gpu, device dev, T* p, const T* g, T* sum, std::int64_t n, compute_t<T> neg_clr,
                 compute_t<T> eps, compute_t<T> wd, bool maximize, bool use_wd) {
  cuda::optim_adagrad<T>(dev, p, g, sum, n, neg_clr, eps, wd, maximize, use_wd);
}
inline std::int64_t clip_norm_partial_count(cuda_gpu, device, std::int64_t n) { return cuda::clip_norm_blocks(n); }
template <class T>
void run_clip_norm_partials(cuda_gpu, device dev, const grad_span<T>* spans, std::size_t count, double p, bool inf) {
  cuda::clip_norm_partials<T>(dev, spans, count, p, inf);
}
template <class T>
void run_clip(cuda_gpu, device dev, const grad_span<T>* spans, std::size_t count, bool clamp, T c, T lo, T hi) {
  cuda::clip_apply<T>(dev, spans, count, clamp, c, lo, hi);
}
}  // namespace tenet::detail
