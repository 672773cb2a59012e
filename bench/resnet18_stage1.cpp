// bench-workloads: resnet18_stage1_b8
// Workload resnet18_stage1_b8: ResNet-18's first stage forward (bench/resnet_stage.hpp) on a batch
// of 8 images 3x224x224 (output 8x64x56x56), fp32. Metric: images per second.
#include <tenet/tenet.hpp>

#include "harness.hpp"
#include "resnet_stage.hpp"

int main() {
  using namespace tenet;
  constexpr std::int64_t batch = 8;
  const resnet::stage1 model;
  const auto x = resnet::make_param<resnet::S4>(0, 1.0, 0.0, batch, 3, 224, 224);
  Tensor<float, resnet::S4> y;
  const double t = bench::measure([&] {
    y = model(x);
    bench::do_not_optimize(y.data()[0]);
  });
  bench::report("resnet18_stage1_b8", "tenet", "img/s", static_cast<double>(batch) / t);
}
