// An experiment kept for the row kernels' next step (docs/cuda.md, Benchmarks): softmax and
// layer_norm over 8192 x 4096 bf16 by the library (rows.hpp) and by row_pipe_kernel, a standalone
// kernel whose grid holds about what the SMs run at once (16 blocks of 128 threads per SM) and
// whose blocks loop over rows, keeping each row packed as loaded (bf16 in registers, converted in
// each pass) and issuing the loads of the next row before reducing the current one. On an H200 it
// reached 3306-3330 GB/s (softmax) and 3231-3293 (layer_norm) where the library gives 2935 / 2848;
// the same structure moved into rows.hpp's row_vec_kernel gave 2701 / 2735 (not found why: same
// registers within 2, PTX within a few instructions), so the library keeps its one-row-per-block
// kernel for now. Prints the max |difference| against the library, then GB/s (read + write) as
// JSON lines; not part of the twin comparison.
#include <cstdint>
#include <cstdio>
#include <string>
#include "cuda_harness.hpp"
using namespace tenet;
namespace dc = tenet::detail::cuda;
using dc::row_kind;

template <row_kind K, int V, bool Pipe, class T>
__global__ void row_pipe_kernel(dc::row_args<T> a, const T* __restrict__ x) {
  using A = tenet::compute_t<T>;
  constexpr int W = 16 / sizeof(T);
  using L = dc::lanes<T, W>;
  __shared__ A smem[32];
  const int t = threadIdx.x, G = blockDim.x;
  const std::int64_t nv = a.cols / W;
  const A n = static_cast<A>(a.cols);
  std::int64_t r = blockIdx.x;
  if (r >= a.rows) return;
  L cur[V], nxt[V];
  auto load = [&](L* buf, std::int64_t row) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const std::int64_t q = t + static_cast<std::int64_t>(j) * G;
      if (q < nv) buf[j] = *reinterpret_cast<const L*>(x + row * a.cols + q * W);
    }
  };
  load(cur, r);
  const std::int64_t step = Pipe ? gridDim.x : a.rows;
  for (; r < a.rows; r += step) {
    const std::int64_t rn = r + step;
    if (Pipe && rn < a.rows) load(nxt, rn);
    auto ok = [&](int j) { return t + static_cast<std::int64_t>(j) * G < nv; };
    A s0, s1;
    if constexpr (K == row_kind::softmax) {
      A m = -INFINITY;
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (ok(j))
#pragma unroll
          for (int k = 0; k < W; ++k) m = dc::row_max(m, static_cast<A>(cur[j].v[k]));
      m = dc::group_allreduce<true, false>(m, smem);
      A s = 0;
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (ok(j))
#pragma unroll
          for (int k = 0; k < W; ++k) s += dc::row_exp<T>(static_cast<A>(cur[j].v[k]), m);
      s = dc::group_allreduce<false, false>(s, smem);
      s0 = m;
      s1 = A(1) / s;
    } else {
      A s = 0;
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (ok(j))
#pragma unroll
          for (int k = 0; k < W; ++k) s += static_cast<A>(cur[j].v[k]);
      const A mean = dc::group_allreduce<false, false>(s, smem) / n;
      A q = 0;
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (ok(j))
#pragma unroll
          for (int k = 0; k < W; ++k) {
            const A d = static_cast<A>(cur[j].v[k]) - mean;
            q += d * d;
          }
      s0 = mean;
      s1 = A(1) / ::sqrt(dc::group_allreduce<false, false>(q, smem) / n + static_cast<A>(a.eps));
    }
    T* y = a.out + r * a.cols;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const std::int64_t q = t + static_cast<std::int64_t>(j) * G;
      if (q < nv) {
        L o;
        if constexpr (K == row_kind::softmax) {
#pragma unroll
          for (int k = 0; k < W; ++k) o.v[k] = static_cast<T>(dc::row_exp<T>(static_cast<A>(cur[j].v[k]), s0) * s1);
        } else {
          const L wl = *reinterpret_cast<const L*>(a.w + q * W);
          const L bl = *reinterpret_cast<const L*>(a.b + q * W);
#pragma unroll
          for (int k = 0; k < W; ++k)
            o.v[k] = static_cast<T>((static_cast<A>(cur[j].v[k]) - s0) * s1 * static_cast<A>(wl.v[k]) + static_cast<A>(bl.v[k]));
        }
        *reinterpret_cast<L*>(y + q * W) = o;
      }
    }
    if constexpr (Pipe) {
#pragma unroll
      for (int j = 0; j < V; ++j) cur[j] = nxt[j];
    }
  }
}

static void line(const char* w, const char* cfg, double gbps) {
  bench::report(std::string(w) + "_8192x4096_bf16", cfg, "GB/s", gbps, "cuda");
}

template <row_kind K, int V, bool Pipe>
double run(const Tensor<bfloat16, dyn_shape<2>>& x, Tensor<bfloat16, dyn_shape<2>>& y, const bfloat16* w, const bfloat16* b,
           int blocks_per_sm) {
  const std::int64_t r = x.sizes()[0], c = x.sizes()[1];
  dc::row_args<bfloat16> a{y.data(), w, b, r, c, 1e-5};
  const int threads = static_cast<int>(c / 8 / V);
  const unsigned grid = Pipe ? static_cast<unsigned>(std::min<std::int64_t>(r, dc::sm_count(0) * blocks_per_sm)) : static_cast<unsigned>(r);
  return bench::measure_cuda([&] {
    row_pipe_kernel<K, V, Pipe, bfloat16><<<grid, threads, 0, dc::current_stream()>>>(a, x.data());
  }, 0.2);
}

int main() {
  bench::require_gpu("cuda_row_pipeline");
  manual_seed(0);
  const std::int64_t r = 8192, c = 4096;
  Tensor<bfloat16, dyn_shape<2>> a = randn<bfloat16, dyn_shape<2>>(r, c).to(tenet::cuda(0));
  Tensor<bfloat16, dyn_shape<2>> o({r, c}, tenet::cuda(0)), ref;
  Tensor<bfloat16, dyn_shape<1>> w = randn<bfloat16, dyn_shape<1>>(c).to(tenet::cuda(0));
  Tensor<bfloat16, dyn_shape<1>> b = randn<bfloat16, dyn_shape<1>>(c).to(tenet::cuda(0));
  const double bytes = 4.0 * r * c;
  // correctness of the variants against the library
  auto maxdiff = [&](const Tensor<bfloat16, dyn_shape<2>>& p, const Tensor<bfloat16, dyn_shape<2>>& q) {
    Tensor<float, dyn_shape<2>> d = abs(p.cpu().to<float>() - q.cpu().to<float>());
    return static_cast<double>(Tensor<float, dyn_shape<0>>(amax(d)).item());
  };
  ref = softmax<-1>(a);
  run<row_kind::softmax, 2, true>(a, o, nullptr, nullptr, 8);
  std::printf("softmax pipe max diff %g\n", maxdiff(o, ref));
  ref = layer_norm(a, w, b);
  run<row_kind::layer_norm, 2, true>(a, o, w.data(), b.data(), 8);
  std::printf("layer_norm pipe max diff %g\n", maxdiff(o, ref));
  for (int round = 0; round < 2; ++round) {
    double s;
    s = bench::measure_cuda([&] { o = softmax<-1>(a); }, 0.2); line("softmax", "tenet", bytes / s / 1e9);
    s = run<row_kind::softmax, 2, false>(a, o, nullptr, nullptr, 0); line("softmax", "packed_V2", bytes / s / 1e9);
    s = run<row_kind::softmax, 4, false>(a, o, nullptr, nullptr, 0); line("softmax", "packed_V4", bytes / s / 1e9);
    for (int bps : {4, 6, 8}) {
      char cfg[64];
      std::snprintf(cfg, sizeof cfg, "pipe_V2_bps%d", bps);
      s = run<row_kind::softmax, 2, true>(a, o, nullptr, nullptr, bps); line("softmax", cfg, bytes / s / 1e9);
    }
    for (int bps : {8, 12, 16}) {
      char cfg[64];
      std::snprintf(cfg, sizeof cfg, "pipe_V4_bps%d", bps);
      s = run<row_kind::softmax, 4, true>(a, o, nullptr, nullptr, bps); line("softmax", cfg, bytes / s / 1e9);
    }
    s = bench::measure_cuda([&] { o = layer_norm(a, w, b); }, 0.2); line("layer_norm", "tenet", bytes / s / 1e9);
    s = run<row_kind::layer_norm, 2, false>(a, o, w.data(), b.data(), 0); line("layer_norm", "packed_V2", bytes / s / 1e9);
    s = run<row_kind::layer_norm, 4, false>(a, o, w.data(), b.data(), 0); line("layer_norm", "packed_V4", bytes / s / 1e9);
    for (int bps : {4, 6, 8}) {
      char cfg[64];
      std::snprintf(cfg, sizeof cfg, "pipe_V2_bps%d", bps);
      s = run<row_kind::layer_norm, 2, true>(a, o, w.data(), b.data(), bps); line("layer_norm", cfg, bytes / s / 1e9);
    }
    for (int bps : {8, 12, 16}) {
      char cfg[64];
      std::snprintf(cfg, sizeof cfg, "pipe_V4_bps%d", bps);
      s = run<row_kind::layer_norm, 4, true>(a, o, w.data(), b.data(), bps); line("layer_norm", cfg, bytes / s / 1e9);
    }
  }
  return 0;
}
