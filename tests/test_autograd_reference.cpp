// Gradients compared with PyTorch's on the same inputs (tests/reference/gen_autograd.py writes
// autograd.txt): an MLP with cross_entropy, kinks and ties, layer_norm, softmax, conv2d + pooling,
// prod with zeros, cumsum + sort, embedding + mse_loss; gradients (and tangents) at special points
// (0, +-1, +-inf, NaN, overflow, constant rows, zero vectors) and pooling with NaN and inf.
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

namespace {
/// The gradient of sum(f(x)) at case `name`'s special points (0, +-1, +-inf, NaN, arguments where
/// an intermediate of f's decomposition overflows), and f's tangent along ones where the case has
/// torch's.
template <class T, class F>
void special_points(const std::string& name, F f) {
  INFO("case " << name);
  using VT = Tensor<T, dyn_shape<1>>;
  const auto& c = get_case(file, name);
  auto x = leaf<VT>(c, "x");
  Tensor<T, shape<>> loss = sum(f(x));
  loss.backward();
  check_close(x.grad(), c.at("grad_x"));
  if (c.count("jvp")) {
    const VT x0 = make<T, dyn_shape<1>>(c.at("x"));
    VT ones(x0.sizes());
    ones.fill_(1);
    const auto [y, t] = jvp([&](const auto& a) { return f(a); }, std::make_tuple(x0), std::make_tuple(ones));
    check_close(t, c.at("jvp"));
  }
}
}  // namespace

TEST_CASE("autograd vs PyTorch: derivatives at special points", "[autograd]") {
  // torch's own derivative where the decomposition's chain rule is 0 * inf (acosh below -1, asin at
  // +-1, sinh of 1000, sinc at 0, sigmoid of -1000, softplus of 100 ...), and forward mode skips the
  // tangent of a constant operand (x * 2 at inf)
  special_points<double>("special_acosh", [](const auto& x) { return acosh(x); });
  special_points<double>("special_asinh", [](const auto& x) { return asinh(x); });
  special_points<double>("special_asin", [](const auto& x) { return asin(x); });
  special_points<double>("special_acos", [](const auto& x) { return acos(x); });
  special_points<double>("special_atanh", [](const auto& x) { return atanh(x); });
  special_points<double>("special_sinh", [](const auto& x) { return sinh(x); });
  special_points<double>("special_cosh", [](const auto& x) { return cosh(x); });
  special_points<double>("special_sinc", [](const auto& x) { return sinc(x); });
  special_points<double>("special_logit", [](const auto& x) { return logit(x); });
  special_points<double>("special_logit_eps", [](const auto& x) { return logit(x, 0.1); });
  special_points<double>("special_sigmoid", [](const auto& x) { return sigmoid(x); });
  special_points<double>("special_silu", [](const auto& x) { return silu(x); });
  special_points<double>("special_elu", [](const auto& x) { return elu(x); });
  special_points<double>("special_selu", [](const auto& x) { return selu(x); });
  special_points<double>("special_celu", [](const auto& x) { return celu(x, 2.0); });
  special_points<double>("special_softplus", [](const auto& x) { return softplus(x); });
  special_points<double>("special_mish", [](const auto& x) { return mish(x); });
  special_points<double>("special_hardswish", [](const auto& x) { return hardswish(x); });
  special_points<double>("special_logsigmoid", [](const auto& x) { return logsigmoid(x); });
  special_points<double>("special_xlogy_x0", [](const auto& x) { return xlogy(x, 0.0); });
  special_points<double>("special_atan2_x0", [](const auto& x) { return atan2(x, 0.0); });
  special_points<double>("special_hypot_x0", [](const auto& x) { return hypot(x, 0.0); });
  special_points<double>("special_scaled", [](const auto& x) { return x * 2.0 + 1.0; });
  // float32 overflows earlier (exp(89), 1e30 squared)
  special_points<float>("special_sinh_f32", [](const auto& x) { return sinh(x); });
  special_points<float>("special_softplus_f32", [](const auto& x) { return softplus(x); });
  special_points<float>("special_hypot_x0_f32", [](const auto& x) { return hypot(x, 0.0); });
}

TEST_CASE("autograd vs PyTorch: std of constant rows, norms of zero vectors", "[autograd]") {
  // torch masks the zero results of std and vector_norm in their backward (0, not 0 * inf); std
  // over a size-1 dim with correction 1 is NaN and so is its gradient
  const auto& a = get_case(file, "std_constant_row");
  auto xa = leaf<M>(a, "x");
  S0 la = sum(tenet::std<1>(xa));
  la.backward();
  check_close(xa.grad(), a.at("grad_x"));
  const auto& b = get_case(file, "std_size1");
  auto xb = leaf<M>(b, "x");
  V yb = tenet::std<1>(xb);
  check_close(yb, b.at("y"));
  S0(sum(yb)).backward();
  check_close(xb.grad(), b.at("grad_x"));
  const auto& c = get_case(file, "std_size1_c0");
  auto xc = leaf<M>(c, "x");
  S0(sum(tenet::std<1>(xc, 0.0))).backward();
  check_close(xc.grad(), c.at("grad_x"));
  const auto& d = get_case(file, "std_all");
  auto xd = leaf<M>(d, "x");
  S0(tenet::std(xd)).backward();
  check_close(xd.grad(), d.at("grad_x"));
  for (const auto& [tag, p] : {std::pair{"2", 2.0}, {"3", 3.0}, {"half", 0.5}, {"1", 1.0}, {"inf", INFINITY}}) {
    INFO("norm p " << p);
    const auto& n = get_case(file, std::string("norm_") + tag);
    auto x = leaf<M>(n, "x");
    V y = norm<1>(x, p);
    check_close(y, n.at("y"));
    S0(sum(y)).backward();
    check_close(x.grad(), n.at("grad_x"));
  }
  const auto& cs = get_case(file, "cosine_zero");
  auto xs = leaf<M>(cs, "x");
  S0(sum(cosine_similarity<1>(xs, make<double, dyn_shape<2>>(cs.at("other"))))).backward();
  check_close(xs.grad(), cs.at("grad_x"));
}

namespace {
/// y = f(x) against torch's value (a NaN or inf stays in the outputs whose window holds it), and
/// x's gradient for the case's seed (a NaN seed reaches only that output's inputs).
template <class F>
void pooling_case(const std::string& name, F f) {
  INFO("case " << name);
  const auto& c = get_case(file, name);
  auto x = leaf<M4>(c, "x");
  M4 y = f(x);
  check_close(y, c.at("y"));
  y.backward(make<double, dyn_shape<4>>(c.at("seed")));
  check_close(x.grad(), c.at("grad_x"));
}
}  // namespace

TEST_CASE("autograd vs PyTorch: pooling and interpolation with NaN and inf", "[autograd]") {
  const auto adaptive = [](ints<2> size) { return [size](const auto& x) { return adaptive_avg_pool2d(x, size); }; };
  pooling_case("adaptive_nan", adaptive(2));
  pooling_case("adaptive_3_nan", adaptive(3));
  pooling_case("adaptive_inf", adaptive({3, 2}));
  pooling_case("adaptive_nan_seed", adaptive(3));
  pooling_case("avg_pool_nan", [](const auto& x) { return avg_pool2d(x, 3, {.stride = 1, .padding = 1}); });
  const auto resize = [](ints<2> size, interpolate_mode mode, std::optional<bool> corners = std::nullopt) {
    return [=](const auto& x) { return interpolate(x, {.size = size, .mode = mode, .align_corners = corners}); };
  };
  pooling_case("nearest_nan", resize({8, 3}, interpolate_mode::nearest));
  pooling_case("nearest_nan_seed", resize(3, interpolate_mode::nearest));
  pooling_case("bilinear_nan", resize(8, interpolate_mode::bilinear));
  pooling_case("bilinear_inf", resize({3, 5}, interpolate_mode::bilinear));
  pooling_case("bilinear_same_rows", resize({4, 5}, interpolate_mode::bilinear));  // rows copied, as torch
  pooling_case("bilinear_corners_inf", resize(6, interpolate_mode::bilinear, true));
  pooling_case("bilinear_nan_seed", resize(3, interpolate_mode::bilinear));
  // max_pool2d's gradient goes to torch's index: first max, last NaN, first element inside the
  // input of an all -inf window
  const auto max_pool = [](const auto& x) { return max_pool2d(x, 2); };
  pooling_case("max_pool_nan", max_pool);
  pooling_case("max_pool_tie", max_pool);
  pooling_case("max_pool_inf", max_pool);
  pooling_case("max_pool_nan_seed", max_pool);
  pooling_case("max_pool_all_ninf", [](const auto& x) { return max_pool2d(x, 3, {.stride = 2, .padding = 1}); });
  pooling_case("max_pool_overlap", [](const auto& x) { return max_pool2d(x, 3, {.stride = 1, .padding = 1}); });
  const auto& j = get_case(file, "max_pool_jvp");
  const auto [y, t] = jvp(max_pool, std::make_tuple(make<double, dyn_shape<4>>(j.at("x"))),
                          std::make_tuple(make<double, dyn_shape<4>>(j.at("tangent"))));
  check_close(t, j.at("jvp"));
}
