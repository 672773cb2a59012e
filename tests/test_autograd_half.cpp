// Autograd of bfloat16 / float16 tensors, checked twice: against the float gradients of the same
// (rounded) leaf values, and against PyTorch's own 16-bit gradients of the same losses
// (tests/reference/gen_autograd_half.py: torch's CPU kernels in the 16-bit dtype). Each kernel
// computes in float and rounds its result to 16 bits (per prim, forward and backward), and the
// backward of softmax or layer_norm subtracts nearly equal terms, so a gradient may differ from
// the float one by several units in the last place of the 16-bit type at the scale of the
// gradient (its largest entry): measured up to about 6 for bfloat16 and 8 for float16 here; torch
// rounds at other points (a fused kernel rounds once), so against it too the check allows 16. A
// wrong or missing term of a rule is off by the size of the gradient itself.
#include <tenet/tenet.hpp>

#include <catch2/catch.hpp>

#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

using tenet::shape;
using tenet::Tensor;

namespace {

template <class T>
constexpr double ulp16 = std::is_same_v<T, tenet::bfloat16> ? 0x1p-8 : 0x1p-11;

/// Every element of g (16-bit) within k units of T's precision of want (float), at the scale of
/// the largest |want|.
template <class G, class W>
void check_grad(const std::string& what, const G& g, const W& want, double k) {
  using T = typename G::value_type;
  REQUIRE(g.numel() == want.numel());
  auto gc = g.contiguous();
  auto wc = want.contiguous();
  double scale = 0;
  for (std::int64_t i = 0; i < wc.numel(); ++i) scale = std::max(scale, std::fabs(double(wc.data()[i])));
  int bad = 0;
  for (std::int64_t i = 0; i < wc.numel(); ++i) {
    const double w = wc.data()[i], v = double(float(gc.data()[i]));
    const double tol = k * ulp16<T> * scale;
    if (!(std::fabs(v - w) <= tol)) {
      if (bad++ < 3) UNSCOPED_INFO(what << "[" << i << "]: " << v << " against " << w << " (tol " << tol << ")");
    }
  }
  CHECK(bad == 0);
}

/// x (4 x 6), w (5 x 6), b (5): 16-bit leaves (case `name` of autograd_half.txt) and their float
/// copies; f(x, w, b) -> a scalar loss. The gradients are checked against the float ones and
/// against torch's 16-bit ones.
template <class T, class F>
void compare(const std::string& name, F f, double k = 16) {
  const std::string tag = std::is_same_v<T, tenet::bfloat16> ? "_bf16" : "_fp16";
  INFO(name << tag);
  const auto& ref = tenet_test::get_case("autograd_half.txt", name + tag);
  Tensor<float, shape<4, 6>> x0 = tenet_test::make<float, shape<4, 6>>(ref.at("x"));
  Tensor<float, shape<5, 6>> w0 = tenet_test::make<float, shape<5, 6>>(ref.at("w"));
  Tensor<float, shape<5>> b0 = tenet_test::make<float, shape<5>>(ref.at("b"));
  Tensor<T, shape<4, 6>> x = x0.to<T>();
  Tensor<T, shape<5, 6>> w = w0.to<T>();
  Tensor<T, shape<5>> b = b0.to<T>();
  Tensor<float, shape<4, 6>> xf = x.template to<float>();  // the same values, exactly
  Tensor<float, shape<5, 6>> wf = w.template to<float>();
  Tensor<float, shape<5>> bf = b.template to<float>();
  x.requires_grad_();
  w.requires_grad_();
  b.requires_grad_();
  xf.requires_grad_();
  wf.requires_grad_();
  bf.requires_grad_();
  Tensor<T, shape<>> loss = f(x, w, b);
  Tensor<float, shape<>> lossf = f(xf, wf, bf);
  loss.backward();
  lossf.backward();
  CHECK(std::fabs(double(float(loss.item())) - double(lossf.item())) <=
        k * ulp16<T> * std::max(1.0, std::fabs(double(lossf.item()))));
  static_assert(std::is_same_v<typename decltype(x.grad())::value_type, T>, "a 16-bit leaf's gradient is 16-bit");
  const double torch_loss = ref.at("loss").values.at(0);
  CHECK(std::fabs(double(float(loss.item())) - torch_loss) <= k * ulp16<T> * std::max(1.0, std::fabs(torch_loss)));
  check_grad(name + " dx", x.grad(), xf.grad(), k);
  check_grad(name + " dw", w.grad(), wf.grad(), k);
  check_grad(name + " db", b.grad(), bf.grad(), k);
  check_grad(name + " dx against torch", x.grad(), tenet_test::make<float, shape<4, 6>>(ref.at("grad_x")), k);
  check_grad(name + " dw against torch", w.grad(), tenet_test::make<float, shape<5, 6>>(ref.at("grad_w")), k);
  check_grad(name + " db against torch", b.grad(), tenet_test::make<float, shape<5>>(ref.at("grad_b")), k);
}

/// Every case for bfloat16; float16 (the same code, another rounding) takes the first, the
/// softmax and the cross_entropy cases (each case compiles its VJPs for T and for float).
template <class T>
void all_rules() {
  constexpr bool all = std::is_same_v<T, tenet::bfloat16>;
  using tenet::gelu;
  // the scalar multipliers are float: the computation stays in T (a 16-bit tensor times a float
  // scalar keeps the tensor's dtype, as torch)
  compare<T>("linear_gelu", [](const auto& x, const auto& w, const auto& b) {
    return tenet::sum(gelu(tenet::linear(x, w, b)));
  });
  if constexpr (all)
    compare<T>("pointwise_chain", [](const auto& x, const auto& w, const auto& b) {
      auto h = tenet::matmul(x, w.template transpose<0, 1>());
      return tenet::sum(tenet::tanh(h) * tenet::sigmoid(h + b) + tenet::exp(h * 0.25f) / (b * b + 1.0f));
    });
  compare<T>("softmax_mean", [](const auto& x, const auto& w, const auto& b) {
    auto h = tenet::linear(x, w, b);
    return tenet::mean(tenet::softmax<1>(h) * tenet::log_softmax<0>(h));
  });
  if constexpr (all) {
    compare<T>("layer_norm_amax_var", [](const auto& x, const auto& w, const auto& b) {
      auto h = tenet::linear(x, w, b);
      auto n = tenet::layer_norm(h, b, b * 0.5f);  // weight and bias of shape [5]
      return tenet::sum(n * n) + tenet::sum(tenet::amax<1>(h)) + tenet::var(h);
    });
    compare<T>("views", [](const auto& x, const auto& w, const auto& b) {
      auto h = tenet::eval(tenet::linear(x, w, b));  // 4 x 5
      auto r = h.template slice<1>(1, 4).template transpose<0, 1>().template reshape<2, 6>();  // a copy
      return tenet::sum(r * r * 0.1f);
    });
  }
  compare<T>("cross_entropy", [](const auto& x, const auto& w, const auto& b) {
    Tensor<std::int64_t, shape<4>> target = tenet::zeros<std::int64_t, shape<4>>();
    const std::int64_t classes[4] = {0, 3, 4, 1};
    for (int i = 0; i < 4; ++i) target.data()[i] = classes[i];
    return tenet::cross_entropy(tenet::linear(x, w, b), target);
  });
  // a float leaf through a 16-bit cast: the gradient flows back to the float tensor (as torch's .to)
  tenet::manual_seed(12);
  Tensor<float, shape<3, 4>> a = tenet::randn<float, shape<3, 4>>();
  a.requires_grad_();
  Tensor<T, shape<>> l = tenet::sum(tenet::cast<T>(a) * tenet::cast<T>(a));
  l.backward();
  // d/da of sum(c * c), c = T(a): 2c in T (exact), converted back to float
  Tensor<float, shape<3, 4>> want = tenet::cast<float>(tenet::cast<T>(a.detach())) * 2.0f;
  Tensor<float, shape<3, 4>> got = a.grad();
  for (std::int64_t i = 0; i < 12; ++i) CHECK(got.data()[i] == want.data()[i]);
}

}  // namespace

TEST_CASE("autograd of bfloat16 tensors against float gradients of the same values", "[autograd][half]") {
  all_rules<tenet::bfloat16>();
}

TEST_CASE("autograd of float16 tensors against float gradients of the same values", "[autograd][half]") {
  all_rules<tenet::float16>();
}
