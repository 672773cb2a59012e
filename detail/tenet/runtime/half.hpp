#pragma once
#include <tenet/detail_check.hpp>
// 16-bit floating-point element types: `float16` (IEEE 754 binary16) and `bfloat16` (the upper half
// of an IEEE binary32).
//
// Contract, for both types:
//   - Storage is one `std::uint16_t bits`; the types are trivially copyable, 2 bytes, and
//     `from_bits(b).bits == b` for every `b`.
//   - Narrowing from float, double or any integer rounds once, directly from the source value, to
//     the nearest representable value, ties to even (no double rounding through float). Values at
//     or past max() + ulp(max())/2 become infinity of the source's sign; -0.0 stays -0.0; a NaN
//     becomes a quiet NaN with the source's sign and the top bits of its payload.
//   - Widening to float is exact: `float(T(f)) == f` for every float f that T represents, and
//     `T(float(x)).bits == x.bits` for every non-NaN bit pattern x.
//   - Arithmetic is done in float (see `compute_t` in <tenet/dtype.hpp>) and rounded back once:
//     `a + b == T(float(a) + float(b))`. Mixing with an integer keeps T; mixing with float or double
//     gives float or double (through the implicit `operator float`).
#include <tenet/config.hpp>

#include <concepts>  // std::integral, std::same_as
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tenet::detail {

// std::bit_cast, callable from device code (NVCC treats std::bit_cast as a host function unless
// given --expt-relaxed-constexpr). The builtin behind it is in GCC >= 11, Clang >= 9 and NVCC.
template <class To, class From>
TENET_HOST_DEVICE constexpr To bit_cast(From const& from) noexcept {
  static_assert(sizeof(To) == sizeof(From), "bit_cast needs types of the same size");
  return __builtin_bit_cast(To, from);
}

// Number of bits needed to hold x (0 for x == 0): std::bit_width, callable from device code.
TENET_HOST_DEVICE constexpr int bit_width(std::uint64_t x) noexcept {
  if (x == 0) return 0;
#if defined(__CUDA_ARCH__)
  return 64 - __clzll(static_cast<long long>(x));
#else
  return 64 - __builtin_clzll(x);
#endif
}

// An IEEE-754-style binary format: sign, `ExponentBits` biased exponent, `MantissaBits` stored
// fraction bits, subnormals, infinities and NaNs.
template <int MantissaBits, int ExponentBits>
struct binary_format {
  static constexpr int mantissa_bits = MantissaBits;
  static constexpr int exponent_bits = ExponentBits;
  static constexpr int bias = (1 << (ExponentBits - 1)) - 1;
  static constexpr int min_exponent = 1 - bias;  // exponent of the smallest normal number
  static constexpr int max_exponent = bias;      // exponent of the largest finite number
  static constexpr std::uint16_t sign_mask = 0x8000;
  static constexpr std::uint16_t infinity_bits = ((1u << ExponentBits) - 1) << MantissaBits;
  static constexpr std::uint16_t quiet_bit = 1u << (MantissaBits - 1);
  static constexpr std::uint16_t mantissa_mask = (1u << MantissaBits) - 1;
};
using float16_format = binary_format<10, 5>;
using bfloat16_format = binary_format<7, 8>;

// Rounds (-1)^negative * significand * 2^exponent to the nearest value of Format, ties to even,
// and returns its bit pattern. Any significand and exponent are accepted; the result overflows to
// infinity and underflows through subnormals to a signed zero.
template <class Format>
TENET_HOST_DEVICE constexpr std::uint16_t round_to_format(bool negative, std::uint64_t significand,
                                                          int exponent) noexcept {
  constexpr int m = Format::mantissa_bits;
  std::uint16_t const sign = negative ? Format::sign_mask : 0;
  if (significand == 0) return sign;

  int const leading = bit_width(significand) - 1;  // position of the leading one
  int const value_exponent = exponent + leading;   // value is in [2^e, 2^(e+1))
  if (value_exponent > Format::max_exponent) return sign | Format::infinity_bits;

  // The result's exponent; below the normal range the spacing stays that of the smallest normal.
  int const result_exponent =
      value_exponent > Format::min_exponent ? value_exponent : Format::min_exponent;
  // Drop this many low bits of the significand to leave the result's m + 1 significant bits.
  int const shift = (result_exponent - m) - exponent;

  std::uint64_t quotient = 0;
  if (shift <= 0) {
    quotient = significand << -shift;  // exact: fewer than m + 1 significant bits
  } else if (shift > leading + 1) {
    return sign;  // below half the smallest subnormal: rounds to zero
  } else if (shift == leading + 1) {
    // At or above half the smallest step: rounds up unless exactly halfway (to the even 0).
    quotient = (significand > (std::uint64_t{1} << leading)) ? 1 : 0;
  } else {
    quotient = significand >> shift;
    std::uint64_t const remainder = significand & ((std::uint64_t{1} << shift) - 1);
    std::uint64_t const halfway = std::uint64_t{1} << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (quotient & 1))) ++quotient;
  }
  // quotient holds the implicit bit at position m (normal) or not (subnormal); adding the exponent
  // field this way also carries a rounded-up 2^(m+1) into the next binade, or into infinity.
  auto const field = static_cast<std::uint64_t>(result_exponent - Format::min_exponent) << m;
  return static_cast<std::uint16_t>(sign | (field + quotient));
}

// The layout of float and double, to take them apart.
template <class T>
struct source_format;
template <>
struct source_format<float> {
  using bits_type = std::uint32_t;
  static constexpr int mantissa_bits = 23;
  static constexpr int bias = 127;
  static constexpr int total_bits = 32;
  static constexpr bits_type sign_mask = 0x80000000u;
  static constexpr bits_type exponent_mask = 0x7f800000u;
};
template <>
struct source_format<double> {
  using bits_type = std::uint64_t;
  static constexpr int mantissa_bits = 52;
  static constexpr int bias = 1023;
  static constexpr int total_bits = 64;
  static constexpr bits_type sign_mask = 0x8000000000000000u;
  static constexpr bits_type exponent_mask = 0x7ff0000000000000u;
};

// Rounds a float or double to Format (see the contract at the top of the file).
template <class Format, class Source>
TENET_HOST_DEVICE constexpr std::uint16_t narrow_floating(Source value) noexcept {
  using source = source_format<Source>;
  using bits_type = typename source::bits_type;
  constexpr int exponent_shift = source::mantissa_bits;
  constexpr bits_type fraction_mask = (bits_type{1} << source::mantissa_bits) - 1;
  constexpr bits_type exponent_all_ones = (bits_type{1} << (source::total_bits - 1 - exponent_shift)) - 1;

  auto const bits = bit_cast<bits_type>(value);
  bool const negative = (bits >> (source::total_bits - 1)) != 0;
  bits_type const fraction = bits & fraction_mask;
  bits_type const biased_exponent = (bits >> exponent_shift) & exponent_all_ones;

  if (biased_exponent == exponent_all_ones) {
    std::uint16_t const sign = negative ? Format::sign_mask : 0;
    if (fraction == 0) return sign | Format::infinity_bits;
    auto const payload = static_cast<std::uint16_t>(
        (fraction >> (source::mantissa_bits - Format::mantissa_bits)) & Format::mantissa_mask);
    return sign | Format::infinity_bits | Format::quiet_bit | payload;
  }
  if (biased_exponent == 0)  // zero or subnormal: fraction * 2^(1 - bias - mantissa_bits)
    return round_to_format<Format>(negative, fraction, 1 - source::bias - source::mantissa_bits);
  return round_to_format<Format>(negative, fraction | (bits_type{1} << source::mantissa_bits),
                                 static_cast<int>(biased_exponent) - source::bias - source::mantissa_bits);
}

// Rounds an integer to Format, directly (a 64-bit integer is not rounded to double first).
template <class Format, std::integral Integer>
TENET_HOST_DEVICE constexpr std::uint16_t narrow_integer(Integer value) noexcept {
  static_assert(sizeof(Integer) <= sizeof(std::uint64_t), "integers wider than 64 bits are not supported");
  if constexpr (std::is_signed_v<Integer>) {
    bool const negative = value < 0;
    auto const bits = static_cast<std::uint64_t>(value);  // two's complement, so -value is 0 - bits
    return round_to_format<Format>(negative, negative ? std::uint64_t{0} - bits : bits, 0);
  } else {
    return round_to_format<Format>(false, static_cast<std::uint64_t>(value), 0);
  }
}

// Float16 to float, exactly.
TENET_HOST_DEVICE constexpr float widen_float16(std::uint16_t bits) noexcept {
#if defined(__CUDA_ARCH__)
  if (!std::is_constant_evaluated()) {  // on the GPU: one conversion instruction (exact)
    float r;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(bits));
    return r;
  }
#endif
  std::uint32_t const sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  std::uint32_t const magnitude = bits & 0x7fffu;
  if (magnitude >= 0x7c00u)  // infinity or NaN; the payload (and a signaling NaN) is kept
    return bit_cast<float>(sign | 0x7f800000u | ((magnitude & 0x3ffu) << 13));
  if (magnitude >= 0x0400u)  // normal: move the fields into place and rebias the exponent by 127 - 15
    return bit_cast<float>(sign | ((magnitude << 13) + 0x38000000u));
  // Zero or subnormal, fraction * 2^-24: exact in float arithmetic.
  return bit_cast<float>(sign | bit_cast<std::uint32_t>(static_cast<float>(magnitude) * 0x1p-24f));
}

// Float to float16; equal to narrow_floating<float16_format>(value), with the float layout
// hard-wired.
TENET_HOST_DEVICE constexpr std::uint16_t narrow_float_to_float16(float value) noexcept {
#if defined(__CUDA_ARCH__)
  if (!std::is_constant_evaluated()) {  // on the GPU: the hardware rounding (to nearest even)
    std::uint16_t r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(value));
    return r;
  }
#endif
  std::uint32_t const bits = bit_cast<std::uint32_t>(value);
  auto const sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)  // NaN: quiet, with the top payload bits
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 = max + ulp/2, or infinity
  if (magnitude >= 0x38800000u) {                        // >= 2^-14: a normal result
    magnitude -= 0x38000000u;                            // rebias the exponent by 127 - 15
    magnitude += 0x0fffu + ((magnitude >> 13) & 1u);     // round the 13 dropped bits to even
    return static_cast<std::uint16_t>(sign | (magnitude >> 13));
  }
  if (magnitude <= 0x33000000u) return sign;  // <= 2^-25: rounds to zero (2^-25 is a tie)
  // A subnormal result: the significand, shifted so that bit 0 weighs 2^-24, rounded to even.
  std::uint32_t const significand = (magnitude & 0x7fffffu) | 0x800000u;
  int const shift = 126 - static_cast<int>(magnitude >> 23);  // 14 .. 24
  std::uint32_t quotient = significand >> shift;
  std::uint32_t const remainder = significand & ((1u << shift) - 1);
  std::uint32_t const halfway = 1u << (shift - 1);
  if (remainder > halfway || (remainder == halfway && (quotient & 1u))) ++quotient;
  return static_cast<std::uint16_t>(sign | quotient);
}

// Float to bfloat16, the usual way: add just under half an ulp (plus one when the kept part is odd)
// and truncate. Equal to narrow_floating<bfloat16_format>(value).
TENET_HOST_DEVICE constexpr std::uint16_t narrow_float_to_bfloat16(float value) noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (!std::is_constant_evaluated()) {  // on the GPU: one instruction (to nearest even; NaN: 0x7fff)
    std::uint16_t r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(value));
    return r;
  }
#endif
  std::uint32_t bits = bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u)  // NaN: keep sign and top payload, set the quiet bit
    return static_cast<std::uint16_t>((bits >> 16) | bfloat16_format::quiet_bit);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

// The members float16 and bfloat16 share. `Half` is the derived type (operators take and return
// it); Format says how to round into it.
template <class Half, class Format>
struct half_base {
  using format = Format;
  std::uint16_t bits;

  half_base() = default;
  TENET_HOST_DEVICE explicit constexpr half_base(float value) noexcept : bits(from_float(value)) {}
  TENET_HOST_DEVICE explicit constexpr half_base(double value) noexcept
      : bits(narrow_floating<Format>(value)) {}
  template <std::integral Integer>
  TENET_HOST_DEVICE explicit constexpr half_base(Integer value) noexcept
      : bits(narrow_integer<Format>(value)) {}

  // The value with this bit pattern.
  TENET_HOST_DEVICE static constexpr Half from_bits(std::uint16_t bits) noexcept {
    Half result{};
    result.bits = bits;
    return result;
  }

  TENET_HOST_DEVICE constexpr operator float() const noexcept {
    if constexpr (std::is_same_v<Format, bfloat16_format>)
      return bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
    else
      return widen_float16(bits);
  }

  // Arithmetic: in float, rounded once to Half.
  TENET_HOST_DEVICE friend constexpr Half operator+(Half a, Half b) noexcept {
    return Half(static_cast<float>(a) + static_cast<float>(b));
  }
  TENET_HOST_DEVICE friend constexpr Half operator-(Half a, Half b) noexcept {
    return Half(static_cast<float>(a) - static_cast<float>(b));
  }
  TENET_HOST_DEVICE friend constexpr Half operator*(Half a, Half b) noexcept {
    return Half(static_cast<float>(a) * static_cast<float>(b));
  }
  TENET_HOST_DEVICE friend constexpr Half operator/(Half a, Half b) noexcept {
    return Half(static_cast<float>(a) / static_cast<float>(b));
  }
  TENET_HOST_DEVICE friend constexpr Half operator-(Half a) noexcept {
    return from_bits(static_cast<std::uint16_t>(a.bits ^ Format::sign_mask));
  }
  TENET_HOST_DEVICE friend constexpr Half operator+(Half a) noexcept { return a; }

  // Half with an integer stays Half (as a float16 tensor plus a Python int stays float16); the
  // integer is converted to float, exact up to 2^24.
  template <std::integral Integer>
  TENET_HOST_DEVICE friend constexpr Half operator+(Half a, Integer b) noexcept {
    return Half(static_cast<float>(a) + static_cast<float>(b));
  }
  template <std::integral Integer>
  TENET_HOST_DEVICE friend constexpr Half operator+(Integer a, Half b) noexcept {
    return Half(static_cast<float>(a) + static_cast<float>(b));
  }
  template <std::integral Integer>
  TENET_HOST_DEVICE friend constexpr Half operator-(Half a, Integer b) noexcept {
    return Half(static_cast<float>(a) - static_cast<float>(b));
  }
  template <std::integral Integer>
  TENET_HOST_DEVICE friend constexpr Half operator-(Integer a, Half b) noexcept {
    return Half(static_cast<float>(a) - static_cast<float>(b));
  }
  template <std::integral Integer>
  TENET_HOST_DEVICE friend constexpr Half operator*(Half a, Integer b) noexcept {
    return Half(static_cast<float>(a) * static_cast<float>(b));
  }
  template <std::integral Integer>
  TENET_HOST_DEVICE friend constexpr Half operator*(Integer a, Half b) noexcept {
    return Half(static_cast<float>(a) * static_cast<float>(b));
  }
  template <std::integral Integer>
  TENET_HOST_DEVICE friend constexpr Half operator/(Half a, Integer b) noexcept {
    return Half(static_cast<float>(a) / static_cast<float>(b));
  }
  template <std::integral Integer>
  TENET_HOST_DEVICE friend constexpr Half operator/(Integer a, Half b) noexcept {
    return Half(static_cast<float>(a) / static_cast<float>(b));
  }

  // Compound assignment with anything `a op b` accepts (Half, integers, float, double): the
  // result is rounded once to Half.
  template <class Other>
  TENET_HOST_DEVICE friend constexpr Half& operator+=(Half& a, Other const& b) noexcept
    requires requires { a + b; }
  {
    return a = static_cast<Half>(a + b);
  }
  template <class Other>
  TENET_HOST_DEVICE friend constexpr Half& operator-=(Half& a, Other const& b) noexcept
    requires requires { a - b; }
  {
    return a = static_cast<Half>(a - b);
  }
  template <class Other>
  TENET_HOST_DEVICE friend constexpr Half& operator*=(Half& a, Other const& b) noexcept
    requires requires { a * b; }
  {
    return a = static_cast<Half>(a * b);
  }
  template <class Other>
  TENET_HOST_DEVICE friend constexpr Half& operator/=(Half& a, Other const& b) noexcept
    requires requires { a / b; }
  {
    return a = static_cast<Half>(a / b);
  }

  // Comparisons are those of the float values: NaN is unordered, -0 == +0. (!= is rewritten
  // from ==.)
  TENET_HOST_DEVICE friend constexpr bool operator==(Half a, Half b) noexcept {
    return static_cast<float>(a) == static_cast<float>(b);
  }
  TENET_HOST_DEVICE friend constexpr bool operator<(Half a, Half b) noexcept {
    return static_cast<float>(a) < static_cast<float>(b);
  }
  TENET_HOST_DEVICE friend constexpr bool operator<=(Half a, Half b) noexcept {
    return static_cast<float>(a) <= static_cast<float>(b);
  }
  TENET_HOST_DEVICE friend constexpr bool operator>(Half a, Half b) noexcept {
    return static_cast<float>(a) > static_cast<float>(b);
  }
  TENET_HOST_DEVICE friend constexpr bool operator>=(Half a, Half b) noexcept {
    return static_cast<float>(a) >= static_cast<float>(b);
  }

 private:
  TENET_HOST_DEVICE static constexpr std::uint16_t from_float(float value) noexcept {
    if constexpr (std::is_same_v<Format, bfloat16_format>)
      return narrow_float_to_bfloat16(value);
    else
      return narrow_float_to_float16(value);
  }
};

}  // namespace tenet::detail

namespace tenet {

// IEEE 754 binary16: 1 sign, 5 exponent, 10 fraction bits; max 65504, epsilon 2^-10.
struct float16 : detail::half_base<float16, detail::float16_format> {
  using half_base::half_base;
};

// bfloat16: the upper 16 bits of a float (1 sign, 8 exponent, 7 fraction bits); float's range,
// epsilon 2^-7.
struct bfloat16 : detail::half_base<bfloat16, detail::bfloat16_format> {
  using half_base::half_base;
};

static_assert(sizeof(float16) == 2 && std::is_trivially_copyable_v<float16>);
static_assert(sizeof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16>);

// Classification, constexpr (unlike std::isnan) and defined for all four floating element types.
template <class T>
concept half_precision = std::same_as<T, float16> || std::same_as<T, bfloat16>;

template <half_precision T>
TENET_HOST_DEVICE constexpr bool isnan(T x) noexcept {
  return (x.bits & ~T::format::sign_mask) > T::format::infinity_bits;
}
template <half_precision T>
TENET_HOST_DEVICE constexpr bool isinf(T x) noexcept {
  return (x.bits & ~T::format::sign_mask) == T::format::infinity_bits;
}
template <half_precision T>
TENET_HOST_DEVICE constexpr bool isfinite(T x) noexcept {
  return (x.bits & T::format::infinity_bits) != T::format::infinity_bits;
}
template <half_precision T>
TENET_HOST_DEVICE constexpr bool signbit(T x) noexcept {
  return (x.bits & T::format::sign_mask) != 0;
}

// (By the bits, so that it needs no library call in device code and no NaN in constant
// evaluation.)
template <class T>
  requires std::same_as<T, float> || std::same_as<T, double>
TENET_HOST_DEVICE constexpr bool isnan(T x) noexcept {
  return x != x;
}
template <class T>
  requires std::same_as<T, float> || std::same_as<T, double>
TENET_HOST_DEVICE constexpr bool isinf(T x) noexcept {
  using source = detail::source_format<T>;
  auto const bits = detail::bit_cast<typename source::bits_type>(x);
  return (bits & ~source::sign_mask) == source::exponent_mask;
}
template <class T>
  requires std::same_as<T, float> || std::same_as<T, double>
TENET_HOST_DEVICE constexpr bool isfinite(T x) noexcept {
  using source = detail::source_format<T>;
  auto const bits = detail::bit_cast<typename source::bits_type>(x);
  return (bits & source::exponent_mask) != source::exponent_mask;
}

}  // namespace tenet

namespace tenet::detail {

// std::numeric_limits for a 16-bit format, derived from Format's parameters. The decimal
// quantities use log10(2) ~= 30103 / 100000.
template <class Half>
class half_numeric_limits {
  using f = typename Half::format;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = std::is_same_v<f, float16_format>;  // bfloat16 is not binary16
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = f::mantissa_bits + 1;
  static constexpr int digits10 = (digits - 1) * 30103 / 100000;
  static constexpr int max_digits10 = 2 + digits * 30103 / 100000;
  static constexpr int radix = 2;
  static constexpr int min_exponent = f::min_exponent + 1;
  static constexpr int min_exponent10 = f::min_exponent * 30103 / 100000;  // ceil: truncates toward 0
  static constexpr int max_exponent = f::max_exponent + 1;
  static constexpr int max_exponent10 = max_exponent * 30103 / 100000;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  TENET_HOST_DEVICE static constexpr Half min() noexcept {  // smallest positive normal
    return Half::from_bits(std::uint16_t{1} << f::mantissa_bits);
  }
  TENET_HOST_DEVICE static constexpr Half max() noexcept {
    return Half::from_bits(f::infinity_bits - 1);
  }
  TENET_HOST_DEVICE static constexpr Half lowest() noexcept {
    return Half::from_bits(f::sign_mask | (f::infinity_bits - 1));
  }
  TENET_HOST_DEVICE static constexpr Half epsilon() noexcept {  // 2^-mantissa_bits
    return Half::from_bits(static_cast<std::uint16_t>((f::bias - f::mantissa_bits) << f::mantissa_bits));
  }
  TENET_HOST_DEVICE static constexpr Half round_error() noexcept {  // 0.5
    return Half::from_bits(static_cast<std::uint16_t>((f::bias - 1) << f::mantissa_bits));
  }
  TENET_HOST_DEVICE static constexpr Half infinity() noexcept { return Half::from_bits(f::infinity_bits); }
  TENET_HOST_DEVICE static constexpr Half quiet_NaN() noexcept {
    return Half::from_bits(f::infinity_bits | f::quiet_bit);
  }
  TENET_HOST_DEVICE static constexpr Half signaling_NaN() noexcept {
    return Half::from_bits(f::infinity_bits | (f::quiet_bit >> 1));
  }
  TENET_HOST_DEVICE static constexpr Half denorm_min() noexcept { return Half::from_bits(1); }
};

}  // namespace tenet::detail

template <>
class std::numeric_limits<tenet::float16> : public tenet::detail::half_numeric_limits<tenet::float16> {};
template <>
class std::numeric_limits<tenet::bfloat16> : public tenet::detail::half_numeric_limits<tenet::bfloat16> {};
