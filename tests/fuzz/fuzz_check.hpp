#pragma once
// The comparison the generated fuzz cases (tests/test_fuzz.cpp, tests/test_autograd_fuzz.cpp;
// tests/fuzz/gen_fuzz.py) make against PyTorch's values: the dtype, the sizes, and every value
// (NaN matches NaN, infinities exactly, integers and bools exactly; floats within a tolerance of
// the dtype scaled by the largest magnitude of the expected tensor, since a program's sums and
// cancellations carry absolute, not relative, rounding).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../reference.hpp"

namespace fuzz {

template <class T>
constexpr const char* dtype_name() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, std::uint8_t>) return "uint8";
  else if constexpr (std::is_same_v<T, std::int8_t>) return "int8";
  else if constexpr (std::is_same_v<T, std::int16_t>) return "int16";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  else if constexpr (std::is_same_v<T, tenet::float16>) return "float16";
  else if constexpr (std::is_same_v<T, tenet::bfloat16>) return "bfloat16";
  else if constexpr (std::is_same_v<T, float>) return "float32";
  else return "float64";
}

/// Relative tolerance of a float dtype over a short program (a few roundings of each value).
template <class T>
constexpr double tolerance() {
  if constexpr (std::is_same_v<T, tenet::bfloat16>) return 3e-2;
  else if constexpr (std::is_same_v<T, tenet::float16>) return 4e-3;
  else if constexpr (std::is_same_v<T, float>) return 2e-5;
  else if constexpr (std::is_same_v<T, double>) return 1e-11;
  else return 0.0;
}

template <class T, class S>
void check(const tenet::Tensor<T, S>& got, const tenet_test::ref_tensor& want, const std::string& what = "out",
           double program_tolerance = 0.0) {
  INFO(what);
  CHECK(std::string(dtype_name<T>()) == want.dtype);
  double scale = 1.0;
  for (double w : want.values)
    if (std::isfinite(w)) scale = std::max(scale, std::abs(w));
  // the coarser of the result's dtype and the program's (a float32 value promoted to double
  // carries float32's rounding); integers and bools exactly
  const double tol = tolerance<T>() == 0.0 ? 0.0 : std::max(tolerance<T>(), program_tolerance);
  tenet_test::check_close(got, want, tol, tol * 0.1 * scale);
}

}  // namespace fuzz
