// Activation functions (include/tenet/activations.hpp), checked against PyTorch reference data
// (tests/reference/activations.txt, written by tests/reference/gen_activations.py).
#include <tenet/tenet.hpp>

#include "reference.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

using tenet::dyn;
using tenet::shape;
using tenet::Tensor;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;

namespace {

const char* const kFile = "activations.txt";

template <class T, class Expect, class Fn>
void check_unary(const std::string& name, Fn fn) {
  tenet_test::check_unary<T, Expect>(kFile, name, fn);
}

#define ACT(...) [](const auto& x) { return tenet::__VA_ARGS__; }

template <class T>
void all_activations(const std::string& tag) {
  check_unary<T, T>("hardtanh_" + tag, ACT(hardtanh(x)));
  check_unary<T, T>("relu6_" + tag, ACT(relu6(x)));
  check_unary<T, T>("leaky_relu_" + tag, ACT(leaky_relu(x)));
  check_unary<T, T>("elu_" + tag, ACT(elu(x)));
  check_unary<T, T>("selu_" + tag, ACT(selu(x)));
  check_unary<T, T>("celu_" + tag, ACT(celu(x)));
  check_unary<T, T>("softplus_" + tag, ACT(softplus(x)));
  check_unary<T, T>("softsign_" + tag, ACT(softsign(x)));
  check_unary<T, T>("mish_" + tag, ACT(mish(x)));
  check_unary<T, T>("hardswish_" + tag, ACT(hardswish(x)));
  check_unary<T, T>("hardsigmoid_" + tag, ACT(hardsigmoid(x)));
  check_unary<T, T>("logsigmoid_" + tag, ACT(logsigmoid(x)));
  check_unary<T, T>("tanhshrink_" + tag, ACT(tanhshrink(x)));
  check_unary<T, T>("softshrink_" + tag, ACT(softshrink(x)));
  check_unary<T, T>("hardshrink_" + tag, ACT(hardshrink(x)));
}

template <class T>
void all_parameterized(const std::string& tag) {
  check_unary<T, T>("hardtanh_p_" + tag, ACT(hardtanh(x, -2.5, 0.75)));
  check_unary<T, T>("leaky_relu_p_" + tag, ACT(leaky_relu(x, 0.2)));
  check_unary<T, T>("elu_p_" + tag, ACT(elu(x, 0.5)));
  check_unary<T, T>("celu_p_" + tag, ACT(celu(x, 2.0)));
  check_unary<T, T>("softplus_p_" + tag, ACT(softplus(x, 2.0, 10.0)));
  check_unary<T, T>("softshrink_p_" + tag, ACT(softshrink(x, 1.0)));
  check_unary<T, T>("hardshrink_p_" + tag, ACT(hardshrink(x, 3.0)));
}

}  // namespace

TEST_CASE("activations: every op on edge inputs, float32 and float64") {
  all_activations<float>("f32");
  all_activations<double>("f64");
}

TEST_CASE("activations: non-default parameters") {
  all_parameterized<float>("f32");
  all_parameterized<double>("f64");
}

namespace {
/// Runs fn on case `name`'s input of dtype T and checks the result's dtype (the name PyTorch's
/// result has in the reference file) and values.
template <class T, class Fn>
void check_dtype_and_values(const std::string& name, Fn fn) {
  INFO("case " << name);
  const auto& c = get_case(kFile, name);
  const Tensor<T, shape<dyn>> x = make<T, shape<dyn>>(c.at("x"));
  auto e = fn(x);
  using R = tenet::value_type_of<decltype(e)>;
  CHECK(std::string(tenet::name(tenet::dtype_of<R>)) == c.at("out").dtype);
  const Tensor<R, shape<dyn>> y = e;
  check_close(y, c.at("out"));
}

template <class T>
void integer_activations(const std::string& tag) {
  check_dtype_and_values<T>("relu_" + tag, ACT(relu(x)));
  check_dtype_and_values<T>("relu6_" + tag, ACT(relu6(x)));
  check_dtype_and_values<T>("hardtanh_" + tag, ACT(hardtanh(x)));
  check_dtype_and_values<T>("hardtanh_p_" + tag, ACT(hardtanh(x, -1.5, 2.5)));
  check_dtype_and_values<T>("clamp_" + tag, ACT(clamp(x, -1, 1)));
  check_dtype_and_values<T>("clamp_wide_" + tag, ACT(clamp(x, -300, 300)));
  check_dtype_and_values<T>("clamp_float_" + tag, ACT(clamp(x, -2.5, 4.5)));
  check_dtype_and_values<T>("clamp_min_" + tag, ACT(clamp_min(x, -1)));
  check_dtype_and_values<T>("clamp_max_" + tag, ACT(clamp_max(x, 2)));
  check_dtype_and_values<T>("nan_to_num_" + tag, ACT(nan_to_num(x)));
  check_dtype_and_values<T>("softsign_" + tag, ACT(softsign(x)));
  check_dtype_and_values<T>("tanhshrink_" + tag, ACT(tanhshrink(x)));
  check_dtype_and_values<T>("sigmoid_" + tag, ACT(sigmoid(x)));
}
}  // namespace

TEST_CASE("activations: integer and bool inputs give PyTorch's dtype") {
  // relu, relu6, hardtanh and clamp keep the integer dtype (bounds truncated toward zero and
  // saturated to its range: clamp of uint8 at -1 is at 0); softsign, tanhshrink and sigmoid compute
  // in float32; nan_to_num returns the input. (elu, softplus, ... refuse integers at compile time,
  // as torch has no integer kernel: tests/compile_fail/activation_integer.cpp.)
  integer_activations<std::int8_t>("i8");
  integer_activations<std::int16_t>("i16");
  integer_activations<std::int32_t>("i32");
  integer_activations<std::int64_t>("i64");
  integer_activations<std::uint8_t>("u8");
  check_dtype_and_values<bool>("clamp_b", ACT(clamp(x, -1, 1)));
  check_dtype_and_values<bool>("clamp_float_b", ACT(clamp(x, -2.5, 4.5)));
  check_dtype_and_values<bool>("nan_to_num_b", ACT(nan_to_num(x)));
  check_dtype_and_values<bool>("sigmoid_b", ACT(sigmoid(x)));
  static_assert(std::is_same_v<tenet::value_type_of<decltype(tenet::relu6(tenet::arange<std::int64_t>(4) * 2))>, std::int64_t>);
}

TEST_CASE("activations: glu halves along a compile-time dim") {
  SECTION("float32 [4, 6], dims 1, 0 and -1") {
    const auto x = make<float, shape<4, 6>>(get_case(kFile, "glu_dim1_f32").at("x"));
    const Tensor<float, shape<4, dyn>> y1 = tenet::glu<1>(x);
    check_close(y1, get_case(kFile, "glu_dim1_f32").at("out"));
    const Tensor<float, shape<dyn, 6>> y0 = tenet::glu<0>(x);
    check_close(y0, get_case(kFile, "glu_dim0_f32").at("out"));
    const Tensor<float, shape<4, dyn>> ym = tenet::glu<-1>(x);
    check_close(ym, get_case(kFile, "glu_dimm1_f32").at("out"));
  }
  SECTION("float64, on a lazy expression (evaluated first)") {
    const auto& c = get_case(kFile, "glu_dim1_f64");
    const auto x = make<double, shape<4, 6>>(c.at("x"));
    const Tensor<double, shape<4, dyn>> y = tenet::glu<1>(x * 1.0);
    check_close(y, c.at("out"));
  }
  SECTION("odd size throws shape_error naming the size") {
    const Tensor<float, shape<4, 5>> x = tenet::zeros<float, shape<4, 5>>();
    CHECK_THROWS_AS(tenet::glu<1>(x), tenet::shape_error);
    CHECK_THROWS_WITH(tenet::glu<1>(x), Catch::Contains("5"));
    CHECK_NOTHROW(tenet::glu<0>(x));
  }
}

TEST_CASE("activations: gelu on bfloat16 / float16 takes Phi from a fit accurate to 2^-17") {
  // normal_cdf_half against Phi in double (erfc): relative error under 1e-5 wherever Phi(x) is
  // 1e-9 or more, 0 below (|x| > 6), the tails exact at the ends
  double worst = 0;
  for (int i = -8 * 1024; i <= 8 * 1024; ++i) {
    const float x = static_cast<float>(i) / 1024.0f;
    const double want = 0.5 * std::erfc(-static_cast<double>(x) / std::sqrt(2.0));
    const double got = tenet::detail::normal_cdf_half(x);
    if (want < 1e-9) {
      CHECK(got <= 1e-9);
      continue;
    }
    worst = std::max(worst, std::abs(got - want) / want);
  }
  INFO("max relative error " << worst);
  CHECK(worst < 1e-5);
  CHECK(tenet::detail::normal_cdf_half(-7.0f) == 0.0f);
  CHECK(tenet::detail::normal_cdf_half(7.0f) == 1.0f);
  // gelu itself: within one unit in the last place of x * Phi(x) rounded, and the edge values
  Tensor<float, shape<dyn>> x({4097});
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(i - 2048) / 256.0f;
  Tensor<tenet::bfloat16, shape<dyn>> xb = x.to<tenet::bfloat16>();
  Tensor<tenet::float16, shape<dyn>> xh = x.to<tenet::float16>();
  Tensor<tenet::bfloat16, shape<dyn>> yb = tenet::gelu(xb);
  Tensor<tenet::float16, shape<dyn>> yh = tenet::gelu(xh);
  auto gelu_exact = [](double v) { return v * 0.5 * std::erfc(-v / std::sqrt(2.0)); };  // at the rounded input
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    INFO("x = " << x.data()[i]);
    const double eb = gelu_exact(static_cast<float>(xb.data()[i])), eh = gelu_exact(static_cast<float>(xh.data()[i]));
    CHECK(std::abs(static_cast<float>(yb.data()[i]) - eb) <= std::abs(eb) * 0x1p-8 + 1e-8);  // |x| > 6: 0 (as PyTorch)
    CHECK(std::abs(static_cast<float>(yh.data()[i]) - eh) <= std::abs(eh) * 0x1p-11 + 0x1p-24);  // subnormal steps
  }
  Tensor<float, shape<dyn>> e({5});
  const float inf = std::numeric_limits<float>::infinity();
  e.data()[0] = inf, e.data()[1] = -inf, e.data()[2] = std::nanf(""), e.data()[3] = 0.0f, e.data()[4] = -0.0f;
  Tensor<tenet::bfloat16, shape<dyn>> ge = tenet::gelu(e.to<tenet::bfloat16>());
  CHECK(static_cast<float>(ge.data()[0]) == inf);
  CHECK(std::isnan(static_cast<float>(ge.data()[1])));  // -inf * 0, as PyTorch's -inf * 0.5 * (1 + erf)
  CHECK(std::isnan(static_cast<float>(ge.data()[2])));
  CHECK(static_cast<float>(ge.data()[3]) == 0.0f);
  CHECK(!std::signbit(static_cast<float>(ge.data()[3])));
  CHECK(std::signbit(static_cast<float>(ge.data()[4])));
}
