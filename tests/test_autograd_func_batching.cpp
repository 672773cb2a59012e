// func::vmap(f, ..., func::batching): f runs once on batched values, each op applying its
// batching rule (include/tenet/func/batching.hpp). Every result is checked against the per-sample
// vmap (f once per sample, stacked), which is exact by construction, and vmap(grad(f)) against
// torch.func's per-sample gradients (tests/reference/gen_func.py, case per_sample).
#include "gradcheck.hpp"
#include "reference.hpp"

using namespace tenet;
using tenet_test::max_diff;

namespace {
template <class T, class S>
Tensor<T, S> wave(double phase) {
  Tensor<T, S> t = zeros<T, S>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data()[i] = static_cast<T>(std::sin(phase + 0.7 * static_cast<double>(i)) * 1.3);
  return t;
}
template <class...>
struct show;
/// vmap(f) with and without the batching rules: the same type and values.
template <class F, class Dims, class... A>
void same_both_ways(const F& f, Dims d, const A&... a) {
  auto per_sample = func::vmap(f, d)(a...);
  auto batched = func::vmap(f, d, func::batching)(a...);
  if constexpr (!std::is_same_v<decltype(per_sample), decltype(batched)>) {
    show<decltype(per_sample), decltype(batched)> s;
  }
  if constexpr (TensorType<decltype(batched)>) {
    CHECK(max_diff(batched, per_sample) < 1e-13);
  } else {
    std::vector<double> d;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (d.push_back(max_diff(std::get<K>(batched), std::get<K>(per_sample))), ...);
    }(std::make_index_sequence<std::tuple_size_v<decltype(batched)>>{});
    for (std::size_t k = 0; k < d.size(); ++k) {
      INFO("output " << k);
      CHECK(d[k] < 1e-13);
    }
  }
}
}  // namespace

TEST_CASE("vmap batching rules: pointwise ops, broadcasting, scalars", "[func][vmap]") {
  const auto x = wave<double, shape<6, 4>>(0.1);
  const auto w = wave<double, shape<4>>(1.0);
  const auto m = wave<double, shape<3, 4>>(2.0);
  const auto y = wave<double, shape<6, 3, 4>>(0.5);
  auto pointwise = [](const auto& a, const auto& v) {
    return tanh(a * 2.0 + v) - exp(a) / (1.0 + a * a) + maximum(a, v) * sigmoid(-a) + pow(abs(a), 1.5);
  };
  same_both_ways(pointwise, func::in_dims<0, func::none>, x, w);
  // an unbatched operand of higher rank than the sample: the sample is lifted past the batch dim
  same_both_ways([](const auto& a, const auto& b) { return a * b + relu(b - a); }, func::in_dims<0, func::none>, x, m);
  // two batched operands of different ranks, and a scalar on the left
  same_both_ways([](const auto& a, const auto& b) { return 3.0 - a / (b * b + 1.0) + where(a > 0.2, a, b); },
                 func::in_dims<0, 0>, x, y);
}

TEST_CASE("vmap batching rules: reductions, softmax, layer_norm", "[func][vmap]") {
  const auto x = wave<double, shape<6, 3, 4>>(0.3);
  const auto g = wave<double, shape<4>>(0.9);
  const auto b = wave<double, shape<4>>(1.9);
  auto f = [&](const auto& a) {
    return std::make_tuple(sum(a), mean<1>(a), sum<0>(a, keepdim), amax<-1>(a), softmax<-1>(a), log_softmax<0>(a),
                           logsumexp<1>(a), mean(a, keepdim), layer_norm(a, g, b));
  };
  same_both_ways(f, func::in_dims<0>, x);
  // a mapped dim other than 0
  same_both_ways([](const auto& a) { return sum<0>(a * a); }, func::in_dims<1>, x);
}

TEST_CASE("vmap batching rules: matmul and linear in every rank combination", "[func][vmap]") {
  const auto v = wave<double, shape<6, 4>>(0.2);     // a vector per sample
  const auto mb = wave<double, shape<6, 3, 4>>(1.2);  // a matrix per sample
  const auto m = wave<double, shape<3, 4>>(2.2);
  const auto m5 = wave<double, shape<4, 5>>(3.2);
  const auto t3 = wave<double, shape<2, 4, 5>>(4.2);
  const auto w4 = wave<double, shape<4>>(5.2);
  const auto bias = wave<double, shape<3>>(6.2);
  auto none = func::in_dims<0, func::none>;
  same_both_ways([](const auto& a, const auto& k) { return matmul(k, a); }, none, v, m);      // (3,4) @ (4)
  same_both_ways([](const auto& a, const auto& k) { return matmul(a, k); }, none, v, m5);     // (4) @ (4,5)
  same_both_ways([](const auto& a, const auto& k) { return matmul(a, k); }, none, v, t3);     // (4) @ (2,4,5)
  same_both_ways([](const auto& a, const auto& k) { return matmul(a, k); }, none, v, w4);     // (4) . (4)
  same_both_ways([](const auto& a, const auto& k) { return matmul(k, a); }, none, v, w4);     // (4) . (4)
  same_both_ways([](const auto& a, const auto& k) { return matmul(a, k); }, none, mb, m5);    // (3,4) @ (4,5)
  same_both_ways([](const auto& a, const auto& k) { return matmul(a, k); }, none, mb, t3);    // (3,4) @ (2,4,5)
  same_both_ways([](const auto& a, const auto& k) { return matmul(a, k); }, none, mb, w4);    // (3,4) @ (4)
  same_both_ways([](const auto& a, const auto& k) { return matmul(k, a.mT()); }, none, mb, t3.mT());  // (2,5,4)@(4,3)
  same_both_ways([](const auto& a, const auto& b2) { return matmul(a, b2); }, func::in_dims<0, 0>, mb, v);
  same_both_ways([](const auto& a, const auto& b2) { return matmul(b2, a.mT()); }, func::in_dims<0, 0>, mb, v);
  same_both_ways([](const auto& a, const auto& b2) { return matmul(a, b2.mT()); }, func::in_dims<0, 0>, mb, mb);
  same_both_ways([](const auto& a, const auto& b2) { return matmul(a, b2); }, func::in_dims<0, 0>, v, v);
  // linear with an unbatched weight, and with a batched one (each sample its own weight)
  same_both_ways([&](const auto& a, const auto& k) { return linear(a, k, bias); }, none, v, m);
  same_both_ways([&](const auto& a, const auto& k) { return linear(k, a); }, func::in_dims<0, func::none>, mb, v.select<0>(1));
  same_both_ways([&](const auto& a, const auto& k) { return linear(k, a, bias); }, func::in_dims<0, 0>, mb, v);
}

TEST_CASE("vmap batching rules: views", "[func][vmap]") {
  const auto x = wave<double, shape<6, 3, 4>>(0.7);
  auto f = [](const auto& a) {
    return std::make_tuple(a.template transpose<0, 1>() * 2.0, a.template reshape<4, 3>() + 0.0,
                           a.template reshape<-1>() * 1.0, a.template unsqueeze<1>() + 1.0,
                           a.template unsqueeze<-1>().template squeeze<2>() + 1.0, a.template permute<1, 0>() * 1.0,
                           a.template select<1>(2) * 1.0, a.template narrow<1>(1, 2) * 1.0, a.template flatten<>() * 1.0,
                           a.mT() + 0.0);
  };
  same_both_ways(f, func::in_dims<0>, x);
  same_both_ways(f, func::in_dims<2>, wave<double, shape<3, 4, 6>>(0.1));
}

TEST_CASE("vmap batching rules: in_dims, out_dims, tuples, chunk_size, nesting, errors", "[func][vmap]") {
  const auto x = wave<double, shape<6, 4>>(0.4);
  const auto w = wave<double, shape<3, 6>>(1.4);
  auto cols = [](const auto& c, const auto& k) { return matmul(k, c); };
  auto a = func::vmap(cols, func::in_dims<1, func::none>, func::out_dims<1>)(x, w);
  auto b = func::vmap(cols, func::in_dims<1, func::none>, func::out_dims<1>, func::batching)(x, w);
  static_assert(std::is_same_v<decltype(b), Tensor<double, shape<3, 4>>>);
  CHECK(max_diff(a, b) < 1e-14);
  // chunk_size: 4 then 2 samples, joined
  auto two = [](const auto& r) { return std::make_pair(sum(r * r), r * 2.0); };
  auto [c1, c2] = func::vmap(two, func::batching, {.chunk_size = 4})(x);
  auto [p1, p2] = func::vmap(two)(x);
  CHECK(max_diff(c1, p1) < 1e-14);
  CHECK(max_diff(c2, p2) == 0);
  // an output that does not depend on the batch is expanded over it, as torch's vmap does
  const auto k = wave<double, shape<4>>(2.4);
  auto flat = func::vmap([&](const auto& r) { return std::make_pair(k * 1.0, sum(r)); }, func::batching)(x);
  CHECK(max_diff(std::get<0>(flat), Tensor<double, shape<6, 4>>(k.unsqueeze<0>().expand<6, -1>())) == 0);
  // run-time batch extents keep their type
  Tensor<double, dyn_shape<2>> xd = x;
  auto rd = func::vmap([](const auto& r) { return sum(r); }, func::batching)(xd);
  static_assert(std::is_same_v<decltype(rd), Tensor<double, shape<dyn>>>);
  CHECK(max_diff(rd, Tensor<double, shape<6>>(sum<1>(x))) < 1e-15);
  // nested: an outer per-sample vmap around a batched one
  const auto x3 = wave<double, shape<2, 6, 4>>(0.8);
  auto nested = func::vmap(func::vmap([](const auto& r) { return exp(r) * r; }, func::batching))(x3);
  CHECK(max_diff(nested, Tensor<double, shape<2, 6, 4>>(exp(x3) * x3)) < 1e-15);
  // autograd through the batched vmap
  Tensor<double, shape<6, 4>> xt = x.clone();
  xt.requires_grad_();
  Tensor<double, shape<>> l = sum(func::vmap([](const auto& r) { return sum(r * r * r); }, func::batching)(xt));
  l.backward();
  CHECK(max_diff(xt.grad(), Tensor<double, shape<6, 4>>(x * x * 3.0)) < 1e-14);
  // randomness: error by default; ::same draws once for all (as the per-sample path with ::same);
  // ::different cannot be met by one batched call: an error that names the way out
  auto noisy = [](const auto& r) { return r * 0.0 + randn<double, shape<4>>(); };
  CHECK_THROWS_WITH(func::vmap(noisy, func::batching)(x), Catch::Matchers::Contains("randomness"));
  CHECK_THROWS_WITH(func::vmap(noisy, func::batching, {.randomness = func::randomness::different})(x),
                    Catch::Matchers::Contains("without func::batching"));
  manual_seed(3);
  auto s1 = func::vmap(noisy, func::batching, {.randomness = func::randomness::same})(x);
  manual_seed(3);
  auto s2 = func::vmap(noisy, {.randomness = func::randomness::same})(x);
  CHECK(max_diff(s1, s2) == 0);
  // errors of the arguments, as the per-sample path
  const auto x5 = wave<double, shape<5, 4>>(0.0);
  CHECK_THROWS_WITH(func::vmap([](const auto& p, const auto& q) { return p + q; }, func::batching)(x, x5),
                    Catch::Matchers::Contains("argument 0: 6, argument 1: 5"));
  CHECK_THROWS_AS(func::vmap([](const auto& p) { return p; }, func::batching, {.chunk_size = -1})(x), value_error);
}

TEST_CASE("vmap batching rules: losses", "[func][vmap]") {
  const auto logits = wave<double, shape<6, 5>>(0.6);
  const auto logits2 = wave<double, shape<6, 3, 5>>(1.6);
  Tensor<std::int64_t, shape<6>> y = zeros<std::int64_t, shape<6>>();
  Tensor<std::int64_t, shape<6, 3>> y2 = zeros<std::int64_t, shape<6, 3>>();
  for (int i = 0; i < 6; ++i) y.data()[i] = (i * 3) % 5;
  for (int i = 0; i < 18; ++i) y2.data()[i] = (i * 2) % 5;
  y2.data()[4] = -100;  // ignored: the mean is over that sample's other targets
  const auto target = wave<double, shape<6, 3, 5>>(2.6);
  auto ce = [](const auto& l, const auto& t) {
    return std::make_tuple(cross_entropy(l, t), cross_entropy<reduction::sum>(l, t),
                           cross_entropy<reduction::none>(l, t), cross_entropy(l, t, -100, 0.1));
  };
  same_both_ways(ce, func::in_dims<0, 0>, logits, y);
  same_both_ways(ce, func::in_dims<0, 0>, logits2, y2);
  same_both_ways([](const auto& l, const auto& t) { return cross_entropy(l, softmax<-1>(t)); }, func::in_dims<0, 0>,
                 logits2, target);
  auto mse = [](const auto& p, const auto& t) {
    return std::make_tuple(mse_loss(p, t), mse_loss<reduction::sum>(p, t), mse_loss<reduction::none>(p, t));
  };
  same_both_ways(mse, func::in_dims<0, 0>, logits2, target);
  same_both_ways(mse, func::in_dims<0, func::none>, logits2, target.select<0>(0));
}

TEST_CASE("vmap(grad(f), batching): per-sample gradients against torch.func and the per-sample path", "[func][vmap]") {
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
  constexpr auto dims = func::in_dims<func::none, func::none, func::none, func::none, 0, 0>;
  auto per_sample = func::vmap(func::grad(loss, func::argnums<0, 1, 2, 3>), dims, func::batching);
  auto [g1, g2, g3, g4] = per_sample(w1, b1, w2, b2, xs, ys);
  static_assert(std::is_same_v<decltype(g1), Tensor<double, shape<6, 5, 4>>>);
  tenet_test::check_close(g1, c.at("gw1"));
  tenet_test::check_close(g2, c.at("gb1"));
  tenet_test::check_close(g3, c.at("gw2"));
  tenet_test::check_close(g4, c.at("gb2"));
  auto [q1, q2, q3, q4] = func::vmap(func::grad(loss, func::argnums<0, 1, 2, 3>), dims)(w1, b1, w2, b2, xs, ys);
  CHECK(max_diff(g1, q1) < 1e-14);
  CHECK(max_diff(g2, q2) < 1e-14);
  CHECK(max_diff(g3, q3) < 1e-14);
  CHECK(max_diff(g4, q4) < 1e-14);
  // a mapped differentiated argument (each sample's input gradient), chunked, out_dims 1
  auto gx = func::vmap(func::grad(loss, func::argnums<4>), dims, func::out_dims<1>, func::batching,
                       {.chunk_size = 4})(w1, b1, w2, b2, xs, ys);
  auto px = func::vmap(func::grad(loss, func::argnums<4>), dims, func::out_dims<1>)(w1, b1, w2, b2, xs, ys);
  static_assert(std::is_same_v<decltype(gx), Tensor<double, shape<4, 6>>>);
  CHECK(max_diff(gx, px) < 1e-14);
  // an unmapped weight read by linear (its per-sample gradient from the layer's output gradient)
  // and by other ops too (a copy per sample as a batched leaf): the two parts add up
  auto mixed = [](const auto& a1, const auto& c1, const auto& x, const auto& y) {
    return cross_entropy(linear(x.template unsqueeze<0>(), a1, c1), y.template unsqueeze<0>()) + sum(a1 * a1) * 0.01 +
           sum(tanh(matmul(a1, x))) + sum(c1 * x.template narrow<0>(0, 3).template unsqueeze<0>()) * 0.5;
  };
  const auto w3 = w2.narrow<1>(0, 4);  // (3, 4)
  constexpr auto dims4 = func::in_dims<func::none, func::none, 0, 0>;
  auto [m1, m2] = func::vmap(func::grad(mixed, func::argnums<0, 1>), dims4, func::batching)(w3, b2, xs, ys);
  auto [n1, n2] = func::vmap(func::grad(mixed, func::argnums<0, 1>), dims4)(w3, b2, xs, ys);
  CHECK(max_diff(m1, n1) < 1e-13);
  CHECK(max_diff(m2, n2) < 1e-13);
  // an argument differentiated but unused: zeros
  auto unused = func::vmap(func::grad([](const auto&, const auto& x) { return sum(x * x); }, func::argnums<0>),
                           func::in_dims<func::none, 0>, func::batching)(w3, xs);
  CHECK(max_diff(unused, Tensor<double, shape<6, 3, 4>>(zeros<double, shape<6, 3, 4>>())) == 0);
  // float32, the benchmark's case in small: the same per-sample gradients either way
  const Tensor<float, shape<5, 4>> f1 = w1.to<float>();
  const Tensor<float, shape<5>> fb1 = b1.to<float>();
  const Tensor<float, shape<3, 5>> f2 = w2.to<float>();
  const Tensor<float, shape<3>> fb2 = b2.to<float>();
  const Tensor<float, shape<6, 4>> fx = xs.to<float>();
  auto relu_loss = [](const auto& a1, const auto& c1, const auto& a2, const auto& c2, const auto& x, const auto& y) {
    return cross_entropy(linear(relu(linear(x.template unsqueeze<0>(), a1, c1)), a2, c2), y.template unsqueeze<0>());
  };
  auto [h1, h2, h3, h4] = func::vmap(func::grad(relu_loss, func::argnums<0, 1, 2, 3>), dims, func::batching)(f1, fb1, f2, fb2, fx, ys);
  auto [k1, k2, k3, k4] = func::vmap(func::grad(relu_loss, func::argnums<0, 1, 2, 3>), dims)(f1, fb1, f2, fb2, fx, ys);
  CHECK(max_diff(h1, k1) < 1e-6);
  CHECK(max_diff(h2, k2) < 1e-6);
  CHECK(max_diff(h3, k3) < 1e-6);
  CHECK(max_diff(h4, k4) < 1e-6);
}
