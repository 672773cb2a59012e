#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The rule-table entries (prims/rule_table.hpp) of the composites of include/tenet/ops.hpp and
// math.hpp that autograd keeps whole (record.hpp: runs_natively<autograd_backend, ...>): softmax
// and log_softmax, and every composite that carries its own derivative (`has_derivative`). conv2d
// and max_pool2d have theirs in conv.hpp, beside the ops. ops.hpp does not include the autograd
// engine, which the rules are written with: as each prim group's, they sit in a companion header.
#include <cstdint>
#include <tuple>

#include <tenet/autograd/jvp.hpp>
#include <tenet/autograd/vjp.hpp>
#include <tenet/decomp/activations.hpp>  // aten::gelu_backward
#include <tenet/decomp/softmax.hpp>  // aten::softmax, aten::log_softmax
#include <tenet/prims/elementwise_rules.hpp>
#include <tenet/prims/rule_table.hpp>

namespace tenet::detail::ag {

// Composites that carry their own derivative (`has_derivative`, `derivative(x, y, t)` = f'(x) t with
// y the node itself; its op holds the parameters), as PyTorch's derivatives.yaml gives one formula
// per op: autograd keeps them whole (record.hpp) and applies it in both modes, as a unary
// pointwise prim's. Differentiating the decomposition instead is NaN wherever one of its
// intermediates overflows or a branch that where() does not take is not finite there (the chain
// rule's 0 * inf): acosh below -1, sinh of 1000, softplus of 100, sinc at 0 ...
template <class Op>
  requires requires { Op::has_derivative; }
struct rules<Op> : unary_pointwise_rule {
  template <class T, class X, class Y, class G>
  static auto derivative(const X& x, const Y& y, const G& g) {
    return Op::derivative(x, y, g);
  }
};

// gelu's derivative node (made by gelu's own rule above, so never decomposed before autograd
// sees it): differentiated through its decomposition, the formula in prims (second order,
// forward over reverse).
template <bool Tanh>
struct rules<aten::gelu_backward<Tanh>> {
  template <class E>
  static auto formula(const E& e) {
    return detail::apply_tuple([&](const auto&... c) { return e.op.decompose(c...); }, e.children);
  }
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    backprop(formula(e), g);
  }
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    return tangent(formula(e), ctx);
  }
};

// softmax and log_softmax: the VJP and JVP from the output, one fused expression each, instead of
// those of the decomposition (max-shift, exp, sum, div). tests/test_autograd_ops.cpp checks both
// agree.
template <std::int64_t D>
struct rules<aten::softmax<D>> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto gv = exact(g, e.sizes());
    const auto y = forward_value(e);
    const auto dot = value(make_node(prim::reduce_<prim::sum_kind, true, D>{}, pw::mul(gv, y)));
    backprop(std::get<0>(e.children), pw::mul(y, pw::sub(gv, dot)));
  }
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    const auto tx = value(tangent(std::get<0>(e.children), ctx));
    const auto y = forward_value(e);
    return pw::mul(y, pw::sub(tx, value(make_node(prim::reduce_<prim::sum_kind, true, D>{}, pw::mul(tx, y)))));
  }
};

template <std::int64_t D>
struct rules<aten::log_softmax<D>> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto gv = exact(g, e.sizes());
    const auto y = forward_value(e);
    const auto total = value(make_node(prim::reduce_<prim::sum_kind, true, D>{}, gv));
    backprop(std::get<0>(e.children), pw::sub(gv, pw::mul(pw::un<prim::exp_>(y), total)));
  }
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    const auto tx = value(tangent(std::get<0>(e.children), ctx));
    const auto y = forward_value(e);
    return pw::sub(tx, value(make_node(prim::reduce_<prim::sum_kind, true, D>{}, pw::mul(pw::un<prim::exp_>(y), tx))));
  }
};

}  // namespace tenet::detail::ag
