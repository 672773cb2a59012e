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

#include <optional>

#include <tenet/autograd/record.hpp>  // ag::tracked: the autograd hook of evaluate
#include <tenet/backend/cpu/elementwise.hpp>
#include <tenet/backend/cpu/gemm_epilogue.hpp>
#include <tenet/backend/cpu/matmul.hpp>
#include <tenet/backend/cpu/moments.hpp>
#include <tenet/backend/cpu/reduce.hpp>
#include <tenet/backend/cpu/rows.hpp>
#include <tenet/backend/cpu/softmax.hpp>
#include <tenet/decomp/decompose.hpp>
#include <tenet/ops.hpp>
#include <tenet/schedule/cse.hpp>
#include <tenet/schedule/fusion.hpp>
#if defined(__CUDACC__)
#include <tenet/backend/cuda/native.hpp>  // the cuda_gpu backend tag and what it runs whole
#endif

namespace tenet::detail {

/// Kernels the CPU evaluator has launched on this thread (pointwise loops, reductions, GEMMs,
/// row kernels, ...; views are not kernels). Tests hold it against the kernel plan.
inline std::int64_t& kernels_launched() {
  thread_local std::int64_t n = 0;
  return n;
}
/// Expressions evaluated on this thread (tenet::compile counts graph breaks with it).
inline std::int64_t& evaluations() {
  thread_local std::int64_t n = 0;
  return n;
}

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

// var (and std's variance) of float and double: one kernel (backend/cpu/moments.hpp).
template <bool Keep, auto... D, class C>
inline constexpr bool runs_natively<cpu_simd, aten::var_<Keep, D...>, C> =
    std::is_same_v<value_type_of<C>, float> || std::is_same_v<value_type_of<C>, double>;

// Pointwise composites run inside the fused loop (their `apply`), every dtype.
template <class Op, class C>
  requires std::is_same_v<typename Op::group, prim::pointwise_composite_group>
inline constexpr bool runs_natively<cpu_simd, Op, C> = true;

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
/// A copy: casts over tensor and scalar leaves (what TENET_CPU_KERNELS=0 still runs on the CPU).
template <class E>
constexpr bool is_copy_tree() {
  if constexpr (SharedNode<E>) {
    return is_copy_tree<std::remove_cvref_t<decltype(std::declval<const E&>().expr)>>();
  } else if constexpr (Node<E>) {
    return []<class Op, class... C>(std::type_identity<node<Op, C...>>) {
      return prim::is_convert_element_type<Op> && (is_copy_tree<C>() && ...);
    }(std::type_identity<E>{});
  } else {
    return TensorType<E> || std::is_same_v<E, scalar<value_type_of<E>>>;
  }
}
/// Whether this unit has CPU kernels for E: always, except that TENET_CPU_KERNELS=0 keeps copies only.
template <class E>
constexpr bool cpu_kernels_for() {
  return TENET_CPU_KERNELS || is_copy_tree<E>();
}
inline constexpr const char* cpu_kernels_off =
    "tenet: this translation unit was compiled with TENET_CPU_KERNELS=0: it has no CPU kernels except "
    "copies, and this expression is on the CPU; evaluate it on a CUDA device, or compile without "
    "TENET_CPU_KERNELS=0";

/// f(decomposition of e for the backend of device dev): cpu_simd, or in CUDA translation units
/// cuda_gpu for a CUDA device (backend/cuda/native.hpp says what it runs whole).
template <class E, class F>
decltype(auto) with_decomposition(const E& e, device dev, F&& f) {
#if defined(__CUDACC__)
  if (dev.type == device_type::cuda) return f(decompose_checked<cuda_gpu>(e));
#endif
  (void)dev;
  if constexpr (cpu_kernels_for<E>())
    return f(decompose_checked<cpu_simd>(e));
  else
    throw device_error(cpu_kernels_off);
}

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
device expr_device(const E& e);

// --- device dispatch: the CPU kernels here, the CUDA ones in translation units nvcc compiles ---
#if defined(__CUDACC__)
namespace cuda {
template <class E, class Out>
void run_into(const E& e, const Out& out);  // backend/cuda/evaluate.hpp
template <class T, class S, class E>
void run_pointwise(const Tensor<T, S>& out, const E& e);
}  // namespace cuda
#endif

/// False for a tree holding a leaf that only another backend evaluates (a generator leaf of
/// decompose.hpp's prim_leaf, marked `cpu_evaluates = false`): its CPU kernels are never
/// instantiated (such a tree comes from another backend's decomposition and runs there). False
/// too, except for copies, where TENET_CPU_KERNELS=0.
template <class E>
constexpr bool cpu_can_evaluate() {
  if constexpr (!cpu_kernels_for<E>()) {
    return false;
  } else if constexpr (SharedNode<E>) {
    return cpu_can_evaluate<std::remove_cvref_t<decltype(std::declval<const E&>().expr)>>();
  } else if constexpr (Node<E>) {
    return []<class Op, class... C>(std::type_identity<node<Op, C...>>) {
      return (cpu_can_evaluate<C>() && ...);
    }(std::type_identity<E>{});
  } else if constexpr (requires { E::cpu_evaluates; }) {
    return E::cpu_evaluates;
  } else {
    return true;
  }
}

/// out = e elementwise, on out's device (e's leaves are on it too).
template <class Out, class E>
void run_pointwise_on(const Out& out, const E& e) {
  const device d = out.device();
  if (d.is_cpu()) {
    if constexpr (cpu_can_evaluate<E>()) {
      cpu::run_pointwise(out, e);
      return;
    } else {
      throw device_error(TENET_CPU_KERNELS ? "tenet: internal: an expression decomposed for another backend reached the CPU"
                                           : cpu_kernels_off);
    }
  }
#if defined(__CUDACC__)
  if (d.type == device_type::cuda) {
    cuda::run_pointwise(out, e);
    return;
  }
#endif
  require_backend(d, "evaluating an expression");  // throws: this translation unit has no such backend
}
/// The non-elementwise node e written into out (fresh, contiguous), on out's device.
template <class E>
inline constexpr bool cpu_runs_node = false;
template <class Op, class... C>
inline constexpr bool cpu_runs_node<node<Op, C...>> =
    (Op::is_prim || runs_natively<cpu_simd, Op, C...>) && cpu_can_evaluate<node<Op, C...>>();
template <class E, class Out>
void run_into_on(const E& e, const Out& out) {
  const device d = out.device();
  if (d.is_cpu()) {
    if constexpr (cpu_runs_node<E>) {  // (a node decomposed for another backend never comes here)
      E::op_type::run_on_cpu_into(e, out);
      return;
    } else {
      throw device_error(TENET_CPU_KERNELS ? std::string("tenet: internal: '") + std::string(E::op_type::name) +
                                                 "' was decomposed for another backend than the CPU's"
                                           : std::string(cpu_kernels_off));
    }
  }
#if defined(__CUDACC__)
  if (d.type == device_type::cuda) {
    cuda::run_into(e, out);
    return;
  }
#endif
  require_backend(d, "evaluating an expression");
}

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
      return detail::apply_tuple([&](const auto&... c) { return make_node(e.op, materialize(c)...); }, e.children);
    } else if constexpr (materializes_on_cpu<Op, E>) {
      return Op::materialize_on_cpu(e);
    } else {
      return cse_or<result_tensor_t<E>>(e, [&] {
        result_tensor_t<E> out(e.sizes(), expr_device(e));
        run_into_on(e, out);
        ++kernels_launched();
        return out;
      });
    }
  }
}

/// e's elementwise tree with its epilogue matmul replaced by `product` (a view of the output the
/// GEMM writes) and every other non-elementwise child materialized.
template <class E, class P>
auto replace_epilogue_matmul(const E& e, const P& product) {
  if constexpr (Node<E>) {
    using Op = typename E::op_type;
    if constexpr (std::is_same_v<Op, prim::matmul_>) {
      return Tensor<value_type_of<E>, shape_of<E>>(product);
    } else if constexpr (prim::is_elementwise_op<Op> && epilogue_matmul_count<E>() == 1) {
      return detail::apply_tuple([&](const auto&... c) { return make_node(e.op, replace_epilogue_matmul(c, product)...); },
                        e.children);
    } else {
      return materialize(e);
    }
  } else {
    return materialize(e);
  }
}

/// Whether the elementwise tree e runs as one GEMM with e as its epilogue (see schedule/fusion.hpp):
/// the matmul's value is not broadcast by the tree, and both dims of the product exceed 1 (a
/// matrix-vector product takes Eigen's GEMV).
template <class E>
bool gemm_epilogue_applies(const E& e) {
  if constexpr (gemm_epilogue_candidate<E>()) {
    bool ok = false;
    visit_epilogue_matmul(e, [&](const auto& mm) {
      const auto ms = mm.sizes();
      const auto es = e.sizes();
      constexpr std::size_t R = rank_of<E>;
      std::int64_t rows = 1;
      for (std::size_t i = 0; i + 1 < R; ++i) rows *= ms[i];
      ok = ms == es && rows > 1 && ms[R - 1] > 1;
    });
    return ok && expr_device(e).is_cpu();  // the CPU's GEMM (other backends: their own fusion)
  } else {
    (void)e;
    return false;
  }
}

/// The GEMM-with-epilogue path of to_tensor (call only when gemm_epilogue_applies(e)).
template <class E>
result_tensor_t<E> run_gemm_with_epilogue(const E& e) {
  using M = epilogue_matmul_t<E>;
  using T = value_type_of<E>;
  constexpr std::size_t R = rank_of<E>;
  result_tensor_t<E> out(e.sizes());
  visit_epilogue_matmul(e, [&](const M& mm) {
    auto a0 = to_tensor(std::get<0>(mm.children));
    const auto b = to_tensor(std::get<1>(mm.children));
    constexpr std::size_t ra = decltype(a0)::rank;
    // x[..., M, K] with a 2-D weight: the leading dims are rows of one GEMM
    auto a = [&] {
      if constexpr (ra == 2) return a0;
      else return a0.is_contiguous() ? a0 : a0.contiguous();
    }();
    const std::int64_t K = a.sizes()[ra - 1];
    const std::int64_t ars = ra == 2 ? a.strides()[0] : K, acs = ra == 2 ? a.strides()[1] : 1;
    std::int64_t rows = 1;
    for (std::size_t i = 0; i + 1 < R; ++i) rows *= out.sizes()[i];
    const auto tree = replace_epilogue_matmul(e, out);
    cpu::run_gemm_epilogue<T>(out, tree, K ? a.data() : nullptr, ars, acs, K ? b.data() : nullptr, b.strides()[0],
                              b.strides()[1], rows, out.sizes()[R - 1], K);
  });
  ++kernels_launched();
  return out;
}

/// Runs the reduction-like node r into out (contiguous, r's sizes) with epilogue ep on its
/// finished outputs (backend/cpu/reduce.hpp, moments.hpp).
template <class Rd, class Out, class Ep>
void run_reduction_node(const Rd& r, const Out& out, const Ep& ep) {
  using Op = typename Rd::op_type;
  const auto& child = std::get<0>(r.children);
  using C = std::remove_cvref_t<decltype(child)>;
  if constexpr (requires { typename Op::kind; }) {
    cpu::run_reduce<typename Op::kind>(out, materialize(child), Op::template mask<C>(), ep);
  } else {
    cpu::run_var(out, materialize(child), Op::template mask<C>(), r.op.correction, ep);
  }
}

/// e with its epilogue reduction replaced by `value` (scalars kept): a tree over value's index space.
template <class E, class V>
auto replace_epilogue_reduction(const E& e, const V& value) {
  if constexpr (Node<E>) {
    if constexpr (is_reduction_kernel<typename E::op_type>) {
      return value;
    } else {
      return detail::apply_tuple([&](const auto&... c) { return make_node(e.op, replace_epilogue_reduction(c, value)...); },
                        e.children);
    }
  } else {
    return e;
  }
}

/// The reduction-with-epilogue path of to_tensor (reduce_epilogue_candidate<E>(), on the CPU): the
/// reduction writes out, and the tree runs in place on each block of finished outputs (read
/// through a flat view of out, written at the same index).
template <class E>
result_tensor_t<E> run_reduction_with_epilogue(const E& e) {
  using T = value_type_of<E>;
  result_tensor_t<E> out(e.sizes());
  const std::int64_t n = out.numel();
  const auto flat = Tensor<T, shape<dyn>>::from_storage(out.storage(), sizes_t<1>{n}, sizes_t<1>{1}, out.offset());
  const auto tree_expr = replace_epilogue_reduction(e, flat);
  using tree_t = cpu::pw<std::remove_cvref_t<decltype(tree_expr)>, 1>;
  const tree_t tree(tree_expr, sizes_t<1>{n});
  auto ep = [&tree](T* o, std::int64_t k0, std::int64_t k1) {
    tree_t t = tree;
    const std::int64_t idx[1] = {0};
    t.set_row(idx, 1);
    std::int64_t i = k0;
    if constexpr (tree_t::simd && !tree_t::mask && std::is_same_v<typename tree_t::lane, T>) {
      using B = xsimd::batch<T>;
      constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
      for (; i + W <= k1; i += W) t.template load<B>(i).store_unaligned(o + i);
    }
    for (; i < k1; ++i) o[i] = static_cast<T>(t.get(i));
  };
  visit_epilogue_reduction(e, [&](const auto& r) { run_reduction_node(r, out, ep); });
  cpu::check_kernel_flags();
  ++kernels_launched();
  return out;
}

template <class E>
auto to_tensor(const E& e) {
  if constexpr (TensorType<E>) {
    return e;
  } else {
    if constexpr (Node<E>) {
      if constexpr (prim::is_elementwise_op<typename E::op_type>) {
        // an elementwise tree becomes one kernel: the GEMM's epilogue or a pointwise loop
        return cse_or<result_tensor_t<E>>(e, [&] {
          if constexpr (gemm_epilogue_candidate<E>() && cpu_can_evaluate<E>()) {
            if (gemm_epilogue_applies(e)) return run_gemm_with_epilogue(e);
          }
          if constexpr (reduce_epilogue_candidate<E>() && cpu_can_evaluate<E>()) {
            if (expr_device(e).is_cpu()) return run_reduction_with_epilogue(e);
          }
#if defined(__CUDACC__)
          if constexpr (cuda::bias_act<E>::kind != cuda::bias_act_kind::none) {
            result_tensor_t<E> out;  // linear + bias (+ act) as one cuBLASLt call (backend/cuda/native.hpp)
            if (cuda::try_bias_act_gemm(e, out)) return out;
          }
#endif
          auto m = materialize(e);
          result_tensor_t<E> out(e.sizes(), expr_device(m));
          run_pointwise_on(out, m);
          ++kernels_launched();
          return out;
        });
      }
    }
    auto m = materialize(e);
    using M = decltype(m);
    if constexpr (TensorType<M>) {
      return m;
    } else {
      result_tensor_t<E> out(e.sizes(), expr_device(m));
      run_pointwise_on(out, m);
      ++kernels_launched();
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

template <Expression E>
auto evaluate_untracked(const E& e) {
  ++evaluations();
  // one device for the whole expression (or a device_error naming both); its backend decomposes
  return with_decomposition(e, expr_device(e), [&](auto d) -> result_tensor_t<E> {
  const shared_scope scope(d);
  const cse_scope cse;
  using D = decltype(d);
  if constexpr (Node<D>) {
    if constexpr (materializes_on_cpu<typename D::op_type, D>) {
      // a view at the root: the result must be fresh contiguous storage, never a view of an input
      auto v = to_tensor(d);
      bool reads_input = false;
      visit_leaves(d, [&](const auto& leaf) { reads_input = reads_input || leaf.shares_storage(v); });
      if (reads_input || !v.is_contiguous()) {
        ++kernels_launched();  // the copy
        return result_tensor_t<E>(v.clone());
      }
      return result_tensor_t<E>(v);
    }
  }
  return result_tensor_t<E>(to_tensor(d));
  });
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
  with_decomposition(cast_to<T>(e), dst.device(), [&](auto d) {
  const shared_scope scope(d);
  const cse_scope cse;
  using D = decltype(d);
  if constexpr (Node<D> && shape_of<D>::rank == S::rank) {
    // a reduction, matmul or native composite at the root writes straight into a contiguous dst
    // (a view-like op has no kernel: its view is copied by the pointwise path below)
    if constexpr (!prim::is_elementwise_op<typename D::op_type> && !materializes_on_cpu<typename D::op_type, D>) {
      if (!aliased && dst.is_contiguous() && es == dst.sizes()) {
        run_into_on(d, dst);
        ++kernels_launched();
        return;
      }
    }
  }
  if (aliased) {
    auto value = to_tensor(d);
    // a bare view of dst evaluates to itself: copy it before writing
    auto tmp = value.shares_storage(dst) ? value.clone() : value;
    run_pointwise_on(dst, tmp);
  } else {
    run_pointwise_on(dst, materialize(d));
  }
  ++kernels_launched();
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
template <bool Keep, auto... Dims>
template <class E, class Out>
void var_<Keep, Dims...>::run_on_cpu_into(const E& e, const Out& out) {
  const auto& child = std::get<0>(e.children);
  using C = std::remove_cvref_t<decltype(child)>;
  detail::cpu::run_var(out, detail::materialize(child), mask<C>(), e.op.correction);
}
template <std::int64_t D>
template <class E, class Out>
void softmax<D>::run_on_cpu_into(const E& e, const Out& out) {
  using T = value_type_of<E>;
  const std::int64_t L = rank_of<E> == 0 ? 1 : out.sizes()[rank_of<E> == 0 ? 0 : rank_of<E> - 1];
  detail::cpu::run_rows(out, detail::materialize(std::get<0>(e.children)), L,
                        [L](const T* a, T* y) { detail::cpu::softmax_row<false>(a, y, L); });
}
template <std::int64_t D>
template <class E, class Out>
void log_softmax<D>::run_on_cpu_into(const E& e, const Out& out) {
  using T = value_type_of<E>;
  const std::int64_t L = rank_of<E> == 0 ? 1 : out.sizes()[rank_of<E> == 0 ? 0 : rank_of<E> - 1];
  detail::cpu::run_rows(out, detail::materialize(std::get<0>(e.children)), L,
                        [L](const T* a, T* y) { detail::cpu::softmax_row<true>(a, y, L); });
}
}  // namespace tenet::aten

#if defined(__CUDACC__)
#include <tenet/backend/cuda/evaluate.hpp>
#endif
