#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Division by a run-time constant as a multiply-high, an add and a shift (Granlund and
// Montgomery's method, "Division by Invariant Integers using Multiplication", 1994): for a
// divisor d in [1, 2^31), s = ceil(log2 d) and m = floor(2^32 (2^s - d) / d) + 1, the quotient
// of n in [0, 2^31) is (mulhi(n, m) + n) >> s (the sum stays under 2^32). The GPU's integer
// division is a software routine of dozens of instructions; the pointwise rows mode divides
// every 16-byte group's index by the row length and the row count (backend/cuda/pointwise.cuh).
#include <cstdint>

namespace tenet::detail {

struct fast_divisor {
  std::uint32_t d = 1, m = 1, s = 0;
  fast_divisor() = default;
  /// d in [1, 2^31).
  explicit fast_divisor(std::uint32_t divisor) : d(divisor) {
    while ((std::uint64_t{1} << s) < d) ++s;
    m = static_cast<std::uint32_t>((((std::uint64_t{1} << s) - d) << 32) / d + 1);
  }
  /// n / d for n in [0, 2^31).
  TENET_HOST_DEVICE TENET_INLINE std::uint32_t div(std::uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const std::uint32_t hi = __umulhi(n, m);
#else
    const auto hi = static_cast<std::uint32_t>((static_cast<std::uint64_t>(n) * m) >> 32);
#endif
    return (hi + n) >> s;
  }
};

}  // namespace tenet::detail
