#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The elementwise prims: unary, binary, ternary (where) and the cast (convert_element_type).
//
// Each prim is one struct holding its name, its shape and dtype rule and its scalar semantics
// (`apply`, host and device, computed in compute_t<T>: float for the 16-bit floats). The VJP/JVP and
// batching rules join these structs with the autograd and vmap issues. Backends map prims to
// kernels in backend/<name>/elementwise.hpp.
//
// Prims see operands of one dtype (the ATen-level ops in include/tenet/ops.hpp insert the casts that
// PyTorch's type promotion asks for); comparisons and isnan return bool; the bitwise prims take integers and bool.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <tenet/dtype.hpp>
#include <tenet/expr/concepts.hpp>
#include <tenet/expr/node.hpp>
#include <tenet/prims/wrapping.hpp>
#include <tenet/shape/rules.hpp>

namespace tenet::detail {
/// Set by integer division prims that meet a zero divisor; kernels check and clear it after their
/// loop and throw value_error (PyTorch raises ZeroDivisionError). The flag is the calling thread's
/// own: another thread's kernels neither clear nor raise it (issue 27: one process-wide flag lost
/// errors and reported others' under concurrent evaluation). A kernel that runs on OpenMP threads
/// gathers its workers' flags into the launching thread's with a kernel_flag_collector. Host
/// kernels only: CUDA kernels write the device's fault record (docs/cuda.md). The test is on
/// __CUDA_ARCH__ (nvcc's device pass), so that host kernels compiled by nvcc still report it.
inline int& integer_division_by_zero() {
  thread_local int flag = 0;
  return flag;
}
TENET_HOST_DEVICE inline void note_division_by_zero() {
#if !defined(__CUDA_ARCH__)
  integer_division_by_zero() = 1;
#endif
}
/// One kernel launch's flags across the threads that run it: each part of the work ends with
/// collect() (moves the running thread's flag here, so a worker's never outlives the part), and
/// the destructor, on the launching thread after the parallel loop, sets that thread's flag.
struct kernel_flag_collector {
  std::atomic<int> seen{0};
  void collect() {
    int& f = integer_division_by_zero();
    if (f) {
      seen.store(1, std::memory_order_relaxed);
      f = 0;
    }
  }
  kernel_flag_collector() = default;
  kernel_flag_collector(const kernel_flag_collector&) = delete;
  kernel_flag_collector& operator=(const kernel_flag_collector&) = delete;
  ~kernel_flag_collector() {
    if (seen.load(std::memory_order_relaxed)) integer_division_by_zero() = 1;
  }
};
}  // namespace tenet::detail

namespace tenet::prim {

struct unary_group : elementwise_group {};
struct binary_group : elementwise_group {};
struct ternary_group : elementwise_group {};
struct cast_group : elementwise_group {};
/// ATen-level composites that are pointwise (sigmoid, gelu ...): not prims, but a backend may run
/// them inside a fused elementwise loop (ops.hpp).
struct pointwise_composite_group : elementwise_group {};

/// Shape rule of every elementwise prim: broadcast the operands; dtype rule: the first operand's.
struct elementwise_base {
  static constexpr bool is_prim = true;
  template <class... C>
  using result_shape = detail::broadcast_all_t<shape_of<C>...>;
  template <class C0, class... C>
  using result_type = value_type_of<C0>;

  /// Each operand's sizes() is called once: a tree's sizes() walks its whole subtree, so calling
  /// an operand's again for every pair made the walk (and, inlined, its code) exponential in the
  /// tree's height (issue 26: hypot(hypot(a, a), c) on shape<> took cc1plus past 18 GB).
  template <class... C>
  static auto sizes(const C&... c) {
    return broadcast_checked<shape_of<C>...>(c.sizes()...);
  }
  template <class... S>
  static auto broadcast_checked(const sizes_t<S::rank>&... s) {
    constexpr std::size_t R = detail::broadcast_all_t<S...>::rank;
    sizes_t<R> out{};
    for (auto& e : out) e = 1;
    ((out = detail::broadcast_sizes<R>(out, s)), ...);
    if constexpr (sizeof...(S) >= 2) check_symbol_pairs<S...>(s...);
    return out;
  }
  template <class S0, class... S>
  static void check_symbol_pairs(const sizes_t<S0::rank>& s0, const sizes_t<S::rank>&... s) {
    (detail::check_symbols<S0, S>(s0, s), ...);
    if constexpr (sizeof...(S) >= 2) check_symbol_pairs<S...>(s...);
  }
};

template <class T>
using ct = compute_t<T>;

// ---------------------------------------------------------------------------------------------
// unary
#define TENET_UNARY_PRIM(NAME, FLOAT_ONLY, ...)                                           \
  struct NAME##_ : elementwise_base {                                                    \
    using group = unary_group;                                                           \
    static constexpr std::string_view name = #NAME;                                      \
    static constexpr bool floating_only = FLOAT_ONLY;                                    \
    template <class T>                                                                   \
    TENET_HOST_DEVICE static T apply(T xin) {                                            \
      using C = ct<T>;                                                                   \
      const C x = static_cast<C>(xin);                                                   \
      return static_cast<T>(__VA_ARGS__);                                                \
    }                                                                                    \
  };

// integers wrap as torch's (-INT_MIN and abs(INT_MIN) are INT_MIN), without signed overflow (prims/wrapping.hpp)
TENET_UNARY_PRIM(neg, false, detail::wrapping_neg<C>(x))
TENET_UNARY_PRIM(abs, false, x < C(0) ? detail::wrapping_neg<C>(x) : (x == C(0) ? C(0) : x))
TENET_UNARY_PRIM(exp, true, std::exp(x))
TENET_UNARY_PRIM(exp2, true, std::exp2(x))
TENET_UNARY_PRIM(expm1, true, std::expm1(x))
TENET_UNARY_PRIM(log, true, std::log(x))
TENET_UNARY_PRIM(log2, true, std::log2(x))
TENET_UNARY_PRIM(log1p, true, std::log1p(x))
TENET_UNARY_PRIM(sqrt, true, std::sqrt(x))
TENET_UNARY_PRIM(rsqrt, true, C(1) / std::sqrt(x))
TENET_UNARY_PRIM(sin, true, std::sin(x))
TENET_UNARY_PRIM(cos, true, std::cos(x))
TENET_UNARY_PRIM(tan, true, std::tan(x))
TENET_UNARY_PRIM(tanh, true, std::tanh(x))
TENET_UNARY_PRIM(erf, true, std::erf(x))
TENET_UNARY_PRIM(floor, true, std::floor(x))
TENET_UNARY_PRIM(ceil, true, std::ceil(x))
TENET_UNARY_PRIM(round, true, std::nearbyint(x))  // half to even, as torch.round
TENET_UNARY_PRIM(trunc, true, std::trunc(x))
TENET_UNARY_PRIM(reciprocal, true, C(1) / x)
// sign: -1, 0, +1; 0 for NaN, as torch.sign
TENET_UNARY_PRIM(sign, false, C((C(0) < x) - (x < C(0))))
#undef TENET_UNARY_PRIM

/// isnan, returns bool.
struct isnan_ : elementwise_base {
  using group = unary_group;
  static constexpr std::string_view name = "isnan";
  template <class C0>
  using result_type = bool;
  template <class T>
  TENET_HOST_DEVICE static bool apply(T x) {
    const auto c = static_cast<ct<T>>(x);
    return c != c;
  }
};
/// bitwise_not: ~x on integers, logical not on bool (as torch.bitwise_not).
struct bitwise_not_ : elementwise_base {
  using group = unary_group;
  static constexpr std::string_view name = "bitwise_not";
  template <class T>
  TENET_HOST_DEVICE static T apply(T x) {
    if constexpr (std::is_same_v<T, bool>)
      return !x;
    else
      return static_cast<T>(~x);
  }
};

// ---------------------------------------------------------------------------------------------
// binary
#define TENET_BINARY_PRIM(NAME, ...)                                      \
  struct NAME##_ : elementwise_base {                                     \
    using group = binary_group;                                           \
    static constexpr std::string_view name = #NAME;                       \
    template <class T>                                                    \
    TENET_HOST_DEVICE static T apply(T ain, T bin) {                      \
      using C = ct<T>;                                                    \
      const C a = static_cast<C>(ain), b = static_cast<C>(bin);           \
      return static_cast<T>(__VA_ARGS__);                                 \
    }                                                                     \
  };

// integers wrap modulo 2^bits as torch's, computed without signed overflow (prims/wrapping.hpp)
TENET_BINARY_PRIM(add, detail::wrapping_add<C>(a, b))
TENET_BINARY_PRIM(sub, detail::wrapping_sub<C>(a, b))
TENET_BINARY_PRIM(mul, detail::wrapping_mul<C>(a, b))
// maximum/minimum propagate NaN, as torch.maximum/minimum; a tie (0.0 vs -0.0) gives the first operand
TENET_BINARY_PRIM(maximum, a != a ? a : (b != b ? b : (a < b ? b : a)))
TENET_BINARY_PRIM(minimum, a != a ? a : (b != b ? b : (b < a ? b : a)))
// atan2(y, x): the angle of (x, y) with C's signed-zero and infinity cases; atan, asin and acos
// decompose into it
TENET_BINARY_PRIM(atan2, std::atan2(a, b))
#undef TENET_BINARY_PRIM

template <class C>
TENET_HOST_DEVICE constexpr C int_floor_div(C a, C b) {
  if (b == 0) {
    detail::note_division_by_zero();
    return 0;
  }
  if constexpr (std::is_signed_v<C>) {
    // a / -1 is -a, and INT_MIN / -1 wraps to INT_MIN as torch's (C++'s division would overflow)
    if (b == -1) return detail::wrapping_neg<C>(a);
    const C q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? static_cast<C>(q - 1) : q;
  } else {
    return a / b;
  }
}

/// div: true division for floats, floor-free truncation never happens (ints are cast to float first).
struct div_ : elementwise_base {
  using group = binary_group;
  static constexpr std::string_view name = "div";
  template <class T>
  TENET_HOST_DEVICE static T apply(T a, T b) {
    using C = ct<T>;
    if constexpr (std::is_integral_v<C>)
      return int_floor_div<C>(a, b);
    else
      return static_cast<T>(static_cast<C>(a) / static_cast<C>(b));
  }
};
/// remainder: the result has the sign of the divisor (Python's %), as torch.remainder.
struct remainder_ : elementwise_base {
  using group = binary_group;
  static constexpr std::string_view name = "remainder";
  template <class T>
  TENET_HOST_DEVICE static T apply(T ain, T bin) {
    using C = ct<T>;
    const C a = static_cast<C>(ain), b = static_cast<C>(bin);
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) {
        detail::note_division_by_zero();
        return T(0);
      }
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return T(0);
        C r = static_cast<C>(a % b);
        if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
        return static_cast<T>(r);
      } else {
        return static_cast<T>(a % b);
      }
    } else {
      C r = std::fmod(a, b);
      if (r != C(0) && ((r < C(0)) != (b < C(0)))) r += b;
      return static_cast<T>(r);
    }
  }
};
/// fmod: the result has the sign of the dividend (C's fmod).
struct fmod_ : elementwise_base {
  using group = binary_group;
  static constexpr std::string_view name = "fmod";
  template <class T>
  TENET_HOST_DEVICE static T apply(T ain, T bin) {
    using C = ct<T>;
    const C a = static_cast<C>(ain), b = static_cast<C>(bin);
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) {
        detail::note_division_by_zero();
        return T(0);
      }
      if constexpr (std::is_signed_v<C>)
        if (b == -1) return T(0);
      return static_cast<T>(a % b);
    } else {
      return static_cast<T>(std::fmod(a, b));
    }
  }
};
/// pow: float pow; for integers exact repeated squaring, wrapping as torch; a negative exponent gives
/// torch's kernel values (1, +-1 for a base of -1, else 0); tenet::pow raises for a negative C++ exponent.
struct pow_ : elementwise_base {
  using group = binary_group;
  static constexpr std::string_view name = "pow";
  template <class T>
  TENET_HOST_DEVICE static T apply(T ain, T bin) {
    using C = ct<T>;
    const C a = static_cast<C>(ain), b = static_cast<C>(bin);
    if constexpr (std::is_same_v<C, bool>) {
      return static_cast<T>(a || !b);
    } else if constexpr (std::is_integral_v<C>) {
      if (b < 0) return static_cast<T>(a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0));
      using U = std::make_unsigned_t<C>;
      U base = static_cast<U>(a), r = 1;
      for (C e = b; e > 0; e >>= 1) {
        if (e & 1) r = static_cast<U>(r * base);
        base = static_cast<U>(base * base);
      }
      return static_cast<T>(static_cast<C>(r));
    } else {
      return static_cast<T>(std::pow(a, b));
    }
  }
};

#define TENET_COMPARE_PRIM(NAME, OP)                                      \
  struct NAME##_ : elementwise_base {                                     \
    using group = binary_group;                                           \
    static constexpr std::string_view name = #NAME;                       \
    template <class C0, class C1>                                         \
    using result_type = bool;                                             \
    template <class T>                                                    \
    TENET_HOST_DEVICE static bool apply(T a, T b) {                       \
      return static_cast<ct<T>>(a) OP static_cast<ct<T>>(b);              \
    }                                                                     \
  };
TENET_COMPARE_PRIM(eq, ==)
TENET_COMPARE_PRIM(ne, !=)
TENET_COMPARE_PRIM(lt, <)
TENET_COMPARE_PRIM(le, <=)
TENET_COMPARE_PRIM(gt, >)
TENET_COMPARE_PRIM(ge, >=)
#undef TENET_COMPARE_PRIM

/// bitwise and/or/xor on integers and bool; the logical ops are these on operands cast to bool.
#define TENET_BITWISE_PRIM(NAME, OP)                                      \
  struct NAME##_ : elementwise_base {                                     \
    using group = binary_group;                                           \
    static constexpr std::string_view name = #NAME;                       \
    template <class T>                                                    \
    TENET_HOST_DEVICE static T apply(T a, T b) {                          \
      return static_cast<T>(a OP b);                                      \
    }                                                                     \
  };
TENET_BITWISE_PRIM(bitwise_and, &)
TENET_BITWISE_PRIM(bitwise_or, |)
TENET_BITWISE_PRIM(bitwise_xor, ^)
#undef TENET_BITWISE_PRIM

// ---------------------------------------------------------------------------------------------
// ternary
/// where(cond, a, b): cond is bool; a and b have the result dtype.
struct where_ : elementwise_base {
  using group = ternary_group;
  static constexpr std::string_view name = "where";
  template <class C0, class C1, class C2>
  using result_type = value_type_of<C1>;
  template <class T>
  TENET_HOST_DEVICE static T apply(bool c, T a, T b) {
    return c ? a : b;
  }
};

// ---------------------------------------------------------------------------------------------
// cast
/// convert_element_type<To>: C++ conversion, with PyTorch's rules for bool (nonzero is true) and
/// for floats to integers (truncation toward zero).
template <class To>
struct convert_element_type_ : elementwise_base {
  using group = cast_group;
  static constexpr std::string_view name = "convert_element_type";
  using target = To;
  template <class C0>
  using result_type = To;
  template <class From>
  TENET_HOST_DEVICE static To apply(From x) {
    if constexpr (std::is_same_v<To, bool>) {
      return static_cast<ct<From>>(x) != ct<From>(0);
    } else if constexpr (std::is_same_v<From, bfloat16> || std::is_same_v<From, float16>) {
      return static_cast<To>(static_cast<float>(x));
    } else {
      return static_cast<To>(x);
    }
  }
};

template <class Op>
inline constexpr bool is_convert_element_type = false;
template <class To>
inline constexpr bool is_convert_element_type<convert_element_type_<To>> = true;

}  // namespace tenet::prim
