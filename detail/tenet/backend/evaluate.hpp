#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Eager evaluation, the executor of the kernel plan:
//
//   decompose<B>(e)      ATen ops -> prims (+ the composites backend B runs natively), B being the
//                        backend of e's device (backend/backends.hpp: on_backend); closure checked
//   lower_value<B>(d, s) schedule/lower.hpp cuts d into kernels, the same walk the plan records
//   run_sink s           runs each kernel as it is lowered, on its output's backend: the backend's
//                        run_pointwise_kernel / run_kernel / run_pattern overloads
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>

#include <tenet/autograd/record.hpp>  // ag::tracked: the autograd hook of evaluate
#include <tenet/backend/registry.hpp>
#include <tenet/decomp/decompose.hpp>
#include <tenet/decomp/build.hpp>
#include <tenet/backend/views.hpp>
#include <tenet/expr/cse.hpp>
#include <tenet/schedule/fusion.hpp>
#include <tenet/schedule/lower.hpp>

namespace tenet::detail {

/// Kernels the evaluator has launched on this thread (pointwise loops, reductions, GEMMs, row
/// kernels, ...; views are not kernels). Tests hold it against the kernel plan.
inline std::int64_t& kernels_launched() {
  thread_local std::int64_t n = 0;
  return n;
}
/// Expressions evaluated on this thread (tenet::compile counts graph breaks with it).
inline std::int64_t& evaluations() {
  thread_local std::int64_t n = 0;
  return n;
}

template <class E>
using result_tensor_t = Tensor<value_type_of<E>, shape_of<E>>;

/// decompose<Backend>(e), checked closed.
template <class Backend, class E>
auto decompose_checked(const E& e) {
  auto d = decompose<Backend>(e);
  static_assert(is_closed<decltype(d), Backend>(), "tenet: internal: the decomposition left an op that is neither "
                                                   "a prim nor a composite the backend runs");
  return d;
}

template <class E>
auto to_tensor(const E& e);
template <class E>
device expr_device(const E& e);

inline constexpr const char* evaluating = "evaluating an expression";

/// out = m elementwise (one pointwise kernel), on out's backend (m's leaves are on out's device).
template <class Out, class M>
void run_pointwise_on(const Out& out, const M& m) {
  on_backend<void>(out.device(), evaluating, [&](auto b) {
    using B = decltype(b);
    if constexpr (B::template evaluates<M>())
      run_pointwise_kernel(b, out, m);
    else
      B::cannot_run("an expression");
  });
}

/// Whether backends B and K take the same operand forms for node E (so operands lowered for B fit
/// K's kernel).
template <class B, class K, class E, class I = std::make_index_sequence<std::tuple_size_v<
                                         std::remove_cvref_t<decltype(std::declval<const E&>().children)>>>>
inline constexpr bool same_operand_forms = false;
template <class B, class K, class E, std::size_t... I>
inline constexpr bool same_operand_forms<B, K, E, std::index_sequence<I...>> =
    ((takes_prologue<B, typename E::op_type, I> == takes_prologue<K, typename E::op_type, I>) && ...);

/// The node kernel e into out (fresh, contiguous, e's sizes) from its operands as lowered for
/// backend B, on out's backend (B's, except for a subtree without device of its own: the CPU).
template <class B, class E, class Out, class... O>
void run_node_into(B, const E& e, const Out& out, const O&... operands) {
  on_backend<void>(out.device(), evaluating, [&](auto b) {
    using K = decltype(b);
    if constexpr (same_operand_forms<B, K, E> && K::template runs_node<E>())
      run_kernel(b, e.op, e, out, operands...);
    else
      K::cannot_run(E::op_type::name);
  });
}

/// The executor's sink for schedule/lower.hpp: every kernel runs as it is lowered and its value is
/// a Tensor; an operand is a Tensor, a scalar or an elementwise node over operands.
struct run_sink {
  template <class T, class S>
  Tensor<T, S> input(const Tensor<T, S>& t) {
    return t;
  }
  template <class C>
  C constant(const C& c) {
    return c;
  }
  template <class V>
  V operand(V v) {
    return v;
  }
  template <class E, class... O>
  auto tree(const E& e, const O&... o) {
    return make_node(e.op, o...);
  }
  template <class E, class X>
  result_tensor_t<E> view(const E& e, const X& x) {
    return view_of(e.op, e, x);
  }
  // shared values and CSE: with the evaluation's use counts (expr/cse.hpp) a value is kept only
  // while a later reader is left. The bookkeeping is in the non-template functions below, so
  // that it is compiled once, not per node type.
  template <class E>
  std::optional<typename E::tensor_type> find_shared(const E& e) {
    if (!*e.cache) {
      shared_first_read(e.cache.get());
      return std::nullopt;  // the first read: lower it
    }
    std::optional<typename E::tensor_type> v(**e.cache);
    if (shared_read_last(e.cache.get())) e.cache->reset();  // its last reader: release it
    return v;
  }
  template <class E, class V>
  typename E::tensor_type store_shared(const E& e, const V& v) {
    if (shared_read_last(e.cache.get())) return typename E::tensor_type(v);  // read once: not kept
    e.cache->emplace(v);
    return **e.cache;
  }
  template <class E>
  bool cse_enabled(const E&) const {
    return cse_keyed(type_tag<strip_transparent_t<E>>());
  }
  template <class E>
  std::optional<result_tensor_t<E>> find_cached(const E&, const std::string& key) {
    const result_tensor_t<E>* p = cse_find<result_tensor_t<E>>(key);
    std::optional<result_tensor_t<E>> v;
    if (p) v.emplace(*p);
    type_visited(type_tag<strip_transparent_t<E>>());
    return v;
  }
  template <class E, class V>
  result_tensor_t<E> store_cached(const E&, const std::string* key, const V& v) {
    if (key && type_keeps(type_tag<strip_transparent_t<E>>(), *key)) cse_store(*key, result_tensor_t<E>(v));
    return v;
  }

  /// A shared value read with its cache empty: its first read, or a read after its last counted
  /// reader released it (an internal error: the counts missed a reader).
  [[gnu::noinline]] static void shared_first_read(const void* cache) {
    if (use_counts* u = current_use_counts())
      if (const auto* su = u->find_shared(cache); su && su->done)
        throw error("tenet: internal: a shared value was read after its last counted reader (use_counts, expr/cse.hpp)");
  }
  /// Counts a read of a shared value; true when it was the last (release it).
  [[gnu::noinline]] static bool shared_read_last(const void* cache) {
    use_counts* u = current_use_counts();
    auto* su = u ? u->find_shared(cache) : nullptr;
    if (!su || --su->left > 0) return false;
    su->done = true;
    return true;
  }
  /// Whether a node of type `tag` may be a common subexpression (a type that occurs once has no twin).
  [[gnu::noinline]] static bool cse_keyed(const void* tag) {
    if (!current_cse_table()) return false;
    use_counts* u = current_use_counts();
    const auto* t = u ? u->find_type(tag) : nullptr;
    return !t || t->total > 1;
  }
  /// Counts a visit of a node of type `tag`; after the type's last, its values are released.
  [[gnu::noinline]] static void type_visited(const void* tag) {
    use_counts* u = current_use_counts();
    auto* t = u ? u->find_type(tag) : nullptr;
    if (!t || --t->left > 0) return;
    if (cse_table* table = current_cse_table())
      for (const auto& k : t->keys) table->erase(k);
    t->keys.clear();
  }
  /// Whether a value of type `tag` under `key` is kept (a visit of its type is left), noting the key.
  [[gnu::noinline]] static bool type_keeps(const void* tag, const std::string& key) {
    use_counts* u = current_use_counts();
    auto* t = u ? u->find_type(tag) : nullptr;
    if (!t) return true;
    if (t->left <= 0) return false;
    t->keys.push_back(key);
    return true;
  }
  template <class B, class E, class... O>
  result_tensor_t<E> node(B b, const E& e, const O&... o) {
    result_tensor_t<E> out(e.sizes(), expr_device(e));
    run_node_into(b, e, out, o...);
    ++kernels_launched();
    return out;
  }
  template <class E, class M>
  result_tensor_t<E> pointwise(const E& e, const M& m) {
    result_tensor_t<E> out(e.sizes(), expr_device(m));
    run_pointwise_on(out, m);
    ++kernels_launched();
    return out;
  }
  template <class E, class M>
  auto value(const E& e, const M& m) {
    if constexpr (TensorType<M>)
      return m;
    else
      return pointwise(e, m);
  }
  template <class E>
  result_tensor_t<E> output(const E& e) {
    return result_tensor_t<E>(e.sizes(), expr_device(e));
  }
  template <class M, class X>
  result_tensor_t<M> product(const M&, const X& out) {
    return result_tensor_t<M>(out);
  }
  template <class P, class Bp, class E, class Out, class... O>
  result_tensor_t<E> pattern(Bp b, const E& e, const Out& out, const O&... o) {
    run_pattern(b, P{}, e, out, o...);
    ++kernels_launched();
    return out;
  }
};

template <class E>
bool gemm_epilogue_pattern::applies(const E& e) {
  bool ok = false;
  visit_epilogue_matmul(e, [&](const auto& mm) {
    const auto ms = mm.sizes();
    const auto es = e.sizes();
    constexpr std::size_t R = rank_of<E>;
    std::int64_t rows = 1;
    for (std::size_t i = 0; i + 1 < R; ++i) rows *= ms[i];
    ok = ms == es && rows > 1 && ms[R - 1] > 1;
  });
  return ok && expr_device(e).is_cpu();  // the CPU's GEMM
}
/// The CPU's conv2d with the tree as its epilogue: when the tree keeps the convolution's sizes
/// (no broadcast of its value) and no forward is recorded for a backward (a cse_session: eager
/// autograd's recording and compiled training steps, whose backward reads the convolution's own
/// value from the session's table).
template <class E>
bool conv_epilogue_pattern::applies(const E& e) {
  if (cse_session::current() != nullptr || !expr_device(e).is_cpu()) return false;
  bool ok = false;
  visit_epilogue_head<aten::conv2d>(e, [&](const auto& cv) { ok = cv.sizes() == e.sizes(); });
  return ok;
}
template <class E>
bool reduce_epilogue_pattern::applies(const E& e) {
  return expr_device(e).is_cpu();
}

/// The value of e as a Tensor, lowered for the backend of its device (a kernel's operand, a
/// backend's fallback: already decomposed).
template <class E>
auto to_tensor(const E& e) {
  if constexpr (TensorType<E>) {
    return e;
  } else {
    using R = result_tensor_t<E>;
    return on_backend<R>(expr_device(e), evaluating, [&](auto b) -> R {
      using B = decltype(b);
      const use_counts_scope uncounted(nullptr);  // a subtree inside a kernel: not the evaluation's counted tree
      run_sink s;
      if constexpr (B::template evaluates<E>())
        return R(lower_value<B>(e, s));
      else
        B::cannot_run("an expression");
    });
  }
}

/// Empties the caches of the shared values in e (all copies of a shared value see it).
template <class E>
void reset_shared(const E& e) {
  if constexpr (SharedNode<E>) {
    e.cache->reset();
    reset_shared(e.expr);
  } else if constexpr (Node<E>) {
    detail::apply_tuple([](const auto&... c) { (reset_shared(c), ...); }, e.children);
  }
}
/// One evaluation's lifetime for shared values: a lazy expression evaluated again reads its inputs
/// again (never a cached value from an earlier evaluation), and a cache does not keep memory alive
/// after the evaluation. (So an unevaluated expression must not be evaluated by two threads at once.)
template <class E>
struct shared_scope {
  const E& e;
  explicit shared_scope(const E& x) : e(x) { reset_shared(e); }
  ~shared_scope() { reset_shared(e); }
  shared_scope(const shared_scope&) = delete;
  shared_scope& operator=(const shared_scope&) = delete;
};

/// Calls f on every Tensor leaf of e.
template <class E, class F>
void visit_leaves(const E& e, F&& f) {
  if constexpr (TensorType<E>) {
    f(e);
  } else if constexpr (SharedNode<E>) {
    visit_leaves(e.expr, f);
  } else if constexpr (Node<E>) {
    detail::apply_tuple([&](const auto&... c) { (visit_leaves(c, f), ...); }, e.children);
  }
}

/// The one device of the sources visit_devices finds: device_error when two differ.
struct device_sources {
  std::optional<device> dev;
  void add(const device d) {
    if (!dev) {
      dev = d;
    } else if (d != *dev) {
      throw device_error("tenet: an expression mixes tensors on " + dev->str() + " and " + d.str() +
                         "; move them to one device first (t.to(tenet::cuda(0)) or t.cpu())");
    }
  }
};

[[noreturn]] inline void throw_undefined_leaf() {
  throw value_error("tenet: an expression reads an undefined tensor (a default-constructed Tensor, which has no "
                    "storage and no sizes); assign it a value first (`t = expr;`, tenet::zeros ...)");
}

/// Adds to s the device of every Tensor leaf of e and of every node that carries its own device (a
/// random draw: prim::uniform_'s `placement`), the sources that decide where e is evaluated. Every
/// evaluation walks it first, so an undefined leaf (a default-constructed Tensor) raises value_error
/// here: torch has no undefined tensors in expressions, and reading one as an empty tensor gave
/// silent results (issue 27 item 6). (s is a plain type, not a callable: a lambda's type would name
/// the root expression, and every expression would instantiate the walk of each of its subtrees anew.)
template <class E>
void visit_devices(const E& e, device_sources& s) {
  if constexpr (TensorType<E>) {
    if (!e.defined()) throw_undefined_leaf();
    s.add(e.device());
  } else if constexpr (SharedNode<E>) {
    visit_devices(e.expr, s);
  } else if constexpr (Node<E>) {
    if constexpr (requires { e.op.placement; }) s.add(static_cast<device>(e.op.placement));
    detail::apply_tuple([&](const auto&... c) { (visit_devices(c, s), ...); }, e.children);
  } else if constexpr (requires { e.placement; }) {
    s.add(static_cast<device>(e.placement));  // a backend's generator leaf (decompose.hpp: prim_leaf)
  }
}

/// The device of e's tensor leaves and placed nodes, none when e has neither; device_error when
/// they differ.
template <class E>
std::optional<device> source_device(const E& e) {
  device_sources s;
  visit_devices(e, s);
  return s.dev;
}

/// The device e is evaluated on: source_device(e), the CPU when e has no source.
template <class E>
device expr_device(const E& e) {
  return source_device(e).value_or(tenet::cpu);
}


/// The preamble every evaluation shares: on the backend B of device `dev`, e decomposed for B
/// (checked closed), one scope for its shared values and CSE, then run(b, d, sink) with d the
/// decomposed tree. An expression B cannot decompose or run is B's device_error.
template <class R, class E, class Run>
R lower_on_backend(const device& dev, const E& e, Run&& run) {
  return on_backend<R>(dev, evaluating, [&](auto b) -> R {
    using B = decltype(b);
    if constexpr (!B::template decomposes<E>()) {
      B::cannot_run("an expression");
    } else {
      auto d = decompose_checked<B>(e);  // (not const: nvcc 13's cicc hangs lowering a const bf16 tree, issue 28 notes)
      using D = std::remove_cvref_t<decltype(d)>;
      const shared_scope scope(d);
      const cse_scope cse;
      if constexpr (!B::template evaluates<D>()) {
        B::cannot_run("an expression");
      } else {
        // outside a session nothing reads the evaluation's values afterwards: each is kept only
        // while a reader is left (expr/cse.hpp, use_counts)
        use_counts uses;
        const bool counted = !cse.in_session;
        if (counted) count_uses(d, uses);
        const use_counts_scope us(counted ? &uses : nullptr);
        run_sink s;
        return run(b, d, s);
      }
    }
  });
}

template <Expression E>
auto evaluate_untracked(const E& e) {
  ++evaluations();
  using R = result_tensor_t<E>;
  // one device for the whole expression (or a device_error naming both); its backend decomposes
  return lower_on_backend<R>(expr_device(e), e, [](auto b, auto& d, run_sink& s) -> R {
    using B = decltype(b);
    using D = std::remove_cvref_t<decltype(d)>;
    if constexpr (Node<D>) {
      if constexpr (prim::is_view_prim<typename D::op_type>) {
        // a view at the root: the result must be fresh contiguous storage, never a view of an input
        auto v = lower_value<B>(d, s);
        bool reads_input = false;
        visit_leaves(d, [&](const auto& leaf) { reads_input = reads_input || leaf.shares_storage(v); });
        if (reads_input || !v.is_contiguous()) {
          ++kernels_launched();  // the copy
          return R(v.clone());
        }
        return R(v);
      }
    }
    return R(lower_value<B>(d, s));
  });
}

/// The value of e; recorded for autograd when a leaf requires grad (autograd/record.hpp).
template <Expression E>
auto evaluate(const E& e) {
  return ag::tracked(e, [&] { return evaluate_untracked(e); });
}

/// Runs a node kernel into a given output (assign's root kernel), as lower_node_with's Run.
template <class Out>
struct run_into_dst {
  const Out& out;
  template <class B, class E, class... O>
  int operator()(B b, const E& e, const O&... o) {
    run_node_into(b, e, out, o...);
    return 0;
  }
};

template <class T, class S, Expression E>
void assign(const Tensor<T, S>& dst, const E& e) {
  ag::check_in_place(dst, "copy_/add_/...");
  static_assert(shape_of<E>::rank <= S::rank, "tenet: cannot write an expression of higher rank into a tensor");
  // the destination may be read by e: evaluate first when any leaf shares its storage
  bool aliased = false;
  // remapped: x is read below a non-elementwise op (a movement prim, reduction, matmul, ...), which
  // reads it at other indices than the one being written
  auto check = [&](const auto& self, const auto& x, bool remapped) -> void {
    using X = std::remove_cvref_t<decltype(x)>;
    if constexpr (TensorType<X>) {
      // reading dst itself at the same index is safe (x += y); any other view of its storage is not
      bool same = false;
      if constexpr (X::rank == S::rank)
        same = x.offset() == dst.offset() && x.sizes() == dst.sizes() && x.strides() == dst.strides();
      if (x.shares_storage(dst) && (!same || remapped)) aliased = true;
    } else if constexpr (SharedNode<X>) {
      self(self, x.expr, remapped);
    } else if constexpr (Node<X>) {
      const bool r = remapped || !prim::is_elementwise_op<typename X::op_type>;
      detail::apply_tuple([&](const auto&... c) { (self(self, c, r), ...); }, x.children);
    }
  };
  check(check, e, false);
  if constexpr (Expression<E> && !std::is_same_v<E, scalar<value_type_of<E>>>) {
    const std::optional<device> ed = source_device(e);
    if (ed && *ed != dst.device())
      throw device_error("tenet: cannot write a value computed on " + ed->str() + " into a tensor on " +
                         dst.device().str() + "; move one of them first (t.to(...))");
  }
  const auto es = e.sizes();
  const auto bs = broadcast_sizes<S::rank>(dst.sizes(), es);
  if (bs != dst.sizes())
    throw shape_error("tenet: cannot write a value of sizes " + sizes_text(es) + " into a tensor of sizes " +
                      sizes_text(dst.sizes()));
  bump_version(dst.storage().get());  // an in-place write: a backward that saved dst refuses to read it
  const auto ce = cast_to<T>(e);
  lower_on_backend<void>(dst.device(), ce, [&](auto b, auto& d, run_sink& s) {
    using B = decltype(b);
    using D = std::remove_cvref_t<decltype(d)>;
    if constexpr (Node<D> && shape_of<D>::rank == S::rank) {
      // a reduction, matmul or native composite at the root writes straight into a contiguous dst
      // (a view prim has no kernel: its view is copied by the pointwise path below)
      if constexpr (!prim::is_elementwise_op<typename D::op_type> && !prim::is_view_prim<typename D::op_type>) {
        if (!aliased && dst.is_contiguous() && es == dst.sizes()) {
          run_into_dst<Tensor<T, S>> run{dst};
          lower_node_with<B>(d, s, run);
          ++kernels_launched();
          return;
        }
      }
    }
    if (aliased) {
      auto value = lower_value<B>(d, s);
      // a bare view of dst evaluates to itself: copy it before writing
      auto tmp = value.shares_storage(dst) ? value.clone() : value;
      run_pointwise_on(dst, tmp);
    } else {
      run_pointwise_on(dst, lower_operand<B>(d, s));
    }
    ++kernels_launched();
  });
}

/// sort's values and indices from one sort of x along D, on x's backend.
template <std::int64_t D, class X, class V, class I>
void sort_both_into(const X& x, const V& values, const I& indices, bool descending) {
  on_backend<void>(x.device(), "sort", [&](auto b) {
    run_sort_both(b, x, prim::sort_<D, prim::sort_output::values>::template dim<X>, descending, values, indices);
  });
}

}  // namespace tenet::detail

namespace tenet {
/// The value of an expression now, as a Tensor of the expression's dtype and shape type
/// (`auto t = eval(a + b);`, where `auto t = a + b;` would stay lazy).
template <Expression E>
auto eval(const E& e) {
  if constexpr (TensorType<E>)
    return e;
  else
    return detail::evaluate(e);
}
}  // namespace tenet

#include <tenet/backend/backends.hpp>
#include <tenet/backend/training.hpp>  // the device side of training (autograd/device.hpp)
