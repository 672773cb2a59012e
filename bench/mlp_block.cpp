// bench-workloads: mlp_block_512x1024_h4096 linear_bias_gelu_2048
// Workload mlp_block: y = x + W2·gelu(W1·x + b1) + b2 (two nn.Linear layers with a residual), x
// 512x1024, hidden 4096, fp32: two GEMMs, each with its bias/activation/residual as an epilogue.
// Workload linear_bias_gelu: y = gelu(x·Wᵀ + b), 2048x2048 by 2048x2048, fp32: one GEMM with
// the bias and gelu in its epilogue. Metric GFLOP/s counting the GEMMs' 2·M·N·K only.
#include <tenet/tenet.hpp>

#include "harness.hpp"

int main() {
  using namespace tenet;
  using M = Tensor<float, shape<dyn, dyn>>;
  using V = Tensor<float, shape<dyn>>;
  manual_seed(0);
  {
    constexpr std::int64_t n = 512, d = 1024, h = 4096;
    M x = randn<float, shape<dyn, dyn>>(n, d);
    M w1 = randn<float, shape<dyn, dyn>>(h, d) * 0.03f;
    V b1 = randn<float, shape<dyn>>(h);
    M w2 = randn<float, shape<dyn, dyn>>(d, h) * 0.015f;
    V b2 = randn<float, shape<dyn>>(d);
    M y;
    const double t = bench::measure([&] {
      y = x + linear(gelu(linear(x, w1, b1)), w2, b2);
      bench::do_not_optimize(y.data()[n * d - 1]);
    });
    bench::report("mlp_block_512x1024_h4096", "tenet", "GFLOP/s", 2.0 * 2.0 * n * d * h / t / 1e9);
  }
  {
    constexpr std::int64_t n = 2048;
    M x = randn<float, shape<dyn, dyn>>(n, n);
    M w = randn<float, shape<dyn, dyn>>(n, n) * 0.02f;
    V b = randn<float, shape<dyn>>(n);
    M y;
    const double t = bench::measure([&] {
      y = gelu(linear(x, w, b));
      bench::do_not_optimize(y.data()[n * n - 1]);
    });
    bench::report("linear_bias_gelu_2048", "tenet", "GFLOP/s", 2.0 * n * n * n / t / 1e9);
  }
}
