// Integer arithmetic wraps modulo 2^bits as PyTorch's kernels do (issue 27 item 4), without signed
// overflow in tenet's code: +, -, *, neg, abs, sum, prod, cumsum, floor_divide and remainder at the
// ends of the range, and the 8/16-bit types (which C++ promotes to int). Expected values are
// torch 2.15's. CI also builds this file under -fsanitize=undefined (tests/CMakeLists.txt, the
// sanitizer program), which would fail on any signed overflow.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include <tenet/tenet.hpp>

using namespace tenet;

namespace {
template <class T, class S>
std::vector<T> values(const Tensor<T, S>& t) {
  return std::vector<T>(t.data(), t.data() + t.numel());
}
constexpr std::int64_t i64_max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t i64_min = std::numeric_limits<std::int64_t>::min();
constexpr std::int32_t i32_min = std::numeric_limits<std::int32_t>::min();
}  // namespace

TEST_CASE("int overflow: +, -, * and neg/abs wrap as torch", "[int_overflow]") {
  const auto a = tensor<std::int64_t>({i64_max, i64_min, 3});
  // torch: tensor([2**63-1, -2**63, 3]) + 1 -> [-2**63, -2**63+1, 4]; - 1 -> [2**63-2, 2**63-1, 2]
  CHECK(values(eval(a + std::int64_t(1))) == std::vector<std::int64_t>{i64_min, i64_min + 1, 4});
  CHECK(values(eval(a - std::int64_t(1))) == std::vector<std::int64_t>{i64_max - 1, i64_max, 2});
  // neg and abs of INT64_MIN are INT64_MIN (torch.neg / torch.abs)
  CHECK(values(eval(-a)) == std::vector<std::int64_t>{i64_min + 1, i64_min, -3});
  CHECK(values(eval(tenet::abs(a))) == std::vector<std::int64_t>{i64_max, i64_min, 3});
  const auto b = tensor<std::int32_t>({i32_min, 65536, -7});
  // torch: tensor([-2**31, 65536, -7], int32) * -1 -> [-2**31, -65536, 7]; * 65536 -> [0, 0, -458752]
  CHECK(values(eval(b * std::int32_t(-1))) == std::vector<std::int32_t>{i32_min, -65536, 7});
  CHECK(values(eval(b * b)) == std::vector<std::int32_t>{0, 0, 49});
  CHECK(values(eval(tenet::abs(b))) == std::vector<std::int32_t>{i32_min, 65536, 7});
}

TEST_CASE("int overflow: 8- and 16-bit arithmetic narrows to torch's wrapped values", "[int_overflow]") {
  // torch: int8 100 + 100 -> -56, 100 * 3 -> 44, -(-128) -> -128; uint8 200 + 100 -> 44, 3 - 5 -> 254;
  // int16 300 * 300 -> 24464
  const auto i8 = tensor<std::int8_t>({100, -128});
  CHECK(values(eval(i8 + i8)) == std::vector<std::int8_t>{-56, 0});
  CHECK(values(eval(i8 * std::int8_t(3))) == std::vector<std::int8_t>{44, -128});
  CHECK(values(eval(-i8)) == std::vector<std::int8_t>{-100, -128});
  const auto u8 = tensor<std::uint8_t>({200, 3});
  CHECK(values(eval(u8 + std::uint8_t(100))) == std::vector<std::uint8_t>{44, 103});
  CHECK(values(eval(u8 - std::uint8_t(5))) == std::vector<std::uint8_t>{195, 254});
  const auto i16 = tensor<std::int16_t>({300, -32768});
  CHECK(values(eval(i16 * i16)) == std::vector<std::int16_t>{24464, 0});
}

TEST_CASE("int overflow: sum, prod and cumsum wrap in int64 as torch", "[int_overflow]") {
  const std::int64_t big = std::int64_t(1) << 62;
  const auto a = tensor<std::int64_t>({big, big, big});
  // torch: tensor([2**62] * 3).sum() -> -2**62; cumsum -> [2**62, -2**63, -2**62]
  CHECK(eval(sum(a)).item() == -big);
  CHECK(values(eval(cumsum<0>(a))) == std::vector<std::int64_t>{big, i64_min, -big});
  // torch: tensor([2**40, 2**40]).prod() -> 0; cumprod -> [2**40, 0]
  const auto p = tensor<std::int64_t>({std::int64_t(1) << 40, std::int64_t(1) << 40});
  CHECK(eval(prod(p)).item() == 0);
  CHECK(values(eval(cumprod<0>(p))) == std::vector<std::int64_t>{std::int64_t(1) << 40, 0});
  // int32 sums to int64 without wrapping: tensor([2**31-1, 1], int32).sum() -> 2**31
  CHECK(eval(sum(tensor<std::int32_t>({2147483647, 1}))).item() == std::int64_t(2147483648));
}

TEST_CASE("int overflow: floor_divide and remainder of INT_MIN by -1", "[int_overflow]") {
  // torch: floor_divide(INT_MIN, -1) -> INT_MIN in int32 and int64; remainder(INT_MIN, -1) -> 0
  const auto a = tensor<std::int64_t>({i64_min, 7});
  const auto m1 = tensor<std::int64_t>({-1, -1});
  CHECK(values(eval(floor_divide(a, m1))) == std::vector<std::int64_t>{i64_min, -7});
  CHECK(values(eval(remainder(a, m1))) == std::vector<std::int64_t>{0, 0});
  CHECK(values(eval(fmod(a, m1))) == std::vector<std::int64_t>{0, 0});
  const auto b = tensor<std::int32_t>({i32_min, -7});
  const auto n1 = tensor<std::int32_t>({-1, -1});
  CHECK(values(eval(floor_divide(b, n1))) == std::vector<std::int32_t>{i32_min, 7});
  CHECK(values(eval(remainder(b, n1))) == std::vector<std::int32_t>{0, 0});
}

TEST_CASE("int pow: a negative C++ exponent raises, a tensor of exponents computes as torch", "[int_overflow]") {
  // torch.pow(tensor([2]), -1): "Integers to negative integer powers are not allowed." (was 0)
  const auto a = tensor<std::int64_t>({2, 1, -1});
  CHECK_THROWS_WITH(eval(pow(a, -1)), Catch::Contains("negative integer powers") && Catch::Contains("-1"));
  CHECK_THROWS_AS(eval(pow(tensor<std::int32_t>({2}), std::int32_t(-2))), value_error);
  // torch.pow(tensor([2, 1, -1, -1]), tensor([-1, -5, -1, -2])) -> [0, 1, -1, 1]; 3 ** 41 wraps
  const auto b = tensor<std::int64_t>({2, 1, -1, -1, 3});
  CHECK(values(eval(pow(b, tensor<std::int64_t>({-1, -5, -1, -2, 41})))) ==
        std::vector<std::int64_t>{0, 1, -1, 1, -420491770248316829});
  CHECK(values(eval(pow(tensor<float>({2.f}), -1))) == std::vector<float>{0.5f});  // a float base: no error
}

TEST_CASE("int overflow: integer matmul wraps as torch", "[int_overflow]") {
  // torch: a = tensor([[2**62, 2**62 + 5], [-2**63, 3]]); a @ a.T
  const auto a = tensor<std::int64_t>({{std::int64_t(1) << 62, (std::int64_t(1) << 62) + 5}, {i64_min, 3}});
  CHECK(values(eval(matmul(a, a.transpose<0, 1>()))) ==
        std::vector<std::int64_t>{-9223372036854775783, -4611686018427387889, -4611686018427387889, 9});
  // int16: tensor([[30000, 30000], [-32768, 300]], int16) @ its transpose; products beyond int's range
  // in unsigned short promotion
  const auto b = tensor<std::int16_t>({{30000, 30000}, {-32768, 300}});
  CHECK(values(eval(matmul(b, b.transpose<0, 1>()))) == std::vector<std::int16_t>{-11776, 21568, 21568, 24464});
  // int32 without overflow, the general path: tensor([[3, -5, 7], [100, 200, -128]], int32) @ .T
  const auto c = tensor<std::int32_t>({{3, -5, 7}, {100, 200, -128}});
  CHECK(values(eval(matmul(c, c.transpose<0, 1>()))) == std::vector<std::int32_t>{83, -1596, -1596, 66384});
}
