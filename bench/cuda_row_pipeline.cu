// The row kernels on 8192 x 4096 (docs/cuda.md, Benchmarks): softmax, log_softmax, layer_norm and
// rms_norm in bf16 and fp16 through the public functions, and softmax / layer_norm through
// launch_rows (the kernel without the host path) to tell the kernel from the host's work; then
// the host's time per softmax() call (enqueue only, the GPU behind). A contiguous 16-bit input
// of this shape runs row_kernels.cuh's row_pipe_kernel. GB/s counts bytes read + written once (the
// norms' weight and bias not counted). JSON lines; not part of the twin comparison, which has
// softmax and layer_norm in bf16 (bench/cuda_pointwise.cu).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "cuda_harness.hpp"

using namespace tenet;
namespace dc = tenet::detail::cuda;

template <class T>
void run(const char* dtype) {
  const std::int64_t r = 8192, c = 4096;
  using T2 = Tensor<T, dyn_shape<2>>;
  using T1 = Tensor<T, dyn_shape<1>>;
  T2 x = randn<T, dyn_shape<2>>(r, c).to(tenet::cuda(0));
  T1 w = randn<T, dyn_shape<1>>(c).to(tenet::cuda(0)), b = randn<T, dyn_shape<1>>(c).to(tenet::cuda(0));
  T2 y({r, c}, tenet::cuda(0));
  const double bytes = 2.0 * r * c * sizeof(T);
  auto line = [&](const char* op, const char* impl, double s) {
    bench::report(std::string(op) + "_8192x4096_" + dtype, impl, "GB/s", bench::gbps(bytes, s), "cuda");
  };
  line("softmax", "tenet", bench::measure_cuda([&] { y = softmax<-1>(x); }));
  line("log_softmax", "tenet", bench::measure_cuda([&] { y = log_softmax<-1>(x); }));
  line("layer_norm", "tenet", bench::measure_cuda([&] { y = layer_norm(x, w, b); }));
  line("rms_norm", "tenet", bench::measure_cuda([&] { y = rms_norm(x, w, 1e-5); }));
  T2 o({r, c}, tenet::cuda(0));
  dc::row_args<T> a{o.data(), nullptr, nullptr, r, c, 0.0};
  line("softmax", "tenet launch_rows",
       bench::measure_cuda([&] { dc::launch_rows<dc::row_kind::softmax, T>(a, dc::ptr_src<T>{x.data()}, true); }));
  a.w = w.data();
  a.b = b.data();
  a.eps = 1e-5;
  line("layer_norm", "tenet launch_rows",
       bench::measure_cuda([&] { dc::launch_rows<dc::row_kind::layer_norm, T>(a, dc::ptr_src<T>{x.data()}, true); }));
}

int main() {
  bench::require_gpu("cuda_row_pipeline");
  manual_seed(0);
  run<bfloat16>("bf16");
  run<float16>("fp16");
  // the host's time per softmax() call: 200 calls enqueued while the GPU is behind
  Tensor<bfloat16, dyn_shape<2>> x = randn<bfloat16, dyn_shape<2>>(8192, 4096).to(tenet::cuda(0)), y;
  for (int round = 0; round < 2; ++round) {
    tenet::cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; ++i) y = softmax<-1>(x);
    const auto t1 = std::chrono::steady_clock::now();
    tenet::cuda::synchronize();
    const auto t2 = std::chrono::steady_clock::now();
    bench::report("softmax_8192x4096_bf16_host", "tenet enqueue", "us/call",
                  std::chrono::duration<double, std::micro>(t1 - t0).count() / 200, "cuda");
    bench::report("softmax_8192x4096_bf16_host", "tenet enqueue + run", "us/call",
                  std::chrono::duration<double, std::micro>(t2 - t0).count() / 200, "cuda");
  }
  return 0;
}
