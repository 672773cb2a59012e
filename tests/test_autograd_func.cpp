// tenet::func in a program built with TENET_AUTOGRAD=1 (the default): first-order transforms in
// float32 and float64, and the clear error where a transform would have to record its backward
// (an enclosing level differentiates through it), which needs TENET_AUTOGRAD=2. Composition and
// torch.func's values: test_autograd_second_func.cpp.
#include "func_models.hpp"
#include "gradcheck.hpp"
#include "reference.hpp"

using namespace tenet;
using tenet_test::max_diff;

namespace {
template <class T, class S>
Tensor<T, S> ramp(double lo, double step) {
  Tensor<T, S> t = zeros<T, S>();
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<T>(lo + step * static_cast<double>(i));
  return t;
}
}  // namespace

TEMPLATE_TEST_CASE("func first order: grad, vjp, jvp, jacrev, jacfwd agree with each other and with calculus",
                   "[func]", float, double) {
  using T = TestType;
  using X = Tensor<T, shape<2, 3>>;
  const X x = ramp<T, shape<2, 3>>(-0.7, 0.3);
  const double tol = std::is_same_v<T, float> ? 2e-6 : 1e-14;
  // grad of sum(x^3 / 3 + sin x) is x^2 + cos x
  auto f = [](const auto& a) { return sum(pow(a, T(3)) / T(3) + sin(a)); };
  X g = func::grad(f)(x);
  CHECK(max_diff(g, X(pow(x, T(2)) + cos(x))) < tol * 4);
  // jacrev and jacfwd of an elementwise map are diagonal: d tanh(x)_ij / d x_kl
  auto e = [](const auto& a) { return tanh(a); };
  Tensor<T, shape<2, 3, 2, 3>> jr = func::jacrev(e)(x), jf = func::jacfwd(e)(x);
  CHECK(max_diff(jr, jf) < tol);
  const X d = X(T(1) - pow(tanh(x), T(2)));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k)
        for (int l = 0; l < 3; ++l)
          CHECK(static_cast<double>(jr(i, j, k, l)) == Approx(i == k && j == l ? static_cast<double>(d(i, j)) : 0.0).margin(tol));
  // vjp and jvp are the Jacobian's products; the output of f (a 1-D view) keeps its shape type
  auto m = [](const auto& a) { return sum<1>(a * a); };  // (2, 3) -> (2)
  auto [y, vjp_fn] = func::vjp(m, x);
  static_assert(std::is_same_v<decltype(y), Tensor<T, shape<2>>>);
  Tensor<T, shape<2>> ct = ramp<T, shape<2>>(0.5, 1.0);
  auto [vx] = vjp_fn(ct);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(static_cast<double>(vx(i, j)) == Approx(2.0 * x(i, j) * ct(i)).margin(tol));
  const X t = ramp<T, shape<2, 3>>(0.2, -0.1);
  auto [y2, jt] = func::jvp(m, std::make_tuple(x), std::make_tuple(t));
  for (int i = 0; i < 2; ++i) {
    double want = 0;
    for (int j = 0; j < 3; ++j) want += 2.0 * x(i, j) * t(i, j);
    CHECK(static_cast<double>(jt(i)) == Approx(want).margin(tol * 4));
  }
  CHECK_FALSE(y.requires_grad());
  CHECK_FALSE(jt.requires_grad());
  // empty arguments: an empty Jacobian and an empty gradient, not an error
  Tensor<T, dyn_shape<1>> none({0});
  auto je = func::jacrev([](const auto& a) { return a * T(2); })(none);
  CHECK(je.sizes() == sizes_t<2>{0, 0});
  CHECK(func::grad([](const auto& a) { return sum(a); })(none).numel() == 0);
}

TEST_CASE("func first order: errors", "[func]") {
  using X = Tensor<double, dyn_shape<1>>;
  X x3({3});
  x3.fill_(0.5);
  auto f = [](const auto& a) { return a * a; };
  // a tangent or cotangent of other sizes
  CHECK_THROWS_AS(func::jvp(f, std::make_tuple(x3), std::make_tuple(X({4}))), shape_error);
  auto [y, vjp_fn] = func::vjp(f, x3);
  CHECK_THROWS_AS(vjp_fn(X({2})), shape_error);
  // an undefined argument
  CHECK_THROWS_AS(func::grad([](const auto& a) { return sum(a); })(X()), value_error);
  // differentiating through a transform needs a recorded backward: TENET_AUTOGRAD=2, refused here
  X p = x3.clone();
  p.requires_grad_();
  try {
    (void)func::grad([](const auto& a) { return sum(a * a); })(p);
    FAIL("no error");
  } catch (const value_error& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("TENET_AUTOGRAD=2") && Catch::Matchers::Contains("no_grad"));
  }
  // a captured parameter that requires grad, too
  CHECK_THROWS_AS(func::grad([&](const auto& a) { return sum(a * p); })(x3), value_error);
  // under no_grad both work, and nothing is tracked
  no_grad off;
  X g = func::grad([](const auto& a) { return sum(a * a); })(p);
  CHECK(max_diff(g, X(x3 * 2.0)) == 0);
  X g2 = func::grad([&](const auto& a) { return sum(a * p); })(x3);
  CHECK(max_diff(g2, p) == 0);
  CHECK_FALSE(g2.requires_grad());
}

namespace {
using mlp = tenet_test::tanh_mlp;
}  // namespace

TEST_CASE("func::functional_call and func::grad over a module's parameters (tensor_map)", "[func]") {
  manual_seed(5);
  mlp model;
  const Tensor<double, shape<3, 4>> x = ramp<double, shape<3, 4>>(-1.0, 0.17);
  auto loss = [&](const func::tensor_map& p, const auto& xx) {
    return sum(pow(func::functional_call(model, p, xx), 2.0));
  };
  const func::tensor_map params = func::parameters(model);
  CHECK(params.names() == std::vector<std::string>{"a.weight", "a.bias", "b.weight", "b.bias"});
  func::tensor_map g = func::grad(loss)(params, x);
  // ordinary autograd on the module itself gives the same gradients
  Tensor<double, shape<>> l = sum(pow(model(x), 2.0));
  l.backward();
  CHECK(max_diff(g.get<double, shape<5, 4>>("a.weight"), model.a.weight.grad()) < 1e-14);
  CHECK(max_diff(g.get<double, shape<5>>("a.bias"), model.a.bias.grad()) < 1e-14);
  CHECK(max_diff(g.get<double, shape<2, 5>>("b.weight"), model.b.weight.grad()) < 1e-14);
  CHECK(max_diff(g.get<double, shape<2>>("b.bias"), model.b.bias.grad()) < 1e-14);
  CHECK_FALSE(g.get<double, shape<5, 4>>("a.weight").requires_grad());
  // grad_and_value with two argnums: (params, x)
  auto [gs, value] = func::grad_and_value(loss, func::argnums<0, 1>)(params, x);
  CHECK(value() == Approx(l()));
  CHECK(max_diff(std::get<0>(gs).get<double, shape<2>>("b.bias"), model.b.bias.grad()) < 1e-14);
  // d loss / d x by ordinary autograd on a tracked copy of x
  Tensor<double, shape<3, 4>> xt = x.clone();
  xt.requires_grad_();
  Tensor<double, shape<>> lx = sum(pow(model(xt), 2.0));
  CHECK(max_diff(std::get<1>(gs), autograd::grad(lx, xt)) < 1e-14);
  // other values: the output follows them, and the module's own tensors are back afterwards
  func::tensor_map zero_w = params;
  zero_w.set("b.weight", zeros<double, shape<2, 5>>());
  Tensor<double, shape<3, 2>> out = func::functional_call(model, zero_w, x);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) CHECK(out(i, j) == model.b.bias(j));
  CHECK(model.b.weight.requires_grad());
  CHECK(max_diff(Tensor<double, shape<3, 2>>(model(x)), Tensor<double, shape<3, 2>>(func::functional_call(model, params, x))) == 0);
  // errors: a name the module lacks, another dtype or shape type; a view of another shape type converts
  func::tensor_map bad;
  bad.set("c.weight", zeros<double, shape<2, 5>>());
  CHECK_THROWS_WITH(func::functional_call(model, bad, x), Catch::Matchers::Contains("no parameter or buffer named \"c.weight\"") &&
                                                            Catch::Matchers::Contains("a.weight"));
  func::tensor_map f32;
  f32.set("b.weight", zeros<float, shape<2, 5>>());
  CHECK_THROWS_AS(func::functional_call(model, f32, x), dtype_error);
  func::tensor_map sized;
  sized.set("b.bias", Tensor<double, shape<2>>(zeros<double, dyn_shape<1>>(2)));
  CHECK_NOTHROW(func::functional_call(model, sized, x));
  using F2 = shape<2>;
  CHECK_THROWS_AS((g.get<float, F2>("b.bias")), dtype_error);
  CHECK_THROWS_AS((g.get<double, F2>("nope")), value_error);
}

TEST_CASE("func::vmap: mapping, in_dims / out_dims, tuples, nesting, randomness and errors", "[func]") {
  using X = Tensor<double, shape<6, 4>>;
  const X x = ramp<double, shape<6, 4>>(-1.1, 0.1);
  // per-row sum of squares: the batch extent (static 6) is kept in the type
  auto rows = func::vmap([](const auto& r) { return sum(r * r); })(x);
  static_assert(std::is_same_v<decltype(rows), Tensor<double, shape<6>>>);
  const Tensor<double, shape<6>> want = sum<1>(x * x);
  CHECK(max_diff(rows, want) < 1e-15);
  // in_dims: map dim 1 of x, leave w unmapped; out_dims<1>: the batch becomes dim 1
  const Tensor<double, shape<3, 6>> w = ramp<double, shape<3, 6>>(0.3, -0.05);
  auto cols = func::vmap([](const auto& c, const auto& m) { return matmul(m, c); }, func::in_dims<1, func::none>,
                         func::out_dims<1>)(x, w);  // c: column k of x (6), m: w (3, 6)
  static_assert(std::is_same_v<decltype(cols), Tensor<double, shape<3, 4>>>);
  CHECK(max_diff(cols, Tensor<double, shape<3, 4>>(matmul(w, x))) < 1e-14);
  // a pair of outputs, each stacked
  auto [s1, s2] = func::vmap([](const auto& r) { return std::make_pair(sum(r), r * 2.0); })(x);
  CHECK(max_diff(s1, Tensor<double, shape<6>>(sum<1>(x))) < 1e-15);
  CHECK(max_diff(s2, X(x * 2.0)) == 0);
  // nested: vmap(vmap(f)) maps both dims
  auto both = func::vmap(func::vmap([](const auto& e) { return e * e + 1.0; }))(x);
  static_assert(std::is_same_v<decltype(both), X>);
  CHECK(max_diff(both, X(x * x + 1.0)) == 0);
  // run-time batch extents
  Tensor<double, dyn_shape<2>> xd = x;
  auto rd = func::vmap([](const auto& r) { return sum(r); })(xd);
  static_assert(std::is_same_v<decltype(rd), Tensor<double, shape<dyn>>>);
  CHECK(rd.sizes()[0] == 6);
  // grad of a vmap: ordinary autograd through the stacked result
  X xt = x.clone();
  xt.requires_grad_();
  Tensor<double, shape<>> l = sum(func::vmap([](const auto& r) { return sum(r * r * r); })(xt));
  l.backward();
  CHECK(max_diff(xt.grad(), X(x * x * 3.0)) < 1e-14);

  // randomness: an error by default, each sample its own draws, or one draw for all
  auto noisy = [](const auto& r) { return r * 0.0 + randn<double, shape<4>>(); };  // the draws themselves
  CHECK_THROWS_WITH(func::vmap(noisy)(x), Catch::Matchers::Contains("randomness"));
  auto diff = func::vmap(noisy, {.randomness = func::randomness::different})(x);
  auto same = func::vmap(noisy, {.randomness = func::randomness::same})(x);
  const X d = diff, sm = same;
  CHECK(d(0, 0) != d(1, 0));
  for (int i = 1; i < 6; ++i)
    for (int j = 0; j < 4; ++j) CHECK(sm(i, j) == sm(0, j));
  // errors: batch sizes that differ, nothing mapped, an empty batch, a data-dependent shape
  const Tensor<double, shape<5, 4>> x5 = zeros<double, shape<5, 4>>();
  CHECK_THROWS_WITH(func::vmap([](const auto& a, const auto& b) { return a + b; })(x, x5),
                    Catch::Matchers::Contains("argument 0: 6, argument 1: 5"));
  CHECK_THROWS_AS(func::vmap([](const auto& a) { return a; }, func::in_dims<func::none>)(x), value_error);
  CHECK_THROWS_AS(func::vmap([](const auto& a) { return a; })(Tensor<double, dyn_shape<2>>({0, 3})), value_error);
  auto ragged = [](const auto& r) {
    const std::int64_t k = r(0) > -0.5 ? 2 : 1;
    return Tensor<double, shape<dyn>>(r.template narrow<0>(0, k));
  };
  CHECK_THROWS_WITH(func::vmap(ragged)(x), Catch::Matchers::Contains("data-dependent"));
  CHECK_THROWS_AS(func::vmap([](const auto& a) { return a; }, {.chunk_size = -1})(x), value_error);
}

TEST_CASE("func::vmap(grad(f)): per-sample gradients against torch.func", "[func]") {
  const auto& c = tenet_test::get_case("func.txt", "per_sample");
  const auto w1 = tenet_test::make<double, shape<5, 4>>(c.at("w1"));
  const auto b1 = tenet_test::make<double, shape<5>>(c.at("b1"));
  const auto w2 = tenet_test::make<double, shape<3, 5>>(c.at("w2"));
  const auto b2 = tenet_test::make<double, shape<3>>(c.at("b2"));
  const auto xs = tenet_test::make<double, shape<6, 4>>(c.at("x"));
  const auto ys = tenet_test::make<std::int64_t, shape<6>>(c.at("y"));
  auto loss = [](const auto& a1, const auto& c1, const auto& a2, const auto& c2, const auto& x, const auto& y) {
    return cross_entropy(linear(tanh(linear(x.template unsqueeze<0>(), a1, c1)), a2, c2), y.template unsqueeze<0>());
  };
  auto per_sample = func::vmap(func::grad(loss, func::argnums<0, 1, 2, 3>),
                               func::in_dims<func::none, func::none, func::none, func::none, 0, 0>);
  auto [g1, g2, g3, g4] = per_sample(w1, b1, w2, b2, xs, ys);
  static_assert(std::is_same_v<decltype(g1), Tensor<double, shape<6, 5, 4>>>);
  tenet_test::check_close(g1, c.at("gw1"));
  tenet_test::check_close(g2, c.at("gb1"));
  tenet_test::check_close(g3, c.at("gw2"));
  tenet_test::check_close(g4, c.at("gb2"));
}

TEST_CASE("func::stack_module_state + vmap: three models run as one ensemble", "[func]") {
  manual_seed(11);
  std::array<mlp, 3> models;  // different random weights each
  const Tensor<double, shape<5, 4>> x = ramp<double, shape<5, 4>>(-0.8, 0.07);
  auto [params, buffers] = func::stack_module_state(models);
  CHECK(buffers.empty());
  CHECK(params.names() == std::vector<std::string>{"a.weight", "a.bias", "b.weight", "b.bias"});
  CHECK(params.at("a.weight")->sizes() == std::vector<std::int64_t>{3, 5, 4});
  const auto stacked_w = params.value("a.weight").as<double, shape<3, 5, 4>>();  // a CPU copy of the stack
  CHECK(max_diff(Tensor<double, shape<5, 4>>(stacked_w.select<0>(2)), models[2].a.weight) == 0);
  // a stacked map is mapped, not differentiated
  CHECK_THROWS_AS(func::grad([](const func::tensor_map&) { return zeros<double, shape<>>(); })(params), value_error);
  mlp base;  // its own weights are replaced by each model's in turn
  auto run = [&](const func::tensor_map& p, const auto& xx) { return func::functional_call(base, p, xx); };
  // the same input for every model, and one input per model
  auto ys = func::vmap(run, func::in_dims<0, func::none>)(params, x);
  static_assert(std::is_same_v<decltype(ys), Tensor<double, shape<dyn, 5, 2>>>);
  Tensor<double, shape<3, 5, 4>> xs = zeros<double, shape<3, 5, 4>>();
  for (int k = 0; k < 3; ++k) xs.select<0>(k).copy_(x * (1.0 + k));
  auto ys2 = func::vmap(run)(params, xs);
  for (int k = 0; k < 3; ++k) {
    const Tensor<double, shape<5, 2>> want = models[static_cast<std::size_t>(k)](x);
    const Tensor<double, shape<5, 2>> want2 = models[static_cast<std::size_t>(k)](Tensor<double, shape<5, 4>>(x * (1.0 + k)));
    CHECK(max_diff(Tensor<double, shape<5, 2>>(ys.select<0>(k)), want) < 1e-14);
    CHECK(max_diff(Tensor<double, shape<5, 2>>(ys2.select<0>(k)), want2) < 1e-14);
  }
  // models of other parameter shapes cannot be stacked; a map of mixed first extents cannot be mapped
  struct other : nn::Module {
    nn::Linear<4, 6, true, double> a;
    nn::Linear<6, 2, true, double> b;
    other() {
      register_module("a", a);
      register_module("b", b);
    }
  };
  std::array<other, 1> o;
  std::vector<const nn::Module*> mixed{&models[0], &o[0]};
  CHECK_THROWS_AS(func::stack_module_state(mixed), dtype_error);
  func::tensor_map ragged = params;
  ragged.set("b.bias", zeros<double, shape<2, 2>>());
  CHECK_THROWS_WITH(func::vmap(run, func::in_dims<0, func::none>)(ragged, x), Catch::Matchers::Contains("first extents"));
}
