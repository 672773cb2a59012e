// func::jacrev / func::jacfwd with func::batching (include/tenet/func.hpp): every row / column of
// the Jacobian in one batched pass through vmap's batching rules. Each is checked against the
// unbatched transform (one pass per row / column: the same type, the same values up to float
// reassociation) and against torch.func (tests/reference/gen_func_batching.py). The Hessian and
// the transforms composed are in test_autograd_second_func_batching.cpp (TENET_AUTOGRAD=2).
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

// the functions of gen_func_batching.py: an output of rank 2 and one of rank 0
auto r2 = [](const auto& x, const auto& w) {
  return tanh(matmul(w, x).template unsqueeze<-1>() * x.template unsqueeze<0>()) + sin(w) * sum(x);
};
auto s0 = [](const auto& x, const auto& w) { return sum(pow(tanh(matmul(w, x)), 2.0)) + sum(x * x * x) / 3.0; };

template <class...>
struct show;
template <class A, class B>
void same_type(const A&, const B&) {
  if constexpr (!std::is_same_v<A, B>) show<A, B> s;
}
}  // namespace

TEST_CASE("jacrev / jacfwd with func::batching: argnums, output ranks 2 and 0, against torch.func", "[func]") {
  const auto& c = get_case("func_batching.txt", "r2");
  const X4 x = make<double, shape<4>>(c.at("x"));
  const W34 w = make<double, shape<3, 4>>(c.at("w"));
  auto both = func::argnums<0, 1>;
  auto [rx, rw] = func::jacrev(r2, both, func::batching)(x, w);
  auto [fx, fw] = func::jacfwd(r2, both, func::batching)(x, w);
  auto [ux, uw] = func::jacrev(r2, both)(x, w);
  static_assert(std::is_same_v<decltype(rx), Tensor<double, shape<3, 4, 4>>>);
  static_assert(std::is_same_v<decltype(rw), Tensor<double, shape<3, 4, 3, 4>>>);
  same_type(fx, ux);
  same_type(fw, uw);
  check_close(rx, c.at("jx"));
  check_close(rw, c.at("jw"));
  check_close(fx, c.at("jx"));
  check_close(fw, c.at("jw"));
  CHECK(max_diff(rx, ux) < 1e-14);
  CHECK(max_diff(rw, uw) < 1e-14);
  CHECK(max_diff(fx, ux) < 1e-14);
  CHECK(max_diff(fw, uw) < 1e-14);
  CHECK_FALSE(rx.requires_grad());
  CHECK_FALSE(fw.requires_grad());
  // one argnum (argument 1: the weight), the other argument as it is
  auto jw1 = func::jacrev(r2, func::argnums<1>, func::batching)(x, w);
  auto jw2 = func::jacfwd(r2, func::argnums<1>, func::batching)(x, w);
  same_type(jw1, uw);
  CHECK(max_diff(jw1, uw) < 1e-14);
  CHECK(max_diff(jw2, uw) < 1e-14);

  // a scalar output: the Jacobian is the gradient, of the argument's type
  const auto& c0 = get_case("func_batching.txt", "s0");
  auto [gx, gw] = func::jacrev(s0, both, func::batching)(x, w);
  auto [hx, hw] = func::jacfwd(s0, both, func::batching)(x, w);
  static_assert(std::is_same_v<decltype(gx), X4> && std::is_same_v<decltype(hw), W34>);
  check_close(gx, c0.at("gx"));
  check_close(gw, c0.at("gw"));
  check_close(hx, c0.at("gx"));
  check_close(hw, c0.at("gw"));
}

TEST_CASE("jacrev / jacfwd with func::batching: has_aux, run-time shapes, unused arguments", "[func]") {
  const auto& c = get_case("func_batching.txt", "r2");
  const X4 x = make<double, shape<4>>(c.at("x"));
  const W34 w = make<double, shape<3, 4>>(c.at("w"));
  // has_aux: the aux of f without vmap, detached
  auto with_aux = [&](const auto& v) { return std::make_pair(r2(v, w), eval(matmul(w, v))); };
  auto [jr, aux_r] = func::jacrev(with_aux, func::has_aux, func::batching)(x);
  auto [jf, aux_f] = func::jacfwd(with_aux, func::has_aux, func::batching)(x);
  static_assert(std::is_same_v<decltype(aux_r), Tensor<double, shape<3>>>);
  check_close(jr, c.at("jx"));
  check_close(jf, c.at("jx"));
  check_close(aux_r, c.at("aux"));
  check_close(aux_f, c.at("aux"));
  CHECK_FALSE(aux_r.requires_grad());
  auto [jr2, aux2] = func::jacrev(with_aux, func::argnums<0>, func::has_aux, func::batching)(x);
  CHECK(max_diff(jr2, jr) == 0);
  CHECK(max_diff(aux2, aux_r) == 0);

  // run-time extents: the batch size comes from one run of f without vmap
  const Tensor<double, dyn_shape<1>> xd = x;
  const Tensor<double, dyn_shape<2>> wd = w;
  auto [dx, dw] = func::jacrev(r2, func::argnums<0, 1>, func::batching)(xd, wd);
  auto [ex, ew] = func::jacfwd(r2, func::argnums<0, 1>, func::batching)(xd, wd);
  static_assert(std::is_same_v<decltype(dw), Tensor<double, dyn_shape<4>>>);
  CHECK(dw.sizes() == sizes_t<4>{3, 4, 3, 4});
  check_close(dx, c.at("jx"));
  check_close(dw, c.at("jw"));
  check_close(ex, c.at("jx"));
  check_close(ew, c.at("jw"));

  // an argument f does not read: a zero block; an output that reads no differentiated argument: zeros
  auto only_w = [](const auto& v, const auto& m) { return tanh(m) * 2.0 + sum(v * 0.0) * 0.0; };
  auto g = [](const auto&, const auto& m) { return tanh(m); };
  auto [zx, zw] = func::jacrev(g, func::argnums<0, 1>, func::batching)(x, w);
  auto [ux, uw] = func::jacrev(g, func::argnums<0, 1>)(x, w);
  same_type(zx, ux);
  CHECK(max_diff(zx, ux) == 0);
  CHECK(max_diff(zw, uw) < 1e-15);
  auto [fzx, fzw] = func::jacfwd(g, func::argnums<0, 1>, func::batching)(x, w);
  CHECK(max_diff(fzx, ux) == 0);
  CHECK(max_diff(fzw, uw) < 1e-15);
  auto zr = func::jacrev(g, func::batching)(x, w);
  auto zf = func::jacfwd(g, func::batching)(x, w);
  CHECK(max_diff(zr, ux) == 0);
  CHECK(max_diff(zf, ux) == 0);
  auto ow = func::jacrev(only_w, func::argnums<1>, func::batching)(x, w);
  CHECK(max_diff(ow, decltype(uw)(uw * 2.0)) < 1e-15);

  // a differentiated argument that is not a floating tensor: the same compile-time error as
  // without batching (func_grad_nonscalar.cpp's kind); sizes in the wrong type: a shape error
  CHECK_THROWS_AS(func::jacrev(r2, func::argnums<0, 1>, func::batching)(xd, Tensor<double, dyn_shape<2>>(zeros<double, shape<3, 5>>())),
                  shape_error);
}
