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
#include <tenet/decomp/cross_entropy.hpp>  // aten::cross_entropy_rows(_grad)
#include <tenet/decomp/norm.hpp>  // aten::norm_last
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

// layer_norm and rms_norm over the last K dims (aten::norm_last): the input's gradient is one
// aten::norm_last_grad node (decomp/norm.hpp: torch's formulas, a row kernel on the CPU and CUDA);
// the weight's and bias's are expressions in the compute type (float for 16-bit inputs) over the
// row statistics, recomputed from x:
//   dw = g xhat and db = g, summed to their sizes (xhat = (x - mu) rstd, or x r for rms_norm).
// Through the decomposition's chain rule the backward ran a kernel per step (its mean, centred
// input, variance and rsqrt each differentiated). The JVP goes through the decomposition; the
// grad node's VJP (second order) through its decomposition.
template <std::size_t K, bool Rms>
struct rules<aten::norm_last<K, Rms>> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    using T = value_type_of<E>;
    using C = compute_t<T>;
    const auto& ch = e.children;
    constexpr bool has_bias = std::tuple_size_v<std::remove_cvref_t<decltype(ch)>> == 3;
    const auto gv = value(exact(g, e.sizes()));
    const auto xv = forward_value(std::get<0>(ch));
    const auto wv = forward_value(std::get<1>(ch));
    if (needs_grad(std::get<0>(ch)))
      backprop(std::get<0>(ch), make_node(aten::norm_last_grad<K, Rms>{e.op.eps}, xv, wv, gv));
    if constexpr (has_bias)
      if (needs_grad(std::get<2>(ch))) backprop(std::get<2>(ch), gv);
    if (!needs_grad(std::get<1>(ch))) return;
    const auto gc = pw::cast<C>(gv);
    const auto x = pw::cast<C>(xv);
    const auto eps = pw::c<C>(e.op.eps);
    detail::with_trailing_dims<rank_of<E>, K>([&]<std::int64_t... D>() {
      const auto mean = [](const auto& a) { return value(detail::mean_impl<true, D...>(a)); };
      if constexpr (Rms) {
        const auto r = value(pw::un<prim::rsqrt_>(pw::add(detail::mean_impl<true, D...>(pw::mul(x, x)), eps)));
        backprop(std::get<1>(ch), pw::cast<T>(pw::mul(gc, pw::mul(x, r))));
      } else {
        const auto xc = pw::sub(x, mean(x));
        const auto rstd = value(pw::un<prim::rsqrt_>(pw::add(detail::mean_impl<true, D...>(pw::mul(xc, xc)), eps)));
        backprop(std::get<1>(ch), pw::cast<T>(pw::mul(gc, pw::mul(xc, rstd))));
      }
    });
  }
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    return tangent(detail::apply_tuple([&](const auto&... c) { return e.op.decompose(c...); }, e.children), ctx);
  }
};
template <std::size_t K, bool Rms>
struct rules<aten::norm_last_grad<K, Rms>> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    backprop(detail::apply_tuple([&](const auto&... c) { return e.op.decompose(c...); }, e.children), g);
  }
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    return tangent(detail::apply_tuple([&](const auto&... c) { return e.op.decompose(c...); }, e.children), ctx);
  }
};

// cross_entropy over rows (aten::cross_entropy_rows): one aten::cross_entropy_rows_grad node,
// (softmax(x) - onehot(t)) g, which a backend runs as one row kernel (CUDA). Where x is a cast of a
// 16-bit tensor to its compute type (the logits of a bf16 model, cast to float for the loss), the
// gradient node reads that tensor and writes its dtype: the cast's gradient, rounded once, without
// an [N, C] float input or gradient in memory. The JVP goes through the decomposition; the grad
// node's own VJP (second order) through its decomposition.
template <class X>
struct ce_low_input {  // x is not a widening cast
  static constexpr bool widened = false;
  static const X& of(const X& x) { return x; }
};
template <class To, class Y>
  requires(half_precision<value_type_of<Y>> && std::is_same_v<To, compute_t<value_type_of<Y>>>)
struct ce_low_input<node<prim::convert_element_type_<To>, Y>> {
  static constexpr bool widened = true;
  static const Y& of(const node<prim::convert_element_type_<To>, Y>& x) { return std::get<0>(x.children); }
};
template <>
struct rules<aten::cross_entropy_rows> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto& ch = e.children;
    using X = std::remove_cvref_t<decltype(std::get<0>(ch))>;
    const auto& x = ce_low_input<X>::of(std::get<0>(ch));
    if (!needs_grad(x)) return;
    const auto gv = value(exact(g, e.sizes()));
    const auto t = forward_value(std::get<1>(ch));
    backprop(x, make_node(aten::cross_entropy_rows_grad{e.op.ignore_index}, forward_value(x), t, gv));
  }
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    return tangent(detail::apply_tuple([&](const auto&... c) { return e.op.decompose(c...); }, e.children), ctx);
  }
};
template <>
struct rules<aten::cross_entropy_rows_grad> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    backprop(detail::apply_tuple([&](const auto&... c) { return e.op.decompose(c...); }, e.children), g);
  }
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    return tangent(detail::apply_tuple([&](const auto&... c) { return e.op.decompose(c...); }, e.children), ctx);
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
