// Gradients of the ops that copy their operands into a fresh tensor instead of building one
// expression: cat, stack (a cat_node, autograd/cat.hpp), repeat, tile, repeat_interleave and diag
// of a vector (expressions of the movement prims, or index_select). Issue 26: they were not
// recorded, so a loss through them lost those terms of the gradient silently. Checked against
// PyTorch's gradients (torch 2.15, float64, seed 1, 2, 3, ... over the output) and by finite
// differences; lazy, cast, non-contiguous, untracked and repeated operands; jvp.
#include "gradcheck.hpp"

#include <initializer_list>
#include <type_traits>
#include <vector>

using namespace tenet;
using tenet_test::filled;
using tenet_test::gradcheck;
using tenet_test::jvpcheck;
using V = Tensor<double, dyn_shape<1>>;
using M = Tensor<double, dyn_shape<2>>;
using M3 = Tensor<double, dyn_shape<3>>;
using I1 = Tensor<std::int64_t, shape<dyn>>;

namespace {
/// 1, 2, 3, ... over y's sizes (row-major), the seed the PyTorch values were computed with.
template <class Y>
Y counting_seed(const Y& y) {
  Y s(y.sizes());
  for (std::int64_t i = 0; i < s.numel(); ++i) s.data()[i] = static_cast<typename Y::value_type>(i + 1);
  return s;
}
/// Backward from y with the counting seed.
template <class Y>
void backward_counting(const Y& y) {
  REQUIRE(y.requires_grad());
  y.backward(counting_seed(y));
}
template <class X>
void check_grad(const X& x, std::initializer_list<double> expected) {
  const auto g = x.grad();
  REQUIRE(g.defined());
  const auto c = g.contiguous();
  REQUIRE(c.numel() == static_cast<std::int64_t>(expected.size()));
  std::int64_t i = 0;
  for (double e : expected) {
    INFO("element " << i);
    CHECK(static_cast<double>(c.data()[i++]) == Approx(e).margin(1e-12));
  }
}
template <class X>
X leaf(const X& values) {
  X x = values.detach().clone();
  x.requires_grad_();
  return x;
}
}  // namespace

TEST_CASE("autograd joins: the issue's repro (cat of a leaf and a lazy operand)", "[autograd]") {
  Tensor<float, shape<3>> w = ones<float, shape<3>>();
  w.requires_grad_();
  Tensor<float, shape<>> loss = sum(cat<0>(w, w * 2.0f)) + sum(w);
  loss.backward();
  for (std::int64_t i = 0; i < 3; ++i) CHECK(w.grad()(i) == 4.0f);  // torch: [4, 4, 4]
  w.set_grad({});
  Tensor<float, shape<>> twice = sum(cat<0>(w, w));  // was "does not require grad"
  twice.backward();
  for (std::int64_t i = 0; i < 3; ++i) CHECK(w.grad()(i) == 2.0f);  // torch: [2, 2, 2]
}

TEST_CASE("autograd joins: cat and stack against PyTorch", "[autograd]") {
  const M a0 = tensor<double>({{0.5, -1.0, 2.0}, {1.5, 0.25, -0.75}});
  const M b0 = tensor<double>({{1.0, 2.0, -3.0}});
  const V v0 = tensor<double>({0.5, -2.0, 1.25});
  {  // a twice, b through a lazy operand
    auto a = leaf(a0);
    auto b = leaf(b0);
    backward_counting(cat<0>(a, b * b, a));
    check_grad(a, {11, 13, 15, 17, 19, 21});
    check_grad(b, {14, 32, -54});
  }
  {  // a non-contiguous view and an unsqueezed vector, along dim 1
    auto a = leaf(a0);
    auto v = leaf(v0);
    backward_counting(cat<1>(a.t(), v.unsqueeze<1>()));
    check_grad(a, {1, 4, 7, 2, 5, 8});
    check_grad(v, {3, 6, 9});
  }
  {  // untracked operands around a tracked one
    auto a = leaf(a0);
    const M u = tensor<double>({{9.0, 8.0, 7.0}});
    auto y = cat<0>(u, a, u);
    backward_counting(y);
    check_grad(a, {4, 5, 6, 7, 8, 9});
    CHECK_FALSE(u.requires_grad());
  }
  {  // a float leaf promoted to double by cat: its gradient comes back as float
    Tensor<float, dyn_shape<2>> af = a0.to<float>();
    af.requires_grad_();
    auto b = leaf(b0);
    auto y = cat<0>(af, b);
    STATIC_REQUIRE(std::is_same_v<decltype(y)::value_type, double>);
    backward_counting(y);
    check_grad(af, {1, 2, 3, 4, 5, 6});
    check_grad(b, {7, 8, 9});
  }
  {
    auto a = leaf(a0);
    backward_counting(stack<0>(a, a * a));
    check_grad(a, {8, -14, 39, 34, 10.5, -12});
  }
  {
    auto a = leaf(a0);
    backward_counting(stack<2>(a, a * 3.0));
    check_grad(a, {7, 15, 23, 31, 39, 47});
  }
}

TEST_CASE("autograd joins: repeat, tile, repeat_interleave, diag against PyTorch", "[autograd]") {
  const M a0 = tensor<double>({{0.5, -1.0, 2.0}, {1.5, 0.25, -0.75}});
  const V v0 = tensor<double>({0.5, -2.0, 1.25});
  auto grad_of = [](const auto& x0, auto f, std::initializer_list<double> expected) {
    auto x = leaf(x0);
    backward_counting(eval(f(x)));
    check_grad(x, expected);
  };
  grad_of(a0, [](const M& a) { return repeat(a, 2, 1, 2); }, {34, 38, 42, 58, 62, 66});
  grad_of(a0, [](const M& a) { return repeat(a.t(), 2, 2); }, {32, 48, 64, 36, 52, 68});
  grad_of(a0, [](const M& a) { return tile(a, 3); }, {12, 15, 18, 39, 42, 45});
  grad_of(a0, [](const M& a) { return repeat_interleave<1>(a, 2); }, {3, 7, 11, 15, 19, 23});
  grad_of(a0, [](const M& a) { return repeat_interleave(a.t(), 2); }, {3, 11, 19, 7, 15, 23});
  grad_of(a0, [](const M& a) { return repeat_interleave<0>(a * 2.0, I1(tensor<std::int64_t>({3, 1}))); },
          {24, 30, 36, 20, 22, 24});
  grad_of(a0, [](const M& a) { return repeat_interleave<1>(a, I1(tensor<std::int64_t>({0, 2, 1}))); },
          {0, 3, 3, 0, 9, 6});
  grad_of(v0, [](const V& v) { return diag(v, 1); }, {2, 7, 12});
  grad_of(v0, [](const V& v) { return diag(v, -2); }, {11, 17, 23});
  grad_of(v0, [](const V& v) { return diag(v * v); }, {1, -20, 22.5});
}

TEST_CASE("autograd joins: finite differences", "[autograd]") {
  const M a = filled<2>({3, 4}, -1.5, 1.5), b = filled<2>({2, 4}, -1, 1, 0.3), c = filled<2>({3, 2}, -1, 1, 0.6);
  const V v = filled<1>({4}, -1, 1, 0.2);
  gradcheck([](const auto& x, const auto& y) { return cat<0>(x * x, sin(y), x); }, a, b);
  gradcheck([](const auto& x, const auto& y) { return cat<1>(x, exp(y)); }, a, c);
  gradcheck([](const auto& x, const auto& y) { return cat<1>(x.t(), y.t()); }, c, M(filled<2>({4, 2}, -1, 1)));
  gradcheck([](const auto& x) { return cat<0>(x, x.template narrow<0>(0, 0), x * 3.0); }, a);  // an empty operand
  gradcheck([](const auto& x, const auto& y) { return cat<1>(std::vector<M>{x, M(y * y), x}); }, a, c);
  const Tensor<std::int64_t, dyn_shape<2>> ints = tensor<std::int64_t>({{1, 2, 3, 4}});
  gradcheck([&](const auto& x) { return cat<0>(ints, x); }, a);  // an int64 operand: promoted, untracked
  gradcheck([](const auto& x, const auto& y) { return stack<1>(x, y * x); }, a, M(filled<2>({3, 4}, -1, 1, 0.5)));
  gradcheck([](const auto& x) { return split<1>(x, 3)[1] * cat<1>(split<1>(x, 3)[0].template narrow<1>(0, 1)); }, a);
  gradcheck([](const auto& x) { return repeat(x, 2, 3); }, a);
  gradcheck([](const auto& x) { return repeat(x.t(), 1, 2, 0); }, a);  // a zero count, a new dim
  gradcheck([](const auto& x) { return tile(x * x, 2, 1, 2); }, v);
  gradcheck([](const auto& x) { return repeat_interleave<0>(x.t(), 3); }, a);
  gradcheck([](const auto& x) { return repeat_interleave<1>(x, I1(tensor<std::int64_t>({2, 0, 1, 3}))); }, a);
  gradcheck([](const auto& x) { return repeat_interleave<1>(x, I1(tensor<std::int64_t>({2}))); }, a);
  gradcheck([](const auto& x) { return diag(x); }, v);
  gradcheck([](const auto& x) { return diag(x * x, 3); }, v);
  gradcheck([](const auto& x) { return diag(x.template slice<0>(0, 4, 2), -1); }, v);  // a strided vector
  gradcheck([](const auto& x) { return diag(x.t(), 1); }, a);                            // 2-D: a view
}

TEST_CASE("autograd joins: repeated use, no_grad, retain_graph", "[autograd]") {
  M x = filled<2>({2, 3}, -1, 1);
  x.requires_grad_();
  // the same leaf through cat, repeat and diag in one loss: the gradients add up
  Tensor<double, shape<>> loss = sum(cat<0>(x, x)) + sum(repeat(x, 2, 1) * 0.5) + sum(diag(x.template select<0>(1)));
  loss.backward();
  const auto g = x.grad();
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) CHECK(g(i, j) == Approx(i == 1 ? 4.0 : 3.0));
  {
    no_grad off;
    CHECK_FALSE(cat<0>(x, x).requires_grad());
    CHECK_FALSE(repeat(x, 2, 1).requires_grad());
    CHECK_FALSE(diag(x.template select<0>(0)).requires_grad());
  }
  // a second backward through a freed cat node names it
  M y = cat<0>(x * x, x);
  y.backward(counting_seed(y));
  CHECK_THROWS_WITH(y.backward(counting_seed(y)), Catch::Contains("node 'cat'"));
}

TEST_CASE("autograd joins: forward mode (jvp)", "[autograd]") {
  const M a = filled<2>({3, 4}, -1.5, 1.5), b = filled<2>({2, 4}, -1, 1, 0.3);
  jvpcheck([](const auto& x, const auto& y) { return cat<0>(x * x, y, x); }, a, b);
  jvpcheck([](const auto& x, const auto& y) { return stack<2>(x, x * 2.0) * y.template narrow<0>(0, 1).template unsqueeze<2>(); },
           a, b);
  jvpcheck([](const auto& x) { return repeat(sin(x), 2, 1); }, a);
  jvpcheck([](const auto& x) { return diag(x.template select<0>(1), 1) * 2.0; }, a);
}
