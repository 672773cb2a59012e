// Tests of <tenet/dtype.hpp>: the 16-bit floating types (conversions, arithmetic, limits) and the
// type promotion rules, checked against PyTorch.
#include <catch2/catch.hpp>

#include <tenet/dtype.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "reference/dtype_promotion.inc"

using tenet::bfloat16;
using tenet::dtype;
using tenet::float16;
using tenet::operand_kind;

namespace {

// The value of a bit pattern, straight from the format's definition (independent of half.hpp's
// widening code): (-1)^s * 2^(e - bias) * 1.f, or 2^(1 - bias) * 0.f when e == 0.
template <class Half>
double decode(std::uint16_t bits) {
  using format = typename Half::format;
  int const m = format::mantissa_bits;
  int const exponent = (bits >> m) & ((1 << format::exponent_bits) - 1);
  int const fraction = bits & ((1 << m) - 1);
  double const sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == (1 << format::exponent_bits) - 1)
    return fraction ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  if (exponent == 0) return sign * std::ldexp(fraction, format::min_exponent - m);
  return sign * std::ldexp((1 << m) + fraction, exponent - format::bias - m);
}

// Correct rounding by search: positive_values[i] is the value of bit pattern i for every finite
// positive pattern, and positive_values[infinity_bits] the power of two just past max(). x rounds
// to the neighbour it is nearer to; at an exact midpoint (representable in double) to the one
// with the even pattern; at or past the midpoint above max() to infinity.
template <class Half>
struct rounding_oracle {
  std::vector<double> positive_values;

  rounding_oracle() {
    using format = typename Half::format;
    for (std::uint16_t bits = 0; bits < format::infinity_bits; ++bits) positive_values.push_back(decode<Half>(bits));
    positive_values.push_back(std::ldexp(1.0, format::max_exponent + 1));
  }

  std::uint16_t operator()(double x) const {
    using format = typename Half::format;
    std::uint16_t const sign = std::signbit(x) ? 0x8000 : 0;
    if (std::isnan(x)) return 0xffff;  // callers check NaN by class, not by pattern
    double const magnitude = std::fabs(x);
    if (magnitude >= positive_values.back()) return sign | format::infinity_bits;
    // Largest i with positive_values[i] <= magnitude.
    std::size_t const upper =
        std::upper_bound(positive_values.begin(), positive_values.end(), magnitude) - positive_values.begin();
    std::size_t const lower = upper - 1;
    double const midpoint = (positive_values[lower] + positive_values[upper]) / 2;  // exact
    std::size_t chosen = lower;
    if (magnitude > midpoint || (magnitude == midpoint && (lower & 1))) chosen = upper;
    return static_cast<std::uint16_t>(sign | chosen);
  }
};

template <class Half>
rounding_oracle<Half> const& oracle() {
  static rounding_oracle<Half> const instance;
  return instance;
}

template <class Half>
void check_against_oracle(double x) {
  INFO("x = " << std::hexfloat << x);
  std::uint16_t const expected = oracle<Half>()(x);
  CHECK(Half(x).bits == expected);
  // The float path: only for doubles that are floats, so there is one rounding in both.
  if (std::fabs(x) <= std::numeric_limits<float>::max() && static_cast<double>(static_cast<float>(x)) == x)
    CHECK(Half(static_cast<float>(x)).bits == expected);
}

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double qnan = std::numeric_limits<double>::quiet_NaN();

}  // namespace

// ---------------------------------------------------------------------------------------------
// 16-bit floating types

// The contract's constexpr promises, checked by the compiler.
static_assert(float16(1.0f).bits == 0x3c00 && bfloat16(1.0f).bits == 0x3f80);
static_assert(float16(-0.0).bits == 0x8000 && bfloat16(-0.0f).bits == 0x8000);
static_assert(float16(65504.0f).bits == 0x7bff && float16(65520.0f).bits == 0x7c00);
static_assert(float16(0x1p-24).bits == 0x0001 && float16(0x1p-25).bits == 0x0000);
static_assert(static_cast<float>(float16::from_bits(0x0001)) == 0x1p-24f);
static_assert(static_cast<float>(bfloat16::from_bits(0x4049)) == 3.140625f);
static_assert(float16(2) + float16(3) == float16(5));
static_assert(std::is_trivially_copyable_v<float16> && std::is_trivially_copyable_v<bfloat16>);
static_assert(sizeof(float16) == 2 && sizeof(bfloat16) == 2);
static_assert(!std::is_convertible_v<float, float16> && std::is_convertible_v<float16, float>);
static_assert(!std::is_convertible_v<int, bfloat16> && std::is_convertible_v<bfloat16, double>);

TEST_CASE("dtype: every 16-bit pattern widens exactly and narrows back to itself", "[dtype][half]") {
  auto check_all = [](auto tag) {
    using Half = decltype(tag);
    for (std::uint32_t i = 0; i < 0x10000; ++i) {
      auto const bits = static_cast<std::uint16_t>(i);
      Half const h = Half::from_bits(bits);
      float const widened = h;
      double const expected = decode<Half>(bits);
      INFO("bits = " << std::hex << i);
      if (std::isnan(expected)) {
        REQUIRE(std::isnan(widened));
        REQUIRE(tenet::isnan(h));
        REQUIRE(tenet::isnan(Half(widened)));
        REQUIRE(tenet::isnan(Half(static_cast<double>(widened))));
        REQUIRE(std::signbit(widened) == tenet::signbit(h));
        REQUIRE(tenet::signbit(Half(widened)) == tenet::signbit(h));
      } else {
        REQUIRE(static_cast<double>(widened) == expected);
        REQUIRE(std::signbit(widened) == ((bits & 0x8000) != 0));  // -0 stays -0
        REQUIRE(Half(widened).bits == bits);
        REQUIRE(Half(static_cast<double>(widened)).bits == bits);
        REQUIRE(tenet::isinf(h) == std::isinf(expected));
        REQUIRE(tenet::isfinite(h) == std::isfinite(expected));
      }
    }
  };
  check_all(float16{});
  check_all(bfloat16{});
}

TEST_CASE("dtype: narrowing rounds to nearest even at and around every midpoint", "[dtype][half]") {
  // For every pair of neighbours (and the pair max, 2^(emax+1)), both signs: the midpoint, the
  // float and double just below and above it, and the neighbours themselves.
  auto check_midpoints = [](auto tag) {
    using Half = decltype(tag);
    auto const& values = oracle<Half>().positive_values;
    for (std::size_t i = 0; i + 1 < values.size(); ++i) {
      double const midpoint = (values[i] + values[i + 1]) / 2;
      for (double sign : {1.0, -1.0}) {
        double const m = sign * midpoint;
        for (double x : {m, std::nextafter(m, 0.0), std::nextafter(m, sign * inf), sign * values[i]}) check_against_oracle<Half>(x);
        auto const mf = static_cast<float>(m);  // m has at most 12 (float16) / 9 (bfloat16) significant bits
        if (std::isfinite(mf)) {
          check_against_oracle<Half>(std::nextafter(mf, 0.0f));
          check_against_oracle<Half>(std::nextafter(mf, sign * std::numeric_limits<float>::infinity()));
        }
      }
    }
  };
  check_midpoints(float16{});
  check_midpoints(bfloat16{});
}

TEST_CASE("dtype: narrowing random floats and doubles matches correct rounding", "[dtype][half]") {
  std::mt19937_64 random(20250515);
  for (int i = 0; i < 200000; ++i) {
    auto const float_bits = static_cast<std::uint32_t>(random());
    auto const f = std::bit_cast<float>(float_bits);
    if (std::isnan(f)) continue;
    check_against_oracle<float16>(f);
    check_against_oracle<bfloat16>(f);
    // Doubles in and around the range of both types: exponents -160..160, random fractions.
    std::uint64_t const double_bits = (random() & 0x800fffffffffffffull) |
                                      (static_cast<std::uint64_t>(1023 - 160 + random() % 321) << 52);
    auto const d = std::bit_cast<double>(double_bits);
    check_against_oracle<float16>(d);
    check_against_oracle<bfloat16>(d);
  }
}

TEST_CASE("dtype: narrowing from float: the fast paths equal the general rounding", "[dtype][half]") {
  // A sweep over the float bit patterns with a prime stride. (The full 2^32 sweep was run once,
  // and float16 was also compared over all 2^32 floats against x86 F16C's vcvtps2ph.)
  using tenet::detail::narrow_floating;
  for (std::uint64_t i = 0; i < (std::uint64_t{1} << 32); i += 4099) {
    auto const f = std::bit_cast<float>(static_cast<std::uint32_t>(i));
    INFO("float bits = " << std::hex << i);
    REQUIRE(tenet::detail::narrow_float_to_float16(f) == narrow_floating<tenet::detail::float16_format>(f));
    REQUIRE(tenet::detail::narrow_float_to_bfloat16(f) == narrow_floating<tenet::detail::bfloat16_format>(f));
  }
}

TEST_CASE("dtype: narrowing special cases", "[dtype][half]") {
  SECTION("ties go to even; one ulp of the source past the tie goes up") {
    CHECK(float16(1.0f + 0x1p-11f).bits == 0x3c00);               // 1 + half ulp -> 1
    CHECK(float16(1.0f + 3 * 0x1p-11f).bits == 0x3c02);           // 1 + 3/2 ulp -> 1 + 2 ulp
    CHECK(float16(std::nextafter(1.0f + 0x1p-11f, 2.0f)).bits == 0x3c01);
    CHECK(float16(std::nextafter(1.0f + 0x1p-11f, 0.0f)).bits == 0x3c00);
    CHECK(bfloat16(1.0f + 0x1p-8f).bits == 0x3f80);
    CHECK(bfloat16(1.0f + 3 * 0x1p-8f).bits == 0x3f82);
    CHECK(bfloat16(std::nextafter(1.0f + 0x1p-8f, 2.0f)).bits == 0x3f81);
  }
  SECTION("overflow: float16 rounds to infinity from 65520 = max + ulp/2 on") {
    CHECK(float16(65504.0f).bits == 0x7bff);
    CHECK(float16(std::nextafter(65520.0f, 0.0f)).bits == 0x7bff);
    CHECK(float16(65520.0f).bits == 0x7c00);
    CHECK(float16(-65520.0).bits == 0xfc00);
    CHECK(float16(std::nextafter(65520.0, 0.0)).bits == 0x7bff);
    CHECK(float16(1e300).bits == 0x7c00);
    CHECK(bfloat16(std::numeric_limits<float>::max()).bits == 0x7f80);
    CHECK(bfloat16(0x1.fep127f).bits == 0x7f7f);
    CHECK(bfloat16(0x1.ffp127).bits == 0x7f80);  // the tie above max: to even, which is infinity
    CHECK(bfloat16(std::nextafter(0x1.ffp127, 0.0)).bits == 0x7f7f);
  }
  SECTION("subnormals and underflow") {
    CHECK(float16(0x1p-24f).bits == 0x0001);
    CHECK(float16(0x1p-25f).bits == 0x0000);                         // tie to even 0
    CHECK(float16(-0x1p-25).bits == 0x8000);                         // keeps the sign
    CHECK(float16(std::nextafter(0x1p-25f, 1.0f)).bits == 0x0001);
    CHECK(float16(0x1.8p-24f).bits == 0x0002);                       // 1.5 -> 2
    CHECK(float16(0x1.ff8p-15f).bits == 0x03ff);                     // the largest subnormal
    CHECK(float16(0x1.ffcp-15f).bits == 0x0400);                     // tie: up into the normals
    CHECK(float16(std::numeric_limits<float>::denorm_min()).bits == 0x0000);
    CHECK(float16(std::numeric_limits<double>::denorm_min()).bits == 0x0000);
    CHECK(bfloat16(std::numeric_limits<float>::denorm_min()).bits == 0x0000);
    CHECK(bfloat16(0x1p-133f).bits == 0x0001);                       // bfloat16's denorm_min
    CHECK(bfloat16(0x1p-134).bits == 0x0000);
    CHECK(bfloat16(0x1.8p-134).bits == 0x0001);
    CHECK(bfloat16(0x1p-127f).bits == 0x0040);                       // a float subnormal
  }
  SECTION("signed zeros, infinities, NaN") {
    CHECK(float16(-0.0f).bits == 0x8000);
    CHECK(bfloat16(-0.0).bits == 0x8000);
    CHECK(float16(inf).bits == 0x7c00);
    CHECK(bfloat16(-inf).bits == 0xff80);
    CHECK(float16(qnan).bits == 0x7e00);
    CHECK(float16(-qnan).bits == 0xfe00);
    CHECK(bfloat16(static_cast<float>(qnan)).bits == 0x7fc0);
    // A signaling NaN comes out quiet, with the top payload bits kept.
    float const signaling = std::bit_cast<float>(std::uint32_t{0x7f802000});
    CHECK(float16(signaling).bits == 0x7e01);
    CHECK(bfloat16(signaling).bits == 0x7fc0);
    CHECK(bfloat16(std::bit_cast<float>(std::uint32_t{0xff810000})).bits == 0xffc1);
  }
  SECTION("double rounds once, not through float") {
    // 1 + 2^-11 + 2^-40 is just above the float16 tie between 1 and 1 + 2^-10, so it rounds up;
    // as a float it would be exactly the tie and round down to 1. (torch 2.15 goes through float
    // here and gives 0x3c00 for float16, 0x3f80 for bfloat16 with 1 + 2^-8 + 2^-40.)
    double const above_tie = 1.0 + 0x1p-11 + 0x1p-40;
    REQUIRE(static_cast<float>(above_tie) == 1.0f + 0x1p-11f);
    CHECK(float16(above_tie).bits == 0x3c01);
    CHECK(float16(static_cast<float>(above_tie)).bits == 0x3c00);
    CHECK(bfloat16(1.0 + 0x1p-8 + 0x1p-40).bits == 0x3f81);
    CHECK(float16(std::nextafter(65520.0, 0.0)).bits == 0x7bff);  // float would round it to 65520
  }
  SECTION("integers round once, directly") {
    CHECK(float16(0).bits == 0x0000);
    CHECK(float16(true).bits == 0x3c00);
    CHECK(float16(-1).bits == 0xbc00);
    CHECK(float16(2049).bits == 0x6800);
    CHECK(float16(2051).bits == 0x6802);
    CHECK(float16(65519).bits == 0x7bff);
    CHECK(float16(65520).bits == 0x7c00);
    CHECK(float16(std::numeric_limits<std::int64_t>::min()).bits == 0xfc00);
    CHECK(bfloat16(std::numeric_limits<std::int64_t>::min()).bits == 0xdf00);  // -2^63
    CHECK(bfloat16(std::numeric_limits<std::uint64_t>::max()).bits == 0x5f80);  // rounds to 2^64
    CHECK(bfloat16(std::uint8_t{255}).bits == 0x437f);                          // exact: 8 bits
    CHECK(bfloat16(std::uint16_t{257}).bits == 0x4380);                         // tie: to 256
    // 2^62 + 2^54 + 1 is just above a bfloat16 tie; int64 -> double would round it onto the tie.
    // (torch 2.15 gives 0x5e80.)
    CHECK(bfloat16(std::int64_t{(std::int64_t{1} << 62) + (std::int64_t{1} << 54) + 1}).bits == 0x5e81);
    CHECK(bfloat16(std::int64_t{(std::int64_t{1} << 62) + (std::int64_t{1} << 54)}).bits == 0x5e80);
  }
}

TEST_CASE("dtype: conversions match PyTorch", "[dtype][half]") {
  // Bit patterns from torch 2.15:
  //   torch.tensor(x, dtype=torch.float64).to(torch.float16).view(torch.int16)   (f16_from_double)
  //   torch.tensor(x, dtype=torch.float64).to(torch.bfloat16).view(torch.int16)  (bf16_from_double)
  // and the same from dtype=torch.float32 (the float columns; x rounded to float first).
  // None of these x is affected by torch's double -> float -> half double rounding (see above).
  // NaN: torch 2.15's bfloat16 drops a NaN's sign (0x7fc0 for -nan); tenet keeps it.
  struct row {
    double x;
    std::uint16_t f16_from_double, bf16_from_double, f16_from_float, bf16_from_float;
  };
  // clang-format off
  row const rows[] = {
    {0x0.0p+0, 0x0000, 0x0000, 0x0000, 0x0000},  // 0.0
    {-0x0.0p+0, 0x8000, 0x8000, 0x8000, 0x8000},  // -0.0
    {0x1p+0, 0x3c00, 0x3f80, 0x3c00, 0x3f80},  // 1.0
    {-0x1p+0, 0xbc00, 0xbf80, 0xbc00, 0xbf80},  // -1.0
    {0x1.999999999999ap-4, 0x2e66, 0x3dcd, 0x2e66, 0x3dcd},  // 0.1
    {-0x1.999999999999ap-4, 0xae66, 0xbdcd, 0xae66, 0xbdcd},  // -0.1
    {0x1.5555555555555p-2, 0x3555, 0x3eab, 0x3555, 0x3eab},  // 1.0/3
    {0x1.921fb54442d18p+1, 0x4248, 0x4049, 0x4248, 0x4049},  // 3.141592653589793
    {0x1.5798ee2308c3ap-27, 0x0000, 0x322c, 0x0000, 0x322c},  // 1e-8
    {0x1.4f8b588e368f1p-17, 0x00a8, 0x3728, 0x00a8, 0x3728},  // 1e-5
    {0x1.ffb480a5accd5p-15, 0x03ff, 0x3880, 0x03ff, 0x3880},  // 6.1e-05
    {0x1p-14, 0x0400, 0x3880, 0x0400, 0x3880},  // 2.0**-14
    {0x1p-24, 0x0001, 0x3380, 0x0001, 0x3380},  // 2.0**-24
    {0x1p-25, 0x0000, 0x3300, 0x0000, 0x3300},  // 2.0**-25
    {0x1.000001ad7f29bp-25, 0x0001, 0x3300, 0x0001, 0x3300},  // 2.0**-25*1.0000001
    {0x1.8000000000000p-25, 0x0001, 0x3340, 0x0001, 0x3340},  // 3*2.0**-26
    {0x1p-133, 0x0000, 0x0001, 0x0000, 0x0001},  // 2.0**-133
    {0x1p-134, 0x0000, 0x0000, 0x0000, 0x0000},  // 2.0**-134
    {0x1p-126, 0x0000, 0x0080, 0x0000, 0x0080},  // 2.0**-126
    {0x1.0020000000000p+0, 0x3c00, 0x3f80, 0x3c00, 0x3f80},  // 1+2.0**-11
    {0x1.0060000000000p+0, 0x3c02, 0x3f80, 0x3c02, 0x3f80},  // 1+3*2.0**-11
    {0x1.0020100000000p+0, 0x3c01, 0x3f80, 0x3c01, 0x3f80},  // 1+2.0**-11+2.0**-20
    {0x1.0100000000000p+0, 0x3c04, 0x3f80, 0x3c04, 0x3f80},  // 1+2.0**-8
    {0x1.0300000000000p+0, 0x3c0c, 0x3f82, 0x3c0c, 0x3f82},  // 1+3*2.0**-8
    {0x1.0100100000000p+0, 0x3c04, 0x3f81, 0x3c04, 0x3f81},  // 1+2.0**-8+2.0**-20
    {0x1.ffc0000000000p+15, 0x7bff, 0x4780, 0x7bff, 0x4780},  // 65504.0
    {0x1.ffde000000000p+15, 0x7bff, 0x4780, 0x7bff, 0x4780},  // 65519.0
    {0x1.ffdffae147ae1p+15, 0x7bff, 0x4780, 0x7bff, 0x4780},  // 65519.99
    {0x1.ffe0000000000p+15, 0x7c00, 0x4780, 0x7c00, 0x4780},  // 65520.0
    {-0x1.ffe0000000000p+15, 0xfc00, 0xc780, 0xfc00, 0xc780},  // -65520.0
    {0x1.86a0000000000p+16, 0x7c00, 0x47c3, 0x7c00, 0x47c3},  // 1e5
    {0x1.0020000000000p+11, 0x6800, 0x4500, 0x6800, 0x4500},  // 2049.0
    {0x1.0060000000000p+11, 0x6802, 0x4500, 0x6802, 0x4500},  // 2051.0
    {0x1.0010000000000p+12, 0x6c00, 0x4580, 0x6c00, 0x4580},  // 4097.0
    {0x1.fe00000000000p+127, 0x7c00, 0x7f7f, 0x7c00, 0x7f7f},  // 3.3895313892515355e38
    {0x1.ff0000000005ep+127, 0x7c00, 0x7f80, 0x7c00, 0x7f80},  // 3.3961775292304957e38
    {0x1.fffffe0000000p+127, 0x7c00, 0x7f80, 0x7c00, 0x7f80},  // 3.4028234663852886e38
    {0x1.78287f49c4a1dp+129, 0x7c00, 0x7f80, 0x7c00, 0x7f80},  // 1e39 (float: inf)
    {-0x1.78287f49c4a1dp+129, 0xfc00, 0xff80, 0xfc00, 0xff80},  // -1e39 (float: -inf)
    {inf, 0x7c00, 0x7f80, 0x7c00, 0x7f80},  // float('inf')
    {-inf, 0xfc00, 0xff80, 0xfc00, 0xff80},  // float('-inf')
    {qnan, 0x7e00, 0x7fc0, 0x7e00, 0x7fc0},  // float('nan')
    {-qnan, 0xfe00, 0x7fc0, 0xfe00, 0x7fc0},  // -float('nan')
    {0x1.e240c9fbe76c9p+16, 0x7c00, 0x47f1, 0x7c00, 0x47f1},  // 123456.789
    {-0x1.01f31f46ed246p-13, 0x8808, 0xb901, 0x8808, 0xb901},  // -0.000123
  };
  // clang-format on
  auto same = [](std::uint16_t ours, std::uint16_t torch, std::uint16_t infinity_bits) {
    bool const ours_nan = (ours & 0x7fff) > infinity_bits;
    bool const torch_nan = (torch & 0x7fff) > infinity_bits;
    if (ours_nan || torch_nan) return ours_nan && torch_nan;
    return ours == torch;
  };
  for (row const& r : rows) {
    INFO("x = " << std::hexfloat << r.x);
    // Out-of-range doubles become the infinity of their sign as floats (as in torch).
    float const as_float = std::fabs(r.x) > std::numeric_limits<float>::max()
                               ? std::copysign(std::numeric_limits<float>::infinity(), static_cast<float>(r.x > 0 ? 1 : -1))
                               : static_cast<float>(r.x);
    CHECK(same(float16(r.x).bits, r.f16_from_double, 0x7c00));
    CHECK(same(bfloat16(r.x).bits, r.bf16_from_double, 0x7f80));
    CHECK(same(float16(as_float).bits, r.f16_from_float, 0x7c00));
    CHECK(same(bfloat16(as_float).bits, r.bf16_from_float, 0x7f80));
    if (std::isnan(r.x)) {  // tenet keeps the sign of a NaN in both types
      CHECK(tenet::signbit(float16(r.x)) == std::signbit(r.x));
      CHECK(tenet::signbit(bfloat16(r.x)) == std::signbit(r.x));
    }
  }
}

TEST_CASE("dtype: half arithmetic computes in float and rounds once", "[dtype][half]") {
  static_assert(std::is_same_v<decltype(float16{} + float16{}), float16>);
  static_assert(std::is_same_v<decltype(bfloat16{} * 2), bfloat16>);
  static_assert(std::is_same_v<decltype(3 - float16{}), float16>);
  static_assert(std::is_same_v<decltype(float16{} + 1.0f), float>);
  static_assert(std::is_same_v<decltype(bfloat16{} / 1.0), double>);
  static_assert(std::is_same_v<decltype(float16{} + bfloat16{}), float>);  // as promote_t says
  static_assert(std::is_same_v<decltype(-bfloat16{}), bfloat16>);
  static_assert(std::is_same_v<decltype(std::declval<float16&>() += 1.0), float16&>);

  float16 const a(1.0f);
  float16 const tiny(0x1p-11f);  // half an ulp of 1
  CHECK((a + tiny).bits == 0x3c00);  // 1 + 2^-11 rounds back to 1 (tie to even)
  CHECK((a + tiny + tiny).bits == 0x3c00);
  CHECK((a + (tiny + tiny)).bits == 0x3c01);
  CHECK(float16(3.0f) / float16(2.0f) == float16(1.5f));
  CHECK((float16(65504.0f) + float16(16.0f)).bits == 0x7c00);  // 65520: overflows
  CHECK((bfloat16(1.0f) * 3).bits == 0x4040);
  CHECK(static_cast<float>(bfloat16(10.0f) - 4) == 6.0f);
  CHECK((-float16(0.0f)).bits == 0x8000);
  CHECK((-bfloat16(-2.0f)).bits == 0x4000);

  float16 x(1.0f);
  x += float16(2.0f);
  CHECK(x == float16(3.0f));
  x *= 2;
  CHECK(x == float16(6.0f));
  x -= 0.5f;
  CHECK(x == float16(5.5f));
  x /= 2.0;
  CHECK(x == float16(2.75f));
  bfloat16 y(1.0f);
  y += 0x1p-9;  // rounds back to 1
  CHECK(y.bits == 0x3f80);

  SECTION("comparisons are the float comparisons") {
    float16 const n = std::numeric_limits<float16>::quiet_NaN();
    CHECK_FALSE(n == n);
    CHECK(n != n);
    CHECK_FALSE(n < n);
    CHECK(float16(-0.0f) == float16(0.0f));
    CHECK(float16(1.0f) < float16(2.0f));
    CHECK(bfloat16(-1.0f) <= bfloat16(-1.0f));
    CHECK(bfloat16(3.0f) > bfloat16(2.0f));
    CHECK(float16(1.0f) == 1);        // through operator float
    CHECK(bfloat16(0.5f) < 0.75);
  }
}

TEST_CASE("dtype: numeric_limits of the 16-bit types", "[dtype][half]") {
  using f16 = std::numeric_limits<float16>;
  using bf16 = std::numeric_limits<bfloat16>;
  static_assert(f16::is_specialized && bf16::is_specialized);
  static_assert(f16::digits == 11 && bf16::digits == 8);
  static_assert(f16::digits10 == 3 && bf16::digits10 == 2);
  static_assert(f16::max_digits10 == 5 && bf16::max_digits10 == 4);
  static_assert(f16::min_exponent == -13 && bf16::min_exponent == std::numeric_limits<float>::min_exponent);
  static_assert(f16::max_exponent == 16 && bf16::max_exponent == std::numeric_limits<float>::max_exponent);
  static_assert(f16::min_exponent10 == -4 && bf16::min_exponent10 == std::numeric_limits<float>::min_exponent10);
  static_assert(f16::max_exponent10 == 4 && bf16::max_exponent10 == std::numeric_limits<float>::max_exponent10);
  static_assert(f16::is_iec559 && !bf16::is_iec559);
  static_assert(f16::has_infinity && f16::has_quiet_NaN && f16::radix == 2);
  static_assert(std::numeric_limits<float16 const>::digits == 11);

  CHECK(static_cast<float>(f16::max()) == 65504.0f);
  CHECK(static_cast<float>(f16::lowest()) == -65504.0f);
  CHECK(static_cast<float>(f16::min()) == 0x1p-14f);
  CHECK(static_cast<float>(f16::denorm_min()) == 0x1p-24f);
  CHECK(static_cast<float>(f16::epsilon()) == 0x1p-10f);
  CHECK(static_cast<float>(f16::round_error()) == 0.5f);
  CHECK(std::isinf(static_cast<float>(f16::infinity())));
  CHECK(tenet::isnan(f16::quiet_NaN()));
  CHECK(tenet::isnan(f16::signaling_NaN()));
  CHECK((f16::signaling_NaN().bits & 0x0200) == 0);

  CHECK(static_cast<float>(bf16::max()) == 0x1.fep127f);
  CHECK(static_cast<float>(bf16::lowest()) == -0x1.fep127f);
  CHECK(static_cast<float>(bf16::min()) == std::numeric_limits<float>::min());
  CHECK(static_cast<float>(bf16::denorm_min()) == 0x1p-133f);
  CHECK(static_cast<float>(bf16::epsilon()) == 0x1p-7f);
  CHECK(static_cast<float>(bf16::round_error()) == 0.5f);
  CHECK(std::isinf(static_cast<float>(bf16::infinity())));
  CHECK(tenet::isnan(bf16::quiet_NaN()));
  CHECK(tenet::isnan(bf16::signaling_NaN()));
  CHECK((bf16::signaling_NaN().bits & 0x0040) == 0);

  // epsilon is the gap above 1.
  CHECK(float16::from_bits(0x3c01) - float16(1.0f) == f16::epsilon());
  CHECK(bfloat16::from_bits(0x3f81) - bfloat16(1.0f) == bf16::epsilon());

  // The constexpr classification also takes float and double.
  static_assert(tenet::isnan(std::numeric_limits<double>::quiet_NaN()) && !tenet::isnan(1.0f));
  static_assert(tenet::isinf(-std::numeric_limits<float>::infinity()) && tenet::isfinite(1.0));
  static_assert(!tenet::isfinite(f16::infinity()) && tenet::isfinite(bf16::max()));
}

// ---------------------------------------------------------------------------------------------
// dtype

static_assert(tenet::Element<bool> && tenet::Element<std::uint8_t> && tenet::Element<float16> &&
              tenet::Element<double>);
static_assert(!tenet::Element<char> && !tenet::Element<std::uint16_t> && !tenet::Element<std::uint64_t> &&
              !tenet::Element<long double> && !tenet::Element<float const>);
static_assert(tenet::dtype_of<bool> == dtype::bool_ && tenet::dtype_of<std::int16_t> == dtype::int16 &&
              tenet::dtype_of<bfloat16> == dtype::bfloat16 && tenet::dtype_of<double> == dtype::float64);
static_assert(std::is_same_v<tenet::dtype_t<dtype::float16>, float16> &&
              std::is_same_v<tenet::dtype_t<dtype::uint8>, std::uint8_t> &&
              std::is_same_v<tenet::dtype_t<dtype::float32>, float>);
static_assert(tenet::is_floating_v<float16> && tenet::is_floating_v<double> && !tenet::is_floating_v<std::int32_t> &&
              !tenet::is_floating_v<long double>);
static_assert(tenet::is_integral_v<std::uint8_t> && tenet::is_integral_v<std::int64_t> && !tenet::is_integral_v<bool> &&
              !tenet::is_integral_v<float> && !tenet::is_integral_v<char>);
static_assert(std::is_same_v<tenet::compute_t<float16>, float> && std::is_same_v<tenet::compute_t<bfloat16>, float> &&
              std::is_same_v<tenet::compute_t<std::int8_t>, std::int8_t> && std::is_same_v<tenet::compute_t<double>, double>);

namespace {
template <std::size_t... I>
constexpr bool dtype_round_trips(std::index_sequence<I...>) {
  return ((tenet::dtype_of<tenet::dtype_t<tenet::all_dtypes[I]>> == tenet::all_dtypes[I]) && ...) &&
         ((sizeof(tenet::dtype_t<tenet::all_dtypes[I]>) == tenet::itemsize(tenet::all_dtypes[I])) && ...);
}
}  // namespace
static_assert(dtype_round_trips(std::make_index_sequence<std::size(tenet::all_dtypes)>{}));

TEST_CASE("dtype: names", "[dtype]") {
  CHECK(std::string(tenet::name(dtype::bool_)) == "bool");
  CHECK(std::string(tenet::name(dtype::float32)) == "float32");
  CHECK(std::string(tenet::name(dtype::bfloat16)) == "bfloat16");
  CHECK(std::string(tenet::name(dtype::int64)) == "int64");
  CHECK(std::string(tenet::torch_name(dtype::float32)) == "torch.float32");
  CHECK(std::string(tenet::torch_name(dtype::uint8)) == "torch.uint8");
  CHECK(std::string(tenet::torch_name(dtype::bool_)) == "torch.bool");
  for (dtype d : tenet::all_dtypes) CHECK(std::string(tenet::torch_name(d)) == "torch." + std::string(tenet::name(d)));
  std::ostringstream out;
  out << dtype::float16 << ' ' << dtype::int8;
  CHECK(out.str() == "float16 int8");
}

// ---------------------------------------------------------------------------------------------
// Promotion

namespace {
constexpr bool promote_types_matches_torch() {
  for (std::size_t a = 0; a < 10; ++a)
    for (std::size_t b = 0; b < 10; ++b)
      if (tenet::promote_types(tenet::all_dtypes[a], tenet::all_dtypes[b]) != dtype_reference::promote_types_table[a][b])
        return false;
  return true;
}

// Cell I is row I / 10, column I % 10.
template <std::size_t I>
constexpr bool promote_t_cell_matches() {
  using a = tenet::dtype_t<tenet::all_dtypes[I / 10]>;
  using b = tenet::dtype_t<tenet::all_dtypes[I % 10]>;
  return std::is_same_v<tenet::promote_t<a, b>, tenet::dtype_t<dtype_reference::promote_types_table[I / 10][I % 10]>>;
}

// The C++ type of an operand in the reference tables: the element type for tensors, and for a
// scalar the type of the Python scalar it stands for (bool, std::int64_t, double).
template <tenet::operand_dtype Operand>
using reference_operand = tenet::operand<tenet::dtype_t<Operand.type>, Operand.kind>;

template <std::size_t I>
constexpr bool result_type_t_pair_matches() {
  constexpr auto c = dtype_reference::result_type_pairs[I];
  return std::is_same_v<tenet::result_type_t<reference_operand<c.a>, reference_operand<c.b>>, tenet::dtype_t<c.expected>>;
}

template <std::size_t I>
constexpr bool result_type_t_triple_matches() {
  constexpr auto c = dtype_reference::result_type_triples[I];
  return std::is_same_v<tenet::result_type_t<reference_operand<c.a>, reference_operand<c.b>, reference_operand<c.c>>,
                        tenet::dtype_t<c.expected>>;
}

// All of check<I>() for I in [0, N), as an array expansion rather than a fold (Clang limits a
// fold's nesting to 256).
template <auto Check, std::size_t... I>
constexpr bool all_of(std::index_sequence<I...>) {
  bool const results[] = {Check.template operator()<I>()...};
  for (bool result : results)
    if (!result) return false;
  return true;
}
}  // namespace

// Type level, over the whole tables generated by tests/reference/gen_dtype_promotion.py.
static_assert(promote_types_matches_torch());
static_assert(all_of<[]<std::size_t I>() { return promote_t_cell_matches<I>(); }>(std::make_index_sequence<100>{}));
static_assert(all_of<[]<std::size_t I>() { return result_type_t_pair_matches<I>(); }>(
    std::make_index_sequence<std::size(dtype_reference::result_type_pairs)>{}));
static_assert(all_of<[]<std::size_t I>() { return result_type_t_triple_matches<I>(); }>(
    std::make_index_sequence<std::size(dtype_reference::result_type_triples)>{}));

TEST_CASE("dtype: promote_types matches torch.promote_types cell by cell", "[dtype][promotion]") {
  // The static_asserts above say the same; this names a failing cell.
  for (std::size_t a = 0; a < 10; ++a) {
    for (std::size_t b = 0; b < 10; ++b) {
      INFO(tenet::all_dtypes[a] << " with " << tenet::all_dtypes[b]);
      CHECK(tenet::promote_types(tenet::all_dtypes[a], tenet::all_dtypes[b]) == dtype_reference::promote_types_table[a][b]);
    }
  }
  // The laws stated at promote_types.
  for (dtype a : tenet::all_dtypes) {
    CHECK(tenet::promote_types(a, a) == a);
    CHECK(tenet::promote_types(dtype::bool_, a) == a);
    for (dtype b : tenet::all_dtypes) {
      CHECK(tenet::promote_types(a, b) == tenet::promote_types(b, a));
      for (dtype c : tenet::all_dtypes)
        CHECK(tenet::promote_types(tenet::promote_types(a, b), c) == tenet::promote_types(a, tenet::promote_types(b, c)));
    }
  }
}

TEST_CASE("dtype: result_type matches torch.result_type", "[dtype][promotion]") {
  auto kind_name = [](operand_kind k) {
    return k == operand_kind::tensor ? "tensor" : k == operand_kind::zero_dim ? "zero-dim" : "scalar";
  };
  for (auto const& c : dtype_reference::result_type_pairs) {
    INFO(kind_name(c.a.kind) << ' ' << c.a.type << " with " << kind_name(c.b.kind) << ' ' << c.b.type);
    CHECK(tenet::result_type({c.a, c.b}) == c.expected);
  }
  for (auto const& c : dtype_reference::result_type_triples) {
    INFO(kind_name(c.a.kind) << ' ' << c.a.type << ", " << kind_name(c.b.kind) << ' ' << c.b.type << ", "
                             << kind_name(c.c.kind) << ' ' << c.c.type);
    CHECK(tenet::result_type({c.a, c.b, c.c}) == c.expected);
  }
}

TEST_CASE("dtype: result_type_t, cases spelled out", "[dtype][promotion]") {
  using namespace tenet;
  using std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t;
  // Each checked with torch.result_type in torch 2.15 (t = torch.ones(2, dtype=...),
  // z = torch.ones((), dtype=...)).
  static_assert(std::is_same_v<promote_t<uint8_t, int8_t>, int16_t>);
  static_assert(std::is_same_v<promote_t<float16, bfloat16>, float>);
  static_assert(std::is_same_v<promote_t<int64_t, float16>, float16>);
  static_assert(std::is_same_v<promote_t<bool, uint8_t, int8_t, float16>, float16>);
  static_assert(std::is_same_v<result_type_t<tensor_operand<int32_t>, scalar_operand<double>>, float>);    // t(int32) + 2.5
  static_assert(std::is_same_v<result_type_t<tensor_operand<int32_t>, scalar_operand<float>>, float>);
  static_assert(std::is_same_v<result_type_t<tensor_operand<uint8_t>, scalar_operand<int>>, uint8_t>);     // + 1000
  static_assert(std::is_same_v<result_type_t<tensor_operand<int8_t>, zero_dim_operand<double>>, double>);  // z(float64)
  static_assert(std::is_same_v<result_type_t<tensor_operand<bool>, scalar_operand<int>>, int64_t>);        // + 1
  static_assert(std::is_same_v<result_type_t<tensor_operand<bool>, scalar_operand<bool>>, bool>);          // + True
  static_assert(std::is_same_v<result_type_t<tensor_operand<float16>, scalar_operand<double>>, float16>);  // + 1e10
  static_assert(std::is_same_v<result_type_t<tensor_operand<int32_t>, zero_dim_operand<float16>>, float16>);
  static_assert(std::is_same_v<result_type_t<tensor_operand<float16>, zero_dim_operand<double>>, float16>);
  static_assert(std::is_same_v<result_type_t<tensor_operand<uint8_t>, zero_dim_operand<int64_t>>, uint8_t>);
  static_assert(std::is_same_v<result_type_t<tensor_operand<bool>, zero_dim_operand<int8_t>>, int8_t>);
  static_assert(std::is_same_v<result_type_t<zero_dim_operand<int32_t>, scalar_operand<double>>, float>);
  static_assert(std::is_same_v<result_type_t<zero_dim_operand<double>, scalar_operand<double>>, double>);
  static_assert(std::is_same_v<result_type_t<zero_dim_operand<uint8_t>, scalar_operand<int>>, uint8_t>);
  static_assert(std::is_same_v<result_type_t<zero_dim_operand<bool>, scalar_operand<int>>, int64_t>);
  static_assert(std::is_same_v<result_type_t<scalar_operand<int>, scalar_operand<double>>, float>);        // (1, 2.5)
  static_assert(std::is_same_v<result_type_t<scalar_operand<bool>, scalar_operand<long long>>, int64_t>);
  static_assert(std::is_same_v<result_type_t<tensor_operand<bfloat16>, tensor_operand<float16>>, float>);
  // Three kinds at once: the dim tensor is integral, the zero-dim tensor floating, so the zero-dim
  // tensors decide, and a floating scalar does not widen them.
  static_assert(std::is_same_v<result_type_t<tensor_operand<int64_t>, zero_dim_operand<bfloat16>, scalar_operand<double>>,
                               bfloat16>);
  static_assert(std::is_same_v<result_type_t<tensor_operand<bool>, zero_dim_operand<uint8_t>, scalar_operand<double>>, float>);
  static_assert(std::is_same_v<result_type_t<tensor_operand<int16_t>, tensor_operand<uint8_t>, zero_dim_operand<int64_t>,
                                             scalar_operand<unsigned>>,
                               int16_t>);
  // C++ scalar types other than those of the reference tables behave like them.
  static_assert(std::is_same_v<result_type_t<tensor_operand<bool>, scalar_operand<std::uint8_t>>, int64_t>);
  static_assert(std::is_same_v<result_type_t<tensor_operand<bool>, scalar_operand<float16>>, float>);
  static_assert(std::is_same_v<result_type_t<tensor_operand<int8_t>, scalar_operand<bfloat16>>, float>);

  // The run-time form agrees.
  CHECK(result_type({{dtype::int32, operand_kind::tensor}, {dtype::float64, operand_kind::scalar}}) == dtype::float32);
  CHECK(result_type({{dtype::uint8, operand_kind::tensor}, {dtype::int32, operand_kind::scalar}}) == dtype::uint8);
  CHECK(result_type_state{}.add(dtype::bool_, operand_kind::tensor).add(dtype::int8, operand_kind::scalar).result() ==
        dtype::int64);
}
