// Eager autograd on CUDA tensors: every gradient computed on cuda(0) against the same backward on
// the CPU backend, from the same inputs (fp32 and fp64): pointwise ops with broadcasting (a bias,
// a column, a 0-d scalar), reductions over dims, linear, gelu / relu / tanh / sigmoid / exp / log,
// softmax / log_softmax, layer_norm, cross_entropy, mse_loss; views (transpose, permute, strided
// slice, reshape of a non-contiguous tensor) and a non-contiguous leaf; accumulation into .grad,
// retain_graph and its error; autograd::grad; and a small MLP trained a few steps with AdamW and
// SGD (momentum, nesterov), parameters compared with the CPU's after every step. This file: main,
// accumulation / retain_graph / autograd::grad; the other cases in test_cuda_autograd_*.cu. The
// files are compiled two translation units (tu_autograd_1.cu, tu_autograd_2.cu), balanced so that
// they build in parallel.
//
// One function per case, run on both devices: the expression types are the same on the CPU and on
// the GPU (the device is a run-time property), so each case compiles its VJPs once.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "gpu_main.hpp"

#include <cmath>
#include <string>
#include <vector>

#include <tenet/cuda.hpp>

#include "autograd_checks.hpp"

using namespace tenet;
using namespace tenet::test;

TEST_CASE("cuda autograd: accumulation, retain_graph, its error, autograd::grad, no_grad") {
  manual_seed(14);
  M<double> x0 = randn<double, dyn_shape<2>>(6, 5);
  auto run = [&](device d, std::vector<M<double>>& out) {
    auto x = leaf(x0, d);
    S0<double> l = sum(x * x * x);
    l.backward(true);
    out.push_back(x.grad());
    l.backward();  // retained: runs again, accumulates
    out.push_back(x.grad());
    try {
      l.backward();
      FAIL("a backward through a freed graph must throw");
    } catch (const value_error& e) {
      CHECK(std::string(e.what()).find("retain_graph") != std::string::npos);
    }
    S0<double> l2 = sum(x * x * x);
    auto gx = autograd::grad(l2, x);  // .grad left alone
    out.push_back(gx);
    out.push_back(x.grad());
    {
      no_grad guard;
      S0<double> l3 = sum(x * x * x);
      CHECK(!l3.requires_grad());
    }
  };
  std::vector<M<double>> c, g;
  run(tenet::cpu, c);
  run(gpu, g);
  REQUIRE(c.size() == g.size());
  for (std::size_t i = 0; i < c.size(); ++i) check_same(g[i], c[i], ("gradient " + std::to_string(i)).c_str());
  // the accumulated gradient is twice the first (on the GPU too; 1 ulp: the two backwards may round
  // their sums differently)
  M<double> doubled = g[0] * 2.0;
  check_same(g[1], M<double>(doubled.cpu()), "accumulated = 2 x one backward");
  // a CPU tensor and a CUDA tensor in one expression: device_error, nothing recorded
  auto xd = leaf(x0, gpu);
  auto xc = leaf(x0, tenet::cpu);
  CHECK_THROWS_AS(S0<double>(sum(xd * xc)), device_error);
}

int main(int argc, char** argv) { return tenet::test::run_or_skip("tenet CUDA autograd tests", argc, argv); }

TEST_CASE("cuda autograd: scaled_dot_product_attention's gradients (the math backward) against the CPU's") {
  using S4 = dyn_shape<4>;
  manual_seed(12);
  const auto q0 = randn<float, S4>(1, 4, 19, 8), k0 = randn<float, S4>(1, 2, 23, 8), v0 = randn<float, S4>(1, 2, 23, 4);
  const auto w = randn<float, S4>(1, 4, 19, 4);
  auto grads = [&](device d) {
    auto q = q0.to(d), k = k0.to(d), v = v0.to(d);
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_();
    Tensor<float, shape<>> loss = sum(scaled_dot_product_attention(q, k, v, {.is_causal = true, .enable_gqa = true}) * w.to(d));
    loss.backward();
    return std::make_tuple(q.grad(), k.grad(), v.grad());
  };
  const auto [gq, gk, gv] = grads(tenet::cuda(0));
  const auto [cq, ck, cv] = grads(tenet::cpu);
  check_close(gq, cq, 1e-4, 1e-5);
  check_close(gk, ck, 1e-4, 1e-5);
  check_close(gv, cv, 1e-4, 1e-5);
}
