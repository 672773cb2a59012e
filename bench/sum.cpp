// bench-workloads: sum_64Mi
// Workload sum: sum of all 64 Mi fp32 elements. Metric GB/s counting 4 bytes/element read.
#include <tenet/tenet.hpp>

#include "harness.hpp"

int main() {
  using namespace tenet;
  constexpr std::int64_t n = 64 * 1024 * 1024;
  manual_seed(0);
  Tensor<float, shape<dyn>> x = rand<float, shape<dyn>>(n);
  const double t = bench::measure([&] {
    Tensor<float, shape<>> s = sum(x);
    bench::do_not_optimize(s.item());
  });
  bench::report("sum_64Mi", "tenet", "GB/s", bench::gbps(4.0 * n, t));
}
