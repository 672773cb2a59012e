#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The scan prim: scan_<Kind, Dim>, the inclusive prefix combination of the elements along one dim
// (cumsum, cumprod, cummax, cummin, logcumsumexp).
//
// @post out[..., i, ...] = combine(x[..., 0, ...], ..., x[..., i, ...]) along Dim, in order;
//       out has x's shape; an empty dim gives an empty result.
//
// Kinds: the reduction kinds sum, prod, amax, amin (prims/reduce.hpp), plus logaddexp (the
// combiner of logcumsumexp) and the index-carrying running_arg<Max> (the int64 index of the running
// maximum/minimum: the values of cummax are scan_<amax_kind>, its indices scan_<running_arg<true>>).
// Accumulators: integers in int64, float/double in double, float16/bfloat16 in float (as torch's
// CPU cumulative kernels); the result is Kind::result<T>.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include <tenet/dtype.hpp>
#include <tenet/expr/concepts.hpp>
#include <tenet/prims/reduce.hpp>
#include <tenet/shape/rules.hpp>

namespace tenet::compile_error {
template <class Shape, class Dim>
struct invalid_scan_dim {
  static_assert(always_false<Shape>, "tenet: the dim of a scan/sort (see 'invalid_scan_dim<shape, dim<d>>' above) "
                                     "is out of range for the rank of the shape");
};
}  // namespace tenet::compile_error

namespace tenet::prim {

struct scan_group {};

/// log(exp(a) + exp(b)) without overflow; NaN propagates; two equal infinities give that infinity.
struct logaddexp_kind {
  static constexpr std::string_view name = "logaddexp";
  template <class T>
  using result = T;
  template <class A>
  static constexpr A identity() {
    return -std::numeric_limits<A>::infinity();
  }
  template <class A>
  TENET_HOST_DEVICE static A combine(A acc, A x) {
    if (x != x) return x;
    if (acc != acc) return acc;
    const A lo = x < acc ? x : acc, hi = x < acc ? acc : x;
    if (lo == hi && !std::isfinite(lo)) return lo;  // inf + inf, -inf + -inf
    return hi + std::log1p(std::exp(lo - hi));
  }
};

/// The index of the running maximum (Max) or minimum: a later equal value or any NaN takes over, and
/// after a NaN only a NaN does (as torch.cummax / torch.cummin).
template <bool Max>
struct running_arg {
  static constexpr std::string_view name = Max ? "cumargmax" : "cumargmin";
  template <class T>
  using result = std::int64_t;
  template <class A>
  TENET_HOST_DEVICE static bool takes_over(A cand, A best) {
    if (cand != cand) return true;
    if (best != best) return false;
    return Max ? cand >= best : cand <= best;
  }
};

template <class Kind>
inline constexpr bool is_running_arg = std::is_same_v<Kind, running_arg<true>> || std::is_same_v<Kind, running_arg<false>>;

/// The type a scan accumulates in.
template <class Kind, class T>
using scan_acc_t =
    std::conditional_t<std::is_same_v<Kind, sum_kind> || std::is_same_v<Kind, prod_kind>,
                       std::conditional_t<std::is_integral_v<T>, std::int64_t,
                                          std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, double>,
                                                             double, float>>,
                       std::conditional_t<std::is_same_v<Kind, logaddexp_kind>,
                                          std::conditional_t<std::is_same_v<T, double> || std::is_same_v<T, float>, double, float>,
                                          compute_t<T>>>;

/// The name a scan of Kind is known by (torch's op names).
template <class Kind>
inline constexpr std::string_view scan_name = Kind::name;
template <>
inline constexpr std::string_view scan_name<sum_kind> = "cumsum";
template <>
inline constexpr std::string_view scan_name<prod_kind> = "cumprod";
template <>
inline constexpr std::string_view scan_name<amax_kind> = "cummax";
template <>
inline constexpr std::string_view scan_name<amin_kind> = "cummin";
template <>
inline constexpr std::string_view scan_name<logaddexp_kind> = "logcumsumexp";

}  // namespace tenet::prim

namespace tenet::detail {
/// Dim D of a rank-R shape, normalized at compile time; a 0-dim tensor takes dim 0 or -1 (one line
/// of one element, as torch).
template <class S, std::int64_t D>
constexpr std::size_t line_dim() {
  constexpr std::int64_t r = static_cast<std::int64_t>(S::rank);
  constexpr std::int64_t n = normalize_dim(D, r == 0 ? 1 : r);
  if constexpr (n < 0) {
    (void)sizeof(compile_error::invalid_scan_dim<S, compile_error::dim<D>>);
    return 0;
  } else {
    return static_cast<std::size_t>(n);
  }
}
}  // namespace tenet::detail

namespace tenet::prim {

/// scan_<Kind, Dim>: Kind's inclusive prefix combination along Dim (see the top of this file).
template <class Kind, std::int64_t Dim>
struct scan_ {
  static constexpr bool is_prim = true;
  using group = scan_group;
  using kind = Kind;
  static constexpr std::string_view name = scan_name<Kind>;
  static constexpr std::string_view family = "scan";  // one listed prim for every kind
  static constexpr std::int64_t requested_dim = Dim;
  template <class C>
  static constexpr std::size_t dim = detail::line_dim<shape_of<C>, Dim>();
  template <class C>
  using result_shape = shape_of<C>;
  template <class C>
  using result_type = typename Kind::template result<value_type_of<C>>;
  template <class C>
  static auto sizes(const C& c) {
    (void)dim<C>;
    return c.sizes();
  }
};

}  // namespace tenet::prim
