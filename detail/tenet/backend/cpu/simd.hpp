#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Which elementwise prims the CPU backend runs on xsimd batches, and how. A prim without an entry
// runs through its scalar `apply` (still fused and threaded); see elementwise.hpp.
#include <cstdint>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>  // xsimd::batch, vector math (exp, log, erf, tanh ...)

#include <numbers>

#include <tenet/decomp/activations.hpp>  // the pointwise composites
#include <tenet/prims/elementwise.hpp>

namespace tenet::detail::cpu {

/// Lane types with vector kernels.
template <class T>
inline constexpr bool simd_lane = std::is_same_v<T, float> || std::is_same_v<T, double>;

template <class P>
struct simd_impl {
  static constexpr bool supported = false;
};

/// exp without xsimd's early overflow: xsimd 8 returns inf above 88.376 for float (the true limit is
/// 88.722) and above 709.43 for double. Lanes past its limit take exp(x - 1) * e; x - 1 is exact
/// there, so the result keeps full precision. The check is one compare per vector.
template <class B>
TENET_INLINE B exp_full_range(const B& x) {
  using T = typename B::value_type;
  constexpr T limit = std::is_same_v<T, float> ? T(88.3f) : T(709.0);
  B r = xsimd::exp(x);
  const auto big = x > B(limit);
  if (xsimd::any(big)) r = xsimd::select(big, xsimd::exp(x - B(T(1))) * B(std::numbers::e_v<T>), r);
  return r;
}
/// expm1 with the range of exp_full_range (where exp(x) - 1 == exp(x) in the lane type).
template <class B>
TENET_INLINE B expm1_full_range(const B& x) {
  using T = typename B::value_type;
  B r = xsimd::expm1(x);
  const auto big = x > B(T(80));
  if (xsimd::any(big)) r = xsimd::select(big, exp_full_range(x), r);
  return xsimd::select(x == B(T(0)), x, r);  // keeps -0.0
}

/// erf for float lanes: x * P(x^2) / Q(x^2) on x clamped to [-4, 4] (erf(4) rounds to 1 in float),
/// a rational fit made for tenet (least squares pushed toward minimax on [0, 4], checked against
/// 30-digit erf: max relative error 3.2e-7, 5 ulp next to 1). Branch-free: about 14 vector ops
/// where xsimd 8's erf evaluates two kernels and an exp for mixed inputs. Double keeps xsimd's.
template <class B>
TENET_INLINE B erf_fast(const B& x) {
  using T = typename B::value_type;
  if constexpr (!std::is_same_v<T, float>) {
    return xsimd::erf(x);
  } else {
    const B xc = xsimd::min(xsimd::max(x, B(-4.0f)), B(4.0f));
    const B t = xc * xc;
    B p(1.911019258133508e-08f);
    p = xsimd::fma(p, t, B(-1.9422201827262973e-06f));
    p = xsimd::fma(p, t, B(0.00014727548961687007f));
    p = xsimd::fma(p, t, B(0.003990218443012632f));
    p = xsimd::fma(p, t, B(0.051523837316424674f));
    p = xsimd::fma(p, t, B(0.20711770478631855f));
    p = xsimd::fma(p, t, B(1.1283790944644143f));
    B q(0.0010210184813511335f);
    q = xsimd::fma(q, t, B(0.014957386913730894f));
    q = xsimd::fma(q, t, B(0.11796757971026268f));
    q = xsimd::fma(q, t, B(0.5168845390848993f));
    q = xsimd::fma(q, t, B(1.0f));
    return xsimd::select(xsimd::isnan(x), x, xc * p / q);
  }
}

/// A binary prim whose vector kernel is wrong on some special inputs (zeros, infinities, NaN,
/// negative bases): lanes are computed by `fast`, and a batch holding any special lane is computed
/// by the prim's scalar `apply` instead (rare in real data, so the common path stays vector).
template <class P, class B, class Special, class Fast>
TENET_INLINE B with_scalar_specials(const B& a, const B& b, Special special, Fast fast) {
  using T = typename B::value_type;
  if (!xsimd::any(special(a, b))) return fast(a, b);
  alignas(64) T x[B::size], y[B::size];
  a.store_aligned(x);
  b.store_aligned(y);
  for (std::size_t i = 0; i < B::size; ++i) x[i] = P::apply(x[i], y[i]);
  return B::load_aligned(x);
}
/// pow: xsimd 8's pow is right for a positive finite base and a finite exponent; everything else
/// (zero, negative or infinite base, NaN, infinite exponent, base 1) takes C's pow.
template <class B>
TENET_INLINE B pow_ieee(const B& a, const B& b) {
  using T = typename B::value_type;
  const B inf(std::numeric_limits<T>::infinity());
  return with_scalar_specials<prim::pow_>(
      a, b, [&](const B& x, const B& y) { return (!(x > B(T(0)))) | (x == inf) | (x == B(T(1))) | (!(xsimd::abs(y) < inf)); },
      [](const B& x, const B& y) { return xsimd::pow(x, y); });
}
/// atan2: xsimd 8 gives NaN for (0, 0) and (inf, inf); those batches take C's atan2.
template <class B>
TENET_INLINE B atan2_ieee(const B& a, const B& b) {
  using T = typename B::value_type;
  const B inf(std::numeric_limits<T>::infinity());
  return with_scalar_specials<prim::atan2_>(
      a, b, [&](const B& y, const B& x) { return ((y == B(T(0))) & (x == B(T(0)))) | ((xsimd::abs(y) == inf) & (xsimd::abs(x) == inf)); },
      [](const B& y, const B& x) { return xsimd::atan2(y, x); });
}
/// -x by flipping the sign bit (xsimd 8 computes 0 - x, which loses the sign of a zero).
template <class B>
TENET_INLINE B neg_signed(const B& x) {
  using T = typename B::value_type;
  return xsimd::bitwise_xor(x, B(T(-0.0)));
}

#define TENET_SIMD_UNARY(PRIM, ...)                 \
  template <>                                       \
  struct simd_impl<prim::PRIM> {                    \
    static constexpr bool supported = true;         \
    template <class B>                              \
    static TENET_INLINE B apply(const B& x) {       \
      return __VA_ARGS__;                           \
    }                                               \
  };
TENET_SIMD_UNARY(neg_, neg_signed(x))
TENET_SIMD_UNARY(abs_, xsimd::abs(x))
TENET_SIMD_UNARY(exp_, exp_full_range(x))
TENET_SIMD_UNARY(exp2_, xsimd::exp2(x))
TENET_SIMD_UNARY(expm1_, expm1_full_range(x))
TENET_SIMD_UNARY(log_, xsimd::log(x))
TENET_SIMD_UNARY(log2_, xsimd::log2(x))
TENET_SIMD_UNARY(log1p_, xsimd::select(x == B(0), x, xsimd::log1p(x)))  // keeps -0.0
TENET_SIMD_UNARY(sqrt_, xsimd::sqrt(x))
TENET_SIMD_UNARY(rsqrt_, B(1) / xsimd::sqrt(x))
TENET_SIMD_UNARY(sin_, xsimd::sin(x))
TENET_SIMD_UNARY(cos_, xsimd::cos(x))
TENET_SIMD_UNARY(tan_, xsimd::tan(x))
TENET_SIMD_UNARY(tanh_, xsimd::tanh(x))
TENET_SIMD_UNARY(erf_, erf_fast(x))
TENET_SIMD_UNARY(floor_, xsimd::floor(x))
TENET_SIMD_UNARY(ceil_, xsimd::ceil(x))
TENET_SIMD_UNARY(round_, xsimd::nearbyint(x))
TENET_SIMD_UNARY(trunc_, xsimd::trunc(x))
TENET_SIMD_UNARY(reciprocal_, B(1) / x)
#undef TENET_SIMD_UNARY

#define TENET_SIMD_BINARY(PRIM, ...)                          \
  template <>                                                 \
  struct simd_impl<prim::PRIM> {                              \
    static constexpr bool supported = true;                   \
    template <class B>                                        \
    static TENET_INLINE auto apply(const B& a, const B& b) {  \
      return __VA_ARGS__;                                     \
    }                                                         \
  };
TENET_SIMD_BINARY(add_, a + b)
TENET_SIMD_BINARY(sub_, a - b)
TENET_SIMD_BINARY(mul_, a* b)
TENET_SIMD_BINARY(div_, a / b)
TENET_SIMD_BINARY(pow_, pow_ieee(a, b))
// maximum/minimum: NaN propagates; on ties (0.0 vs -0.0) the first operand, as torch
TENET_SIMD_BINARY(maximum_, xsimd::select(xsimd::isnan(a), a, xsimd::select(xsimd::isnan(b), b, xsimd::select(a < b, b, a))))
TENET_SIMD_BINARY(minimum_, xsimd::select(xsimd::isnan(a), a, xsimd::select(xsimd::isnan(b), b, xsimd::select(b < a, b, a))))
TENET_SIMD_BINARY(atan2_, atan2_ieee(a, b))
TENET_SIMD_BINARY(eq_, a == b)
TENET_SIMD_BINARY(ne_, a != b)
TENET_SIMD_BINARY(lt_, a < b)
TENET_SIMD_BINARY(le_, a <= b)
TENET_SIMD_BINARY(gt_, a > b)
TENET_SIMD_BINARY(ge_, a >= b)
#undef TENET_SIMD_BINARY

template <>
struct simd_impl<prim::where_> {
  static constexpr bool supported = true;
  template <class M, class B>
  static TENET_INLINE B apply(const M& c, const B& a, const B& b) {
    return xsimd::select(c, a, b);
  }
};

// Pointwise composites (ops.hpp) with vector kernels.
template <>
struct simd_impl<aten::sigmoid> {
  static constexpr bool supported = true;
  template <class B>
  static TENET_INLINE B apply(const B& x) {
    return B(1) / (B(1) + exp_full_range(-x));
  }
};
template <>
struct simd_impl<aten::silu> {
  static constexpr bool supported = true;
  template <class B>
  static TENET_INLINE B apply(const B& x) {
    return x / (B(1) + exp_full_range(-x));
  }
};
template <bool Tanh>
struct simd_impl<aten::gelu<Tanh>> {
  static constexpr bool supported = true;
  template <class B>
  static TENET_INLINE B apply(const B& x) {
    using T = typename B::value_type;
    if constexpr (Tanh) {
      const B k(T(std::numbers::sqrt2 * std::numbers::inv_sqrtpi));
      return B(T(0.5)) * x * (B(1) + xsimd::tanh(k * xsimd::fma(B(T(0.044715)) * x, x * x, x)));
    } else {
      return x * B(T(0.5)) * (B(1) + erf_fast(x * B(T(std::numbers::sqrt2 / 2))));
    }
  }
};

template <bool Tanh>
struct simd_impl<aten::gelu_backward<Tanh>> {
  static constexpr bool supported = true;
  template <class B>
  static TENET_INLINE B apply(const B& g, const B& x) {
    using T = typename B::value_type;
    using Op = aten::gelu_backward<Tanh>;
    const B half(T(0.5)), one(T(1));
    if constexpr (Tanh) {
      const B k = B(T(Op::k_tanh)), c = B(T(Op::k_cube)), x2 = x * x;  // (k(T(Op::...)) parses as a function)
      const B t = xsimd::tanh(k * xsimd::fma(c * x2, x, x));
      return g * (half * (one + t) + half * x * (one - t * t) * (k * xsimd::fma(B(T(3 * Op::k_cube)), x2, one)));
    } else {
      return g * (half * (one + erf_fast(x * B(T(Op::k_erf)))) + x * (B(T(Op::k_pdf)) * exp_full_range(B(T(-0.5)) * x * x)));
    }
  }
};

/// Prims whose vector result is a mask (batch_bool) rather than values.
template <class P>
inline constexpr bool simd_mask_result = std::is_same_v<P, prim::eq_> || std::is_same_v<P, prim::ne_> ||
                                         std::is_same_v<P, prim::lt_> || std::is_same_v<P, prim::le_> ||
                                         std::is_same_v<P, prim::gt_> || std::is_same_v<P, prim::ge_>;

/// Horizontal reductions of one batch (xsimd 8 has only hadd).
template <class B>
TENET_INLINE auto hsum(const B& b) {
  return xsimd::hadd(b);
}
template <class B>
TENET_INLINE auto hmax(const B& b) {
  using T = typename B::value_type;
  alignas(64) T v[B::size];
  b.store_aligned(v);
  T m = v[0];
  for (std::size_t i = 1; i < B::size; ++i) m = v[i] > m ? v[i] : m;
  return m;
}
/// The maximum of a[0, n) (-inf for n = 0), two batches at a time. A NaN may be skipped: callers
/// that go on to exp(a - max) and sum see it there (softmax, attention).
template <class T>
T row_max(const T* a, std::int64_t n) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  B m0(-std::numeric_limits<T>::infinity()), m1 = m0;
  std::int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    m0 = xsimd::max(m0, B::load_unaligned(a + i));
    m1 = xsimd::max(m1, B::load_unaligned(a + i + W));
  }
  for (; i + W <= n; i += W) m0 = xsimd::max(m0, B::load_unaligned(a + i));
  T m = hmax(xsimd::max(m0, m1));
  for (; i < n; ++i) m = a[i] > m ? a[i] : m;
  return m;
}
template <class B>
TENET_INLINE auto hmin(const B& b) {
  using T = typename B::value_type;
  alignas(64) T v[B::size];
  b.store_aligned(v);
  T m = v[0];
  for (std::size_t i = 1; i < B::size; ++i) m = v[i] < m ? v[i] : m;
  return m;
}

}  // namespace tenet::detail::cpu
