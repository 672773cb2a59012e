#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The moments: mean and var's decompositions (bfloat16 / float16 in float, rounded once), the
// var composite (aten::var_, which the CPU and CUDA run as one kernel), and the masked roots of
// std and the p-norms.
#include <algorithm>
#include <string_view>

#include <tenet/decomp/build.hpp>
#include <tenet/decomp/composite.hpp>
#include <tenet/expr/shared.hpp>

namespace tenet {
namespace detail {
/// mean and var of bfloat16 / float16 run in float and round once at the end, as torch: in 16 bits
/// the sum (and for var the sum of squares) would be rounded before the division, float16
/// overflowing past 65504, and a count above 65504 is itself infinite in float16.
template <bool Keep, auto... D, class X>
auto mean_impl(const X& x) {
  using T = value_type_of<X>;
  static_assert(is_floating_v<T>, "tenet: mean needs a floating dtype (as torch.mean); cast with .to<float>()");
  if constexpr (half_precision<T>) {
    return cast_to<T>(mean_impl<Keep, D...>(cast_to<float>(x)));
  } else {
    const auto n = static_cast<double>(reduced_count<X, D...>(x));
    return make_node(prim::div_{}, reduce<prim::sum_kind, Keep, D...>(x), scalar<T>{static_cast<T>(n)});
  }
}
template <bool Keep, auto... D, class X0>
auto var_impl(const X0& x0, double correction) {
  using T = value_type_of<X0>;
  static_assert(is_floating_v<T>, "tenet: var/std need a floating dtype (as torch); cast with .to<float>()");
  if constexpr (half_precision<T>) {  // in float, rounded once (mean_impl)
    return cast_to<T>(var_impl<Keep, D...>(cast_to<float>(x0), correction));
  } else {
    const auto x = share(x0);  // x is read three times
    const auto n = static_cast<double>(reduced_count<X0, D...>(x0));
    const double denom = std::max(0.0, n - correction);
    auto centered = make_node(prim::sub_{}, x, share(mean_impl<true, D...>(x)));  // centered is read twice
    return make_node(prim::div_{}, reduce<prim::sum_kind, Keep, D...>(make_node(prim::mul_{}, centered, centered)),
                     scalar<T>{static_cast<T>(denom)});
  }
}
}  // namespace detail

namespace aten {
/// The variance over Dims (none: every dim) with a correction, as torch.var: a composite whose
/// decomposition (detail::var_impl: mean, centered squares, sum, divide) is the reference; the CPU
/// runs it natively as one kernel (backend/cpu/moments.hpp) for float and double.
template <bool Keep, auto... Dims>
struct var_ {
  static constexpr bool is_prim = false;
  static constexpr std::string_view name = "var";
  static constexpr bool keepdim = Keep;
  double correction = 1.0;
  template <class C>
  using rule = detail::reduce_shape<shape_of<C>, Keep, Dims...>;
  template <class C>
  using result_shape = typename rule<C>::type;
  template <class C>
  using result_type = value_type_of<C>;
  template <class C>
  static auto sizes(const C& c) {
    return rule<C>::sizes(c.sizes());
  }
  template <class C>
  static constexpr auto mask() {
    return detail::reduce_dims<shape_of<C>, Dims...>::mask;
  }
  template <class X>
  auto decompose(const X& x) const {
    return detail::var_impl<Keep, Dims...>(x, correction);
  }
};
}  // namespace aten

namespace aten {
/// sqrt of a non-negative value (std's and the 2-norm's root) whose gradient is 0 where the value
/// is 0, as torch's std_backward / norm_backward mask it, instead of inf (which times the 0 of the
/// value's own gradient there is NaN: std of a constant row, the norm of a zero vector). The
/// forward is the sqrt prim, so it stays the epilogue of the reduction below it (one kernel).
struct masked_sqrt : pointwise_composite {
  static constexpr std::string_view name = "sqrt";
  static constexpr bool has_derivative = true;
  template <class X>
  auto decompose(const X& x) const {
    return make_node(prim::sqrt_{}, x);
  }
  template <class T>
  TENET_HOST_DEVICE static T apply(T xin) {
    using C = compute_t<T>;
    return static_cast<T>(std::sqrt(static_cast<C>(xin)));
  }
  template <class X, class Y, class G>
  static auto derivative(const X&, const Y& y, const G& g) {
    return where(y == 0.0, 0.0, g / (y * 2.0));
  }
};
}  // namespace aten

namespace detail {
template <class V>
auto sqrt_masked_at_zero(const V& v) {
  return make_node(aten::masked_sqrt{}, v);
}
/// pow(v, p) of a non-negative v, 0 with gradient 0 where v is 0 (as aten::masked_sqrt; for p < 1
/// the gradient p v^(p-1) is inf there).
template <class V, class P>
auto pow_masked_at_zero(const V& v0, const P& p) {
  using T = value_type_of<V>;
  auto v = share(v0);
  auto zero = share(make_node(prim::eq_{}, v, scalar<T>{T(0)}));
  return make_node(prim::where_{}, zero, scalar<T>{T(0)},
                   make_node(prim::pow_{}, make_node(prim::where_{}, zero, scalar<T>{T(1)}, v), p));
}
}  // namespace detail

}  // namespace tenet
