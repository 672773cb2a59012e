// bench-workloads: sgemm_2048
// Workload sgemm: C = A*B, fp32, 2048x2048 times 2048x2048, via tenet::matmul.
// Metric GFLOP/s = 2*n^3/t.
#include <tenet/tenet.hpp>

#include "harness.hpp"

int main() {
  using namespace tenet;
  constexpr std::int64_t n = 2048;
  manual_seed(0);
  Tensor<float, shape<dyn, dyn>> a = randn<float, shape<dyn, dyn>>(n, n);
  Tensor<float, shape<dyn, dyn>> b = randn<float, shape<dyn, dyn>>(n, n);
  Tensor<float, shape<dyn, dyn>> c(sizes_t<2>{n, n});
  const double t = bench::measure([&] {
    c = matmul(a, b);
    bench::do_not_optimize(c.data()[n * n - 1]);
  });
  bench::report("sgemm_2048", "tenet", "GFLOP/s", 2.0 * n * n * n / t / 1e9);
}
