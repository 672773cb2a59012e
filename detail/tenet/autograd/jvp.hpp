#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Forward mode (the engine): the tangent (JVP) of a prim tree over a recorded graph, one rule per
// prim: rules<Op>::jvp of the rule table (prims/rule_table.hpp), beside each prim's VJP.
//
// tenet::jvp(f, primals, tangents) (autograd/functions.hpp) records f on fresh autograd identities
// of the primals, then asks the output's node for its tangent: a node's tangent is the JVP of its
// prim tree given the tangents of its tensor leaves, which are the seeds, the tangents of their
// own nodes (memoized), or zero. The pointwise rules use the VJP's derivative (f'(x) * t is the
// same linear map); the linear prims (movement, sum, gather, scatter, cumsum) apply themselves to
// the tangent; the others contract the tangent with their reverse-mode weights.
#include <any>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <tenet/autograd/graph.hpp>
#include <tenet/autograd/vjp.hpp>

namespace tenet::detail::ag {

/// The tangent of identity m (a tensor of sizes `sizes`): its seed, its node's tangent, or zeros.
template <class T, std::size_t R>
grad_tensor<T, R> meta_tangent(const std::shared_ptr<meta>& m, const sizes_t<R>& sizes, jvp_context& ctx) {
  if (m) {
    if (auto it = ctx.seeds.find(m.get()); it != ctx.seeds.end()) return std::any_cast<grad_tensor<T, R>>(it->second);
    if (const grad_node* n = m->grad_fn.get()) {
      auto it = ctx.memo.find(n);
      if (it == ctx.memo.end()) it = ctx.memo.emplace(n, n->tangent(ctx)).first;
      return std::any_cast<grad_tensor<T, R>>(it->second);
    }
  }
  return zeros_of<T, R>(sizes);
}

template <class E>
auto tangent(const E& e, jvp_context& ctx);

/// Whether a tangent reaches e: some tracked tensor leaf of e, not counting where()'s condition
/// (nor anything of a non-floating dtype, which has no tangent).
template <class E>
bool carries_tangent(const E& e) {
  if constexpr (!is_autograd_dtype<value_type_of<E>> || ScalarLeaf<E>) {
    return false;
  } else if constexpr (TensorType<E>) {
    return is_tracked(e);
  } else if constexpr (SharedNode<E>) {
    return carries_tangent(e.expr);
  } else if constexpr (std::is_same_v<typename E::op_type, prim::where_>) {
    return carries_tangent(std::get<1>(e.children)) || carries_tangent(std::get<2>(e.children));
  } else {
    return detail::apply_tuple([](const auto&... c) { return (carries_tangent(c) || ...); }, e.children);
  }
}

// One template with a branch, not an overload for node<Op> beside node<Op, C...>: while resolving
// such an overload set nvcc 13 instantiates node<Op> with no children for a binary op (a hard error).
template <class Op, class... C>
auto tangent_node(const tenet::node<Op, C...>& e, jvp_context& ctx) {
  if constexpr (sizeof...(C) == 0) {  // iota, uniform: no inputs
    return zeros_of<value_type_of<tenet::node<Op>>, rank_of<tenet::node<Op>>>(e.sizes());
  } else if constexpr (requires { rules<Op>::unary_pointwise; }) {  // f'(x) t, its entry's derivative
    using T = value_type_of<tenet::node<Op, C...>>;
    const auto& x = std::get<0>(e.children);
    const auto xv = forward_value(x);
    return rules<Op>::template derivative<T>(xv, make_node(e.op, xv), tangent(x, ctx));
  } else if constexpr (requires { sizeof(rules<Op>); }) {
    return rules<Op>::jvp(e, ctx);
  } else {
    static_assert(compile_error::always_false<Op>, "tenet: autograd: no JVP rule for this op (see 'Op' above)");
  }
}

template <class E>
auto tangent(const E& e, jvp_context& ctx) {
  using T = value_type_of<E>;
  if constexpr (ScalarLeaf<E>)
    return pw::c<T>(0);
  else if constexpr (TensorType<E>)
    return meta_tangent<T, rank_of<E>>(e.autograd_meta(), e.sizes(), ctx);
  else if constexpr (SharedNode<E>)
    return tangent(e.expr, ctx);
  else
    return exact(tangent_node(e, ctx), e.sizes());  // each node's tangent is a value: bounded kernel types
}

template <class T, std::size_t RB, std::size_t RV>
std::any view_node<T, RB, RV>::tangent(jvp_context& ctx) const {
  const auto tb = meta_tangent<T, RB>(inputs[0], bsizes, ctx);  // contiguous, base's sizes
  if (!tb.device().is_cpu()) {  // on a device: the view of the tangent, for a view of a contiguous base
    if (bstrides != contiguous_strides(bsizes))
      throw value_error("tenet: jvp: the tangent of a view of a non-contiguous tensor on " + tb.device().str() +
                        " is not implemented; only on the CPU");
    const auto tc = tb.contiguous();
    return std::any(grad_tensor<T, RV>(
        tc.template with_layout<dyn_shape<RV>>(vsizes, vstrides, tc.offset() + (voffset - boffset)).clone()));
  }
  const auto span = offset_span(bsizes, bstrides, boffset);
  const std::int64_t blo = span.first, bhi = span.second;  // not a structured binding: the lambdas capture it (clang 14)
  std::vector<std::int64_t> at(static_cast<std::size_t>(std::max<std::int64_t>(bhi - blo + 1, 0)), -1);
  for_each_offset(bsizes, bstrides, boffset,
                  [&](std::int64_t flat, std::int64_t off) { at[static_cast<std::size_t>(off - blo)] = flat; });
  grad_tensor<T, RV> out(vsizes);
  const auto tc = tb.contiguous();
  T* op = out.data();
  for_each_offset(vsizes, vstrides, voffset, [&](std::int64_t flat, std::int64_t off) {
    op[flat] = tc.data()[at[static_cast<std::size_t>(off - blo)]];
  });
  return out;
}

/// Whether every prim of E that a tangent can reach has a forward-mode rule (all do but the backward
/// nodes of composites kept whole, such as scaled_dot_product_attention's sdpa_grad; a subtree of a
/// non-floating dtype, a where() condition, takes no tangent).
template <class E>
struct has_tangent_rules : std::true_type {};
template <class Op, class... C>
struct has_tangent_rules<tenet::node<Op, C...>>
    : std::bool_constant<!is_autograd_dtype<value_type_of<tenet::node<Op, C...>>> ||
                         ((has_tangent_rules<std::remove_cvref_t<C>>::value && ...) &&
                          (sizeof...(C) == 0 || requires { rules<Op>::unary_pointwise; } ||
                           requires(const tenet::node<Op, C...>& e, jvp_context& ctx) { rules<Op>::jvp(e, ctx); }))> {};
template <class E, class S>
struct has_tangent_rules<tenet::shared_node<E, S>> : has_tangent_rules<E> {};

template <class E, class T, std::size_t R>
std::any backward_expr_node<E, T, R>::tangent(jvp_context& ctx) const {  // the tangent of the gradient expression
  if constexpr (!has_tangent_rules<E>::value) {
    (void)ctx;
    throw value_error("tenet: jvp: forward mode through this gradient is not implemented: its expression holds the "
                      "backward of an op with no forward-mode rule of its own (scaled_dot_product_attention's); "
                      "differentiate it in reverse mode (func::jacrev, autograd::grad) instead");
  } else {
    if (!expr)
      throw value_error("tenet: jvp: forward mode through a gradient whose graph was freed by a backward without "
                        "retain_graph");
    const value_memo_scope values;
    const saved_versions_scope checked(&versions);
    return std::any(grad_tensor<T, R>(exact(ag::tangent(*expr, ctx), expr->sizes())));
  }
}

template <class T, std::size_t RI, std::size_t RO>
std::any relayout_node<T, RI, RO>::tangent(jvp_context& ctx) const {  // linear: the map of the tangent
  const auto ti = meta_tangent<T, RI>(inputs[0], isizes, ctx);
  return std::any(view_backward<T, RO, RI>(ti, isizes, istrides, ioffset, osizes, ostrides, ooffset));
}

template <class T, std::size_t R>
std::any to_device_node<T, R>::tangent(jvp_context& ctx) const {  // linear: the copy of the tangent
  return std::any(grad_tensor<T, R>(meta_tangent<T, R>(inputs[0], sizes, ctx).to(to)));
}

template <class T, std::size_t Rg, std::size_t R>
std::any sum_to_node<T, Rg, R>::tangent(jvp_context& ctx) const {  // linear: the sum of the tangent
  return std::any(reduce_to<T, R>(meta_tangent<T, Rg>(inputs[0], from, ctx), to));
}

}  // namespace tenet::detail::ag
