#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The differentiation rules of the indexing prims, gather and scatter (prims/indexing.hpp), their entries of the rule table
// (prims/rule_table.hpp).
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include <tenet/autograd/jvp.hpp>
#include <tenet/autograd/vjp.hpp>
#include <tenet/prims/indexing.hpp>
#include <tenet/prims/rule_table.hpp>

namespace tenet::detail::ag {

template <std::int64_t D>
struct rules<prim::gather_<D>> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    using T = value_type_of<E>;
    constexpr std::size_t r = rank_of<decltype(x)>;
    const auto idx = forward_value(std::get<1>(e.children));
    const auto gv = exact(g, e.sizes());
    auto scatter_back = [&](const auto& src) {
      backprop(x, make_node(prim::scatter_<D, prim::scatter_op::sum>{}, zeros_of<T, r>(x.sizes()), idx, src));
    };
    if (e.op.skip_grad < 0) return scatter_back(gv);
    // embedding's padding_idx: its positions send no gradient
    using I = value_type_of<decltype(idx)>;
    scatter_back(pw::where(pw::eq(idx, pw::c<I>(static_cast<double>(e.op.skip_grad))), pw::c<T>(0), gv));
  }
  /// The tangent: the same gather of the input's tangent.
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    return make_node(e.op, value(tangent(std::get<0>(e.children), ctx)), forward_value(std::get<1>(e.children)));
  }
};

template <std::int64_t D, prim::scatter_op Op>
struct rules<prim::scatter_<D, Op>> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    const auto& src = std::get<2>(e.children);
    using T = value_type_of<E>;
    using Src = std::remove_cvref_t<decltype(src)>;
    constexpr std::size_t r = rank_of<decltype(x)>;
    if constexpr (Op != prim::scatter_op::replace && Op != prim::scatter_op::sum) {
      throw value_error(std::string("tenet: autograd: scatter_reduce: no gradient for the reduction ") +
                        std::string(prim::scatter_<D, Op>::name.substr(8)) +
                        " yet (sum has one, as scatter and scatter_add); its inputs require grad: compute it under "
                        "tenet::no_grad or on detach()ed inputs");
    } else {
      const auto idx = forward_value(std::get<1>(e.children));
      const auto gv = exact(g, e.sizes());
      if (needs_grad(x)) {
        if (Op == prim::scatter_op::replace || !e.op.include_self)
          backprop(x, make_node(prim::scatter_<D, prim::scatter_op::replace>{}, gv, idx, pw::c<T>(0)));
        else
          backprop(x, gv);
      }
      if (needs_grad(src)) {
        auto taken = make_node(prim::gather_<D>{}, gv, idx);
        if constexpr (rank_of<Src> == 0) {
          backprop(src, taken);
        } else {
          // src may be larger than the index: its other elements are not read
          prim::pad_<r> fit;
          const auto ss = src.sizes();
          const auto is = idx.sizes();
          for (std::size_t d = 0; d < r; ++d) fit.low[d] = 0, fit.high[d] = ss[d] - is[d], fit.interior[d] = 0;
          backprop(src, make_node(fit, taken));
        }
      }
    }
  }
  /// The tangent (replace, sum): the same scatter of the tangents of the input and the source.
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    if constexpr (Op != prim::scatter_op::replace && Op != prim::scatter_op::sum) {
      throw value_error(std::string("tenet: autograd: no JVP for ") + std::string(prim::scatter_<D, Op>::name) + " yet");
      return zeros_of<value_type_of<E>, rank_of<E>>(e.sizes());
    } else {
      return make_node(e.op, value(tangent(std::get<0>(e.children), ctx)), forward_value(std::get<1>(e.children)),
                       value(tangent(std::get<2>(e.children), ctx)));
    }
  }
};

}  // namespace tenet::detail::ag
