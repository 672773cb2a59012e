// Gradients of the main differentiable ATen-level ops (through their decompositions, or their own
// rule for softmax/log_softmax) against central finite differences in float64.
#include "gradcheck.hpp"

using namespace tenet;
using tenet_test::filled;
using tenet_test::gradcheck;
using V = Tensor<double, dyn_shape<1>>;
using M = Tensor<double, dyn_shape<2>>;
using M3 = Tensor<double, dyn_shape<3>>;
using M4 = Tensor<double, dyn_shape<4>>;

TEST_CASE("autograd ops: activations", "[autograd]") {
  const M x = filled<2>({3, 5}, -2.5, 2.5, 0.05);  // no element at a kink (0, +-1, +-0.5)
  gradcheck([](const auto& a) { return relu(a); }, x);
  gradcheck([](const auto& a) { return gelu(a); }, x);
  gradcheck([](const auto& a) { return gelu(a, approximate_tanh); }, x);
  gradcheck([](const auto& a) { return silu(a); }, x);
  gradcheck([](const auto& a) { return sigmoid(a); }, x);
  gradcheck([](const auto& a) { return tanh(a); }, x);
  gradcheck([](const auto& a) { return softplus(a); }, x);
  gradcheck([](const auto& a) { return elu(a); }, x);
  gradcheck([](const auto& a) { return leaky_relu(a, 0.1); }, x);
  gradcheck([](const auto& a) { return mish(a); }, x);
  gradcheck([](const auto& a) { return hardtanh(a); }, x);
  gradcheck([](const auto& a) { return logsigmoid(a); }, x);
}

TEST_CASE("autograd ops: softmax, log_softmax (own rule) agree with their decomposition", "[autograd]") {
  const M x = filled<2>({3, 5}, -2, 2);
  gradcheck([](const auto& a) { return softmax<1>(a); }, x);
  gradcheck([](const auto& a) { return log_softmax<1>(a); }, x);
  gradcheck([](const auto& a) { return softmax<0>(a); }, x);
  gradcheck([](const auto& a) { return log_softmax<0>(a); }, x);
  // the rule of the composite vs the VJP of its decomposition written out by hand
  M a = x.detach().clone(), b = x.detach().clone();
  a.requires_grad_();
  b.requires_grad_();
  const auto w = tenet_test::weights_like<dyn_shape<2>>(x.sizes());
  M sa = softmax<1>(a);
  M sb = exp(b - amax<1>(b, keepdim)) / sum<1>(exp(b - amax<1>(b, keepdim)), keepdim);
  sa.backward(w);
  sb.backward(w);
  M la = log_softmax<1>(a);
  M lb = (b - amax<1>(b, keepdim)) - log(sum<1>(exp(b - amax<1>(b, keepdim)), keepdim));
  la.backward(w);
  lb.backward(w);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 5; ++j) CHECK(a.grad()(i, j) == Approx(b.grad()(i, j)).margin(1e-12));
}

TEST_CASE("autograd ops: reductions with dims and keepdim, norms", "[autograd]") {
  const M3 x = filled<3>({2, 3, 4}, -1, 1);
  gradcheck([](const auto& a) { return mean<1>(a); }, x);
  gradcheck([](const auto& a) { return mean<0, 2>(a, keepdim); }, x);
  gradcheck([](const auto& a) { return var<2>(a); }, x);
  gradcheck([](const auto& a) { return tenet::std<1>(a, keepdim); }, x);
  gradcheck([](const auto& a) { return logsumexp<2>(a); }, x);
  gradcheck([](const auto& a) { return sum(a * a); }, x);
  gradcheck([](const auto& a) { return amax<2>(a); }, x);
  const M3 ln = filled<3>({2, 3, 4}, -2, 2, 0.3);
  const V g = filled<1>({4}, 0.5, 1.5);
  const V b = filled<1>({4}, -0.5, 0.5, 0.7);
  gradcheck([](const auto& a, const auto& w, const auto& c) { return layer_norm(a, w, c); }, ln, g, b);
  // the input gradient's row kernel (aten::norm_last_grad): a row length that is no multiple of the
  // SIMD width, two normalized dims, rms_norm, a transposed (non-contiguous) input
  const M3 wide = filled<3>({3, 2, 37}, -2, 2, 0.1);
  const V g37 = filled<1>({37}, 0.5, 1.5, 0.2);
  const V b37 = filled<1>({37}, -0.5, 0.5, 0.4);
  gradcheck([](const auto& a, const auto& w, const auto& c) { return layer_norm(a, w, c); }, wide, g37, b37);
  gradcheck([](const auto& a, const auto& w) { return rms_norm(a, w, 1e-6); }, wide, g37);
  const M g2 = filled<2>({2, 37}, 0.5, 1.5, 0.6);
  const M b2 = filled<2>({2, 37}, -0.5, 0.5, 0.8);
  gradcheck([](const auto& a, const auto& w, const auto& c) { return layer_norm(a, w, c); }, wide, g2, b2);
  gradcheck([](const auto& a, const auto& w) { return rms_norm(a.template transpose<0, 1>(), w); }, wide, g37);
}

