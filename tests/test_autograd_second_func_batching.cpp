// func::hessian with func::batching (one batched reverse-over-reverse pass) against the unbatched
// hessian and torch.func (tests/reference/gen_func_batching.py), and the batched jacrev / jacfwd
// inside an enclosing transform (their steps recorded). Built with TENET_AUTOGRAD=2
// (tenet_autograd2_tests); the first-order batched Jacobians are in test_autograd_func_jacobians.cpp.
#include "gradcheck.hpp"
#include "reference.hpp"

using namespace tenet;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;
using tenet_test::max_diff;

namespace {
using X4 = Tensor<double, shape<4>>;
using W34 = Tensor<double, shape<3, 4>>;

// the functions of gen_func_batching.py
auto r2 = [](const auto& x, const auto& w) {
  return tanh(matmul(w, x).template unsqueeze<-1>() * x.template unsqueeze<0>()) + sin(w) * sum(x);
};
auto s0 = [](const auto& x, const auto& w) { return sum(pow(tanh(matmul(w, x)), 2.0)) + sum(x * x * x) / 3.0; };
}  // namespace

TEST_CASE("hessian with func::batching against torch.func and the unbatched hessian", "[func]") {
  const auto& c = get_case("func_batching.txt", "r2");
  const auto& c0 = get_case("func_batching.txt", "s0");
  const X4 x = make<double, shape<4>>(c.at("x"));
  const W34 w = make<double, shape<3, 4>>(c.at("w"));
  // several argnums: the nested tuple of blocks
  auto [row0, row1] = func::hessian(s0, func::argnums<0, 1>, func::batching)(x, w);
  auto [hxx, hxw] = row0;
  auto [hwx, hww] = row1;
  static_assert(std::is_same_v<decltype(hxw), Tensor<double, shape<4, 3, 4>>>);
  static_assert(std::is_same_v<decltype(hwx), Tensor<double, shape<3, 4, 4>>>);
  check_close(hxx, c0.at("hxx"));
  check_close(hxw, c0.at("hxw"));
  check_close(hwx, c0.at("hwx"));
  check_close(hww, c0.at("hww"));
  CHECK_FALSE(hww.requires_grad());
  auto [u0, u1] = func::hessian(s0, func::argnums<0, 1>)(x, w);
  CHECK(max_diff(hxx, std::get<0>(u0)) < 1e-13);
  CHECK(max_diff(hww, std::get<1>(u1)) < 1e-13);
  // one argnum, the other argument as it is
  auto h1 = func::hessian(s0, func::batching)(x, w);
  static_assert(std::is_same_v<decltype(h1), Tensor<double, shape<4, 4>>>);
  check_close(h1, c0.at("hxx"));
  // an output of rank 2: shape f(x) ++ x ++ x
  auto hr = func::hessian([&](const auto& v) { return r2(v, w); }, func::batching)(x);
  auto ur = func::hessian([&](const auto& v) { return r2(v, w); })(x);
  static_assert(std::is_same_v<decltype(hr), Tensor<double, shape<3, 4, 4, 4>>>);
  CHECK(max_diff(hr, ur) < 1e-13);
  // run-time extents
  const Tensor<double, dyn_shape<1>> xd = x;
  auto hd = func::hessian(s0, func::batching)(xd, w);
  static_assert(std::is_same_v<decltype(hd), Tensor<double, dyn_shape<2>>>);
  check_close(hd, c0.at("hxx"));
}

TEST_CASE("batched jacrev / jacfwd inside an enclosing transform and autograd", "[func]") {
  const auto& c = get_case("func_batching.txt", "r2");
  const X4 x = make<double, shape<4>>(c.at("x"));
  const W34 w = make<double, shape<3, 4>>(c.at("w"));
  auto f = [&](const auto& v) { return r2(v, w); };
  // grad of a sum of Jacobian entries: the batched Jacobian's steps are recorded for the outer level
  auto rev_b = func::grad([&](const auto& v) { return sum(pow(func::jacrev(f, func::batching)(v), 2.0)); })(x);
  auto rev_u = func::grad([&](const auto& v) { return sum(pow(func::jacrev(f)(v), 2.0)); })(x);
  CHECK(max_diff(rev_b, rev_u) < 1e-12);
  auto fwd_b = func::grad([&](const auto& v) { return sum(pow(func::jacfwd(f, func::batching)(v), 2.0)); })(x);
  CHECK(max_diff(fwd_b, rev_u) < 1e-12);
  // ordinary autograd through a batched Jacobian, to a captured weight that requires grad
  W34 wt = w.clone();
  wt.requires_grad_();
  auto g = [&](const auto& v) { return r2(v, wt); };
  Tensor<double, shape<>> l = sum(func::jacrev(g, func::batching)(x) * func::jacfwd(g, func::batching)(x));
  l.backward();
  W34 gb = wt.grad();
  wt.set_grad(W34());
  Tensor<double, shape<>> lu = sum(func::jacrev(g)(x) * func::jacfwd(g)(x));
  lu.backward();
  CHECK(max_diff(gb, wt.grad()) < 1e-12);
  CHECK(max_diff(gb, W34(zeros<double, shape<3, 4>>())) > 0.1);
}
