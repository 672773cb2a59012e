#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Recording: an evaluated expression (`Tensor t = expr;`, eval(expr)) with a tracked tensor leaf,
// evaluated while grad mode is on, becomes one node of the graph. The node keeps the expression
// (its leaves are tensor handles: the saved inputs) decomposed into prims; its backward is
// backprop() over that tree (vjp.hpp, reading the rule table: prims/rule_table.hpp), whose gradient expressions are evaluated by the same CPU
// path as any expression. Nothing is recorded, allocated or visited at run time when no leaf type
// can take a gradient; otherwise the cost without a tracked leaf is one pass over the leaves.
#include <any>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <tenet/autograd/graph.hpp>
#include <tenet/autograd/jvp.hpp>
#include <tenet/autograd/vjp.hpp>
#include <tenet/decomp/decompose.hpp>
#include <tenet/prims/rules.hpp>  // the rule table's entries, before any rule is looked up

namespace tenet::detail::ag {

/// The backend whose decomposition autograd differentiates: every composite is decomposed into
/// prims (the reference decomposition), so one rule per prim covers every op, except the
/// composites with rules of their own (softmax, log_softmax: prims/composite_rules.hpp; conv2d,
/// max_pool2d: conv.hpp) or a derivative of their own (`has_derivative`: asin, sinh, softplus, ...),
/// kept whole.
struct autograd_backend {
  static constexpr const char* name() { return "autograd"; }
};
}  // namespace tenet::detail::ag
namespace tenet::detail {
template <class Op, class C>
  requires requires { Op::has_derivative; }
inline constexpr bool runs_natively<ag::autograd_backend, Op, C> = true;
template <std::int64_t D, class C>
inline constexpr bool runs_natively<ag::autograd_backend, aten::softmax<D>, C> = true;
template <std::int64_t D, class C>
inline constexpr bool runs_natively<ag::autograd_backend, aten::log_softmax<D>, C> = true;
// layer_norm and rms_norm: the forward runs the backend's row kernel, the backward torch's
// formulas (their rule: prims/composite_rules.hpp)
template <std::size_t K, bool Rms, class... C>
inline constexpr bool runs_natively<ag::autograd_backend, aten::norm_last<K, Rms>, C...> = true;
template <std::size_t K, bool Rms, class... C>
inline constexpr bool runs_natively<ag::autograd_backend, aten::norm_last_grad<K, Rms>, C...> = true;
// cross_entropy over rows and its gradient: the backend's row kernels, differentiated by their rules
template <class... C>
inline constexpr bool runs_natively<ag::autograd_backend, aten::cross_entropy_rows, C...> = true;
template <class... C>
inline constexpr bool runs_natively<ag::autograd_backend, aten::cross_entropy_rows_grad, C...> = true;
}  // namespace tenet::detail
namespace tenet::detail::ag {

// has_float_tensor_leaf<E>(): vjp.hpp (backward_value uses it too)

/// What the forward evaluation of a recorded expression computed: every kernel's result keyed by
/// its subtree (a cse_session's table), and the storages the keys name (kept alive so that no
/// other tensor can take their addresses). The backward reads its forward values from here
/// (forward_value in vjp.hpp) instead of recomputing them: these are the saved activations.
struct saved_forward {
  cse_table table;
  std::vector<std::shared_ptr<const void>> retained;
};

template <class D, class T, std::size_t R>
struct expr_node final : grad_node {
  std::optional<D> expr;
  std::shared_ptr<const saved_forward> saved;
  /// The versions of the leaves' storages and of the output's when it was recorded: the backward
  /// refuses to read one written in place since (check_version, graph.hpp).
  saved_versions versions;
  expr_node(D d, std::shared_ptr<const saved_forward> s) : expr(std::move(d)), saved(std::move(s)) {}
  void apply(const std::any& g) override {
    const value_memo_scope values;
    const saved_values_scope forward(saved ? &saved->table : nullptr);
    const saved_versions_scope checked(&versions);
    backprop_root(*expr, std::any_cast<const grad_tensor<T, R>&>(g));
  }
  void release() override {
    expr.reset();
    saved.reset();
    versions.at.clear();
  }
  std::string name() const override { return "expression"; }
  std::any tangent(jvp_context& ctx) const override {
    if (!expr)
      throw value_error("tenet: jvp: the graph was freed by a backward without retain_graph");
    const value_memo_scope values;
    const saved_values_scope forward(saved ? &saved->table : nullptr);
    const saved_versions_scope checked(&versions);
    return std::any(grad_tensor<T, R>(exact(ag::tangent(*expr, ctx), expr->sizes())));
  }
};

/// Makes `result` (the value of e) the output of a new node whose backward is e's VJP. The versions
/// of e's leaves are recorded now, and, with saved values (which hold the output), the output's.
template <class E, class T, class S>
void attach(const E& e, Tensor<T, S>& result, std::shared_ptr<const saved_forward> saved = nullptr) {
  auto d = decompose<autograd_backend>(e);
  const bool output_saved = saved != nullptr;
  auto n = std::make_shared<expr_node<decltype(d), T, S::rank>>(std::move(d), std::move(saved));
  tracked_inputs v{n->inputs, &n->versions};
  for_each_tensor_leaf(e, v);
  if (output_saved) n->versions.add(result);
  auto m = std::make_shared<meta>();
  m->grad_fn = std::move(n);
  result.set_autograd_meta(std::move(m));
}

/// compute() evaluates e; when e is recorded it runs with grad mode off (nothing inside records)
/// and its result gets the node.
template <class E, class F>
auto tracked(const E& e, F&& compute) {
  if constexpr (!has_float_tensor_leaf<E>() || !is_autograd_dtype<value_type_of<E>>) {
    return compute();
  } else {
    if (!grad_mode() || !needs_grad(e)) return compute();
    decltype(compute()) r;
    auto saved = std::make_shared<saved_forward>();
    {
      const grad_mode_guard off(false);
      cse_session session;  // every kernel's result, keyed, for the backward
      r = compute();
      saved->table = std::move(session.table);
      saved->retained = std::move(session.retained);
      session.table.clear();
    }
    attach(e, r, std::move(saved));
    return r;
  }
}

/// In-place writes are not recorded: writing into a tensor that requires grad while grad mode is
/// on is an error (as PyTorch's for a leaf); under no_grad (optimizer steps) it is allowed.
template <class T, class S>
void check_in_place(const Tensor<T, S>& dst, const char* what) {
  if (grad_mode() && is_tracked(dst))
    throw value_error(std::string("tenet: ") + what +
                      ": in-place write into a tensor that requires grad while grad mode is on (tenet does not "
                      "record in-place ops); write under tenet::no_grad, or compute out of place");
}

}  // namespace tenet::detail::ag
