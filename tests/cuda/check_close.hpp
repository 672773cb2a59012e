// check_close for the CUDA tests: a GPU result against the CPU backend's value.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>

#include <tenet/cuda.hpp>

namespace tenet::test {

/// The device every CUDA test runs on.
inline const device gpu = tenet::cuda(0);

/// max |a - b| / (atol + rtol |b|) <= 1 over every element (a from the GPU, b from the CPU).
template <class T, class S, class U, class S2>
void check_close(const Tensor<T, S>& gpu, const Tensor<U, S2>& cpu_ref, double rtol, double atol) {
  REQUIRE(gpu.device() == tenet::device(tenet::cuda(0)));
  REQUIRE(cpu_ref.device().is_cpu());
  auto g = gpu.cpu().contiguous();
  auto c = cpu_ref.contiguous();
  REQUIRE(g.sizes() == c.sizes());
  const std::int64_t n = g.numel();
  std::int64_t bad = 0;
  double worst = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = static_cast<double>(static_cast<float>(g.data()[i]));
    const double b = static_cast<double>(static_cast<float>(c.data()[i]));
    // equal values pass even with zero tolerances (0 / 0 would be NaN)
    const double err = a == b ? 0.0 : std::abs(a - b) / (atol + rtol * std::abs(b));
    if (!(err <= 1.0) && !(std::isnan(a) && std::isnan(b))) ++bad;
    if (err > worst) worst = err;
  }
  INFO("elements " << n << ", mismatches " << bad << ", worst error/tolerance " << worst);
  CHECK(bad == 0);
}

}  // namespace tenet::test
