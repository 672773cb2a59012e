#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Reverse mode over a prim tree (the engine): backprop(e, g) sends the gradient g of expression e
// to the tensor leaves of e, through one rule per prim: rules<Op>::vjp, the rule table of
// prims/rule_table.hpp, whose specializations sit beside the prims (prims/*_rules.hpp; all of them:
// prims/rules.hpp). Forward mode (jvp.hpp) and the compiled backward (schedule/backward_fusion.hpp)
// read the same table. This header holds what the rules are written with: the expression builders
// (pw::), forward values, exact gradients, and the walk.
//
// At each prim node the incoming gradient is evaluated to a tensor of the node's sizes (exact():
// summed over the dims it was broadcast along, since an operand of a broadcasting op receives the
// gradient of the whole result), and the node's children are read as values (forward_value:
// recomputed once per backward from their children's values). A rule's output is therefore an
// expression over tensors and scalars only, and the kernels the backward compiles are one per
// rule, dtype and rank, shared by every expression of a program (a gradient passed down as an
// unevaluated expression would fuse pointwise chains but compile kernels per subexpression).
//
// The rules follow PyTorch's derivatives.yaml where it picks a value at a kink or tie: abs'(0) = 0,
// maximum/minimum/amax/amin split a tie evenly, pow's exponent gets 0 where the base is 0, sqrt'(0)
// is inf, floor/round/sign ... have zero gradient, comparisons and integer outputs none.
#include <algorithm>
#include <any>
#include <cmath>
#include <functional>
#include <map>
#include <typeinfo>
#include <cstdint>
#include <numbers>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <tenet/autograd/graph.hpp>
#include <tenet/expr/node.hpp>
#include <tenet/expr/shared.hpp>
#include <tenet/decomp/prim_list.hpp>
#include <tenet/prims/rule_table.hpp>
#include <tenet/expr/cse.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::ag {

// ---------------------------------------------------------------------------------------------
// building prim expressions (qualified calls: pw::mul, never found by ADL next to tenet::mul)
namespace pw {
template <class T>
scalar<T> c(double v) {
  if constexpr (std::is_arithmetic_v<T>)
    return scalar<T>{static_cast<T>(v)};
  else
    return scalar<T>{T(static_cast<float>(v))};
}
template <class A, class B>
auto add(const A& a, const B& b) { return make_node(prim::add_{}, a, b); }
template <class A, class B>
auto sub(const A& a, const B& b) { return make_node(prim::sub_{}, a, b); }
template <class A, class B>
auto mul(const A& a, const B& b) { return make_node(prim::mul_{}, a, b); }
template <class A, class B>
auto div(const A& a, const B& b) { return make_node(prim::div_{}, a, b); }
template <class A, class B>
auto eq(const A& a, const B& b) { return make_node(prim::eq_{}, a, b); }
template <class A, class B>
auto lt(const A& a, const B& b) { return make_node(prim::lt_{}, a, b); }
template <class A, class B>
auto gt(const A& a, const B& b) { return make_node(prim::gt_{}, a, b); }
template <class A, class B>
auto ge(const A& a, const B& b) { return make_node(prim::ge_{}, a, b); }
template <class A, class B>
auto both(const A& a, const B& b) { return make_node(prim::bitwise_and_{}, a, b); }
template <class C, class A, class B>
auto where(const C& c, const A& a, const B& b) { return make_node(prim::where_{}, c, a, b); }
template <class A>
auto neg(const A& a) { return make_node(prim::neg_{}, a); }
template <class Op, class A>
auto un(const A& a) { return make_node(Op{}, a); }
template <class A, class B>
auto pow(const A& a, const B& b) { return make_node(prim::pow_{}, a, b); }
template <class To, class A>
auto cast(const A& a) {
  if constexpr (std::is_same_v<value_type_of<A>, To>)
    return a;
  else
    return make_node(prim::convert_element_type_<To>{}, a);
}
}  // namespace pw

// ---------------------------------------------------------------------------------------------
// values and exact gradients

/// The value of an expression as a Tensor (a Tensor stays itself).
template <class E>
auto value(const E& e) {
  if constexpr (TensorType<E>)
    return e;
  else
    return backward_value(e);
}

/// The forward values of one node's expression during its backward (or tangent): each prim node
/// of the stored tree is computed at most once, from its children's values, so every kernel the
/// backward instantiates has tensor (or scalar) operands of run-time shape: their number is
/// bounded by the prims, dtypes and ranks, not by the expressions of a program.
using value_memo = std::map<std::pair<const void*, const std::type_info*>, std::any>;
inline value_memo*& current_value_memo() {
  thread_local value_memo* memo = nullptr;
  return memo;
}
class value_memo_scope {
 public:
  value_memo_scope() : previous_(current_value_memo()) { current_value_memo() = &memo_; }
  ~value_memo_scope() { current_value_memo() = previous_; }
  value_memo_scope(const value_memo_scope&) = delete;
  value_memo_scope& operator=(const value_memo_scope&) = delete;

 private:
  value_memo memo_;
  value_memo* previous_;
};

/// The values the forward evaluation of the node being differentiated computed: every kernel's
/// result keyed by its subtree (expr/cse.hpp), saved by tracked() in record.hpp (the saved
/// activations). Inside a cse_session (a compiled training step) the session's table plays this
/// role. Null when there are none.
inline const cse_table*& current_saved_values() {
  thread_local const cse_table* t = nullptr;
  return t;
}
class saved_values_scope {
 public:
  explicit saved_values_scope(const cse_table* t) : previous_(current_saved_values()) { current_saved_values() = t; }
  ~saved_values_scope() { current_saved_values() = previous_; }
  saved_values_scope(const saved_values_scope&) = delete;
  saved_values_scope& operator=(const saved_values_scope&) = delete;

 private:
  const cse_table* previous_;
};

/// The table of the forward values a backward reads: the recorded node's, else the compiled
/// step's session; null when there is none or it is empty.
inline const cse_table* saved_table() {
  const cse_table* t = current_saved_values();
  if (!t)
    if (cse_session* s = cse_session::current()) t = &s->table;
  return t && !t->empty() ? t : nullptr;
}

/// e's value as the forward computed it, when it was a kernel's result there (else nullopt).
template <class E>
std::optional<Tensor<value_type_of<E>, dyn_shape<rank_of<E>>>> saved_value(const E& e) {
  if constexpr (TENET_AUTOGRAD >= 2)
    if (grad_mode()) return std::nullopt;  // create_graph: forward values must be recorded, not saved
  const cse_table* t = saved_table();
  if (!t) return std::nullopt;
  const auto key = cse_key(e);
  if (!key) return std::nullopt;
  const auto it = t->find(*key);
  if (it == t->end()) return std::nullopt;
  // equal keys begin with equal type tags: the stored value has E's result type
  const auto& v = *static_cast<const Tensor<value_type_of<E>, shape_of<E>>*>(it->second.get());
  check_version(v);  // the node's own output, written in place since (a private intermediate: never)
  return Tensor<value_type_of<E>, dyn_shape<rank_of<E>>>(v);
}

/// The value of a subexpression of the stored forward tree: a tensor leaf as a run-time-shaped
/// tensor, a scalar as itself, a node from its children's values (memoized by address), or the
/// forward's own value of it when the forward computed it as a kernel. A tensor read here (a
/// leaf, a saved value) must not have been written in place since the node was recorded
/// (check_version; not checked inside an unread_scope, whose values are not memoized either).
template <class E>
auto forward_value(const E& e) {
  if constexpr (ScalarLeaf<E>) {
    return e;
  } else if constexpr (TensorType<E>) {
    check_version(e);
    return Tensor<value_type_of<E>, dyn_shape<rank_of<E>>>(e);
  } else if constexpr (SharedNode<E>) {
    return forward_value(e.expr);
  } else {
    using R = Tensor<value_type_of<E>, dyn_shape<rank_of<E>>>;
    value_memo* memo = current_value_memo();
    const auto key = std::make_pair(static_cast<const void*>(&e), &typeid(E));
    if (memo) {
      auto it = memo->find(key);
      if (it != memo->end()) return std::any_cast<R>(it->second);
    }
    const bool keep = memo && !version_check().unread;  // an unchecked value is not handed to a reader
    if (auto saved = saved_value(e)) {
      if (keep) memo->emplace(key, *saved);
      return *saved;
    }
    R r = detail::apply_tuple([&](const auto&... c) { return R(backward_value(make_node(e.op, forward_value(c)...))); },
                     e.children);
    if (keep) memo->emplace(key, r);
    return r;
  }
}

/// Calls f on every Tensor leaf of e.
template <class E, class F>
void for_each_tensor_leaf(const E& e, F&& f) {
  if constexpr (TensorType<E>) {
    f(e);
  } else if constexpr (SharedNode<E>) {
    for_each_tensor_leaf(e.expr, f);
  } else if constexpr (Node<E>) {
    detail::apply_tuple([&](const auto&... c) { (for_each_tensor_leaf(c, f), ...); }, e.children);
  }
}

/// for_each_tensor_leaf's visitors are named types, not lambdas: a lambda's type names the function
/// template it is written in, so a lambda visitor instantiates the whole walk again for every root
/// expression, where a named visitor's walk of a subtree is shared by every expression holding it.
/// Whether some leaf is tracked.
struct any_tracked_leaf {
  bool found = false;
  template <class L>
  void operator()(const L& leaf) {
    found = found || is_tracked(leaf);
  }
};
/// Adds each tracked leaf's autograd meta to a node's inputs, once (pass it as an lvalue: one
/// F = tracked_inputs& for the whole walk); with `versions`, records every leaf's storage version
/// there too (the node's saved_versions, graph.hpp).
struct tracked_inputs {
  std::vector<std::shared_ptr<meta>>& inputs;
  saved_versions* versions = nullptr;
  template <class L>
  void operator()(const L& leaf) {
    if (versions) versions->add(leaf);
    if (!is_tracked(leaf)) return;
    const auto& m = leaf.autograd_meta();
    for (const auto& in : inputs)
      if (in == m) return;
    inputs.push_back(m);
  }
};

/// True when some tensor leaf of E has a dtype autograd records (float32, float64).
template <class E>
constexpr bool has_float_tensor_leaf() {
  if constexpr (TensorType<E>) {
    return is_autograd_dtype<value_type_of<E>>;
  } else if constexpr (SharedNode<E>) {
    return has_float_tensor_leaf<decltype(std::declval<E>().expr)>();
  } else if constexpr (Node<E>) {
    return []<class Op, class... C>(std::type_identity<tenet::node<Op, C...>>) {
      return (has_float_tensor_leaf<C>() || ...);
    }(std::type_identity<E>{});
  } else {
    return false;
  }
}

/// True when a gradient must flow into e (some tensor leaf of e is tracked).
template <class E>
bool needs_grad(const E& e) {
  if constexpr (!is_autograd_dtype<value_type_of<E>>) {
    return false;
  } else {
    any_tracked_leaf v;
    for_each_tensor_leaf(e, v);
    return v.found;
  }
}

template <class T>
double to_double(T v) {
  if constexpr (std::is_arithmetic_v<T>)
    return static_cast<double>(v);
  else
    return static_cast<double>(static_cast<float>(v));
}

template <class T, std::size_t Rg, std::size_t R>
struct sum_to_node;

/// g summed over the dims it was broadcast along so that it has sizes `target` (PyTorch's
/// sum_to_size): leading extra dims and dims where target is 1. Under create_graph (grad mode
/// on, g tracked) the sum gets a sum_to_node (its backward: expand back).
template <class T, std::size_t R, class S>
grad_tensor<T, R> reduce_to(const Tensor<T, S>& g, const sizes_t<R>& target) {
  constexpr std::size_t Rg = S::rank;
  static_assert(Rg >= R, "tenet: internal: a gradient of lower rank than its tensor");
  const auto gs = g.sizes();
  constexpr std::size_t lead = Rg - R;
  bool same = Rg == R;
  for (std::size_t d = 0; d < R; ++d) {
    if (gs[d + lead] != target[d] && target[d] != 1)
      throw shape_error("tenet: internal: autograd: a gradient of sizes " + sizes_text(gs) +
                        " does not broadcast onto sizes " + sizes_text(target));
    same = same && gs[d + lead] == target[d];
  }
  if constexpr (Rg == R)
    if (same) return grad_tensor<T, R>(g.template with_layout<dyn_shape<R>>(target, g.strides(), g.offset()));
  // under create_graph the sum gets a sum_to_node (on any device: its backward is an expand)
  auto recorded = [&](grad_tensor<T, R> out) {
    if constexpr (TENET_AUTOGRAD >= 2) {
      if (grad_mode() && is_tracked(g)) {
        auto node = std::make_shared<sum_to_node<T, Rg, R>>();
        node->from = gs;
        node->to = target;
        node->inputs.push_back(g.autograd_meta());
        auto m = std::make_shared<meta>();
        m->grad_fn = std::move(node);
        out.set_autograd_meta(std::move(m));
      }
    }
    return out;
  };
  if (!g.device().is_cpu()) {  // a kernel on g's device (autograd/device.hpp)
    grad_tensor<T, R> out(target, g.device());
    sum_to_on_device<T, Rg, R>(grad_tensor<T, Rg>(g), out);
    return recorded(std::move(out));
  }
  grad_tensor<T, R> out(target);
  const auto cs = contiguous_strides(target);
  sizes_t<Rg> ostr{};
  for (std::size_t d = 0; d < R; ++d) ostr[d + lead] = target[d] == 1 ? 0 : cs[d];
  std::int64_t n = 1;
  for (auto s : target) n *= s;
  std::vector<double> acc(static_cast<std::size_t>(n), 0.0);
  const T* gp = static_cast<const T*>(g.storage()->data);
  // walk g and the output together: the index walk over all dims but the last, a strided inner
  // loop over the last (a bias gradient: rows of g added into one row of doubles)
  if constexpr (Rg > 0) {
    const auto gst = g.strides();
    std::int64_t rows = 1;
    for (std::size_t d = 0; d + 1 < Rg; ++d) rows *= gs[d];
    const std::int64_t inner = gs[Rg - 1], gsi = gst[Rg - 1], osi = ostr[Rg - 1];
    if (inner > 0) {
      sizes_t<Rg> idx{};
      std::int64_t goff = g.offset(), ooff = 0;
      double* ap = acc.data();
      for (std::int64_t r = 0; r < rows; ++r) {
        const T* src = gp + goff;
        double* dst = ap + ooff;
        if (gsi == 1 && osi == 1) {
          for (std::int64_t j = 0; j < inner; ++j) dst[j] += to_double(src[j]);
        } else if (osi == 0) {
          double s = 0;
          for (std::int64_t j = 0; j < inner; ++j) s += to_double(src[j * gsi]);
          dst[0] += s;
        } else {
          for (std::int64_t j = 0; j < inner; ++j) dst[j * osi] += to_double(src[j * gsi]);
        }
        for (std::size_t d = Rg - 1; d-- > 0;) {
          if (++idx[d] < gs[d]) {
            goff += gst[d];
            ooff += ostr[d];
            break;
          }
          goff -= (gs[d] - 1) * gst[d];
          ooff -= (gs[d] - 1) * ostr[d];
          idx[d] = 0;
        }
      }
    }
  }
  T* op = out.data();
  for (std::int64_t k = 0; k < n; ++k) op[k] = static_cast<T>(acc[static_cast<std::size_t>(k)]);
  return recorded(std::move(out));
}

/// The node of a reduce_to computed under create_graph: the gradient of its input is the output's
/// gradient expanded back (an expand_ prim: its own rule sums it again, so the types stay closed).
template <class T, std::size_t Rg, std::size_t R>
struct sum_to_node final : grad_node {
  sizes_t<Rg> from;
  sizes_t<R> to;
  void apply(const std::any& g) override;
  void release() override {}
  std::string name() const override { return "sum_to_size"; }
  std::any tangent(jvp_context& ctx) const override;
};

/// The value of gradient expression g summed onto sizes `target`.
template <std::size_t R, class G>
auto exact(const G& g, const sizes_t<R>& target) {
  return reduce_to<value_type_of<G>, R>(value(g), target);
}

/// A contiguous tensor with t's elements and the given sizes (same count).
template <std::size_t R, class T, class S>
grad_tensor<T, R> as_sizes(const Tensor<T, S>& t, const sizes_t<R>& sizes) {
  auto c = t.contiguous();
  return c.template with_layout<dyn_shape<R>>(sizes, contiguous_strides(sizes), c.offset());
}

template <class T, std::size_t R>
grad_tensor<T, R> zeros_of(const sizes_t<R>& sizes) {
  grad_tensor<T, R> z(sizes);
  z.fill_(0);
  return z;
}

/// The slice_ that reverses dim d (others whole).
template <std::size_t R>
prim::slice_<R> flip_dim(const sizes_t<R>& sizes, std::size_t d) {
  prim::slice_<R> s;
  for (std::size_t i = 0; i < R; ++i) s.start[i] = 0, s.stop[i] = sizes[i], s.step[i] = 1;
  if (sizes[d] > 0) s.start[d] = sizes[d] - 1, s.stop[d] = -1, s.step[d] = -1;
  return s;
}

// ---------------------------------------------------------------------------------------------
// the walk

template <class E, class G>
void backprop(const E& e, const G& g);

// ---------------------------------------------------------------------------------------------
// Shared subexpressions (expr/shared.hpp): a subexpression used k times in a node's expression
// (gelu's input, four times in its decomposition; layer_norm's centred input) receives its k
// gradients summed, and the walk descends into it once. Before (to 2026-11-28) it descended k
// times: a gelu(linear(x, w, b)) ran the linear's backward GEMMs four times, and under autocast
// each partial gradient was rounded to bf16 on its own (tests/cuda/test_cuda_autocast_backward.cu).

/// One pending shared subexpression: its gradient so far, its height in the expression tree (a
/// shared node contains only lower ones), and the descent into it.
struct shared_grad {
  std::size_t height = 0;
  std::any g;
  std::function<void(const std::any&)> descend;
};
/// The pending shared subexpressions of the walk in progress (null outside backprop_root) and the
/// address range of its stored tree (a shared node inside it is referred to, one outside it, in a
/// rule's temporary, is copied).
struct shared_grads {
  std::map<const void*, shared_grad> pending;
  const char* lo = nullptr;
  const char* hi = nullptr;
};
inline shared_grads*& current_shared_grads() {
  thread_local shared_grads* s = nullptr;
  return s;
}

template <class E>
struct tree_height : std::integral_constant<std::size_t, 0> {};
template <class Op, class... C>
struct tree_height<tenet::node<Op, C...>>
    : std::integral_constant<std::size_t, 1 + std::max({std::size_t(0), tree_height<std::remove_cvref_t<C>>::value...})> {};
template <class E, class S>
struct tree_height<tenet::shared_node<E, S>> : std::integral_constant<std::size_t, 1 + tree_height<E>::value> {};

/// backprop(e, g) for the stored expression of a node: the shared subexpressions' gradients are
/// summed over their uses, then each is descended into once, outermost (highest) first.
template <class E, class G>
void backprop_root(const E& e, const G& g) {
  shared_grads s;
  s.lo = reinterpret_cast<const char*>(&e);
  s.hi = s.lo + sizeof(E);
  struct scope {
    shared_grads* previous;
    ~scope() { current_shared_grads() = previous; }
  } restore{current_shared_grads()};
  current_shared_grads() = &s;
  backprop(e, g);
  while (!s.pending.empty()) {
    auto top = s.pending.begin();
    for (auto it = s.pending.begin(); it != s.pending.end(); ++it)
      if (it->second.height > top->second.height) top = it;
    shared_grad next = std::move(top->second);
    s.pending.erase(top);
    next.descend(next.g);
  }
}

/// A node recorded by a create_graph backward: a gradient expression (prims over tensors and
/// scalars: a rule's output or one prim of a forward value). Its backward is backprop over it,
/// whose own rule outputs are expressions of the same closed set (one per prim, dtype, rank and
/// leaf kind), so deriving again instantiates no new types: any order works. Forward mode through
/// it is the tangent of its expression (jvp.hpp): jvp of a gradient, jacfwd(jacrev(f)).
template <class E, class T, std::size_t R>
struct backward_expr_node final : grad_node {
  std::optional<E> expr;
  saved_versions versions;  // of its leaves (forward values, gradients), as it was recorded
  explicit backward_expr_node(const E& e) : expr(e) {}
  void apply(const std::any& g) override;
  void release() override {
    expr.reset();
    versions.at.clear();
  }
  std::string name() const override { return "gradient expression (create_graph)"; }
  std::any tangent(jvp_context& ctx) const override;
};

template <class E>
auto backward_value(const E& e) {
  // TENET_AUTOGRAD=1: never recorded, so no VJP of a VJP is instantiated (create_graph refused)
  if constexpr (TENET_AUTOGRAD < 2 || !has_float_tensor_leaf<E>() || !is_autograd_dtype<value_type_of<E>>) {
    return evaluate_untracked(e);
  } else {
    if (!grad_mode() || !needs_grad(e)) return evaluate_untracked(e);
    decltype(evaluate_untracked(e)) r;
    {
      const grad_mode_guard off(false);
      r = evaluate_untracked(e);
    }
    auto n = std::make_shared<backward_expr_node<E, value_type_of<E>, rank_of<E>>>(e);
    tracked_inputs v{n->inputs, &n->versions};
    for_each_tensor_leaf(e, v);
    auto m = std::make_shared<meta>();
    m->grad_fn = std::move(n);
    r.set_autograd_meta(std::move(m));
    return r;
  }
}

template <class E, class T, std::size_t R>
void backward_expr_node<E, T, R>::apply(const std::any& g) {
  const value_memo_scope values;
  const saved_versions_scope checked(&versions);
  backprop_root(*expr, std::any_cast<const grad_tensor<T, R>&>(g));
}

template <class T, std::size_t Rg, std::size_t R>
void sum_to_node<T, Rg, R>::apply(const std::any& g) {
  const auto& h = std::any_cast<const grad_tensor<T, R>&>(g);
  sizes_t<Rg> ks{};
  for (std::size_t d = 0; d < Rg; ++d) ks[d] = d < Rg - R ? 1 : to[d - (Rg - R)];
  const auto hk = as_sizes<Rg>(h, ks);
  push(inputs[0], grad_tensor<T, Rg>(backward_value(make_node(prim::expand_<dyn_shape<Rg>>{from}, hk))));
}

template <class Op, class... C, class G>
void backprop_node(const tenet::node<Op, C...>& e, const G& g) {
  std::string_view reader = "backward";
  if constexpr (requires { Op::name; }) reader = Op::name;
  const reader_scope reading(reader);  // named by a saved-version error
  if constexpr (sizeof...(C) == 0) {  // iota, uniform: no inputs, nothing to send (as the JVP's zeros)
    (void)e;
    (void)g;
  } else if constexpr (requires { rules<Op>::unary_pointwise; }) {  // f'(x) g, its entry's derivative
    using T = value_type_of<tenet::node<Op, C...>>;
    const auto& x = std::get<0>(e.children);
    const auto xv = forward_value(x);
    backprop(x, rules<Op>::template derivative<T>(xv, make_node(e.op, xv), g));
  } else if constexpr (requires { sizeof(rules<Op>); }) {
    rules<Op>::vjp(e, g);
  } else {
    static_assert(compile_error::always_false<Op>, "tenet: autograd: no VJP rule for this prim (see 'Op' above)");
  }
}

/// Sends gradient g (an expression whose shape broadcasts onto e's) to the tensor leaves of e.
template <class E, class G>
void backprop(const E& e, const G& g) {
  if constexpr (!is_autograd_dtype<value_type_of<E>>) {
    return;
  } else if constexpr (TensorType<E>) {
    if (is_tracked(e)) push(e.autograd_meta(), exact(g, e.sizes()));
  } else if constexpr (SharedNode<E>) {
    shared_grads* s = current_shared_grads();
    if (!s || !e.cache) return backprop(e.expr, g);
    if (!needs_grad(e.expr)) return;
    using T = value_type_of<E>;
    constexpr std::size_t R = rank_of<E>;
    auto [it, fresh] = s->pending.try_emplace(static_cast<const void*>(e.cache.get()));
    if (fresh) {
      it->second.height = tree_height<E>::value;
      const char* at = reinterpret_cast<const char*>(&e);
      if (at >= s->lo && at < s->hi) {  // in the stored tree: its forward values are memoized by address
        const E* p = &e;
        it->second.descend = [p](const std::any& gs) { backprop(p->expr, std::any_cast<const grad_tensor<T, R>&>(gs)); };
      } else {  // in a rule's temporary (a decomposition), gone by the time it is descended into
        it->second.descend = [c = e](const std::any& gs) { backprop(c.expr, std::any_cast<const grad_tensor<T, R>&>(gs)); };
      }
    }
    accumulate(it->second.g, grad_tensor<T, R>(exact(g, e.sizes())));
  } else if constexpr (Node<E>) {
    if (needs_grad(e)) backprop_node(e, exact(g, e.sizes()));
  }
}

}  // namespace tenet::detail::ag
