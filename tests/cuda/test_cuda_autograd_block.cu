// CUDA autograd tests, part 3: a transformer-ish block (linear, gelu, layer_norm, softmax,
// log_softmax, cross_entropy, mse_loss), gradients on cuda(0) against the CPU backend's.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <tenet/cuda.hpp>

#include "autograd_checks.hpp"

using namespace tenet;
using namespace tenet::test;

namespace {

// --- a transformer-ish block: linear, layer_norm, softmax, log_softmax, losses -------------------
template <class T>
struct block_grads {
  M<T> x, w1, w2;
  V1<T> b1, g, beta, b2;
  S0<T> loss;
};
template <class T>
block_grads<T> block_case(const std::vector<M<T>>& mats, const std::vector<V1<T>>& vecs,
                          const Tensor<std::int64_t, dyn_shape<1>>& target0, device d) {
  auto x = leaf(mats[0], d), w1 = leaf(mats[1], d), w2 = leaf(mats[2], d), y = leaf(mats[3], d);
  y.requires_grad_(false);
  auto b1 = leaf(vecs[0], d), g = leaf(vecs[1], d), beta = leaf(vecs[2], d), b2 = leaf(vecs[3], d);
  const auto target = target0.to(d);
  M<T> h = gelu(linear(x, w1, b1));
  M<T> z = layer_norm(h, g, beta);
  M<T> logits = linear(z, w2, b2);
  S0<T> loss = cross_entropy(logits, target) + mse_loss(softmax<1>(logits), y) - mean(log_softmax<1>(h)) * 0.1;
  loss.backward();
  return {x.grad(), w1.grad(), w2.grad(), b1.grad(), g.grad(), beta.grad(), b2.grad(), loss};
}

template <class T>
void run_block() {
  manual_seed(12);
  const std::int64_t batch = 48, k = 40, hdim = 64, classes = 10;
  std::vector<M<T>> mats{randn<T, dyn_shape<2>>(batch, k), randn<T, dyn_shape<2>>(hdim, k) * 0.2,
                         randn<T, dyn_shape<2>>(classes, hdim) * 0.2, rand<T, dyn_shape<2>>(batch, classes)};
  std::vector<V1<T>> vecs{randn<T, dyn_shape<1>>(hdim), randn<T, dyn_shape<1>>(hdim) + 1.0,
                          randn<T, dyn_shape<1>>(hdim), randn<T, dyn_shape<1>>(classes)};
  Tensor<std::int64_t, dyn_shape<1>> target = randint<std::int64_t, dyn_shape<1>>(0, classes, batch);
  const auto c = block_case<T>(mats, vecs, target, tenet::cpu);
  const auto g = block_case<T>(mats, vecs, target, gpu);
  check_same(g.loss.detach(), c.loss.detach(), "loss");
  check_same(g.x, c.x, "d x");
  check_same(g.w1, c.w1, "d w1");
  check_same(g.w2, c.w2, "d w2");
  check_same(g.b1, c.b1, "d b1");
  check_same(g.g, c.g, "d layer_norm weight");
  check_same(g.beta, c.beta, "d layer_norm bias");
  check_same(g.b2, c.b2, "d b2");
}

}  // namespace

// fp32 only (to 1e-5), the dtype such a block trains in: each dtype compiles the case's VJP
// kernels again (minutes of nvcc); fp64 backward kernels are checked to 1e-12 by the pointwise,
// views and training cases.
TEST_CASE("cuda autograd: linear, gelu, layer_norm, softmax, log_softmax, cross_entropy, mse_loss (fp32)") {
  run_block<float>();
}


namespace {
struct linear_grads {
  Tensor<float, dyn_shape<3>> x;
  M<float> w;
  V1<float> b;
};
/// sum(linear(x, w, b) * y) over a batch of sequences (x 3-D), which leaves need a gradient
/// chosen by the flags.
linear_grads linear3_case(const Tensor<float, dyn_shape<3>>& x0, const M<float>& w0, const V1<float>& b0,
                          const Tensor<float, dyn_shape<3>>& y0, device d, bool gx, bool gb) {
  auto x = leaf(x0, d);
  auto w = leaf(w0, d);
  auto b = leaf(b0, d);
  x.requires_grad_(gx);
  b.requires_grad_(gb);
  const auto y = y0.to(d);
  S0<float> loss = sum(linear(x, w, b) * y);
  loss.backward();
  return {gx ? x.grad() : Tensor<float, dyn_shape<3>>(), w.grad(), gb ? b.grad() : V1<float>()};
}
}  // namespace

// The weight and bias gradients of linear + bias come from one cuBLASLt GEMM with the
// bias-gradient epilogue (BGRADB); its results against the CPU's, over 2-D and 3-D inputs.
TEST_CASE("cuda autograd: linear's weight and bias gradients from one GEMM with a bias-gradient epilogue") {
  manual_seed(31);
  const Tensor<float, dyn_shape<3>> x = randn<float, dyn_shape<3>>(3, 37, 48), y = randn<float, dyn_shape<3>>(3, 37, 20);
  const M<float> w = randn<float, dyn_shape<2>>(20, 48) * 0.2f;
  const V1<float> b = randn<float, dyn_shape<1>>(20);
  for (const bool gx : {true, false}) {
    for (const bool gb : {true, false}) {
      INFO("x needs grad " << gx << ", b needs grad " << gb);
      const auto before = tenet::detail::cuda::bias_grad_epilogues().load();
      const auto c = linear3_case(x, w, b, y, tenet::cpu, gx, gb);
      const auto g = linear3_case(x, w, b, y, gpu, gx, gb);
      CHECK(tenet::detail::cuda::bias_grad_epilogues().load() - before == (gb ? 1 : 0));
      check_same(g.w, c.w, "d w");
      if (gb) check_same(g.b, c.b, "d b");
      if (gx) check_same(g.x, c.x, "d x");
    }
  }
  // 2-D, through nn::Linear (the module's forward is linear(x, w, b))
  const M<float> x2 = randn<float, dyn_shape<2>>(300, 64), y2 = randn<float, dyn_shape<2>>(300, 33);
  auto run = [&](device d) {
    manual_seed(5);
    nn::Linear<64, 33> lin;
    lin.to(d);
    S0<float> loss = sum(lin(x2.to(d)) * y2.to(d));
    loss.backward();
    return std::pair{M<float>(lin.weight.grad()), V1<float>(lin.bias.grad())};
  };
  const auto before = tenet::detail::cuda::bias_grad_epilogues().load();
  const auto [wc, bc] = run(tenet::cpu);
  const auto [wg, bg] = run(gpu);
  CHECK(tenet::detail::cuda::bias_grad_epilogues().load() - before == 1);
  check_same(wg, wc, "nn::Linear d weight");
  check_same(bg, bc, "nn::Linear d bias");
}
