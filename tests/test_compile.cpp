// The scheduler (schedule/): fusion proven by the kernel plan and by the kernels the evaluator
// launches, CSE, the GEMM epilogue, the native norms, the memory plan; tenet::compile's modes,
// guards and fullgraph. Compiled results must equal eager ones bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>

#include <tenet/compile.hpp>
#include <tenet/tenet.hpp>

#include "kernel_checks.hpp"

using namespace tenet;
using M2 = Tensor<float, dyn_shape<2>>;
using V1 = Tensor<float, dyn_shape<1>>;

namespace {

using tenet_test::launched;
using tenet_test::require_equal;

template <class A, class B>
double max_abs_diff(const A& a, const B& b) {
  auto ac = a.contiguous();
  auto bc = b.contiguous();
  double m = 0;
  for (std::int64_t i = 0; i < ac.numel(); ++i)
    m = std::max(m, std::abs(static_cast<double>(ac.data()[i]) - static_cast<double>(bc.data()[i])));
  return m;
}

/// The unfused value of an expression: every kernel of its fully decomposed form on the reference path.
template <class E>
auto reference(const E& e) {
  return eval(detail::decompose<detail::reference_backend>(e));
}

}  // namespace

TEST_CASE("a pointwise chain with broadcasts is one kernel", "[schedule]") {
  manual_seed(1);
  M2 x = randn<float, dyn_shape<2>>(64, 48);
  V1 a = randn<float, dyn_shape<1>>(48);
  M2 b = randn<float, dyn_shape<2>>(64, 1);
  auto e = gelu(x * a + b) * 0.5f;
  const auto p = plan(e);
  REQUIRE(p.size() == 1);
  CHECK(p.kernels[0].kind == "pointwise");
  CHECK(p.kernels[0].fused == std::vector<std::string>{"mul", "add", "gelu", "mul"});
  CHECK(p.kernels[0].bytes_read == (64 * 48 + 48 + 64) * 4);
  CHECK(p.kernels[0].bytes_written == 64 * 48 * 4);
  CHECK(launched(e) == 1);
  // a transposed (non-contiguous) input does not add a copy
  auto et = gelu(x.transpose(0, 1) * 2.0f);
  CHECK(plan(et).size() == 1);
  CHECK(launched(et) == 1);
}

TEST_CASE("softmax, log_softmax, layer_norm and rms_norm are one row kernel", "[schedule]") {
  manual_seed(2);
  M2 x = randn<float, dyn_shape<2>>(37, 300);
  V1 w = randn<float, dyn_shape<1>>(300);
  V1 b = randn<float, dyn_shape<1>>(300);
  CHECK(plan(softmax<-1>(x)).size() == 1);
  CHECK(launched(softmax<-1>(x)) == 1);
  CHECK(plan(log_softmax<-1>(x)).size() == 1);
  auto ln = layer_norm(x, w, b);
  const auto p = plan(ln);
  REQUIRE(p.size() == 1);
  CHECK(p.kernels[0].kind == "row");
  CHECK(p.kernels[0].fused == std::vector<std::string>{"layer_norm"});
  CHECK(launched(ln) == 1);
  auto rn = rms_norm(x, w);
  CHECK(plan(rn).size() == 1);
  CHECK(launched(rn) == 1);
  // a pointwise producer runs inside the row kernel: softmax(x * s), layer_norm(x + residual), and
  // a transposed (non-contiguous) input, without a copy
  M2 r = randn<float, dyn_shape<2>>(37, 300);
  auto sm = softmax<-1>(x * 0.5f + 1.0f);
  const auto ps = plan(sm);
  REQUIRE(ps.size() == 1);
  CHECK(ps.kernels[0].fused == std::vector<std::string>{"mul", "add", "softmax<-1>"});
  CHECK(launched(sm) == 1);
  CHECK(max_abs_diff(eval(sm), reference(sm)) < 1e-6);
  auto lsm = log_softmax<-1>(x.transpose(0, 1));
  CHECK(launched(lsm) == 1);
  CHECK(max_abs_diff(eval(lsm), reference(lsm)) < 1e-5);
  auto lnr = layer_norm(x + r, w, b);
  const auto pl = plan(lnr);
  REQUIRE(pl.size() == 1);
  CHECK(pl.kernels[0].fused == std::vector<std::string>{"add", "layer_norm"});
  CHECK(pl.kernels[0].bytes_read == (2 * 37 * 300 + 2 * 300) * 4);
  CHECK(launched(lnr) == 1);
  CHECK(max_abs_diff(eval(lnr), reference(lnr)) < 1e-5);
  auto rnr = rms_norm(x * r, w);
  CHECK(launched(rnr) == 1);
  CHECK(max_abs_diff(eval(rnr), reference(rnr)) < 1e-5);

  // the native row kernels against their decompositions (float and double, a 3-D input with two
  // normalized dims, a non-contiguous input)
  CHECK(max_abs_diff(eval(ln), reference(ln)) < 1e-5);
  CHECK(max_abs_diff(eval(rn), reference(rn)) < 1e-5);
  Tensor<double, dyn_shape<3>> x3 = randn<double, dyn_shape<3>>(4, 6, 10);
  Tensor<double, dyn_shape<2>> w2 = randn<double, dyn_shape<2>>(6, 10);
  Tensor<double, dyn_shape<2>> b2 = randn<double, dyn_shape<2>>(6, 10);
  auto ln3 = layer_norm(x3, w2, b2, 1e-3);
  CHECK(max_abs_diff(eval(ln3), reference(ln3)) < 1e-12);
  auto lnt = layer_norm(x.transpose(0, 1), randn<float, dyn_shape<1>>(37), randn<float, dyn_shape<1>>(37));
  CHECK(max_abs_diff(eval(lnt), reference(lnt)) < 1e-5);
  // empty rows and a wrong weight
  M2 empty = zeros<float, dyn_shape<2>>(0, 300);
  CHECK(eval(layer_norm(empty, w, b)).numel() == 0);
  V1 w_bad = randn<float, dyn_shape<1>>(299);
  CHECK_THROWS_WITH(eval(layer_norm(x, w_bad, b)),
                    Catch::Contains("layer_norm: the weight has sizes") && Catch::Contains("299") &&
                        Catch::Contains("37, 300"));
}

TEST_CASE("linear + bias + gelu is one GEMM with an epilogue", "[schedule]") {
  manual_seed(3);
  M2 x = randn<float, dyn_shape<2>>(70, 50);
  M2 w = randn<float, dyn_shape<2>>(90, 50);
  V1 bias = randn<float, dyn_shape<1>>(90);
  auto e = gelu(linear(x, w, bias));
  const auto p = plan(e);
  REQUIRE(p.size() == 1);
  CHECK(p.kernels[0].kind == "gemm+epilogue");
  CHECK(p.kernels[0].fused == std::vector<std::string>{"matmul", "add", "gelu"});
  CHECK(p.kernels[0].flops == Approx(2.0 * 70 * 90 * 50 + 2.0 * 70 * 90));
  CHECK(launched(e) == 1);
  // the same values as the unfused GEMM followed by the pointwise kernel
  M2 mm = matmul(x, w.transpose(0, 1));
  M2 unfused = gelu(mm + bias);
  require_equal(eval(e), unfused);

  // MLP block: two GEMMs, each with its epilogue (bias + gelu; bias + residual)
  M2 w2 = randn<float, dyn_shape<2>>(50, 90);
  V1 b2 = randn<float, dyn_shape<1>>(50);
  auto mlp = x + linear(gelu(linear(x, w, bias)), w2, b2);
  const auto pm = plan(mlp);
  REQUIRE(pm.size() == 2);
  CHECK(pm.kernels[0].kind == "gemm+epilogue");
  CHECK(pm.kernels[1].kind == "gemm+epilogue");
  CHECK(pm.kernels[1].fused == std::vector<std::string>{"matmul", "add", "add"});
  CHECK(launched(mlp) == 2);
  CHECK(max_abs_diff(eval(mlp), reference(mlp)) < 1e-3);

  // a 3-D input (rows = batch x tokens), a transposed weight, double
  Tensor<double, dyn_shape<3>> x3 = randn<double, dyn_shape<3>>(3, 5, 8);
  Tensor<double, dyn_shape<2>> w3 = randn<double, dyn_shape<2>>(8, 6);
  Tensor<double, dyn_shape<1>> b3 = randn<double, dyn_shape<1>>(6);
  auto e3 = relu(matmul(x3, w3) + b3) * 3.0;
  CHECK(plan(e3).kernels[0].kind == "gemm+epilogue");
  CHECK(max_abs_diff(eval(e3), reference(e3)) < 1e-12);
  auto e3t = tanh(matmul(x3.transpose(1, 2).contiguous().transpose(1, 2), w3) - b3);
  CHECK(max_abs_diff(eval(e3t), reference(e3t)) < 1e-12);

  // not fused: the product broadcast by the tree, and a matrix-vector product
  M2 row = randn<float, dyn_shape<2>>(1, 50);
  M2 col = randn<float, dyn_shape<2>>(70, 1);
  auto bcast = matmul(row, w.transpose(0, 1)) + col;  // (1, 90) broadcast to (70, 90)
  CHECK(plan(bcast).size() == 2);
  CHECK(launched(bcast) == 2);
  CHECK(max_abs_diff(eval(bcast), reference(bcast)) < 1e-4);
  // K = 0: the epilogue still runs on zeros
  M2 xk = zeros<float, dyn_shape<2>>(4, 0);
  M2 wk = zeros<float, dyn_shape<2>>(0, 5);
  M2 ek = matmul(xk, wk) + 1.5f;
  CHECK(ek(3, 4) == 1.5f);
}

TEST_CASE("a subexpression used twice runs once (CSE)", "[schedule]") {
  manual_seed(4);
  M2 a = randn<float, dyn_shape<2>>(40, 40);
  auto m = matmul(a, a);  // one auto, read three times
  auto y = m + relu(m) * m;
  const auto p = plan(y);
  CHECK(p.size() == 2);  // the GEMM, then one pointwise kernel
  CHECK(p.cse_hits == 2);
  CHECK(launched(y) == 2);
  CHECK(max_abs_diff(eval(y), reference(y)) < 1e-4);
  // a reduction reused by a consumer
  auto s = sum<1>(exp(a), keepdim);
  auto z = exp(a) / s + s;
  CHECK(plan(z).size() == 2);
  CHECK(launched(z) == 2);
  // different inputs are never merged
  M2 b = a.clone();
  auto w = matmul(a, a) + matmul(b, b);
  CHECK(plan(w).size() == 3);
  CHECK(launched(w) == 3);
}

TEST_CASE("the memory plan shares buffers by lifetime", "[schedule]") {
  manual_seed(5);
  M2 x = randn<float, dyn_shape<2>>(64, 64);
  // a chain of GEMMs: each intermediate dies after the next GEMM reads it
  auto chain = matmul(relu(matmul(relu(matmul(x, x)), x)), x);
  const auto p = plan(chain);
  REQUIRE(p.size() == 3);
  CHECK(p.unplanned_bytes == 3 * 64 * 64 * 4);
  CHECK(p.peak_bytes == 2 * 64 * 64 * 4);
  const std::string text = explain(chain);
  CHECK_THAT(text, Catch::Contains("kernel plan for cpu_simd:"));
  CHECK_THAT(text, Catch::Contains("kernel 2: gemm [matmul]"));
  CHECK_THAT(text, Catch::Contains("intermediates and result peak 32.0 KiB (48.0 KiB without reuse)"));
}

TEST_CASE("compile: every mode returns the eager values", "[compile]") {
  manual_seed(6);
  M2 x = randn<float, dyn_shape<2>>(33, 64);
  M2 w1 = randn<float, dyn_shape<2>>(128, 64);
  V1 b1 = randn<float, dyn_shape<1>>(128);
  M2 w2 = randn<float, dyn_shape<2>>(64, 128);
  V1 b2 = randn<float, dyn_shape<1>>(64);
  V1 g = randn<float, dyn_shape<1>>(64);
  auto model = [&](const M2& in) {
    return layer_norm(in + linear(gelu(linear(in, w1, b1)), w2, b2), g, b2);
  };
  const M2 eager = model(x);
  for (auto mode : {compile_mode::default_, compile_mode::reduce_overhead, compile_mode::max_autotune}) {
    auto f = compile(model, {.mode = mode});
    for (int call = 0; call < 3; ++call) {
      M2 y = f(x);
      // a tuned GEMM blocking with another kc sums K in other blocks: equal to rounding only
      const bool exact = mode != compile_mode::max_autotune ||
                         f.tuned_blocking().kc == detail::cpu::gemm_blocking_candidates<float>()[0].kc;
      if (exact)
        require_equal(y, eager);
      else
        CHECK(max_abs_diff(y, eager) < 1e-4);
    }
    CHECK(f.stats().calls == 3);
    CHECK(f.stats().plans == 1);
    CHECK(f.plan().size() == 3);  // two GEMMs with epilogues, one layer_norm row kernel
    if (mode != compile_mode::default_) {
      CHECK(f.stats().arena_hits == 2 * 2);  // two intermediates from the arena in calls 2 and 3
      CHECK(f.stats().arena_misses == 0);
      CHECK(f.arena_bytes() > 0);
    }
    if (mode == compile_mode::max_autotune) {
      CHECK(f.tuned_threads() >= 1);
      CHECK(f.tuned_blocking().kc > 0);  // the plan has GEMMs: a blocking was chosen
    }
  }
}

TEST_CASE("compile: results are fresh, guards re-plan, dynamic shares one plan", "[compile]") {
  manual_seed(7);
  auto fn = [](const M2& a) { return softmax<-1>(matmul(a, a.transpose(0, 1)) * 0.5f) + 1.0f; };
  auto f = compile(fn, {.mode = compile_mode::reduce_overhead});
  M2 a = randn<float, dyn_shape<2>>(16, 8);
  M2 r1 = f(a);
  M2 keep = r1.clone();
  M2 r2 = f(a);
  M2 r3 = f(a);
  require_equal(r1, keep);  // later calls did not write into an earlier result
  require_equal(r3, M2(fn(a)));
  CHECK_FALSE(r1.shares_storage(r2));
  M2 other = randn<float, dyn_shape<2>>(9, 8);
  require_equal(M2(f(other)), M2(fn(other)));
  CHECK(f.stats().plans == 2);
  CHECK(f.stats().guard_failures == 1);
  require_equal(M2(f(a)), M2(fn(a)));
  CHECK(f.stats().plans == 2);  // back to the first class: no new plan

  auto d = compile(fn, {.mode = compile_mode::reduce_overhead, .dynamic = true});
  require_equal(M2(d(a)), M2(fn(a)));
  require_equal(M2(d(other)), M2(fn(other)));
  require_equal(M2(d(a)), M2(fn(a)));
  CHECK(d.stats().plans == 1);
  CHECK(d.stats().guard_failures == 0);
  CHECK_THAT(d.explain(), Catch::Contains("mode reduce_overhead, dynamic true"));
}

TEST_CASE("compile: fullgraph rejects a function that evaluates inside", "[compile]") {
  M2 a = randn<float, dyn_shape<2>>(4, 4);
  auto breaks = [](const M2& x) {
    M2 h = relu(x);  // evaluated here: a graph break
    return h * 2.0f;
  };
  auto loose = compile(breaks);
  require_equal(M2(loose(a)), M2(relu(a) * 2.0f));
  auto strict = compile(breaks, {.fullgraph = true});
  CHECK_THROWS_AS(strict(a), value_error);
  CHECK_THROWS_WITH(strict(a), Catch::Contains("evaluated 1 expression(s) itself"));
  auto whole = compile([](const M2& x) { return relu(x) * 2.0f; }, {.fullgraph = true});
  require_equal(M2(whole(a)), M2(relu(a) * 2.0f));
  // a tuple of results
  auto two = compile([](const M2& x) { return std::make_tuple(sum(x), x * 2.0f); });
  auto [s, t] = two(a);
  CHECK(s.item() == Approx(eval(sum(a)).item()));
  require_equal(t, M2(a * 2.0f));
}
