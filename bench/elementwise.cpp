// bench-workloads: gelu_affine_16Mi
// Workload gelu_affine: y = gelu(x*a+b)*c on 16 Mi fp32 elements (x: shape<dyn>; a, b, c float
// scalars), assigned as users write it (a fresh result each call, as PyTorch's). Metric GB/s counting read+write = 8 bytes/element.
#include <tenet/tenet.hpp>

#include "harness.hpp"

int main() {
  using namespace tenet;
  constexpr std::int64_t n = 16 * 1024 * 1024;
  manual_seed(0);
  Tensor<float, shape<dyn>> x = randn<float, shape<dyn>>(n);
  Tensor<float, shape<dyn>> y(sizes_t<1>{n});
  const float a = 1.5f, b = 0.25f, c = 0.5f;
  const double t = bench::measure([&] {
    y = gelu(x * a + b) * c;
    bench::do_not_optimize(y.data()[n - 1]);
  });
  bench::report("gelu_affine_16Mi", "tenet", "GB/s", bench::gbps(8.0 * n, t));
}
