#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The differentiation rules of the scan prims (prims/scan.hpp), their entries of the rule table
// (prims/rule_table.hpp).
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include <tenet/autograd/jvp.hpp>
#include <tenet/autograd/vjp.hpp>
#include <tenet/prims/indexing.hpp>  // gather_, scatter_
#include <tenet/prims/scan.hpp>
#include <tenet/prims/rule_table.hpp>

namespace tenet::detail::ag {

template <class Kind, std::int64_t Dim>
struct rules<prim::scan_<Kind, Dim>> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    using X = std::remove_cvref_t<decltype(x)>;
    using T = value_type_of<E>;
    constexpr std::size_t r = rank_of<X>;
    constexpr std::size_t d = prim::scan_<Kind, Dim>::template dim<X>;
    const auto xs = x.sizes();
    const auto gv = exact(g, xs);
    // the sum over j >= i along d: reverse, cumsum, reverse
    auto reverse_cumsum = [&](const auto& v) {
      const auto flip = flip_dim<r>(xs, d);
      return value(make_node(flip, value(make_node(prim::scan_<prim::sum_kind, Dim>{}, make_node(flip, v)))));
    };
    if constexpr (std::is_same_v<Kind, prim::sum_kind>) {
      backprop(x, reverse_cumsum(gv));
    } else if constexpr (std::is_same_v<Kind, prim::prod_kind>) {
      const auto xv = forward_value(x);
      const auto xh = xv.cpu();  // (a host copy of a device tensor)
      bool zero = false;
      for_each_offset(xh.sizes(), xh.strides(), xh.offset(),
                      [&](std::int64_t, std::int64_t off) { zero = zero || to_double(static_cast<const T*>(xh.storage()->data)[off]) == 0.0; });
      if (zero)
        throw value_error("tenet: autograd: the gradient of cumprod at an input equal to 0 is not implemented yet");
      backprop(x, pw::div(reverse_cumsum(pw::mul(gv, forward_value(e))), xv));
    } else if constexpr (std::is_same_v<Kind, prim::logaddexp_kind>) {
      // d y_j / d x_i = exp(x_i - y_j) for i <= j
      const auto y = forward_value(e);
      backprop(x, pw::mul(reverse_cumsum(pw::mul(gv, pw::un<prim::exp_>(pw::neg(y)))), pw::un<prim::exp_>(forward_value(x))));
    } else if constexpr (std::is_same_v<Kind, prim::amax_kind> || std::is_same_v<Kind, prim::amin_kind>) {
      // each output's gradient goes to the position of its running extreme (as torch.cummax)
      using arg = prim::running_arg<std::is_same_v<Kind, prim::amax_kind>>;
      const auto at = value(make_node(prim::scan_<arg, Dim>{}, forward_value(x)));
      backprop(x, make_node(prim::scatter_<Dim, prim::scatter_op::sum>{}, zeros_of<T, r>(xs), at, gv));
    } else {
      static_assert(compile_error::always_false<Kind>, "tenet: autograd: no VJP for this scan kind");
    }
  }
  /// The tangent: cumsum's is the cumsum of the tangent; cumprod and logcumsumexp contract it with
  /// their reverse-mode weights; cummax/cummin take the tangent at each running extreme.
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    using T = value_type_of<E>;
    const auto& x = std::get<0>(e.children);
    const auto tx = value(tangent(x, ctx));
    if constexpr (std::is_same_v<Kind, prim::sum_kind>) {
      return make_node(e.op, tx);
    } else if constexpr (std::is_same_v<Kind, prim::prod_kind>) {
      const auto xv = forward_value(x);
      const auto xh = xv.cpu();  // (a host copy of a device tensor)
      bool zero = false;
      for_each_offset(xh.sizes(), xh.strides(), xh.offset(), [&](std::int64_t, std::int64_t off) {
        zero = zero || to_double(static_cast<const T*>(xh.storage()->data)[off]) == 0.0;
      });
      if (zero) throw value_error("tenet: autograd: the JVP of cumprod at an input equal to 0 is not implemented yet");
      return pw::mul(forward_value(e), value(make_node(prim::scan_<prim::sum_kind, Dim>{}, value(pw::div(tx, xv)))));
    } else if constexpr (std::is_same_v<Kind, prim::logaddexp_kind>) {
      return pw::mul(pw::un<prim::exp_>(pw::neg(forward_value(e))),
                     value(make_node(prim::scan_<prim::sum_kind, Dim>{}, value(pw::mul(pw::un<prim::exp_>(forward_value(x)), tx)))));
    } else {
      using arg = prim::running_arg<std::is_same_v<Kind, prim::amax_kind>>;
      return make_node(prim::gather_<Dim>{}, tx, value(make_node(prim::scan_<arg, Dim>{}, forward_value(x))));
    }
  }
};

}  // namespace tenet::detail::ag
