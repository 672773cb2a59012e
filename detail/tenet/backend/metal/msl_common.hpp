#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// What every generated Metal Shading Language kernel shares (docs/metal.md): the MSL names of
// tenet's dtypes, the file prologue (address-space aliases and the math helpers MSL lacks), the
// built-in parameter list, kernel names from a stable hash, and the source of one kernel.
//
// A generated file is plain MSL for the Metal compiler (__METAL_VERSION__ defined) and, through
// tests/metal/msl_shim.hpp, C++ for the emulator. Its buffers are named through two aliases the
// prologue defines for MSL (tenet_buffer<T> = device T*, tenet_threadgroup<T> = threadgroup T*)
// and the shim defines as checked types, so the emulator sees every access.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

#include <tenet/dtype.hpp>

namespace tenet::detail::metal {

/// A generated kernel: its name (the function's), its MSL source (one file, prologue included)
/// and the expression it was generated from, in words.
struct kernel_source {
  std::string name;
  std::string source;
  std::string description;
};

/// The MSL name of element type T (the types the generator handles).
template <class T>
constexpr std::string_view msl_type() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "long";
  else if constexpr (std::is_same_v<T, float16>) return "half";
  else if constexpr (std::is_same_v<T, bfloat16>) return "bfloat";  // MSL 3.1 (macOS 14)
  else static_assert(sizeof(T) == 0, "tenet: the Metal generator handles float32, float16, bfloat16, bool, int32 and int64 tensors");
}
template <class T>
inline constexpr bool msl_element = std::is_same_v<T, float> || std::is_same_v<T, bool> || std::is_same_v<T, std::int32_t> ||
                                    std::is_same_v<T, std::int64_t> || half_precision<T>;

/// FNV-1a, 64 bits: kernel names from descriptions (stable across compilers and runs).
inline std::uint64_t stable_hash(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
inline std::string kernel_name(std::string_view prefix, std::string_view description) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(stable_hash(description)));
  return std::string(prefix) + "_" + hex;
}

/// The built-in parameters every generated kernel ends with, in this order (the emulator binds
/// them by position: tests/metal/emulator.hpp, builtin_params). 1-D grids.
inline constexpr std::string_view builtin_parameters =
    "    uint gid [[thread_position_in_grid]],\n"
    "    uint tgid [[threadgroup_position_in_grid]],\n"
    "    uint lid [[thread_position_in_threadgroup]],\n"
    "    uint tgsize [[threads_per_threadgroup]],\n"
    "    uint lane [[thread_index_in_simdgroup]],\n"
    "    uint sg [[simdgroup_index_in_threadgroup]]";

/// The start of every generated file: MSL's standard library and the address-space aliases on the
/// Metal compiler; the helpers for prims MSL has no function for (erf, expm1, log1p, torch's
/// remainder, pow of a negative base, integer pow), once per translation unit.
inline constexpr std::string_view prologue = R"(#if defined(__METAL_VERSION__)
#include <metal_stdlib>
template <typename T> using tenet_buffer = device T*;
template <typename T> using tenet_threadgroup = threadgroup T*;
#endif
#ifndef TENET_MSL_HELPERS
#define TENET_MSL_HELPERS
using namespace metal;
// expm1 and log1p (Kahan's forms: the rounding error of exp(x) / 1 + x cancels in the quotient)
inline float tenet_expm1(float x) {
  const float u = metal::precise::exp(x);
  if (u == 1.0f) return x;
  const float um1 = u - 1.0f;
  if (um1 == -1.0f) return -1.0f;
  if (metal::isinf(u)) return u;
  return um1 * x / metal::precise::log(u);
}
inline float tenet_log1p(float x) {
  const float u = 1.0f + x;
  if (u == 1.0f) return x;
  if (u == INFINITY) return u;  // (-inf goes on to log's NaN)
  return metal::precise::log(u) * x / (u - 1.0f);
}
// erf: its Taylor series below |x| = 0.5, above that 1 - erfc(|x|) with erfc from a Chebyshev
// fit of erfc(z) exp(z^2) (fractional error under 1.2e-7)
inline float tenet_erf(float x) {
  const float a = metal::abs(x);
  if (metal::isnan(x)) return x;
  if (a < 0.5f) {
    const float z = x * x;
    const float s = 1.0f + z * (-1.0f / 3.0f + z * (1.0f / 10.0f + z * (-1.0f / 42.0f + z * (1.0f / 216.0f + z * (-1.0f / 1320.0f)))));
    return 1.1283791670955126f * x * s;
  }
  if (a > 10.0f) return x > 0.0f ? 1.0f : -1.0f;
  const float t = 1.0f / (1.0f + 0.5f * a);
  const float p = -a * a - 1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f + t * (-0.18628806f +
                  t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  const float erfc = t * metal::precise::exp(p);
  return x > 0.0f ? 1.0f - erfc : erfc - 1.0f;
}
// remainder with the divisor's sign (torch.remainder, Python's %)
inline float tenet_remainder(float a, float b) {
  float r = metal::precise::fmod(a, b);
  if (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) r += b;
  return r;
}
// pow with C's cases: a negative base to an integral exponent is defined
inline float tenet_pow(float a, float b) {
  if (b == 0.0f) return 1.0f;
  if (a < 0.0f && metal::trunc(b) == b) {
    const float r = metal::precise::pow(-a, b);
    return metal::precise::fmod(b, 2.0f) != 0.0f ? -r : r;
  }
  return metal::precise::pow(a, b);
}
// integer pow as the prim: repeated squaring wrapping modulo 2^32; a negative exponent gives
// torch's values (1 for a base of 1, +-1 for -1, else 0)
inline int tenet_ipow(int a, int b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) != 0 ? -1 : 1) : 0);
  uint base = as_type<uint>(a), r = 1u;
  for (int e = b; e > 0; e >>= 1) {
    if ((e & 1) != 0) r *= base;
    base *= base;
  }
  return as_type<int>(r);
}
#endif
)";

/// A file's text: a comment naming the kernel and what it computes, the prologue, the kernel.
inline std::string kernel_file(const std::string& name, const std::string& description, const std::string& body) {
  std::string s = "// " + name + ": generated by tenet's Metal generator (detail/tenet/backend/metal); do not edit.\n";
  s += "// " + description + "\n";
  s += prologue;
  s += body;
  return s;
}

}  // namespace tenet::detail::metal
