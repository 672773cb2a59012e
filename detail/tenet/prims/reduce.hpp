#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The reduction prims (sum, prod, amax, amin, argmax, argmin) over a compile-time set of dims, and
// the contraction prim (matmul, torch.matmul's batched 2-D form with broadcasting).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include <tenet/dtype.hpp>
#include <tenet/expr/concepts.hpp>
#include <tenet/prims/wrapping.hpp>
#include <tenet/shape/rules.hpp>

namespace tenet::prim {

struct reduction_group {};
struct contraction_group {};

/// The accumulator of each reduction kind. `result<T>` is the output dtype, `acc<T>` the type the
/// kernel accumulates in, `identity` the value of an empty reduction (absent: empty is an error).
struct sum_kind {
  static constexpr std::string_view name = "sum";
  template <class T>
  using result = std::conditional_t<std::is_integral_v<T>, std::int64_t, T>;  // bool and ints sum to int64
  // float sums accumulate vector lanes in float over blocks and the block sums in double
  template <class T>
  using acc = std::conditional_t<std::is_integral_v<T>, std::int64_t,
                                 std::conditional_t<std::is_same_v<T, double> || std::is_same_v<T, float>, double, float>>;
  static constexpr bool has_identity = true;
  template <class A>
  static constexpr A identity() { return A(0); }
  template <class A>
  TENET_HOST_DEVICE static A combine(A a, A b) { return detail::wrapping_add<A>(a, b); }  // ints wrap, as torch
};
struct prod_kind {
  static constexpr std::string_view name = "prod";
  template <class T>
  using result = std::conditional_t<std::is_integral_v<T>, std::int64_t, T>;
  template <class T>
  using acc = std::conditional_t<std::is_integral_v<T>, std::int64_t, std::conditional_t<std::is_same_v<T, double>, double, float>>;
  static constexpr bool has_identity = true;
  template <class A>
  static constexpr A identity() { return A(1); }
  template <class A>
  TENET_HOST_DEVICE static A combine(A a, A b) { return detail::wrapping_mul<A>(a, b); }  // ints wrap, as torch
};
/// amax/amin propagate NaN (as torch.amax).
struct amax_kind {
  static constexpr std::string_view name = "amax";
  template <class T>
  using result = T;
  template <class T>
  using acc = compute_t<T>;
  static constexpr bool has_identity = true;  // -inf: tenet::amax raises for an empty dim (ops.hpp)
  template <class A>
  static constexpr A identity() {
    if constexpr (std::numeric_limits<A>::has_infinity) return -std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::lowest();
  }
  template <class A>
  TENET_HOST_DEVICE static A combine(A a, A b) { return a != a ? a : (b != b ? b : (b > a ? b : a)); }
};
struct amin_kind {
  static constexpr std::string_view name = "amin";
  template <class T>
  using result = T;
  template <class T>
  using acc = compute_t<T>;
  static constexpr bool has_identity = true;  // +inf: tenet::amin raises for an empty dim (ops.hpp)
  template <class A>
  static constexpr A identity() {
    if constexpr (std::numeric_limits<A>::has_infinity) return std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::max();
  }
  template <class A>
  TENET_HOST_DEVICE static A combine(A a, A b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); }
};
/// argmax/argmin: the first index of the extreme value; a NaN counts as the extreme (as torch).
struct argmax_kind {
  static constexpr std::string_view name = "argmax";
  template <class T>
  using result = std::int64_t;
  static constexpr bool has_identity = false;
  template <class A>
  TENET_HOST_DEVICE static bool better(A cand, A best) { return (cand != cand && best == best) || cand > best; }
};
struct argmin_kind {
  static constexpr std::string_view name = "argmin";
  template <class T>
  using result = std::int64_t;
  static constexpr bool has_identity = false;
  template <class A>
  TENET_HOST_DEVICE static bool better(A cand, A best) { return (cand != cand && best == best) || cand < best; }
};

template <class Kind>
inline constexpr bool is_arg_kind = std::is_same_v<Kind, argmax_kind> || std::is_same_v<Kind, argmin_kind>;

/// reduce_<Kind, KeepDim, Dims...>: no Dims means every dim.
template <class Kind, bool KeepDim, auto... Dims>
struct reduce_ {
  static constexpr bool is_prim = true;
  using group = reduction_group;
  using kind = Kind;
  static constexpr bool keepdim = KeepDim;
  static constexpr std::string_view name = Kind::name;
  template <class C>
  using rule = detail::reduce_shape<shape_of<C>, KeepDim, Dims...>;
  template <class C>
  using result_shape = typename rule<C>::type;
  template <class C>
  using result_type = typename Kind::template result<value_type_of<C>>;
  template <class C>
  static auto sizes(const C& c) {
    return rule<C>::sizes(c.sizes());
  }
  template <class C>
  static constexpr auto mask() {
    return detail::reduce_dims<shape_of<C>, Dims...>::mask;
  }
};

/// matmul_: torch.matmul on operands of one dtype.
struct matmul_ {
  static constexpr bool is_prim = true;
  using group = contraction_group;
  static constexpr std::string_view name = "matmul";
  template <class A, class B>
  using result_shape = detail::matmul_shape_t<shape_of<A>, shape_of<B>>;
  template <class A, class B>
  using result_type = value_type_of<A>;
  template <class A, class B>
  static auto sizes(const A& a, const B& b) {
    using R = result_shape<A, B>;
    constexpr std::size_t ra = rank_of<A>, rb = rank_of<B>;
    const auto as = a.sizes();
    const auto bs = b.sizes();
    const std::int64_t k_a = as[ra - 1];
    const std::int64_t k_b = rb == 1 ? bs[0] : bs[rb - 2];
    if (k_a != k_b)
      throw shape_error("tenet: matmul: cannot multiply " + detail::sizes_text(as) + " by " + detail::sizes_text(bs) +
                        " (contracted dims: " + std::to_string(k_a) + " vs " + std::to_string(k_b) + ")");
    sizes_t<R::rank> out{};
    constexpr std::size_t ba = ra >= 2 ? ra - 2 : 0, bb = rb >= 2 ? rb - 2 : 0;
    constexpr std::size_t nb = ba > bb ? ba : bb;
    sizes_t<ba> batch_a{};
    sizes_t<bb> batch_b{};
    for (std::size_t i = 0; i < ba; ++i) batch_a[i] = as[i];
    for (std::size_t i = 0; i < bb; ++i) batch_b[i] = bs[i];
    const auto batch = detail::broadcast_sizes<nb>(batch_a, batch_b);
    std::size_t j = 0;
    for (; j < nb; ++j) out[j] = batch[j];
    if constexpr (ra >= 2) out[j++] = as[ra - 2];
    if constexpr (rb >= 2) out[j++] = bs[rb - 1];
    return out;
  }
};

}  // namespace tenet::prim
