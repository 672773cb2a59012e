#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Fused gradient kernels for a compiled training step (tenet::compile + backward_of).
//
// Eager autograd (vjp.hpp) evaluates the gradient at every prim node: the backward of
// gelu(x W^T + b) is one kernel per prim of gelu's decomposition plus the bias sum, each writing
// its intermediate. In a compiled step the loss tree is rewritten (wrap_regions) so that every
// maximal pointwise region (a tree of prims whose rules have a pointwise form in the rule table,
// prims/rule_table.hpp: the unary `derivative`s, the binary `da`/`db` of add, sub, mul, div, pow,
// ..., where, casts) sits under one `fused_region` node. Its VJP (region_backprop):
//
//   1. the region's frontier (its inputs that are not pointwise: tensors, GEMMs, reductions,
//      softmax, views) is read as forward values: the forward's saved value or one recomputation
//      (the values inside the region are recomputed inside the loop: rematerialization);
//   2. reverse mode runs over the region symbolically: the gradient of each frontier position is an
//      unevaluated expression of the upstream gradient and the frontier values;
//   3. positions that name the same input (copies of one subtree: gelu reads its input twice) are
//      summed inside one expression, in the order eager autograd accumulates them;
//   4. each input's gradient is one pointwise kernel; when an input the region broadcast along its
//      leading dims (a bias) gets the same gradient expression as a full-size input, one
//      multi-output kernel writes the full gradient and sums its rows into the bias gradient
//      (run_pointwise_rowsum), so the backward of bias + gelu is ONE kernel.
//
// The wrapper is invisible to the forward (decompose removes it; CSE keys skip it) and exists only
// in trees run_loss_backward builds, so eager programs instantiate none of this.
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <tenet/autograd/jvp.hpp>
#include <tenet/autograd/record.hpp>
#include <tenet/autograd/vjp.hpp>
#include <tenet/decomp/composite.hpp>  // same_as_input
#include <tenet/expr/node.hpp>
#include <tenet/expr/shared.hpp>
#include <tenet/prims/rules.hpp>

namespace tenet::detail::ag {

/// Whether compiled training steps fuse their backward's pointwise regions (default on;
/// tenet::detail::ag::fused_backward_scope(false) runs the per-prim backward, for comparison).
inline bool& fused_backward_enabled() {
  thread_local bool on = true;  // per thread, as grad mode and the other mode flags
  return on;
}
struct fused_backward_scope {
  bool previous;
  explicit fused_backward_scope(bool on) : previous(fused_backward_enabled()) { fused_backward_enabled() = on; }
  ~fused_backward_scope() { fused_backward_enabled() = previous; }
  fused_backward_scope(const fused_backward_scope&) = delete;
  fused_backward_scope& operator=(const fused_backward_scope&) = delete;
};

/// The marker of a pointwise region whose backward runs fused (not a prim: decompose removes it).
struct fused_region : aten::same_as_input {
  static constexpr bool cse_transparent = true;  // expr/cse.hpp keys its child
  static constexpr std::string_view name = "fused_backward_region";
  template <class X>
  auto decompose(const X& x) const {
    return x;
  }
};

}  // namespace tenet::detail::ag

namespace tenet::detail {
template <class C>
inline constexpr bool runs_natively<ag::autograd_backend, ag::fused_region, C> = true;
}  // namespace tenet::detail

namespace tenet::detail::ag {

/// A prim node the region walks through: an op whose rules have a pointwise form (the rule table,
/// prims/rule_table.hpp), of a differentiable dtype.
#ifndef TENET_FUSE_RELU_MASKS
#define TENET_FUSE_RELU_MASKS 0
#endif
/// maximum/minimum against a constant (relu, hardtanh) inside regions, their mask read from the
/// forward's output (so a bias's sum joins the mask's kernel): off by default until its gradients
/// are tested against eager's; relu keeps its eager rule and the region starts below it.
inline constexpr bool fuse_relu_masks = TENET_FUSE_RELU_MASKS;

template <class E>
constexpr bool in_region() {
  if constexpr (!Node<E>) {
    return false;
  } else {
    using Op = typename E::op_type;
    if constexpr (!is_autograd_dtype<value_type_of<E>>) {
      return false;
    } else if constexpr (requires { rules<Op>::unary_pointwise; }) {
      // a composite with its own derivative (composite_rules.hpp) joins a region only when the fused loop runs
      // it (a pointwise composite's `apply`: sigmoid, silu); the others (asin, softplus, ...) are
      // frontier inputs, differentiated by their eager rule
      if constexpr (Op::is_prim) {
        return true;
      } else if constexpr (requires { typename Op::group; }) {
        return std::is_same_v<typename Op::group, prim::pointwise_composite_group>;
      } else {
        return false;
      }
    } else if constexpr (requires { rules<Op>::binary_pointwise; }) {
      using B = std::remove_cvref_t<std::tuple_element_t<1, std::remove_cvref_t<decltype(std::declval<E>().children)>>>;
      return !(ScalarLeaf<B> && requires { rules<Op>::from_output_against_constant; }) ||
             fuse_relu_masks;
    } else if constexpr (requires { rules<Op>::selects; }) {  // where
      return true;
    } else if constexpr (requires { rules<Op>::casts; }) {  // convert_element_type
      using X = std::remove_cvref_t<std::tuple_element_t<0, std::remove_cvref_t<decltype(std::declval<E>().children)>>>;
      return is_autograd_dtype<value_type_of<X>>;
    } else {
      return false;
    }
  }
}
template <class E>
constexpr bool in_region_shared() {
  if constexpr (SharedNode<E>)
    return in_region<std::remove_cvref_t<decltype(std::declval<E>().expr)>>();
  else
    return in_region<E>();
}

template <class E>
auto wrap_regions(const E& e);

/// Inside a region: region nodes (and shared copies of them) kept, every frontier subtree wrapped.
template <class E>
auto wrap_inside(const E& e) {
  if constexpr (SharedNode<E>) {
    if constexpr (in_region_shared<E>())
      return with_expr(e, wrap_inside(e.expr));
    else
      return with_expr(e, wrap_regions(e.expr));
  } else if constexpr (in_region<E>()) {
    return detail::apply_tuple([&](const auto&... c) { return make_node(e.op, wrap_inside(c)...); }, e.children);
  } else {
    return wrap_regions(e);
  }
}

/// e with every maximal pointwise region under a fused_region node (a decomposed autograd tree).
template <class E>
auto wrap_regions(const E& e) {
  if constexpr (SharedNode<E>) {
    return with_expr(e, wrap_regions(e.expr));
  } else if constexpr (in_region<E>()) {
    return make_node(fused_region{}, wrap_inside(e));
  } else if constexpr (Node<E>) {
    return detail::apply_tuple([&](const auto&... c) { return make_node(e.op, wrap_regions(c)...); }, e.children);
  } else {
    return e;
  }
}

// ---------------------------------------------------------------------------------------------
// the region's values and symbolic gradients

/// The region's value as an expression over its frontier's forward values (recomputed in the loop).
template <class E>
auto region_value(const E& e) {
  if constexpr (ScalarLeaf<E>) {
    return e;
  } else if constexpr (SharedNode<E>) {
    if constexpr (in_region_shared<E>())
      return region_value(e.expr);
    else
      return forward_value(e);
  } else if constexpr (in_region<E>()) {
    return detail::apply_tuple([&](const auto&... c) { return make_node(e.op, region_value(c)...); }, e.children);
  } else {
    return forward_value(e);
  }
}

/// The gradient expression of one frontier position.
template <class F, class X>
struct frontier_grad {
  const F* input;
  X grad;
};

/// Reverse mode over the region, unevaluated: a tuple of frontier_grad, one per differentiable
/// frontier position, in the order eager backprop visits them.
template <class E, class G>
auto region_grads(const E& e, const G& g) {
  using T = value_type_of<G>;
  if constexpr (ScalarLeaf<E>) {
    return std::tuple<>{};
  } else if constexpr (SharedNode<E> && in_region_shared<E>()) {
    return region_grads(e.expr, g);
  } else if constexpr (!in_region<E>()) {
    if constexpr (is_autograd_dtype<value_type_of<E>>)
      return std::make_tuple(frontier_grad<E, G>{&e, g});
    else
      return std::tuple<>{};
  } else {
    using Op = typename E::op_type;
    const auto& x = std::get<0>(e.children);
    // each prim's gradient is its rules' pointwise form (prims/*_rules.hpp), left unevaluated
    if constexpr (requires { rules<Op>::unary_pointwise; }) {
      const auto xv = region_value(x);
      return region_grads(x, rules<Op>::template derivative<T>(xv, make_node(e.op, xv), g));
    } else if constexpr (requires { rules<Op>::binary_pointwise; }) {
      const auto& b = std::get<1>(e.children);
      using B = std::remove_cvref_t<decltype(b)>;
      if constexpr (!rules<Op>::reads_operands) {  // add, sub: no operand value is read
        constexpr unread_operand u{};
        return std::tuple_cat(region_grads(x, rules<Op>::template da<T>(u, u, u, g)),
                              region_grads(b, rules<Op>::template db<T>(u, u, u, g)));
      } else if constexpr (ScalarLeaf<B> && requires { rules<Op>::from_output_against_constant; }) {
        // against a constant (relu, hardtanh: maximum/minimum; fuse_relu_masks): the mask reads
        // the forward's output (saved by a GEMM epilogue whose input was never stored) instead of
        // recomputing the input; relu'(0) = 0 as in eager autograd
        return region_grads(x, rules<Op>::template from_output<T>(forward_value(e), b, g));
      } else {
        const auto av = region_value(x);
        const auto bv = region_value(b);
        const auto y = make_node(e.op, av, bv);
        return std::tuple_cat(region_grads(x, rules<Op>::template da<T>(av, bv, y, g)),
                              region_grads(b, rules<Op>::template db<T>(av, bv, y, g)));
      }
    } else if constexpr (requires { rules<Op>::selects; }) {  // where
      const auto c = region_value(x);
      return std::tuple_cat(region_grads(std::get<1>(e.children), rules<Op>::template if_true<T>(c, g)),
                            region_grads(std::get<2>(e.children), rules<Op>::template if_false<T>(c, g)));
    } else {  // convert_element_type between float dtypes
      using From = value_type_of<std::remove_cvref_t<decltype(x)>>;
      return region_grads(x, rules<Op>::template back<From>(g));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// the multi-output kernel

/// out = x (a fresh contiguous tensor of x's sizes), and rowsum[j] = the sum of out over every dim
/// but the last (a bias gradient), in one pass. The kernel is the CPU backend's
/// (backend/cpu/fused_backward.hpp, which tenet/compile.hpp includes): the scheduler declares
/// what it needs, the backend defines it.
template <class X>
grad_tensor<value_type_of<X>, rank_of<X>> run_pointwise_rowsum(const X& x, std::vector<double>& rowsum);

// ---------------------------------------------------------------------------------------------
// the region's VJP

/// One input's gradient, ready to run (type-erased over the expression).
template <class T>
struct region_output {
  std::optional<std::string> key;  // the gradient expression's CSE key (nullopt: not comparable)
  bool full = false;               // the input has the expression's sizes
  bool bias_like = false;          // the input is the expression's last dim, broadcast over the rest
  std::int64_t last = 0;           // the expression's last extent
  /// full inputs: evaluate and backprop; with `also`, the same kernel sums the rows into `also`.
  std::function<void(const std::function<void(const std::vector<double>&)>* also)> run;
  /// bias-like inputs: backprop the row sums (as the input's sizes)
  std::function<void(const std::vector<double>&)> take_rowsum;
};

template <class T, class F, class X>
region_output<T> make_output(const F& input, const X& gx) {
  region_output<T> o;
  constexpr std::size_t R = rank_of<X>, r = rank_of<F>;
  const auto xs = gx.sizes();
  const auto fs = input.sizes();
  // a bare tensor (add's gradient passed through) needs no kernel for its full-size input: its
  // bias takes the eager sum (reduce_to), not a copy of it
  if constexpr (!TensorType<X>) o.key = cse_key(gx);
  if constexpr (r == R) o.full = fs == xs;
  if constexpr (R >= 1 && r >= 1 && r <= R) {
    bool b = fs[r - 1] == xs[R - 1];
    for (std::size_t d = 0; d + 1 < r; ++d) b = b && fs[d] == 1;
    o.bias_like = b && !o.full;
    o.last = xs[R - 1];
  }
  const F* in = &input;
  o.run = [in, gx](const std::function<void(const std::vector<double>&)>* also) {
    if constexpr (R >= 1) {
      if (also) {
        std::vector<double> sums;
        auto v = run_pointwise_rowsum(gx, sums);
        backprop(*in, v);
        (*also)(sums);
        return;
      }
    }
    backprop(*in, gx);
  };
  if constexpr (r >= 1) {
    o.take_rowsum = [in](const std::vector<double>& sums) {
      grad_tensor<T, r> gb(in->sizes());
      T* p = gb.data();
      for (std::size_t j = 0; j < sums.size(); ++j) p[j] = static_cast<T>(sums[j]);
      backprop(*in, gb);
    };
  }
  return o;
}

template <class P>
using input_of = std::remove_cvref_t<decltype(*std::declval<P>().input)>;

/// The positions after I whose input has I's type, as an index_sequence.
template <class Tup, std::size_t I>
struct same_type_after {
  static constexpr std::size_t n = std::tuple_size_v<Tup>;
  template <std::size_t K>
  static constexpr bool match = K > I && std::is_same_v<input_of<std::tuple_element_t<I, Tup>>,
                                                       input_of<std::tuple_element_t<K, Tup>>>;
  template <std::size_t... K>
  static constexpr std::size_t count(std::index_sequence<K...>) {
    return (std::size_t{0} + ... + std::size_t{match<K>});
  }
  static constexpr std::size_t cnt = count(std::make_index_sequence<n>{});
  template <std::size_t... K>
  static constexpr std::array<std::size_t, cnt> list(std::index_sequence<K...>) {
    std::array<std::size_t, cnt> l{};
    std::size_t at = 0;
    ((match<K> ? (void)(l[at++] = K) : (void)0), ...);
    return l;
  }
  static constexpr std::array<std::size_t, cnt> items = list(std::make_index_sequence<n>{});
  template <std::size_t... A>
  static auto seq(std::index_sequence<A...>) -> std::index_sequence<items[A]...>;
  using type = decltype(seq(std::make_index_sequence<cnt>{}));
};

template <std::size_t... J, std::size_t N>
bool all_match(std::index_sequence<J...>, const std::array<bool, N>& done,
               const std::array<std::optional<std::string>, N>& keys, std::size_t i) {
  return keys[i].has_value() && ((!done[J] && keys[J] == keys[i]) && ...);
}
template <std::size_t... J, std::size_t N>
void mark_done(std::index_sequence<J...>, std::array<bool, N>& done) {
  ((done[J] = true), ...);
}

/// g + the gradients of positions J... (eager order: each added to the running sum).
template <class Tup, class G>
auto add_positions(const Tup&, const G& g, std::index_sequence<>) {
  return g;
}
template <class Tup, class G, std::size_t J, std::size_t... K>
auto add_positions(const Tup& ps, const G& g, std::index_sequence<J, K...>) {
  return add_positions(ps, pw::add(g, std::get<J>(ps).grad), std::index_sequence<K...>{});
}

/// The output of position I (unless an earlier position took it): summed with every later position
/// of the same input when all of them name it.
template <std::size_t I, class Tup, std::size_t N, class T>
void collect_position(const Tup& ps, std::array<bool, N>& done, const std::array<std::optional<std::string>, N>& keys,
                      std::vector<region_output<T>>& outs) {
  if (done[I]) return;
  using later = typename same_type_after<Tup, I>::type;
  if constexpr (later::size() > 0) {
    if (all_match(later{}, done, keys, I)) {
      mark_done(later{}, done);
      done[I] = true;
      outs.push_back(make_output<T>(*std::get<I>(ps).input, add_positions(ps, std::get<I>(ps).grad, later{})));
      return;
    }
  }
  done[I] = true;
  outs.push_back(make_output<T>(*std::get<I>(ps).input, std::get<I>(ps).grad));
}

/// The fused VJP of a pointwise region e (fused_region's child) with upstream gradient g.
template <class E, class G>
void region_backprop(const E& e, const G& g) {
  using T = value_type_of<E>;
  const auto ps = region_grads(e, g);
  using Tup = std::remove_cvref_t<decltype(ps)>;
  constexpr std::size_t N = std::tuple_size_v<Tup>;
  if constexpr (N > 0) {
    std::array<bool, N> done{};
    std::array<std::optional<std::string>, N> keys;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((done[I] = !needs_grad(*std::get<I>(ps).input)), ...);
      ((keys[I] = done[I] ? std::nullopt : cse_key(*std::get<I>(ps).input)), ...);
    }(std::make_index_sequence<N>{});
    std::vector<region_output<T>> outs;
    // each input once: the positions naming it (same type, same key) summed in one expression
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (collect_position<I>(ps, done, keys, outs), ...);
    }(std::make_index_sequence<N>{});
    // a bias-like input whose gradient is a full input's: one kernel for both
    std::vector<bool> ran(outs.size(), false);
    for (std::size_t i = 0; i < outs.size(); ++i) {
      if (!outs[i].full || !outs[i].key) continue;
      for (std::size_t k = 0; k < outs.size(); ++k) {
        if (ran[k] || k == i || !outs[k].bias_like || outs[k].key != outs[i].key || !outs[k].take_rowsum) continue;
        ran[i] = ran[k] = true;
        outs[i].run(&outs[k].take_rowsum);
        break;
      }
    }
    for (std::size_t i = 0; i < outs.size(); ++i)
      if (!ran[i]) outs[i].run(nullptr);
  }
}

/// The region marker's entry of the rule table: its VJP is the fused one; its JVP is its child's
/// tangent (compiled steps never ask, but the node's virtual tangent is compiled).
template <>
struct rules<fused_region> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    region_backprop(std::get<0>(e.children), exact(g, e.sizes()));
  }
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    return tangent(std::get<0>(e.children), ctx);
  }
};

}  // namespace tenet::detail::ag
