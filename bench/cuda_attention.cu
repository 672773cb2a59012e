// scaled_dot_product_attention's own CUDA kernels (backend/cuda/attention.cuh), bf16, timed as
// kernels on device buffers: the forward (O and the log-sum-exp) and the backward alone (D, dQ,
// dK / dV from the forward's log-sum-exp). TFLOP/s count the forward as 4 B H L S D (half when
// causal) and the backward as 2.5 times that, as bench/cuda_attention_torch.py (torch's flash,
// efficient and cudnn backends, its twin) does.
//
// Every tiling variant below runs on the same inputs; its outputs are compared with the default
// tiling's (max |difference| over O, dQ, dK, dV, and the log-sum-exp), so a variant that is fast
// and wrong shows. Usage: cuda_attention [--quick]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <tenet/cuda.hpp>
#include <tenet/backend/cuda/attention.cuh>

#include "cuda_harness.hpp"

namespace attn = tenet::detail::cuda::attn;

namespace {

__global__ void fill_random(std::uint16_t* x, std::int64_t n, std::uint32_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    const float u = (static_cast<float>(h & 0xffffff) / 16777216.f) * 2.f - 1.f;  // [-1, 1)
    const float f = u * 1.7f;                                                    // unit variance
    x[i] = static_cast<std::uint16_t>(__float_as_uint(f) >> 16);
  }
}

__global__ void max_abs_diff(const void* a, const void* b, std::int64_t n, bool is_float, float* out) {
  float m = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float x, y;
    if (is_float) {
      x = static_cast<const float*>(a)[i], y = static_cast<const float*>(b)[i];
    } else {
      x = __uint_as_float(static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(a)[i]) << 16);
      y = __uint_as_float(static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(b)[i]) << 16);
    }
    const float d = fabsf(x - y);
    if (d > m || d != d) m = d != d ? __int_as_float(0x7f800000) : d;
  }
  atomicMax(reinterpret_cast<int*>(out), __float_as_int(m));  // non-negative floats order as ints
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct buffers {
  std::int64_t n = 0, rows = 0;
  std::uint16_t *q, *k, *v, *dout, *o, *dq, *dk, *dv, *qkv;
  float *lse, *delta;
  explicit buffers(std::int64_t n_, std::int64_t rows_) : n(n_), rows(rows_) {
    for (std::uint16_t** p : {&q, &k, &v, &dout, &o, &dq, &dk, &dv}) check_cuda(cudaMalloc(p, n * 2), "cudaMalloc");
    check_cuda(cudaMalloc(&qkv, 3 * n * 2), "cudaMalloc");
    check_cuda(cudaMalloc(&lse, rows * 4), "cudaMalloc");
    check_cuda(cudaMalloc(&delta, rows * 4), "cudaMalloc");
  }
  ~buffers() {
    for (std::uint16_t* p : {q, k, v, dout, o, dq, dk, dv, qkv}) cudaFree(p);
    cudaFree(lse), cudaFree(delta);
  }
};

float diff(const void* a, const void* b, std::int64_t n, bool is_float) {
  float* d;
  check_cuda(cudaMalloc(&d, 4), "cudaMalloc");
  check_cuda(cudaMemset(d, 0, 4), "cudaMemset");
  max_abs_diff<<<264, 256>>>(a, b, n, is_float, d);
  float h = 0;
  check_cuda(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(d);
  return h;
}

/// packed: q, k and v are the heads of one [B, S, 3 H D] projection (GPT-2's layout: rows 3 H D
/// apart), x.q holding all three; else each is a contiguous [B, H, S, D].
attn::params params_for(const buffers& x, int B, int H, std::int64_t S, int D, bool causal, bool packed = false) {
  attn::params p;
  p.nb = 1, p.bsize[0] = B, p.hq = H, p.group = 1, p.L = S, p.S = S, p.E = D, p.Ev = D;
  p.scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(D)));
  p.causal = causal;
  const auto op = [&](const void* ptr) {
    attn::operand o;
    o.p = ptr, o.sb[0] = H * S * D, o.sh = S * D, o.sr = D, o.sc = 1, o.vec = true;
    return o;
  };
  p.q = op(x.q), p.k = op(x.k), p.v = op(x.v), p.o = op(x.o), p.dout = op(x.dout);
  if (packed) {
    const auto head = [&](int which) {
      attn::operand o;
      o.p = x.qkv + which * H * D, o.sb[0] = S * 3 * H * D, o.sh = D, o.sr = 3 * H * D, o.sc = 1, o.vec = true;
      return o;
    };
    p.q = head(0), p.k = head(1), p.v = head(2);
  }
  p.out = x.o, p.lse2 = x.lse, p.delta = x.delta, p.dq = x.dq, p.dk = x.dk, p.dv = x.dv;
  return p;
}

#ifndef TENET_BENCH_OLD_ATTN
// The variants: the library's default tiling of the forward and the alternatives being weighed
// (a variant names its tiling at head dims 64 and 128; at 256 each runs the default). The
// backward runs the library's.
template <int HD>
using fwd_base = attn::fwd_tiles<4, 1, 64>;
template <int HD>
using fwd_bn128 = std::conditional_t<HD == 64, attn::fwd_tiles<4, 1, 128>, attn::fwd_tiles_for<HD>>;
template <int HD>
using fwd_w8r2 = std::conditional_t<HD == 256, attn::fwd_tiles_for<HD>, attn::fwd_tiles<8, 2, 32>>;
#endif

struct variant {
  const char* name;
  void (*fwd)(const attn::params&);
  void (*bwd)(const attn::params&);
};

#ifdef TENET_BENCH_OLD_ATTN
// built against an earlier attention.cuh (its include dir first), which has no tiling parameters:
// the A/B of a change to the kernels' code rather than to their tiles
void run_fwd_old(const attn::params& p) { attn::forward<true, attn::no_mask, float>(p); }
void run_bwd_old(const attn::params& p) { attn::backward<true, attn::no_mask, float>(p, true); }
#else
template <template <int> class F>
void run_fwd(const attn::params& p) {
  attn::forward<true, attn::no_mask, float, false, F>(p);
}
void run_bwd(const attn::params& p) { attn::backward<true, attn::no_mask, float>(p, true); }
#endif

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  struct shape {
    int B, H;
    std::int64_t S;
    int D;
  };
  std::vector<shape> shapes = {{16, 12, 1024, 64}, {16, 16, 1024, 64}, {8, 16, 4096, 128}, {2, 16, 8192, 128}};
  if (quick) shapes = {{2, 3, 300, 64}, {1, 2, 333, 128}};
#ifdef TENET_BENCH_OLD_ATTN
  const variant variants[] = {{"old", run_fwd_old, run_bwd_old}};
#else
  const variant variants[] = {
      {"default", run_fwd<attn::fwd_tiles_for>, run_bwd},
      {"fwd_rt1", run_fwd<fwd_base>, run_bwd},
      {"fwd_bn128", run_fwd<fwd_bn128>, run_bwd},
      {"fwd_w8r2", run_fwd<fwd_w8r2>, run_bwd},
  };
#endif
  std::printf("# %s\n", bench::gpu_name().c_str());
  for (const shape& sh : shapes) {
    const std::int64_t n = static_cast<std::int64_t>(sh.B) * sh.H * sh.S * sh.D, rows = static_cast<std::int64_t>(sh.B) * sh.H * sh.S;
    buffers x(n, rows), ref(n, rows);
    fill_random<<<1024, 256>>>(x.q, n, 1), fill_random<<<1024, 256>>>(x.k, n, 2);
    fill_random<<<1024, 256>>>(x.v, n, 3), fill_random<<<1024, 256>>>(x.dout, n, 4);
    fill_random<<<1024, 256>>>(x.qkv, 3 * n, 5);
    check_cuda(cudaDeviceSynchronize(), "fill");
    // GPT-2's layout too for the first shape (its q, k, v: heads of one projection)
    for (int layout = 0; layout < (&sh == &shapes[0] ? 4 : 2); ++layout) {
      const bool causal = layout % 2 == 1, packed = layout >= 2;
      const attn::params p = params_for(x, sh.B, sh.H, sh.S, sh.D, causal, packed);
      const double flops = 4.0 * sh.B * sh.H * static_cast<double>(sh.S) * sh.S * sh.D * (causal ? 0.5 : 1.0);
      for (const variant& var : variants) {
        var.fwd(p);
        var.bwd(p);
        check_cuda(cudaDeviceSynchronize(), var.name);
        float d = 0;
        if (&var == &variants[0]) {
          for (auto [a, b] : {std::pair{x.o, ref.o}, {x.dq, ref.dq}, {x.dk, ref.dk}, {x.dv, ref.dv}})
            check_cuda(cudaMemcpy(b, a, n * 2, cudaMemcpyDeviceToDevice), "copy");
          check_cuda(cudaMemcpy(ref.lse, x.lse, rows * 4, cudaMemcpyDeviceToDevice), "copy");
        } else {
          for (auto [a, b] : {std::pair{x.o, ref.o}, {x.dq, ref.dq}, {x.dk, ref.dk}, {x.dv, ref.dv}})
            d = std::max(d, diff(a, b, n, false));
          d = std::max(d, diff(x.lse, ref.lse, rows, true));
        }
        const double tf = bench::measure_cuda([&] { var.fwd(p); });
        const double tb = bench::measure_cuda([&] { var.bwd(p); });
        std::printf(
            "{\"bench\": \"sdpa_cuda\", \"impl\": \"tenet_%s\", \"layout\": \"%s\", \"B\": %d, \"H\": %d, \"S\": %lld, \"D\": %d, \"causal\": %d, "
            "\"fwd_ms\": %.3f, \"fwd_tflops\": %.1f, \"bwd_ms\": %.3f, \"bwd_tflops\": %.1f, \"max_diff_vs_default\": %.3g}\n",
            var.name, packed ? "qkv" : "bhsd", sh.B, sh.H, static_cast<long long>(sh.S), sh.D, causal ? 1 : 0, tf * 1e3, flops / tf * 1e-12, tb * 1e3,
            2.5 * flops / tb * 1e-12, d);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
