#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// CUDA kernels of the line ops (nvcc only): argmax / argmin (reduce_ with an arg kind) and the
// scans (scan_: cumsum, cumprod, cummax / cummin values and indices, logcumsumexp). A line is the
// run of elements along the op's dim for one index of the other dims (prims/scan.hpp); argmax over
// every dim is one line of the contiguous, flattened input.
//
// argmax / argmin: PyTorch's rules: the first index of the extreme value, a NaN counts as the
// extreme (the first NaN wins). Three shapes of kernel, by layout:
//   - a thread per line when the line's elements are strided and there are many lines (adjacent
//     threads read adjacent addresses: the reduced dim is an outer one);
//   - a warp per line (many lines, or short ones);
//   - a block per line (few long lines), pairs (value, index) combined by shuffles + shared memory.
// Scans: a block per line walks the line in chunks of blockDim * 4 elements: each thread scans its
// 4 elements in registers, the block scans the threads' totals (warp shuffles, then the warps'
// totals in shared memory), and a carry passes to the next chunk, so lines of any length work.
// The block has 32 to 256 threads (fewer for short lines). An outer dim over many lines: a thread
// per line walking it (coalesced across lines). Accumulation: scan_acc_t (prims/scan.hpp): fp32 for
// fp16 / bf16, fp64 for fp32 / fp64 sums and products, int64 for integers, as the CPU backend.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include <tenet/backend/cuda/pointwise.cuh>
#include <tenet/backend/cuda/runtime.hpp>
#include <tenet/prims/reduce.hpp>
#include <tenet/prims/scan.hpp>

namespace tenet::detail::cuda {

/// The lines of a rank-R index space along one dim: the sizes of the other dims and, for two
/// tensors a and b, their strides there (nd <= R dims; a line's base offsets come from its number).
template <std::size_t R>
struct line_map {
  std::int64_t sz[R];
  std::int64_t sa[R];
  std::int64_t sb[R];
  int nd;
  __device__ TENET_INLINE void base(std::int64_t l, std::int64_t& a, std::int64_t& b) const {
    a = 0;
    b = 0;
    for (int d = nd - 1; d >= 0; --d) {
      const std::int64_t q = l / sz[d];
      const std::int64_t i = l - q * sz[d];
      a += i * sa[d];
      b += i * sb[d];
      l = q;
    }
  }
};

/// The line map of `sizes` along dim d for strides sa and sb (R >= 1).
template <std::size_t R>
line_map<R> make_line_map(const sizes_t<R>& sizes, std::size_t d, const sizes_t<R>& sa, const sizes_t<R>& sb) {
  line_map<R> m{};
  int k = 0;
  for (std::size_t i = 0; i < R; ++i) {
    if (i == d) continue;
    m.sz[k] = sizes[i];
    m.sa[k] = sa[i];
    m.sb[k] = sb[i];
    ++k;
  }
  m.nd = k;
  return m;
}

template <class A>
__device__ TENET_INLINE A shfl_any(A v, int src_or_delta, int mode) {
  // mode 0: down by delta, 1: up by delta
  if constexpr (sizeof(A) == 8) {
    long long x;
    memcpy(&x, &v, 8);
    x = mode == 0 ? __shfl_down_sync(0xffffffffu, x, src_or_delta) : __shfl_up_sync(0xffffffffu, x, src_or_delta);
    memcpy(&v, &x, 8);
    return v;
  } else if constexpr (sizeof(A) == 4) {
    int x;
    memcpy(&x, &v, 4);
    x = mode == 0 ? __shfl_down_sync(0xffffffffu, x, src_or_delta) : __shfl_up_sync(0xffffffffu, x, src_or_delta);
    memcpy(&v, &x, 4);
    return v;
  } else {
    int x = static_cast<int>(v);
    x = mode == 0 ? __shfl_down_sync(0xffffffffu, x, src_or_delta) : __shfl_up_sync(0xffffffffu, x, src_or_delta);
    return static_cast<A>(x);
  }
}

// --- argmax / argmin ---------------------------------------------------------------------------

/// A candidate of an arg reduction: value and index (-1: none yet).
template <class A>
struct arg_pair {
  A v;
  std::int64_t i;
};

/// The better of two candidates: Kind::better, and between equal values (or two NaNs) the smaller
/// index (PyTorch's first-index rule).
template <class Kind, class A>
__device__ TENET_INLINE arg_pair<A> arg_pick(arg_pair<A> a, arg_pair<A> b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  if (Kind::better(b.v, a.v)) return b;
  if (Kind::better(a.v, b.v)) return a;
  return b.i < a.i ? b : a;
}

template <class Kind, class A>
__device__ TENET_INLINE arg_pair<A> arg_warp(arg_pair<A> p) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    arg_pair<A> q{shfl_any(p.v, o, 0), shfl_any(p.i, o, 0)};
    p = arg_pick<Kind>(p, q);
  }
  return p;
}

/// The candidate of elements [begin, n) with step `step` of the line at x (stride xs).
template <class Kind, class A, class T>
__device__ TENET_INLINE arg_pair<A> arg_scan_part(const T* __restrict__ x, std::int64_t xs, std::int64_t begin,
                                                  std::int64_t n, std::int64_t step) {
  arg_pair<A> best{A{}, -1};
  for (std::int64_t j = begin; j < n; j += step) {
    const A v = static_cast<A>(x[j * xs]);
    if (best.i < 0 || Kind::better(v, best.v)) best = {v, j};  // strictly better: the first index stays
  }
  return best;
}

template <class Kind, class A, class T, std::size_t R>
__global__ void arg_thread_kernel(std::int64_t* __restrict__ out, const T* __restrict__ x, line_map<R> L,
                                  std::int64_t lines, std::int64_t n, std::int64_t xs) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t l = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; l < lines; l += step) {
    std::int64_t a, b;
    L.base(l, a, b);
    out[l] = arg_scan_part<Kind, A>(x + a, xs, 0, n, 1).i;
  }
}

template <class Kind, class A, class T, std::size_t R>
__global__ void arg_warp_kernel(std::int64_t* __restrict__ out, const T* __restrict__ x, line_map<R> L,
                                std::int64_t lines, std::int64_t n, std::int64_t xs) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (std::int64_t l = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); l < lines;
       l += warps) {
    std::int64_t a, b;
    L.base(l, a, b);
    const arg_pair<A> p = arg_warp<Kind>(arg_scan_part<Kind, A>(x + a, xs, lane, n, 32));
    if (lane == 0) out[l] = p.i;
  }
}

template <class Kind, class A, class T, std::size_t R>
__global__ void arg_block_kernel(std::int64_t* __restrict__ out, const T* __restrict__ x, line_map<R> L,
                                 std::int64_t lines, std::int64_t n, std::int64_t xs) {
  __shared__ A sv[32];
  __shared__ std::int64_t si[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (std::int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
    std::int64_t a, b;
    L.base(l, a, b);
    arg_pair<A> p = arg_warp<Kind>(arg_scan_part<Kind, A>(x + a, xs, threadIdx.x, n, blockDim.x));
    __syncthreads();  // the shared slots may still be read for the previous line
    if (lane == 0) sv[warp] = p.v, si[warp] = p.i;
    __syncthreads();
    if (warp == 0) {
      arg_pair<A> q = lane < warps ? arg_pair<A>{sv[lane], si[lane]} : arg_pair<A>{A{}, -1};
      q = arg_warp<Kind>(q);
      if (lane == 0) out[l] = q.i;
    }
  }
}

/// out (int64, contiguous, one element per line) = the index of Kind's extreme along dim d of x
/// (any strides; rank >= 1). An empty line is an error, as PyTorch.
template <class Kind, class T, class S>
void run_arg_lines_impl(std::int64_t* out, const Tensor<T, S>& x, std::size_t d, device dev) {
  constexpr std::size_t R = S::rank;
  using A = compute_t<T>;
  const std::int64_t n = x.sizes()[d];
  std::int64_t lines = 1;
  for (std::size_t i = 0; i < R; ++i)
    if (i != d) lines *= x.sizes()[i];
  if (lines == 0) return;
  if (n == 0)
    throw value_error(std::string("tenet: ") + std::string(Kind::name) + "(): cannot reduce over an empty dim (sizes " +
                      sizes_text(x.sizes()) + "), as PyTorch (argmax/argmin of an empty dim has no index)");
  device_context ctx(dev);
  const cudaStream_t s = current_stream();
  const int di = dev.index;
  const auto L = make_line_map<R>(x.sizes(), d, x.strides(), x.strides());
  const std::int64_t xs = x.strides()[d];
  const T* xp = x.data();
  const int sms = sm_count(di);
  if (xs != 1 && n > 1 && lines >= 2048) {
    arg_thread_kernel<Kind, A, T, R><<<grid_for(lines, 128, di), 128, 0, s>>>(out, xp, L, lines, n, xs);
  } else if (lines >= 4LL * sms || n <= 4096) {
    arg_warp_kernel<Kind, A, T, R><<<grid_for(lines * 32, 256, di), 256, 0, s>>>(out, xp, L, lines, n, xs);
  } else {
    const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(lines, 65535));
    arg_block_kernel<Kind, A, T, R><<<blocks, 1024, 0, s>>>(out, xp, L, lines, n, xs);
  }
  check_launch("the argmax/argmin kernel launch");
}

/// out (int64, contiguous) = reduce_<Kind>(x) over the dims in mask: one dim, or every dim
/// (the index into the flattened tensor), as torch.argmax / argmin.
template <class Kind, class OS, class T, class S, std::size_t Rin>
void run_arg_reduce(const Tensor<std::int64_t, OS>& out, const Tensor<T, S>& x, const std::array<bool, Rin>& mask) {
  constexpr std::size_t R = S::rank;
  if constexpr (R == 0) {
    run_pointwise(out, scalar<std::int64_t>{0});
  } else {
    int reduced = 0;
    std::size_t d = 0;
    for (std::size_t i = 0; i < Rin; ++i)
      if (mask[i]) ++reduced, d = i;
    if (reduced == 1) {
      run_arg_lines_impl<Kind>(out.data(), x, d, out.device());
    } else {
      // every dim: one line of the flattened, contiguous input
      const auto xc = x.is_contiguous() ? x : x.contiguous();
      if (xc.numel() == 0)
        throw value_error(std::string("tenet: ") + std::string(Kind::name) +
                          "(): cannot reduce an empty tensor (sizes " + sizes_text(x.sizes()) + "), as PyTorch");
      const auto flat = xc.template reshape<dyn>(xc.numel());
      run_arg_lines_impl<Kind>(out.data(), flat, 0, out.device());
    }
  }
}

// --- scans -------------------------------------------------------------------------------------

/// What a scan of Kind carries: the accumulator (or, for running_arg, value and index), how an
/// element enters it, how two combine (b after a), and what is written.
template <class Kind, class TI, class TO>
struct scan_traits {
  using A = prim::scan_acc_t<Kind, TI>;
  using state = A;
  __device__ static TENET_INLINE state make(TI x, std::int64_t) { return static_cast<A>(static_cast<compute_t<TI>>(x)); }
  __device__ static TENET_INLINE state combine(state a, state b) { return Kind::combine(a, b); }
  __device__ static TENET_INLINE TO out(state s) { return static_cast<TO>(s); }
  __device__ static TENET_INLINE state shfl_up(state s, int o) { return shfl_any(s, o, 1); }
};
template <bool Max, class TI, class TO>
struct scan_traits<prim::running_arg<Max>, TI, TO> {
  using A = compute_t<TI>;
  struct state {
    A v;
    std::int64_t i;
  };
  __device__ static TENET_INLINE state make(TI x, std::int64_t i) { return {static_cast<A>(x), i}; }
  // b's value takes over a's when running_arg says so (a later equal value, any NaN ...)
  __device__ static TENET_INLINE state combine(state a, state b) {
    return prim::running_arg<Max>::takes_over(b.v, a.v) ? b : a;
  }
  __device__ static TENET_INLINE TO out(state s) { return static_cast<TO>(s.i); }
  __device__ static TENET_INLINE state shfl_up(state s, int o) { return {shfl_any(s.v, o, 1), shfl_any(s.i, o, 1)}; }
};

inline constexpr int scan_items = 4;

template <class Tr, class TO, class TI, std::size_t R>
__global__ void scan_block_kernel(TO* __restrict__ out, const TI* __restrict__ x, line_map<R> L, std::int64_t lines,
                                  std::int64_t n, std::int64_t xs, std::int64_t os) {
  using S = typename Tr::state;
  __shared__ S warp_tot[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  const std::int64_t chunk = static_cast<std::int64_t>(blockDim.x) * scan_items;
  for (std::int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
    std::int64_t xa, oa;
    L.base(l, xa, oa);
    const TI* xl = x + xa;
    TO* ol = out + oa;
    S carry{};
    bool has_carry = false;
    for (std::int64_t c0 = 0; c0 < n; c0 += chunk) {
      const std::int64_t j0 = c0 + static_cast<std::int64_t>(threadIdx.x) * scan_items;
      S r[scan_items];
#pragma unroll
      for (int k = 0; k < scan_items; ++k) {
        const std::int64_t j = j0 + k;
        if (j < n) {
          const S v = Tr::make(xl[j * xs], j);
          r[k] = k == 0 ? v : Tr::combine(r[k - 1], v);
        } else {
          r[k] = k == 0 ? Tr::make(TI{}, -1) : r[k - 1];  // past the end: never written, only later positions see it
        }
      }
      // inclusive scan of the threads' totals over the warp, then over the warps
      S incl = r[scan_items - 1];
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const S u = Tr::shfl_up(incl, o);
        if (lane >= o) incl = Tr::combine(u, incl);
      }
      const S up = Tr::shfl_up(incl, 1);
      __syncthreads();  // warp_tot may still be read for the previous chunk
      if (lane == 31) warp_tot[warp] = incl;
      __syncthreads();
      if (warp == 0) {
        S w = warp_tot[lane < warps ? lane : 0];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const S u = Tr::shfl_up(w, o);
          if (lane >= o) w = Tr::combine(u, w);
        }
        if (lane < warps) warp_tot[lane] = w;
      }
      __syncthreads();
      // the prefix before this thread's elements: carry, earlier warps, earlier lanes
      S pre = carry;
      bool has_pre = has_carry;
      if (warp > 0) {
        pre = has_pre ? Tr::combine(pre, warp_tot[warp - 1]) : warp_tot[warp - 1];
        has_pre = true;
      }
      if (lane > 0) {
        pre = has_pre ? Tr::combine(pre, up) : up;
        has_pre = true;
      }
#pragma unroll
      for (int k = 0; k < scan_items; ++k) {
        const std::int64_t j = j0 + k;
        if (j < n) ol[j * os] = Tr::out(has_pre ? Tr::combine(pre, r[k]) : r[k]);
      }
      const S tot = warp_tot[warps - 1];
      carry = has_carry ? Tr::combine(carry, tot) : tot;
      has_carry = true;
    }
  }
}

template <class Tr, class TO, class TI, std::size_t R>
__global__ void scan_thread_kernel(TO* __restrict__ out, const TI* __restrict__ x, line_map<R> L, std::int64_t lines,
                                   std::int64_t n, std::int64_t xs, std::int64_t os) {
  using S = typename Tr::state;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t l = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; l < lines; l += step) {
    std::int64_t xa, oa;
    L.base(l, xa, oa);
    S acc = Tr::make(x[xa], 0);
    out[oa] = Tr::out(acc);
    for (std::int64_t j = 1; j < n; ++j) {
      acc = Tr::combine(acc, Tr::make(x[xa + j * xs], j));
      out[oa + j * os] = Tr::out(acc);
    }
  }
}

/// out (contiguous, x's sizes) = Kind's inclusive scan of x (any strides) along dim d.
template <class Kind, class TO, class SO, class TI, class SI>
void run_scan(const Tensor<TO, SO>& out, const Tensor<TI, SI>& x, std::size_t d) {
  if constexpr (SI::rank == 0) {
    run_scan<Kind>(out.template reshape<1>(), x.template reshape<1>(), 0);
  } else {
    constexpr std::size_t R = SI::rank;
    using Tr = scan_traits<Kind, TI, TO>;
    const std::int64_t n = x.sizes()[d];
    std::int64_t lines = 1;
    for (std::size_t i = 0; i < R; ++i)
      if (i != d) lines *= x.sizes()[i];
    if (lines == 0 || n == 0) return;
    device_context ctx(out.device());
    const cudaStream_t s = current_stream();
    const int di = out.device().index;
    const auto L = make_line_map<R>(x.sizes(), d, x.strides(), out.strides());
    const std::int64_t xs = x.strides()[d], os = out.strides()[d];
    if (os != 1 && lines >= 2048) {
      // an outer dim: a thread per line, neighbouring lines at neighbouring addresses
      scan_thread_kernel<Tr, TO, TI, R><<<grid_for(lines, 128, di), 128, 0, s>>>(out.data(), x.data(), L, lines, n, xs,
                                                                                 os);
    } else {
      int threads = 32;
      while (threads < 256 && static_cast<std::int64_t>(threads) * scan_items < n) threads *= 2;
      const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(lines, 65535LL * 8));
      scan_block_kernel<Tr, TO, TI, R><<<blocks, threads, 0, s>>>(out.data(), x.data(), L, lines, n, xs, os);
    }
    check_launch("the scan kernel launch");
  }
}

}  // namespace tenet::detail::cuda
