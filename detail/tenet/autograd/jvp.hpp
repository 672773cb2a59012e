#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Forward mode: the tangent (JVP) of a prim tree, one rule per prim, over a recorded graph.
//
// tenet::jvp(f, primals, tangents) (autograd/functions.hpp) records f on fresh autograd identities
// of the primals, then asks the output's node for its tangent: a node's tangent is the JVP of its
// prim tree given the tangents of its tensor leaves, which are the seeds, the tangents of their
// own nodes (memoized), or zero. The pointwise rules are the VJP ones (vjp.hpp: f'(x) * t is the
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

template <class Op>
struct sum_over;  // the sum reduction over Op's dims, keeping dims as Op does
template <class Kind, bool K, auto... Dims>
struct sum_over<prim::reduce_<Kind, K, Dims...>> {
  using type = prim::reduce_<prim::sum_kind, K, Dims...>;
  using kept = prim::reduce_<prim::sum_kind, true, Dims...>;
  using prod_kept = prim::reduce_<prim::prod_kind, true, Dims...>;
};

template <class Op>
struct kept_whole;  // the composites autograd keeps whole (record.hpp)
template <std::int64_t D>
struct kept_whole<aten::softmax<D>> {
  static constexpr std::int64_t dim = D;
  static constexpr bool log = false;
};
template <std::int64_t D>
struct kept_whole<aten::log_softmax<D>> {
  static constexpr std::int64_t dim = D;
  static constexpr bool log = true;
};

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

template <class Op, class... C>
auto tangent_node_inputs(const tenet::node<Op, C...>& e, jvp_context& ctx) {
  using E = tenet::node<Op, C...>;
  using T = value_type_of<E>;
  constexpr std::size_t r = rank_of<E>;
  const auto& x = std::get<0>(e.children);
  using X = std::remove_cvref_t<decltype(x)>;
  if constexpr (requires { kept_whole<Op>::dim; }) {  // softmax / log_softmax
    constexpr std::int64_t D = kept_whole<Op>::dim;
    const auto tx = value(tangent(x, ctx));
    const auto y = forward_value(e);
    if constexpr (!kept_whole<Op>::log)
      return pw::mul(y, pw::sub(tx, value(make_node(prim::reduce_<prim::sum_kind, true, D>{}, pw::mul(tx, y)))));
    else
      return pw::sub(tx, value(make_node(prim::reduce_<prim::sum_kind, true, D>{}, pw::mul(pw::un<prim::exp_>(y), tx))));
  } else if constexpr (requires { vjp_rule<Op>::has_tangent; }) {
    // a composite kept whole whose rule gives its tangent too (max_pool2d)
    return vjp_rule<Op>::tangent(e, value(tangent(x, ctx)));
  } else if constexpr (requires { Op::bilinear; }) {  // conv2d, kept whole by autograd: bilinear
    const auto& b = std::get<1>(e.children);
    return pw::add(value(make_node(e.op, value(tangent(x, ctx)), forward_value(b))),
                   value(make_node(e.op, forward_value(x), value(tangent(b, ctx)))));
  } else if constexpr (requires { chain_rule<Op>::is_unary; }) {
    const auto xv = forward_value(x);
    return chain_rule<Op>::template apply<T>(xv, make_node(e.op, xv), tangent(x, ctx));
  } else if constexpr (requires { sizeof(binary_rule<Op>); }) {
    // only the operands with a tangent contribute (a constant's zero tangent times the partial
    // derivative would be 0 * inf = NaN where that is infinite: x * 2 at x = inf), as PyTorch
    // skips undefined tangents
    using B = std::remove_cvref_t<decltype(std::get<1>(e.children))>;
    const auto& b = std::get<1>(e.children);
    const auto av = forward_value(x);
    const auto bv = forward_value(b);
    const auto y = make_node(e.op, av, bv);
    auto from_a = [&] { return binary_rule<Op>::template da<T>(av, bv, y, tangent(x, ctx)); };
    auto from_b = [&] { return binary_rule<Op>::template db<T>(av, bv, y, tangent(b, ctx)); };
    if constexpr (ScalarLeaf<B>) {
      return from_a();
    } else if constexpr (ScalarLeaf<X>) {
      return from_b();
    } else {
      using R = grad_tensor<T, r>;  // (one operand's term can have its lower rank: expanded to e's)
      auto full = [&](const auto& t) { return R(value(make_node(prim::expand_<dyn_shape<r>>{e.sizes()}, value(t)))); };
      if (!carries_tangent(b)) return full(from_a());
      if (!carries_tangent(x)) return full(from_b());
      return R(value(pw::add(from_a(), from_b())));
    }
  } else if constexpr (std::is_same_v<Op, prim::where_>) {
    return pw::where(forward_value(x), tangent(std::get<1>(e.children), ctx), tangent(std::get<2>(e.children), ctx));
  } else if constexpr (requires { typename Op::target; }) {  // convert_element_type
    if constexpr (is_autograd_dtype<value_type_of<X>>)
      return value(pw::cast<T>(tangent(x, ctx)));
    else
      return zeros_of<T, r>(e.sizes());
  } else if constexpr (requires { typename Op::group; } && std::is_same_v<typename Op::group, prim::movement_group>) {
    if constexpr (requires { e.op.interior; }) {  // pad: the padding value is a constant
      auto op = e.op;
      op.value = 0.0;
      return make_node(op, value(tangent(x, ctx)));
    } else {
      return make_node(e.op, value(tangent(x, ctx)));
    }
  } else if constexpr (requires { typename Op::group; } && std::is_same_v<typename Op::group, prim::reduction_group>) {
    using Kind = typename Op::kind;
    const auto tx = value(tangent(x, ctx));
    if constexpr (std::is_same_v<Kind, prim::sum_kind>) {
      return make_node(e.op, tx);
    } else {
      // the tangent contracted with the reverse-mode weights of the reduction
      constexpr std::size_t rx = rank_of<X>;
      constexpr auto mask = Op::template mask<X>();
      const auto xv = forward_value(x);
      const auto xs = x.sizes();
      sizes_t<rx> ks{};
      for (std::size_t i = 0; i < rx; ++i) ks[i] = mask[i] ? 1 : xs[i];
      using kept = typename sum_over<Op>::kept;
      if constexpr (std::is_same_v<Kind, prim::prod_kind>) {
        const auto zero = pw::eq(xv, pw::c<T>(0));
        const auto z = value(make_node(kept{}, pw::cast<T>(zero)));
        const auto prod_nonzero = value(make_node(typename sum_over<Op>::prod_kept{}, pw::where(zero, pw::c<T>(1), xv)));
        const auto local = pw::where(zero, pw::where(pw::eq(z, pw::c<T>(1)), prod_nonzero, pw::c<T>(0)),
                                     pw::where(pw::eq(z, pw::c<T>(0)), pw::div(prod_nonzero, xv), pw::c<T>(0)));
        return make_node(typename sum_over<Op>::type{}, value(pw::mul(tx, local)));
      } else {
        const auto yk = as_sizes<rx>(forward_value(e), ks);
        const auto hit = value(pw::cast<T>(pw::eq(xv, yk)));
        const auto count = value(make_node(kept{}, hit));
        return make_node(typename sum_over<Op>::type{}, value(pw::mul(tx, pw::div(hit, count))));
      }
    }
  } else if constexpr (std::is_same_v<Op, prim::matmul_>) {
    const auto& b = std::get<1>(e.children);
    using R = grad_tensor<T, r>;
    auto from_a = [&] { return R(value(make_node(prim::matmul_{}, value(tangent(x, ctx)), forward_value(b)))); };
    auto from_b = [&] { return R(value(make_node(prim::matmul_{}, forward_value(x), value(tangent(b, ctx))))); };
    if (!carries_tangent(b)) return from_a();  // (as the binary rules: no 0 * inf from a constant operand)
    if (!carries_tangent(x)) return from_b();
    return R(value(pw::add(from_a(), from_b())));
  } else if constexpr (requires { Op::dim; } && std::is_same_v<typename Op::group, prim::indexing_group> &&
                       sizeof...(C) == 2) {  // gather
    return make_node(e.op, value(tangent(x, ctx)), forward_value(std::get<1>(e.children)));
  } else if constexpr (std::is_same_v<typename Op::group, prim::indexing_group>) {  // scatter
    if constexpr (Op::op != prim::scatter_op::replace && Op::op != prim::scatter_op::sum) {
      throw value_error(std::string("tenet: autograd: no JVP for ") + std::string(Op::name) + " yet");
      return zeros_of<T, r>(e.sizes());
    } else {
      return make_node(e.op, value(tangent(x, ctx)), forward_value(std::get<1>(e.children)),
                       value(tangent(std::get<2>(e.children), ctx)));
    }
  } else if constexpr (std::is_same_v<typename Op::group, prim::scan_group>) {
    using Kind = typename Op::kind;
    constexpr std::int64_t D = Op::requested_dim;
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
      return pw::mul(forward_value(e), value(make_node(prim::scan_<prim::sum_kind, D>{}, value(pw::div(tx, xv)))));
    } else if constexpr (std::is_same_v<Kind, prim::logaddexp_kind>) {
      return pw::mul(pw::un<prim::exp_>(pw::neg(forward_value(e))),
                     value(make_node(prim::scan_<prim::sum_kind, D>{}, value(pw::mul(pw::un<prim::exp_>(forward_value(x)), tx)))));
    } else {
      using arg = prim::running_arg<std::is_same_v<Kind, prim::amax_kind>>;
      return make_node(prim::gather_<D>{}, tx, value(make_node(prim::scan_<arg, D>{}, forward_value(x))));
    }
  } else if constexpr (std::is_same_v<typename Op::group, prim::sort_group>) {
    prim::sort_<Op::requested_dim, prim::sort_output::indices> order;
    order.descending = e.op.descending;
    return make_node(prim::gather_<Op::requested_dim>{}, value(tangent(x, ctx)), value(make_node(order, forward_value(x))));
  } else {
    static_assert(compile_error::always_false<Op>, "tenet: autograd: no JVP rule for this op (see 'Op' above)");
  }
}
// One template with a branch, not an overload for node<Op> beside node<Op, C...>: while resolving
// such an overload set nvcc 13 instantiates node<Op> with no children for a binary op (a hard error).
template <class Op, class... C>
auto tangent_node(const tenet::node<Op, C...>& e, jvp_context& ctx) {
  if constexpr (sizeof...(C) == 0)  // iota, uniform: no inputs
    return zeros_of<value_type_of<tenet::node<Op>>, rank_of<tenet::node<Op>>>(e.sizes());
  else
    return tangent_node_inputs(e, ctx);
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
