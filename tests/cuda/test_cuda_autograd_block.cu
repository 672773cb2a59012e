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

