// tenet::explain / to_dot, and shared values: an expensive input named more than once by a
// decomposition is evaluated once per evaluation, and never reused across evaluations.
#include <catch2/catch.hpp>

#include <tenet/tenet.hpp>

using namespace tenet;

TEST_CASE("explain: ATen graph, CPU prim graph, decomposed graph, counts, natives") {
  auto x = ones<float, shape<2, 3>>();
  const std::string got = explain(gelu(x * 2.0f) + sum<1>(x, keepdim));
  const std::string want =
      "ATen graph (4 ops):\n"
      "  %0 = input : float32 shape<2, 3>\n"
      "  %1 = mul(%0, 2) : float32 shape<2, 3>\n"
      "  %2 = gelu(%1) : float32 shape<2, 3>\n"
      "  %3 = sum<1>[keepdim](%0) : float32 shape<2, 1>\n"
      "  %4 = add(%2, %3) : float32 shape<2, 3>\n"
      "  ops by group: binary 2, composite 1, reduction 1\n"
      "prim graph for cpu_simd (4 ops):\n"
      "  %0 = input : float32 shape<2, 3>\n"
      "  %1 = mul(%0, 2) : float32 shape<2, 3>\n"
      "  %2 = gelu(%1) : float32 shape<2, 3>   [native on cpu_simd]\n"
      "  %3 = sum<1>[keepdim](%0) : float32 shape<2, 1>\n"
      "  %4 = add(%2, %3) : float32 shape<2, 3>\n"
      "  ops by group: binary 2, composite 1, reduction 1\n"
      "fully decomposed prim graph (9 ops):\n"
      "  %0 = input : float32 shape<2, 3>\n"
      "  %1 = mul(%0, 2) : float32 shape<2, 3>\n"
      "  %2 = mul(%1, 0.5) : float32 shape<2, 3>\n"
      "  %3 = mul(%0, 2) : float32 shape<2, 3>\n"
      "  %4 = mul(%3, 0.707107) : float32 shape<2, 3>\n"
      "  %5 = erf(%4) : float32 shape<2, 3>\n"
      "  %6 = add(%5, 1) : float32 shape<2, 3>\n"
      "  %7 = mul(%2, %6) : float32 shape<2, 3>\n"
      "  %8 = sum<1>[keepdim](%0) : float32 shape<2, 1>\n"
      "  %9 = add(%7, %8) : float32 shape<2, 3>\n"
      "  ops by group: binary 7, reduction 1, unary 1\n"
      "run natively by cpu_simd: gelu\n"
      "kernel plan for cpu_simd:\n"
      "  kernel 0: reduction [sum<1>[keepdim]] -> buf0 float32 shape<2, 1>\n"
      "    reads 24 B, writes 8 B, 6 FLOP\n"
      "  kernel 1: pointwise [mul, gelu, add] -> buf1 float32 shape<2, 3>\n"
      "    reads 32 B (buf0), writes 24 B, 18 FLOP\n"
      "  total: 2 kernels, 0 views (no copy), 0 reused (CSE), 88 B moved, 24 FLOP\n"
      "  memory plan: inputs 24 B; intermediates and result peak 32 B (32 B without reuse)\n";
  CHECK(got == want);
}

TEST_CASE("explain: dyn sizes, casts and the shared values of a decomposition") {
  auto a = ones<std::int32_t, shape<dyn, 4>>(3);
  const std::string got = explain(var<0>(matmul(cast<float>(a), ones<float, shape<4, 2>>())));
  CHECK_THAT(got, Catch::Contains("%0 = input : int32 shape<dyn, 4> = (3, 4)"));
  CHECK_THAT(got, Catch::Contains("convert_element_type<float32>(%0)"));
  CHECK_THAT(got, Catch::Contains("matmul(%1, %2) : float32 shape<dyn, 2> = (3, 2)   [shared: evaluated once]"));
  // var is a composite the CPU runs whole; its decomposition (the fully decomposed graph) shares x
  CHECK_THAT(got, Catch::Contains("run natively by cpu_simd: var<0>[correction=1]"));
}

TEST_CASE("explain: to_dot gives a Graphviz digraph of both graphs") {
  auto x = ones<float, shape<2>>();
  const std::string dot = to_dot(sigmoid(x) * 2.0f);
  CHECK(dot.rfind("digraph tenet {", 0) == 0);
  CHECK_THAT(dot, Catch::Contains("subgraph cluster_aten"));
  CHECK_THAT(dot, Catch::Contains("subgraph cluster_cpu"));
  CHECK_THAT(dot, Catch::Contains("aten1 [label=\"sigmoid\"];"));
  CHECK_THAT(dot, Catch::Contains("aten0 -> aten1;"));
  CHECK(dot.substr(dot.size() - 2) == "}\n");
}

TEST_CASE("shared values: computed once per evaluation, fresh in every evaluation") {
  manual_seed(2);
  auto a = randn<float, shape<5, 4>>();
  auto b = randn<float, shape<4, 3>>();
  Tensor<float, shape<5, 3>> p = matmul(a, b);
  // var/std/logsumexp/softmax over a matmul equal the same ops over its evaluated value
  auto lazy_var = var<0>(matmul(a, b));
  Tensor<float, shape<3>> v1 = lazy_var;
  Tensor<float, shape<3>> v_ref = var<0>(p);
  Tensor<float, shape<5>> l1 = logsumexp<1>(matmul(a, b));
  Tensor<float, shape<5>> l_ref = logsumexp<1>(p);
  Tensor<float, shape<5, 3>> s1 = softmax<0>(matmul(a, b));  // not native (dim 0): decomposed
  Tensor<float, shape<5, 3>> s_ref = softmax<0>(p);
  for (std::int64_t j = 0; j < 3; ++j) CHECK(v1(j) == Approx(v_ref(j)).epsilon(1e-5));
  for (std::int64_t i = 0; i < 5; ++i) {
    CHECK(l1(i) == Approx(l_ref(i)).epsilon(1e-5));
    for (std::int64_t j = 0; j < 3; ++j) CHECK(s1(i, j) == Approx(s_ref(i, j)).epsilon(1e-5));
  }
  // the same lazy expression after its input changed: evaluated again, not read from a cache
  a.mul_(2.0f);
  Tensor<float, shape<3>> v2 = lazy_var;
  for (std::int64_t j = 0; j < 3; ++j) CHECK(v2(j) == Approx(4.0f * v1(j)).epsilon(1e-4));
  // an in-place write through a shared value's expression
  auto out = zeros<float, shape<3>>();
  out.copy_(lazy_var);
  for (std::int64_t j = 0; j < 3; ++j) CHECK(out(j) == Approx(v2(j)).epsilon(1e-6));
}

namespace {
/// Serves CPU allocations through the default allocator and counts the bytes alive at once.
struct live_bytes_hook final : detail::allocation_hook {
  std::int64_t live = 0, peak = 0;
  std::shared_ptr<detail::storage> allocate(std::size_t n) override {
    detail::current_allocation_hook() = nullptr;
    auto s = detail::allocate(n, tenet::cpu);
    detail::current_allocation_hook() = this;
    live += static_cast<std::int64_t>(n);
    peak = std::max(peak, live);
    return std::shared_ptr<detail::storage>(s.get(), [s, this, n](detail::storage*) mutable {
      live -= static_cast<std::int64_t>(n);
      s.reset();
    });
  }
};

double max_diff(const Tensor<float, dyn_shape<2>>& a, const Tensor<float, dyn_shape<2>>& b) {
  REQUIRE(a.sizes() == b.sizes());
  double d = 0;
  for (std::int64_t i = 0; i < a.size(0); ++i)
    for (std::int64_t j = 0; j < a.size(1); ++j) d = std::max(d, static_cast<double>(std::abs(a(i, j) - b(i, j))));
  return d;
}

/// Evaluates e with the hook: the plan's kernels run, and the bytes alive at once are the memory
/// plan's peak (a value is released after its last reader, not at the end of the evaluation).
template <class E>
Tensor<float, dyn_shape<2>> check_memory_plan(const E& e, const char* what) {
  INFO(what);
  const auto p = tenet::plan(e);
  live_bytes_hook hook;
  const std::int64_t k0 = detail::kernels_launched();
  detail::current_allocation_hook() = &hook;
  Tensor<float, dyn_shape<2>> r;
  try {
    r = eval(e);
  } catch (...) {
    detail::current_allocation_hook() = nullptr;
    throw;
  }
  detail::current_allocation_hook() = nullptr;
  CHECK(detail::kernels_launched() - k0 == p.size());
  CHECK(hook.peak == p.peak_bytes);
  CHECK(p.peak_bytes < p.unplanned_bytes);  // the cases below all reuse memory
  return r;
}
}  // namespace

TEST_CASE("eager evaluation follows the memory plan: each value lives until its last reader") {
  manual_seed(4);
  const Tensor<float, dyn_shape<2>> x = randn<float, dyn_shape<2>>(32, 64), w = randn<float, dyn_shape<2>>(64, 64);
  const std::int64_t mat = 32 * 64 * 4;  // one (32, 64) float matrix
  // a chain of GEMMs: two matrices alive at once, never three
  auto chain = check_memory_plan(matmul(matmul(matmul(x, w), w), w), "three GEMMs");
  CHECK(tenet::plan(matmul(matmul(matmul(x, w), w), w)).peak_bytes == 2 * mat);
  const Tensor<float, dyn_shape<2>> m1 = matmul(x, w), m2 = matmul(m1, w), m3 = matmul(m2, w);
  CHECK(max_diff(chain, m3) == 0.0);
  auto sm = check_memory_plan(matmul(softmax<-1>(matmul(x, w)), w), "softmax between GEMMs");
  CHECK(max_diff(sm, Tensor<float, dyn_shape<2>>(matmul(Tensor<float, dyn_shape<2>>(softmax<-1>(m1)), w))) == 0.0);
  // a shared value read by two kernels: released after the second (before the later GEMMs)
  {
    auto sx = detail::share(matmul(x, w));
    auto t = matmul(sx, w) + sx;
    auto r = check_memory_plan(matmul(matmul(t, w), w) + 1.0f, "a shared value, two readers");
    const Tensor<float, dyn_shape<2>> tv = matmul(m1, w) + m1;
    const Tensor<float, dyn_shape<2>> ref = matmul(Tensor<float, dyn_shape<2>>(matmul(tv, w)), w) + 1.0f;
    CHECK(max_diff(r, ref) == 0.0);
  }
  // a common subexpression (the same matmul written twice): computed once, then released
  {
    auto m = matmul(x, w);
    auto r = check_memory_plan(matmul(matmul(sum<1>(m, keepdim) + amax<1>(m, keepdim) + x, w), w), "a CSE twin");
    const Tensor<float, dyn_shape<2>> ref =
        matmul(Tensor<float, dyn_shape<2>>(matmul(sum<1>(m1, keepdim) + amax<1>(m1, keepdim) + x, w)), w);
    CHECK(max_diff(r, ref) == 0.0);
    CHECK(tenet::plan(sum<1>(m, keepdim) + amax<1>(m, keepdim)).cse_hits == 1);
  }
}
