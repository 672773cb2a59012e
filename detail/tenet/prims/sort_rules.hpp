#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The differentiation rules of the sort prim (prims/sort.hpp), their entries of the rule table
// (prims/rule_table.hpp).
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include <tenet/autograd/jvp.hpp>
#include <tenet/autograd/vjp.hpp>
#include <tenet/prims/indexing.hpp>  // gather_, scatter_
#include <tenet/prims/sort.hpp>
#include <tenet/prims/rule_table.hpp>

namespace tenet::detail::ag {

template <std::int64_t Dim, prim::sort_output Output>
struct rules<prim::sort_<Dim, Output>> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    using T = value_type_of<E>;
    constexpr std::size_t r = rank_of<decltype(x)>;
    prim::sort_<Dim, prim::sort_output::indices> order;
    order.descending = e.op.descending;
    const auto at = value(make_node(order, forward_value(x)));
    backprop(x, make_node(prim::scatter_<Dim, prim::scatter_op::sum>{}, zeros_of<T, r>(x.sizes()), at,
                          exact(g, e.sizes())));
  }
  /// The tangent: the input's tangent in the sorted order.
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    const auto& x = std::get<0>(e.children);
    prim::sort_<Dim, prim::sort_output::indices> order;
    order.descending = e.op.descending;
    return make_node(prim::gather_<Dim>{}, value(tangent(x, ctx)), value(make_node(order, forward_value(x))));
  }
};

}  // namespace tenet::detail::ag
