#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// decompose_t<E, Backend>: the ATen-level expression E rewritten into prims.
//
// A node whose op is a prim is kept (its children rewritten); a node whose op is an ATen-level
// composite is replaced by `op.decompose(children...)` and rewritten again, unless the backend runs
// that composite natively (`runs_natively<Backend, Op, Children...>`, the backend's eligibility
// predicate). The result is checked for closure: every op left is in the prim list
// (decomp/prim_list.hpp) or a composite the backend declared.
#include <tuple>
#include <type_traits>
#include <utility>

#include <boost/hana/all_of.hpp>  // closure check over the ops of a tree
#include <boost/hana/bool.hpp>
#include <boost/hana/flatten.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include <tenet/expr/node.hpp>
#include <tenet/expr/shared.hpp>

namespace tenet::detail {

/// The reference backend: runs no composite natively, so decompose_t<E> holds prims only.
struct reference_backend {
  static constexpr const char* name() { return "reference"; }
};

template <class Backend, class Op, class... C>
inline constexpr bool runs_natively = false;

/// A prim that Backend evaluates as a leaf of its fused loops instead of materializing it: a
/// generator without inputs (CUDA's random draws, backend/cuda/native.hpp). A specialization sets
/// `applies` and gives `static Leaf make(const Op&)`; the leaf is an Expression that is not a node.
template <class Backend, class Op>
struct prim_leaf {
  static constexpr bool applies = false;
};

template <class Backend, class E>
auto decompose(const E& e) {
  if constexpr (SharedNode<E>) {
    return with_expr(e, decompose<Backend>(e.expr));
  } else if constexpr (!Node<E>) {
    return e;
  } else {
    using Op = typename E::op_type;
    auto kids = detail::apply_tuple([](const auto&... c) { return std::make_tuple(decompose<Backend>(c)...); }, e.children);
    if constexpr (prim_leaf<Backend, Op>::applies) {
      return prim_leaf<Backend, Op>::make(e.op);
    } else if constexpr (Op::is_prim) {
      return detail::apply_tuple([&](const auto&... k) { return make_node(e.op, k...); }, kids);
    } else {
      constexpr bool native = detail::apply_tuple(
          [](const auto&... k) { return runs_natively<Backend, Op, std::remove_cvref_t<decltype(k)>...>; }, kids);
      if constexpr (native)
        return detail::apply_tuple([&](const auto&... k) { return make_node(e.op, k...); }, kids);
      else
        // a decomposition may name its input more than once: share expensive inputs
        return decompose<Backend>(detail::apply_tuple([&](const auto&... k) { return e.op.decompose(share(k)...); }, kids));
    }
  }
}

template <class E, class Backend = reference_backend>
using decompose_t = decltype(decompose<Backend>(std::declval<const E&>()));

/// The op types of a tree, as a hana tuple of hana::type (leaves contribute none).
template <class E>
constexpr auto ops_of(boost::hana::basic_type<E>) {
  if constexpr (SharedNode<E>) {
    return ops_of(boost::hana::type_c<decltype(std::declval<E>().expr)>);
  } else if constexpr (Node<E>) {
    return []<class Op, class... C>(boost::hana::basic_type<node<Op, C...>>) {
      return boost::hana::flatten(boost::hana::make_tuple(boost::hana::make_tuple(boost::hana::type_c<Op>),
                                                          ops_of(boost::hana::type_c<C>)...));
    }(boost::hana::type_c<E>);
  } else {
    return boost::hana::make_tuple();
  }
}

/// True when every op of E is a prim.
template <class E>
constexpr bool holds_only_prims() {
  return decltype(boost::hana::all_of(ops_of(boost::hana::type_c<E>), [](auto t) {
    return boost::hana::bool_c<decltype(t)::type::is_prim>;
  }))::value;
}

/// True when every op of E is a prim or a composite that Backend runs natively.
template <class E, class Backend>
constexpr bool is_closed() {
  if constexpr (SharedNode<E>) {
    return is_closed<decltype(std::declval<E>().expr), Backend>();
  } else if constexpr (!Node<E>) {
    return true;
  } else {
    return []<class Op, class... C>(std::type_identity<node<Op, C...>>) {
      return (Op::is_prim || runs_natively<Backend, Op, C...>) && (is_closed<C, Backend>() && ...);
    }(std::type_identity<E>{});
  }
}

}  // namespace tenet::detail

namespace tenet {
using detail::decompose_t;
}
