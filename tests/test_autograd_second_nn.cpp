// Second order (create_graph) of softmax/log_softmax (their own rules), cross_entropy, mse_loss,
// layer_norm, gather/scatter, the scans and sort against finite differences (hesscheck.hpp), and
// the full Hessian of a small MLP's loss against PyTorch's (tests/reference/gen_autograd_second.py
// writes autograd_second.txt).
#include "hesscheck.hpp"
#include "reference.hpp"

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

using tenet_test::values_of;

TEST_CASE("autograd second order: softmax, log_softmax and composite ops", "[autograd]") {
  const M logits = filled<2>({4, 5}, -2, 2);
  hesscheck([](const auto& a) { return softmax<1>(a); }, logits);
  hesscheck([](const auto& a) { return log_softmax<1>(a); }, logits);
  Tensor<std::int64_t, dyn_shape<1>> target({4});
  const std::int64_t tv[] = {1, 0, 4, 2};
  for (int i = 0; i < 4; ++i) target.data()[i] = tv[i];
  hesscheck([&](const auto& a) { return cross_entropy(a, target); }, logits);
  hesscheck([&](const auto& a) { return cross_entropy<reduction::sum>(a, target, -100, 0.1); }, logits);
  const M y = filled<2>({4, 5}, -1, 1, 0.4);
  hesscheck([](const auto& a, const auto& t) { return mse_loss(a, t); }, logits, y);
  const M3 ln = filled<3>({2, 3, 4}, -1, 1);
  const V g = filled<1>({4}, 0.5, 1.5, 0.3);
  const V b = filled<1>({4}, -0.5, 0.5, 0.6);
  hesscheck([](const auto& a, const auto& w, const auto& c) { return layer_norm(a, w, c); }, ln, g, b);
}

TEST_CASE("autograd second order: scaled_dot_product_attention", "[autograd]") {
  // its VJP is one sdpa_grad node; before stop 42 that node had no VJP of its own, so a program
  // built with TENET_AUTOGRAD=2 that used attention did not compile
  const M3 q = filled<3>({2, 3, 4}, -1, 1, 0.3), k = filled<3>({2, 5, 4}, -1.2, 0.9, 0.7);
  const M3 v = filled<3>({2, 5, 4}, -0.8, 1.1, 0.45);
  hesscheck([](const auto& a, const auto& b, const auto& c) {
    return scaled_dot_product_attention(a, b, c, {.is_causal = true});
  }, q, k, v);
  const M mask = filled<2>({3, 5}, -1.5, 0.5, 0.2);  // additive, broadcast over the batch
  hesscheck([](const auto& a, const auto& b, const auto& c, const auto& m) {
    return scaled_dot_product_attention(a, b, c, m, {.scale = 0.7});
  }, q, k, v, mask);
}

TEST_CASE("autograd second order: gather, scatter, scans, sort", "[autograd]") {
  const M x = filled<2>({3, 4}, 0.5, 1.5);
  auto sq = [](const auto& e) { return bin<P::mul_>(e, un<P::exp_>(e)); };
  Tensor<std::int64_t, dyn_shape<2>> idx({3, 2});
  const std::int64_t iv[] = {0, 3, 2, 2, 1, 0};
  for (int i = 0; i < 6; ++i) idx.data()[i] = iv[i];
  hesscheck([&](const auto& a) { return sq(make_node(P::gather_<1>{}, a, idx)); }, x);
  const M src = filled<2>({3, 3}, -1, 1, 0.5);
  hesscheck([&](const auto& a, const auto& s) { return sq(make_node(P::scatter_<1, P::scatter_op::sum>{}, a, idx, s)); },
            x, src);
  hesscheck([&](const auto& a) { return sq(make_node(P::scan_<P::sum_kind, 1>{}, a)); }, x);
  hesscheck([](const auto& a) { return make_node(P::scan_<P::prod_kind, 1>{}, a); }, x);
  hesscheck([](const auto& a) { return make_node(P::scan_<P::logaddexp_kind, 1>{}, a); }, x);
  hesscheck([&](const auto& a) { return sq(make_node(P::scan_<P::amax_kind, 0>{}, a)); }, x);
  hesscheck([&](const auto& a) { return sq(make_node(P::sort_<1, P::sort_output::values>{}, a)); }, x);
}


TEST_CASE("autograd second order: MLP Hessian vs PyTorch", "[autograd]") {
  const auto& c = tenet_test::get_case("autograd_second.txt", "mlp");
  auto leaf = [&]<class T>(std::type_identity<T>, const char* key) {
    T t = tenet_test::make<double, typename T::shape_type>(c.at(key));
    t.requires_grad_();
    return t;
  };
  const M x = tenet_test::make<double, dyn_shape<2>>(c.at("x"));
  const auto target = tenet_test::make<std::int64_t, dyn_shape<1>>(c.at("target"));
  auto w1 = leaf(std::type_identity<M>{}, "w1"), w2 = leaf(std::type_identity<M>{}, "w2");
  auto b1 = leaf(std::type_identity<V>{}, "b1"), b2 = leaf(std::type_identity<V>{}, "b2");
  S0 loss = cross_entropy(linear(tanh(linear(x, w1, b1)), w2, b2), target);
  tenet_test::check_close(loss, c.at("loss"));
  const auto params = std::make_tuple(w1, b1, w2, b2);
  const auto gs = autograd::grad(loss, params, {.create_graph = true});
  // the Hessian, one row per parameter element: grad(g_j, params, one-hot seed)
  std::vector<double> rows;
  auto row_of = [&](const auto& g) {
    using G = std::remove_cvref_t<decltype(g)>;
    for (std::int64_t k = 0; k < g.numel(); ++k) {
      G seed(g.sizes());
      seed.fill_(0);
      seed.data()[k] = 1;
      const auto hs = autograd::grad(g, params, seed, {.retain_graph = true, .allow_unused = true});
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (
            [&](const auto& h, const auto& p) {
              for (double v : values_of(h, p.numel())) rows.push_back(v);
            }(std::get<I>(hs), std::get<I>(params)),
            ...);
      }(std::make_index_sequence<4>{});
    }
  };
  std::apply([&](const auto&... g) { (row_of(g), ...); }, gs);
  const auto& want = c.at("hessian");
  REQUIRE(want.numel() == static_cast<std::int64_t>(rows.size()));
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (!(std::abs(rows[i] - want.values[i]) <= 1e-9 + 1e-7 * std::abs(want.values[i])) && bad++ < 5)
      UNSCOPED_INFO("hessian element " << i << ": " << rows[i] << ", PyTorch " << want.values[i]);
  CHECK(bad == 0);
}
