// CUDA autograd tests, part 2: pointwise ops with broadcasting (a bias, a column, a 0-d scalar)
// and reductions over dims, gradients on cuda(0) against the CPU backend's.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <tenet/cuda.hpp>

#include "autograd_checks.hpp"

using namespace tenet;
using namespace tenet::test;

namespace {

// --- pointwise, broadcasting, reductions ----------------------------------------------------------
template <class T>
struct pw_grads {
  M<T> a, c;
  V1<T> b;
  S0<T> s;
  S0<T> loss;
};
template <class T>
pw_grads<T> pointwise_case(const M<T>& a0, const V1<T>& b0, const M<T>& c0, const S0<T>& s0, device d) {
  auto a = leaf(a0, d);
  auto b = leaf(b0, d);  // (n): broadcast over rows
  auto c = leaf(c0, d);  // (m, 1): broadcast over columns
  auto s = leaf(s0, d);  // 0-d: broadcast over everything
  M<T> h = tanh(a * b + c) + sigmoid(a) * exp(a - c) / (relu(b) + 1.0) + s * gelu(a);
  M<T> q = log(h * h + 1.0) - a / (c * c + 2.0);
  S0<T> loss = mean<0>(sum<1>(q)) + sum(mean<1>(h));
  loss.backward();
  return {a.grad(), c.grad(), b.grad(), s.grad(), loss};
}

template <class T>
void run_pointwise() {
  manual_seed(11);
  const std::int64_t m = 37, n = 300;  // n >= 256: the block-per-output sum_to kernel for s and c
  M<T> a = randn<T, dyn_shape<2>>(m, n);
  V1<T> b = randn<T, dyn_shape<1>>(n);
  M<T> c = randn<T, dyn_shape<2>>(m, 1);
  S0<T> s = randn<T, dyn_shape<0>>();
  const auto cg = pointwise_case<T>(a, b, c, s, tenet::cpu);
  const auto gg = pointwise_case<T>(a, b, c, s, gpu);
  check_same(gg.loss.detach(), cg.loss.detach(), "loss");
  check_same(gg.a, cg.a, "d a");
  check_same(gg.b, cg.b, "d b (bias, summed over rows)");
  check_same(gg.c, cg.c, "d c (column, summed over columns)");
  check_same(gg.s, cg.s, "d s (0-d, summed over everything)");
}

}  // namespace

// fp64 only (to 1e-12: the device's exp/log/tanh and every backward formula exactly as the CPU's):
// each dtype compiles the case's VJP kernels again, minutes of nvcc for this one expression; the
// fp32 kernels of the same rules run in the block case (test_cuda_autograd_block.cu).
TEST_CASE("cuda autograd: pointwise ops, broadcasting and reductions match the CPU (fp64)") {
  run_pointwise<double>();
}


// dropout on the GPU: the same mask as on the CPU for one seed (the draw runs on the input's
// device), so the loss and the gradient (the mask times 1 / (1 - p)) equal the CPU's
TEST_CASE("cuda autograd: dropout's mask and gradient match the CPU (fp64)") {
  manual_seed(4);
  const M<double> a0 = randn<double, dyn_shape<2>>(61, 97);
  auto run = [&](device d) {
    auto a = leaf(a0, d);
    manual_seed(19);
    M<double> y = dropout(a, 0.4);
    S0<double> loss = sum(y * a);
    loss.backward();
    return std::pair<S0<double>, M<double>>{loss, a.grad()};
  };
  const auto [lc, gc] = run(tenet::cpu);
  const auto [lg, gg] = run(gpu);
  check_same(lg.detach(), lc.detach(), "loss");
  check_same(gg, gc, "d a");
}
