#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Eager evaluation: decompose for the tensor's backend, then run the plan.
//
//   decompose<cpu_simd>(e)   ATen ops -> prims (+ composites the CPU runs natively); closure checked
//   materialize(p)           every non-pointwise node (reduction, matmul, native composite) becomes a
//                            Tensor, children first; reductions take their pointwise child as a
//                            fused prologue
//   run_pointwise            the remaining elementwise tree, one fused loop
#include <cstdint>
#include <string>
#include <type_traits>

#include <tenet/autograd/record.hpp>  // ag::tracked: the autograd hook of evaluate
#include <tenet/backend/cpu/elementwise.hpp>
#include <tenet/backend/cpu/matmul.hpp>
#include <tenet/backend/cpu/reduce.hpp>
#include <tenet/backend/cpu/softmax.hpp>
#include <tenet/decomp/decompose.hpp>
#include <tenet/ops.hpp>

namespace tenet::detail {

/// The CPU backend: xsimd kernels, OpenMP threads, Eigen GEMM.
struct cpu_simd {
  static constexpr const char* name() { return "cpu_simd"; }
};

// The eligibility predicate of the native softmax: last dim, float or double.
template <std::int64_t D, class C>
inline constexpr bool runs_natively<cpu_simd, aten::softmax<D>, C> =
    (D == -1 || D == static_cast<std::int64_t>(rank_of<C>) - 1) &&
    (std::is_same_v<value_type_of<C>, float> || std::is_same_v<value_type_of<C>, double>);
template <std::int64_t D, class C>
inline constexpr bool runs_natively<cpu_simd, aten::log_softmax<D>, C> =
    runs_natively<cpu_simd, aten::softmax<D>, C>;

// Pointwise composites run inside the fused loop (their `apply`), every dtype.
template <class Op, class C>
  requires std::is_same_v<typename Op::group, prim::pointwise_composite_group>
inline constexpr bool runs_natively<cpu_simd, Op, C> = true;

template <class E>
using result_tensor_t = Tensor<value_type_of<E>, shape_of<E>>;

/// An op whose CPU value is a Tensor it makes itself, typically a strided view of its materialized
/// child (the view-like movement prims): `static Tensor<...> materialize_on_cpu(const E& e)`.
/// materialize() returns that Tensor instead of allocating a result and calling run_on_cpu_into.
template <class Op, class E>
concept materializes_on_cpu = requires(const E& e) {
  { Op::materialize_on_cpu(e) } -> TensorType;
};

template <class E>
auto to_tensor(const E& e);

template <class E>
auto materialize(const E& e) {
  if constexpr (SharedNode<E>) {
    if (!*e.cache) e.cache->emplace(to_tensor(e.expr));
    return **e.cache;
  } else if constexpr (!Node<E>) {
    return e;
  } else {
    using Op = typename E::op_type;
    if constexpr (prim::is_elementwise_op<Op>) {
      return std::apply([&](const auto&... c) { return make_node(e.op, materialize(c)...); }, e.children);
    } else if constexpr (materializes_on_cpu<Op, E>) {
      return Op::materialize_on_cpu(e);
    } else {
      result_tensor_t<E> out(e.sizes());
      Op::run_on_cpu_into(e, out);
      return out;
    }
  }
}

template <class E>
auto to_tensor(const E& e) {
  if constexpr (TensorType<E>) {
    return e;
  } else {
    auto m = materialize(e);
    using M = decltype(m);
    if constexpr (TensorType<M>) {
      return m;
    } else {
      result_tensor_t<E> out(e.sizes());
      cpu::run_pointwise(out, m);
      return out;
    }
  }
}

/// Empties the caches of the shared values in e (all copies of a shared value see it).
template <class E>
void reset_shared(const E& e) {
  if constexpr (SharedNode<E>) {
    e.cache->reset();
    reset_shared(e.expr);
  } else if constexpr (Node<E>) {
    std::apply([](const auto&... c) { (reset_shared(c), ...); }, e.children);
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
    std::apply([&](const auto&... c) { (visit_leaves(c, f), ...); }, e.children);
  }
}

template <Expression E>
auto evaluate_untracked(const E& e) {
  auto d = decompose<cpu_simd>(e);
  const shared_scope scope(d);
  using D = decltype(d);
  static_assert(is_closed<D, cpu_simd>(), "tenet: internal: the decomposition left an op that is neither a prim nor "
                                          "a composite the CPU backend runs");
  if constexpr (Node<D>) {
    if constexpr (materializes_on_cpu<typename D::op_type, D>) {
      // a view at the root: the result must be fresh contiguous storage, never a view of an input
      auto v = to_tensor(d);
      bool reads_input = false;
      visit_leaves(d, [&](const auto& leaf) { reads_input = reads_input || leaf.shares_storage(v); });
      return result_tensor_t<E>(reads_input || !v.is_contiguous() ? v.clone() : v);
    }
  }
  return result_tensor_t<E>(to_tensor(d));
}

/// The value of e; recorded for autograd when a leaf requires grad (autograd/record.hpp).
template <Expression E>
auto evaluate(const E& e) {
  return ag::tracked(e, [&] { return evaluate_untracked(e); });
}

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
      std::apply([&](const auto&... c) { (self(self, c, r), ...); }, x.children);
    }
  };
  check(check, e, false);
  const auto es = e.sizes();
  const auto bs = broadcast_sizes<S::rank>(dst.sizes(), es);
  if (bs != dst.sizes())
    throw shape_error("tenet: cannot write a value of sizes " + sizes_text(es) + " into a tensor of sizes " +
                      sizes_text(dst.sizes()));
  auto d = decompose<cpu_simd>(cast_to<T>(e));
  const shared_scope scope(d);
  using D = decltype(d);
  if constexpr (Node<D> && shape_of<D>::rank == S::rank) {
    // a reduction, matmul or native composite at the root writes straight into a contiguous dst
    // (a view-like op has no kernel: its view is copied by the pointwise path below)
    if constexpr (!prim::is_elementwise_op<typename D::op_type> && !materializes_on_cpu<typename D::op_type, D>) {
      if (!aliased && dst.is_contiguous() && es == dst.sizes()) {
        D::op_type::run_on_cpu_into(d, dst);
        return;
      }
    }
  }
  if (aliased) {
    auto value = to_tensor(d);
    // a bare view of dst evaluates to itself: copy it before writing
    auto tmp = value.shares_storage(dst) ? value.clone() : value;
    cpu::run_pointwise(dst, tmp);
  } else {
    cpu::run_pointwise(dst, materialize(d));
  }
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

// ---------------------------------------------------------------------------------------------
// Non-pointwise prims and native composites: how each runs on the CPU.
namespace tenet::prim {

template <class Kind, bool KeepDim, auto... Dims>
template <class E, class Out>
void reduce_<Kind, KeepDim, Dims...>::run_on_cpu_into(const E& e, const Out& out) {
  const auto& child = std::get<0>(e.children);
  using C = std::remove_cvref_t<decltype(child)>;
  detail::cpu::run_reduce<Kind>(out, detail::materialize(child), mask<C>());
}

template <class E, class Out>
void matmul_::run_on_cpu_into(const E& e, const Out& out) {
  auto a = detail::to_tensor(std::get<0>(e.children));
  auto b = detail::to_tensor(std::get<1>(e.children));
  using A = decltype(a);
  using B = decltype(b);
  if constexpr (A::rank == 1 && B::rank == 1) {
    detail::cpu::run_matmul(out.template reshape<1, 1>(), a.template unsqueeze<0>(), b.template unsqueeze<1>());
  } else if constexpr (A::rank == 1) {
    detail::cpu::run_matmul(out.template unsqueeze<-2>(), a.template unsqueeze<0>(), b);
  } else if constexpr (B::rank == 1) {
    detail::cpu::run_matmul(out.template unsqueeze<-1>(), a, b.template unsqueeze<1>());
  } else {
    detail::cpu::run_matmul(out, a, b);
  }
}

}  // namespace tenet::prim

namespace tenet::aten {
template <std::int64_t D>
template <class E, class Out>
void softmax<D>::run_on_cpu_into(const E& e, const Out& out) {
  detail::cpu::run_softmax_last<false>(out, detail::to_tensor(std::get<0>(e.children)).contiguous());
}
template <std::int64_t D>
template <class E, class Out>
void log_softmax<D>::run_on_cpu_into(const E& e, const Out& out) {
  detail::cpu::run_softmax_last<true>(out, detail::to_tensor(std::get<0>(e.children)).contiguous());
}
}  // namespace tenet::aten
