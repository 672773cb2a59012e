// CUDA convolution workloads, fp32 (no TF32 on either side): one conv2d 3x3 64 -> 64 on
// 32 x 64 x 56 x 56 (pad 1), forward and forward + backward (input and weight gradients,
// accumulated into .grad as torch's twin does), and
// ResNet-18's first stage (bench/resnet_stage.hpp: conv 7x7/2 + bn + relu + max_pool, two
// BasicBlocks) at batch 32, 224 x 224, forward (eval-mode batch norm). TFLOP/s counts
// 2 N O oh ow C kh kw per convolution (three times that for forward + backward).
#include <cstdint>

#include "cuda_harness.hpp"
#include "resnet_stage.hpp"

using namespace tenet;
using S4 = dyn_shape<4>;

int main() {
  bench::require_gpu("cuda_conv");
  manual_seed(0);
  const auto gpu = tenet::cuda(0);
  {
    const std::int64_t n = 32, c = 64, h = 56;
    Tensor<float, S4> x = randn<float, S4>(n, c, h, h).to(gpu);
    Tensor<float, S4> w = Tensor<float, S4>(randn<float, S4>(c, c, 3, 3) * 0.05f).to(gpu);
    Tensor<float, S4> y;
    const double flops = 2.0 * n * c * h * h * c * 9;
    double s = bench::measure_cuda([&] { y = conv2d(x, w, {.padding = 1}); });
    bench::report("conv2d_3x3_64_56x56_b32_fp32", "tenet", "TFLOP/s", flops / s / 1e12, "cuda");
    x.requires_grad_();
    w.requires_grad_();
    s = bench::measure_cuda([&] {
      Tensor<float, dyn_shape<0>> l = sum(conv2d(x, w, {.padding = 1}));
      l.backward();
    });
    bench::report("conv2d_3x3_64_56x56_b32_fp32_fwd_bwd", "tenet", "TFLOP/s", 3.0 * flops / s / 1e12, "cuda");
  }
  {
    resnet::stage1 net;
    net.to(gpu);
    const std::int64_t n = 32;
    Tensor<float, S4> x = randn<float, S4>(n, 3, 224, 224).to(gpu);
    Tensor<float, S4> y;
    const double s = bench::measure_cuda([&] { y = net(x); });
    bench::report("resnet18_stage1_b32_fp32", "tenet", "img/s", static_cast<double>(n) / s, "cuda");
  }
  return 0;
}
