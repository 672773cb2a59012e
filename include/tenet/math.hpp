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
#include <string_view>
#include <type_traits>

#include <tenet/decomp/math.hpp>
#include <tenet/ops.hpp>

namespace tenet {


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
// ---------------------------------------------------------------------------------------------
// Composites with PyTorch's derivative (has_derivative: autograd keeps them whole and applies
// `derivative`, autograd/vjp.hpp): the chain rule through their decompositions is NaN where an
// intermediate is infinite (0 * inf): asin at +-1, sinh and cosh of large |x|, asinh at 0 and
// +-inf, acosh below -1 (where torch's derivative is finite while the value is NaN), atanh at
// +-1. Each decomposition runs on the opmath operand (float for bfloat16 / float16).



/// asin(x), NaN outside [-1, 1] (aten::asin).
template <Expression X>
auto asin(const X& x) {
  return detail::opmath_composite<aten::asin>(x);
}
/// acos(x), NaN outside [-1, 1] (aten::acos).
template <Expression X>
auto acos(const X& x) {
  return detail::opmath_composite<aten::acos>(x);
}
/// sinh(x) (aten::sinh).
template <Expression X>
auto sinh(const X& x) {
  return detail::opmath_composite<aten::sinh>(x);
}
/// cosh(x) (aten::cosh).
template <Expression X>
auto cosh(const X& x) {
  return detail::opmath_composite<aten::cosh>(x);
}
/// asinh(x) (aten::asinh).
template <Expression X>
auto asinh(const X& x) {
  return detail::opmath_composite<aten::asinh>(x);
}
/// acosh(x), NaN below 1 (aten::acosh).
template <Expression X>
auto acosh(const X& x) {
  return detail::opmath_composite<aten::acosh>(x);
}
/// atanh(x), NaN outside [-1, 1], +-inf at +-1 (aten::atanh).
template <Expression X>
auto atanh(const X& x) {
  return detail::opmath_composite<aten::atanh>(x);
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
/// a == b == +-inf (no inf - inf). NaN when either is NaN.
template <bool Base2, class A, class B>
auto log_add_exp(const A& a0, const B& b0) {
  using R = floating_t<promoted_t<A, B>>;
  using T = opmath_t<R>;
  auto a = share(cast_to<T>(a0));
  auto b = share(cast_to<T>(b0));
  // m = max(a, b), d = -|a - b|, both with the side a >= b picks: the gradient at a == b is then
  // 1/2 each (1 from m, -1/2 from d), where maximum's tie rule against a constant and abs'(0) = 0
  // would give a 0 (torch: 1 / (1 + exp(b - a)))
  auto a_wins = share(make_node(prim::ge_{}, a, b));
  auto m = make_node(prim::where_{}, a_wins, a, b);
  auto d = make_node(prim::where_{}, a_wins, make_node(prim::sub_{}, b, a), make_node(prim::sub_{}, a, b));
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
  auto zero = detail::share(make_node(prim::bitwise_and_{}, make_node(prim::eq_{}, x, detail::cast_to<T>(0)),
                                      make_node(prim::bitwise_not_{}, make_node(prim::isnan_{}, y))));
  // the product reads x through a second where: x's gradient there is 0, as torch's xlogy(x != 0, y),
  // not 0 * log(0) = NaN
  auto xs = make_node(prim::where_{}, zero, detail::cast_to<T>(0), x);
  return detail::cast_to<R>(make_node(prim::where_{}, zero, detail::cast_to<T>(0), make_node(prim::mul_{}, xs, log(y))));
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

/// sinc(x) = sin(pi x) / (pi x), 1 at 0 (aten::sinc).
template <Expression X>
auto sinc(const X& x) {
  return detail::opmath_composite<aten::sinc>(x);
}
/// logit(x) = log(x / (1 - x)); with eps the input is first clamped to [eps, 1 - eps] (aten::logit).
template <Expression X>
auto logit(const X& x0, std::optional<double> eps = std::nullopt) {
  using R = detail::floating_t<value_type_of<X>>;
  aten::logit op;
  if (eps) op.eps = *eps;
  return detail::cast_to<R>(make_node(op, detail::cast_to<detail::opmath_t<R>>(x0)));
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
