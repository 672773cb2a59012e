// Gradients compared with PyTorch's on the same inputs (tests/reference/gen_autograd.py writes
// autograd.txt): an MLP with cross_entropy, kinks and ties, layer_norm, softmax, conv2d + pooling,
// prod with zeros, cumsum + sort, embedding + mse_loss.
#include "reference.hpp"

using namespace tenet;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;
using V = Tensor<double, dyn_shape<1>>;
using M = Tensor<double, dyn_shape<2>>;
using M4 = Tensor<double, dyn_shape<4>>;
using S0 = Tensor<double, shape<>>;
constexpr const char* file = "autograd.txt";

template <class T>
T leaf(const tenet_test::ref_case& c, const char* key) {
  T t = make<typename T::value_type, typename T::shape_type>(c.at(key));
  t.requires_grad_();
  return t;
}

TEST_CASE("autograd vs PyTorch: MLP with cross_entropy", "[autograd]") {
  const auto& c = get_case(file, "mlp");
  auto x = leaf<M>(c, "x"), w1 = leaf<M>(c, "w1"), w2 = leaf<M>(c, "w2");
  auto b1 = leaf<V>(c, "b1"), b2 = leaf<V>(c, "b2");
  const auto target = make<std::int64_t, dyn_shape<1>>(c.at("target"));
  S0 loss = cross_entropy(linear(relu(linear(x, w1, b1)), w2, b2), target);
  check_close(loss, c.at("loss"));
  loss.backward();
  check_close(x.grad(), c.at("grad_x"));
  check_close(w1.grad(), c.at("grad_w1"));
  check_close(b1.grad(), c.at("grad_b1"));
  check_close(w2.grad(), c.at("grad_w2"));
  check_close(b2.grad(), c.at("grad_b2"));
}

TEST_CASE("autograd vs PyTorch: kinks and ties", "[autograd]") {
  const auto& c = get_case(file, "kinks");
  auto v = leaf<V>(c, "v"), u = leaf<V>(c, "u");
  S0 loss = sum(relu(v) + abs(v) + maximum(v, u) + minimum(u, v) + hardtanh(v) + relu6(v * 3.0)) + amax(v) +
            sum(pow(u, v));
  check_close(loss, c.at("loss"));
  loss.backward();
  check_close(v.grad(), c.at("grad_v"));
  check_close(u.grad(), c.at("grad_u"));
  const auto& z = get_case(file, "sqrt_zero");
  auto s = leaf<V>(z, "s");
  S0 l2 = sum(sqrt(s));
  l2.backward();
  check_close(s.grad(), z.at("grad_s"));
}

TEST_CASE("autograd vs PyTorch: layer_norm, softmax", "[autograd]") {
  const auto& c = get_case(file, "layer_norm");
  auto x = leaf<M>(c, "x");
  auto g = leaf<V>(c, "g"), b = leaf<V>(c, "b");
  M y = layer_norm(x, g, b);
  y.backward(make<double, dyn_shape<2>>(c.at("seed")));
  check_close(x.grad(), c.at("grad_x"), 1e-6, 1e-6);
  check_close(g.grad(), c.at("grad_g"));
  check_close(b.grad(), c.at("grad_b"));
  const auto& s = get_case(file, "softmax");
  auto xs = leaf<M>(s, "x");
  M ys = softmax<1>(xs) * 2.0 + log_softmax<0>(xs);
  ys.backward(make<double, dyn_shape<2>>(s.at("seed")));
  check_close(xs.grad(), s.at("grad_x"));
}

TEST_CASE("autograd vs PyTorch: conv2d and avg_pool2d", "[autograd]") {
  const auto& c = get_case(file, "conv2d");
  auto x = leaf<M4>(c, "x"), w = leaf<M4>(c, "w");
  auto b = leaf<V>(c, "b");
  M4 y = avg_pool2d(conv2d(x, w, b, {.stride = {2, 1}, .padding = {1, 1}}), {2, 2});
  y.backward(make<double, dyn_shape<4>>(c.at("seed")));
  check_close(x.grad(), c.at("grad_x"));
  check_close(w.grad(), c.at("grad_w"));
  check_close(b.grad(), c.at("grad_b"));
}

TEST_CASE("autograd vs PyTorch: prod with zeros, cumsum and sort, embedding and mse_loss", "[autograd]") {
  const auto& p = get_case(file, "prod_zeros");
  auto x = leaf<M>(p, "x");
  V y = prod<1>(x);
  y.backward(make<double, dyn_shape<1>>(p.at("seed")));
  check_close(x.grad(), p.at("grad_x"));
  const auto& s = get_case(file, "cumsum_sort");
  auto xs = leaf<M>(s, "x");
  M ys = cumsum<1>(xs) + sort<1>(xs, true).values;
  ys.backward(make<double, dyn_shape<2>>(s.at("seed")));
  check_close(xs.grad(), s.at("grad_x"));
  const auto& e = get_case(file, "embedding_mse");
  auto w = leaf<M>(e, "w");
  auto bias = leaf<V>(e, "bias");
  const auto idx = make<std::int64_t, dyn_shape<2>>(e.at("idx"));
  const auto t = make<double, dyn_shape<3>>(e.at("t"));
  S0 l = mse_loss(embedding(idx, w) + bias, t);
  l.backward();
  check_close(w.grad(), e.at("grad_w"));
  check_close(bias.grad(), e.at("grad_bias"));
}
