// Second order (create_graph) of the pointwise prims and composites, and the API:
// tenet::autograd::grad with create_graph and backward({.create_graph = true}) give gradients that
// are differentiated again. tests/hesscheck.hpp compares Hessian-vector products by double
// backward with finite differences of the first-order gradient (float64). The reductions, matmul
// and movement prims: test_autograd_second_ops.cpp; softmax, losses, indexing, scans and an MLP's
// Hessian against PyTorch: test_autograd_second_nn.cpp. Built with TENET_AUTOGRAD=2.
#include "hesscheck.hpp"

using namespace tenet;
using tenet_test::bin;
using tenet_test::filled;
using tenet_test::hesscheck;
using tenet_test::un;
namespace P = tenet::prim;
using V = Tensor<double, dyn_shape<1>>;
using M = Tensor<double, dyn_shape<2>>;
using M3 = Tensor<double, dyn_shape<3>>;
using S0 = Tensor<double, shape<>>;

TEST_CASE("autograd second order: pointwise unary prims", "[autograd]") {
  const M x = filled<2>({3, 4}, 0.3, 0.9);   // inside every domain
  const M s = filled<2>({3, 4}, -1.5, 1.5);  // both signs
  hesscheck([](const auto& a) { return un<P::exp_>(a); }, s);
  hesscheck([](const auto& a) { return un<P::exp2_>(a); }, s);
  hesscheck([](const auto& a) { return un<P::expm1_>(a); }, s);
  hesscheck([](const auto& a) { return un<P::log_>(a); }, x);
  hesscheck([](const auto& a) { return un<P::log2_>(a); }, x);
  hesscheck([](const auto& a) { return un<P::log1p_>(a); }, x);
  hesscheck([](const auto& a) { return un<P::sqrt_>(a); }, x);
  hesscheck([](const auto& a) { return un<P::rsqrt_>(a); }, x);
  hesscheck([](const auto& a) { return un<P::sin_>(a); }, s);
  hesscheck([](const auto& a) { return un<P::cos_>(a); }, s);
  hesscheck([](const auto& a) { return un<P::tan_>(a); }, x);
  hesscheck([](const auto& a) { return un<P::tanh_>(a); }, s);
  hesscheck([](const auto& a) { return un<P::erf_>(a); }, s);
  hesscheck([](const auto& a) { return un<P::reciprocal_>(a); }, x);
  // piecewise linear / constant: second derivative 0 away from the kinks
  hesscheck([](const auto& a) { return bin<P::mul_>(un<P::abs_>(a), a); }, s);   // x|x|: 2 sign(x)
  hesscheck([](const auto& a) { return bin<P::mul_>(un<P::floor_>(a), a); }, s);
  hesscheck([](const auto& a) { return bin<P::mul_>(un<P::neg_>(a), un<P::sign_>(a)); }, s);
  // composites through their decompositions
  hesscheck([](const auto& a) { return sigmoid(a); }, s);
  hesscheck([](const auto& a) { return gelu(a); }, s);
  hesscheck([](const auto& a) { return relu(a) * a; }, s);  // relu(x) x: 2 for x > 0
}


TEST_CASE("autograd second order: pointwise binary prims, where, cast, broadcasting", "[autograd]") {
  const M a = filled<2>({3, 4}, 0.5, 2.0);
  const V b = filled<1>({4}, 0.7, 1.9, 0.31);  // broadcast along dim 0: sum_to_size under create_graph
  const M c = filled<2>({3, 1}, -1.5, 1.5, 0.17);
  hesscheck([](const auto& x, const auto& y) { return bin<P::mul_>(x, y); }, c, b);
  hesscheck([](const auto& x, const auto& y) { return bin<P::div_>(x, y); }, a, b);
  hesscheck([](const auto& x, const auto& y) { return bin<P::pow_>(x, y); }, a, b);
  hesscheck([](const auto& x, const auto& y) { return bin<P::atan2_>(x, y); }, c, b);
  hesscheck([](const auto& x, const auto& y) { return bin<P::mul_>(bin<P::add_>(x, y), bin<P::sub_>(x, y)); }, a, b);
  hesscheck([](const auto& x, const auto& y) { return bin<P::mul_>(bin<P::maximum_>(x, y), bin<P::minimum_>(x, y)); },
            a, b);
  hesscheck([](const auto& x, const auto& y) { return bin<P::mul_>(bin<P::remainder_>(x, y), bin<P::fmod_>(x, y)); },
            a, b);
  hesscheck([](const auto& x, const auto& y) {
    return make_node(P::where_{}, bin<P::gt_>(x, y), bin<P::mul_>(x, x), bin<P::mul_>(x, y));
  }, a, b);
  // pow with a scalar exponent (x^3), and a cast float64 -> float32 -> float64 (float32 precision:
  // the check is on the float64 product x * x)
  hesscheck([](const auto& x) { return x * x * x + pow(x, 3.0); }, a);
  hesscheck([](const auto& x) {
    return make_node(P::mul_{}, make_node(P::convert_element_type_<double>{}, make_node(P::convert_element_type_<double>{}, x)),
                     x);
  }, c);
}


TEST_CASE("autograd second order: third order, backward(create_graph), .grad has a graph", "[autograd]") {
  M x = filled<2>({2, 3}, 0.5, 1.5);
  x.requires_grad_();
  // f = sum(x^4): f' = 4x^3, f'' = 12x^2, f''' = 24x
  S0 f = sum(x * x * x * x);
  const M g1 = autograd::grad(f, x, {.create_graph = true});
  REQUIRE(g1.requires_grad());
  CHECK_FALSE(x.grad().defined());  // grad() never accumulates into .grad
  const M g2 = autograd::grad(S0(sum(g1)), x, {.create_graph = true});
  const M g3 = autograd::grad(S0(sum(g2)), x);
  CHECK_FALSE(g3.requires_grad());
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      const double v = x(i, j);
      CHECK(g1(i, j) == Approx(4 * v * v * v));
      CHECK(g2(i, j) == Approx(12 * v * v));
      CHECK(g3(i, j) == Approx(24 * v));
    }
  // backward with create_graph: .grad is a tracked tensor; differentiating it gives f''
  f.backward({.create_graph = true});
  const M gx = x.grad();
  REQUIRE(gx.defined());
  CHECK(gx.requires_grad());
  CHECK_FALSE(gx.is_leaf());
  // a second create_graph backward accumulates, still tracked (4x^3 twice)
  f.backward({.create_graph = true});
  const M gx2 = x.grad();
  CHECK(gx2.requires_grad());
  CHECK(gx2(1, 2) == Approx(8 * std::pow(double(x(1, 2)), 3)));
  x.set_grad({});
  S0(sum(gx2)).backward();
  CHECK_FALSE(x.grad().requires_grad());
  CHECK(x.grad()(0, 1) == Approx(24 * std::pow(double(x(0, 1)), 2)));
}


TEST_CASE("autograd second order: grad() w.r.t. computed tensors, seeds that require grad", "[autograd]") {
  M x = filled<2>({2, 3}, 0.5, 1.5);
  x.requires_grad_();
  M y = x * x;  // a computed input
  S0 f = sum(y * y * x);
  // df/dy = 2 y x, d/dx of its sum = 2 (2x) x + 2 y = 6 x^2
  auto [gy, gx] = autograd::grad(f, std::make_tuple(y, x), {.create_graph = true});
  for (std::int64_t j = 0; j < 3; ++j) {
    const double v = x(1, j);
    CHECK(gy(1, j) == Approx(2 * v * v * v));
    CHECK(gx(1, j) == Approx(5 * std::pow(v, 4)));
  }
  const M h = autograd::grad(S0(sum(gy)), x, {.retain_graph = true});
  CHECK(h(0, 2) == Approx(6 * std::pow(double(x(0, 2)), 2)));
  // a seed that requires grad: d/dseed of <grad(x*x*..., seed), v> = 2 x v
  M seed = filled<2>({2, 3}, -1, 1);
  seed.requires_grad_();
  M z = x * x;
  const M gz = autograd::grad(z, x, seed, {.create_graph = true});  // 2 x seed
  const M v = filled<2>({2, 3}, 0.1, 0.9, 0.3);
  const M ds = autograd::grad(S0(sum(gz * v)), seed);
  CHECK(ds(1, 1) == Approx(2 * double(x(1, 1)) * double(v(1, 1))));
}


namespace {
struct cube {  // x^3 with its own backward
  static auto forward(const M& x) { return x * x * x; }
  static auto backward(const M& g, const M& x) { return std::make_tuple(M(g * 3.0 * x * x)); }
};
}  // namespace

TEST_CASE("autograd second order: through a custom_function's backward", "[autograd]") {
  const M x = filled<2>({2, 3}, -1.5, 1.5);
  hesscheck([](const auto& a) { return custom_function<cube>::apply(a); }, x);
}

TEST_CASE("autograd second order: errors", "[autograd]") {
  M x = filled<2>({2, 3}, 0.5, 1.5);
  x.requires_grad_();
  // the gradient's own graph is freed by a backward without retain_graph
  S0 f = sum(x * x * x);
  const M g = autograd::grad(f, x, {.create_graph = true});
  S0 s = sum(g * g);
  (void)autograd::grad(s, x);
  CHECK_THROWS_AS(autograd::grad(s, x), value_error);
  // the forward graph is retained by create_graph
  CHECK_NOTHROW(autograd::grad(f, x));
  CHECK_THROWS_AS(autograd::grad(f, x), value_error);  // freed now
  // prod through an element equal to 0: first order fine, create_graph refused
  M z = filled<2>({2, 3}, 0.5, 1.5);
  z(0, 1) = 0;
  z.requires_grad_();
  S0 p = prod(z);
  CHECK_NOTHROW(autograd::grad(p, z, {.retain_graph = true}));
  CHECK_THROWS_AS(autograd::grad(p, z, {.create_graph = true}), value_error);
  // grad(): inputs that do not require grad / are unused, outputs without a seed
  M c = filled<2>({2, 3}, 0.5, 1.5);
  S0 f2 = sum(x * x);
  CHECK_THROWS_AS(autograd::grad(f2, c, {.retain_graph = true}), value_error);
  M u = filled<2>({2, 3}, 0.5, 1.5);
  u.requires_grad_();
  CHECK_THROWS_AS(autograd::grad(f2, u, {.retain_graph = true}), value_error);
  CHECK_FALSE(autograd::grad(f2, u, {.retain_graph = true, .allow_unused = true}).defined());
  M y = x * x;
  CHECK_THROWS_AS(autograd::grad(y, x), value_error);
  CHECK_THROWS_AS(autograd::grad(y, x, M(filled<2>({3, 2}, 0, 1))), shape_error);
  // forward mode through a create_graph gradient (refused before 2026-11-28): the tangent of
  // d sum(a^3) / da = 3 a^2 along t is 6 a t
  const M a0 = filled<2>({2, 3}, 0.5, 1.5), t0 = filled<2>({2, 3}, 0, 1);
  auto [g3, hv] = tenet::jvp([](const M& a) { return autograd::grad(S0(sum(a * a * a)), a, {.create_graph = true}); },
                             std::make_tuple(a0), std::make_tuple(t0));
  for (std::int64_t i = 0; i < 6; ++i) {
    CHECK(g3.data()[i] == Approx(3 * a0.data()[i] * a0.data()[i]));
    CHECK(hv.data()[i] == Approx(6 * a0.data()[i] * t0.data()[i]));
  }
}


TEST_CASE("autograd second order: a saved tensor changed in place between the backwards", "[autograd]") {
  // as torch 2.15: x changed under no_grad after the create_graph backward (the gradient's graph
  // reads x) or before it (the forward's graph reads x): value_error, not a gradient at the new x
  auto changed = [](const std::string& msg) {
    return msg.find("modified by an inplace operation") != std::string::npos &&
           msg.find("saved at version 0, now version 1") != std::string::npos;
  };
  M x = filled<2>({2, 3}, 0.5, 1.5);
  x.requires_grad_();
  S0 f = sum(x * x * x);
  const M g = autograd::grad(f, x, {.create_graph = true});
  {
    no_grad off;
    x.mul_(2.0);
  }
  std::string msg;
  try {
    (void)autograd::grad(S0(sum(g)), x);
  } catch (const value_error& e) {
    msg = e.what();
  }
  CHECK(changed(msg));
  M x2 = filled<2>({2, 3}, 0.5, 1.5);
  x2.requires_grad_();
  S0 f2 = sum(x2 * x2 * x2);
  {
    no_grad off;
    x2.mul_(2.0);
  }
  msg.clear();
  try {
    (void)autograd::grad(f2, x2, {.create_graph = true});
  } catch (const value_error& e) {
    msg = e.what();
  }
  CHECK(changed(msg));
  // unchanged: 6x, the second derivative of sum(x^3) summed once
  M x3 = filled<2>({2, 3}, 0.5, 1.5);
  x3.requires_grad_();
  const M g3 = autograd::grad(S0(sum(x3 * x3 * x3)), x3, {.create_graph = true});
  const M h3 = autograd::grad(S0(sum(g3)), x3);
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) CHECK(h3(i, j) == Approx(6.0 * x3(i, j)).epsilon(1e-12));
}
