// tenet::compile on CUDA tensors (backend/cuda/graph.hpp): every mode equals eager CUDA evaluation
// bit for bit (the same kernels run); reduce_overhead records the first call of a shape class,
// captures a CUDA graph on the second and replays it after, with the launches and captures counted
// in stats(); a shape change, a device change and a replaced weight re-plan or re-capture; what
// cannot be captured (gather's index check synchronizes) runs eagerly with the reason in explain().
// Few expression types, dyn shapes (compile time). The main() that skips without a GPU is in
// test_cuda.cu.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <tuple>
#include <vector>

#include <tenet/compile.hpp>
#include <tenet/cuda.hpp>

#include "check_close.hpp"

using namespace tenet;
using F1 = Tensor<float, dyn_shape<1>>;
using F2 = Tensor<float, dyn_shape<2>>;
using I2 = Tensor<std::int64_t, dyn_shape<2>>;

namespace {
using tenet::test::gpu;

F2 rnd(std::int64_t r, std::int64_t c, float scale = 1.0f) {
  F2 x = randn<float, dyn_shape<2>>(r, c) * scale;
  return x.to(gpu);
}
F1 rnd1(std::int64_t n, float scale = 1.0f) {
  F1 x = randn<float, dyn_shape<1>>(n) * scale;
  return x.to(gpu);
}

/// a and b hold the same bits (a from the compiled call, b from eager evaluation).
template <class A, class B>
void require_same(const A& a, const B& b) {
  using T = value_type_of<A>;
  static_assert(std::is_same_v<T, value_type_of<B>>);
  REQUIRE(a.device() == b.device());
  auto x = a.cpu().contiguous();
  auto y = b.cpu().contiguous();
  REQUIRE(x.sizes() == y.sizes());
  std::int64_t diff = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) diff += std::memcmp(x.data() + i, y.data() + i, sizeof(T)) != 0;
  INFO("elements " << x.numel() << ", differing " << diff);
  CHECK(diff == 0);
}
bool has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// the expression types of this file
auto pointwise_fn = [](const auto& x, const auto& y) { return gelu(x * 1.5f + y) * 0.75f; };
using pointwise_t = decltype(pointwise_fn);
}  // namespace

TEST_CASE("compile on CUDA: pointwise in every mode equals eager; reduce_overhead replays one CUDA graph",
          "[cuda][compile]") {
  for (auto mode : {compile_mode::default_, compile_mode::reduce_overhead, compile_mode::max_autotune}) {
    INFO("mode " << static_cast<int>(mode));
    auto f = tenet::compile(pointwise_fn, {.mode = mode});
    std::vector<F2> outs, refs;
    for (int call = 0; call < 5; ++call) {
      const F2 x = rnd(64, 1000), y = rnd(64, 1000);  // new values every call
      F2 out = f(x, y);
      REQUIRE(out.device() == gpu);
      outs.push_back(out);
      refs.push_back(F2(pointwise_fn(x, y)));
    }
    // every result still holds its own call's values (the graph's outputs are copied out)
    for (std::size_t i = 0; i < outs.size(); ++i) require_same(outs[i], refs[i]);
    const auto& st = f.stats();
    CHECK(st.calls == 5);
    CHECK(st.plans == 1);
    const std::string ex = f.explain();
    INFO(ex);
    CHECK(has(ex, "CUDA shape class on cuda:0"));
    CHECK(has(ex, "launches 1 tenet kernel(s) on the GPU (1 pointwise"));
    // the class's plan is cuda_gpu's lowering: the one pointwise kernel that ran
    REQUIRE(f.plan().size() == 1);
    CHECK(f.plan().kernels[0].kind == "pointwise");
    if (mode == compile_mode::default_) {
      CHECK(st.graph_captures == 0);
      CHECK(st.graph_launches == 0);
    } else {
      CHECK(st.graph_captures == 1);  // call 2 captures
      CHECK(st.graph_launches == 4);  // calls 2..5 launch the graph
      CHECK(st.graph_fallbacks == 0);
      CHECK(has(ex, "CUDA graph: captured 1 time(s)"));
      CHECK(has(ex, "1 kernel(s)"));
    }
    if (mode == compile_mode::max_autotune) {
      CHECK(has(ex, "autotuned pointwise launch"));
      CHECK(has(ex, "(16 timed)"));  // 4 thread counts x 4 grid caps
    }
  }
}

TEST_CASE("compile on CUDA: a device change re-plans; mixed devices are a device_error", "[cuda][compile]") {
  auto f = tenet::compile(pointwise_fn, {.mode = compile_mode::reduce_overhead});
  F2 xc = randn<float, dyn_shape<2>>(8, 33), yc = randn<float, dyn_shape<2>>(8, 33);
  F2 oc = f(xc, yc);
  CHECK(oc.device().is_cpu());
  require_same(oc, F2(pointwise_fn(xc, yc)));
  const auto xg = xc.to(gpu), yg = yc.to(gpu);
  for (int call = 0; call < 3; ++call) require_same(F2(f(xg, yg)), F2(pointwise_fn(xg, yg)));
  CHECK(f.stats().plans == 2);  // same extents, another device: its own class
  CHECK(f.stats().graph_captures == 1);
  CHECK(f.stats().graph_launches == 2);
  CHECK_THROWS_AS(f(xg, yc), device_error);
  try {
    (void)f(xg, yc);
  } catch (const device_error& e) {
    CHECK(has(e.what(), "more than one device"));
  }
}

TEST_CASE("compile on CUDA: reductions, softmax and layer_norm rows; shape change and a replaced weight",
          "[cuda][compile]") {
  F1 w = rnd1(256), b = rnd1(256);
  auto rows_fn = [&](const auto& x) {
    return std::make_tuple(sum<1>(x * x), softmax<-1>(x * 0.5f), layer_norm(x + 1.0f, w, b));
  };
  auto check_call = [&](auto& f, const F2& x) {
    auto [s, p, n] = f(x);
    auto [rs, rp, rn] = rows_fn(x);
    require_same(s, F1(rs));
    require_same(p, F2(rp));
    require_same(n, F2(rn));
  };
  for (bool dynamic : {false, true}) {
    INFO("dynamic " << dynamic);
    w = rnd1(256), b = rnd1(256);
    auto f = tenet::compile(rows_fn, {.mode = compile_mode::reduce_overhead, .dynamic = dynamic});
    for (int call = 0; call < 3; ++call) check_call(f, rnd(64, 256, 2.0f));
    CHECK(f.stats().graph_captures == 1);
    CHECK(f.stats().graph_launches == 2);
    // a replaced weight (new storage): the graph baked the old pointer in, so it is captured again
    w = rnd1(256);
    check_call(f, rnd(64, 256));
    CHECK(f.stats().graph_captures == 2);
    CHECK(has(f.explain(), "1 re-capture(s)"));
    // an in-place change of a weight's values needs no re-capture (the graph reads it)
    w.copy_(rnd1(256));
    check_call(f, rnd(64, 256));
    CHECK(f.stats().graph_captures == 2);
    CHECK(f.stats().graph_launches == 4);
    // another shape class: rows only (the weights fix the columns); recorded, then captured
    for (int call = 0; call < 3; ++call) check_call(f, rnd(5, 256));
    CHECK(f.stats().plans == 2);
    if (!dynamic) CHECK(f.stats().guard_failures == 1);
    CHECK(f.stats().graph_captures == 3);
    CHECK(f.stats().graph_launches == 6);
    const std::string ex = f.explain();
    INFO(ex);
    CHECK(has(ex, "launches 3 tenet kernel(s)"));  // sum, softmax, layer_norm (producers fused)
    CHECK(f.plan().size() == 3);  // the plan of the class's rows: the same three kernels
  }
  // a long row with few outputs: the split reduction's partial buffer comes from the graph's arena
  w = rnd1(16384), b = rnd1(16384);
  auto g = tenet::compile(rows_fn, {.mode = compile_mode::reduce_overhead});
  for (int call = 0; call < 4; ++call) check_call(g, rnd(4, 16384));
  CHECK(g.stats().graph_captures == 1);
  CHECK(g.stats().graph_launches == 3);
  CHECK(has(g.explain(), "graph memory: arena"));
}

TEST_CASE("compile on CUDA: linear + bias + gelu and an MLP block", "[cuda][compile]") {
  F2 w1 = rnd(512, 256, 0.05f), w2 = rnd(256, 512, 0.05f);
  F1 b1 = rnd1(512, 0.1f), b2 = rnd1(256, 0.1f);
  auto lbg = [&](const auto& x) { return gelu(linear(x, w1, b1), approximate_tanh); };  // one cuBLASLt call
  auto mlp = [&](const auto& x) { return x + linear(gelu(linear(x, w1, b1)), w2, b2); };
  for (auto mode : {compile_mode::reduce_overhead, compile_mode::max_autotune}) {
    auto f = tenet::compile(lbg, {.mode = mode});
    auto m = tenet::compile(mlp, {.mode = mode});
    for (int call = 0; call < 4; ++call) {
      const F2 x = rnd(8, 256);
      // compiled first: max_autotune's first call tunes the GEMMs (cuBLASLt's candidates timed),
      // and eager calls of the same problems use the kept choice from then on
      const F2 got_f = f(x), got_m = m(x);
      require_same(got_f, F2(lbg(x)));
      require_same(got_m, F2(mlp(x)));
    }
    CHECK(f.stats().graph_captures == 1);
    CHECK(f.stats().graph_launches == 3);
    CHECK(m.stats().graph_captures == 1);
    CHECK(m.stats().graph_launches == 3);
    const F2 x = rnd(8, 256);
    const std::int64_t k0 = detail::kernels_launched();
    const F2 e = mlp(x);
    const std::int64_t k = detail::kernels_launched() - k0;  // what eager launches for the MLP block
    const std::string ef = f.explain(), em = m.explain();
    INFO(ef << em);
    CHECK(has(ef, "launches 1 tenet kernel(s) on the GPU (0 pointwise"));
    CHECK(has(em, ("launches " + std::to_string(k) + " tenet kernel(s)").c_str()));
    CHECK(m.plan().size() == k);  // the plan lists what eager launches
    CHECK(f.plan().size() == 1);
    if (mode == compile_mode::max_autotune) {
      CHECK(has(ef, "autotune: no pointwise kernel to tune"));
      CHECK(has(em, "autotuned pointwise launch"));
    }
    // autocast picks other kernels: the class is recorded and captured again, and still equals eager
    {
      tenet::autocast ac(gpu, dtype::bfloat16);
      for (int call = 0; call < 3; ++call) {
        const F2 xa = rnd(8, 256);
        const F2 got = f(xa);  // compiled first (max_autotune tunes the bf16 GEMM on its first call)
        require_same(got, F2(lbg(xa)));
      }
    }
    CHECK(f.stats().plans == 2);
    CHECK(f.stats().graph_captures == 2);
    CHECK(f.stats().graph_launches == 5);
  }
}

/// The plan of e on its device (tenet::plan) has as many kernels as evaluating e launches.
template <class E>
void check_plan_matches(const E& e, const char* what) {
  const auto p = tenet::plan(e);
  const std::int64_t k0 = detail::kernels_launched();
  (void)eval(e);
  const std::int64_t k = detail::kernels_launched() - k0;
  INFO(what << "\n" << p.text());
  CHECK(p.size() == k);
  CHECK(k >= 1);
}

TEST_CASE("plan and explain on CUDA tensors: cuda_gpu's lowering, as many kernels as run", "[cuda][compile]") {
  F2 w = rnd(64, 32, 0.1f), x = rnd(16, 32), y = rnd(16, 32);
  F1 b = rnd1(64, 0.1f);
  check_plan_matches(gelu(x * 2.0f + y) * 3.0f, "one pointwise kernel");
  check_plan_matches(softmax<-1>(x * 2.0f), "a row kernel with its producer");
  check_plan_matches(sum<1>(x * y), "a reduction with its prologue");
  check_plan_matches(var<-1>(x), "var's row kernel");
  check_plan_matches(relu(linear(x, w, b)), "cuBLASLt with the bias + relu epilogue");
  check_plan_matches(exp(x - amax<1>(x, keepdim)) + sum<0>(y, keepdim), "several kernels");
  CHECK(tenet::plan(gelu(x * 2.0f + y)).size() == 1);
  const std::string text = tenet::explain(relu(linear(x, w, b)));
  INFO(text);
  CHECK(has(text, "prim graph for cuda_gpu"));
  CHECK(has(text, "kernel plan for cuda_gpu"));
}

// gather checks its indices without a synchronization (the fault record, runtime.hpp), so a
// CUDA graph holds it; a bad index in a replay is index_error at the next wait, as eager.
TEST_CASE("compile on CUDA: gather is captured in the graph; bad indices still throw", "[cuda][compile]") {
  auto gat = [](const auto& x, const auto& i) { return gather<1>(x, i) * 2.0f; };
  auto f = tenet::compile(gat, {.mode = compile_mode::reduce_overhead});
  I2 idx = randint<std::int64_t, dyn_shape<2>>(0, 50, 16, 20);
  const auto di = idx.to(gpu);
  for (int call = 0; call < 4; ++call) {
    const F2 x = rnd(16, 50);
    require_same(F2(f(x, di)), F2(gat(x, di)));
  }
  CHECK(f.stats().graph_captures == 1);  // call 2 captures
  CHECK(f.stats().graph_launches == 3);  // calls 2..4 launch the graph
  CHECK(f.stats().graph_fallbacks == 0);
  const std::string ex = f.explain();
  INFO(ex);
  CHECK(has(ex, "CUDA graph: captured 1 time(s)"));
  // a bad index replayed: index_error naming it at the copy to the host, as eager
  idx.data()[3] = 77;
  const auto bad = idx.to(gpu);
  CHECK_THROWS_AS(F2(f(rnd(16, 50), bad)).cpu(), index_error);
  CHECK_THROWS_AS(F2(gat(rnd(16, 50), bad)).cpu(), index_error);
  // the device is still usable, and the graph too
  const F2 x = rnd(16, 50);
  require_same(F2(f(x, di)), F2(gat(x, di)));
  CHECK(f.stats().graph_captures == 1);
}

// a host copy inside the function cannot be captured: the calls run eagerly, with the reason
TEST_CASE("compile on CUDA: what cannot be captured runs eagerly with the reason", "[cuda][compile]") {
  auto hostly = [](const auto& x) {
    const auto h = F2(x * 2.0f).cpu();  // a wait for the device inside the function
    return F2(h.to(gpu)) + x;
  };
  auto f = tenet::compile(hostly, {.mode = compile_mode::reduce_overhead});
  for (int call = 0; call < 3; ++call) {
    const F2 x = rnd(16, 50);
    require_same(F2(f(x)), F2(hostly(x)));
  }
  CHECK(f.stats().graph_captures == 0);
  CHECK(f.stats().graph_launches == 0);
  CHECK(f.stats().graph_fallbacks >= 1);
  const std::string ex = f.explain();
  INFO(ex);
  CHECK(has(ex, "no CUDA graph, the calls run eagerly"));
}

// a lazy random draw inside a compiled function: a captured graph would replay the same Philox
// offset every call, so the class runs eagerly (graph_fallbacks, the reason in explain()) and
// every call draws new values
TEST_CASE("compile on CUDA: a random draw is never captured; each call draws anew", "[cuda][compile]") {
  auto noisy = [](const auto& x) {
    const device_guard on(x.device());  // rand_lazy draws on the default device
    return x + rand_lazy<float, dyn_shape<2>>(x.size(0), x.size(1));
  };
  auto f = tenet::compile(noisy, {.mode = compile_mode::reduce_overhead});
  const F2 x = rnd(16, 40);
  std::vector<F2> outs;
  for (int call = 0; call < 4; ++call) outs.push_back(f(x));
  const auto xh = x.cpu();
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const auto o = outs[i].cpu();
    std::int64_t outside = 0, same_as_previous = 0;
    const auto prev = outs[i == 0 ? 1 : i - 1].cpu();
    for (std::int64_t r = 0; r < 16; ++r)
      for (std::int64_t c = 0; c < 40; ++c) {
        const float u = o(r, c) - xh(r, c);
        outside += !(u >= -1e-6f && u < 1.0f + 1e-6f);
        same_as_previous += o(r, c) == prev(r, c);
      }
    INFO("call " << i);
    CHECK(outside == 0);
    CHECK(same_as_previous < 16);  // another draw (a few equal by chance at most)
  }
  CHECK(f.stats().graph_captures == 0);
  CHECK(f.stats().graph_fallbacks >= 2);
  CHECK(has(f.explain(), "draws random numbers"));
}
