// Helpers of the CUDA autograd tests (tests/cuda/test_cuda_autograd*.cu): leaves made from CPU
// values on either device, and the GPU-against-CPU comparison.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <tenet/cuda.hpp>

#include "check_close.hpp"

namespace tenet::test {
using namespace tenet;

template <class T>
using M = Tensor<T, dyn_shape<2>>;
template <class T>
using V1 = Tensor<T, dyn_shape<1>>;
template <class T>
using S0 = Tensor<T, dyn_shape<0>>;

/// A CPU tensor's copy on d (itself on the CPU), a fresh leaf that requires grad.
template <class T, class S>
Tensor<T, S> leaf(const Tensor<T, S>& cpu_value, device d) {
  Tensor<T, S> t = d.is_cpu() ? cpu_value.detach().clone() : cpu_value.detach().to(d);
  t.requires_grad_();
  return t;
}

template <class T>
constexpr double tol() {
  if constexpr (std::is_same_v<T, bfloat16>) return 0x1p-5;  // 8 units of bf16 precision (2^-8)
  else if constexpr (std::is_same_v<T, float16>) return 0x1p-8;  // 8 units of fp16's (2^-11)
  else return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

/// |gpu - cpu| <= tol (|cpu| + max |cpu|) elementwise (the second term: values near 0 of a sum
/// computed in another order); gpu on cuda(0), cpu on the CPU, same sizes.
template <class T, class S>
void check_same(const Tensor<T, S>& g, const Tensor<T, S>& c, const char* what) {
  INFO(what);
  REQUIRE(g.defined());
  REQUIRE(c.defined());
  CHECK(g.device() == gpu);
  REQUIRE(c.device().is_cpu());
  REQUIRE(g.sizes() == c.sizes());
  const auto gh = g.cpu().contiguous();
  const auto ch = c.contiguous();
  const std::int64_t n = ch.numel();
  double scale = 0;
  for (std::int64_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(static_cast<double>(ch.data()[i])));
  std::int64_t bad = 0;
  double worst = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = gh.data()[i], b = ch.data()[i];
    const double err = std::abs(a - b) / (tol<T>() * (std::abs(b) + scale) + 1e-300);
    if (!(err <= 1.0)) ++bad;
    worst = std::max(worst, err);
  }
  INFO("elements " << n << ", mismatches " << bad << ", worst error / tolerance " << worst);
  CHECK(bad == 0);
}

}  // namespace tenet::test
