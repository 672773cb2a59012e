#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// softmax and log_softmax over a dim: composites whose decomposition shifts by the maximum
// (amax, exp, sum, divide); the CPU and CUDA run the last-dim case natively as one row kernel.
#include <cstdint>
#include <string_view>

#include <tenet/decomp/composite.hpp>
#include <tenet/expr/shared.hpp>

namespace tenet {
// softmax / log_softmax over dim D (composites; the CPU runs the last-dim case natively)
namespace aten {
template <std::int64_t D>
struct softmax : same_as_input {
  static constexpr std::string_view name = "softmax";
  static constexpr std::int64_t dim = D;
  static constexpr bool fuses_prologue = true;  // the CPU row kernel evaluates a pointwise producer per row
  template <class X>
  auto decompose(const X& x) const {
    auto m = detail::share(detail::reduce<prim::amax_kind, true, D>(x));  // read twice below
    auto e = exp(make_node(prim::sub_{}, x, m));
    return make_node(prim::div_{}, e, detail::reduce<prim::sum_kind, true, D>(e));
  }
};
template <std::int64_t D>
struct log_softmax : same_as_input {
  static constexpr std::string_view name = "log_softmax";
  static constexpr std::int64_t dim = D;
  static constexpr bool fuses_prologue = true;  // the CPU row kernel evaluates a pointwise producer per row
  template <class X>
  auto decompose(const X& x) const {
    auto shifted = make_node(prim::sub_{}, x, detail::share(detail::reduce<prim::amax_kind, true, D>(x)));
    return make_node(prim::sub_{}, shifted, log(detail::reduce<prim::sum_kind, true, D>(exp(shifted))));
  }
};
}  // namespace aten

}  // namespace tenet
