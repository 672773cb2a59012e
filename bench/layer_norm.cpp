// bench-workloads: layer_norm_8192x1024
// Workload layer_norm: layer_norm over the last dim of an 8192x1024 fp32 tensor with an affine
// weight and bias, into a fresh result each call. Metric GB/s counting read+write = 8 bytes/element.
#include <tenet/tenet.hpp>

#include "harness.hpp"

int main() {
  using namespace tenet;
  constexpr std::int64_t rows = 8192, cols = 1024;
  manual_seed(0);
  Tensor<float, shape<dyn, dyn>> x = randn<float, shape<dyn, dyn>>(rows, cols);
  Tensor<float, shape<dyn>> w = randn<float, shape<dyn>>(cols);
  Tensor<float, shape<dyn>> b = randn<float, shape<dyn>>(cols);
  Tensor<float, shape<dyn, dyn>> y;
  const double t = bench::measure([&] {
    y = layer_norm(x, w, b);
    bench::do_not_optimize(y.data()[rows * cols - 1]);
  });
  bench::report("layer_norm_8192x1024", "tenet", "GB/s", bench::gbps(8.0 * rows * cols, t));
}
