// The scheduler's reduction epilogues and the native var kernel (mean, var, std: one kernel each,
// proven by the kernel plan and by the kernels the evaluator launches; values against the unfused
// kernels and the decomposition), and max_autotune's GEMM blocking search (every candidate gives
// the eager values, the chosen one is a candidate, each shape class is tuned on its own).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <tenet/compile.hpp>
#include <tenet/tenet.hpp>

#include "kernel_checks.hpp"

using namespace tenet;
using M2 = Tensor<float, dyn_shape<2>>;
using V1 = Tensor<float, dyn_shape<1>>;
using S0 = Tensor<float, shape<>>;

namespace {

using tenet_test::launched;
using tenet_test::require_equal;

/// max |a - b| / (1 + |b|); NaNs must sit at the same places.
template <class A, class B>
double max_rel_diff(const A& a, const B& b) {
  REQUIRE(a.sizes() == b.sizes());
  auto ac = a.contiguous();
  auto bc = b.contiguous();
  double m = 0;
  for (std::int64_t i = 0; i < ac.numel(); ++i) {
    const double x = static_cast<double>(ac.data()[i]), y = static_cast<double>(bc.data()[i]);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) return INFINITY;
      continue;
    }
    m = std::max(m, std::abs(x - y) / (1.0 + std::abs(y)));
  }
  return m;
}

/// The decomposition's value (the reference: mean, centered squares, sum, divide as prims).
template <class E>
auto reference(const E& e) {
  return eval(detail::decompose<detail::reference_backend>(e));
}

/// Checks that e is one kernel in the plan and at run time, and that its plan's kernel fused `ops`.
template <class E>
void one_kernel(const E& e, const std::string& kind, const std::vector<std::string>& ops) {
  const auto p = plan(e);
  INFO(p.text());
  REQUIRE(p.size() == 1);
  CHECK(p.kernels[0].kind == kind);
  CHECK(p.kernels[0].fused == ops);
  CHECK(launched(e) == 1);
}

}  // namespace

TEST_CASE("mean and sqrt(sum(x*x)/n) are one reduction kernel with an epilogue", "[schedule][reduce]") {
  manual_seed(11);
  M2 x = randn<float, dyn_shape<2>>(37, 300);
  one_kernel(mean(x), "reduction+epilogue", {"sum", "div"});
  one_kernel(mean<1>(x), "reduction+epilogue", {"sum<1>", "div"});
  one_kernel(mean<0>(x), "reduction+epilogue", {"sum<0>", "div"});  // the column kernel
  one_kernel(mean<1>(x, keepdim), "reduction+epilogue", {"sum<1>[keepdim]", "div"});
  auto rms = sqrt(sum<1>(x * x) / 300.0f);
  one_kernel(rms, "reduction+epilogue", {"mul", "sum<1>", "div", "sqrt"});
  // the fused epilogue runs the same pointwise code on the same sums: bit for bit the unfused kernels
  require_equal(eval(mean(x)), eval(S0(sum(x)) / 11100.0f));
  require_equal(eval(mean<1>(x)), eval(V1(sum<1>(x)) / 300.0f));
  require_equal(eval(mean<0>(x)), eval(V1(sum<0>(x)) / 37.0f));
  require_equal(eval(rms), eval(sqrt(V1(sum<1>(x * x)) / 300.0f)));
  // many outputs (several epilogue blocks, threads) and a full reduction split over threads
  M2 big = randn<float, dyn_shape<2>>(5000, 40);
  require_equal(eval(mean<1>(big)), eval(V1(sum<1>(big)) / 40.0f));
  require_equal(eval(mean(big)), eval(S0(sum(big)) / 200000.0f));
  // a consumer that broadcasts the reduced value or reads another tensor stays a separate kernel
  CHECK(plan(x - mean<1>(x, keepdim)).size() == 2);
  CHECK(launched(x - mean<1>(x, keepdim)) == 2);
  // the plan's text names the fused kernel; compile plans it the same way
  CHECK_THAT(explain(mean<1>(x)), Catch::Contains("reduction+epilogue [sum<1>, div]"));
  auto f = compile([](const M2& a) { return mean<1>(a); }, {.mode = compile_mode::reduce_overhead});
  require_equal(V1(f(x)), eval(mean<1>(x)));
  CHECK(f.plan().size() == 1);
}

TEST_CASE("var and std are one kernel and match their decomposition", "[schedule][reduce]") {
  manual_seed(12);
  M2 x = randn<float, dyn_shape<2>>(37, 300);
  one_kernel(var<1>(x), "reduction", {"var<1>[correction=1]"});
  one_kernel(var(x), "reduction", {"var[correction=1]"});
  one_kernel(var<0>(x, keepdim, 0.0), "reduction", {"var<0>[keepdim, correction=0]"});
  one_kernel(tenet::std<1>(x), "reduction+epilogue", {"var<1>[correction=1]", "sqrt"});
  one_kernel(var<1>(x * 2.0f + 1.0f), "reduction", {"mul", "add", "var<1>[correction=1]"});  // fused producer
  // the decomposition: mean (sum with its `/ n` epilogue), then the centered squares summed with
  // theirs (four kernels before reductions took epilogues)
  CHECK(launched(detail::decompose<detail::reference_backend>(var<1>(x))) == 2);

  CHECK(max_rel_diff(eval(var<1>(x)), reference(var<1>(x))) < 1e-6);
  CHECK(max_rel_diff(eval(var<0>(x)), reference(var<0>(x))) < 1e-6);
  CHECK(max_rel_diff(eval(var(x)), reference(var(x))) < 1e-6);
  CHECK(max_rel_diff(eval(var<1>(x, keepdim, 0.0)), reference(var<1>(x, keepdim, 0.0))) < 1e-6);
  CHECK(max_rel_diff(eval(var<1>(x, 2.0)), reference(var<1>(x, 2.0))) < 1e-6);
  CHECK(max_rel_diff(eval(tenet::std<0>(x)), reference(tenet::std<0>(x))) < 1e-6);
  CHECK(max_rel_diff(eval(var<1>(x * 2.0f + 1.0f)), reference(var<1>(x * 2.0f + 1.0f))) < 1e-6);
  const auto xt = x.transpose(0, 1);  // non-contiguous rows
  CHECK(max_rel_diff(eval(var<1>(xt)), reference(var<1>(xt))) < 1e-6);
  // long rows (several L1 chunks merged), a full reduction split over threads, many outputs
  M2 wide = randn<float, dyn_shape<2>>(3, 100000) * 3.0f + 1000.0f;  // a large mean: no cancellation
  CHECK(max_rel_diff(eval(var<1>(wide)), reference(var<1>(wide))) < 1e-5);
  CHECK(max_rel_diff(eval(var(wide)), reference(var(wide))) < 1e-5);
  {
    // against a double computation: the two-pass kernel keeps float's accuracy at a large mean
    auto v = eval(var<1>(wide));
    auto wc = wide.contiguous();
    for (std::int64_t r = 0; r < 3; ++r) {
      double s = 0, q = 0;
      for (std::int64_t i = 0; i < 100000; ++i) s += wc.data()[r * 100000 + i];
      const double m = s / 100000;
      for (std::int64_t i = 0; i < 100000; ++i) q += (wc.data()[r * 100000 + i] - m) * (wc.data()[r * 100000 + i] - m);
      CHECK(std::abs(v.data()[r] - q / 99999) < 1e-5 * (q / 99999));
    }
  }
  M2 tall = randn<float, dyn_shape<2>>(5000, 40);
  CHECK(max_rel_diff(eval(var<1>(tall)), reference(var<1>(tall))) < 1e-6);
  CHECK(max_rel_diff(eval(tenet::std<0>(tall)), reference(tenet::std<0>(tall))) < 1e-6);
  // double
  Tensor<double, dyn_shape<3>> d = randn<double, dyn_shape<3>>(4, 6, 50);
  CHECK(max_rel_diff(eval(var<2>(d)), reference(var<2>(d))) < 1e-13);
  CHECK(max_rel_diff(eval(var<0, 2>(d, keepdim)), reference(var<0, 2>(d, keepdim))) < 1e-13);
  CHECK(max_rel_diff(eval(tenet::std(d, 0.0)), reference(tenet::std(d, 0.0))) < 1e-13);
  // edge cases as the decomposition (and torch): one element with correction 1 and an empty
  // reduction give NaN, a negative divisor clamps to 0 (inf)
  M2 one = randn<float, dyn_shape<2>>(4, 1);
  CHECK(std::isnan(eval(var<1>(one)).data()[0]));
  CHECK(eval(var<1>(one, 0.0)).data()[0] == 0.0f);
  M2 two = randn<float, dyn_shape<2>>(4, 2);
  CHECK(std::isinf(eval(var<1>(two, 2.0)).data()[0]));
  M2 empty = zeros<float, dyn_shape<2>>(4, 0);
  CHECK(std::isnan(eval(var<1>(empty)).data()[0]));
  CHECK(eval(var<0>(empty)).numel() == 0);
  // a NaN or an inf in a row makes its variance NaN, as torch
  M2 bad = randn<float, dyn_shape<2>>(2, 64);
  bad.data()[3] = NAN;
  bad.data()[64 + 5] = INFINITY;
  auto vb = eval(var<1>(bad));
  CHECK(std::isnan(vb.data()[0]));
  CHECK(std::isnan(vb.data()[1]));
  // compiled equals eager, one kernel
  auto f = compile([](const M2& a) { return tenet::std<1>(a, keepdim); }, {.mode = compile_mode::reduce_overhead});
  for (int call = 0; call < 2; ++call) require_equal(M2(f(x)), eval(tenet::std<1>(x, keepdim)));
  CHECK(f.plan().size() == 1);
}

TEST_CASE("max_autotune times GEMM blockings: every candidate gives the eager values", "[compile][autotune]") {
  manual_seed(13);
  const auto candidates = detail::cpu::gemm_blocking_candidates<float>();
  REQUIRE(candidates.size() >= 4);
  const auto def = candidates[0];
  CHECK(def == detail::cpu::gemm_impl::resolve<float>({}));
  M2 x = randn<float, dyn_shape<2>>(96, 700);  // K = 700: several K blocks for every kc
  M2 w = randn<float, dyn_shape<2>>(400, 700);
  V1 b = randn<float, dyn_shape<1>>(400);
  auto fn = [&](const M2& in) { return gelu(linear(in, w, b)); };
  const M2 eager = fn(x);
  for (const auto& c : candidates) {
    INFO(detail::blocking_text(c));
    const detail::cpu::gemm_blocking_scope scope(c);
    const M2 y = fn(x);
    if (c.kc == def.kc)
      require_equal(y, eager);  // mc and nc do not change any element's summation order
    else
      CHECK(max_rel_diff(y, eager) < 1e-4);  // K = 700 summed in other blocks
  }

  auto f = compile(fn, {.mode = compile_mode::max_autotune});
  const M2 y = f(x);
  const auto chosen = f.tuned_blocking();
  INFO(f.explain());
  CHECK(std::find(candidates.begin(), candidates.end(), chosen) != candidates.end());
  const auto trials = f.autotune_trials();
  CHECK(trials.size() >= candidates.size());  // thread counts, then the other blockings
  for (const auto& t : trials) CHECK(t.median_s > 0);
  CHECK_THAT(f.explain(), Catch::Contains("GEMM blocking mc " + std::to_string(chosen.mc)));
  if (chosen.kc == def.kc)
    require_equal(y, eager);
  else
    CHECK(max_rel_diff(y, eager) < 1e-4);  // K = 700 summed in other blocks
  require_equal(M2(f(x)), y);  // later calls run the chosen blocking again
  // the blocking applies to this class's calls only: eager evaluation afterwards is the default
  require_equal(M2(fn(x)), eager);

  // a new shape class is tuned on its own
  M2 x2 = randn<float, dyn_shape<2>>(300, 700);
  const M2 y2 = f(x2);
  CHECK(f.stats().plans == 2);
  CHECK(f.autotune_trials().size() == trials.size());
  CHECK(std::find(candidates.begin(), candidates.end(), f.tuned_blocking()) != candidates.end());
  CHECK(max_rel_diff(y2, M2(fn(x2))) < 1e-4);
  (void)f(x);
  CHECK(f.tuned_blocking() == chosen);  // back to the first class and its choice

  // no GEMM in the plan: thread counts only, the default blocking
  auto g = compile([](const M2& a) { return mean<1>(a); }, {.mode = compile_mode::max_autotune});
  require_equal(V1(g(x)), eval(mean<1>(x)));
  CHECK(g.tuned_blocking().is_default());
  CHECK(g.autotune_trials().size() < trials.size());
}
