// The OpInfo-style table, binary pointwise ops (see tests/opinfo.hpp): one row per op and dtype,
// mirroring gen_opinfo.py's BINARY list, plus the error inputs.
#include <catch2/catch.hpp>

#include <tenet/tenet.hpp>

#include "opinfo.hpp"

using namespace tenet_test::opinfo;

// every float row also names bfloat16 and float16 (run by the CUDA half program only: opinfo.hpp)
#define ROW_F(NAME, ...)                                                                             \
  binary<float>(#NAME, OPINFO_FN2(NAME), ##__VA_ARGS__), binary<double>(#NAME, OPINFO_FN2(NAME)), \
      binary<tenet::bfloat16>(#NAME, OPINFO_FN2(NAME)), binary<tenet::float16>(#NAME, OPINFO_FN2(NAME))
#define ROW_FI(NAME, I, ...) ROW_F(NAME, ##__VA_ARGS__), binary<I>(#NAME, OPINFO_FN2(NAME))

TEST_CASE("opinfo: binary arithmetic", "[opinfo]") {
  ROW_FI(add, std::int32_t);
  ROW_FI(sub, std::int32_t);
  ROW_FI(mul, std::int32_t);
  binary<bool>("mul", OPINFO_FN2(mul));
  ROW_FI(div, std::int32_t);
  ROW_FI(remainder, std::int32_t);
  ROW_FI(fmod, std::int32_t);
  ROW_FI(floor_divide, std::int32_t);
  ROW_F(pow);
  ROW_FI(float_power, std::int32_t);
  ROW_FI(maximum, std::int32_t);
  ROW_FI(minimum, std::int32_t);
  ROW_FI(fmax, std::int32_t);
  ROW_FI(fmin, std::int32_t);
  auto rsub2 = [](const auto& a, const auto& b) { return tenet::rsub(a, b, 2.0); };
  binary<float>("rsub", rsub2), binary<double>("rsub", rsub2), binary<std::int32_t>("rsub", rsub2);
  binary<tenet::bfloat16>("rsub", rsub2), binary<tenet::float16>("rsub", rsub2);
}

TEST_CASE("opinfo: binary comparisons and logical", "[opinfo]") {
  ROW_FI(eq, std::int32_t);
  ROW_FI(ne, std::int32_t);
  ROW_FI(lt, std::int32_t);
  ROW_FI(le, std::int32_t);
  ROW_FI(gt, std::int32_t);
  ROW_FI(ge, std::int32_t);
  ROW_FI(logical_and, std::int32_t);
  ROW_FI(logical_or, std::int32_t);
  ROW_FI(logical_xor, std::int32_t);
  binary<bool>("logical_and", OPINFO_FN2(logical_and));
  binary<bool>("logical_or", OPINFO_FN2(logical_or));
  binary<bool>("logical_xor", OPINFO_FN2(logical_xor));
  binary<std::int32_t>("bitwise_and", OPINFO_FN2(bitwise_and));
  binary<std::int64_t>("bitwise_and", OPINFO_FN2(bitwise_and));
  binary<bool>("bitwise_and", OPINFO_FN2(bitwise_and));
  binary<std::int32_t>("bitwise_or", OPINFO_FN2(bitwise_or));
  binary<std::int64_t>("bitwise_or", OPINFO_FN2(bitwise_or));
  binary<bool>("bitwise_or", OPINFO_FN2(bitwise_or));
  binary<std::int32_t>("bitwise_xor", OPINFO_FN2(bitwise_xor));
  binary<std::int64_t>("bitwise_xor", OPINFO_FN2(bitwise_xor));
  binary<bool>("bitwise_xor", OPINFO_FN2(bitwise_xor));
}

TEST_CASE("opinfo: binary transcendental", "[opinfo]") {
  ROW_FI(atan2, std::int32_t);
  ROW_F(hypot);
  ROW_FI(copysign, std::int32_t);
  ROW_F(logaddexp);
  ROW_F(logaddexp2);
  ROW_F(xlogy);
  ROW_FI(heaviside, std::int32_t);
}

#if !defined(TENET_OPINFO_ON_CUDA)  // host tensors: the CPU program only (the CUDA ones build without CPU kernels)
TEST_CASE("opinfo: error inputs", "[opinfo]") {
  const auto a = tenet::tensor<std::int32_t>({7, -7, 3});
  const auto z = tenet::tensor<std::int32_t>({2, 0, 1});
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const tenet::value_error& e) {
      return std::string(e.what());
    }
    return std::string("no value_error");
  };
  CHECK_THAT(message([&] { (void)tenet::eval(tenet::remainder(a, z)); }), Catch::Contains("division by zero"));
  CHECK_THAT(message([&] { (void)tenet::eval(tenet::floor_divide(a, z)); }), Catch::Contains("division by zero"));
  CHECK_THAT(message([&] { (void)tenet::eval(tenet::fmod(a, z)); }), Catch::Contains("division by zero"));
  const auto b = tenet::tensor<std::int32_t>({1, 2});
  CHECK_THROWS_AS(tenet::eval(a + b), tenet::shape_error);
  CHECK_THROWS_WITH(tenet::eval(tenet::atan2(a, b)), Catch::Contains("3 vs 2"));
  CHECK_THROWS_WITH(tenet::tensor<float>({{1.f, 2.f}, {3.f}}), Catch::Contains("row 1 has 1 values"));
}
#endif
