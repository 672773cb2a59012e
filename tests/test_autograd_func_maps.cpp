// tenet::func over a func::tensor_map argument (jacrev, jacfwd, vjp, jvp, linearize; torch.func's
// dict of tensors) against torch.func (tests/reference/gen_func_maps.py), and vmap's error for an
// in-place write into a tensor it does not map. First order, TENET_AUTOGRAD=1; hessian over
// several argnums is in test_autograd_second_func.cpp.
#include "func_models.hpp"
#include "gradcheck.hpp"
#include "reference.hpp"

using namespace tenet;
using tenet_test::max_diff;

namespace {

using W = Tensor<double, shape<3, 4>>;
using B = Tensor<double, shape<3>>;
using X = Tensor<double, shape<4>>;

const tenet_test::ref_case& ref(const char* name) { return tenet_test::get_case("func_maps.txt", name); }

func::tensor_map map_of(const W& w, const B& b) {
  func::tensor_map p;
  p.set("w", w);
  p.set("b", b);
  return p;
}

// g(p) = tanh(w @ x + b) * (w @ x), as gen_func_maps.py's
auto g_of(const func::tensor_map& p, const X& x) {
  const W w = p.get<double, shape<3, 4>>("w");
  const B b = p.get<double, shape<3>>("b");
  return Tensor<double, shape<3>>(tanh(matmul(w, x) + b) * matmul(w, x));
}

using mlp = tenet_test::tanh_mlp;
}  // namespace

TEST_CASE("func::jacrev / jacfwd over a tensor_map: a map of blocks f(x).shape ++ tensor.shape, as torch.func",
          "[func]") {
  const auto& c = ref("g");
  const X x = tenet_test::make<double, shape<4>>(c.at("x"));
  const func::tensor_map p = map_of(tenet_test::make<double, shape<3, 4>>(c.at("w")), tenet_test::make<double, shape<3>>(c.at("b")));
  auto g = [&](const func::tensor_map& q) { return g_of(q, x); };
  const func::tensor_map jr = func::jacrev(g)(p), jf = func::jacfwd(g)(p);
  CHECK(jr.names() == std::vector<std::string>{"w", "b"});
  CHECK(jf.names() == std::vector<std::string>{"w", "b"});
  tenet_test::check_close(jr.get<double, shape<3, 3, 4>>("w"), c.at("jac_w"), 1e-12, 1e-12);
  tenet_test::check_close(jr.get<double, shape<3, 3>>("b"), c.at("jac_b"), 1e-12, 1e-12);
  tenet_test::check_close(jf.get<double, shape<3, 3, 4>>("w"), c.at("jac_w"), 1e-12, 1e-12);
  tenet_test::check_close(jf.get<double, shape<3, 3>>("b"), c.at("jac_b"), 1e-12, 1e-12);
  CHECK_FALSE(jr.get<double, shape<3, 3, 4>>("w").requires_grad());
  CHECK_FALSE(jf.get<double, shape<3, 3>>("b").requires_grad());
  // the entries' sizes and values (detached, any_tensor) read without naming the type
  CHECK(jr.at("w")->sizes() == std::vector<std::int64_t>{3, 3, 4});
  CHECK(jr.value("b").sizes() == std::vector<std::int64_t>{3, 3});
  CHECK(static_cast<const double*>(jr.value("b").raw_data())[4] == jr.get<double, shape<3, 3>>("b")(1, 1));
  // dyn extents fit; another rank or static extent is a dtype_error naming the block's sizes
  CHECK(max_diff(jr.get<double, dyn_shape<3>>("w"), jr.get<double, shape<3, 3, 4>>("w")) == 0);
  CHECK_THROWS_WITH((jr.get<double, shape<3, 4>>("w")), Catch::Matchers::Contains("Jacobian block of sizes shape<3, 3, 4> (shape<3> ++ shape<3, 4>)"));
  CHECK_THROWS_AS((jr.get<double, shape<3, 3, 5>>("w")), dtype_error);
  CHECK_THROWS_AS((jr.get<float, shape<3, 3, 4>>("w")), dtype_error);

  // an output of rank 2: blocks of shape (2, 3) ++ the tensor's
  const auto& cm = ref("m");
  auto m = [&](const func::tensor_map& q) {
    const W w = q.get<double, shape<3, 4>>("w");
    const B b = q.get<double, shape<3>>("b");
    return Tensor<double, shape<2, 3>>(cat<0>(std::vector<Tensor<double, shape<1, 3>>>{
        (tanh(matmul(w, x) + b)).template unsqueeze<0>(), (pow(matmul(w, x), 2.0)).template unsqueeze<0>()}));
  };
  const func::tensor_map jm = func::jacrev(m)(p), jmf = func::jacfwd(m)(p);
  tenet_test::check_close(jm.get<double, shape<2, 3, 3, 4>>("w"), cm.at("jac_w"), 1e-12, 1e-12);
  tenet_test::check_close(jm.get<double, shape<2, 3, 3>>("b"), cm.at("jac_b"), 1e-12, 1e-12);
  tenet_test::check_close(jmf.get<double, shape<2, 3, 3, 4>>("w"), cm.at("jac_w"), 1e-12, 1e-12);
  tenet_test::check_close(jmf.get<double, shape<2, 3, 3>>("b"), cm.at("jac_b"), 1e-12, 1e-12);

  // a tensor_map and a Tensor together (argnums): (map of blocks, the Tensor's block)
  const auto& cx = ref("mixed");
  auto [jp, jx] = func::jacrev(g_of, func::argnums<0, 1>)(p, x);
  static_assert(std::is_same_v<decltype(jx), Tensor<double, shape<3, 4>>>);
  tenet_test::check_close(jp.get<double, shape<3, 3, 4>>("w"), cx.at("jac_w"), 1e-12, 1e-12);
  tenet_test::check_close(jp.get<double, shape<3, 3>>("b"), cx.at("jac_b"), 1e-12, 1e-12);
  tenet_test::check_close(jx, cx.at("jac_x"), 1e-12, 1e-12);
  auto [jpf, jxf] = func::jacfwd(g_of, func::argnums<0, 1>)(p, x);
  CHECK(max_diff(jpf.get<double, shape<3, 3, 4>>("w"), jp.get<double, shape<3, 3, 4>>("w")) < 1e-14);
  CHECK(max_diff(jxf, jx) < 1e-14);
}

TEST_CASE("func::jacrev / jacfwd over a tensor_map agree with grad over it and with the per-tensor Jacobian",
          "[func]") {
  manual_seed(11);
  mlp model;
  const Tensor<double, shape<3, 4>> x = randn<double, shape<3, 4>>();
  const func::tensor_map params = func::parameters(model);
  auto out = [&](const func::tensor_map& p) { return func::functional_call(model, p, x); };  // (3, 2)
  const func::tensor_map jr = func::jacrev(out)(params), jf = func::jacfwd(out)(params);
  CHECK(jr.names() == params.names());
  // the block of "a.weight" is the Jacobian of the same function of that one Tensor
  auto of_a = [&](const Tensor<double, shape<5, 4>>& aw) {
    func::tensor_map p = params;
    p.set("a.weight", aw);
    return func::functional_call(model, p, x);
  };
  const Tensor<double, shape<3, 2, 5, 4>> want = func::jacrev(of_a)(params.get<double, shape<5, 4>>("a.weight"));
  CHECK(max_diff(jr.get<double, shape<3, 2, 5, 4>>("a.weight"), want) < 1e-14);
  CHECK(max_diff(jf.get<double, shape<3, 2, 5, 4>>("a.weight"), want) < 1e-13);
  CHECK(max_diff(jf.get<double, shape<3, 2, 2>>("b.bias"), jr.get<double, shape<3, 2, 2>>("b.bias")) < 1e-13);
  // b.bias enters each row once: its block is the identity on the output's column
  const auto jb = jr.get<double, shape<3, 2, 2>>("b.bias");
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k) CHECK(jb(i, j, k) == (j == k ? 1.0 : 0.0));
  // a scalar f: the Jacobian blocks are grad's gradients (shape<> ++ the tensor's shape)
  auto loss = [&](const func::tensor_map& p) { return sum(pow(out(p), 2.0)); };
  const func::tensor_map gr = func::grad(loss)(params), js = func::jacrev(loss)(params), jsf = func::jacfwd(loss)(params);
  CHECK(max_diff(js.get<double, shape<5, 4>>("a.weight"), gr.get<double, shape<5, 4>>("a.weight")) < 1e-14);
  CHECK(max_diff(jsf.get<double, shape<2, 5>>("b.weight"), gr.get<double, shape<2, 5>>("b.weight")) < 1e-13);
  // with has_aux: (blocks, aux)
  auto [ja, aux] = func::jacrev([&](const func::tensor_map& p) { return std::make_pair(out(p), out(p)); }, func::has_aux)(params);
  CHECK(max_diff(ja.get<double, shape<3, 2, 5, 4>>("a.weight"), want) < 1e-14);
  CHECK(max_diff(aux, Tensor<double, shape<3, 2>>(model(x))) == 0);
  // a tensor of another dtype than f's output is a dtype_error naming it
  func::tensor_map mixed = params;
  mixed.set("extra", zeros<float, shape<2>>());
  auto uses = [](const func::tensor_map& p) {
    return Tensor<double, shape<2>>(p.get<double, shape<2>>("b.bias") * 2.0 +
                                    sum(p.get<float, shape<2>>("extra")).template to<double>());
  };
  CHECK_THROWS_WITH(func::jacrev(uses)(mixed), Catch::Matchers::Contains("\"extra\" is float32"));
  CHECK_THROWS_AS(func::jacfwd(uses)(mixed), dtype_error);
}

TEST_CASE("func::vjp / jvp / linearize over a tensor_map, as torch.func", "[func]") {
  const auto& c = ref("g");
  const X x = tenet_test::make<double, shape<4>>(c.at("x"));
  const func::tensor_map p = map_of(tenet_test::make<double, shape<3, 4>>(c.at("w")), tenet_test::make<double, shape<3>>(c.at("b")));
  auto g = [&](const func::tensor_map& q) { return g_of(q, x); };
  auto [y, vjp_fn] = func::vjp(g, p);
  CHECK(max_diff(y, g_of(p, x)) == 0);
  const B ct = tenet_test::make<double, shape<3>>(c.at("ct"));
  auto [vp] = vjp_fn(ct);
  static_assert(std::is_same_v<decltype(vp), func::tensor_map>);
  tenet_test::check_close(vp.get<double, shape<3, 4>>("w"), c.at("vjp_w"), 1e-12, 1e-12);
  tenet_test::check_close(vp.get<double, shape<3>>("b"), c.at("vjp_b"), 1e-12, 1e-12);
  CHECK_FALSE(vp.get<double, shape<3, 4>>("w").requires_grad());
  // a map with a Tensor: one cotangent product each
  auto [y2, vjp2] = func::vjp(g_of, p, x);
  auto [vp2, vx2] = vjp2(ct);
  CHECK(max_diff(vp2.get<double, shape<3>>("b"), vp.get<double, shape<3>>("b")) < 1e-15);
  const auto& cx = ref("mixed");
  // ct J_x = sum_i ct_i J_x[i, :]
  for (int j = 0; j < 4; ++j) {
    double want = 0;
    for (int i = 0; i < 3; ++i) want += ct(i) * cx.at("jac_x").values[static_cast<std::size_t>(i * 4 + j)];
    CHECK(vx2(j) == Approx(want).margin(1e-12));
  }

  const func::tensor_map t = map_of(tenet_test::make<double, shape<3, 4>>(c.at("t_w")), tenet_test::make<double, shape<3>>(c.at("t_b")));
  auto [y3, jt] = func::jvp(g, std::make_tuple(p), std::make_tuple(t));
  tenet_test::check_close(jt, c.at("jvp"), 1e-12, 1e-12);
  CHECK(max_diff(y3, y) == 0);
  CHECK_FALSE(jt.requires_grad());
  // tangent maps in another order of names are matched by name
  func::tensor_map t_swapped;
  t_swapped.set("b", t.get<double, shape<3>>("b"));
  t_swapped.set("w", t.get<double, shape<3, 4>>("w"));
  auto [y4, jt4] = func::jvp(g, std::make_tuple(p), std::make_tuple(t_swapped));
  CHECK(max_diff(jt4, jt) == 0);
  auto [y5, jvp_fn] = func::linearize(g, p);
  CHECK(max_diff(jvp_fn(t), jt) < 1e-15);
  // errors: a tangent map with other names, sizes or dtypes
  func::tensor_map t_missing;
  t_missing.set("w", t.get<double, shape<3, 4>>("w"));
  CHECK_THROWS_WITH(func::jvp(g, std::make_tuple(p), std::make_tuple(t_missing)),
                    Catch::Matchers::Contains("tangent tensor_map holds w; its primal holds w, b"));
  func::tensor_map t_sized = t;
  t_sized.set("b", Tensor<double, dyn_shape<1>>({4}));
  func::tensor_map p_dyn = p;
  p_dyn.set("b", Tensor<double, dyn_shape<1>>(p.get<double, shape<3>>("b")));
  auto g_dyn = [&](const func::tensor_map& q) {
    return Tensor<double, shape<3>>(tanh(matmul(q.get<double, shape<3, 4>>("w"), x) + q.get<double, dyn_shape<1>>("b")));
  };
  CHECK_THROWS_AS(func::jvp(g_dyn, std::make_tuple(p_dyn), std::make_tuple(t_sized)), shape_error);
  func::tensor_map t_f32 = t;
  t_f32.set("b", zeros<float, shape<3>>());
  CHECK_THROWS_WITH(func::jvp(g, std::make_tuple(p), std::make_tuple(t_f32)),
                    Catch::Matchers::Contains("tangent of \"b\" is float32"));
}

TEST_CASE("func::vmap: an in-place write into a tensor it does not map is an error, as torch.func's", "[func]") {
  Tensor<double, shape<4, 3>> x = randn<double, shape<4, 3>>();
  // into an unmapped argument: each sample's write would land on it in turn
  Tensor<double, shape<3>> acc = zeros<double, shape<3>>();
  auto accumulate = [](const auto& r, const auto& into) {
    into.add_(r);
    return sum(r);
  };
  CHECK_THROWS_WITH(func::vmap(accumulate, func::in_dims<0, func::none>)(x, acc),
                    Catch::Matchers::Contains("wrote in place into argument 1 (shape<3>)") &&
                        Catch::Matchers::Contains("sample 0"));
  // into a captured tensor
  Tensor<double, shape<3>> scratch = zeros<double, shape<3>>();
  auto via_scratch = [&](const auto& r) {
    scratch.copy_(r);
    return Tensor<double, shape<>>(sum(scratch * scratch));
  };
  CHECK_THROWS_WITH(func::vmap(via_scratch)(x), Catch::Matchers::Contains("captured (24 bytes on cpu)"));
  // into an unmapped tensor_map's tensor
  func::tensor_map m;
  m.set("buf", zeros<double, shape<3>>());
  auto into_map = [](const auto& r, const func::tensor_map& mm) {
    mm.get<double, shape<3>>("buf").mul_(r);
    return sum(r);
  };
  CHECK_THROWS_WITH(func::vmap(into_map, func::in_dims<0, func::none>)(x, m),
                    Catch::Matchers::Contains("argument 1's \"buf\" (a tensor_map)"));
  // inside a nested vmap: the inner one does not map the tensor it writes into (made by the outer
  // one's sample, which the outer check lets through)
  auto nested = [](const auto& row) {
    Tensor<double, shape<3>> total = zeros<double, shape<3>>();
    return func::vmap([](const auto& e, const auto& into) {
      into.add_(e);
      return e;
    }, func::in_dims<0, func::none>)(row, total);
  };
  CHECK_THROWS_WITH(func::vmap(nested)(x), Catch::Matchers::Contains("argument 1 (shape<3>)"));
  auto nested_ok = [](const auto& row) {
    Tensor<double, shape<3>> total = zeros<double, shape<3>>();
    total.add_(row);  // the outer sample's own tensor
    return func::vmap([](const auto& e) { return e * 2.0; })(total);
  };
  CHECK(max_diff(func::vmap(nested_ok)(x), Tensor<double, shape<4, 3>>(x * 2.0)) == 0);

  // writes into a tensor f creates, or into the sample of a mapped argument, are fine
  auto local = [](const auto& r) {
    Tensor<double, shape<3>> t = r.clone();
    t.mul_(2.0);
    t.add_(r);
    return t;
  };
  Tensor<double, shape<4, 3>> y = func::vmap(local)(x);
  CHECK(max_diff(y, Tensor<double, shape<4, 3>>(x * 3.0)) < 1e-15);
  Tensor<double, shape<4, 3>> x2 = x.clone();
  auto own_slice = [](const auto& r) {
    r.mul_(2.0);
    return sum(r);
  };
  Tensor<double, shape<4>> s = func::vmap(own_slice)(x2);  // torch.func writes through to x2 too
  CHECK(max_diff(x2, Tensor<double, shape<4, 3>>(x * 2.0)) == 0);
  CHECK(max_diff(s, Tensor<double, shape<4>>(sum<1>(x) * 2.0)) < 1e-14);
  // reading an unmapped argument (no write) stays fine, and the written-to tensors are untouched by the check
  auto reads = [](const auto& r, const auto& w) { return sum(r * w); };
  CHECK_NOTHROW(func::vmap(reads, func::in_dims<0, func::none>)(x, acc));
}
