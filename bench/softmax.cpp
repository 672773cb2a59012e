// bench-workloads: softmax_4096x4096
// Workload softmax: softmax over the last dim of a 4096x4096 fp32 tensor, written into a
// fresh result each call (as PyTorch's). Metric GB/s counting read+write = 8 bytes/element.
#include <tenet/tenet.hpp>

#include "harness.hpp"

int main() {
  using namespace tenet;
  constexpr std::int64_t n = 4096;
  manual_seed(0);
  Tensor<float, shape<dyn, dyn>> x = randn<float, shape<dyn, dyn>>(n, n);
  Tensor<float, shape<dyn, dyn>> y(sizes_t<2>{n, n});
  const double t = bench::measure([&] {
    y = softmax<1>(x);
    bench::do_not_optimize(y.data()[n * n - 1]);
  });
  bench::report("softmax_4096x4096", "tenet", "GB/s", bench::gbps(8.0 * n * n, t));
}
