// A compiled training step: compile(fn) with fn returning backward_of(loss) evaluates the loss and
// its backward as one graph. Its gradients must equal eager autograd's, and the forward values the
// backward needs must be computed once (fewer kernels than the eager backward of one expression,
// which recomputes them).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>

#include <tenet/compile.hpp>
#include <tenet/tenet.hpp>

using namespace tenet;
using M2 = Tensor<float, dyn_shape<2>>;
using V1 = Tensor<float, dyn_shape<1>>;

namespace {

double max_rel_diff(const M2& a, const M2& b) {
  double m = 0;
  for (std::int64_t i = 0; i < a.sizes()[0]; ++i)
    for (std::int64_t j = 0; j < a.sizes()[1]; ++j) {
      const double x = a(i, j), y = b(i, j);
      m = std::max(m, std::abs(x - y) / (1e-6 + std::abs(y)));
    }
  return m;
}
double max_rel_diff(const V1& a, const V1& b) {
  double m = 0;
  for (std::int64_t i = 0; i < a.sizes()[0]; ++i)
    m = std::max(m, std::abs(double(a(i)) - double(b(i))) / (1e-6 + std::abs(double(b(i)))));
  return m;
}

/// max |a - b| / (1e-6 + |b|) of two tensors of any layout (float or double), in double.
template <class A, class B>
double max_rel(const A& a, const B& b) {
  const auto ac = a.contiguous();
  const auto bc = b.contiguous();
  double m = 0;
  for (std::int64_t i = 0; i < ac.numel(); ++i) {
    const double x = ac.data()[i], y = bc.data()[i];
    m = std::max(m, std::abs(x - y) / (1e-6 + std::abs(y)));
  }
  return m;
}

struct mlp {
  M2 w1, w2;
  V1 b1, b2;
  mlp() {
    manual_seed(11);
    w1 = randn<float, dyn_shape<2>>(32, 20) * 0.2f;
    b1 = randn<float, dyn_shape<1>>(32) * 0.1f;
    w2 = randn<float, dyn_shape<2>>(5, 32) * 0.2f;
    b2 = randn<float, dyn_shape<1>>(5) * 0.1f;
    for (auto* p : {&w1, &w2}) p->requires_grad_();
    for (auto* p : {&b1, &b2}) p->requires_grad_();
  }
  /// mean cross-entropy of a one-hot target, written as one expression
  auto loss(const M2& x, const M2& onehot) const {
    auto logits = linear(gelu(linear(x, w1, b1)), w2, b2);
    return mean(sum<1>(-log_softmax<-1>(logits) * onehot));
  }
  void zero() {
    for (auto* p : {&w1, &w2}) p->set_grad({});
    for (auto* p : {&b1, &b2}) p->set_grad({});
  }
};

}  // namespace

TEST_CASE("compile: a training step's gradients equal eager autograd's", "[compile][autograd]") {
  mlp m;
  M2 x = randn<float, dyn_shape<2>>(16, 20);
  M2 onehot = zeros<float, dyn_shape<2>>(16, 5);
  for (std::int64_t i = 0; i < 16; ++i) onehot(i, (i * 3) % 5) = 1.0f;

  // eager: the loss as one recorded expression, then backward
  auto& kernels = detail::kernels_launched();
  kernels = 0;
  Tensor<float, shape<>> eager_loss = m.loss(x, onehot);
  eager_loss.backward();
  const std::int64_t eager_kernels = kernels;
  const M2 gw1 = m.w1.grad().clone(), gw2 = m.w2.grad().clone();
  const V1 gb1 = m.b1.grad().clone(), gb2 = m.b2.grad().clone();
  m.zero();

  auto step = compile([&](const M2& in, const M2& t) { return backward_of(m.loss(in, t)); },
                      {.mode = compile_mode::reduce_overhead, .fullgraph = true});
  for (int call = 0; call < 3; ++call) {
    kernels = 0;
    const auto loss = step(x, onehot);
    const std::int64_t compiled_kernels = kernels;
    INFO("call " << call << ": eager " << eager_kernels << " kernels, compiled " << compiled_kernels);
    CHECK(std::abs(loss.item() - eager_loss.item()) <= 1e-6f * std::abs(eager_loss.item()));
    REQUIRE(m.w1.grad().defined());
    CHECK(max_rel_diff(m.w1.grad(), gw1) < 1e-4);
    CHECK(max_rel_diff(m.w2.grad(), gw2) < 1e-4);
    CHECK(max_rel_diff(m.b1.grad(), gb1) < 1e-4);
    CHECK(max_rel_diff(m.b2.grad(), gb2) < 1e-4);
    // the forward's GEMMs and softmax are reused by the backward, not recomputed
    CHECK(compiled_kernels < eager_kernels);
    CHECK_FALSE(loss.requires_grad());
    m.zero();
  }
  // gradients accumulate across steps, as backward() does
  (void)step(x, onehot);
  (void)step(x, onehot);
  CHECK(max_rel_diff(m.b2.grad(), V1(gb2 * 2.0f)) < 1e-4);
  m.zero();
}

TEST_CASE("compile: backward_of a loss with nothing to differentiate, and outside grad mode", "[compile][autograd]") {
  M2 a = randn<float, dyn_shape<2>>(3, 4);
  auto f = compile([](const M2& x) { return backward_of(sum(x * x)); });
  CHECK(f(a).item() == Approx(eval(sum(a * a)).item()));
  M2 w = randn<float, dyn_shape<2>>(3, 4);
  w.requires_grad_();
  auto g = compile([&](const M2& x) { return backward_of(sum(x * w)); });
  {
    no_grad off;
    (void)g(a);
    CHECK_FALSE(w.grad().defined());
  }
  (void)g(a);
  REQUIRE(w.grad().defined());
  CHECK(max_rel_diff(w.grad(), a) < 1e-6);
}

TEST_CASE("compile: a training step through embedding(padding_idx) leaves the padding row's gradient zero", "[compile][autograd]") {
  Tensor<std::int64_t, dyn_shape<1>> idx({5});
  const std::int64_t iv[] = {3, 0, 3, 1, 3};
  for (int i = 0; i < 5; ++i) idx.data()[i] = iv[i];
  M2 u = randn<float, dyn_shape<2>>(5, 2);
  M2 w = randn<float, dyn_shape<2>>(4, 2);
  w.requires_grad_();
  auto step = compile([&](const M2& t) { return backward_of(sum(embedding(idx, w, 3) * t)); });
  (void)step(u);
  const M2 compiled = w.grad().clone();
  w.set_grad(M2());
  Tensor<float, shape<>> loss = sum(embedding(idx, w, 3) * u);
  loss.backward();
  CHECK(max_rel_diff(compiled, w.grad()) == 0.0);
  CHECK(compiled(3, 0) == 0.0f);
  CHECK(compiled(3, 1) == 0.0f);
  CHECK(compiled(0, 0) == u(1, 0));
}

// The backward of bias + gelu in a compiled step: dpre = g * gelu'(pre) and db = the row sums of
// dpre come out of ONE multi-output kernel (schedule/backward_fusion.hpp), gelu's inner values
// recomputed in the loop. Eager autograd runs one kernel per prim of gelu's decomposition.
namespace {
template <class T>
void check_bias_gelu_backward(double tol) {
  using X2 = Tensor<T, dyn_shape<2>>;
  using B1 = Tensor<T, dyn_shape<1>>;
  using U2 = Tensor<T, shape<dyn, 48>>;  // another type than pre's: its position is not merged with pre's
  manual_seed(5);
  X2 pre = randn<T, dyn_shape<2>>(70, 48);
  B1 b = randn<T, dyn_shape<1>>(48);
  U2 u = randn<T, shape<dyn, 48>>(70);
  pre.requires_grad_();
  b.requires_grad_();
  auto loss = [&](const X2& p) { return sum(gelu(p + b) * u); };
  Tensor<T, shape<>> eager_loss = loss(pre);
  eager_loss.backward();
  const X2 gpre = pre.grad().clone();
  const B1 gb = b.grad().clone();
  pre.set_grad({});
  b.set_grad({});

  auto& kernels = detail::kernels_launched();
  kernels = 0;
  {
    no_grad off;
    (void)eval(loss(pre));
  }
  const std::int64_t forward = kernels;
  auto step = compile([&](const X2& p) { return backward_of(loss(p)); });
  for (int call = 0; call < 2; ++call) {
    kernels = 0;
    (void)step(pre);
    // backward: the sum's gradient broadcast to pre's sizes (1), then bias + gelu (1)
    CHECK(kernels - forward == 2);
    CHECK(max_rel(pre.grad(), gpre) <= tol);
    CHECK(max_rel(b.grad(), gb) <= tol);
    pre.set_grad({});
    b.set_grad({});
  }
}
}  // namespace

TEST_CASE("compile: the backward of bias + gelu is one kernel, with eager's gradients", "[compile][autograd]") {
  const detail::ag::fused_backward_scope fused(true);
  check_bias_gelu_backward<float>(1e-6);
  check_bias_gelu_backward<double>(1e-12);
}

// Composites with their own derivative inside a compiled step: sigmoid (a pointwise composite the
// fused loop runs) joins the backward's pointwise region, softplus and asinh (no fused-loop form)
// are the region's inputs, differentiated by their own rule. Gradients as eager's, and finite where
// the decompositions' chain rule is 0 * inf (softplus of 100 and sigmoid of -100 in float32).
TEST_CASE("compile: a step through composites with their own derivative", "[compile][autograd]") {
  using X2 = Tensor<float, dyn_shape<2>>;
  using B1 = Tensor<float, dyn_shape<1>>;
  manual_seed(9);
  X2 pre = randn<float, dyn_shape<2>>(6, 5);
  pre.data()[0] = 100.0f;
  pre.data()[1] = -100.0f;
  B1 b = randn<float, dyn_shape<1>>(5);
  pre.requires_grad_();
  b.requires_grad_();
  auto loss = [&](const X2& p) { return sum(sigmoid(p + b) * 2.0f + softplus(p) + asinh(p * b)); };
  Tensor<float, shape<>> eager_loss = loss(pre);
  eager_loss.backward();
  const X2 gpre = pre.grad().clone();
  const B1 gb = b.grad().clone();
  CHECK(std::isfinite(gpre.data()[0]));
  CHECK(std::isfinite(gpre.data()[1]));
  pre.set_grad({});
  b.set_grad({});
  const detail::ag::fused_backward_scope fused(true);
  auto step = compile([&](const X2& p) { return backward_of(loss(p)); });
  (void)step(pre);
  CHECK(max_rel(pre.grad(), gpre) <= 1e-6);
  CHECK(max_rel(b.grad(), gb) <= 1e-6);
}
