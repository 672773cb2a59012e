#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// cross_entropy over rows on CUDA (nvcc only): aten::cross_entropy_rows and its gradient
// (decomp/cross_entropy.hpp), a block per row of x [N, C].
//   forward:  one read of the row: a running (max, sum of exp(x - max)) per thread, combined over
//             the block; loss = max + log(sum) - x[t] (0 for an ignored row).
//   backward: the row's (max, sum) again, then dx = (exp(x - max) / sum - [c == t]) g, written in
//             x's dtype (zeros for an ignored row). The second read of the row comes from L2: a
//             block per row of up to 1024 threads keeps about 2 rows per SM in flight (GPT-2's
//             50304 bf16 classes: 26 MB on an H200's 132 SMs, in its 50 MB L2).
// The input of the forward may be a pointwise producer (the float cast of bf16 logits), evaluated
// while loading (backend.cuh: with_row_source). Arithmetic in compute_t<T>; exp through
// row_exp<T> (ex2.approx for 16-bit inputs, as the softmax row kernels).
#include <cmath>
#include <cstdint>
#include <string>

#include <tenet/backend/cuda/row_kernels.cuh>

namespace tenet::detail::cuda {

template <class A>
struct ce_args {
  A* loss;               // forward: [rows]
  const std::int64_t* t;  // [rows], stride t_stride
  std::int64_t t_stride;
  const A* g;  // backward: the loss rows' gradient, stride g_stride
  std::int64_t g_stride;
  std::int64_t rows, cols;
  std::int64_t ignore;
};

/// Folds n values into a running (m, s): s = sum of exp(v - m) over what was folded.
template <class T, class A, int N>
__device__ TENET_INLINE void ce_fold(A& m, A& s, const A (&v)[N]) {
  A lm = v[0];
#pragma unroll
  for (int k = 1; k < N; ++k) lm = row_max(lm, v[k]);
  const A nm = row_max(m, lm);
  if (nm != m) {  // a larger max (or a NaN, which then stays)
    s = m == -INFINITY ? A(0) : s * row_exp<T>(m, nm);
    m = nm;
  }
  if (m != -INFINITY)
#pragma unroll
    for (int k = 0; k < N; ++k) s += row_exp<T>(v[k], m);
}

/// The block's (max, sum) from each thread's: warp shuffles, then one shared-memory step.
template <class A>
__device__ TENET_INLINE void ce_block_combine(A& m, A& s) {
  __shared__ A sm[32], ss[32];
  auto combine = [](A& m0, A& s0, A m1, A s1) {
    const A nm = row_max(m0, m1);
    if (nm == -INFINITY) {
      s0 = 0;
    } else {
      s0 = (m0 == -INFINITY ? A(0) : s0 * ::exp(m0 - nm)) + (m1 == -INFINITY ? A(0) : s1 * ::exp(m1 - nm));
    }
    m0 = nm;
  };
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const A m1 = __shfl_xor_sync(0xffffffffu, m, o);
    const A s1 = __shfl_xor_sync(0xffffffffu, s, o);
    combine(m, s, m1, s1);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  m = sm[0];
  s = ss[0];
  for (int i = 1; i < warps; ++i) combine(m, s, sm[i], ss[i]);
}

/// This thread's (max, sum) over row r of src: W-element vector loads (W > 1: cols % W == 0 and
/// 16-byte alignment checked by the launcher), four in flight, or scalar loads (W == 1).
template <int W, class T, class Src, class A>
__device__ TENET_INLINE void ce_row_stats(const Src& src, std::int64_t base, std::int64_t cols, A& m, A& s) {
  m = -INFINITY;
  s = 0;
  const std::int64_t nv = cols / W, step = blockDim.x;
  std::int64_t q = threadIdx.x;
  constexpr int U = 4;
  for (; q + (U - 1) * step < nv; q += U * step) {
    A v[U * W];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if constexpr (W == 1) {
        v[u] = static_cast<A>(src.flat(base + q + u * step));
      } else {
        const auto l = src.template load<W>(base + (q + u * step) * W);
#pragma unroll
        for (int k = 0; k < W; ++k) v[u * W + k] = static_cast<A>(lane_at(l, k));
      }
    }
    ce_fold<T>(m, s, v);
  }
  for (; q < nv; q += step) {
    A v[W];
    if constexpr (W == 1) {
      v[0] = static_cast<A>(src.flat(base + q));
    } else {
      const auto l = src.template load<W>(base + q * W);
#pragma unroll
      for (int k = 0; k < W; ++k) v[k] = static_cast<A>(lane_at(l, k));
    }
    ce_fold<T>(m, s, v);
  }
}

template <int W, class T, class Src>
__global__ void ce_forward_kernel(ce_args<compute_t<T>> a, Src src) {
  using A = compute_t<T>;
  const std::int64_t r = blockIdx.x;
  const std::int64_t t = a.t[r * a.t_stride];
  if (t == a.ignore) {
    if (threadIdx.x == 0) a.loss[r] = A(0);
    return;  // the whole block
  }
  const std::int64_t base = r * a.cols;
  A m, s;
  ce_row_stats<W, T>(src, base, a.cols, m, s);
  ce_block_combine(m, s);
  if (threadIdx.x == 0) {
    // the targets were checked on the host (losses.hpp); NaN rather than a read outside the row
    const A xt = t >= 0 && t < a.cols ? static_cast<A>(src.flat(base + t)) : A(NAN);
    a.loss[r] = m + ::log(s) - xt;
  }
}

template <int W, class T>
__global__ void ce_backward_kernel(ce_args<compute_t<T>> a, const T* __restrict__ x, T* __restrict__ dx) {
  using A = compute_t<T>;
  const std::int64_t r = blockIdx.x;
  const std::int64_t t = a.t[r * a.t_stride];
  const std::int64_t base = r * a.cols, nv = a.cols / W;
  if (t == a.ignore) {
    for (std::int64_t q = threadIdx.x; q < nv; q += blockDim.x) {
      lanes<T, W> o;
#pragma unroll
      for (int k = 0; k < W; ++k) o.v[k] = T(0);
      *reinterpret_cast<lanes<T, W>*>(dx + base + q * W) = o;
    }
    return;
  }
  const ptr_src<T> src{x};
  A m, s;
  ce_row_stats<W, T>(src, base, a.cols, m, s);
  ce_block_combine(m, s);
  const A g = a.g[r * a.g_stride];
  const A scale = g / s;
  for (std::int64_t q = threadIdx.x; q < nv; q += blockDim.x) {
    const lanes<T, W> l = *reinterpret_cast<const lanes<T, W>*>(x + base + q * W);
    lanes<T, W> o;
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const std::int64_t c = q * W + k;
      const A p = row_exp<T>(static_cast<A>(l.v[k]), m) * scale;
      o.v[k] = static_cast<T>(c == t ? p - g : p);
    }
    *reinterpret_cast<lanes<T, W>*>(dx + base + q * W) = o;
  }
}

/// Rows of ce_regs_min to 8 · 1024 vectors: the row read once into registers (8 vectors a thread,
/// packed as loaded), then its max and its sum of exponentials over them, as the softmax row
/// kernels (row_kernels.cuh). The looped kernels above keep a running (max, sum) over the row in
/// chunks; on GPT-2's 50304 bf16 classes they issued four dependent rounds of loads a row, and
/// the backward read the row twice (forward 1.96 ms, backward 2.59 ms a step for 16384 rows).
inline constexpr int ce_regs_per_thread = 8;
inline constexpr std::int64_t ce_regs_min = 1024;

template <int W, class T, class Src, class L, class A>
__device__ TENET_INLINE void ce_regs_stats(const Src& src, std::int64_t base, std::int64_t nv, L (&v)[ce_regs_per_thread], A& m,
                                           A& s, A* smem) {
  const int G = static_cast<int>(blockDim.x);
  const auto ok = [&](int j) { return threadIdx.x + static_cast<std::int64_t>(j) * G < nv; };
#pragma unroll
  for (int j = 0; j < ce_regs_per_thread; ++j)
    if (ok(j)) v[j] = src.template load<W>(base + (threadIdx.x + static_cast<std::int64_t>(j) * G) * W);
  m = -INFINITY;
#pragma unroll
  for (int j = 0; j < ce_regs_per_thread; ++j)
    if (ok(j))
#pragma unroll
      for (int k = 0; k < W; ++k) m = row_max(m, static_cast<A>(lane_at(v[j], k)));
  m = group_allreduce<true, false>(m, smem);
  s = 0;
  if (m != -INFINITY)  // a row of -inf has no finite term (its loss is NaN, as torch's)
#pragma unroll
    for (int j = 0; j < ce_regs_per_thread; ++j)
      if (ok(j))
#pragma unroll
        for (int k = 0; k < W; ++k) s += row_exp<T>(static_cast<A>(lane_at(v[j], k)), m);
  s = group_allreduce<false, false>(s, smem);
}

template <int W, class T, class Src>
__global__ void __launch_bounds__(1024) ce_forward_regs_kernel(ce_args<compute_t<T>> a, Src src) {
  using A = compute_t<T>;
  using L = decltype(src.template load<W>(0));
  __shared__ A smem[32];
  const std::int64_t r = blockIdx.x;
  const std::int64_t t = a.t[r * a.t_stride];
  if (t == a.ignore) {
    if (threadIdx.x == 0) a.loss[r] = A(0);
    return;  // the whole block
  }
  const std::int64_t base = r * a.cols;
  L v[ce_regs_per_thread];
  A m, s;
  ce_regs_stats<W, T>(src, base, a.cols / W, v, m, s, smem);
  if (threadIdx.x == 0) {
    const A xt = t >= 0 && t < a.cols ? static_cast<A>(src.flat(base + t)) : A(NAN);
    a.loss[r] = m + ::log(s) - xt;
  }
}

template <int W, class T>
__global__ void __launch_bounds__(1024) ce_backward_regs_kernel(ce_args<compute_t<T>> a, const T* __restrict__ x,
                                                                T* __restrict__ dx) {
  using A = compute_t<T>;
  using L = lanes<T, W>;
  __shared__ A smem[32];
  const std::int64_t r = blockIdx.x;
  const std::int64_t t = a.t[r * a.t_stride];
  const std::int64_t base = r * a.cols, nv = a.cols / W;
  const int G = static_cast<int>(blockDim.x);
  if (t == a.ignore) {
    L o;
#pragma unroll
    for (int k = 0; k < W; ++k) o.v[k] = T(0);
    for (std::int64_t q = threadIdx.x; q < nv; q += G) *reinterpret_cast<L*>(dx + base + q * W) = o;
    return;
  }
  L v[ce_regs_per_thread];
  A m, s;
  ce_regs_stats<W, T>(ptr_src<T>{x}, base, nv, v, m, s, smem);
  const A g = a.g[r * a.g_stride];
  const A scale = g / s;
#pragma unroll
  for (int j = 0; j < ce_regs_per_thread; ++j) {
    const std::int64_t q = threadIdx.x + static_cast<std::int64_t>(j) * G;
    if (q < nv) {
      L o;
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const A p = row_exp<T>(static_cast<A>(v[j].v[k]), m) * scale;
        o.v[k] = static_cast<T>(q * W + k == t ? p - g : p);
      }
      *reinterpret_cast<L*>(dx + base + q * W) = o;
    }
  }
}

/// Threads of the register kernels for rows of nv vectors (0: the row does not fit them).
inline int ce_regs_threads(std::int64_t nv) {
  if (nv < ce_regs_min || nv > ce_regs_per_thread * 1024LL) return 0;
  const std::int64_t per = (nv + ce_regs_per_thread - 1) / ce_regs_per_thread;
  return static_cast<int>((per + 31) / 32 * 32);
}

/// Threads per row: a power of two from 32 to 1024, about 8 vectors (or elements) a thread.
inline int ce_threads(std::int64_t units) {
  int threads = 32;
  while (threads < 1024 && static_cast<std::int64_t>(threads) * 8 < units) threads *= 2;
  return threads;
}

inline void ce_check_rows(std::int64_t rows) {
  if (rows > 0x7fffffffLL)
    throw device_error("tenet: cross_entropy over " + std::to_string(rows) +
                       " rows is not supported on CUDA (at most 2^31 - 1 rows)");
}

/// The forward over src (the row source of x, of value type T): a.loss gets one value per row.
template <class T, class Src>
void launch_ce_forward(const ce_args<compute_t<T>>& a, const Src& src, bool src_aligned) {
  if (a.rows == 0) return;
  ce_check_rows(a.rows);
  constexpr int W = 16 / sizeof(T);
  const cudaStream_t st = current_stream();
  if (a.cols % W == 0 && src_aligned && ce_regs_threads(a.cols / W) > 0) {
    ce_forward_regs_kernel<W, T, Src><<<static_cast<unsigned>(a.rows), ce_regs_threads(a.cols / W), 0, st>>>(a, src);
  } else if (a.cols % W == 0 && src_aligned) {
    ce_forward_kernel<W, T, Src><<<static_cast<unsigned>(a.rows), ce_threads(a.cols / W), 0, st>>>(a, src);
  } else {
    ce_forward_kernel<1, T, Src><<<static_cast<unsigned>(a.rows), ce_threads(a.cols), 0, st>>>(a, src);
  }
  check_launch("the cross_entropy kernel launch");
}

/// The backward: dx [rows, cols] (contiguous) from x (contiguous), a.t and a.g.
template <class T>
void launch_ce_backward(const ce_args<compute_t<T>>& a, const T* x, T* dx) {
  if (a.rows == 0 || a.cols == 0) return;
  ce_check_rows(a.rows);
  constexpr int W = 16 / sizeof(T);
  const cudaStream_t st = current_stream();
  const bool vec = a.cols % W == 0 && aligned16(x) && aligned16(dx);
  if (vec && ce_regs_threads(a.cols / W) > 0) {
    ce_backward_regs_kernel<W, T><<<static_cast<unsigned>(a.rows), ce_regs_threads(a.cols / W), 0, st>>>(a, x, dx);
  } else if (vec) {
    ce_backward_kernel<W, T><<<static_cast<unsigned>(a.rows), ce_threads(a.cols / W), 0, st>>>(a, x, dx);
  } else {
    ce_backward_kernel<1, T><<<static_cast<unsigned>(a.rows), ce_threads(a.cols), 0, st>>>(a, x, dx);
  }
  check_launch("the cross_entropy backward kernel launch");
}

}  // namespace tenet::detail::cuda
