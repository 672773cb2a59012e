#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// The ATen-level ops. Each returns a lazy expression; assigning it to a Tensor evaluates it.
// Every op is a decomposition into prims: most build prim nodes directly (inserting the casts of
// PyTorch's type promotion), the composites below (sigmoid, silu, gelu, softmax, log_softmax) stay
// ATen-level nodes until decompose_t rewrites them, so that a backend can run them natively.
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <optional>
#include <type_traits>
#include <utility>

#include <tenet/dtype.hpp>
#include <tenet/tensor.hpp>

#include <tenet/decomp/activations.hpp>
#include <tenet/decomp/build.hpp>
#include <tenet/decomp/decompose.hpp>
#include <tenet/decomp/moments.hpp>
#include <tenet/decomp/softmax.hpp>
#include <tenet/expr/node.hpp>
#include <tenet/expr/shared.hpp>
#include <tenet/prims/elementwise.hpp>
#include <tenet/prims/reduce.hpp>

namespace tenet {

/// Tag: keep reduced dims with extent 1 (`sum<1>(x, keepdim)`).
struct keepdim_t {};
inline constexpr keepdim_t keepdim{};


// ---------------------------------------------------------------------------------------------
// unary
#define TENET_FLOAT_UNARY(NAME)                     \
  template <Expression X>                           \
  auto NAME(const X& x) {                           \
    return detail::float_unary<prim::NAME##_>(x);   \
  }
TENET_FLOAT_UNARY(exp)
TENET_FLOAT_UNARY(exp2)
TENET_FLOAT_UNARY(expm1)
TENET_FLOAT_UNARY(log)
TENET_FLOAT_UNARY(log2)
TENET_FLOAT_UNARY(log1p)
TENET_FLOAT_UNARY(sqrt)
TENET_FLOAT_UNARY(rsqrt)
TENET_FLOAT_UNARY(sin)
TENET_FLOAT_UNARY(cos)
TENET_FLOAT_UNARY(tan)
TENET_FLOAT_UNARY(tanh)
TENET_FLOAT_UNARY(erf)
TENET_FLOAT_UNARY(reciprocal)
#undef TENET_FLOAT_UNARY

/// floor, ceil, round, trunc: identity on integers (as torch).
#define TENET_ROUNDING_UNARY(NAME)                                          \
  template <Expression X>                                                   \
  auto NAME(const X& x) {                                                   \
    if constexpr (is_floating_v<value_type_of<X>>)                          \
      return detail::same_unary<prim::NAME##_>(x);                          \
    else                                                                    \
      return x;                                                             \
  }
TENET_ROUNDING_UNARY(floor)
TENET_ROUNDING_UNARY(ceil)
TENET_ROUNDING_UNARY(round)
TENET_ROUNDING_UNARY(trunc)
#undef TENET_ROUNDING_UNARY

template <Expression X>
auto neg(const X& x) {
  static_assert(!std::is_same_v<value_type_of<X>, bool>,
                "tenet: negation of a bool tensor is not supported (as in PyTorch); use logical_not");
  return detail::same_unary<prim::neg_>(x);
}
template <Expression X>
auto operator-(const X& x) {
  return neg(x);
}
template <Expression X>
auto abs(const X& x) {
  return detail::same_unary<prim::abs_>(x);
}
template <Expression X>
auto sign(const X& x) {
  return detail::same_unary<prim::sign_>(x);
}
template <Expression X>
auto square(const X& x) {
  if constexpr (std::is_same_v<value_type_of<X>, bool>)
    return make_node(prim::mul_{}, detail::cast_to<std::int64_t>(x), detail::cast_to<std::int64_t>(x));
  else
    return make_node(prim::mul_{}, x, x);
}
template <Expression X>
auto relu(const X& x) {
  using T = value_type_of<X>;
  static_assert(!std::is_same_v<T, bool>, "tenet: relu of a bool tensor is not supported (as in PyTorch)");
  return make_node(prim::maximum_{}, x, scalar<T>{T(0)});
}
template <Expression X>
auto isnan(const X& x) {
  return make_node(prim::isnan_{}, x);
}
/// logical_not: bitwise_not of the operand as bool (nonzero, and NaN, is true).
template <Expression X>
auto logical_not(const X& x) {
  return make_node(prim::bitwise_not_{}, detail::cast_to<bool>(x));
}
template <Expression X>
auto operator!(const X& x) {
  return logical_not(x);
}


template <Expression X>
auto sigmoid(const X& x) {
  return make_node(aten::sigmoid{}, detail::cast_to<detail::floating_t<value_type_of<X>>>(x));
}
template <Expression X>
auto silu(const X& x) {
  static_assert(is_floating_v<value_type_of<X>>,
                "tenet: silu needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  return make_node(aten::silu{}, x);
}

// ---------------------------------------------------------------------------------------------
// binary
#define TENET_PROMOTED_BINARY(NAME, PRIM)                 \
  template <class A, class B>                             \
    requires detail::binary_args<A, B>                    \
  auto NAME(const A& a, const B& b) {                     \
    return detail::promoted_binary<prim::PRIM>(a, b);     \
  }
TENET_PROMOTED_BINARY(add, add_)
TENET_PROMOTED_BINARY(mul, mul_)
TENET_PROMOTED_BINARY(maximum, maximum_)
TENET_PROMOTED_BINARY(minimum, minimum_)
TENET_PROMOTED_BINARY(eq, eq_)
TENET_PROMOTED_BINARY(ne, ne_)
TENET_PROMOTED_BINARY(lt, lt_)
TENET_PROMOTED_BINARY(le, le_)
TENET_PROMOTED_BINARY(gt, gt_)
TENET_PROMOTED_BINARY(ge, ge_)
#undef TENET_PROMOTED_BINARY

template <class A, class B>
  requires detail::binary_args<A, B>
auto sub(const A& a, const B& b) {
  static_assert(!std::is_same_v<detail::promoted_t<A, B>, bool>,
                "tenet: subtraction of bool tensors is not supported (as in PyTorch); use logical_xor");
  return detail::promoted_binary<prim::sub_>(a, b);
}
/// True division: integer operands are divided as float32 (torch.div without rounding_mode).
template <class A, class B>
  requires detail::binary_args<A, B>
auto div(const A& a, const B& b) {
  using T = detail::floating_t<detail::promoted_t<A, B>>;
  return make_node(prim::div_{}, detail::cast_to<T>(a), detail::cast_to<T>(b));
}
/// Integer (or bool) tensors to a negative integer C++ exponent raise value_error, as torch.pow; a
/// tensor of exponents computes elementwise as torch's kernel does (1 ** -n = 1, (-1) ** -n = +-1,
/// anything else 0).
template <class A, class B>
  requires detail::binary_args<A, B>
auto pow(const A& a, const B& b) {
  if constexpr (std::is_integral_v<detail::promoted_t<A, B>> && !Expression<B> && std::is_integral_v<B> &&
                std::is_signed_v<B>) {
    if (b < 0)
      throw value_error("tenet: pow: integers to negative integer powers are not allowed (exponent " +
                        std::to_string(b) + "; PyTorch raises as well); use a floating base or exponent");
  }
  return detail::promoted_binary<prim::pow_>(a, b);
}
/// Python's %: the result takes the divisor's sign. Integer division by zero throws value_error
/// when the expression is evaluated.
template <class A, class B>
  requires detail::binary_args<A, B>
auto remainder(const A& a, const B& b) {
  return detail::promoted_binary<prim::remainder_>(a, b);
}
template <class A, class B>
  requires detail::binary_args<A, B>
auto fmod(const A& a, const B& b) {
  return detail::promoted_binary<prim::fmod_>(a, b);
}
/// logical_and/or/xor: the bitwise prim on both operands cast to bool.
#define TENET_LOGICAL_BINARY(NAME, PRIM)                                                  \
  template <class A, class B>                                                             \
    requires detail::binary_args<A, B>                                                    \
  auto NAME(const A& a, const B& b) {                                                     \
    return make_node(prim::PRIM{}, detail::cast_to<bool>(a), detail::cast_to<bool>(b));   \
  }
TENET_LOGICAL_BINARY(logical_and, bitwise_and_)
TENET_LOGICAL_BINARY(logical_or, bitwise_or_)
TENET_LOGICAL_BINARY(logical_xor, bitwise_xor_)
#undef TENET_LOGICAL_BINARY

/// bitwise_and/or/xor on integers and bool, promoted as torch.
#define TENET_BITWISE_BINARY(NAME, PRIM)                                                           \
  template <class A, class B>                                                                      \
    requires detail::binary_args<A, B>                                                             \
  auto NAME(const A& a, const B& b) {                                                              \
    using T = detail::promoted_t<A, B>;                                                            \
    static_assert(std::is_integral_v<T>, "tenet: " #NAME " needs integer or bool operands (as torch)"); \
    return make_node(prim::PRIM{}, detail::cast_to<T>(a), detail::cast_to<T>(b));                  \
  }
TENET_BITWISE_BINARY(bitwise_and, bitwise_and_)
TENET_BITWISE_BINARY(bitwise_or, bitwise_or_)
TENET_BITWISE_BINARY(bitwise_xor, bitwise_xor_)
#undef TENET_BITWISE_BINARY
template <Expression X>
auto bitwise_not(const X& x) {
  static_assert(std::is_integral_v<value_type_of<X>>, "tenet: bitwise_not needs an integer or bool tensor (as torch)");
  return make_node(prim::bitwise_not_{}, x);
}
template <Expression X>
auto operator~(const X& x) {
  return bitwise_not(x);
}

#define TENET_BINARY_OPERATOR(OP, FN)                 \
  template <class A, class B>                         \
    requires detail::binary_args<A, B>                \
  auto operator OP(const A& a, const B& b) {          \
    return FN(a, b);                                  \
  }
TENET_BINARY_OPERATOR(+, add)
TENET_BINARY_OPERATOR(-, sub)
TENET_BINARY_OPERATOR(*, mul)
TENET_BINARY_OPERATOR(/, div)
TENET_BINARY_OPERATOR(%, remainder)
TENET_BINARY_OPERATOR(==, eq)
TENET_BINARY_OPERATOR(!=, ne)
TENET_BINARY_OPERATOR(<, lt)
TENET_BINARY_OPERATOR(<=, le)
TENET_BINARY_OPERATOR(>, gt)
TENET_BINARY_OPERATOR(>=, ge)
TENET_BINARY_OPERATOR(&&, logical_and)
TENET_BINARY_OPERATOR(||, logical_or)
TENET_BINARY_OPERATOR(&, bitwise_and)
TENET_BINARY_OPERATOR(|, bitwise_or)
TENET_BINARY_OPERATOR(^, bitwise_xor)
#undef TENET_BINARY_OPERATOR

/// where(cond, a, b): cond must be bool; a and b promote.
template <Expression C, class A, class B>
  requires ExprOrScalar<A> && ExprOrScalar<B>
auto where(const C& cond, const A& a, const B& b) {
  static_assert(std::is_same_v<value_type_of<C>, bool>,
                "tenet: where() needs a bool condition; compare (x > 0) or cast with .to<bool>()");
  using T = std::conditional_t<Expression<A> || Expression<B>, detail::promoted_t<A, B>,
                               std::conditional_t<std::is_floating_point_v<A> || std::is_floating_point_v<B>, float,
                                                  std::int64_t>>;
  return make_node(prim::where_{}, cond, detail::cast_to<T>(a), detail::cast_to<T>(b));
}

namespace detail {
/// A C++ number as a bound of integer dtype T, as torch compares an integer tensor with a clamp
/// bound: a fraction truncated toward zero, a value outside T's range saturated to it (clamp of
/// uint8 at -1 is clamp at 0, not at 255).
template <class T, class V>
T saturate_to(V v) {
  constexpr T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
  if constexpr (std::is_integral_v<V>) {
    if (std::cmp_less(v, lo)) return lo;
    if (std::cmp_greater(v, hi)) return hi;
    return static_cast<T>(v);
  } else {
    const double t = std::trunc(static_cast<double>(v));
    if (t <= static_cast<double>(lo)) return lo;
    if (t >= static_cast<double>(hi)) return hi;
    return static_cast<T>(t);
  }
}
/// A clamp bound b for values of dtype T: saturated to an integer T's range (C++ numbers), else cast.
template <class T, class B>
auto clamp_bound(const B& b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && std::is_arithmetic_v<B> && !std::is_same_v<B, bool>)
    return scalar<T>{saturate_to<T>(b)};
  else
    return cast_to<T>(b);
}
}  // namespace detail

/// clamp(x, lo, hi): minimum(maximum(x, lo), hi), promoted as torch.clamp (integer tensors stay
/// integer with integer bounds, which saturate to the dtype's range as torch's do).
template <Expression X, class L, class H>
  requires ExprOrScalar<L> && ExprOrScalar<H>
auto clamp(const X& x, const L& lo, const H& hi) {
  using T = detail::promoted_t<X, L, H>;
  return make_node(prim::minimum_{}, make_node(prim::maximum_{}, detail::cast_to<T>(x), detail::clamp_bound<T>(lo)),
                   detail::clamp_bound<T>(hi));
}
template <Expression X, class L>
  requires ExprOrScalar<L>
auto clamp_min(const X& x, const L& lo) {
  using T = detail::promoted_t<X, L>;
  return make_node(prim::maximum_{}, detail::cast_to<T>(x), detail::clamp_bound<T>(lo));
}
template <Expression X, class H>
  requires ExprOrScalar<H>
auto clamp_max(const X& x, const H& hi) {
  using T = detail::promoted_t<X, H>;
  return make_node(prim::minimum_{}, detail::cast_to<T>(x), detail::clamp_bound<T>(hi));
}

/// isinf: |x| == inf for floating types, false for integers.
template <Expression X>
auto isinf(const X& x) {
  using T = value_type_of<X>;
  if constexpr (is_floating_v<T>)
    return make_node(prim::eq_{}, make_node(prim::abs_{}, x), scalar<T>{std::numeric_limits<T>::infinity()});
  else
    return make_node(prim::ne_{}, x, x);  // all false, shaped like x
}
/// isfinite: neither nan nor +-inf (|x| < inf); true for integers.
template <Expression X>
auto isfinite(const X& x) {
  using T = value_type_of<X>;
  if constexpr (is_floating_v<T>)
    return make_node(prim::lt_{}, make_node(prim::abs_{}, x), scalar<T>{std::numeric_limits<T>::infinity()});
  else
    return make_node(prim::eq_{}, x, x);  // all true, shaped like x
}
/// nan_to_num(x, nan = 0, posinf = max, neginf = lowest of the dtype), as torch.nan_to_num; an
/// integer or bool x (no NaN or inf to replace) is returned as it is, with its dtype.
template <Expression X>
auto nan_to_num(const X& x, std::optional<double> nan = 0.0, std::optional<double> posinf = std::nullopt,
                std::optional<double> neginf = std::nullopt) {
  using T = value_type_of<X>;
  if constexpr (!is_floating_v<T>) {
    (void)nan, (void)posinf, (void)neginf;
    return x;
  } else {
    using C = compute_t<T>;
    const T n = T(C(nan.value_or(0.0)));
    const T hi = posinf ? T(C(*posinf)) : std::numeric_limits<T>::max();
    const T lo = neginf ? T(C(*neginf)) : std::numeric_limits<T>::lowest();
    const T inf = std::numeric_limits<T>::infinity();
    return make_node(prim::where_{}, make_node(prim::isnan_{}, x), scalar<T>{n},
                     make_node(prim::where_{}, make_node(prim::eq_{}, x, scalar<T>{inf}), scalar<T>{hi},
                               make_node(prim::where_{}, make_node(prim::eq_{}, x, scalar<T>{T(-inf)}), scalar<T>{lo},
                                         x)));
  }
}
namespace detail {
/// Python's float //, as torch: q = (a - fmod(a, b)) / b, one less when the remainder's sign differs
/// from b's, then rounded to the nearest integer (q is integral up to rounding); a zero result has
/// the sign of a / b, and b == 0 gives a / b. So 1 // -inf is -1, not floor(-0.0).
template <class A, class B>
auto floor_divide_floating(const A& a, const B& b) {
  using T = value_type_of<A>;
  auto mod = share(make_node(prim::fmod_{}, a, b));
  auto div = make_node(prim::div_{}, make_node(prim::sub_{}, a, mod), b);
  auto adjust = make_node(prim::bitwise_and_{}, make_node(prim::ne_{}, mod, cast_to<T>(0)),
                          make_node(prim::ne_{}, make_node(prim::lt_{}, b, cast_to<T>(0)),
                                    make_node(prim::lt_{}, mod, cast_to<T>(0))));
  auto d = share(make_node(prim::where_{}, adjust, make_node(prim::sub_{}, div, cast_to<T>(1)), div));
  auto fl = share(make_node(prim::floor_{}, d));
  auto rounded = make_node(prim::where_{}, make_node(prim::gt_{}, make_node(prim::sub_{}, d, fl), cast_to<T>(0.5)),
                           make_node(prim::add_{}, fl, cast_to<T>(1)), fl);
  auto q = share(make_node(prim::div_{}, a, b));
  auto q_negative = make_node(prim::bitwise_or_{}, make_node(prim::lt_{}, q, cast_to<T>(0)),
                              make_node(prim::lt_{}, make_node(prim::div_{}, cast_to<T>(1), q), cast_to<T>(0)));
  auto signed_zero = make_node(prim::where_{}, q_negative, cast_to<T>(-0.0), cast_to<T>(0));
  return make_node(prim::where_{}, make_node(prim::eq_{}, b, cast_to<T>(0)), q,
                   make_node(prim::where_{}, make_node(prim::ne_{}, d, cast_to<T>(0)), rounded, signed_zero));
}
}  // namespace detail
/// floor_divide: floor(a / b) with Python's float semantics (detail::floor_divide_floating); integers
/// divide exactly (rounding toward -inf), as torch.floor_divide.
template <class A, class B>
  requires detail::binary_args<A, B>
auto floor_divide(const A& a, const B& b) {
  using T = detail::promoted_t<A, B>;
  static_assert(!std::is_same_v<T, bool>, "tenet: floor_divide of bool tensors is not supported (as in PyTorch)");
  if constexpr (is_floating_v<T>)
    return detail::floor_divide_floating(detail::share(detail::cast_to<T>(a)), detail::share(detail::cast_to<T>(b)));
  else
    return make_node(prim::div_{}, detail::cast_to<T>(a), detail::cast_to<T>(b));  // the integer div_ floors
}
/// lerp(a, b, w): a + w (b - a), evaluated from the nearer end as torch does (w < 0.5 from a, else
/// from b), so lerp(a, b, 1) is exactly b.
template <Expression A, class B, class W>
  requires ExprOrScalar<B> && ExprOrScalar<W>
auto lerp(const A& a0, const B& b0, const W& w0) {
  using T = detail::promoted_t<A, B>;
  static_assert(is_floating_v<T>, "tenet: lerp needs floating operands (as torch.lerp)");
  auto a = detail::cast_to<T>(a0);
  auto b = detail::cast_to<T>(b0);
  auto w = detail::cast_to<T>(w0);
  auto diff = make_node(prim::sub_{}, b, a);
  auto from_a = make_node(prim::add_{}, a, make_node(prim::mul_{}, w, diff));
  auto from_b = make_node(prim::sub_{}, b, make_node(prim::mul_{}, diff, make_node(prim::sub_{}, scalar<T>{T(1)}, w)));
  return make_node(prim::where_{}, make_node(prim::lt_{}, make_node(prim::abs_{}, w), scalar<T>{T(0.5)}), from_a,
                   from_b);
}
/// addcmul(x, t1, t2, value = 1): x + value * t1 * t2.
template <Expression X, Expression T1, Expression T2>
auto addcmul(const X& x, const T1& t1, const T2& t2, double value = 1.0) {
  using T = detail::promoted_t<X, T1, T2>;
  return make_node(prim::add_{}, detail::cast_to<T>(x),
                   make_node(prim::mul_{}, make_node(prim::mul_{}, detail::cast_to<T>(t1), detail::cast_to<T>(t2)),
                             detail::cast_to<T>(value)));
}
/// addcdiv(x, t1, t2, value = 1): x + value * t1 / t2 (floating operands, as torch.addcdiv).
template <Expression X, Expression T1, Expression T2>
auto addcdiv(const X& x, const T1& t1, const T2& t2, double value = 1.0) {
  using T = detail::promoted_t<X, T1, T2>;
  static_assert(is_floating_v<T>, "tenet: addcdiv needs floating operands (integer division is not allowed, as torch)");
  return make_node(prim::add_{}, detail::cast_to<T>(x),
                   make_node(prim::mul_{}, make_node(prim::div_{}, detail::cast_to<T>(t1), detail::cast_to<T>(t2)),
                             detail::cast_to<T>(value)));
}

/// Tag for gelu's tanh approximation: `gelu(x, approximate_tanh)` is F.gelu(x, approximate="tanh").
struct approximate_tanh_t {};
inline constexpr approximate_tanh_t approximate_tanh{};

template <Expression X>
auto gelu(const X& x) {
  static_assert(is_floating_v<value_type_of<X>>,
                "tenet: gelu needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  return make_node(aten::gelu<false>{}, x);
}
template <Expression X>
auto gelu(const X& x, approximate_tanh_t) {
  static_assert(is_floating_v<value_type_of<X>>,
                "tenet: gelu needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  return make_node(aten::gelu<true>{}, x);
}


// ---------------------------------------------------------------------------------------------
// casts
template <class To, Expression X>
auto cast(const X& x) {
  static_assert(Element<To>, "tenet: cast<To>: To must be an element type");
  return detail::cast_to<To>(x);
}
/// expr.to<U>(): the cast, lazy like the expression (Tensor::to<U>() evaluates it).
template <class D>
template <class U>
auto expr_members<D>::to() const {
  return tenet::cast<U>(derived());
}

// ---------------------------------------------------------------------------------------------
// reductions: dims are template arguments (checked at compile time); none means all dims.

#define TENET_REDUCTION(NAME, KIND)                                  \
  template <auto... D, Expression X>                                 \
  auto NAME(const X& x) {                                            \
    return detail::reduce<prim::KIND, false, D...>(x);               \
  }                                                                  \
  template <auto... D, Expression X>                                 \
  auto NAME(const X& x, keepdim_t) {                                 \
    return detail::reduce<prim::KIND, true, D...>(x);                \
  }
TENET_REDUCTION(sum, sum_kind)
TENET_REDUCTION(prod, prod_kind)
#undef TENET_REDUCTION

namespace detail {
/// amax/amin have no identity: as torch, a reduced dim of size 0 is an error, raised when the op
/// is written (its operand's sizes are known then). The prims themselves take -inf / +inf (the
/// lowest / highest value) for an empty range, which the decompositions that shift by a maximum
/// (softmax, log_softmax, logsumexp) and any/all rely on.
template <class X, auto... D>
void require_nonempty_reduced(const X& x, std::string_view op) {
  const auto s = x.sizes();
  constexpr auto mask = reduce_dims<shape_of<X>, D...>::mask;
  for (std::size_t i = 0; i < mask.size(); ++i)
    if (mask[i] && s[i] == 0)
      throw value_error("tenet: " + std::string(op) + "(): cannot reduce over dim " + std::to_string(i) +
                        " of size 0 (there is no identity); sizes " + sizes_text(s));
}
}  // namespace detail
#define TENET_REDUCTION_NO_IDENTITY(NAME, KIND)                      \
  template <auto... D, Expression X>                                 \
  auto NAME(const X& x) {                                            \
    detail::require_nonempty_reduced<X, D...>(x, #NAME);             \
    return detail::reduce<prim::KIND, false, D...>(x);               \
  }                                                                  \
  template <auto... D, Expression X>                                 \
  auto NAME(const X& x, keepdim_t) {                                 \
    detail::require_nonempty_reduced<X, D...>(x, #NAME);             \
    return detail::reduce<prim::KIND, true, D...>(x);                \
  }
TENET_REDUCTION_NO_IDENTITY(amax, amax_kind)
TENET_REDUCTION_NO_IDENTITY(amin, amin_kind)
#undef TENET_REDUCTION_NO_IDENTITY

/// argmax<d>(x) or argmax(x) (over the flattened tensor): int64 indices.
template <auto... D, Expression X>
auto argmax(const X& x) {
  static_assert(sizeof...(D) <= 1, "tenet: argmax takes one dim or none");
  return detail::reduce<prim::argmax_kind, false, D...>(x);
}
template <auto... D, Expression X>
auto argmax(const X& x, keepdim_t) {
  static_assert(sizeof...(D) == 1, "tenet: argmax with keepdim takes one dim");
  return detail::reduce<prim::argmax_kind, true, D...>(x);
}
template <auto... D, Expression X>
auto argmin(const X& x) {
  static_assert(sizeof...(D) <= 1, "tenet: argmin takes one dim or none");
  return detail::reduce<prim::argmin_kind, false, D...>(x);
}
template <auto... D, Expression X>
auto argmin(const X& x, keepdim_t) {
  static_assert(sizeof...(D) == 1, "tenet: argmin with keepdim takes one dim");
  return detail::reduce<prim::argmin_kind, true, D...>(x);
}

/// any/all: bool (uint8 for a uint8 input, as torch).
template <auto... D, Expression X>
auto any(const X& x) {
  using R = std::conditional_t<std::is_same_v<value_type_of<X>, std::uint8_t>, std::uint8_t, bool>;
  return detail::cast_to<R>(detail::reduce<prim::amax_kind, false, D...>(detail::cast_to<bool>(x)));
}
template <auto... D, Expression X>
auto any(const X& x, keepdim_t) {
  using R = std::conditional_t<std::is_same_v<value_type_of<X>, std::uint8_t>, std::uint8_t, bool>;
  return detail::cast_to<R>(detail::reduce<prim::amax_kind, true, D...>(detail::cast_to<bool>(x)));
}
template <auto... D, Expression X>
auto all(const X& x) {
  using R = std::conditional_t<std::is_same_v<value_type_of<X>, std::uint8_t>, std::uint8_t, bool>;
  return detail::cast_to<R>(detail::reduce<prim::amin_kind, false, D...>(detail::cast_to<bool>(x)));
}
template <auto... D, Expression X>
auto all(const X& x, keepdim_t) {
  using R = std::conditional_t<std::is_same_v<value_type_of<X>, std::uint8_t>, std::uint8_t, bool>;
  return detail::cast_to<R>(detail::reduce<prim::amin_kind, true, D...>(detail::cast_to<bool>(x)));
}




namespace detail {
template <bool Keep, auto... D, class X>
auto var_node(const X& x, double correction) {
  static_assert(is_floating_v<value_type_of<X>>, "tenet: var/std need a floating dtype (as torch); cast with .to<float>()");
  using Ref = decltype(var_impl<Keep, D...>(x, correction));  // static dim checks
  (void)sizeof(Ref*);
  return make_node(aten::var_<Keep, D...>{correction}, x);
}
}  // namespace detail

template <auto... D, Expression X>
auto mean(const X& x) {
  return detail::mean_impl<false, D...>(x);
}
template <auto... D, Expression X>
auto mean(const X& x, keepdim_t) {
  return detail::mean_impl<true, D...>(x);
}
/// var with Bessel's correction by default (correction = 1), as torch.var.
template <auto... D, Expression X>
auto var(const X& x, double correction = 1.0) {
  return detail::var_node<false, D...>(x, correction);
}
template <auto... D, Expression X>
auto var(const X& x, keepdim_t, double correction = 1.0) {
  return detail::var_node<true, D...>(x, correction);
}
/// std = sqrt(var); its gradient is 0 where std is 0 (a constant row), as torch's.
template <auto... D, Expression X>
auto std(const X& x, double correction = 1.0) {
  return detail::sqrt_masked_at_zero(detail::var_node<false, D...>(x, correction));
}
template <auto... D, Expression X>
auto std(const X& x, keepdim_t, double correction = 1.0) {
  return detail::sqrt_masked_at_zero(detail::var_node<true, D...>(x, correction));
}

namespace detail {
template <bool Keep, auto... D, class X>
auto logsumexp_impl(const X& x0) {
  auto x = share(cast_to<floating_t<value_type_of<X>>>(x0));  // x is read twice
  using T = value_type_of<decltype(x)>;
  // m = amax (with +-inf replaced by 0 so that inf - inf never appears), as torch.logsumexp
  auto m_raw = share(reduce<prim::amax_kind, true, D...>(x));
  auto inf = std::numeric_limits<compute_t<T>>::infinity();
  auto m = make_node(prim::where_{},
                     make_node(prim::eq_{}, make_node(prim::abs_{}, m_raw), scalar<T>{T(inf)}),
                     scalar<T>{T(0)}, m_raw);
  auto s = reduce<prim::sum_kind, true, D...>(exp(make_node(prim::sub_{}, x, m)));
  auto r = make_node(prim::add_{}, log(s), m);
  if constexpr (Keep) {
    return r;
  } else {
    // drop the kept unit dims: sum over them is the identity
    return reduce<prim::sum_kind, false, D...>(r);
  }
}
}  // namespace detail
template <auto... D, Expression X>
auto logsumexp(const X& x) {
  return detail::logsumexp_impl<false, D...>(x);
}
template <auto... D, Expression X>
auto logsumexp(const X& x, keepdim_t) {
  return detail::logsumexp_impl<true, D...>(x);
}

/// Vector p-norm over dims (torch.linalg.vector_norm): p = 2 by default; inf, -inf and 0 as torch.
/// p is a run-time value, so norm evaluates now and returns a Tensor. Its gradient is torch's: 0
/// for a zero norm, and 0 at zero elements for p < 1 (detail::sqrt_masked_at_zero).
template <auto... D, Expression X>
auto norm(const X& x0, double p = 2.0) {
  auto x = detail::share(detail::cast_to<detail::floating_t<value_type_of<X>>>(x0));
  using T = value_type_of<decltype(x)>;
  using C = compute_t<T>;
  using R = Tensor<T, typename detail::reduce_shape<shape_of<X>, false, D...>::type>;
  auto a = abs(x);
  if (std::isinf(p)) {
    if (detail::reduced_count<X, D...>(x0) == 0)
      throw value_error("tenet: norm cannot compute the " + std::string(p > 0 ? "inf" : "-inf") +
                        " norm of an empty tensor: the operation has no identity (as torch.linalg.vector_norm)");
    if (p > 0) return R(detail::reduce<prim::amax_kind, false, D...>(a));
    return R(detail::reduce<prim::amin_kind, false, D...>(a));
  }
  if (p == 0.0) return R(detail::reduce<prim::sum_kind, false, D...>(detail::cast_to<T>(make_node(prim::ne_{}, x, scalar<T>{T(0)}))));
  if (p == 1.0) return R(detail::reduce<prim::sum_kind, false, D...>(a));
  if (p == 2.0) return R(detail::sqrt_masked_at_zero(detail::reduce<prim::sum_kind, false, D...>(make_node(prim::mul_{}, x, x))));
  if (p < 0)  // zeros make the sum infinite and the norm 0: nothing to mask
    return R(pow(detail::reduce<prim::sum_kind, false, D...>(pow(a, scalar<T>{T(C(p))})), scalar<T>{T(C(1.0 / p))}));
  return R(detail::pow_masked_at_zero(
      detail::reduce<prim::sum_kind, false, D...>(detail::pow_masked_at_zero(a, scalar<T>{T(C(p))})),
      scalar<T>{T(C(1.0 / p))}));
}


template <std::int64_t D, Expression X>
auto softmax(const X& x) {
  (void)detail::reduce_dims<shape_of<X>, D>::dims;  // checks D at compile time
  return make_node(aten::softmax<D>{}, detail::cast_to<detail::floating_t<value_type_of<X>>>(x));
}
template <std::int64_t D, Expression X>
auto log_softmax(const X& x) {
  (void)detail::reduce_dims<shape_of<X>, D>::dims;
  return make_node(aten::log_softmax<D>{}, detail::cast_to<detail::floating_t<value_type_of<X>>>(x));
}

// ---------------------------------------------------------------------------------------------
// matmul
template <Expression A, Expression B>
auto matmul(const A& a, const B& b) {
  using T = detail::promoted_t<A, B>;
  static_assert(!std::is_same_v<T, bool>, "tenet: matmul of bool tensors is not supported (as in PyTorch)");
  return make_node(prim::matmul_{}, detail::cast_to<T>(a), detail::cast_to<T>(b));
}

}  // namespace tenet
