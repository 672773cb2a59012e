// Eager autograd behaviour: accumulation, retain_graph, no_grad / enable_grad, detach, identity of
// copies, views and casts on the way, in-place rules, and the errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <thread>

#include <tenet/tenet.hpp>

using namespace tenet;
using V = Tensor<double, dyn_shape<1>>;
using M = Tensor<double, dyn_shape<2>>;
using S0 = Tensor<double, shape<>>;

namespace {
V vec(std::initializer_list<double> v) {
  V t({static_cast<std::int64_t>(v.size())});
  std::int64_t i = 0;
  for (double x : v) t(i++) = x;
  return t;
}
M mat(std::int64_t r, std::int64_t c) {
  M t({r, c});
  for (std::int64_t i = 0; i < r * c; ++i) t.data()[i] = 0.5 + 0.25 * static_cast<double>(i);
  return t;
}
/// d loss / d t[i] by central differences of loss() (a scalar expression, evaluated without
/// recording).
template <class F, class Tn>
double central_difference(F& loss, Tn& t, std::int64_t i) {
  auto loss_at = [&](double d) {
    const no_grad ng;
    const double keep = t.data()[i];
    t.data()[i] = keep + d;
    const double v = S0(loss())();
    t.data()[i] = keep;
    return v;
  };
  return (loss_at(1e-6) - loss_at(-1e-6)) / 2e-6;
}
/// The first 20 elements of w's and x's gradients against central differences of loss().
template <class F>
void check_central_differences(F loss, M& w, M& x) {
  for (std::int64_t i = 0; i < 20; ++i) {
    CHECK(w.grad().data()[i] == Approx(central_difference(loss, w, i)).epsilon(1e-6));
    CHECK(x.grad().data()[i] == Approx(central_difference(loss, x, i)).epsilon(1e-6));
  }
}
/// The kernels l.backward() launches.
inline std::int64_t backward_kernel_count(S0& l) {
  auto& kernels = detail::kernels_launched();
  kernels = 0;
  l.backward();
  return static_cast<std::int64_t>(kernels);
}
}  // namespace

TEST_CASE("autograd: leaves, flags and identity of copies", "[autograd]") {
  V x = vec({1, 2, 3});
  CHECK_FALSE(x.requires_grad());
  CHECK(x.is_leaf());
  CHECK_FALSE(x.grad().defined());
  auto alias = x;  // made before requires_grad_: a handle without an autograd identity yet
  x.requires_grad_();
  auto copy = x;  // same identity
  CHECK(copy.requires_grad());
  S0 l = sum(copy * copy);
  CHECK_FALSE(l.is_leaf());
  CHECK(l.requires_grad());
  l.backward();
  CHECK(x.grad()(2) == 6.0);
  CHECK(copy.grad()(2) == 6.0);
  CHECK_FALSE(alias.requires_grad());
  // requires_grad_ on an integer tensor, and on a non-leaf
  Tensor<std::int64_t, dyn_shape<1>> i({3});
  CHECK_THROWS_AS(i.requires_grad_(), dtype_error);
  CHECK_THROWS_AS(l.requires_grad_(false), value_error);
  // set_grad replaces and checks sizes, an undefined tensor clears
  x.set_grad(vec({7, 8, 9}));
  CHECK(x.grad()(0) == 7.0);
  CHECK_THROWS_AS(x.set_grad(vec({1, 2})), shape_error);
  x.set_grad(V());
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("autograd: accumulation, retain_graph and the second-backward error", "[autograd]") {
  V x = vec({1, 2, 3});
  x.requires_grad_();
  S0 l = sum(x * x * x);
  l.backward(true);
  CHECK(x.grad()(1) == 12.0);
  l.backward();  // retained: runs again, accumulates
  CHECK(x.grad()(1) == 24.0);
  try {
    l.backward();
    FAIL("a third backward through a freed graph must throw");
  } catch (const value_error& e) {
    CHECK(std::string(e.what()).find("retain_graph") != std::string::npos);
  }
  // a fresh forward accumulates into the same .grad
  S0 l2 = sum(x);
  l2.backward();
  CHECK(x.grad()(1) == 25.0);
}

TEST_CASE("autograd: non-scalar backward needs a seed", "[autograd]") {
  V x = vec({1, 2, 3});
  x.requires_grad_();
  V y = x * 2.0;
  try {
    y.backward();
    FAIL("non-scalar backward without a seed must throw");
  } catch (const value_error& e) {
    CHECK(std::string(e.what()).find("seed") != std::string::npos);
  }
  CHECK_THROWS_AS(y.backward(vec({1, 2})), shape_error);
  y.backward(vec({1, 10, 100}));
  CHECK(x.grad()(2) == 200.0);
  // backward of a tensor that does not require grad
  V z = vec({1});
  CHECK_THROWS_AS(z.backward(), value_error);
}

TEST_CASE("autograd: chains of recorded expressions, a diamond, a leaf used twice", "[autograd]") {
  V x = vec({0.5, 1.0, 1.5});
  x.requires_grad_();
  V a = exp(x);       // node 1
  V b = a * x;        // node 2 (reads a and x)
  V c = sin(a) + b;   // node 3 (reads a twice through two paths)
  S0 l = sum(c * c);  // node 4
  l.backward();
  for (std::int64_t i = 0; i < 3; ++i) {
    const double xi = x(i), ai = std::exp(xi), ci = std::sin(ai) + ai * xi;
    const double dc = 2 * ci;
    const double da = dc * (std::cos(ai) + xi);
    const double dx = da * ai + dc * ai;
    CHECK(x.grad()(i) == Approx(dx).epsilon(1e-12));
  }
  CHECK_FALSE(a.grad().defined());  // non-leaf: no .grad (as PyTorch without retain_grad)
}

TEST_CASE("autograd: no_grad, enable_grad, thread-local mode, detach", "[autograd]") {
  V x = vec({1, 2});
  x.requires_grad_();
  CHECK(is_grad_enabled());
  {
    no_grad off;
    CHECK_FALSE(is_grad_enabled());
    V y = x * 3.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
    {
      enable_grad on;
      V z = x * 3.0;
      CHECK(z.requires_grad());
    }
    CHECK_FALSE(is_grad_enabled());
    bool other_thread = false;
    std::thread t([&] { other_thread = is_grad_enabled(); });
    t.join();
    CHECK(other_thread);  // grad mode is per thread
  }
  CHECK(is_grad_enabled());
  V d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.shares_storage(x));
  S0 l = sum(d * x);  // d is a constant
  l.backward();
  CHECK(x.grad()(1) == 2.0);
}

TEST_CASE("autograd: in-place writes", "[autograd]") {
  V x = vec({1, 2});
  x.requires_grad_();
  CHECK_THROWS_AS(x.copy_(vec({3, 4})), value_error);
  CHECK_THROWS_AS(x += 1.0, value_error);
  {
    no_grad off;  // an optimizer step
    x -= vec({0.5, 0.5});
    x.copy_(x * 2.0);
  }
  CHECK(x(1) == 3.0);
  CHECK(x.requires_grad());
  // an untracked destination may take a value computed from tracked tensors (nothing recorded)
  V buf = vec({0, 0});
  buf.copy_(x * 2.0);
  CHECK_FALSE(buf.requires_grad());
  // the gradient tensor itself can be changed in place (zero_grad)
  S0 l = sum(x * x);
  l.backward();
  x.grad().zero_();
  CHECK(x.grad()(0) == 0.0);
}

TEST_CASE("autograd: views, broadcasts and dtype casts on the way", "[autograd]") {
  M w = mat(2, 3);
  w.requires_grad_();
  auto wt = w.transpose<0, 1>();  // a view: records a view node
  CHECK(wt.requires_grad());
  CHECK_FALSE(wt.is_leaf());
  auto col = wt.slice<0>(1, 3);               // rows 1..2 of wt: columns 1..2 of w, a view of a view
  M y = col * vec({1.0, 10.0});               // broadcast of a vector over the rows
  auto flat = y.reshape<dyn>(4);              // contiguous: a view
  Tensor<float, dyn_shape<1>> f = flat.to<float>();  // a cast, recorded
  Tensor<float, shape<>> l = sum(f * f);
  l.backward();
  // d l / d w[i][j] for j in {1, 2}: 2 y * 10^i (y = w[i][j] * 10^i)
  for (std::int64_t i = 0; i < 2; ++i) {
    CHECK(w.grad()(i, 0) == 0.0);
    for (std::int64_t j = 1; j < 3; ++j) {
      const double s = i == 0 ? 1.0 : 10.0;
      CHECK(w.grad()(i, j) == Approx(2 * w(i, j) * s * s).epsilon(1e-6));
    }
  }
  // reshape of a non-contiguous view copies (clone records), expand broadcasts back with a sum
  M v = mat(2, 3);
  v.requires_grad_();
  auto r = v.transpose<0, 1>().reshape<dyn>(6);
  auto e = v.slice<0>(0, 1).expand<4, -1>();
  S0 l2 = sum(r * r) + sum(e);
  l2.backward();
  CHECK(v.grad()(0, 2) == Approx(2 * v(0, 2) + 4).epsilon(1e-12));
  CHECK(v.grad()(1, 1) == Approx(2 * v(1, 1)).epsilon(1e-12));
  // a scalar leaf broadcast against a matrix gets the sum
  S0 s(sizes_t<0>{});
  s() = 2.0;
  s.requires_grad_();
  M z = mat(2, 2) * s;
  S0 l3 = sum(z);
  l3.backward();
  CHECK(s.grad()() == Approx(0.5 + 0.75 + 1.0 + 1.25));
}

TEST_CASE("autograd: the untracked path records nothing", "[autograd]") {
  V x = vec({1, 2});
  V y = x * 2.0 + 1.0;
  CHECK_FALSE(static_cast<bool>(y.autograd_meta()));
  auto v = y.slice<0>(0, 1);
  CHECK_FALSE(static_cast<bool>(v.autograd_meta()));
  Tensor<std::int64_t, shape<>> am = argmax(y);  // an integer result of a tracked input is not recorded
  x.requires_grad_();
  Tensor<std::int64_t, shape<>> am2 = argmax(x * 1.0);
  CHECK_FALSE(am2.requires_grad());
  CHECK(am() == am2());
}

TEST_CASE("autograd: gradients of permuted, sliced, selected and strided views", "[autograd]") {
  using T3 = Tensor<double, dyn_shape<3>>;
  T3 a({2, 3, 4});
  for (std::int64_t i = 0; i < 24; ++i) a.data()[i] = 0.1 * static_cast<double>(i + 1);
  a.requires_grad_();
  // a permutation covers the base one to one: the gradient is c's values at the permuted places
  auto p = a.permute<2, 0, 1>();  // [4, 2, 3]
  T3 c({4, 2, 3});
  for (std::int64_t i = 0; i < 24; ++i) c.data()[i] = static_cast<double>(i * i % 7) - 3.0;
  S0 l = sum(p * c);
  l.backward();
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 4; ++k) CHECK(a.grad()(i, j, k) == c(k, i, j));
  a.set_grad({});
  // a slice with a step, and a select: zeros where the view does not read
  auto s = a.slice<2>(0, 4, 2);  // [2, 3, 2]: k = 0, 2
  auto r = a.select<1>(2);       // [2, 4]: j = 2
  S0 l2 = sum(s * s) + sum(r) * 3.0;
  l2.backward();
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 4; ++k) {
        const double want = (k % 2 == 0 ? 2 * a(i, j, k) : 0.0) + (j == 2 ? 3.0 : 0.0);
        CHECK(a.grad()(i, j, k) == Approx(want).epsilon(1e-12));
      }
  // views of strided views, as attention's heads out of one qkv tensor: a transpose of a narrow
  // (as many elements as its base) and a step slice of a transpose (fewer: zeros elsewhere)
  a.set_grad({});
  auto v1 = a.narrow<2>(1, 2).transpose<0, 1>();  // [3, 2, 2]: v1(j, i, k) = a(i, j, k + 1)
  auto v2 = a.transpose<0, 2>().slice<0>(0, 4, 3);  // [2, 3, 2]: v2(m, j, i) = a(i, j, 3 m)
  T3 c1({3, 2, 2});
  for (std::int64_t i = 0; i < 12; ++i) c1.data()[i] = static_cast<double>(i % 5) - 1.5;
  S0 l4 = sum(v1 * c1) + sum(v2 * v2);
  l4.backward();
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 4; ++k) {
        const double want = (k >= 1 && k <= 2 ? c1(j, i, k - 1) : 0.0) + (k % 3 == 0 ? 2 * a(i, j, k) : 0.0);
        CHECK(a.grad()(i, j, k) == Approx(want).epsilon(1e-12));
      }
  // a transposed weight in a matmul (linear): the weight's gradient in its own layout
  M w = mat(3, 5), x = mat(4, 5);
  w.requires_grad_();
  S0 l3 = sum(matmul(x, w.transpose<0, 1>()) * matmul(x, w.transpose<0, 1>()));
  l3.backward();
  M y = matmul(x, w.detach().transpose<0, 1>());  // dl/dw = 2 y^T x
  for (std::int64_t o = 0; o < 3; ++o)
    for (std::int64_t i = 0; i < 5; ++i) {
      double want = 0;
      for (std::int64_t b = 0; b < 4; ++b) want += 2 * y(b, o) * x(b, i);
      CHECK(w.grad()(o, i) == Approx(want).epsilon(1e-12));
    }
  CHECK(w.grad().is_contiguous());
}

TEST_CASE("autograd: a subexpression used several times is differentiated once", "[autograd]") {
  // a shared linear(x, w, b) read three times: the backward sums the three gradients and runs
  // its backward (the GEMMs for x and w, b's sum) once. Before stop 46 it ran once per use: 3x the
  // GEMMs (and, under CUDA autocast, three bf16 roundings). (gelu's tanh form, which reads its
  // input four times in its decomposition, was this test's case until gelu got its own
  // derivative at stop 48: the next test.)
  M x = mat(6, 5), w = mat(4, 5), c = mat(6, 4);
  V b = vec({0.1, -0.2, 0.3, -0.4});
  x.requires_grad_(), w.requires_grad_(), b.requires_grad_();
  auto f = [&] {
    auto h = detail::share(linear(x, w, b));
    return sum((h * tanh(h) + h) * c);
  };
  S0 l = f();
  const auto backward_kernels = backward_kernel_count(l);
  INFO("backward kernels: " << backward_kernels);
  CHECK(backward_kernels <= 16);  // 13 measured at stop 48
  check_central_differences(f, w, x);
}

TEST_CASE("autograd: gelu's backward is one expression, torch's gelu_backward", "[autograd]") {
  // gelu carries its derivative (decomp/activations.hpp): the backward of gelu(linear) runs
  // g gelu'(h) as one kernel, then the linear's. Through the decomposition's chain rule it took
  // 45 kernels (stop 46), one per step.
  M x = mat(6, 5), w = mat(4, 5), c = mat(6, 4);
  V b = vec({0.1, -0.2, 0.3, -0.4});
  for (bool tanh_form : {true, false}) {
    INFO("tanh form " << tanh_form);
    x.set_grad(M()), w.set_grad(M()), b.set_grad(V());
    x.requires_grad_(), w.requires_grad_(), b.requires_grad_();
    auto f = [&] {
      return tanh_form ? S0(sum(gelu(linear(x, w, b), approximate_tanh) * c)) : S0(sum(gelu(linear(x, w, b)) * c));
    };
    S0 l = f();
    const auto backward_kernels = backward_kernel_count(l);
    INFO("backward kernels: " << backward_kernels);
    CHECK(backward_kernels <= 10);  // 8 measured at stop 48 (both forms)
    check_central_differences(f, w, x);
  }
}

TEST_CASE("autograd: layer_norm's and rms_norm's backward are torch's formulas, a few kernels", "[autograd]") {
  // autograd keeps the norms whole (prims/composite_rules.hpp): four row reductions and one
  // pointwise kernel for dx, a column sum each for the weight and bias, where the chain rule
  // through the decomposition ran a kernel per step (stop 47: 53 kernels for layer_norm, 26 for rms_norm)
  M x = mat(6, 5), c = mat(6, 5);
  for (std::int64_t i = 0; i < 30; ++i) x.data()[i] = std::sin(1.7 * static_cast<double>(i)) * 2.0;
  V w = vec({0.5, -1.0, 1.5, 2.0, 0.25}), b = vec({0.1, -0.2, 0.3, -0.4, 0.5});
  for (bool rms : {false, true}) {
    INFO("rms_norm " << rms);
    x.set_grad(M()), w.set_grad(V()), b.set_grad(V());
    x.requires_grad_(), w.requires_grad_(), b.requires_grad_();
    auto f = [&] { return rms ? S0(sum(rms_norm(x, w, 1e-5) * c)) : S0(sum(layer_norm(x, w, b) * c)); };
    S0 l = f();
    const auto backward_kernels = backward_kernel_count(l);
    INFO("backward kernels: " << backward_kernels);
    CHECK(backward_kernels <= (rms ? 8 : 10));  // 7 and 9 measured at stop 48
    // central differences: every element of x, w and b
    for (std::int64_t i = 0; i < 30; ++i)
      CHECK(x.grad().data()[i] == Approx(central_difference(f, x, i)).epsilon(1e-6).margin(1e-9));
    for (std::int64_t i = 0; i < 5; ++i) {
      CHECK(w.grad().data()[i] == Approx(central_difference(f, w, i)).epsilon(1e-6).margin(1e-9));
      if (!rms) CHECK(b.grad().data()[i] == Approx(central_difference(f, b, i)).epsilon(1e-6).margin(1e-9));
    }
  }
}

TEST_CASE("autograd: the backward reads the forward's saved values", "[autograd]") {
  // relu(x w1^T + b1) runs as one GEMM with an epilogue; the backward takes relu's output from
  // the forward instead of recomputing the GEMM, so a weight changed after the forward (under
  // no_grad) does not change the gradients of the layers after it, as with PyTorch's saved
  // tensors
  M x = mat(4, 3), w1 = mat(5, 3), w2 = mat(2, 5);
  V b1 = vec({-3.0, -1.0, 0.5, -8.0, 1.0});
  for (std::int64_t i = 0; i < 15; ++i) w1.data()[i] = 0.3 * std::sin(1.7 * static_cast<double>(i));
  w1.requires_grad_();
  w2.requires_grad_();
  auto forward = [&] { return sum(matmul(relu(linear(x, w1, b1)), w2.transpose<0, 1>())); };
  S0 l = forward();
  l.backward();
  const M g_ref = w2.grad().clone(), g1_ref = w1.grad().clone();
  w1.set_grad({});
  w2.set_grad({});
  S0 l2 = forward();
  {
    const no_grad ng;
    w1.fill_(0.0);  // after the forward: the saved relu output is what the backward uses
  }
  const auto backward_kernels = backward_kernel_count(l2);
  for (std::int64_t i = 0; i < 10; ++i) CHECK(w2.grad().data()[i] == g_ref.data()[i]);
  for (std::int64_t i = 0; i < 15; ++i) CHECK(w1.grad().data()[i] == g1_ref.data()[i]);
  // sum's gradient broadcast, the GEMM into relu's output, relu's mask on the saved output and
  // the two weight GEMMs; no forward kernel runs again (recomputing would add the first layer's
  // GEMM)
  CHECK(backward_kernels == 5);
}

// ---------------------------------------------------------------------------------------------
// Saved tensors' versions: a backward never computes a gradient from a value written in place
// after the forward (PyTorch's "modified by an inplace operation"). Expected outcomes and numbers
// are torch 2.15's on the same inputs (float64).
namespace {
/// The message of the value_error f throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const value_error& e) {
    return e.what();
  }
  return "";
}
bool modified_error(const std::string& msg, const std::string& versions) {
  return msg.find("modified by an inplace operation") != std::string::npos && msg.find(versions) != std::string::npos;
}
struct cube_fn {  // custom_function: backward reads its input
  static auto forward(const V& x) { return x * x * x; }
  static auto backward(const V& g, const V& x) { return std::make_tuple(V(g * 3.0 * x * x)); }
};
struct one_param : nn::Module {
  V w;
  explicit one_param(const V& v) : w(v) { register_parameter("w", w); }
};
}  // namespace

TEST_CASE("autograd: version counters count in-place writes through every view", "[autograd]") {
  V x = vec({1, 2, 3});  // element writes (operator()) are not counted, as data_ptr writes in torch
  CHECK(x.version() == 0);
  x.mul_(2.0);
  CHECK(x.version() == 1);
  x.select<0>(0).fill_(1.0);  // through a view
  CHECK(x.version() == 2);
  x.detach() += 1.0;  // detach shares the storage and its counter
  CHECK(x.version() == 3);
  x.zero_();
  CHECK(x.version() == 4);
  x.copy_(vec({1, 2, 3}));
  V alias = x;
  V fresh = x * 2.0;
  CHECK(alias.version() == 5);
  CHECK(fresh.version() == 0);  // an out-of-place result is a new storage
  x += 1.0;
  CHECK(x.version() == 6);
}

TEST_CASE("autograd: a tensor saved for backward and changed in place is an error", "[autograd]") {
  V w = vec({1, 2, 3}), x = vec({4, 5, 6});
  w.requires_grad_();
  SECTION("a constant read by mul, changed after the forward") {
    S0 l = sum(w * x * w);
    x.mul_(10.0);
    CHECK(modified_error(error_of([&] { l.backward(); }), "saved at version 0, now version 1"));
    CHECK_FALSE(w.grad().defined());
  }
  SECTION("a leaf changed under no_grad after the forward") {
    S0 l = sum(w * x * w);
    {
      no_grad off;
      w.sub_(1.0);
    }
    CHECK(modified_error(error_of([&] { l.backward(); }), "saved at version 0, now version 1"));
  }
  SECTION("a write through a view of the saved tensor") {
    M m = mat(2, 3);
    S0 l = sum(w * m);
    m.transpose<0, 1>().select<0>(1).fill_(0.0);
    CHECK(modified_error(error_of([&] { l.backward(); }), "saved at version 0, now version 1"));
    S0 l2 = sum(w * m);
    m.detach().select<0>(0).mul_(2.0);
    CHECK(modified_error(error_of([&] { l2.backward(); }), "saved at version 1, now version 2"));
  }
  SECTION("a leaf changed through detach(), and a saved output (relu's) changed under no_grad") {
    S0 l = sum(w * w);
    w.detach().add_(1.0);
    CHECK(modified_error(error_of([&] { l.backward(); }), "now version 1"));
    V y = relu(w * 2.0);
    {
      no_grad off;
      y.mul_(-1.0);
    }
    S0 l2 = sum(y);
    CHECK(modified_error(error_of([&] { l2.backward(); }), "'maximum'"));
    V z = w * 2.0;  // an intermediate saved by the next node (its mul reads z)
    S0 l3 = sum(z * z);
    {
      no_grad off;
      z.add_(1.0);
    }
    CHECK(modified_error(error_of([&] { l3.backward(); }), "now version 1"));
  }
  SECTION("an optimizer step between a retained graph's backwards") {
    one_param m(w);
    optim::SGD opt(m.parameters(), optim::sgd_options{.lr = 0.1});
    S0 l = sum(m.w * x * m.w);
    l.backward(true);
    opt.step();
    CHECK(m.w.version() == 1);
    CHECK(modified_error(error_of([&] { l.backward(); }), "saved at version 0, now version 1"));
  }
  SECTION("custom_function's inputs") {
    V y = custom_function<cube_fn>::apply(w);
    {
      no_grad off;
      w.add_(1.0);
    }
    S0 l = sum(y);
    CHECK(modified_error(error_of([&] { l.backward(); }), "'custom_function'"));
  }
}

TEST_CASE("autograd: in-place writes that no backward reads are allowed", "[autograd]") {
  V w = vec({1, 2, 3}), x = vec({4, 5, 6});
  w.requires_grad_();
  SECTION("an unrelated tensor") {
    V z = vec({1, 1, 1});
    S0 l = sum(w * x * w);
    z.mul_(10.0);
    l.backward();
    CHECK(w.grad()(0) == 8.0);
    CHECK(w.grad()(1) == 20.0);
    CHECK(w.grad()(2) == 36.0);
  }
  SECTION("values no rule reads: add's operands, mul's and matmul's operand for a gradient not needed") {
    S0 l = sum(w + x);  // add saves nothing
    x.mul_(10.0);
    l.backward();
    CHECK(w.grad()(2) == 1.0);
    w.set_grad({});
    S0 l2 = sum(w * x);  // w is read only for x's gradient, which is not needed
    {
      no_grad off;
      w.mul_(10.0);
    }
    l2.backward();
    CHECK(w.grad()(0) == 40.0);
    CHECK(w.grad()(2) == 60.0);
    M a = mat(2, 3), b({3, 2});
    for (std::int64_t i = 0; i < 6; ++i) b.data()[i] = static_cast<double>(i + 1);
    b.requires_grad_();
    S0 l3 = sum(matmul(a, b));
    {
      no_grad off;
      b.mul_(2.0);
    }
    l3.backward();  // b's gradient reads a only: a^T 1
    const double want[3] = {1.75, 2.25, 2.75};
    for (std::int64_t i = 0; i < 3; ++i) {
      CHECK(b.grad()(i, 0) == want[i]);
      CHECK(b.grad()(i, 1) == want[i]);
    }
  }
  SECTION("an optimizer step after backward, then a new forward") {
    one_param m(w);
    optim::SGD opt(m.parameters(), optim::sgd_options{.lr = 0.1});
    S0 l = sum(m.w * x * m.w);
    l.backward();
    opt.step();
    opt.zero_grad();
    S0 l2 = sum(m.w * x * m.w);  // records the parameter's new version
    l2.backward();
    const double want[3] = {1.5999999999999996, -1.1102230246251565e-15, -7.200000000000003};
    for (std::int64_t i = 0; i < 3; ++i) CHECK(m.w.grad()(i) == Approx(want[i]).margin(1e-13));
  }
}

TEST_CASE("autograd: concurrent loops on separate tensors and writes to one storage", "[autograd]") {
  // each thread trains its own parameter (recording, backward, in-place update): the results are
  // those of the same loop run alone, bit for bit
  auto train = [](double start) {
    V w = vec({start, start + 1, start + 2}), x = vec({0.5, -1.5, 2.0});
    w.requires_grad_();
    for (int s = 0; s < 50; ++s) {
      S0 l = sum(tanh(w * x) * w);
      l.backward();
      {
        no_grad off;
        w -= w.grad() * 0.05;
      }
      w.set_grad({});
    }
    return w.detach().clone();
  };
  const V alone0 = train(0.25), alone1 = train(-0.75);
  V got0, got1;
  std::thread t0([&] { got0 = train(0.25); });
  std::thread t1([&] { got1 = train(-0.75); });
  t0.join();
  t1.join();
  for (std::int64_t i = 0; i < 3; ++i) {
    CHECK(got0(i) == alone0(i));
    CHECK(got1(i) == alone1(i));
  }
  // two threads writing disjoint halves of one storage: every write is counted (atomic counter)
  V buf({64});
  buf.zero_();
  const auto v0 = buf.version();
  auto writer = [&](std::int64_t at) {
    for (int k = 0; k < 500; ++k) buf.narrow<0>(at, 32).add_(1.0);
  };
  std::thread w0(writer, 0), w1(writer, 32);
  w0.join();
  w1.join();
  CHECK(buf.version() == v0 + 1000);
  CHECK(buf(0) == 500.0);
  CHECK(buf(63) == 500.0);
}
