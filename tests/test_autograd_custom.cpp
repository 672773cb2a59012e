// Forward mode through norms, indexing and windows, and tenet::custom_function (a user's forward
// with its own VJP and JVP), against central finite differences in float64.
#include "gradcheck.hpp"

using namespace tenet;
using tenet_test::filled;
using tenet_test::jvpcheck;
using V = Tensor<double, dyn_shape<1>>;
using M = Tensor<double, dyn_shape<2>>;
using M3 = Tensor<double, dyn_shape<3>>;
namespace P = tenet::prim;


TEST_CASE("autograd jvp: norms, indexing, windows", "[autograd]") {
  const M a = filled<2>({3, 4}, 0.3, 1.5);
  const V v = filled<1>({4}, 0.5, 1.5, 0.4);
  const M3 x3 = filled<3>({2, 3, 4}, -1, 1, 0.1);
  jvpcheck([](const auto& x, const auto& w, const auto& c) { return layer_norm(x, w, c); }, x3, v, v);
  Tensor<std::int64_t, dyn_shape<2>> idx({3, 2});
  const std::int64_t iv[] = {0, 3, 2, 2, 1, 0};
  for (int i = 0; i < 6; ++i) idx.data()[i] = iv[i];
  jvpcheck([&](const auto& x) { return gather<1>(x, idx) * 1.0; }, a);
  const M s = filled<2>({3, 2}, -1, 1, 0.5);
  jvpcheck([&](const auto& x, const auto& y) { return scatter_add<1>(x, idx, y); }, a, s);
  P::unfold_<1> uf;
  uf.size = 2;
  uf.step = 1;
  jvpcheck([&](const auto& x) { return make_node(uf, x * 1.0); }, a);
}

namespace {
/// y = x^3 with hand-written rules (deliberately via 3 x^2, checked against finite differences).
struct cube {
  static auto forward(const M& x) { return x * x * x; }
  static auto backward(const M& g, const M& x) { return std::make_tuple(M(g * 3.0 * x * x)); }
  static auto jvp(const M& x, const M& t) { return t * 3.0 * x * x; }
};
/// a * b, with a gradient only for a (b is treated as a constant, as a Function may choose).
struct scale_by {
  static auto forward(const M& a, const M& b) { return a * b; }
  static auto backward(const M& g, const M& a, const M& b) {
    (void)a;
    return std::make_tuple(M(g * b), M());
  }
};
}  // namespace

TEST_CASE("autograd: custom_function with its own VJP and JVP", "[autograd]") {
  const M x = filled<2>({2, 3}, 0.5, 1.5);
  tenet_test::gradcheck([](const auto& a) { return custom_function<cube>::apply(a) * 1.0; }, x);
  jvpcheck([](const auto& a) { return sin(custom_function<cube>::apply(a)); }, x);
  M a = x.detach().clone(), b = x.detach().clone();
  a.requires_grad_();
  b.requires_grad_();
  M y = custom_function<scale_by>::apply(a, b);
  CHECK(y.requires_grad());
  Tensor<double, shape<>> l = sum(y);
  l.backward();
  CHECK(a.grad()(1, 2) == Approx(b(1, 2)));
  CHECK_FALSE(b.grad().defined());
  // no input requires grad: nothing recorded
  M z = custom_function<cube>::apply(x);
  CHECK_FALSE(z.requires_grad());
  // JVP through a custom_function without a jvp is a clear error
  CHECK_THROWS_AS(tenet::jvp([](const auto& p, const auto& q) { return custom_function<scale_by>::apply(p, q); },
                             std::make_tuple(x, x), std::make_tuple(x, x)),
                  value_error);
}

namespace {
/// y[i, j] = x[0, j]: the first row broadcast over the rows, returned as a stride-0 expanded view
/// (Expand) or as a contiguous copy; the same values and the same gradient either way.
template <bool Expand>
struct first_row {
  static auto forward(const M& x) {
    M row = x.narrow<0>(0, 1).contiguous();
    if constexpr (Expand) return M(row.expand<dyn, -1>(x.sizes()[0]));
    else return M(row.expand<dyn, -1>(x.sizes()[0]).contiguous());
  }
  static auto backward(const M& g, const M& x) {
    M gx = zeros<double, dyn_shape<2>>(x.sizes()[0], x.sizes()[1]);
    gx.narrow<0>(0, 1).copy_(sum<0, true>(g));
    return std::make_tuple(gx);
  }
};
}  // namespace

TEST_CASE("autograd: a custom_function whose output is a stride-0 expanded view", "[autograd]") {
  const M x0 = filled<2>({4, 3}, -1.0, 1.0, 0.3);
  const M3 w = filled<3>({4, 2, 3}, 0.5, 1.5, 0.7);
  const auto run = [&]<bool Expand>() {
    M x = x0.detach().clone();
    x.requires_grad_();
    M y = custom_function<first_row<Expand>>::apply(x);
    Tensor<double, shape<>> l = sum(pow(y.template unsqueeze<1>() * w, 2.0));
    l.backward();
    return std::make_pair(l.item(), M(x.grad().clone()));
  };
  const auto [le, ge] = run.template operator()<true>();
  const auto [lc, gc] = run.template operator()<false>();
  CHECK(le == Approx(lc));
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 3; ++j) CHECK(ge(i, j) == Approx(gc(i, j)));
}

TEST_CASE("autograd: a view of an expanded tracked tensor (expand, then unsqueeze / transpose)", "[autograd]") {
  const M x0 = filled<2>({1, 3}, -1.0, 1.0, 0.3);
  const M3 w = filled<3>({4, 2, 3}, 0.5, 1.5, 0.7);
  M x = x0.detach().clone();
  x.requires_grad_();
  M e = x.expand<dyn, -1>(4);
  Tensor<double, shape<>> l = sum(pow(e.unsqueeze<1>() * w, 2.0));
  l.backward();
  // d/dx_j sum_{i,q} (x_j w_iqj)^2 = 2 x_j sum_{i,q} w_iqj^2
  for (std::int64_t j = 0; j < 3; ++j) {
    double s = 0;
    for (std::int64_t i = 0; i < 4; ++i)
      for (std::int64_t q = 0; q < 2; ++q) s += w(i, q, j) * w(i, q, j);
    CHECK(x.grad()(0, j) == Approx(2 * x0(0, j) * s));
  }
  M y = x0.detach().clone();
  y.requires_grad_();
  M et = y.expand<dyn, -1>(4);
  Tensor<double, shape<>> l2 = sum(pow(et.t() * w.select<1>(0).t(), 2.0));
  l2.backward();
  for (std::int64_t j = 0; j < 3; ++j) {
    double s = 0;
    for (std::int64_t i = 0; i < 4; ++i) s += w(i, 0, j) * w(i, 0, j);
    CHECK(y.grad()(0, j) == Approx(2 * x0(0, j) * s));
  }
}

TEST_CASE("autograd: a view of a leaf whose elements share memory is refused, not differentiated wrongly", "[autograd]") {
  M leaf = filled<2>({1, 3}, -1.0, 1.0, 0.3).expand<dyn, -1>(4).detach();
  leaf.requires_grad_();
  CHECK_THROWS_WITH(leaf.unsqueeze<1>(), Catch::Matchers::Contains("share memory") && Catch::Matchers::Contains("contiguous"));
  M c = leaf.contiguous();  // the way out: a copy, differentiable
  Tensor<double, shape<>> l = sum(pow(c.t(), 2.0));
  l.backward();
  CHECK(leaf.grad()(2, 1) == Approx(2 * leaf(2, 1)));
}
