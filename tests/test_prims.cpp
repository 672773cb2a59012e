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
  STATIC_REQUIRE(n == 56);
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
  x(7, 2) = NAN;                                             // a NaN row: all NaN
  for (std::int64_t j = 0; j < 129; ++j) x(9, j) = -INFINITY;  // all -inf: NaN (0/0), as torch
  x(11, 0) = INFINITY;                                        // +inf: inf - inf, NaN
  Tensor<float, shape<dyn, dyn>> native = softmax<-1>(x);
  Tensor<float, shape<dyn, dyn>> native_log = log_softmax<-1>(x);
  // the reference backend decomposes; evaluate the prim tree directly
  auto reference = detail::decompose<detail::reference_backend>(softmax<-1>(x));
  auto reference_log = detail::decompose<detail::reference_backend>(log_softmax<-1>(x));
  Tensor<float, shape<dyn, dyn>> decomposed = reference;
  Tensor<float, shape<dyn, dyn>> decomposed_log = reference_log;
  auto same = [](float got, float want, double tol) {
    if (std::isnan(want)) return std::isnan(got);
    return got == Approx(want).epsilon(tol).margin(tol);
  };
  for (std::int64_t i = 0; i < 37; ++i)
    for (std::int64_t j = 0; j < 129; ++j) {
      INFO("row " << i << " col " << j);
      CHECK(same(native(i, j), decomposed(i, j), 1e-5));
      CHECK(same(native_log(i, j), decomposed_log(i, j), 1e-5));
    }
  CHECK(std::isnan(native(7, 0)));
  CHECK(std::isnan(native(9, 100)));
  CHECK(std::isnan(native_log(11, 3)));
}

TEST_CASE("prims: pointwise composites run natively equal their decomposition") {
  manual_seed(11);
  auto x = randn<float, shape<dyn>>(1000);
  x(0) = 0.0f;
  x(1) = -30.0f;
  x(2) = 30.0f;
  x(3) = INFINITY;
  x(4) = -INFINITY;
  auto compare = [&](const auto& expr) {
    Tensor<float, shape<dyn>> native = expr;
    Tensor<float, shape<dyn>> reference = detail::decompose<detail::reference_backend>(expr);
    for (std::int64_t i = 0; i < 1000; ++i) {
      INFO("element " << i << " x = " << x(i));
      if (std::isnan(reference(i)))
        CHECK(std::isnan(native(i)));
      else
        CHECK(native(i) == Approx(reference(i)).epsilon(2e-6).margin(1e-6));
    }
  };
  compare(gelu(x));
  compare(gelu(x, approximate_tanh));
  compare(sigmoid(x));
  compare(silu(x));
  // and the scalar (non-vector) path: a strided input
  auto strided = x.slice<0>(0, 1000, 3);
  Tensor<float, shape<dyn>> a = gelu(strided);
  Tensor<float, shape<dyn>> b = detail::decompose<detail::reference_backend>(gelu(strided));
  for (std::int64_t i = 0; i < a.numel(); ++i) CHECK(a(i) == Approx(b(i)).epsilon(2e-6).margin(1e-6));
}

TEST_CASE("prims: integer division by zero throws value_error") {
  auto a = arange<std::int32_t>(6);
  auto b = arange<std::int32_t>(6);  // b(0) == 0
  auto run = [&] { Tensor<std::int32_t, shape<dyn>> r = remainder(a, b); };
  CHECK_THROWS_AS(run(), value_error);
  CHECK_THROWS_WITH(run(), Catch::Contains("division by zero"));
  Tensor<std::int32_t, shape<dyn>> ok = remainder(a, 4);  // the flag does not leak into the next op
  CHECK(ok(5) == 1);
  // floats divide by zero as IEEE says
  Tensor<float, shape<dyn>> f = fmod(a.to<float>(), 0.0f);
  CHECK(std::isnan(f(1)));
}

TEST_CASE("shapes: a symbolic extent is bound once where operands meet") {
  using S = shape<sym<"T">, 4>;
  auto a = ones<float, S>(3);
  auto b = ones<float, S>(3);
  Tensor<float, S> c = a + b;
  CHECK(c.sizes()[0] == 3);
  auto one = ones<float, S>(1);  // broadcasting 1 against 3 would be legal for dyn, not for one symbol
  auto bad = [&] { Tensor<float, S> r = a + one; };
  CHECK_THROWS_AS(bad(), shape_error);
  CHECK_THROWS_WITH(bad(), Catch::Contains("sym<\"T\">") && Catch::Contains("is 3"));
  // different symbols meet through the ordinary broadcast check
  auto d = ones<float, shape<sym<"S">, 4>>(1);
  Tensor<float, shape<dyn, 4>> e = a + d;
  CHECK(e.sizes()[0] == 3);
}

TEST_CASE("prims: the vector erf holds 4e-7 relative error over a dense sweep") {
  // the CPU backend's float erf is its own rational fit (backend/cpu/simd.hpp); check it densely
  auto x = linspace<float>(-6.0, 6.0, 1200001);
  Tensor<float, shape<dyn>> y = erf(x);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double want = std::erf(static_cast<double>(x(i)));
    if (std::abs(y(i) - want) > 4e-7 * std::abs(want) + 1e-30 && bad++ < 5)
      UNSCOPED_INFO("erf(" << x(i) << ") = " << y(i) << ", want " << want);
  }
  CHECK(bad == 0);
  auto small = linspace<float>(1e-30, 1e-3, 1001);  // relative accuracy near 0
  Tensor<float, shape<dyn>> ys = erf(small);
  for (std::int64_t i = 0; i < small.numel(); ++i)
    CHECK(ys(i) == Approx(std::erf(static_cast<double>(small(i)))).epsilon(4e-7));
}

TEST_CASE("device: the tag carries cpu, cuda and metal; guards restore the default") {
  CHECK(cpu.str() == "cpu");
  CHECK(cuda(1).str() == "cuda:1");
  CHECK(metal().str() == "metal:0");
  CHECK(default_device() == cpu);
  {
    device_guard g(cuda(0));
    CHECK(default_device() == cuda(0));
    // no CUDA backend in this build: allocating there says so and how to fix it
    auto make = [] { return zeros<float, shape<2, 2>>(); };
    CHECK_THROWS_AS(make(), device_error);
    CHECK_THROWS_WITH(make(), Catch::Contains("cuda:0") && Catch::Contains("TENET_CUDA"));
  }
  CHECK(default_device() == cpu);
  auto t = zeros<float, shape<2, 2>>();
  CHECK(t.device() == cpu);
  CHECK_THROWS_AS((Tensor<float, shape<2>>(sizes_t<1>{2}, metal())), device_error);
}

TEST_CASE("dtypes: 16-bit floats through reductions, softmax and matmul (computed in float)") {
  manual_seed(5);
  auto xf = randn<float, shape<6, 40>>();
  auto check_type = [&](auto tag) {
    using H = typename decltype(tag)::type;
    const double tol = std::is_same_v<H, bfloat16> ? 2e-2 : 2e-3;
    Tensor<H, shape<6, 40>> x = cast<H>(xf);
    Tensor<float, shape<6, 40>> xr = cast<float>(x);  // the values x really holds
    Tensor<H, shape<6>> s = sum<1>(x);
    Tensor<float, shape<6>> sr = sum<1>(xr);
    Tensor<H, shape<40>> m = mean<0>(x);
    Tensor<float, shape<40>> mr = mean<0>(xr);
    Tensor<H, shape<6, 40>> p = softmax<-1>(x);
    Tensor<float, shape<6, 40>> pr = softmax<-1>(xr);
    Tensor<H, shape<6, 6>> g = matmul(x, x.template transpose<0, 1>());
    Tensor<float, shape<6, 6>> gr = matmul(xr, xr.transpose<0, 1>());
    for (std::int64_t i = 0; i < 6; ++i) {
      CHECK(float(s(i)) == Approx(sr(i)).epsilon(tol).margin(tol));
      for (std::int64_t j = 0; j < 40; ++j) CHECK(float(p(i, j)) == Approx(pr(i, j)).epsilon(tol).margin(1e-3));
      for (std::int64_t j = 0; j < 6; ++j) CHECK(float(g(i, j)) == Approx(gr(i, j)).epsilon(tol).margin(tol * 4));
    }
    for (std::int64_t j = 0; j < 40; ++j) CHECK(float(m(j)) == Approx(mr(j)).epsilon(tol).margin(tol));
  };
  check_type(std::type_identity<bfloat16>{});
  check_type(std::type_identity<float16>{});
}
