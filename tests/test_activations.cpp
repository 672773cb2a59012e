// Activation functions (include/tenet/activations.hpp), checked against PyTorch reference data
// (tests/reference/activations.txt, written by tests/reference/gen_activations.py).
#include <tenet/tenet.hpp>

#include "reference.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
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

TEST_CASE("activations: int32 input computes in float32") {
  check_unary<std::int32_t, float>("elu_i32", ACT(elu(x)));
  check_unary<std::int32_t, float>("softplus_i32", ACT(softplus(x)));
  check_unary<std::int32_t, float>("mish_i32", ACT(mish(x)));
  check_unary<std::int32_t, float>("hardswish_i32", ACT(hardswish(x)));
  check_unary<std::int32_t, float>("logsigmoid_i32", ACT(logsigmoid(x)));
  check_unary<std::int32_t, float>("relu6_i32", ACT(relu6(x)));
  const Tensor<std::int32_t, shape<3>> xi = tenet::arange<std::int32_t>(3).template reshape<3>();
  static_assert(std::is_same_v<tenet::value_type_of<decltype(tenet::selu(xi))>, float>);
  static_assert(std::is_same_v<tenet::value_type_of<decltype(tenet::glu<0>(tenet::arange<std::int32_t>(4)))>, float>);
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
