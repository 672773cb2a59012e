// bench-workloads: resnet18_stage1_b8, resnet18_stage1_b1
// Workloads resnet18_stage1_b8 and resnet18_stage1_b1: ResNet-18's first stage forward
// (bench/resnet_stage.hpp) on a batch of 8 images 3x224x224 (output 8x64x56x56), and on one image
// (an inference server's latency case), fp32. Metric: images per second.
#include <tenet/tenet.hpp>

#include "harness.hpp"
#include "resnet_stage.hpp"

int main() {
  using namespace tenet;
  const resnet::stage1 model;
  for (const std::int64_t batch : {8, 1}) {
    const auto x = resnet::make_param<resnet::S4>(0, 1.0, 0.0, batch, 3, 224, 224);
    Tensor<float, resnet::S4> y;
    const double t = bench::measure([&] {
      y = model(x);
      bench::do_not_optimize(y.data()[0]);
    });
    bench::report(batch == 8 ? "resnet18_stage1_b8" : "resnet18_stage1_b1", "tenet", "img/s",
                  static_cast<double>(batch) / t);
  }
}
