#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Reverse mode over a prim tree: backprop(e, g) sends the gradient g of expression e to the tensor
// leaves of e, through one rule per prim (vjp_rule<Op>, indexed by the prim type; the pointwise
// derivatives are shared with forward mode, chain_rule<Op> below, and used by jvp.hpp).
//
// At each prim node the incoming gradient is evaluated to a tensor of the node's sizes (exact():
// summed over the dims it was broadcast along, since an operand of a broadcasting op receives the
// gradient of the whole result), and the node's children are read as values (forward_value:
// recomputed once per backward from their children's values). A rule's output is therefore an
// expression over tensors and scalars only, and the kernels the backward compiles are one per
// rule, dtype and rank, shared by every expression of a program (a gradient passed down as an
// unevaluated expression would fuse pointwise chains but compile kernels per subexpression).
//
// Rules follow PyTorch's derivatives.yaml where it picks a value at a kink or tie: abs'(0) = 0,
// maximum/minimum/amax/amin split a tie evenly, pow's exponent gets 0 where the base is 0, sqrt'(0)
// is inf, floor/round/sign ... have zero gradient, comparisons and integer outputs none.
#include <any>
#include <cmath>
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
#include <tenet/prims/prim_list.hpp>
#include <tenet/schedule/cse.hpp>
#include <tenet/ops.hpp>  // aten::softmax, aten::log_softmax
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
/// result keyed by its subtree (schedule/cse.hpp), saved by tracked() in record.hpp (the saved
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

/// e's value as the forward computed it, when it was a kernel's result there (else nullopt).
template <class E>
std::optional<Tensor<value_type_of<E>, dyn_shape<rank_of<E>>>> saved_value(const E& e) {
  if constexpr (TENET_AUTOGRAD >= 2)
    if (grad_mode()) return std::nullopt;  // create_graph: forward values must be recorded, not saved
  const cse_table* t = current_saved_values();
  if (!t)
    if (cse_session* s = cse_session::current()) t = &s->table;
  if (!t || t->empty()) return std::nullopt;
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

template <class Op>
struct vjp_rule;   // non-pointwise prims (and where, cast): apply(node, g)
template <class Op>
struct chain_rule;  // pointwise unary prims: the derivative applied to a (co)tangent, f'(x) * t

template <class E, class G>
void backprop(const E& e, const G& g);

/// A node recorded by a create_graph backward: a gradient expression (prims over tensors and
/// scalars: a rule's output or one prim of a forward value). Its backward is backprop over it,
/// whose own rule outputs are expressions of the same closed set (one per prim, dtype, rank and
/// leaf kind), so deriving again instantiates no new types: any order works. No forward mode
/// through it (tangent throws).
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
  std::any tangent(jvp_context&) const override {
    throw value_error("tenet: jvp: forward mode through a gradient computed by a create_graph backward is not "
                      "supported; differentiate it with backward/grad instead");
  }
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
  backprop(*expr, std::any_cast<const grad_tensor<T, R>&>(g));
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
  } else if constexpr (requires { chain_rule<Op>::is_unary; }) {
    using T = value_type_of<tenet::node<Op, C...>>;
    const auto& x = std::get<0>(e.children);
    const auto xv = forward_value(x);
    backprop(x, chain_rule<Op>::template apply<T>(xv, make_node(e.op, xv), g));
  } else if constexpr (requires { vjp_rule<Op>::has_rule; }) {
    vjp_rule<Op>::apply(e, g);
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
    backprop(e.expr, g);
  } else if constexpr (Node<E>) {
    if (needs_grad(e)) backprop_node(e, exact(g, e.sizes()));
  }
}

// ---------------------------------------------------------------------------------------------
// pointwise unary: f'(x) * t, with y = f(x) (the node itself, recomputed inside the fused loop)
#define TENET_CHAIN_RULE(OP, ...)                                      \
  template <>                                                          \
  struct chain_rule<prim::OP##_> {                                     \
    static constexpr bool is_unary = true;                             \
    template <class T, class X, class Y, class G>                      \
    static auto apply(const X& x, const Y& y, const G& g) {            \
      (void)x;                                                         \
      (void)y;                                                         \
      return __VA_ARGS__;                                              \
    }                                                                  \
  };
TENET_CHAIN_RULE(neg, pw::neg(g))
TENET_CHAIN_RULE(abs, pw::mul(g, pw::un<prim::sign_>(x)))
TENET_CHAIN_RULE(exp, pw::mul(g, y))
TENET_CHAIN_RULE(exp2, pw::mul(g, pw::mul(y, pw::c<T>(std::numbers::ln2))))
TENET_CHAIN_RULE(expm1, pw::mul(g, pw::add(y, pw::c<T>(1))))
TENET_CHAIN_RULE(log, pw::div(g, x))
TENET_CHAIN_RULE(log2, pw::div(g, pw::mul(x, pw::c<T>(std::numbers::ln2))))
TENET_CHAIN_RULE(log1p, pw::div(g, pw::add(x, pw::c<T>(1))))
TENET_CHAIN_RULE(sqrt, pw::div(g, pw::mul(y, pw::c<T>(2))))
TENET_CHAIN_RULE(rsqrt, pw::mul(pw::mul(g, pw::c<T>(-0.5)), pw::mul(y, pw::mul(y, y))))
TENET_CHAIN_RULE(sin, pw::mul(g, pw::un<prim::cos_>(x)))
TENET_CHAIN_RULE(cos, pw::mul(g, pw::neg(pw::un<prim::sin_>(x))))
TENET_CHAIN_RULE(tan, pw::mul(g, pw::add(pw::c<T>(1), pw::mul(y, y))))
TENET_CHAIN_RULE(tanh, pw::mul(g, pw::sub(pw::c<T>(1), pw::mul(y, y))))
TENET_CHAIN_RULE(erf, pw::mul(g, pw::mul(pw::c<T>(std::numbers::inv_sqrtpi * 2),
                                         pw::un<prim::exp_>(pw::neg(pw::mul(x, x))))))
TENET_CHAIN_RULE(reciprocal, pw::mul(pw::neg(g), pw::mul(y, y)))
// piecewise constant: zero gradient (PyTorch returns zeros, not None)
TENET_CHAIN_RULE(floor, pw::mul(g, pw::c<T>(0)))
TENET_CHAIN_RULE(ceil, pw::mul(g, pw::c<T>(0)))
TENET_CHAIN_RULE(round, pw::mul(g, pw::c<T>(0)))
TENET_CHAIN_RULE(trunc, pw::mul(g, pw::c<T>(0)))
TENET_CHAIN_RULE(sign, pw::mul(g, pw::c<T>(0)))
#undef TENET_CHAIN_RULE

// Composites that carry their own derivative (`has_derivative`, `derivative(x, y, t)` = f'(x) t with
// y the node itself; its op holds the parameters), as PyTorch's derivatives.yaml gives one formula
// per op: autograd keeps them whole (record.hpp) and applies it in both modes. Differentiating the
// decomposition instead is NaN wherever one of its intermediates overflows or a branch that where()
// does not take is not finite there (the chain rule's 0 * inf): acosh below -1, sinh of 1000,
// softplus of 100, sinc at 0 ...
template <class Op>
  requires requires { Op::has_derivative; }
struct chain_rule<Op> {
  static constexpr bool is_unary = true;
  template <class T, class X, class Y, class G>
  static auto apply(const X& x, const Y& y, const G& g) {
    return Op::derivative(x, y, g);
  }
};

// ---------------------------------------------------------------------------------------------
// pointwise binary: the partial derivatives applied to g, one per operand (`da`, `db`), shared
// with forward mode (jvp.hpp: t = da(ta) + db(tb)).
template <class Op>
struct binary_rule;
#define TENET_BINARY_RULE(OP, DA, DB)                                  \
  template <>                                                          \
  struct binary_rule<prim::OP##_> {                                    \
    template <class T, class A, class B, class Y, class G>             \
    static auto da(const A& a, const B& b, const Y& y, const G& g) {   \
      (void)a, (void)b, (void)y;                                       \
      return DA;                                                       \
    }                                                                  \
    template <class T, class A, class B, class Y, class G>             \
    static auto db(const A& a, const B& b, const Y& y, const G& g) {   \
      (void)a, (void)b, (void)y;                                       \
      return DB;                                                       \
    }                                                                  \
  };
TENET_BINARY_RULE(add, g, g)
TENET_BINARY_RULE(sub, g, pw::neg(g))
TENET_BINARY_RULE(mul, pw::mul(g, b), pw::mul(g, a))
// div's divisor: -g (a / b) / b, as PyTorch (a / (b b) is 0 / 0 where b b underflows)
TENET_BINARY_RULE(div, pw::div(g, b), pw::mul(pw::neg(g), pw::div(pw::div(a, b), b)))
TENET_BINARY_RULE(remainder, g, pw::mul(pw::neg(g), pw::un<prim::floor_>(pw::div(a, b))))
TENET_BINARY_RULE(fmod, g, pw::mul(pw::neg(g), pw::un<prim::trunc_>(pw::div(a, b))))
// pow: where(b == 0, 0, g * b * a^(b-1)); exponent: where(a == 0 & b >= 0, 0, g * y * log(a))
TENET_BINARY_RULE(pow,
                  pw::where(pw::eq(b, pw::c<T>(0)), pw::c<T>(0),
                            pw::mul(pw::mul(g, b), pw::pow(a, pw::sub(b, pw::c<T>(1))))),
                  pw::where(pw::both(pw::eq(a, pw::c<T>(0)), pw::ge(b, pw::c<T>(0))), pw::c<T>(0),
                            pw::mul(pw::mul(g, y), pw::un<prim::log_>(a))))
// maximum/minimum of two tensors: a tie splits the gradient evenly (torch.maximum). Against a
// constant (a scalar leaf: relu = maximum(x, 0), hardtanh, relu6) the tensor gets nothing at the
// tie, as PyTorch's relu'(0) = 0 and hardtanh's bounds (torch.clamp, which gives 1 at its bounds,
// is the one op this does not match there).
template <class A, class B, class G, class Win, class Lose>
auto extreme_grad(const A& a, const B& b, const G& g, const Win& wins, const Lose& loses) {
  using T = value_type_of<G>;
  if constexpr (ScalarLeaf<B>)
    return pw::where(wins, g, pw::c<T>(0));
  else
    return pw::where(pw::eq(a, b), pw::mul(g, pw::c<T>(0.5)), pw::where(loses, pw::c<T>(0), g));
}
TENET_BINARY_RULE(maximum, extreme_grad(a, b, g, pw::gt(a, b), pw::lt(a, b)),
                  extreme_grad(b, a, g, pw::gt(b, a), pw::lt(b, a)))
TENET_BINARY_RULE(minimum, extreme_grad(a, b, g, pw::lt(a, b), pw::gt(a, b)),
                  extreme_grad(b, a, g, pw::lt(b, a), pw::gt(b, a)))
/// atan2's partial derivatives b / (a^2 + b^2) and -a / (a^2 + b^2), with the reciprocal taken as 0
/// where a^2 + b^2 is 0 (PyTorch's mask: atan2'(0, 0) is 0, not 0 * inf = NaN).
template <class T, class A, class B>
auto atan2_recip(const A& a, const B& b) {
  const auto d = pw::add(pw::mul(a, a), pw::mul(b, b));
  return pw::where(pw::eq(d, pw::c<T>(0)), pw::c<T>(0), pw::div(pw::c<T>(1), d));
}
TENET_BINARY_RULE(atan2, pw::mul(pw::mul(g, b), atan2_recip<T>(a, b)),
                  pw::mul(pw::mul(g, pw::neg(a)), atan2_recip<T>(a, b)))
#undef TENET_BINARY_RULE

/// True for a 2-D operand that is the transpose of a contiguous matrix (linear's weight.t()): its
/// gradient is computed in the weight's own layout.
inline bool is_transposed_contiguous(const sizes_t<2>& sizes, const sizes_t<2>& strides) {
  return sizes[0] > 1 && sizes[1] > 1 && strides[0] == 1 && strides[1] == sizes[0];
}

template <class E>
inline constexpr bool is_matmul_node_v = false;
template <class A, class B>
inline constexpr bool is_matmul_node_v<tenet::node<prim::matmul_, A, B>> = true;

template <class M, class Bias, class GV>
bool linear_backward_fused(const M& mm, const Bias& bias, const GV& gv);  // (after the matmul rule)

template <class Op>
  requires requires { sizeof(binary_rule<Op>); }
struct vjp_rule<Op> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    using T = value_type_of<E>;
    const auto& a = std::get<0>(e.children);
    const auto& b = std::get<1>(e.children);
    if constexpr (std::is_same_v<Op, prim::add_> || std::is_same_v<Op, prim::sub_>) {
      // linear + bias on a device with a bias-gradient GEMM epilogue: one GEMM for w and b
      if constexpr (std::is_same_v<Op, prim::add_> && is_matmul_node_v<std::remove_cvref_t<decltype(a)>>) {
        using B = std::remove_cvref_t<decltype(b)>;
        if constexpr (TensorType<B> && rank_of<B> == 1)
          if (needs_grad(a) && linear_backward_fused(a, b, exact(g, e.sizes()))) return;
      }
      // no forward value needed (computing one would recompute a GEMM under a bias add)
      if (needs_grad(a)) backprop(a, g);
      if (needs_grad(b)) {
        if constexpr (std::is_same_v<Op, prim::add_>)
          backprop(b, g);
        else
          backprop(b, pw::neg(g));
      }
    } else {
      if constexpr ((std::is_same_v<Op, prim::maximum_> || std::is_same_v<Op, prim::minimum_>) &&
                    ScalarLeaf<std::remove_cvref_t<decltype(b)>>) {
        // against a constant (relu, hardtanh): x wins exactly where the output differs from the
        // constant's side, so the forward's saved output (a GEMM epilogue's result, whose input
        // was never stored) decides without recomputing the input
        if (auto y = saved_value(e)) {
          if (needs_grad(a)) {
            if constexpr (std::is_same_v<Op, prim::maximum_>)
              backprop(a, pw::where(pw::gt(*y, b), g, pw::c<T>(0)));
            else
              backprop(a, pw::where(pw::lt(*y, b), g, pw::c<T>(0)));
          }
          return;
        }
      }
      // mul's gradients read only the other operand, div's numerator is read only for the
      // denominator's gradient: an operand no gradient reads is not checked (nor saved by PyTorch)
      constexpr bool is_mul = std::is_same_v<Op, prim::mul_>, is_div = std::is_same_v<Op, prim::div_>;
      const auto av = [&] {
        const unread_scope unread((is_mul || is_div) && !needs_grad(b));
        return forward_value(a);
      }();
      const auto bv = [&] {
        const unread_scope unread(is_mul && !needs_grad(a));
        return forward_value(b);
      }();
      const auto y = make_node(e.op, av, bv);
      if (needs_grad(a)) backprop(a, binary_rule<Op>::template da<T>(av, bv, y, g));
      if (needs_grad(b)) backprop(b, binary_rule<Op>::template db<T>(av, bv, y, g));
    }
  }
};

template <>
struct vjp_rule<prim::where_> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    using T = value_type_of<E>;
    const auto c = forward_value(std::get<0>(e.children));
    backprop(std::get<1>(e.children), pw::where(c, g, pw::c<T>(0)));
    backprop(std::get<2>(e.children), pw::where(c, pw::c<T>(0), g));
  }
};

template <class To>
struct vjp_rule<prim::convert_element_type_<To>> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    using From = value_type_of<decltype(x)>;
    if constexpr (is_autograd_dtype<From>) backprop(x, pw::cast<From>(g));
  }
};

// ---------------------------------------------------------------------------------------------
// movement
template <class S>
struct vjp_rule<prim::reshape_<S>> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    constexpr std::size_t r = rank_of<decltype(x)>;
    backprop(x, as_sizes<r>(exact(g, e.sizes()), x.sizes()));
  }
};

template <std::int64_t... P>
struct vjp_rule<prim::permute_<P...>> {
  static constexpr bool has_rule = true;
  static constexpr std::size_t n = sizeof...(P);
  static constexpr std::array<std::int64_t, n> inverse = [] {
    constexpr std::array<std::int64_t, n> p{P...};
    std::array<std::int64_t, n> q{};
    for (std::size_t i = 0; i < n; ++i) q[static_cast<std::size_t>(p[i])] = static_cast<std::int64_t>(i);
    return q;
  }();
  template <std::size_t... I>
  static auto inverse_op(std::index_sequence<I...>) {
    return prim::permute_<inverse[I]...>{};
  }
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    backprop(std::get<0>(e.children), make_node(inverse_op(std::make_index_sequence<n>{}), exact(g, e.sizes())));
  }
};

/// expand: the gradient of the expanded value broadcasts onto the input (exact() sums it).
template <class S>
struct vjp_rule<prim::expand_<S>> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    backprop(std::get<0>(e.children), exact(g, e.sizes()));
  }
};

/// slice: the gradient placed back at the sliced positions (zeros elsewhere) with one pad_
/// (a negative step first reverses the gradient).
template <std::size_t R>
struct vjp_rule<prim::slice_<R>> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    const auto xs = x.sizes();
    const auto os = e.sizes();
    prim::slice_<R> rev;
    prim::pad_<R> pad;
    for (std::size_t d = 0; d < R; ++d) {
      const std::int64_t n = xs[d], cnt = os[d], st = e.op.step[d], s = st < 0 ? -st : st;
      rev.start[d] = 0, rev.stop[d] = cnt, rev.step[d] = 1;
      pad.interior[d] = 0;
      if (cnt == 0) {
        pad.low[d] = n, pad.high[d] = 0;
        continue;
      }
      const std::int64_t first = st > 0 ? e.op.start[d] : e.op.start[d] - (cnt - 1) * s;
      const std::int64_t last = first + (cnt - 1) * s;
      pad.low[d] = first, pad.high[d] = n - 1 - last, pad.interior[d] = s - 1;
      if (st < 0) rev.start[d] = cnt - 1, rev.stop[d] = -1, rev.step[d] = -1;
    }
    backprop(x, make_node(pad, make_node(rev, exact(g, os))));
  }
};

/// pad: the gradient at the positions of the input's elements (a slice with the interior step),
/// zeros for elements a negative low/high cropped.
template <std::size_t R>
struct vjp_rule<prim::pad_<R>> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    const auto xs = x.sizes();
    const auto os = e.sizes();
    prim::slice_<R> take;
    prim::pad_<R> back;
    for (std::size_t d = 0; d < R; ++d) {
      const std::int64_t n = xs[d], N = os[d], L = e.op.low[d], I = e.op.interior[d] + 1;
      back.interior[d] = 0;
      const std::int64_t lo = L >= 0 ? 0 : (-L + I - 1) / I;
      const std::int64_t hi = N - 1 - L < 0 ? -1 : std::min(n - 1, (N - 1 - L) / I);
      if (n == 0 || lo > hi) {
        take.start[d] = 0, take.stop[d] = 0, take.step[d] = 1;
        back.low[d] = n, back.high[d] = 0;
      } else {
        take.start[d] = L + lo * I, take.stop[d] = L + hi * I + 1, take.step[d] = I;
        back.low[d] = lo, back.high[d] = n - 1 - hi;
      }
    }
    backprop(x, make_node(back, make_node(take, exact(g, os))));
  }
};

/// unfold: windows overlap, so the gradient is the view's scatter-add into the input.
template <std::int64_t D, std::int64_t Size, std::int64_t Step>
struct vjp_rule<prim::unfold_<D, Size, Step>> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    using X = std::remove_cvref_t<decltype(x)>;
    using T = value_type_of<E>;
    constexpr std::size_t r = rank_of<X>;
    constexpr std::size_t d = prim::unfold_<D, Size, Step>::template dim<X>;
    const auto xs = x.sizes();
    const auto cs = contiguous_strides(xs);
    sizes_t<r + 1> vst{};
    for (std::size_t i = 0; i < r; ++i) vst[i] = cs[i];
    vst[d] = cs[d] * e.op.step;
    vst[r] = cs[d];
    const auto os = e.sizes();
    backprop(x, view_backward<T, r, r + 1>(exact(g, os), os, vst, 0, xs, cs, 0));
  }
};

// ---------------------------------------------------------------------------------------------
// reductions and matmul

template <class Kind, bool K, auto... Dims>
struct vjp_rule<prim::reduce_<Kind, K, Dims...>> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    using X = std::remove_cvref_t<decltype(x)>;
    using T = value_type_of<E>;
    constexpr std::size_t r = rank_of<X>;
    constexpr auto mask = prim::reduce_<Kind, K, Dims...>::template mask<X>();
    const auto xs = x.sizes();
    sizes_t<r> ks{};
    for (std::size_t i = 0; i < r; ++i) ks[i] = mask[i] ? 1 : xs[i];
    const auto gk = as_sizes<r>(exact(g, e.sizes()), ks);
    const auto ge = make_node(prim::expand_<dyn_shape<r>>{xs}, gk);
    if constexpr (std::is_same_v<Kind, prim::sum_kind>) {
      backprop(x, ge);
    } else if constexpr (std::is_same_v<Kind, prim::prod_kind>) {
      // with z zeros in the group: z == 0: prod / x; z == 1: the product of the others at the zero
      const auto xv = forward_value(x);
      if (TENET_AUTOGRAD >= 2 && grad_mode()) {  // create_graph: this rule's derivative is wrong at zeros
        bool zero_seen = false;
        const auto xh = xv.cpu();  // (a host copy of a device tensor)
        const T* xp = static_cast<const T*>(xh.storage()->data);
        for_each_offset(xh.sizes(), xh.strides(), xh.offset(),
                        [&](std::int64_t, std::int64_t off) { zero_seen = zero_seen || to_double(xp[off]) == 0.0; });
        if (zero_seen)
          throw value_error("tenet: autograd: create_graph through prod of an input with an element equal to 0 is not "
                            "implemented (its second derivative there would be wrong); the first-order gradient works");
      }
      const auto zero = pw::eq(xv, pw::c<T>(0));
      const auto z = value(make_node(prim::reduce_<prim::sum_kind, true, Dims...>{}, pw::cast<T>(zero)));
      const auto p = value(make_node(prim::reduce_<prim::prod_kind, true, Dims...>{}, pw::where(zero, pw::c<T>(1), xv)));
      const auto local = pw::where(zero, pw::where(pw::eq(z, pw::c<T>(1)), p, pw::c<T>(0)),
                                   pw::where(pw::eq(z, pw::c<T>(0)), pw::div(p, xv), pw::c<T>(0)));
      backprop(x, pw::mul(ge, local));
    } else if constexpr (std::is_same_v<Kind, prim::amax_kind> || std::is_same_v<Kind, prim::amin_kind>) {
      // the gradient is split evenly among the elements equal to the extreme
      const auto xv = forward_value(x);
      const auto yk = as_sizes<r>(forward_value(e), ks);
      const auto hit = value(pw::cast<T>(pw::eq(xv, yk)));
      const auto count = value(make_node(prim::reduce_<prim::sum_kind, true, Dims...>{}, hit));
      backprop(x, pw::mul(ge, pw::div(hit, count)));
    } else {
      static_assert(compile_error::always_false<Kind>, "tenet: autograd: no VJP for this reduction kind");
    }
  }
};

template <>
struct vjp_rule<prim::matmul_> {
  static constexpr bool has_rule = true;
  template <class T, class S>
  static auto as_matrix_lhs(const Tensor<T, S>& t) {  // a vector operand as a 1 x k row
    if constexpr (S::rank == 1)
      return as_sizes<2>(t, sizes_t<2>{1, t.sizes()[0]});
    else
      return t;
  }
  template <class T, class S>
  static auto as_matrix_rhs(const Tensor<T, S>& t) {  // a vector operand as a k x 1 column
    if constexpr (S::rank == 1)
      return as_sizes<2>(t, sizes_t<2>{t.sizes()[0], 1});
    else
      return t;
  }
  /// The gradient with the vector operands' unit dims put back (the rank of the 2-D-ized product).
  template <class A2, class B2, class GV>
  static auto as_product_grad(const A2& a2, const B2& b2, const GV& gv) {
    constexpr std::size_t rg = std::max(rank_of<A2>, rank_of<B2>);
    sizes_t<rg> g2s{};
    const auto as = a2.sizes();
    const auto bs = b2.sizes();
    const auto os = gv.sizes();
    std::size_t j = 0;
    for (; j + 2 < rg; ++j) g2s[j] = os[j];
    g2s[rg - 2] = as[rank_of<A2> - 2];
    g2s[rg - 1] = bs[rank_of<B2> - 1];
    return as_sizes<rg>(gv, g2s);
  }
  /// Sends the left operand's gradient, g b^T (summed over the batch dims it was broadcast along);
  /// av, bv: the operands' forward values.
  template <class E, class GV, class AV, class BV>
  static void send_lhs(const E& e, const GV& gv, const AV& av, const BV& bv) {
    const auto& a = std::get<0>(e.children);
    constexpr std::size_t ra = rank_of<decltype(a)>;
    const auto a2 = as_matrix_lhs(av);
    const auto b2 = as_matrix_rhs(bv);
    const auto g2 = as_product_grad(a2, b2, gv);
    auto da = reduce_to<value_type_of<E>, rank_of<decltype(a2)>>(value(make_node(prim::matmul_{}, g2, b2.mT())),
                                                                  a2.sizes());
    backprop(a, as_sizes<ra>(da, a.sizes()));
  }
  /// Sends the right operand's gradient, a^T g. A 2-D right operand shared by every batch entry
  /// (linear over a batch of sequences) gets one GEMM over the flattened batch (k = batch x rows),
  /// not a batched GEMM summed afterwards.
  template <class E, class GV, class AV, class BV>
  static void send_rhs(const E& e, const GV& gv, const AV& av, const BV& bv) {
    using T = value_type_of<E>;
    const auto& b = std::get<1>(e.children);
    constexpr std::size_t rb = rank_of<decltype(b)>;
    const auto a2 = as_matrix_lhs(av);
    const auto b2 = as_matrix_rhs(bv);
    constexpr std::size_t ra2 = rank_of<decltype(a2)>;
    const auto g2 = as_product_grad(a2, b2, gv);
    if constexpr (rb == 2) {
      const auto as = a2.sizes();
      std::int64_t rows = 1;
      for (std::size_t d = 0; d + 1 < ra2; ++d) rows *= as[d];
      const auto af = as_sizes<2>(a2, sizes_t<2>{rows, as[ra2 - 1]});
      const auto gf = as_sizes<2>(g2, sizes_t<2>{rows, b2.sizes()[1]});
      // a column-major B (linear's weight.t()): its gradient is computed as (g^T a)^T, a
      // transposed view of a row-major GEMM result, which is the weight's own layout (the view's
      // backward then takes it without a copy)
      if (is_transposed_contiguous(bv.sizes(), bv.strides())) {
        const auto dbt = value(make_node(prim::matmul_{}, gf.mT(), af));
        backprop(b, grad_tensor<T, 2>(dbt.mT()));
      } else {
        backprop(b, grad_tensor<T, 2>(value(make_node(prim::matmul_{}, af.mT(), gf))));
      }
    } else {
      auto db = reduce_to<T, rank_of<decltype(b2)>>(value(make_node(prim::matmul_{}, a2.mT(), g2)), b2.sizes());
      backprop(b, as_sizes<rb>(db, b.sizes()));
    }
  }
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    const auto gv = exact(g, e.sizes());
    const bool ga = needs_grad(std::get<0>(e.children)), gb = needs_grad(std::get<1>(e.children));
    // a's values are read for b's gradient only (a's own needs a's sizes), b's for a's
    const auto av = [&] {
      const unread_scope unread(!gb);
      return forward_value(std::get<0>(e.children));
    }();
    const auto bv = [&] {
      const unread_scope unread(!ga);
      return forward_value(std::get<1>(e.children));
    }();
    if (ga) send_lhs(e, gv, av, bv);
    if (gb) send_rhs(e, gv, av, bv);
  }
};

/// The backward of linear(x, w, b) = matmul(x, w^T) + b on a device whose backend has a GEMM with a
/// bias-gradient epilogue (CUDA: cuBLASLt's BGRADB): w's and b's gradients from one GEMM, x's as
/// usual. False (nothing sent) where the pattern or the device does not allow it; the caller then
/// runs the generic rules. Not under create_graph (the epilogue's result is not an expression).
template <class M, class Bias, class GV>
bool linear_backward_fused(const M& mm, const Bias& bias, const GV& gv) {
  using T = value_type_of<M>;
  const auto& w = std::get<1>(mm.children);
  using W = std::remove_cvref_t<decltype(w)>;
  if constexpr (!TensorType<W> || rank_of<W> != 2 || !std::is_same_v<value_type_of<Bias>, T>) {
    return false;
  } else {
    if (gv.device().is_cpu() || !is_tracked(bias) || !needs_grad(w)) return false;
    if constexpr (TENET_AUTOGRAD >= 2)
      if (grad_mode()) return false;
    if (!is_transposed_contiguous(w.sizes(), w.strides())) return false;  // w^T: [in, out]
    const std::int64_t in = w.sizes()[0], out = w.sizes()[1];
    const auto xv = forward_value(std::get<0>(mm.children));
    if (xv.device() != gv.device() || xv.numel() == 0) return false;
    const std::int64_t rows = xv.numel() / in;
    const auto x2 = as_sizes<2>(xv, sizes_t<2>{rows, in});
    const auto g2 = as_sizes<2>(gv, sizes_t<2>{rows, out});
    grad_tensor<T, 2> dw(sizes_t<2>{out, in}, gv.device());
    grad_tensor<T, 1> db(sizes_t<1>{out}, gv.device());
    if (!linear_grad_on_device<T>(x2, g2, dw, db)) return false;
    if (needs_grad(std::get<0>(mm.children))) vjp_rule<prim::matmul_>::send_lhs(mm, gv, xv, forward_value(w));
    backprop(w, grad_tensor<T, 2>(dw.mT()));
    backprop(bias, db);
    return true;
  }
}

// ---------------------------------------------------------------------------------------------
// indexing

template <std::int64_t D>
struct vjp_rule<prim::gather_<D>> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    using T = value_type_of<E>;
    constexpr std::size_t r = rank_of<decltype(x)>;
    const auto idx = forward_value(std::get<1>(e.children));
    const auto gv = exact(g, e.sizes());
    auto scatter_back = [&](const auto& src) {
      backprop(x, make_node(prim::scatter_<D, prim::scatter_op::sum>{}, zeros_of<T, r>(x.sizes()), idx, src));
    };
    if (e.op.skip_grad < 0) return scatter_back(gv);
    // embedding's padding_idx: its positions send no gradient
    using I = value_type_of<decltype(idx)>;
    scatter_back(pw::where(pw::eq(idx, pw::c<I>(static_cast<double>(e.op.skip_grad))), pw::c<T>(0), gv));
  }
};

template <std::int64_t D, prim::scatter_op Op>
struct vjp_rule<prim::scatter_<D, Op>> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    const auto& src = std::get<2>(e.children);
    using T = value_type_of<E>;
    using Src = std::remove_cvref_t<decltype(src)>;
    constexpr std::size_t r = rank_of<decltype(x)>;
    if constexpr (Op != prim::scatter_op::replace && Op != prim::scatter_op::sum) {
      throw value_error(std::string("tenet: autograd: scatter_reduce: no gradient for the reduction ") +
                        std::string(prim::scatter_<D, Op>::name.substr(8)) +
                        " yet (sum has one, as scatter and scatter_add); its inputs require grad: compute it under "
                        "tenet::no_grad or on detach()ed inputs");
    } else {
      const auto idx = forward_value(std::get<1>(e.children));
      const auto gv = exact(g, e.sizes());
      if (needs_grad(x)) {
        if (Op == prim::scatter_op::replace || !e.op.include_self)
          backprop(x, make_node(prim::scatter_<D, prim::scatter_op::replace>{}, gv, idx, pw::c<T>(0)));
        else
          backprop(x, gv);
      }
      if (needs_grad(src)) {
        auto taken = make_node(prim::gather_<D>{}, gv, idx);
        if constexpr (rank_of<Src> == 0) {
          backprop(src, taken);
        } else {
          // src may be larger than the index: its other elements are not read
          prim::pad_<r> fit;
          const auto ss = src.sizes();
          const auto is = idx.sizes();
          for (std::size_t d = 0; d < r; ++d) fit.low[d] = 0, fit.high[d] = ss[d] - is[d], fit.interior[d] = 0;
          backprop(src, make_node(fit, taken));
        }
      }
    }
  }
};

// ---------------------------------------------------------------------------------------------
// scans and sort

template <class Kind, std::int64_t Dim>
struct vjp_rule<prim::scan_<Kind, Dim>> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    using X = std::remove_cvref_t<decltype(x)>;
    using T = value_type_of<E>;
    constexpr std::size_t r = rank_of<X>;
    constexpr std::size_t d = prim::scan_<Kind, Dim>::template dim<X>;
    const auto xs = x.sizes();
    const auto gv = exact(g, xs);
    // the sum over j >= i along d: reverse, cumsum, reverse
    auto reverse_cumsum = [&](const auto& v) {
      const auto flip = flip_dim<r>(xs, d);
      return value(make_node(flip, value(make_node(prim::scan_<prim::sum_kind, Dim>{}, make_node(flip, v)))));
    };
    if constexpr (std::is_same_v<Kind, prim::sum_kind>) {
      backprop(x, reverse_cumsum(gv));
    } else if constexpr (std::is_same_v<Kind, prim::prod_kind>) {
      const auto xv = forward_value(x);
      const auto xh = xv.cpu();  // (a host copy of a device tensor)
      bool zero = false;
      for_each_offset(xh.sizes(), xh.strides(), xh.offset(),
                      [&](std::int64_t, std::int64_t off) { zero = zero || to_double(static_cast<const T*>(xh.storage()->data)[off]) == 0.0; });
      if (zero)
        throw value_error("tenet: autograd: the gradient of cumprod at an input equal to 0 is not implemented yet");
      backprop(x, pw::div(reverse_cumsum(pw::mul(gv, forward_value(e))), xv));
    } else if constexpr (std::is_same_v<Kind, prim::logaddexp_kind>) {
      // d y_j / d x_i = exp(x_i - y_j) for i <= j
      const auto y = forward_value(e);
      backprop(x, pw::mul(reverse_cumsum(pw::mul(gv, pw::un<prim::exp_>(pw::neg(y)))), pw::un<prim::exp_>(forward_value(x))));
    } else if constexpr (std::is_same_v<Kind, prim::amax_kind> || std::is_same_v<Kind, prim::amin_kind>) {
      // each output's gradient goes to the position of its running extreme (as torch.cummax)
      using arg = prim::running_arg<std::is_same_v<Kind, prim::amax_kind>>;
      const auto at = value(make_node(prim::scan_<arg, Dim>{}, forward_value(x)));
      backprop(x, make_node(prim::scatter_<Dim, prim::scatter_op::sum>{}, zeros_of<T, r>(xs), at, gv));
    } else {
      static_assert(compile_error::always_false<Kind>, "tenet: autograd: no VJP for this scan kind");
    }
  }
};

template <std::int64_t Dim, prim::sort_output Output>
struct vjp_rule<prim::sort_<Dim, Output>> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    using T = value_type_of<E>;
    constexpr std::size_t r = rank_of<decltype(x)>;
    prim::sort_<Dim, prim::sort_output::indices> order;
    order.descending = e.op.descending;
    const auto at = value(make_node(order, forward_value(x)));
    backprop(x, make_node(prim::scatter_<Dim, prim::scatter_op::sum>{}, zeros_of<T, r>(x.sizes()), at,
                          exact(g, e.sizes())));
  }
};

// ---------------------------------------------------------------------------------------------
// composites with a rule of their own (kept whole by autograd_backend, record.hpp): the VJP from
// the output, one fused expression, instead of the VJP of the decomposition (max-shift, exp, sum,
// div). tests/test_autograd_ops.cpp checks both agree.

template <std::int64_t D>
struct vjp_rule<aten::softmax<D>> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    const auto gv = exact(g, e.sizes());
    const auto y = forward_value(e);
    const auto dot = value(make_node(prim::reduce_<prim::sum_kind, true, D>{}, pw::mul(gv, y)));
    backprop(std::get<0>(e.children), pw::mul(y, pw::sub(gv, dot)));
  }
};

template <std::int64_t D>
struct vjp_rule<aten::log_softmax<D>> {
  static constexpr bool has_rule = true;
  template <class E, class G>
  static void apply(const E& e, const G& g) {
    const auto gv = exact(g, e.sizes());
    const auto y = forward_value(e);
    const auto total = value(make_node(prim::reduce_<prim::sum_kind, true, D>{}, gv));
    backprop(std::get<0>(e.children), pw::sub(gv, pw::mul(pw::un<prim::exp_>(y), total)));
  }
};

}  // namespace tenet::detail::ag
