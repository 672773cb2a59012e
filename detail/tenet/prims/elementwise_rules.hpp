#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The differentiation rules of the elementwise prims (prims/elementwise.hpp), their entries of the
// rule table (prims/rule_table.hpp): each prim's derivative once, in a pointwise form (unary:
// `derivative`, binary: `da`/`db`, where: `if_true`/`if_false`, cast: `back`) that the VJP, the
// JVP and the compiled backward's fused regions (schedule/backward_fusion.hpp) all apply. The
// rules need Tensor and the autograd engine, which the prim structs cannot include (they come
// first): so they sit in this companion header rather than in elementwise.hpp itself.
#include <cstdint>
#include <numbers>
#include <tuple>
#include <type_traits>

#include <tenet/autograd/jvp.hpp>
#include <tenet/autograd/vjp.hpp>
#include <tenet/prims/elementwise.hpp>
#include <tenet/prims/rule_table.hpp>

namespace tenet::detail::ag {

// ---------------------------------------------------------------------------------------------
// unary: f'(x) * t, with y = f(x) (the node itself, recomputed inside the fused loop)

/// A unary pointwise op's entry holds only its `derivative`: the walks apply it, to the gradient
/// (autograd/vjp.hpp: backprop_node), to the tangent (autograd/jvp.hpp: tangent_node) and inside a
/// fused region (schedule/backward_fusion.hpp), the same linear map each time. (Applied by the
/// walks themselves rather than by a vjp/jvp member: one function instantiation fewer per unary
/// node type, which test files' compile time notices.)
struct unary_pointwise_rule {
  static constexpr bool unary_pointwise = true;
};

#define TENET_UNARY_RULE(OP, ...)                                          \
  template <>                                                              \
  struct rules<prim::OP##_> : unary_pointwise_rule {                        \
    template <class T, class X, class Y, class G>                          \
    static auto derivative(const X& x, const Y& y, const G& g) {           \
      (void)x;                                                             \
      (void)y;                                                             \
      return __VA_ARGS__;                                                  \
    }                                                                      \
  };
TENET_UNARY_RULE(neg, pw::neg(g))
TENET_UNARY_RULE(abs, pw::mul(g, pw::un<prim::sign_>(x)))
TENET_UNARY_RULE(exp, pw::mul(g, y))
TENET_UNARY_RULE(exp2, pw::mul(g, pw::mul(y, pw::c<T>(std::numbers::ln2))))
TENET_UNARY_RULE(expm1, pw::mul(g, pw::add(y, pw::c<T>(1))))
TENET_UNARY_RULE(log, pw::div(g, x))
TENET_UNARY_RULE(log2, pw::div(g, pw::mul(x, pw::c<T>(std::numbers::ln2))))
TENET_UNARY_RULE(log1p, pw::div(g, pw::add(x, pw::c<T>(1))))
TENET_UNARY_RULE(sqrt, pw::div(g, pw::mul(y, pw::c<T>(2))))
TENET_UNARY_RULE(rsqrt, pw::mul(pw::mul(g, pw::c<T>(-0.5)), pw::mul(y, pw::mul(y, y))))
TENET_UNARY_RULE(sin, pw::mul(g, pw::un<prim::cos_>(x)))
TENET_UNARY_RULE(cos, pw::mul(g, pw::neg(pw::un<prim::sin_>(x))))
TENET_UNARY_RULE(tan, pw::mul(g, pw::add(pw::c<T>(1), pw::mul(y, y))))
TENET_UNARY_RULE(tanh, pw::mul(g, pw::sub(pw::c<T>(1), pw::mul(y, y))))
TENET_UNARY_RULE(erf, pw::mul(g, pw::mul(pw::c<T>(std::numbers::inv_sqrtpi * 2),
                                         pw::un<prim::exp_>(pw::neg(pw::mul(x, x))))))
TENET_UNARY_RULE(reciprocal, pw::mul(pw::neg(g), pw::mul(y, y)))
// piecewise constant: zero gradient (PyTorch returns zeros, not None)
TENET_UNARY_RULE(floor, pw::mul(g, pw::c<T>(0)))
TENET_UNARY_RULE(ceil, pw::mul(g, pw::c<T>(0)))
TENET_UNARY_RULE(round, pw::mul(g, pw::c<T>(0)))
TENET_UNARY_RULE(trunc, pw::mul(g, pw::c<T>(0)))
TENET_UNARY_RULE(sign, pw::mul(g, pw::c<T>(0)))
#undef TENET_UNARY_RULE

// ---------------------------------------------------------------------------------------------
// binary: the partial derivatives applied to g, one per operand (`da`, `db`); forward mode's
// tangent is da(ta) + db(tb).

template <class M, class Bias, class GV>
bool linear_backward_fused(const M& mm, const Bias& bias, const GV& gv);  // (prims/reduce_rules.hpp)

/// The VJP and JVP of a binary pointwise op, from its rules' `da` and `db`.
template <class Op>
struct binary_pointwise_rule {
  static constexpr bool binary_pointwise = true;
  static constexpr bool reads_operands = true;
  /// Whether an operand's own partial reads it (false: only the other operand's gradient does, so
  /// where that one needs none the operand is not read, nor checked for in-place writes, nor saved
  /// by PyTorch): an entry says so where false (mul: both; div: the numerator).
  static constexpr bool da_reads_a = true, db_reads_b = true;
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    using T = value_type_of<E>;
    const auto& a = std::get<0>(e.children);
    const auto& b = std::get<1>(e.children);
    // an operand no gradient reads is not checked (nor saved by PyTorch)
    const auto av = [&] {
      const unread_scope unread(!rules<Op>::da_reads_a && !needs_grad(b));
      return forward_value(a);
    }();
    const auto bv = [&] {
      const unread_scope unread(!rules<Op>::db_reads_b && !needs_grad(a));
      return forward_value(b);
    }();
    const auto y = make_node(e.op, av, bv);
    if (needs_grad(a)) backprop(a, rules<Op>::template da<T>(av, bv, y, g));
    if (needs_grad(b)) backprop(b, rules<Op>::template db<T>(av, bv, y, g));
  }
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    using T = value_type_of<E>;
    constexpr std::size_t r = rank_of<E>;
    // only the operands with a tangent contribute (a constant's zero tangent times the partial
    // derivative would be 0 * inf = NaN where that is infinite: x * 2 at x = inf), as PyTorch
    // skips undefined tangents
    const auto& x = std::get<0>(e.children);
    const auto& b = std::get<1>(e.children);
    using X = std::remove_cvref_t<decltype(x)>;
    using B = std::remove_cvref_t<decltype(b)>;
    const auto av = forward_value(x);
    const auto bv = forward_value(b);
    const auto y = make_node(e.op, av, bv);
    auto from_a = [&] { return rules<Op>::template da<T>(av, bv, y, tangent(x, ctx)); };
    auto from_b = [&] { return rules<Op>::template db<T>(av, bv, y, tangent(b, ctx)); };
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
  }
};

/// What the walks pass for the operands and output of a prim whose partials read none (add, sub):
/// no forward value is computed (that would recompute a GEMM under a bias add), and one partial's
/// instantiation serves every node with the same gradient type.
struct unread_operand {};

/// add and sub: linear, so their partials read neither operand nor the output.
template <class Op>
struct linear_binary_rule : binary_pointwise_rule<Op> {
  static constexpr bool reads_operands = false;
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    using T = value_type_of<E>;
    const auto& a = std::get<0>(e.children);
    const auto& b = std::get<1>(e.children);
    constexpr unread_operand u{};
    if (needs_grad(a)) backprop(a, rules<Op>::template da<T>(u, u, u, g));
    if (needs_grad(b)) backprop(b, rules<Op>::template db<T>(u, u, u, g));
  }
};

#define TENET_PARTIALS(DA, DB)                                         \
  template <class T, class A, class B, class Y, class G>               \
  static auto da(const A& a, const B& b, const Y& y, const G& g) {     \
    (void)a, (void)b, (void)y;                                         \
    return DA;                                                         \
  }                                                                    \
  template <class T, class A, class B, class Y, class G>               \
  static auto db(const A& a, const B& b, const Y& y, const G& g) {     \
    (void)a, (void)b, (void)y;                                         \
    return DB;                                                         \
  }

template <class E>
inline constexpr bool is_matmul_node_v = false;
template <class A, class B>
inline constexpr bool is_matmul_node_v<tenet::node<prim::matmul_, A, B>> = true;

template <>
struct rules<prim::add_> : linear_binary_rule<prim::add_> {
  TENET_PARTIALS(g, g)
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    // linear + bias on a device with a bias-gradient GEMM epilogue: one GEMM for w and b
    const auto& a = std::get<0>(e.children);
    if constexpr (is_matmul_node_v<std::remove_cvref_t<decltype(a)>>) {
      const auto& b = std::get<1>(e.children);
      using B = std::remove_cvref_t<decltype(b)>;
      if constexpr (TensorType<B> && rank_of<B> == 1)
        if (needs_grad(a) && linear_backward_fused(a, b, exact(g, e.sizes()))) return;
    }
    // (linear_binary_rule's, written out: one function instantiation fewer per add node type)
    using T = value_type_of<E>;
    const auto& b = std::get<1>(e.children);
    constexpr unread_operand u{};
    if (needs_grad(a)) backprop(a, da<T>(u, u, u, g));
    if (needs_grad(b)) backprop(b, db<T>(u, u, u, g));
  }
};
template <>
struct rules<prim::sub_> : linear_binary_rule<prim::sub_> {
  TENET_PARTIALS(g, pw::neg(g))
};
template <>
struct rules<prim::mul_> : binary_pointwise_rule<prim::mul_> {
  TENET_PARTIALS(pw::mul(g, b), pw::mul(g, a))
  static constexpr bool da_reads_a = false, db_reads_b = false;  // each reads only the other operand
};
template <>
struct rules<prim::div_> : binary_pointwise_rule<prim::div_> {
  // the divisor's: -g (a / b) / b, as PyTorch (a / (b b) is 0 / 0 where b b underflows)
  TENET_PARTIALS(pw::div(g, b), pw::mul(pw::neg(g), pw::div(pw::div(a, b), b)))
  static constexpr bool da_reads_a = false;  // the numerator is read only for the divisor's gradient
};
template <>
struct rules<prim::remainder_> : binary_pointwise_rule<prim::remainder_> {
  TENET_PARTIALS(g, pw::mul(pw::neg(g), pw::un<prim::floor_>(pw::div(a, b))))
};
template <>
struct rules<prim::fmod_> : binary_pointwise_rule<prim::fmod_> {
  TENET_PARTIALS(g, pw::mul(pw::neg(g), pw::un<prim::trunc_>(pw::div(a, b))))
};
template <>
struct rules<prim::pow_> : binary_pointwise_rule<prim::pow_> {
  // base: where(b == 0, 0, g * b * a^(b-1)); exponent: where(a == 0 & b >= 0, 0, g * y * log(a))
  TENET_PARTIALS(pw::where(pw::eq(b, pw::c<T>(0)), pw::c<T>(0),
                           pw::mul(pw::mul(g, b), pw::pow(a, pw::sub(b, pw::c<T>(1))))),
                 pw::where(pw::both(pw::eq(a, pw::c<T>(0)), pw::ge(b, pw::c<T>(0))), pw::c<T>(0),
                           pw::mul(pw::mul(g, y), pw::un<prim::log_>(a))))
};

/// maximum/minimum of two tensors: a tie splits the gradient evenly (torch.maximum). Against a
/// constant (a scalar leaf: relu = maximum(x, 0), hardtanh, relu6) the tensor gets nothing at the
/// tie, as PyTorch's relu'(0) = 0 and hardtanh's bounds (torch.clamp, which gives 1 at its bounds,
/// is the one op this does not match there).
template <class A, class B, class G, class Win, class Lose>
auto extreme_grad(const A& a, const B& b, const G& g, const Win& wins, const Lose& loses) {
  using T = value_type_of<G>;
  if constexpr (ScalarLeaf<B>)
    return pw::where(wins, g, pw::c<T>(0));
  else
    return pw::where(pw::eq(a, b), pw::mul(g, pw::c<T>(0.5)), pw::where(loses, pw::c<T>(0), g));
}
/// Against a constant c, x wins exactly where the output is on its side of c, so x's gradient can
/// be read from the output (`from_output`: the forward's saved output, a GEMM epilogue's result
/// whose input was never stored) instead of recomputing x. The eager VJP does so when the forward
/// saved the output; the fused backward's regions do (when fuse_relu_masks) from the output's
/// value.
template <class Op>
struct extreme_rule : binary_pointwise_rule<Op> {
  static constexpr bool from_output_against_constant = true;
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    using T = value_type_of<E>;
    const auto& a = std::get<0>(e.children);
    const auto& b = std::get<1>(e.children);
    if constexpr (ScalarLeaf<std::remove_cvref_t<decltype(b)>>) {
      if (auto y = saved_value(e)) {
        if (needs_grad(a)) backprop(a, rules<Op>::template from_output<T>(*y, b, g));
        return;
      }
    }
    binary_pointwise_rule<Op>::vjp(e, g);
  }
};
template <>
struct rules<prim::maximum_> : extreme_rule<prim::maximum_> {
  TENET_PARTIALS(extreme_grad(a, b, g, pw::gt(a, b), pw::lt(a, b)), extreme_grad(b, a, g, pw::gt(b, a), pw::lt(b, a)))
  template <class T, class Y, class C, class G>
  static auto from_output(const Y& y, const C& c, const G& g) {
    return pw::where(pw::gt(y, c), g, pw::c<T>(0));
  }
};
template <>
struct rules<prim::minimum_> : extreme_rule<prim::minimum_> {
  TENET_PARTIALS(extreme_grad(a, b, g, pw::lt(a, b), pw::gt(a, b)), extreme_grad(b, a, g, pw::lt(b, a), pw::gt(b, a)))
  template <class T, class Y, class C, class G>
  static auto from_output(const Y& y, const C& c, const G& g) {
    return pw::where(pw::lt(y, c), g, pw::c<T>(0));
  }
};

/// atan2's partial derivatives b / (a^2 + b^2) and -a / (a^2 + b^2), with the reciprocal taken as 0
/// where a^2 + b^2 is 0 (PyTorch's mask: atan2'(0, 0) is 0, not 0 * inf = NaN).
template <class T, class A, class B>
auto atan2_recip(const A& a, const B& b) {
  const auto d = pw::add(pw::mul(a, a), pw::mul(b, b));
  return pw::where(pw::eq(d, pw::c<T>(0)), pw::c<T>(0), pw::div(pw::c<T>(1), d));
}
template <>
struct rules<prim::atan2_> : binary_pointwise_rule<prim::atan2_> {
  TENET_PARTIALS(pw::mul(pw::mul(g, b), atan2_recip<T>(a, b)), pw::mul(pw::mul(g, pw::neg(a)), atan2_recip<T>(a, b)))
};
#undef TENET_PARTIALS

// ---------------------------------------------------------------------------------------------
// where and cast

template <>
struct rules<prim::where_> {
  static constexpr bool selects = true;
  /// The gradient of the branch taken where c is true (a), of the one taken where it is false (b).
  template <class T, class C, class G>
  static auto if_true(const C& c, const G& g) {
    return pw::where(c, g, pw::c<T>(0));
  }
  template <class T, class C, class G>
  static auto if_false(const C& c, const G& g) {
    return pw::where(c, pw::c<T>(0), g);
  }
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    using T = value_type_of<E>;
    const auto c = forward_value(std::get<0>(e.children));
    backprop(std::get<1>(e.children), if_true<T>(c, g));
    backprop(std::get<2>(e.children), if_false<T>(c, g));
  }
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    return pw::where(forward_value(std::get<0>(e.children)), tangent(std::get<1>(e.children), ctx),
                     tangent(std::get<2>(e.children), ctx));
  }
};

template <class To>
struct rules<prim::convert_element_type_<To>> {
  static constexpr bool casts = true;
  /// The gradient of the input (dtype From): the output's cast back.
  template <class From, class G>
  static auto back(const G& g) {
    return pw::cast<From>(g);
  }
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    using From = value_type_of<decltype(x)>;
    if constexpr (is_autograd_dtype<From>) backprop(x, back<From>(g));
  }
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    using T = value_type_of<E>;
    const auto& x = std::get<0>(e.children);
    if constexpr (is_autograd_dtype<value_type_of<decltype(x)>>)
      return value(pw::cast<T>(tangent(x, ctx)));
    else
      return zeros_of<T, rank_of<E>>(e.sizes());
  }
};

}  // namespace tenet::detail::ag
