#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The math composites: asin, acos, sinh, cosh, asinh, acosh, atanh, sinc, logit. Each
// decomposition runs on the opmath operand (float for bfloat16 / float16; opmath_t) and carries
// torch's derivative (has_derivative) where the decomposition's chain rule would give NaN or a
// wrong value at a kink (include/tenet/math.hpp says where).
#include <cmath>
#include <limits>
#include <numbers>
#include <string_view>
#include <type_traits>
#include <utility>

#include <tenet/decomp/composite.hpp>
#include <tenet/expr/shared.hpp>

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

namespace aten {
/// asin(x) = atan2(x, sqrt((1 - x)(1 + x))); NaN outside [-1, 1] from the sqrt.
/// d/dx = 1 / sqrt(1 - x^2): inf at +-1, NaN outside.
struct asin : same_as_input {
  static constexpr std::string_view name = "asin";
  static constexpr bool has_derivative = true;
  template <class X>
  auto decompose(const X& x) const {
    using T = value_type_of<X>;
    auto c = sqrt(make_node(prim::mul_{}, make_node(prim::sub_{}, detail::cast_to<T>(1), x),
                                   make_node(prim::add_{}, detail::cast_to<T>(1), x)));
    return make_node(prim::atan2_{}, x, c);
  }
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y&, const G& g) {
    return g * rsqrt(1.0 - x * x);
  }
};
/// acos(x) = atan2(sqrt((1 - x)(1 + x)), x); d/dx = -1 / sqrt(1 - x^2).
struct acos : same_as_input {
  static constexpr std::string_view name = "acos";
  static constexpr bool has_derivative = true;
  template <class X>
  auto decompose(const X& x) const {
    using T = value_type_of<X>;
    auto s = sqrt(make_node(prim::mul_{}, make_node(prim::sub_{}, detail::cast_to<T>(1), x),
                                   make_node(prim::add_{}, detail::cast_to<T>(1), x)));
    return make_node(prim::atan2_{}, s, x);
  }
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y&, const G& g) {
    return g * -rsqrt(1.0 - x * x);
  }
};
/// sinh(x): (expm1(x) - expm1(-x)) / 2 for |x| < 1 (no cancellation); else with x's sign
/// e^|x|/2 - e^-|x|/2, the first term as h * (h/2), h = e^(|x|/2), so it overflows only with the
/// result. d/dx = cosh(x).
struct sinh : same_as_input {
  static constexpr std::string_view name = "sinh";
  static constexpr bool has_derivative = true;
  template <class X>
  auto decompose(const X& x) const;
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y&, const G& g);
};
/// cosh(x) = e^|x|/2 + e^-|x|/2 (as in sinh); d/dx = sinh(x).
struct cosh : same_as_input {
  static constexpr std::string_view name = "cosh";
  static constexpr bool has_derivative = true;
  template <class X>
  auto decompose(const X& x) const;
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y&, const G& g) {
    return g * make_node(sinh{}, x);
  }
};
/// asinh(x) = sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log(|x|) + ln 2 once x^2 would lose 1.
/// d/dx = 1 / sqrt(x^2 + 1).
struct asinh : same_as_input {
  static constexpr std::string_view name = "asinh";
  static constexpr bool has_derivative = true;
  template <class X>
  auto decompose(const X& x) const;
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y&, const G& g) {
    return g * rsqrt(x * x + 1.0);
  }
};
/// acosh(x) = log1p((x - 1) + sqrt(x - 1) sqrt(x + 1)); log(x) + ln 2 for large x; NaN below 1.
/// d/dx = 1 / sqrt(x^2 - 1), as torch: finite below -1 (where the value is NaN), inf at +-1.
struct acosh : same_as_input {
  static constexpr std::string_view name = "acosh";
  static constexpr bool has_derivative = true;
  template <class X>
  auto decompose(const X& x) const;
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y&, const G& g) {
    return g * rsqrt(x * x - 1.0);
  }
};
/// atanh(x) = log1p(2x / (1 - x)) / 2; d/dx = 1 / (1 - x^2): inf at +-1.
struct atanh : same_as_input {
  static constexpr std::string_view name = "atanh";
  static constexpr bool has_derivative = true;
  template <class X>
  auto decompose(const X& x) const {
    using T = value_type_of<X>;
    auto q = make_node(prim::div_{}, make_node(prim::mul_{}, x, detail::cast_to<T>(2)),
                       make_node(prim::sub_{}, detail::cast_to<T>(1), x));
    return make_node(prim::mul_{}, log1p(q), detail::cast_to<T>(0.5));
  }
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y&, const G& g) {
    return g / (1.0 - x * x);
  }
};
}  // namespace aten

namespace detail {
/// h * (h / 2) with h = exp(|x| / 2): e^|x| / 2 without overflowing before the result does.
template <class X>
auto half_exp_abs(const X& x) {
  using T = value_type_of<X>;
  auto h = share(exp(make_node(prim::mul_{}, make_node(prim::abs_{}, x), cast_to<T>(0.5))));
  return std::pair{make_node(prim::mul_{}, h, make_node(prim::mul_{}, h, cast_to<T>(0.5))),
                   make_node(prim::div_{}, cast_to<T>(0.5), make_node(prim::mul_{}, h, h))};  // e^-|x| / 2
}
/// The composite Op of the opmath operand of x0, rounded back to x0's floating dtype.
template <class Op, class X>
auto opmath_composite(const X& x0) {
  using R = floating_t<value_type_of<X>>;
  return cast_to<R>(make_node(Op{}, opmath_operand(x0)));
}
}  // namespace detail

template <class X>
auto aten::sinh::decompose(const X& x) const {
  using T = value_type_of<X>;
  auto small = make_node(prim::mul_{}, make_node(prim::sub_{}, expm1(x), expm1(neg(x))), detail::cast_to<T>(0.5));
  auto [big, tiny] = detail::half_exp_abs(x);
  auto large = detail::with_sign_of(x, make_node(prim::sub_{}, big, tiny));
  return make_node(prim::where_{}, make_node(prim::lt_{}, make_node(prim::abs_{}, x), detail::cast_to<T>(1)), small, large);
}
template <class X, class Y, class G>
auto aten::sinh::derivative(const X& x, const Y&, const G& g) {
  return g * make_node(cosh{}, x);
}
template <class X>
auto aten::cosh::decompose(const X& x) const {
  auto [big, tiny] = detail::half_exp_abs(x);
  return make_node(prim::add_{}, big, tiny);
}
template <class X>
auto aten::asinh::decompose(const X& x) const {
  using T = value_type_of<X>;
  auto a = detail::share(make_node(prim::abs_{}, x));
  auto x2 = detail::share(make_node(prim::mul_{}, a, a));
  auto mid = log1p(make_node(prim::add_{}, a,
                             make_node(prim::div_{}, x2,
                                       make_node(prim::add_{}, detail::cast_to<T>(1),
                                                 sqrt(make_node(prim::add_{}, detail::cast_to<T>(1), x2))))));
  auto big = make_node(prim::add_{}, log(a), detail::cast_to<T>(std::numbers::ln2));
  auto v = make_node(prim::where_{}, make_node(prim::gt_{}, a, detail::cast_to<T>(268435456.0)), big, mid);
  return detail::with_sign_of(x, v);
}
template <class X>
auto aten::acosh::decompose(const X& x) const {
  using T = value_type_of<X>;
  auto xm1 = detail::share(make_node(prim::sub_{}, x, detail::cast_to<T>(1)));
  // sqrt(x - 1) sqrt(x + 1): NaN below 1, and no overflow of the product
  auto mid = log1p(make_node(prim::add_{}, xm1,
                             make_node(prim::mul_{}, sqrt(xm1),
                                       sqrt(make_node(prim::add_{}, x, detail::cast_to<T>(1))))));
  auto big = make_node(prim::add_{}, log(x), detail::cast_to<T>(std::numbers::ln2));
  return make_node(prim::where_{}, make_node(prim::gt_{}, x, detail::cast_to<T>(268435456.0)), big, mid);
}

namespace aten {
/// sinc(x) = sin(pi x) / (pi x), 1 at 0. d/dx = (pi x cos(pi x) - sin(pi x)) / (pi x^2), taken as 0
/// where pi x^2 is 0 (torch's formula and mask; the decomposition's chain rule is 0 / 0 there).
struct sinc : same_as_input {
  static constexpr std::string_view name = "sinc";
  static constexpr bool has_derivative = true;
  template <class X>
  auto decompose(const X& x) const {
    using T = value_type_of<X>;
    auto px = detail::share(make_node(prim::mul_{}, x, detail::cast_to<T>(std::numbers::pi)));
    return make_node(prim::where_{}, make_node(prim::eq_{}, x, detail::cast_to<T>(0)), detail::cast_to<T>(1),
                     make_node(prim::div_{}, sin(px), px));
  }
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y&, const G& g) {
    auto px = x * std::numbers::pi;
    auto sq = x * x * std::numbers::pi;
    return where(sq == 0.0, 0.0, g * (px * cos(px) - sin(px)) / sq);
  }
};
/// logit(x) = log(x / (1 - x)), the input first clamped to [eps, 1 - eps] when eps >= 0 (eps < 0:
/// none, as torch's kernel). d/dx = 1 / (x (1 - x)) inside [eps, 1 - eps] (both ends included), 0
/// outside it; without eps NaN outside [0, 1] (torch's logit_backward; the decomposition's would
/// be finite there and 0 at the clamp's bounds).
struct logit : same_as_input {
  static constexpr std::string_view name = "logit";
  static constexpr bool has_derivative = true;
  double eps = -1.0;
  template <class X>
  auto decompose(const X& x0) const {
    using T = value_type_of<X>;
    const bool none = eps < 0;
    const T lo = none ? -std::numeric_limits<T>::infinity() : static_cast<T>(eps);
    const T hi = none ? std::numeric_limits<T>::infinity() : static_cast<T>(1.0 - eps);
    auto x = detail::share(clamp(x0, scalar<T>{lo}, scalar<T>{hi}));
    return log(make_node(prim::div_{}, x, make_node(prim::sub_{}, detail::cast_to<T>(1), x)));
  }
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y& y, const G& g) {
    const double e = y.op.eps;
    const bool none = e < 0;
    const double lo = none ? 0.0 : e, hi = none ? 1.0 : 1.0 - e;
    return where((x < lo) || (x > hi), none ? std::numeric_limits<double>::quiet_NaN() : 0.0,
                        g / (x * (1.0 - x)));
  }
};
}  // namespace aten

}  // namespace tenet
