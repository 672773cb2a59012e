// CUDA GEMMs through cuBLASLt: matmul 8192^3 bf16, and linear + bias + gelu 8192x8192x8192 bf16
// fused (cuda::linear, and the expression gelu(a @ b.T + bias, tanh), which the scheduler runs as
// the same one cuBLASLt call with the GELU_BIAS epilogue) and unfused (matmul, then one pointwise
// kernel), each also with matmul tuning (cuBLASLt's candidates timed on the first call).
// TFLOP/s counts 2*M*N*K.
#include <cstdint>
#include <string>

#include "cuda_harness.hpp"

using namespace tenet;
using B2 = Tensor<bfloat16, dyn_shape<2>>;

int main() {
  bench::require_gpu("cuda_gemm");
  manual_seed(0);
  const std::int64_t n = 8192;
  const double flops = 2.0 * n * n * n;
  B2 a = randn<bfloat16, dyn_shape<2>>(n, n).to(tenet::cuda(0));
  B2 b = randn<bfloat16, dyn_shape<2>>(n, n).to(tenet::cuda(0));
  Tensor<bfloat16, dyn_shape<1>> bias = randn<bfloat16, dyn_shape<1>>(n).to(tenet::cuda(0));
  B2 c;
  double s = 0;
  // each product twice: with cuBLASLt's heuristic choice, then with matmul tuning (the first call
  // of each problem, measure's warm-up, times cuBLASLt's candidates)
  for (const bool tuned : {false, true}) {
    cuda::set_matmul_tuning(tuned);
    const std::string impl = tuned ? "tenet_tuned" : "tenet";
    s = bench::measure_cuda([&] { c = matmul(a, b); });
    bench::report("gemm_8192_bf16", impl, "TFLOP/s", flops / s / 1e12, "cuda");
    s = bench::measure_cuda([&] { c = cuda::linear(a, b, bias, cuda::activation::gelu_tanh); });
    bench::report("linear_bias_gelu_8192_bf16", impl + "_fused_epilogue", "TFLOP/s", flops / s / 1e12, "cuda");
    // the expression: the scheduler runs it as the same one cuBLASLt call
    s = bench::measure_cuda([&] { c = gelu(matmul(a, b.transpose<0, 1>()) + bias, approximate_tanh); });
    bench::report("linear_bias_gelu_8192_bf16", impl + "_expression", "TFLOP/s", flops / s / 1e12, "cuda");
  }
  cuda::set_matmul_tuning(false);
  // unfused on purpose: the GEMM, then one pointwise kernel
  s = bench::measure_cuda([&] {
    c = matmul(a, b.transpose<0, 1>());
    c = gelu(c + bias, approximate_tanh);
  });
  bench::report("linear_bias_gelu_8192_bf16", "tenet_unfused", "TFLOP/s", flops / s / 1e12, "cuda");
  {
    cuda::set_allow_tf32(false);
    const std::int64_t m = 4096;
    Tensor<float, dyn_shape<2>> x = randn<float, dyn_shape<2>>(m, m).to(tenet::cuda(0));
    Tensor<float, dyn_shape<2>> y = randn<float, dyn_shape<2>>(m, m).to(tenet::cuda(0));
    Tensor<float, dyn_shape<2>> z;
    s = bench::measure_cuda([&] { z = matmul(x, y); });
    bench::report("gemm_4096_fp32", "tenet", "TFLOP/s", 2.0 * m * m * m / s / 1e12, "cuda");
    cuda::set_allow_tf32(true);
    s = bench::measure_cuda([&] { z = matmul(x, y); });
    bench::report("gemm_4096_fp32_tf32", "tenet", "TFLOP/s", 2.0 * m * m * m / s / 1e12, "cuda");
    cuda::set_allow_tf32(false);
  }
  return 0;
}
