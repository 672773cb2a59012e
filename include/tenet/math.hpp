#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Pointwise math that decomposes into the elementwise prims: inverse trig (through the atan2 prim),
// hyperbolic functions, hypot, copysign, logaddexp, xlogy, logit, sinc, fmax/fmin and aliases.
// Each function documents its decomposition; the forms are chosen to keep full range and accuracy
// (no overflow for large |x|, no cancellation near 0), and the tests compare them with PyTorch at
// the edge values (tests/test_opinfo.cpp). For bfloat16 / float16 they compute in float32 and round
// the result once, as PyTorch does (detail::opmath_t; tests/cuda/tu_opinfo_half_*.cu).
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <type_traits>

#include <tenet/ops.hpp>

namespace tenet {

namespace detail {
/// The type a floating op computes in (PyTorch's "opmath"): float32 for bfloat16 / float16, whose
/// result is rounded to the 16-bit type once, not after every prim of the decomposition; T itself
/// otherwise. (atanh of bf16 0.98828 rounded after each prim was -2.77 where torch gives -2.56.)
template <class T>
using opmath_t = std::conditional_t<std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>, float, T>;
/// The operand of a floating-only op in its opmath type (ints and bool become float32, as torch's
/// unary float ops).
template <class X>
auto opmath_operand(const X& x) {
  return share(cast_to<opmath_t<floating_t<value_type_of<X>>>>(x));
}
/// The odd extension of v = f(|x|) (f(0) = 0): -v for x < 0, x itself at +-0 (keeps the zero's sign).
template <class X, class V>
auto with_sign_of(const X& x, const V& v) {
  using T = value_type_of<V>;
  return make_node(prim::where_{}, make_node(prim::lt_{}, x, cast_to<T>(0)), make_node(prim::neg_{}, v),
                   make_node(prim::where_{}, make_node(prim::eq_{}, x, cast_to<T>(0)), x, v));
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// inverse trigonometric: one prim, atan2
/// atan2(y, x), promoted to a floating dtype.
template <class A, class B>
  requires detail::binary_args<A, B>
auto atan2(const A& a, const B& b) {
  using T = detail::floating_t<detail::promoted_t<A, B>>;
  return make_node(prim::atan2_{}, detail::cast_to<T>(a), detail::cast_to<T>(b));
}
/// atan(x) = atan2(x, 1).
template <Expression X>
auto atan(const X& x0) {
  auto x = detail::cast_to<detail::floating_t<value_type_of<X>>>(x0);
  using T = value_type_of<decltype(x)>;
  return make_node(prim::atan2_{}, x, detail::cast_to<T>(1));
}
/// asin(x) = atan2(x, sqrt((1 - x)(1 + x))); NaN outside [-1, 1] from the sqrt.
template <Expression X>
auto asin(const X& x0) {
  using R = detail::floating_t<value_type_of<X>>;
  auto x = detail::opmath_operand(x0);
  using T = value_type_of<decltype(x)>;
  auto c = sqrt(make_node(prim::mul_{}, make_node(prim::sub_{}, detail::cast_to<T>(1), x),
                          make_node(prim::add_{}, detail::cast_to<T>(1), x)));
  return detail::cast_to<R>(make_node(prim::atan2_{}, x, c));
}
/// acos(x) = atan2(sqrt((1 - x)(1 + x)), x).
template <Expression X>
auto acos(const X& x0) {
  using R = detail::floating_t<value_type_of<X>>;
  auto x = detail::opmath_operand(x0);
  using T = value_type_of<decltype(x)>;
  auto s = sqrt(make_node(prim::mul_{}, make_node(prim::sub_{}, detail::cast_to<T>(1), x),
                          make_node(prim::add_{}, detail::cast_to<T>(1), x)));
  return detail::cast_to<R>(make_node(prim::atan2_{}, s, x));
}

// ---------------------------------------------------------------------------------------------
// hyperbolic
namespace detail {
/// h * (h / 2) with h = exp(|x| / 2): e^|x| / 2 without overflowing before the result does.
template <class X>
auto half_exp_abs(const X& x) {
  using T = value_type_of<X>;
  auto h = share(exp(make_node(prim::mul_{}, make_node(prim::abs_{}, x), cast_to<T>(0.5))));
  return std::pair{make_node(prim::mul_{}, h, make_node(prim::mul_{}, h, cast_to<T>(0.5))),
                   make_node(prim::div_{}, cast_to<T>(0.5), make_node(prim::mul_{}, h, h))};  // e^-|x| / 2
}
}  // namespace detail
/// sinh(x): (expm1(x) - expm1(-x)) / 2 for |x| < 1 (no cancellation); else with x's sign
/// e^|x|/2 - e^-|x|/2, the first term as h * (h/2), h = e^(|x|/2), so it overflows only with the result.
template <Expression X>
auto sinh(const X& x0) {
  using R = detail::floating_t<value_type_of<X>>;
  auto x = detail::opmath_operand(x0);
  using T = value_type_of<decltype(x)>;
  auto small = make_node(prim::mul_{}, make_node(prim::sub_{}, expm1(x), expm1(neg(x))), detail::cast_to<T>(0.5));
  auto [big, tiny] = detail::half_exp_abs(x);
  auto large = detail::with_sign_of(x, make_node(prim::sub_{}, big, tiny));
  return detail::cast_to<R>(
      make_node(prim::where_{}, make_node(prim::lt_{}, make_node(prim::abs_{}, x), detail::cast_to<T>(1)), small, large));
}
/// cosh(x) = e^|x|/2 + e^-|x|/2 (as in sinh).
template <Expression X>
auto cosh(const X& x0) {
  using R = detail::floating_t<value_type_of<X>>;
  auto x = detail::opmath_operand(x0);
  auto [big, tiny] = detail::half_exp_abs(x);
  return detail::cast_to<R>(make_node(prim::add_{}, big, tiny));
}
/// asinh(x) = sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log(|x|) + ln 2 once x^2 would lose 1.
template <Expression X>
auto asinh(const X& x0) {
  using R = detail::floating_t<value_type_of<X>>;
  auto x = detail::opmath_operand(x0);
  using T = value_type_of<decltype(x)>;
  auto a = detail::share(make_node(prim::abs_{}, x));
  auto x2 = detail::share(make_node(prim::mul_{}, a, a));
  auto mid = log1p(make_node(prim::add_{}, a,
                             make_node(prim::div_{}, x2,
                                       make_node(prim::add_{}, detail::cast_to<T>(1),
                                                 sqrt(make_node(prim::add_{}, detail::cast_to<T>(1), x2))))));
  auto big = make_node(prim::add_{}, log(a), detail::cast_to<T>(std::numbers::ln2));
  auto v = make_node(prim::where_{}, make_node(prim::gt_{}, a, detail::cast_to<T>(268435456.0)), big, mid);
  return detail::cast_to<R>(detail::with_sign_of(x, v));
}
/// acosh(x) = log1p((x - 1) + sqrt(x - 1) sqrt(x + 1)); log(x) + ln 2 for large x; NaN below 1.
template <Expression X>
auto acosh(const X& x0) {
  using R = detail::floating_t<value_type_of<X>>;
  auto x = detail::opmath_operand(x0);
  using T = value_type_of<decltype(x)>;
  auto xm1 = detail::share(make_node(prim::sub_{}, x, detail::cast_to<T>(1)));
  // sqrt(x - 1) sqrt(x + 1): NaN below 1, and no overflow of the product
  auto mid = log1p(make_node(prim::add_{}, xm1,
                             make_node(prim::mul_{}, sqrt(xm1), sqrt(make_node(prim::add_{}, x, detail::cast_to<T>(1))))));
  auto big = make_node(prim::add_{}, log(x), detail::cast_to<T>(std::numbers::ln2));
  return detail::cast_to<R>(
      make_node(prim::where_{}, make_node(prim::gt_{}, x, detail::cast_to<T>(268435456.0)), big, mid));
}
/// atanh(x) = log1p(2x / (1 - x)) / 2.
template <Expression X>
auto atanh(const X& x0) {
  using R = detail::floating_t<value_type_of<X>>;
  auto x = detail::opmath_operand(x0);
  using T = value_type_of<decltype(x)>;
  auto q = make_node(prim::div_{}, make_node(prim::mul_{}, x, detail::cast_to<T>(2)),
                     make_node(prim::sub_{}, detail::cast_to<T>(1), x));
  return detail::cast_to<R>(make_node(prim::mul_{}, log1p(q), detail::cast_to<T>(0.5)));
}

// ---------------------------------------------------------------------------------------------
// binary
/// hypot(a, b) = m sqrt(1 + (n/m)^2), m = max(|a|, |b|), n = min: no overflow or underflow in the
/// squares; 0 when both are 0, inf when either is inf (even with a NaN, as C's hypot).
template <class A, class B>
  requires detail::binary_args<A, B>
auto hypot(const A& a0, const B& b0) {
  using R = detail::promoted_t<A, B>;
  static_assert(is_floating_v<R>, "tenet: hypot needs floating operands (as torch.hypot)");
  using T = detail::opmath_t<R>;
  auto a = detail::share(make_node(prim::abs_{}, detail::cast_to<T>(a0)));
  auto b = detail::share(make_node(prim::abs_{}, detail::cast_to<T>(b0)));
  auto m = detail::share(make_node(prim::maximum_{}, a, b));
  auto r = make_node(prim::div_{}, make_node(prim::minimum_{}, a, b), m);
  auto v = make_node(prim::mul_{}, m, sqrt(make_node(prim::add_{}, detail::cast_to<T>(1), make_node(prim::mul_{}, r, r))));
  const T inf = std::numeric_limits<T>::infinity();
  auto any_inf = make_node(prim::bitwise_or_{}, make_node(prim::eq_{}, a, scalar<T>{inf}),
                           make_node(prim::eq_{}, b, scalar<T>{inf}));
  return detail::cast_to<R>(
      make_node(prim::where_{}, any_inf, scalar<T>{inf},
                make_node(prim::where_{}, make_node(prim::eq_{}, m, detail::cast_to<T>(0)), detail::cast_to<T>(0), v)));
}
/// copysign(a, b): |a| with the sign of b, promoted to a floating dtype. The sign of a zero b is read
/// through 1/b; a NaN b counts as positive (torch reads a NaN's sign bit: documented difference).
template <class A, class B>
  requires detail::binary_args<A, B>
auto copysign(const A& a0, const B& b0) {
  using T = detail::floating_t<detail::promoted_t<A, B>>;
  auto b = detail::share(detail::cast_to<T>(b0));
  auto mag = detail::share(make_node(prim::abs_{}, detail::cast_to<T>(a0)));
  auto neg_zero = make_node(prim::bitwise_and_{}, make_node(prim::eq_{}, b, detail::cast_to<T>(0)),
                            make_node(prim::lt_{}, make_node(prim::div_{}, detail::cast_to<T>(1), b), detail::cast_to<T>(0)));
  auto negative = make_node(prim::bitwise_or_{}, make_node(prim::lt_{}, b, detail::cast_to<T>(0)), neg_zero);
  return make_node(prim::where_{}, negative, make_node(prim::neg_{}, mag), mag);
}
namespace detail {
/// P(a, b) (maximum or minimum) ignoring a NaN operand: NaN only when both are NaN.
template <class P, class A, class B>
auto nan_ignoring(const A& a0, const B& b0) {
  using T = promoted_t<A, B>;
  auto a = share(cast_to<T>(a0));
  auto b = share(cast_to<T>(b0));
  return make_node(prim::where_{}, make_node(prim::isnan_{}, a), b,
                   make_node(prim::where_{}, make_node(prim::isnan_{}, b), a, make_node(P{}, a, b)));
}
/// max + log1p(base^-|a - b|) / ln(base), as logaddexp (Base2 false) or logaddexp2; a when
/// a == b == +-inf (no inf - inf).
template <bool Base2, class A, class B>
auto log_add_exp(const A& a0, const B& b0) {
  using R = floating_t<promoted_t<A, B>>;
  using T = opmath_t<R>;
  auto a = share(cast_to<T>(a0));
  auto b = share(cast_to<T>(b0));
  auto m = make_node(prim::maximum_{}, a, b);
  auto d = neg(make_node(prim::abs_{}, make_node(prim::sub_{}, a, b)));
  auto v = [&] {
    if constexpr (Base2)
      return make_node(prim::add_{}, m, make_node(prim::mul_{}, log1p(exp2(d)), cast_to<T>(1.0 / std::numbers::ln2)));
    else
      return make_node(prim::add_{}, m, log1p(exp(d)));
  }();
  auto both_inf = make_node(prim::bitwise_and_{}, isinf(a), make_node(prim::eq_{}, a, b));
  return cast_to<R>(make_node(prim::where_{}, both_inf, a, v));
}
}  // namespace detail
/// fmax/fmin: maximum/minimum that ignore a NaN operand (NaN only when both are NaN).
template <class A, class B>
  requires detail::binary_args<A, B>
auto fmax(const A& a, const B& b) {
  return detail::nan_ignoring<prim::maximum_>(a, b);
}
template <class A, class B>
  requires detail::binary_args<A, B>
auto fmin(const A& a, const B& b) {
  return detail::nan_ignoring<prim::minimum_>(a, b);
}
/// logaddexp(a, b) = max + log1p(exp(-|a - b|)); a when a == b == +-inf.
template <class A, class B>
  requires detail::binary_args<A, B>
auto logaddexp(const A& a, const B& b) {
  return detail::log_add_exp<false>(a, b);
}
/// logaddexp2(a, b) = max + log1p(2^-|a - b|) / ln 2.
template <class A, class B>
  requires detail::binary_args<A, B>
auto logaddexp2(const A& a, const B& b) {
  return detail::log_add_exp<true>(a, b);
}
/// xlogy(x, y) = x log(y), 0 where x == 0 unless y is NaN.
template <class A, class B>
  requires detail::binary_args<A, B>
auto xlogy(const A& a0, const B& b0) {
  using R = detail::floating_t<detail::promoted_t<A, B>>;
  using T = detail::opmath_t<R>;
  auto x = detail::share(detail::cast_to<T>(a0));
  auto y = detail::share(detail::cast_to<T>(b0));
  auto zero = make_node(prim::bitwise_and_{}, make_node(prim::eq_{}, x, detail::cast_to<T>(0)),
                        make_node(prim::bitwise_not_{}, make_node(prim::isnan_{}, y)));
  return detail::cast_to<R>(make_node(prim::where_{}, zero, detail::cast_to<T>(0), make_node(prim::mul_{}, x, log(y))));
}
/// heaviside(x, values): values where x == 0, else x > 0 (same dtype, as torch.heaviside).
template <Expression X, Expression V>
auto heaviside(const X& x0, const V& v) {
  using T = detail::promoted_t<X, V>;
  static_assert(std::is_same_v<T, value_type_of<X>> && std::is_same_v<T, value_type_of<V>>,
                "tenet: heaviside needs input and values of the same dtype (as torch.heaviside)");
  auto x = detail::share(x0);
  return make_node(prim::where_{}, make_node(prim::eq_{}, x, detail::cast_to<T>(0)), v,
                   detail::cast_to<T>(make_node(prim::gt_{}, x, detail::cast_to<T>(0))));
}
/// float_power(a, b): pow in float64 (as torch.float_power).
template <class A, class B>
  requires detail::binary_args<A, B>
auto float_power(const A& a, const B& b) {
  return make_node(prim::pow_{}, detail::cast_to<double>(a), detail::cast_to<double>(b));
}
/// rsub(a, b, alpha = 1) = b - alpha a.
template <Expression A, class B>
  requires ExprOrScalar<B>
auto rsub(const A& a, const B& b, double alpha = 1.0) {
  using T = detail::promoted_t<A, B>;
  return sub(b, mul(a, detail::cast_to<T>(alpha)));
}

// ---------------------------------------------------------------------------------------------
// unary
/// log10(x) = log(x) / ln 10.
template <Expression X>
auto log10(const X& x0) {
  using R = detail::floating_t<value_type_of<X>>;
  auto x = detail::cast_to<detail::opmath_t<R>>(x0);
  using T = value_type_of<decltype(x)>;
  return detail::cast_to<R>(make_node(prim::div_{}, log(x), detail::cast_to<T>(std::numbers::ln10)));
}
/// deg2rad / rad2deg: multiply by pi/180 or 180/pi.
template <Expression X>
auto deg2rad(const X& x0) {
  using R = detail::floating_t<value_type_of<X>>;
  auto x = detail::cast_to<detail::opmath_t<R>>(x0);
  using T = value_type_of<decltype(x)>;
  return detail::cast_to<R>(make_node(prim::mul_{}, x, detail::cast_to<T>(std::numbers::pi / 180.0)));
}
template <Expression X>
auto rad2deg(const X& x0) {
  using R = detail::floating_t<value_type_of<X>>;
  auto x = detail::cast_to<detail::opmath_t<R>>(x0);
  using T = value_type_of<decltype(x)>;
  return detail::cast_to<R>(make_node(prim::mul_{}, x, detail::cast_to<T>(180.0 / std::numbers::pi)));
}
/// frac(x) = x - trunc(x) (floating dtypes, as torch.frac).
template <Expression X>
auto frac(const X& x0) {
  static_assert(is_floating_v<value_type_of<X>>, "tenet: frac needs a floating tensor (as torch.frac)");
  auto x = detail::share(x0);
  return make_node(prim::sub_{}, x, make_node(prim::trunc_{}, x));
}
/// sinc(x) = sin(pi x) / (pi x), 1 at 0.
template <Expression X>
auto sinc(const X& x0) {
  using R = detail::floating_t<value_type_of<X>>;
  auto x = detail::opmath_operand(x0);
  using T = value_type_of<decltype(x)>;
  auto px = detail::share(make_node(prim::mul_{}, x, detail::cast_to<T>(std::numbers::pi)));
  return detail::cast_to<R>(make_node(prim::where_{}, make_node(prim::eq_{}, x, detail::cast_to<T>(0)),
                                      detail::cast_to<T>(1), make_node(prim::div_{}, sin(px), px)));
}
/// logit(x) = log(x / (1 - x)); with eps the input is first clamped to [eps, 1 - eps].
template <Expression X>
auto logit(const X& x0, std::optional<double> eps = std::nullopt) {
  using R = detail::floating_t<value_type_of<X>>;
  auto xf = detail::cast_to<detail::opmath_t<R>>(x0);
  using T = value_type_of<decltype(xf)>;
  auto body = [](const auto& x) {
    return log(make_node(prim::div_{}, x, make_node(prim::sub_{}, detail::cast_to<T>(1), x)));
  };
  if (!eps)
    return detail::cast_to<R>(body(detail::share(clamp(xf, detail::cast_to<T>(-INFINITY), detail::cast_to<T>(INFINITY)))));
  return detail::cast_to<R>(body(detail::share(clamp(xf, detail::cast_to<T>(*eps), detail::cast_to<T>(1.0 - *eps)))));
}
/// Aliases of torch: positive, negative, absolute, fix, sgn (real), arctan ... spelled as torch.
template <Expression X>
auto positive(const X& x) {
  return x;
}
template <Expression X>
auto negative(const X& x) {
  return neg(x);
}
template <Expression X>
auto absolute(const X& x) {
  return abs(x);
}
template <Expression X>
auto fix(const X& x) {
  return trunc(x);
}
template <Expression X>
auto sgn(const X& x) {
  return sign(x);
}

}  // namespace tenet
