// The prim contract: a closed, counted set; decompose_t leaves prims only (or the composites the
// CPU backend declares); composites run natively agree with their decomposition.
#include <catch2/catch.hpp>

#include <boost/hana/concat.hpp>
#include <boost/hana/length.hpp>

#include <tenet/tenet.hpp>

#include <tenet/prims/prim_list.hpp>

#include "reference.hpp"

using namespace tenet;

TEST_CASE("prims: the prim set is closed and counted") {
  constexpr std::size_t n = decltype(boost::hana::length(prim::all_prims))::value;
  STATIC_REQUIRE(n == 50);
  STATIC_REQUIRE(n <= 64);  // the bound for the closed set
}

TEST_CASE("prims: decompose_t rewrites composites into prims") {
  using X = Tensor<float, shape<4, 8>>;
  using E = decltype(gelu(std::declval<X>() * 2.0f) + sigmoid(std::declval<X>()) + softmax<-1>(std::declval<X>()));
  using D = decompose_t<E>;
  STATIC_REQUIRE(!detail::holds_only_prims<E>());
  STATIC_REQUIRE(detail::holds_only_prims<D>());
  // the CPU keeps softmax over the last dim as a native composite, and nothing else
  using DC = decompose_t<E, detail::cpu_simd>;
  STATIC_REQUIRE(!detail::holds_only_prims<DC>());
  STATIC_REQUIRE(detail::is_closed<DC, detail::cpu_simd>());
}

TEST_CASE("prims: native softmax equals its decomposition") {
  manual_seed(7);
  auto x = randn<float, shape<dyn, dyn>>(37, 129);
  x(3, 5) = -INFINITY;
  Tensor<float, shape<dyn, dyn>> native = softmax<-1>(x);
  Tensor<float, shape<dyn, dyn>> native_log = log_softmax<-1>(x);
  // the reference backend decomposes; evaluate the prim tree directly
  auto reference = detail::decompose<detail::reference_backend>(softmax<-1>(x));
  auto reference_log = detail::decompose<detail::reference_backend>(log_softmax<-1>(x));
  Tensor<float, shape<dyn, dyn>> decomposed = reference;
  Tensor<float, shape<dyn, dyn>> decomposed_log = reference_log;
  for (std::int64_t i = 0; i < 37; ++i)
    for (std::int64_t j = 0; j < 129; ++j) {
      CHECK(native(i, j) == Approx(decomposed(i, j)).epsilon(1e-5).margin(1e-7));
      CHECK(native_log(i, j) == Approx(decomposed_log(i, j)).epsilon(1e-5).margin(1e-5));
    }
}
