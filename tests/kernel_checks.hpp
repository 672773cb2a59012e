#pragma once
// Helpers of the scheduler tests (test_compile*.cpp): the kernels one evaluation launches, and
// bit-for-bit equality of two tensors.
#include <catch2/catch.hpp>

#include <cstdint>

#include <tenet/tenet.hpp>

namespace tenet_test {

/// How many kernels evaluating e launches (tenet::detail::kernels_launched).
template <class E>
std::int64_t launched(const E& e) {
  auto& k = tenet::detail::kernels_launched();
  k = 0;
  (void)tenet::eval(e);
  return k;
}

/// Same sizes and the same bits element by element (any layouts).
template <class A, class B>
void require_equal(const A& a, const B& b) {
  REQUIRE(a.sizes() == b.sizes());
  auto ac = a.contiguous();
  auto bc = b.contiguous();
  for (std::int64_t i = 0; i < ac.numel(); ++i) {
    INFO("element " << i);
    REQUIRE(ac.data()[i] == bc.data()[i]);
  }
}

}  // namespace tenet_test
