#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Integer arithmetic that wraps modulo 2^bits, as PyTorch's kernels do (two's complement), without
// signed overflow, which is undefined behaviour in C++: the operation runs in an unsigned type of at
// least the operands' width (at least unsigned int, so that uint8/uint16 operands are not promoted
// to int, whose product can overflow) and the result converts back (modular since C++20).
// bool and the floating types keep the plain operators. Host and device (the prims' `apply`s and
// the reductions' and scans' combiners use these on both backends).
#include <type_traits>

namespace tenet::detail {

template <class C>
inline constexpr bool wrapping_int = std::is_integral_v<C> && !std::is_same_v<C, bool>;

/// The unsigned type wrapping arithmetic on C runs in.
template <class C>
using wrap_unsigned_t = std::common_type_t<unsigned, std::make_unsigned_t<C>>;

template <class C>
TENET_HOST_DEVICE constexpr C wrapping_add(C a, C b) {
  if constexpr (wrapping_int<C>) {
    using U = wrap_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<C>(a + b);
  }
}
template <class C>
TENET_HOST_DEVICE constexpr C wrapping_sub(C a, C b) {
  if constexpr (wrapping_int<C>) {
    using U = wrap_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return static_cast<C>(a - b);
  }
}
template <class C>
TENET_HOST_DEVICE constexpr C wrapping_mul(C a, C b) {
  if constexpr (wrapping_int<C>) {
    using U = wrap_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return static_cast<C>(a * b);
  }
}
/// -x; INT_MIN stays INT_MIN (as torch.neg), unsigned x gives 2^bits - x.
template <class C>
TENET_HOST_DEVICE constexpr C wrapping_neg(C a) {
  if constexpr (wrapping_int<C>) {
    using U = wrap_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(U(0) - static_cast<U>(a)));
  } else {
    return static_cast<C>(-a);
  }
}

}  // namespace tenet::detail
