// CUDA memory-bound workloads: device copy bandwidth, gelu(x*a+b)*c on 64 Mi fp32 and bf16, dropout
// (p = 0.1) on 64 Mi fp32,
// softmax and layer_norm on 8192x4096 bf16. GB/s counts bytes read + written once. Each gelu row has
// a copy of the same bytes next to it (copy_64Mi_fp32 moves 512 MB, copy_64Mi_bf16 256 MB): a
// copy's rate depends on its size (an H100 gave cudaMemcpy 2966 GB/s for 256 MB and 2905 for 128
// MB in one lease), so a workload is compared with the copy it could at best be.
#include <cstdint>

#include "cuda_harness.hpp"

using namespace tenet;

template <class T>
void run_gelu(const char* dtype) {
  const std::int64_t n = std::int64_t{64} << 20;
  Tensor<T, dyn_shape<1>> x = randn<T, dyn_shape<1>>(n).to(tenet::cuda(0));
  Tensor<T, dyn_shape<1>> y;
  const T a = T(1.25f), b = T(0.5f), c = T(0.75f);
  const double s = bench::measure_cuda([&] { y = gelu(x * a + b) * c; });
  bench::report(std::string("gelu_affine_64Mi_") + dtype, "tenet", "GB/s", bench::gbps(2.0 * n * sizeof(T), s), "cuda");
}

/// cudaMemcpy and tenet's copy_ of 64 Mi elements of T.
template <class T>
void run_copy(const char* dtype) {
  const std::int64_t n = std::int64_t{64} << 20;
  Tensor<T, dyn_shape<1>> x = randn<T, dyn_shape<1>>(n).to(tenet::cuda(0));
  Tensor<T, dyn_shape<1>> y({n}, tenet::cuda(0));
  const std::string workload = std::string("copy_64Mi_") + dtype;
  double s = bench::measure_cuda([&] {
    TENET_CUDA_CHECK(cudaMemcpyAsync(y.data(), x.data(), n * sizeof(T), cudaMemcpyDeviceToDevice,
                                     tenet::detail::cuda::current_stream()));
  });
  bench::report(workload, "cudaMemcpy", "GB/s", bench::gbps(2.0 * n * sizeof(T), s), "cuda");
  s = bench::measure_cuda([&] { y.copy_(x); });
  bench::report(workload, "tenet", "GB/s", bench::gbps(2.0 * n * sizeof(T), s), "cuda");
}

int main() {
  bench::require_gpu("cuda_pointwise");
  manual_seed(0);
  run_copy<float>("fp32");
  run_gelu<float>("fp32");
  {  // dropout: the mask drawn on the GPU (a uniform_ kernel), then one pointwise kernel
    const std::int64_t n = std::int64_t{64} << 20;
    Tensor<float, dyn_shape<1>> x = randn<float, dyn_shape<1>>(n).to(tenet::cuda(0));
    Tensor<float, dyn_shape<1>> y;
    const double s = bench::measure_cuda([&] { y = dropout(x, 0.1); });
    bench::report("dropout_64Mi_fp32", "tenet", "GB/s", bench::gbps(2.0 * n * 4, s), "cuda");
  }
  run_copy<bfloat16>("bf16");
  run_gelu<bfloat16>("bf16");
  {
    const std::int64_t r = 8192, c = 4096;
    using B2 = Tensor<bfloat16, dyn_shape<2>>;
    B2 x = randn<bfloat16, dyn_shape<2>>(r, c).to(tenet::cuda(0));
    B2 y;
    double s = bench::measure_cuda([&] { y = softmax<-1>(x); });
    bench::report("softmax_8192x4096_bf16", "tenet", "GB/s", bench::gbps(2.0 * r * c * 2, s), "cuda");
    Tensor<bfloat16, dyn_shape<1>> w = randn<bfloat16, dyn_shape<1>>(c).to(tenet::cuda(0));
    Tensor<bfloat16, dyn_shape<1>> bias = randn<bfloat16, dyn_shape<1>>(c).to(tenet::cuda(0));
    s = bench::measure_cuda([&] { y = layer_norm(x, w, bias); });
    bench::report("layer_norm_8192x4096_bf16", "tenet", "GB/s", bench::gbps(2.0 * r * c * 2, s), "cuda");
  }
  return 0;
}
