// bench-workloads: var_4096x4096
// Workload var: y = var<1>(x) (correction 1, one value per row), x 4096x4096 fp32. Metric GB/s
// counting 4 bytes/element read. tenet runs it as one kernel (backend/cpu/moments.hpp); set
// TENET_BENCH_DECOMPOSED=1 to also time the decomposition (mean, centered squares, sum, divide)
// as workload var_4096x4096_decomposed.
#include <cstdlib>

#include <tenet/tenet.hpp>

#include "harness.hpp"

int main() {
  using namespace tenet;
  constexpr std::int64_t n = 4096;
  manual_seed(0);
  Tensor<float, shape<dyn, dyn>> x = randn<float, shape<dyn, dyn>>(n, n);
  const double t = bench::measure([&] {
    Tensor<float, shape<dyn>> v = var<1>(x);
    bench::do_not_optimize(v.data()[n - 1]);
  });
  bench::report("var_4096x4096", "tenet", "GB/s", bench::gbps(4.0 * n * n, t));
  if (std::getenv("TENET_BENCH_DECOMPOSED")) {
    const double td = bench::measure([&] {
      Tensor<float, shape<dyn>> v = detail::decompose<detail::reference_backend>(var<1>(x));
      bench::do_not_optimize(v.data()[n - 1]);
    });
    bench::report("var_4096x4096_decomposed", "tenet", "GB/s", bench::gbps(4.0 * n * n, td));
  }
}
