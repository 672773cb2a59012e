// tenet::func (include/tenet/func.hpp) against torch.func (tests/reference/gen_func.py writes
// func.txt), the transforms composed, and their errors. Built with TENET_AUTOGRAD=2
// (tenet_autograd2_tests): composition differentiates recorded backwards.
#include "gradcheck.hpp"
#include "reference.hpp"

using namespace tenet;
using tenet_test::max_diff;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;

namespace {
using X4 = Tensor<double, shape<4>>;
using X5 = Tensor<double, shape<5>>;
using W34 = Tensor<double, shape<3, 4>>;
using Y3 = Tensor<double, shape<3>>;
using S0 = Tensor<double, shape<>>;

struct fixture {
  const tenet_test::ref_case& c = get_case("func.txt", "f");
  X4 x = make<double, shape<4>>(c.at("x"));
  W34 w = make<double, shape<3, 4>>(c.at("w"));
  Y3 b = make<double, shape<3>>(c.at("b"));
};

// the functions of gen_func.py
auto f = [](const auto& x, const auto& w) { return sum(pow(tanh(matmul(w, x)), 2.0)); };
auto h = [](const auto& x) { return sum(exp(-x * x) * sin(x)) + pow(sum(x), 2.0) / 4.0; };
auto k = [](const auto& x) { return sin(x) * pow(x, 3.0); };

}  // namespace

TEST_CASE("func::grad, grad_and_value, has_aux against torch.func", "[func]") {
  fixture fx;
  auto [gx, gw] = func::grad(f, func::argnums<0, 1>)(fx.x, fx.w);
  static_assert(std::is_same_v<decltype(gx), X4> && std::is_same_v<decltype(gw), W34>);
  check_close(gx, fx.c.at("grad_x"));
  check_close(gw, fx.c.at("grad_w"));
  X4 g0 = func::grad(f)(fx.x, fx.w);  // argnums 0 by default: one Tensor
  check_close(g0, fx.c.at("grad_x"));
  auto [gv, value] = func::grad_and_value(f)(fx.x, fx.w);
  check_close(gv, fx.c.at("grad_x"));
  check_close(value, fx.c.at("value"));
  // nothing is accumulated into .grad, and the arguments stay untracked
  CHECK_FALSE(fx.x.requires_grad());
  CHECK_FALSE(gx.requires_grad());
  CHECK_FALSE(value.requires_grad());

  const auto& ca = get_case("func.txt", "aux");
  auto [ga, aux] = func::grad([&](const auto& x) { return std::make_pair(f(x, fx.w), eval(matmul(fx.w, x))); },
                              func::has_aux)(fx.x);
  check_close(ga, ca.at("grad"));
  check_close(aux, ca.at("aux"));
  auto [gva, va] = func::grad_and_value([&](const auto& x) { return std::make_pair(f(x, fx.w), 7); },
                                        func::has_aux)(fx.x);
  check_close(gva, ca.at("grad"));
  CHECK(va.second == 7);

  // an argument f does not use gets zeros, as torch.func
  X4 gz = func::grad([&](const auto&, const auto& w) { return sum(w * w); })(fx.x, fx.w);
  CHECK(max_diff(gz, zeros<double, shape<4>>()) == 0);
}

TEST_CASE("func::vjp, jvp, linearize, jacrev, jacfwd against torch.func", "[func]") {
  fixture fx;
  const auto& cg = get_case("func.txt", "g");
  auto g = [&](const auto& x) { return tanh(matmul(fx.w, x) + fx.b) * matmul(fx.w, x); };
  const Y3 ct = make<double, shape<3>>(cg.at("ct"));
  const X4 t = make<double, shape<4>>(cg.at("t"));

  auto [y, vjp_fn] = func::vjp(g, fx.x);
  static_assert(std::is_same_v<decltype(y), Y3>);
  auto [vx] = vjp_fn(ct);
  check_close(vx, cg.at("vjp"));
  auto [vx2] = vjp_fn(ct);  // again: the graph is kept
  CHECK(max_diff(vx, vx2) == 0);
  CHECK_THROWS_AS(vjp_fn(Tensor<double, shape<3>>(zeros<double, dyn_shape<1>>(2))), shape_error);

  auto [y2, jt] = func::jvp(g, std::make_tuple(fx.x), std::make_tuple(t));
  check_close(jt, cg.at("jvp"));
  CHECK(max_diff(y, y2) == 0);
  auto [y3, jvp_fn] = func::linearize(g, fx.x);
  check_close(jvp_fn(t), cg.at("jvp"));
  check_close(jvp_fn(t), cg.at("jvp"));

  Tensor<double, shape<3, 4>> jr = func::jacrev(g)(fx.x);
  Tensor<double, shape<3, 4>> jf = func::jacfwd(g)(fx.x);
  check_close(jr, cg.at("jac"));
  check_close(jf, cg.at("jac"));
  // has_aux: (jacobian, aux), f run once; the aux is the value f returned, detached
  int calls = 0;
  auto g_aux = [&](const auto& x) {
    ++calls;
    return std::make_pair(g(x), eval(x * 2.0));
  };
  auto [jfa, auxf] = func::jacfwd(g_aux, func::has_aux)(fx.x);
  CHECK(calls == 1);
  auto [jra, auxr] = func::jacrev(g_aux, func::has_aux)(fx.x);
  static_assert(std::is_same_v<decltype(jfa), Tensor<double, shape<3, 4>>>);
  check_close(jfa, cg.at("jac"));
  CHECK(max_diff(jfa, jra) < 1e-12);
  CHECK(max_diff(auxf, X4(fx.x * 2.0)) == 0);
  CHECK(max_diff(auxf, auxr) == 0);
  CHECK_FALSE(auxf.requires_grad());

  // several argnums: one Jacobian block per argument, shape f(x).shape ++ x.shape
  auto gw = [](const auto& x, const auto& w) { return tanh(matmul(w, x)); };
  auto [jx, jw] = func::jacrev(gw, func::argnums<0, 1>)(fx.x, fx.w);
  static_assert(std::is_same_v<decltype(jw), Tensor<double, shape<3, 3, 4>>>);
  auto [fjx, fjw] = func::jacfwd(gw, func::argnums<0, 1>)(fx.x, fx.w);
  CHECK(max_diff(jx, fjx) < 1e-12);
  CHECK(max_diff(jw, fjw) < 1e-12);
  // d tanh(w x)_i / d w_jk = (1 - tanh^2)_i [i == j] x_k
  const Y3 th = tanh(matmul(fx.w, fx.x));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int kk = 0; kk < 4; ++kk)
        CHECK(jw(i, j, kk) == Approx(i == j ? (1 - th(i) * th(i)) * fx.x(kk) : 0.0).margin(1e-14));

  // run-time extents
  Tensor<double, dyn_shape<1>> xd = fx.x;
  Tensor<double, dyn_shape<2>> jd = func::jacrev(g)(xd);
  CHECK(max_diff(jd, jr) < 1e-14);
  CHECK_THROWS_AS(func::jvp(g, std::make_tuple(xd), std::make_tuple(Tensor<double, dyn_shape<1>>({3}))), shape_error);
}

TEST_CASE("func::hessian and compositions against torch.func", "[func]") {
  const auto& ch = get_case("func.txt", "h");
  const X5 x = make<double, shape<5>>(ch.at("x"));
  const X5 v = make<double, shape<5>>(ch.at("v"));
  Tensor<double, shape<5, 5>> hs = func::hessian(h)(x);
  check_close(hs, ch.at("hess"));
  // the same Hessian by reverse over reverse, and by forward over forward
  Tensor<double, shape<5, 5>> hrr = func::jacrev(func::jacrev(h))(x);
  Tensor<double, shape<5, 5>> hff = func::jacfwd(func::jacfwd(h))(x);
  check_close(hrr, ch.at("hess"));
  check_close(hff, ch.at("hess"));
  // Hessian-vector products: forward over reverse, reverse over forward, reverse over reverse
  auto [g1, hvp] = func::jvp(func::grad(h), std::make_tuple(x), std::make_tuple(v));
  check_close(hvp, ch.at("hvp"));
  X5 hvp2 = func::grad([&](const auto& xx) { return func::jvp(h, std::make_tuple(xx), std::make_tuple(v)).second; })(x);
  check_close(hvp2, ch.at("hvp"));
  X5 hvp3 = func::grad([&](const auto& xx) { return sum(func::grad(h)(xx) * v); })(x);
  check_close(hvp3, ch.at("hvp"));
  auto [gg, vjp_fn] = func::vjp(func::grad(h), x);
  check_close(std::get<0>(vjp_fn(v)), ch.at("hvp"));  // the Hessian is symmetric

  const auto& ck = get_case("func.txt", "k");
  const S0 xk = make<double, shape<>>(ck.at("x"));
  check_close(func::grad(k)(xk), ck.at("d1"));
  check_close(func::grad(func::grad(k))(xk), ck.at("d2"));
  // third derivative of sin(x) x^3 by finite differences of the second
  const double e = 1e-5;
  auto d2 = [&](double a) {
    S0 p = zeros<double, shape<>>();
    p.fill_(a);
    return func::grad(func::grad(k))(p)();
  };
  const double d3 = func::grad(func::grad(func::grad(k)))(xk)();
  CHECK(d3 == Approx((d2(xk() + e) - d2(xk() - e)) / (2 * e)).epsilon(1e-6));

  // the Hessian of an MLP-style loss with respect to a matrix: shape (3, 4, 3, 4)
  fixture fx;
  const auto& cl = get_case("func.txt", "loss");
  auto loss = [&](const auto& w) { return f(fx.x, w); };
  Tensor<double, shape<3, 4, 3, 4>> hw = func::hessian(loss)(fx.w);
  check_close(hw, cl.at("hess"));

  // attention's backward has no forward-mode rule: forward over reverse is refused with a message,
  // reverse over reverse works
  using Q = Tensor<double, shape<1, 2, 3>>;
  Q q = zeros<double, shape<1, 2, 3>>();
  for (int i = 0; i < 6; ++i) q.data()[i] = 0.3 * i - 0.7;
  auto att = [](const auto& a) { return sum(pow(scaled_dot_product_attention(a, a, a), 2.0)); };
  CHECK_THROWS_WITH(func::hessian(att)(q), Catch::Matchers::Contains("forward mode through this gradient is not implemented"));
  Tensor<double, shape<1, 2, 3, 1, 2, 3>> ha = func::jacrev(func::jacrev(att))(q);
  CHECK(std::isfinite(ha(0, 1, 2, 0, 1, 2)));
}

TEST_CASE("func: levels keep their variables apart, and ordinary autograd differentiates through them", "[func]") {
  S0 x = zeros<double, shape<>>();
  x.fill_(1.5);
  // d/dx [ d/dy (x * y) at y = x ] = d/dx x = 1 (not 2: the inner level's y is not the outer x)
  const S0 one = func::grad([](const auto& xx) {
    return func::grad([&](const auto& yy) { return xx * yy; })(xx);
  })(x);
  CHECK(one() == Approx(1.0));
  // torch.func.grad inside ordinary autograd: the gradient is differentiable for backward
  X4 p = fixture{}.x.clone();
  p.requires_grad_();
  X4 gp = func::grad([](const auto& q) { return sum(q * q * q); })(p);  // 3 p^2, tracked
  REQUIRE(gp.requires_grad());
  S0 l = sum(gp);
  l.backward();  // d/dp sum(3 p^2) = 6 p
  CHECK(max_diff(p.grad(), X4(p.detach() * 6.0)) < 1e-12);
  // a captured tensor that requires grad: d/dw of (d/dx sum(w x^2)) = 2 x
  S0 wv = zeros<double, shape<>>();
  wv.fill_(3.0);
  wv.requires_grad_();
  X4 x4 = fixture{}.x;
  X4 gx = func::grad([&](const auto& q) { return sum(wv * q * q); })(x4);
  S0 l2 = sum(gx);
  l2.backward();
  CHECK(wv.grad()() == Approx(2.0 * S0(sum(x4))()));
  // differentiating jvp's output with respect to the tangent (the primal untracked): d/dt sum(cos(x) t) = cos(x)
  {
    const X4 xs = fixture{}.x, t0 = X4(fixture{}.x * 0.5);
    X4 dt = func::grad([&](const auto& t) {
      return sum(func::jvp([](const auto& a) { return sin(a); }, std::make_tuple(xs), std::make_tuple(t)).second);
    })(t0);
    CHECK(max_diff(dt, X4(cos(xs))) < 1e-14);
  }
  // under no_grad the result is not tracked
  {
    no_grad off;
    X4 g2 = func::grad([&](const auto& q) { return sum(wv * q * q); })(x4);
    CHECK_FALSE(g2.requires_grad());
  }
}

TEST_CASE("func over a tensor_map inside an enclosing level: jacrev, jacfwd, jvp and vjp stay differentiable",
          "[func]") {
  // p(s) = {w: w * s, b: b * s}; each transform over p(s) is differentiated in s by grad and
  // checked against central differences of the same transform
  const auto& cg = get_case("func_maps.txt", "g");
  const X4 x = make<double, shape<4>>(cg.at("x"));
  const W34 w = make<double, shape<3, 4>>(cg.at("w"));
  const Y3 b = make<double, shape<3>>(cg.at("b"));
  const W34 tw = make<double, shape<3, 4>>(cg.at("t_w"));
  const Y3 tb = make<double, shape<3>>(cg.at("t_b"));
  const Y3 ct = make<double, shape<3>>(cg.at("ct"));
  auto g = [&](const func::tensor_map& p) {
    const W34 pw = p.get<double, shape<3, 4>>("w");
    return Y3(tanh(matmul(pw, x) + p.get<double, shape<3>>("b")) * matmul(pw, x));
  };
  auto map_at = [&](const S0& s) {
    func::tensor_map p;
    p.set("w", W34(w * s));
    p.set("b", Y3(b * s));
    return p;
  };
  func::tensor_map t;
  t.set("w", tw);
  t.set("b", tb);
  // each a scalar function of s through one transform over the map
  auto via_jacrev = [&](const S0& s) {
    const func::tensor_map j = func::jacrev(g)(map_at(s));
    return S0(sum(pow(j.get<double, shape<3, 3, 4>>("w"), 2.0)) + sum(j.get<double, shape<3, 3>>("b") * 0.5));
  };
  auto via_jacfwd = [&](const S0& s) {
    const func::tensor_map j = func::jacfwd(g)(map_at(s));
    return S0(sum(pow(j.get<double, shape<3, 3, 4>>("w"), 2.0)) + sum(j.get<double, shape<3, 3>>("b") * 0.5));
  };
  auto via_jvp = [&](const S0& s) { return S0(sum(pow(func::jvp(g, std::make_tuple(map_at(s)), std::make_tuple(t)).second, 2.0))); };
  auto via_vjp = [&](const S0& s) {
    auto [y, fn] = func::vjp(g, map_at(s));
    auto [vp] = fn(ct);
    return S0(sum(pow(vp.get<double, shape<3, 4>>("w"), 2.0)) + sum(vp.get<double, shape<3>>("b")));
  };
  S0 s0(sizes_t<0>{});
  s0.fill_(0.9);
  const double eps = 1e-6;
  S0 sp = s0.clone(), sm = s0.clone();
  sp.fill_(0.9 + eps);
  sm.fill_(0.9 - eps);
  auto check = [&](const auto& fn, const char* name) {
    INFO(name);
    const S0 d = func::grad(fn)(s0);
    const double fd = (fn(sp)() - fn(sm)()) / (2 * eps);
    CHECK(d() == Approx(fd).epsilon(1e-6));
    CHECK(std::abs(d()) > 1e-3);  // the map's dependence on s is not lost
  };
  check(via_jacrev, "jacrev");
  check(via_jacfwd, "jacfwd");
  check(via_jvp, "jvp");
  check(via_vjp, "vjp");
}

TEST_CASE("func::hessian over several argnums: the nested tuple of blocks, against torch.func", "[func]") {
  // gen_func_maps.py: f(x, w) = sum(tanh(w @ x)^2) and v(x, w) = tanh(w @ x) * x[:3]
  const auto& cg = get_case("func_maps.txt", "g");
  const X4 x = make<double, shape<4>>(cg.at("x"));
  const W34 w = make<double, shape<3, 4>>(cg.at("w"));
  const auto& cf = get_case("func_maps.txt", "hess_f");
  auto [row0, row1] = func::hessian(f, func::argnums<0, 1>)(x, w);
  auto [h00, h01] = row0;
  auto [h10, h11] = row1;
  static_assert(std::is_same_v<decltype(h00), Tensor<double, shape<4, 4>>>);
  static_assert(std::is_same_v<decltype(h01), Tensor<double, shape<4, 3, 4>>>);
  static_assert(std::is_same_v<decltype(h10), Tensor<double, shape<3, 4, 4>>>);
  static_assert(std::is_same_v<decltype(h11), Tensor<double, shape<3, 4, 3, 4>>>);
  check_close(h00, cf.at("h00"), 1e-12, 1e-12);
  check_close(h01, cf.at("h01"), 1e-12, 1e-12);
  check_close(h10, cf.at("h10"), 1e-12, 1e-12);
  check_close(h11, cf.at("h11"), 1e-12, 1e-12);
  CHECK_FALSE(h01.requires_grad());
  // the diagonal blocks are the single-argnum Hessians
  CHECK(max_diff(h00, Tensor<double, shape<4, 4>>(func::hessian(f)(x, w))) < 1e-14);
  CHECK(max_diff(h11, Tensor<double, shape<3, 4, 3, 4>>(func::hessian(f, func::argnums<1>)(x, w))) < 1e-14);
  // a vector output: every block leads with the output's shape
  const auto& cv = get_case("func_maps.txt", "hess_v");
  auto v = [](const auto& xx, const auto& ww) { return tanh(matmul(ww, xx)) * xx.template slice<0>(0, 3); };
  auto [vr0, vr1] = func::hessian(v, func::argnums<0, 1>)(x, w);
  static_assert(std::is_same_v<decltype(std::get<1>(vr1)), Tensor<double, shape<3, 3, 4, 3, 4>>&>);
  check_close(std::get<0>(vr0), cv.at("h00"), 1e-12, 1e-12);
  check_close(std::get<1>(vr0), cv.at("h01"), 1e-12, 1e-12);
  check_close(std::get<0>(vr1), cv.at("h10"), 1e-12, 1e-12);
  check_close(std::get<1>(vr1), cv.at("h11"), 1e-12, 1e-12);
  // three argnums: a 3 x 3 nest; the (0, 2) block against finite differences of grad's x part in b
  const Y3 b = make<double, shape<3>>(cg.at("b"));
  auto fb = [](const auto& xx, const auto& ww, const auto& bb) { return sum(pow(tanh(matmul(ww, xx) + bb), 2.0)); };
  auto h3 = func::hessian(fb, func::argnums<0, 1, 2>)(x, w, b);
  static_assert(std::tuple_size_v<decltype(h3)> == 3 && std::tuple_size_v<std::tuple_element_t<2, decltype(h3)>> == 3);
  const Tensor<double, shape<4, 3>> h02 = std::get<2>(std::get<0>(h3));
  const double eps = 1e-6;
  for (int j = 0; j < 3; ++j) {
    Y3 bp = b.clone(), bm = b.clone();
    bp(j) += eps;
    bm(j) -= eps;
    const X4 gp = func::grad(fb)(x, w, bp), gm = func::grad(fb)(x, w, bm);
    for (int i = 0; i < 4; ++i) CHECK(h02(i, j) == Approx((gp(i) - gm(i)) / (2 * eps)).margin(1e-8));
  }
  // symmetry of the mixed blocks: H10[i, j, k] = H01[k, i, j]
  const Tensor<double, shape<3, 4, 4>> h10b = std::get<0>(std::get<1>(h3));
  const Tensor<double, shape<4, 3, 4>> h01b = std::get<1>(std::get<0>(h3));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 4; ++k) CHECK(h10b(i, j, k) == Approx(h01b(k, i, j)).margin(1e-13));
}
