// CUDA GEMMs through cuBLASLt: matmul 8192^3 bf16, and linear + bias + gelu 8192x8192x8192 bf16
// fused (cuda::linear, and the expression gelu(a @ b.T + bias, tanh), which the scheduler runs as
// the same one cuBLASLt call with the GELU_BIAS epilogue) and unfused (matmul, then one pointwise
// kernel), each also with matmul tuning (cuBLASLt's candidates timed on the first call).
// TFLOP/s counts 2*M*N*K. Last, a linear layer's forward + backward in fp32/TF32 (6*M*N*K).
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
  {
    // a linear layer's forward and backward in fp32 with TF32 (training): y = x w^T + b, then
    // y.backward(g) giving dx, dw and db; 3 GEMMs (6 M N K flops). tenet's dw and db come from one
    // GEMM with the bias-gradient epilogue.
    cuda::set_allow_tf32(true);
    const std::int64_t m = 8192, k = 4096, o = 4096;
    using F2 = Tensor<float, dyn_shape<2>>;
    F2 x = randn<float, dyn_shape<2>>(m, k).to(tenet::cuda(0));
    F2 w = F2(randn<float, dyn_shape<2>>(o, k) * 0.02f).to(tenet::cuda(0));
    Tensor<float, dyn_shape<1>> bb = randn<float, dyn_shape<1>>(o).to(tenet::cuda(0));
    F2 g = randn<float, dyn_shape<2>>(m, o).to(tenet::cuda(0));
    x.requires_grad_();
    w.requires_grad_();
    bb.requires_grad_();
    for (const bool epilogue : {true, false}) {
      detail::cuda::bias_grad_epilogue_enabled() = epilogue;
      s = bench::measure_cuda([&] {
        x.set_grad({});
        w.set_grad({});
        bb.set_grad({});
        F2 y = linear(x, w, bb);
        y.backward(g);
      });
      bench::report("linear_fwd_bwd_8192x4096x4096_fp32_tf32", epilogue ? "tenet" : "tenet_separate_bias_sum",
                    "TFLOP/s", 6.0 * m * k * o / s / 1e12, "cuda");
    }
    detail::cuda::bias_grad_epilogue_enabled() = true;
    cuda::set_allow_tf32(false);
  }
  return 0;
}
