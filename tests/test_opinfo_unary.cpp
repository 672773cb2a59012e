// The OpInfo-style table, unary pointwise ops: one row per op and dtype, each run on the samples of
// tests/opinfo.hpp against PyTorch (tests/reference/gen_opinfo.py). The rows mirror gen_opinfo.py's
// UNARY list; a row without a reference case fails.
#include <catch2/catch.hpp>

#include <tenet/tenet.hpp>

#include "opinfo.hpp"

using namespace tenet_test::opinfo;

// every float row also names bfloat16 and float16 (run by the CUDA half program only: opinfo.hpp)
#define ROW_F(NAME, ...)                                                                           \
  unary<float>(#NAME, OPINFO_FN1(NAME), ##__VA_ARGS__), unary<double>(#NAME, OPINFO_FN1(NAME)), \
      unary<tenet::bfloat16>(#NAME, OPINFO_FN1(NAME)), unary<tenet::float16>(#NAME, OPINFO_FN1(NAME))
#define ROW_FI(NAME, I, ...) ROW_F(NAME, ##__VA_ARGS__), unary<I>(#NAME, OPINFO_FN1(NAME))

TEST_CASE("opinfo: unary math", "[opinfo]") {
  ROW_FI(neg, std::int32_t);
  ROW_FI(abs, std::int32_t);
  ROW_FI(exp, std::int64_t);
  ROW_FI(exp2, std::int64_t);
  ROW_F(expm1);
  ROW_FI(log, std::int64_t);
  ROW_F(log2);
  ROW_FI(log10, std::int64_t);
  ROW_F(log1p);
  ROW_FI(sqrt, std::int64_t);
  ROW_F(rsqrt);
  ROW_F(erf);
  ROW_F(reciprocal);
  ROW_FI(sign, std::int32_t);
  ROW_F(sgn);
  ROW_FI(square, std::int32_t);
  ROW_FI(positive, std::int32_t);
}

TEST_CASE("opinfo: unary trigonometric and hyperbolic", "[opinfo]") {
  ROW_FI(sin, std::int64_t);
  ROW_F(cos);
  ROW_F(tan);
  ROW_F(tanh);
  ROW_FI(atan, std::int64_t);
  ROW_F(asin);
  ROW_F(acos);
  ROW_FI(sinh, std::int64_t);
  ROW_F(cosh);
  ROW_F(asinh);
  ROW_F(acosh);
  ROW_F(atanh);
  ROW_F(deg2rad);
  ROW_F(rad2deg);
  ROW_F(sinc);
}

TEST_CASE("opinfo: unary rounding, classification and logical", "[opinfo]") {
  ROW_FI(floor, std::int32_t);
  ROW_FI(ceil, std::int32_t);
  ROW_F(round);
  ROW_F(trunc);
  ROW_F(frac);
  ROW_F(logit);
  unary<float>("logit_eps", [](const auto& x) { return tenet::logit(x, 0.05); });
  unary<double>("logit_eps", [](const auto& x) { return tenet::logit(x, 0.05); });
  unary<tenet::bfloat16>("logit_eps", [](const auto& x) { return tenet::logit(x, 0.05); });
  unary<tenet::float16>("logit_eps", [](const auto& x) { return tenet::logit(x, 0.05); });
  ROW_F(isnan);
  ROW_FI(isinf, std::int32_t);
  ROW_F(isfinite);
  ROW_F(nan_to_num);
  ROW_FI(logical_not, std::int32_t);
  unary<bool>("logical_not", OPINFO_FN1(logical_not));
  unary<std::int32_t>("bitwise_not", OPINFO_FN1(bitwise_not));
  unary<std::int64_t>("bitwise_not", OPINFO_FN1(bitwise_not));
  unary<bool>("bitwise_not", OPINFO_FN1(bitwise_not));
}

TEST_CASE("opinfo: activations", "[opinfo]") {
  ROW_FI(relu, std::int32_t);
  ROW_F(sigmoid);
  ROW_F(silu);
  ROW_F(gelu);
  ROW_F(hardtanh);
  ROW_F(relu6);
  ROW_F(leaky_relu);
  ROW_F(elu);
  ROW_F(selu);
  ROW_F(celu);
  ROW_F(softplus);
  ROW_F(mish);
  ROW_F(hardsigmoid);
  ROW_F(logsigmoid);
  ROW_F(tanhshrink);
  ROW_F(softshrink);
  ROW_F(hardshrink);
}
