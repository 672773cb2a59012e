// bench-workloads: conv3x3_64_56_b8, conv7x7s2_stem_b8
// Workloads conv3x3_64_56_b8 (conv2d 8x64x56x56 with 64x64x3x3, padding 1: ResNet-18's layer1
// convolution) and conv7x7s2_stem_b8 (8x3x224x224 with 64x3x7x7, stride 2, padding 3: its stem),
// fp32, forward. Metric: GFLOP/s counted as direct convolution (2 N O oh ow C kh kw), whatever
// the kernel. "tenet" is conv2d as a user calls it (the kernel tenet picks); "tenet-im2col" is
// the im2col + GEMM kernel on the same problem, for the crossover (docs/ops.md).
// TENET_BENCH_CONV_SWEEP=1 also times both kernels on 3x3 stride-1 convolutions over channel
// counts and image sizes (one line each: the crossover table of docs/ops.md).
#include <cstdio>
#include <cstdlib>

#include <tenet/tenet.hpp>

#include "harness.hpp"
#include "resnet_stage.hpp"

namespace {
void run(const char* name, std::int64_t n, std::int64_t c, std::int64_t hw, std::int64_t o, std::int64_t k,
         std::int64_t stride, std::int64_t pad) {
  using namespace tenet;
  const auto x = resnet::make_param<resnet::S4>(0, 1.0, 0.0, n, c, hw, hw);
  const auto w = resnet::make_param<resnet::S4>(1, 0.1, 0.0, o, c, k, k);
  const conv2d_options opt{.stride = stride, .padding = pad};
  Tensor<float, resnet::S4> y = conv2d(x, w, opt);
  const auto ys = y.sizes();
  const double flops = 2.0 * static_cast<double>(ys[0] * ys[1] * ys[2] * ys[3] * c * k * k);
  const double t = bench::measure([&] {
    y = conv2d(x, w, opt);
    bench::do_not_optimize(y.data()[0]);
  });
  bench::report(name, "tenet", "GFLOP/s", flops / t / 1e9);
  aten::conv2d op;
  op.stride = {stride, stride};
  op.pad_low = op.pad_high = {pad, pad};
  const auto g = op.geometry(x.sizes(), w.sizes());
  const double ti = bench::measure([&] {
    detail::cpu::run_conv2d_im2col(x.data(), w.data(), y.data(), g);
    bench::do_not_optimize(y.data()[0]);
  });
  bench::report(name, "tenet-im2col", "GFLOP/s", flops / ti / 1e9);
}

/// Winograd F(4x4, 3x3) against im2col + GEMM on 3x3 stride-1 padding-1 convolutions, C = O.
void sweep() {
  using namespace tenet;
  for (const std::int64_t n : {1, 8}) {
    for (const std::int64_t c : {4, 8, 16, 32, 64, 128, 256}) {
      for (const std::int64_t hw : {7, 14, 28, 56}) {
        const auto x = resnet::make_param<resnet::S4>(0, 1.0, 0.0, n, c, hw, hw);
        const auto w = resnet::make_param<resnet::S4>(1, 0.1, 0.0, c, c, 3, 3);
        Tensor<float, resnet::S4> y = zeros<float, resnet::S4>(n, c, hw, hw);
        aten::conv2d op;
        op.pad_low = op.pad_high = {1, 1};
        const auto g = op.geometry(x.sizes(), w.sizes());
        const double flops = 2.0 * static_cast<double>(n * c * hw * hw * c * 9);
        const double tw = bench::measure([&] { detail::cpu::run_conv2d_winograd(x.data(), w.data(), y.data(), g); }, 0.2);
        const double ti = bench::measure([&] { detail::cpu::run_conv2d_im2col(x.data(), w.data(), y.data(), g); }, 0.2);
        std::printf("sweep N %2ld C=O %3ld %3ldx%-3ld  winograd %7.1f  im2col %7.1f GFLOP/s  ratio %.2f\n",
                    static_cast<long>(n), static_cast<long>(c), static_cast<long>(hw), static_cast<long>(hw),
                    flops / tw / 1e9, flops / ti / 1e9, ti / tw);
      }
    }
  }
}
}  // namespace

int main() {
  run("conv3x3_64_56_b8", 8, 64, 56, 64, 3, 1, 1);
  run("conv7x7s2_stem_b8", 8, 3, 224, 64, 7, 2, 3);
  if (const char* e = std::getenv("TENET_BENCH_CONV_SWEEP"); e && e[0] == '1') sweep();
}
