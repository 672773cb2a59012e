#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// One-pass row kernels on CUDA (nvcc only): softmax, log_softmax, layer_norm and rms_norm over the
// last L elements of a contiguous input (L = the last dim, or the weight's numel for the norms),
// and var over the last dim (one output per row: the row's mean, then its centered squares, from
// registers: the input is read once, where the decomposition's two reductions read it twice).
//
// Each row is read once into registers with 16-byte vector loads (8 bf16/fp16, 4 fp32, 2 fp64
// elements per load), reduced with warp shuffles (and one shared-memory step across the warps of
// a block), and written once with 16-byte stores. Arithmetic is in compute_t<T> (float for
// fp32/fp16/bf16, double for fp64); the output is rounded once, as PyTorch's CUDA kernels do.
//   - short rows (<= 128 vectors): a warp per row, 4 rows per block of 128 threads;
//   - a contiguous bf16 / fp16 input of 129..2048 vectors a row: row_pipe_kernel, blocks looping
//     over rows with the next row's loads in flight;
//   - long rows (<= 4096 vectors): a block per row, 64..1024 threads with 4 vectors each, or 256
//     threads with 2 each for 257..512 vectors (e.g. 2048 fp32, or 4096 bf16 fed by a producer tree);
//   - longer rows, or rows whose length or pointers do not allow 16-byte vectors: a block per row
//     that reads the row from global memory once per pass (scalar loads).
// The input is a contiguous tensor or a pointwise producer tree evaluated while loading
// (softmax(x * s), layer_norm(x + residual)): its inputs are read once, no intermediate is made.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include <tenet/backend/cuda/pointwise.cuh>  // lanes<T, N>, check_launch
#include <tenet/backend/cuda/runtime.hpp>

namespace tenet::detail::cuda {

enum class row_kind { softmax, log_softmax, layer_norm, rms_norm, var };

template <class T>
struct row_args {
  T* out;      // rows x cols (var: rows)
  const T* w;  // layer_norm / rms_norm: the weight (L elements)
  const T* b;  // layer_norm: the bias (L elements)
  std::int64_t rows;
  std::int64_t cols;
  double eps;  // the norms' epsilon; var: its divisor, max(0, cols - correction)
};

/// The input of a row kernel: a contiguous tensor (ptr_src) or a pointwise producer tree
/// (pointwise.cuh's pointwise_tree, every leaf contiguous over the output's index space or a broadcast
/// scalar), read at flat indices: load<N>(i) (N elements from i, 16-byte aligned), flat(i).
template <class T>
struct ptr_src {
  const T* p;
  template <int N>
  __device__ TENET_INLINE lanes<T, N> load(std::int64_t i) const {
    return *reinterpret_cast<const lanes<T, N>*>(p + i);
  }
  __device__ TENET_INLINE T flat(std::int64_t i) const { return p[i]; }
};
template <class G>
__device__ TENET_INLINE auto lane_at(const G& g, int k) {
  if constexpr (requires { g.v[0]; } && !requires { g[0]; })
    return g.v[k];
  else
    return g[k];
}

template <class A>
__device__ TENET_INLINE A row_max(A a, A b) {
  // NaN propagates, as torch's max
  return (a != a || a > b) ? a : b;
}

/// exp(x - m) of a row of T, in compute_t<T>. For 16-bit T, the hardware's 2^x approximation
/// (ex2.approx, about 2 ulp of fp32, subnormals kept) of (x - m) log2(e) as one fused multiply-add:
/// its error is far below half an ulp of bf16/fp16 (2^-9 / 2^-12), where the accurate expf's
/// dozen instructions made softmax compute-bound (2.10 TB/s against 2.42 on an H100 for
/// 8192x4096 bf16). fp32/fp64 keep the accurate exp, as PyTorch's kernels.
template <class T, class A>
__device__ TENET_INLINE A row_exp(A x, A m) {
  if constexpr (sizeof(T) == 2 && std::is_same_v<A, float>) {
    constexpr float log2e = 1.4426950408889634f;
    const float u = fmaf(x, log2e, -m * log2e);
    float y;
    asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(u));
    return y;
  } else {
    return ::exp(x - m);
  }
}

/// The sum (Max = false) or max over a row group: a warp, or the whole block (smem: 32 slots).
template <bool Max, bool Warp, class A>
__device__ TENET_INLINE A group_allreduce(A v, A* smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const A u = __shfl_xor_sync(0xffffffffu, v, o);
    v = Max ? row_max(v, u) : v + u;
  }
  if constexpr (!Warp) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = smem[0];
    for (int i = 1; i < warps; ++i) v = Max ? row_max(v, smem[i]) : v + smem[i];
    __syncthreads();  // smem is written again by the next reduction
  }
  return v;
}

/// The row kernel with the row in registers: a group (warp or block) per row, each thread holding
/// up to V vectors of W elements (vector j of thread t: t + j * group size).
template <row_kind K, bool Warp, int V, class T, class Src>
__global__ void row_vec_kernel(row_args<T> a, Src src) {
  using A = compute_t<T>;
  constexpr int W = 16 / sizeof(T);
  __shared__ A smem[32];
  const int G = Warp ? 32 : static_cast<int>(blockDim.x);
  const int t = Warp ? (threadIdx.x & 31) : threadIdx.x;
  const std::int64_t r = Warp ? static_cast<std::int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5)
                              : static_cast<std::int64_t>(blockIdx.x);
  if (r >= a.rows) return;  // a whole warp leaves together (rows are warp-uniform)
  const std::int64_t nv = a.cols / W;
  const std::int64_t x = r * a.cols;  // the row's first flat index
  A v[V][W];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const std::int64_t q = t + static_cast<std::int64_t>(j) * G;
    if (q < nv) {
      const auto l = src.template load<W>(x + q * W);
#pragma unroll
      for (int k = 0; k < W; ++k) v[j][k] = static_cast<A>(lane_at(l, k));
    }
  }
  const A n = static_cast<A>(a.cols);
  A s0, s1;  // softmax: max, log-sum; norms: mean (0 for rms), inverse std / rms; var: mean, sum of squares
  if constexpr (K == row_kind::softmax || K == row_kind::log_softmax) {
    A m = -INFINITY;
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (t + static_cast<std::int64_t>(j) * G < nv)
#pragma unroll
        for (int k = 0; k < W; ++k) m = row_max(m, v[j][k]);
    m = group_allreduce<true, Warp>(m, smem);
    A s = 0;
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (t + static_cast<std::int64_t>(j) * G < nv)
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const A e = row_exp<T>(v[j][k], m);
          if constexpr (K == row_kind::softmax) v[j][k] = e;  // kept: the output is e / sum
          s += e;
        }
    s = group_allreduce<false, Warp>(s, smem);
    s0 = m;
    s1 = K == row_kind::softmax ? A(1) / s : ::log(s);
  } else if constexpr (K == row_kind::layer_norm || K == row_kind::var) {
    A s = 0;
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (t + static_cast<std::int64_t>(j) * G < nv)
#pragma unroll
        for (int k = 0; k < W; ++k) s += v[j][k];
    const A mean = group_allreduce<false, Warp>(s, smem) / n;
    A q = 0;
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (t + static_cast<std::int64_t>(j) * G < nv)
#pragma unroll
        for (int k = 0; k < W; ++k) q += (v[j][k] - mean) * (v[j][k] - mean);
    q = group_allreduce<false, Warp>(q, smem);
    s0 = mean;
    s1 = K == row_kind::var ? q : A(1) / ::sqrt(q / n + static_cast<A>(a.eps));
  } else {
    A q = 0;
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (t + static_cast<std::int64_t>(j) * G < nv)
#pragma unroll
        for (int k = 0; k < W; ++k) q += v[j][k] * v[j][k];
    s0 = 0;
    s1 = A(1) / ::sqrt(group_allreduce<false, Warp>(q, smem) / n + static_cast<A>(a.eps));
  }
  if constexpr (K == row_kind::var) {  // one output per row
    if (t == 0) a.out[r] = static_cast<T>(s1 / static_cast<A>(a.eps));
  } else {
    T* y = a.out + r * a.cols;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const std::int64_t q = t + static_cast<std::int64_t>(j) * G;
      if (q < nv) {
        lanes<T, W> o;
        if constexpr (K == row_kind::softmax) {
#pragma unroll
          for (int k = 0; k < W; ++k) o.v[k] = static_cast<T>(v[j][k] * s1);  // v: exp(x - max)
        } else if constexpr (K == row_kind::log_softmax) {
#pragma unroll
          for (int k = 0; k < W; ++k) o.v[k] = static_cast<T>(v[j][k] - s0 - s1);
        } else {
          const lanes<T, W> wl = *reinterpret_cast<const lanes<T, W>*>(a.w + q * W);
          if constexpr (K == row_kind::layer_norm) {
            const lanes<T, W> bl = *reinterpret_cast<const lanes<T, W>*>(a.b + q * W);
#pragma unroll
            for (int k = 0; k < W; ++k)
              o.v[k] = static_cast<T>((v[j][k] - s0) * s1 * static_cast<A>(wl.v[k]) + static_cast<A>(bl.v[k]));
          } else {
#pragma unroll
            for (int k = 0; k < W; ++k) o.v[k] = static_cast<T>(v[j][k] * s1 * static_cast<A>(wl.v[k]));
          }
        }
        *reinterpret_cast<lanes<T, W>*>(y + q * W) = o;
      }
    }
  }
}

/// The row kernel for a contiguous 16-bit input (ptr_src of bf16 / fp16) of 129..2048 vectors a
/// row (1032..16384 elements): a grid of about what the SMs hold at once (2048 threads per SM)
/// whose blocks loop over rows r, r + grid, ...; each thread keeps its V vectors of the row packed
/// as loaded (converted to float in each pass: half the registers of row_vec_kernel's float copy)
/// and issues the loads of its next row before reducing the current one, so that a block has
/// memory in flight while it reduces. A one-row-per-block kernel loads, then reduces and stores
/// with nothing in flight, about 12% slower on bf16 softmax rows. softmax computes exp twice (sum,
/// then output): ex2.approx for 16-bit types, cheap.
/// Registers are capped at 72 a thread for softmax (7 blocks of 128 threads per SM; registers are
/// given per warp in steps of 8 a thread) and 80 for the others (6 blocks; bf16 log_softmax
/// spilled at 72; ptxas alone gave bf16 layer_norm 91 registers, 5 blocks, and 3% less). The
/// figures: docs/cuda.md, "Launch-parameter measurements".
template <row_kind K, int V, class T>
__global__ void __maxnreg__(K == row_kind::softmax ? 72 : 80) row_pipe_kernel(row_args<T> a, const T* __restrict__ x) {
  using A = compute_t<T>;
  constexpr int W = 16 / sizeof(T);
  using L = lanes<T, W>;
  __shared__ A smem[32];
  const int t = threadIdx.x, G = static_cast<int>(blockDim.x);
  const std::int64_t nv = a.cols / W;
  const A n = static_cast<A>(a.cols);
  std::int64_t r = blockIdx.x;
  if (r >= a.rows) return;
  const std::int64_t step = gridDim.x;
  L cur[V], nxt[V];
  auto load = [&](L* buf, std::int64_t row) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const std::int64_t q = t + static_cast<std::int64_t>(j) * G;
      if (q < nv) buf[j] = *reinterpret_cast<const L*>(x + row * a.cols + q * W);
    }
  };
  auto ok = [&](int j) { return t + static_cast<std::int64_t>(j) * G < nv; };
  load(cur, r);
  for (; r < a.rows; r += step) {
    if (r + step < a.rows) load(nxt, r + step);
    A s0, s1;  // as row_vec_kernel's
    if constexpr (K == row_kind::softmax || K == row_kind::log_softmax) {
      A m = -INFINITY;
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (ok(j))
#pragma unroll
          for (int k = 0; k < W; ++k) m = row_max(m, static_cast<A>(cur[j].v[k]));
      m = group_allreduce<true, false>(m, smem);
      A s = 0;
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (ok(j))
#pragma unroll
          for (int k = 0; k < W; ++k) s += row_exp<T>(static_cast<A>(cur[j].v[k]), m);
      s = group_allreduce<false, false>(s, smem);
      s0 = m;
      s1 = K == row_kind::softmax ? A(1) / s : ::log(s);
    } else if constexpr (K == row_kind::layer_norm || K == row_kind::var) {
      A s = 0;
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (ok(j))
#pragma unroll
          for (int k = 0; k < W; ++k) s += static_cast<A>(cur[j].v[k]);
      const A mean = group_allreduce<false, false>(s, smem) / n;
      A q = 0;
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (ok(j))
#pragma unroll
          for (int k = 0; k < W; ++k) {
            const A d = static_cast<A>(cur[j].v[k]) - mean;
            q += d * d;
          }
      q = group_allreduce<false, false>(q, smem);
      s0 = mean;
      s1 = K == row_kind::var ? q : A(1) / ::sqrt(q / n + static_cast<A>(a.eps));
    } else {
      A q = 0;
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (ok(j))
#pragma unroll
          for (int k = 0; k < W; ++k) {
            const A d = static_cast<A>(cur[j].v[k]);
            q += d * d;
          }
      s0 = 0;
      s1 = A(1) / ::sqrt(group_allreduce<false, false>(q, smem) / n + static_cast<A>(a.eps));
    }
    if constexpr (K == row_kind::var) {  // one output per row
      if (t == 0) a.out[r] = static_cast<T>(s1 / static_cast<A>(a.eps));
    } else {
      T* y = a.out + r * a.cols;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const std::int64_t q = t + static_cast<std::int64_t>(j) * G;
        if (q < nv) {
          L o;
          if constexpr (K == row_kind::softmax) {
#pragma unroll
            for (int k = 0; k < W; ++k) o.v[k] = static_cast<T>(row_exp<T>(static_cast<A>(cur[j].v[k]), s0) * s1);
          } else if constexpr (K == row_kind::log_softmax) {
#pragma unroll
            for (int k = 0; k < W; ++k) o.v[k] = static_cast<T>(static_cast<A>(cur[j].v[k]) - s0 - s1);
          } else {
            const L wl = *reinterpret_cast<const L*>(a.w + q * W);
            if constexpr (K == row_kind::layer_norm) {
              const L bl = *reinterpret_cast<const L*>(a.b + q * W);
#pragma unroll
              for (int k = 0; k < W; ++k)
                o.v[k] = static_cast<T>((static_cast<A>(cur[j].v[k]) - s0) * s1 * static_cast<A>(wl.v[k]) +
                                        static_cast<A>(bl.v[k]));
            } else {
#pragma unroll
              for (int k = 0; k < W; ++k) o.v[k] = static_cast<T>(static_cast<A>(cur[j].v[k]) * s1 * static_cast<A>(wl.v[k]));
            }
          }
          *reinterpret_cast<L*>(y + q * W) = o;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < V; ++j) cur[j] = nxt[j];
  }
}

/// Any length and alignment: a block per row, the row read from global memory once per pass.
template <row_kind K, class T, class Src>
__global__ void row_scalar_kernel(row_args<T> a, Src src) {
  using A = compute_t<T>;
  __shared__ A smem[32];
  const std::int64_t r = blockIdx.x;
  const std::int64_t x0 = r * a.cols;
  auto x = [&](std::int64_t c) { return static_cast<T>(src.flat(x0 + c)); };
  const std::int64_t L = a.cols;
  const A n = static_cast<A>(L);
  A s0, s1;
  if constexpr (K == row_kind::softmax || K == row_kind::log_softmax) {
    A m = -INFINITY;
    for (std::int64_t c = threadIdx.x; c < L; c += blockDim.x) m = row_max(m, static_cast<A>(x(c)));
    m = group_allreduce<true, false>(m, smem);
    A s = 0;
    for (std::int64_t c = threadIdx.x; c < L; c += blockDim.x) s += ::exp(static_cast<A>(x(c)) - m);
    s = group_allreduce<false, false>(s, smem);
    s0 = m;
    s1 = K == row_kind::softmax ? A(1) / s : ::log(s);
  } else if constexpr (K == row_kind::layer_norm || K == row_kind::var) {
    A s = 0;
    for (std::int64_t c = threadIdx.x; c < L; c += blockDim.x) s += static_cast<A>(x(c));
    const A mean = group_allreduce<false, false>(s, smem) / n;
    A q = 0;
    for (std::int64_t c = threadIdx.x; c < L; c += blockDim.x) {
      const A d = static_cast<A>(x(c)) - mean;
      q += d * d;
    }
    q = group_allreduce<false, false>(q, smem);
    s0 = mean;
    s1 = K == row_kind::var ? q : A(1) / ::sqrt(q / n + static_cast<A>(a.eps));
  } else {
    A q = 0;
    for (std::int64_t c = threadIdx.x; c < L; c += blockDim.x) {
      const A d = static_cast<A>(x(c));
      q += d * d;
    }
    s0 = 0;
    s1 = A(1) / ::sqrt(group_allreduce<false, false>(q, smem) / n + static_cast<A>(a.eps));
  }
  if constexpr (K == row_kind::var) {  // one output per row
    if (threadIdx.x == 0) a.out[r] = static_cast<T>(s1 / static_cast<A>(a.eps));
  } else {
    T* y = a.out + r * a.cols;
    for (std::int64_t c = threadIdx.x; c < L; c += blockDim.x) {
      const A u = static_cast<A>(x(c));
      if constexpr (K == row_kind::softmax)
        y[c] = static_cast<T>(::exp(u - s0) * s1);
      else if constexpr (K == row_kind::log_softmax)
        y[c] = static_cast<T>(u - s0 - s1);
      else if constexpr (K == row_kind::layer_norm)
        y[c] = static_cast<T>((u - s0) * s1 * static_cast<A>(a.w[c]) + static_cast<A>(a.b[c]));
      else
        y[c] = static_cast<T>(u * s1 * static_cast<A>(a.w[c]));
    }
  }
}

inline bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

/// Runs row kernel K over a (device pointers; in and out contiguous, rows x cols) on the current
/// stream of the current device.
template <row_kind K, class T, class Src>
void launch_rows(const row_args<T>& a, const Src& src, bool src_aligned) {
  if (a.rows == 0 || a.cols == 0) return;
  constexpr int W = 16 / sizeof(T);
  constexpr int V = 4;
  const cudaStream_t s = current_stream();
  const std::int64_t nv = a.cols / W;
  const bool vec = a.cols % W == 0 && src_aligned && aligned16(a.out) && aligned16(a.w) && aligned16(a.b);
  if (a.rows > 0x7fffffffLL)
    throw device_error("tenet: a row kernel over " + std::to_string(a.rows) + " rows is not supported on CUDA "
                       "(at most 2^31 - 1 rows)");
  if constexpr (sizeof(T) == 2 && std::is_same_v<Src, ptr_src<T>>) {
    // rows too long for a warp, input not written by this call (the kernel reads it through the
    // read-only path, a row ahead)
    const auto* in = reinterpret_cast<const char*>(src.p);
    const auto* o = reinterpret_cast<const char*>(a.out);
    const std::int64_t bytes = a.rows * a.cols * static_cast<std::int64_t>(sizeof(T));
    // at most 512 threads: up to 91 registers a thread (bf16 layer_norm), 1024 would not launch
    if (vec && nv > 32 * V && nv <= 512 * V && (in + bytes <= o || o + bytes <= in)) {
      int threads = 64;
      while (threads * V < nv) threads *= 2;
      int dev = 0;
      TENET_CUDA_CHECK(cudaGetDevice(&dev));
      const std::int64_t grid = std::min<std::int64_t>(a.rows, static_cast<std::int64_t>(sm_count(dev)) * (2048 / threads));
      row_pipe_kernel<K, V, T><<<static_cast<unsigned>(grid), threads, 0, s>>>(a, src.p);
      check_launch("the row kernel launch");
      return;
    }
  }
  if (vec && nv <= 32 * V) {
    constexpr int per_block = 4;
    const auto blocks = static_cast<unsigned>((a.rows + per_block - 1) / per_block);
    row_vec_kernel<K, true, V, T, Src><<<blocks, 32 * per_block, 0, s>>>(a, src);
  } else if (vec && nv > 256 && nv <= 512) {
    // 256 threads of 2 vectors rather than 128 of 4 (2048 fp32 rows; 4096 bf16 ones fed by a
    // producer tree): fewer registers per thread (bf16 softmax 31 against 47, layer_norm 40
    // against 55), so more rows per SM (docs/cuda.md, "Launch-parameter measurements")
    row_vec_kernel<K, false, 2, T, Src><<<static_cast<unsigned>(a.rows), 256, 0, s>>>(a, src);
  } else if (vec && nv <= 1024 * V) {
    int threads = 64;
    while (threads * V < nv) threads *= 2;
    row_vec_kernel<K, false, V, T, Src><<<static_cast<unsigned>(a.rows), threads, 0, s>>>(a, src);
  } else {
    row_scalar_kernel<K, T, Src><<<static_cast<unsigned>(a.rows), a.cols >= 1024 ? 512 : 128, 0, s>>>(a, src);
  }
  check_launch("the row kernel launch");
}

/// layer_norm's (rms_norm's) input gradient (aten::norm_last_grad, decomp/norm.hpp): dx of
/// contiguous x and g [rows, cols] and the weight w [cols].
template <class T>
struct norm_grad_args {
  T* dx;
  const T* x;
  const T* g;
  const T* w;
  std::int64_t rows;
  std::int64_t cols;
  double eps;
};

/// The row in registers, as row_vec_kernel: a group (warp or block) per row, each thread holding V
/// vectors of W elements of x and of g (W == 1: scalar loads, for rows whose length or pointers do
/// not allow 16-byte vectors). Five group reductions: mean, variance, sum(g w), sum(g w xhat); then
/// dx = rstd (g w - mean(g w) - xhat mean(g w xhat)) (rms_norm: no mean, no mean(g w)).
template <bool Rms, bool Warp, int V, int W, class T>
__global__ void norm_grad_kernel(norm_grad_args<T> a) {
  using A = compute_t<T>;
  using L = lanes<T, W>;
  __shared__ A smem[32];
  const int G = Warp ? 32 : static_cast<int>(blockDim.x);
  const int t = Warp ? (threadIdx.x & 31) : threadIdx.x;
  const std::int64_t r = Warp ? static_cast<std::int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5)
                              : static_cast<std::int64_t>(blockIdx.x);
  if (r >= a.rows) return;  // a whole warp leaves together (rows are warp-uniform)
  const std::int64_t nv = a.cols / W, base = r * a.cols;
  auto ok = [&](int j) { return t + static_cast<std::int64_t>(j) * G < nv; };
  L xv[V], gv[V];
#pragma unroll
  for (int j = 0; j < V; ++j)
    if (ok(j)) {
      const std::int64_t q = (t + static_cast<std::int64_t>(j) * G) * W;
      xv[j] = *reinterpret_cast<const L*>(a.x + base + q);
      gv[j] = *reinterpret_cast<const L*>(a.g + base + q);
    }
  const A n = static_cast<A>(a.cols);
  A mean = 0;
  if constexpr (!Rms) {
    A s = 0;
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (ok(j))
#pragma unroll
        for (int k = 0; k < W; ++k) s += static_cast<A>(xv[j].v[k]);
    mean = group_allreduce<false, Warp>(s, smem) / n;
  }
  A q = 0;
#pragma unroll
  for (int j = 0; j < V; ++j)
    if (ok(j))
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const A d = static_cast<A>(xv[j].v[k]) - mean;
        q += d * d;
      }
  const A rstd = A(1) / ::sqrt(group_allreduce<false, Warp>(q, smem) / n + static_cast<A>(a.eps));
  A sg = 0, sgx = 0;
#pragma unroll
  for (int j = 0; j < V; ++j)
    if (ok(j)) {
      const L wl = *reinterpret_cast<const L*>(a.w + (t + static_cast<std::int64_t>(j) * G) * W);
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const A gw = static_cast<A>(gv[j].v[k]) * static_cast<A>(wl.v[k]);
        sg += gw;
        sgx += gw * (static_cast<A>(xv[j].v[k]) - mean) * rstd;
      }
    }
  const A mg = Rms ? A(0) : group_allreduce<false, Warp>(sg, smem) / n;
  const A mgx = group_allreduce<false, Warp>(sgx, smem) / n;
#pragma unroll
  for (int j = 0; j < V; ++j)
    if (ok(j)) {
      const std::int64_t q0 = (t + static_cast<std::int64_t>(j) * G) * W;
      const L wl = *reinterpret_cast<const L*>(a.w + q0);
      L o;
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const A xhat = (static_cast<A>(xv[j].v[k]) - mean) * rstd;
        const A gw = static_cast<A>(gv[j].v[k]) * static_cast<A>(wl.v[k]);
        o.v[k] = static_cast<T>(rstd * (gw - mg - xhat * mgx));
      }
      *reinterpret_cast<L*>(a.dx + base + q0) = o;
    }
}

/// Rows longer than norm_grad_kernel holds: a block per row of 512 threads, each pass reading x
/// and g again (from L2 for all but the first).
template <bool Rms, class T>
__global__ void norm_grad_long_kernel(norm_grad_args<T> a) {
  using A = compute_t<T>;
  __shared__ A smem[32];
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * a.cols, L = a.cols;
  const T* x = a.x + base;
  const T* g = a.g + base;
  const A n = static_cast<A>(L);
  A mean = 0;
  if constexpr (!Rms) {
    A s = 0;
    for (std::int64_t c = threadIdx.x; c < L; c += blockDim.x) s += static_cast<A>(x[c]);
    mean = group_allreduce<false, false>(s, smem) / n;
  }
  A q = 0;
  for (std::int64_t c = threadIdx.x; c < L; c += blockDim.x) {
    const A d = static_cast<A>(x[c]) - mean;
    q += d * d;
  }
  const A rstd = A(1) / ::sqrt(group_allreduce<false, false>(q, smem) / n + static_cast<A>(a.eps));
  A sg = 0, sgx = 0;
  for (std::int64_t c = threadIdx.x; c < L; c += blockDim.x) {
    const A gw = static_cast<A>(g[c]) * static_cast<A>(a.w[c]);
    sg += gw;
    sgx += gw * (static_cast<A>(x[c]) - mean) * rstd;
  }
  const A mg = Rms ? A(0) : group_allreduce<false, false>(sg, smem) / n;
  const A mgx = group_allreduce<false, false>(sgx, smem) / n;
  for (std::int64_t c = threadIdx.x; c < L; c += blockDim.x) {
    const A xhat = (static_cast<A>(x[c]) - mean) * rstd;
    a.dx[base + c] = static_cast<T>(rstd * (static_cast<A>(g[c]) * static_cast<A>(a.w[c]) - mg - xhat * mgx));
  }
}

/// Runs norm_grad_kernel: a warp per row up to 32 x 4 vectors (4 rows a block), else a block per
/// row up to 1024 x 4; longer rows norm_grad_long_kernel.
template <bool Rms, class T>
void launch_norm_grad(const norm_grad_args<T>& a) {
  if (a.rows == 0 || a.cols == 0) return;
  if (a.rows > 0x7fffffffLL)
    throw device_error("tenet: a norm backward over " + std::to_string(a.rows) + " rows is not supported on CUDA "
                       "(at most 2^31 - 1 rows)");
  constexpr int V = 4, VW = 16 / sizeof(T);
  const cudaStream_t s = current_stream();
  auto go = [&]<int W>() {
    const std::int64_t nv = a.cols / W;
    if (nv <= 32 * V) {
      constexpr int per_block = 4;
      const auto blocks = static_cast<unsigned>((a.rows + per_block - 1) / per_block);
      norm_grad_kernel<Rms, true, V, W, T><<<blocks, 32 * per_block, 0, s>>>(a);
    } else if (nv <= 1024 * V) {
      int threads = 64;
      while (threads * V < nv) threads *= 2;
      norm_grad_kernel<Rms, false, V, W, T><<<static_cast<unsigned>(a.rows), threads, 0, s>>>(a);
    } else {
      norm_grad_long_kernel<Rms, T><<<static_cast<unsigned>(a.rows), 512, 0, s>>>(a);
    }
    check_launch("the norm backward kernel launch");
  };
  const bool vec = a.cols % VW == 0 && aligned16(a.dx) && aligned16(a.x) && aligned16(a.g) && aligned16(a.w);
  if (vec)
    go.template operator()<VW>();
  else
    go.template operator()<1>();
}

}  // namespace tenet::detail::cuda
