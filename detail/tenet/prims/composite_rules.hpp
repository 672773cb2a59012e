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

// layer_norm and rms_norm over the last K dims (aten::norm_last): torch's backward, in the compute
// type (float for 16-bit inputs), the row statistics recomputed from x:
//   layer_norm: xhat = (x - mu) rstd, dx = rstd (g w - mean(g w) - xhat mean(g w xhat)),
//   rms_norm:   xhat = x r,          dx = r (g w - xhat mean(g w xhat)),
//   dw = g xhat and db = g, summed to their sizes.
// Through the decomposition's chain rule the backward ran a kernel per step (its mean, centred
// input, variance and rsqrt each differentiated): here four row reductions and one pointwise
// kernel for dx. The JVP goes through the decomposition.
template <std::size_t K, bool Rms>
struct rules<aten::norm_last<K, Rms>> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    using T = value_type_of<E>;
    using C = compute_t<T>;
    const auto& ch = e.children;
    const auto gv = value(exact(g, e.sizes()));
    const auto gc = pw::cast<C>(gv);
    const auto x = pw::cast<C>(forward_value(std::get<0>(ch)));
    const auto w = pw::cast<C>(forward_value(std::get<1>(ch)));
    const auto eps = pw::c<C>(e.op.eps);
    detail::with_trailing_dims<rank_of<E>, K>([&]<std::int64_t... D>() {
      const auto mean = [](const auto& a) { return value(detail::mean_impl<true, D...>(a)); };
      const auto gw = pw::mul(gc, w);
      const auto send = [&](const auto& xhat, const auto& dx) {
        if (needs_grad(std::get<0>(ch))) backprop(std::get<0>(ch), pw::cast<T>(dx()));
        if (needs_grad(std::get<1>(ch))) backprop(std::get<1>(ch), pw::cast<T>(pw::mul(gc, xhat)));
        if constexpr (std::tuple_size_v<std::remove_cvref_t<decltype(ch)>> == 3)
          if (needs_grad(std::get<2>(ch))) backprop(std::get<2>(ch), gv);
      };
      if constexpr (Rms) {
        const auto r = value(pw::un<prim::rsqrt_>(pw::add(detail::mean_impl<true, D...>(pw::mul(x, x)), eps)));
        const auto xhat = pw::mul(x, r);
        send(xhat, [&] { return pw::mul(r, pw::sub(gw, pw::mul(xhat, mean(pw::mul(gw, xhat))))); });
      } else {
        const auto mu = mean(x);
        const auto xc = pw::sub(x, mu);
        const auto rstd = value(pw::un<prim::rsqrt_>(pw::add(detail::mean_impl<true, D...>(pw::mul(xc, xc)), eps)));
        const auto xhat = pw::mul(xc, rstd);
        send(xhat, [&] { return pw::mul(rstd, pw::sub(pw::sub(gw, mean(gw)), pw::mul(xhat, mean(pw::mul(gw, xhat))))); });
      }
    });
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
