#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CPU backend, cpu_simd: xsimd kernels, OpenMP threads, tenet's GEMM. This file is the whole
// of what the backend gives the evaluator (docs/adding_a_backend.md lists the parts):
//   1. the policy type: name, device type, fused patterns, which trees it can evaluate;
//   2. which ATen composites it runs natively (runs_natively), the rest being decomposed;
//   3. run_pointwise_kernel: one fused loop for an elementwise tree;
//   4. run_kernel: one overload per node kernel (the op's type selects it), operands lowered by
//      schedule/lower.hpp (a value, or the fused elementwise producer where takes_prologue);
//   5. run_pattern: its fused patterns (GEMM + epilogue, reduction + epilogue);
//   6. run_sort_both: sort's two results from one sort.
// The kernels themselves live beside it: elementwise.hpp, reduce.hpp, moments.hpp, matmul.hpp,
// gemm_epilogue.hpp, row_kernel.hpp, softmax.hpp, norm.hpp, conv.hpp, indexing.hpp, random.hpp,
// scan.hpp, sort.hpp.
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include <tenet/backend/cpu/attention.hpp>
#include <tenet/backend/cpu/conv.hpp>
#include <tenet/backend/cpu/elementwise.hpp>
#include <tenet/backend/cpu/gemm_epilogue.hpp>
#include <tenet/backend/cpu/indexing.hpp>
#include <tenet/backend/cpu/matmul.hpp>
#include <tenet/backend/cpu/moments.hpp>
#include <tenet/backend/cpu/norm.hpp>
#include <tenet/backend/cpu/random.hpp>
#include <tenet/backend/cpu/reduce.hpp>
#include <tenet/backend/cpu/row_kernel.hpp>
#include <tenet/backend/cpu/scan.hpp>
#include <tenet/backend/cpu/softmax.hpp>
#include <tenet/backend/cpu/sort.hpp>
#include <tenet/backend/registry.hpp>
#include <tenet/decomp/attention.hpp>
#include <tenet/decomp/decompose.hpp>
#include <tenet/prims/indexing.hpp>
#include <tenet/prims/iota.hpp>
#include <tenet/prims/random.hpp>
#include <tenet/prims/scan.hpp>
#include <tenet/prims/sort.hpp>
#include <tenet/backend/views.hpp>
#include <tenet/schedule/lower.hpp>

namespace tenet::aten {  // the ATen composites the CPU runs natively (decomp/softmax.hpp, decomp/norm.hpp; conv2d and max_pool2d: include/tenet/conv.hpp)
template <std::int64_t D>
struct softmax;
template <std::int64_t D>
struct log_softmax;
template <std::size_t K, bool Rms>
struct norm_last;
template <std::size_t K, bool Rms>
struct norm_last_grad;
struct conv2d;
struct max_pool2d;
}  // namespace tenet::aten

namespace tenet::detail {

struct cpu_simd;

// (The tree predicates below are class templates, not recursive constexpr functions: an
// instantiation is computed once per type, where nvcc's front end evaluates a recursive constexpr
// call anew at every use, once per path through the tree's type: exponential in shared subtrees.)

/// A copy: casts over tensor and scalar leaves (what TENET_CPU_KERNELS=0 still runs on the CPU).
template <class E>
struct copy_tree : std::bool_constant<TensorType<E> || std::is_same_v<E, scalar<value_type_of<E>>>> {};
template <class E, class S>
struct copy_tree<shared_node<E, S>> : copy_tree<E> {};
template <class Op, class... C>
struct copy_tree<node<Op, C...>> : std::bool_constant<prim::is_convert_element_type<Op> && (copy_tree<C>::value && ...)> {};
template <class E>
constexpr bool is_copy_tree() {
  return copy_tree<E>::value;
}
/// Whether this unit has CPU kernels for E: always, except that TENET_CPU_KERNELS=0 keeps copies only.
template <class E>
constexpr bool cpu_kernels_for() {
  if constexpr (TENET_CPU_KERNELS)
    return true;
  else
    return copy_tree<E>::value;
}
inline constexpr const char* cpu_kernels_off =
    "tenet: this translation unit was compiled with TENET_CPU_KERNELS=0: it has no CPU kernels except "
    "copies, and this expression is on the CPU; evaluate it on a CUDA device, or compile without "
    "TENET_CPU_KERNELS=0";

/// False for a tree holding a leaf that only another backend evaluates (a generator leaf of
/// decompose.hpp's prim_leaf, marked `cpu_evaluates = false`): its CPU kernels are never
/// instantiated (such a tree comes from another backend's decomposition and runs there). False
/// too, except for copies, where TENET_CPU_KERNELS=0.
template <class E>
struct cpu_evaluable_leaf : std::true_type {};
template <class E>
  requires requires { E::cpu_evaluates; }
struct cpu_evaluable_leaf<E> : std::bool_constant<E::cpu_evaluates> {};
template <class E>
struct cpu_evaluable : cpu_evaluable_leaf<E> {};
template <class E, class S>
struct cpu_evaluable<shared_node<E, S>> : cpu_evaluable<E> {};
template <class Op, class... C>
struct cpu_evaluable<node<Op, C...>> : std::bool_constant<(cpu_evaluable<C>::value && ...)> {};
template <class E>
constexpr bool cpu_can_evaluate() {
  if constexpr (!cpu_kernels_for<E>())
    return false;
  else
    return cpu_evaluable<E>::value;
}

template <class E>
inline constexpr bool cpu_runs_node = false;
template <class Op, class... C>
inline constexpr bool cpu_runs_node<node<Op, C...>> =
    (Op::is_prim || runs_natively<cpu_simd, Op, C...>) && cpu_can_evaluate<node<Op, C...>>();

/// The CPU backend's policy type.
struct cpu_simd {
  static constexpr const char* name() { return "cpu_simd"; }
  static constexpr device_type device = device_type::cpu;
  using patterns = pattern_list<gemm_epilogue_pattern, conv_epilogue_pattern, reduce_epilogue_pattern>;
  /// Whether an expression on the CPU is decomposed and lowered here (TENET_CPU_KERNELS=0: copies only).
  template <class E>
  static constexpr bool decomposes() {
    return cpu_kernels_for<E>();
  }
  /// Whether this backend can lower the (decomposed) tree E: not one holding another backend's leaves.
  template <class E>
  static constexpr bool evaluates() {
    return cpu_can_evaluate<E>();
  }
  /// Whether it runs the node E (a prim, or a composite it runs natively).
  template <class E>
  static constexpr bool runs_node() {
    return cpu_runs_node<E>;
  }
  /// The error for a node or tree it cannot run (another backend's decomposition reached it).
  [[noreturn]] static void cannot_run(std::string_view what) {
    throw device_error(TENET_CPU_KERNELS ? "tenet: internal: '" + std::string(what) +
                                               "' was decomposed for another backend than the CPU's"
                                         : std::string(cpu_kernels_off));
  }
};

template <>
struct backend_of<device_type::cpu> {
  using type = cpu_simd;
};

// --- 2. the composites it runs natively -------------------------------------------------------
// softmax / log_softmax over the last dim, float or double: one row kernel.
template <std::int64_t D, class C>
inline constexpr bool runs_natively<cpu_simd, aten::softmax<D>, C> =
    (D == -1 || D == static_cast<std::int64_t>(rank_of<C>) - 1) &&
    (std::is_same_v<value_type_of<C>, float> || std::is_same_v<value_type_of<C>, double>);
template <std::int64_t D, class C>
inline constexpr bool runs_natively<cpu_simd, aten::log_softmax<D>, C> = runs_natively<cpu_simd, aten::softmax<D>, C>;
// var (and std's variance) of float and double: one kernel (moments.hpp).
template <bool Keep, auto... D, class C>
inline constexpr bool runs_natively<cpu_simd, aten::var_<Keep, D...>, C> =
    std::is_same_v<value_type_of<C>, float> || std::is_same_v<value_type_of<C>, double>;
// layer_norm / rms_norm of float and double whose weight (and bias) have the input's dtype.
template <std::size_t K, bool Rms, class X, class... P>
inline constexpr bool runs_natively<cpu_simd, aten::norm_last<K, Rms>, X, P...> =
    (std::is_same_v<value_type_of<X>, float> || std::is_same_v<value_type_of<X>, double>) &&
    (std::is_same_v<value_type_of<P>, value_type_of<X>> && ...);
template <std::size_t K, bool Rms, class X, class W, class G>
inline constexpr bool runs_natively<cpu_simd, aten::norm_last_grad<K, Rms>, X, W, G> =
    (std::is_same_v<value_type_of<X>, float> || std::is_same_v<value_type_of<X>, double>) &&
    std::is_same_v<value_type_of<W>, value_type_of<X>> && std::is_same_v<value_type_of<G>, value_type_of<X>>;
// conv2d of float and double: im2col + GEMM (conv.hpp); max_pool2d: a direct loop, every dtype.
template <class X, class W>
inline constexpr bool runs_natively<cpu_simd, aten::conv2d, X, W> =
    std::is_same_v<value_type_of<X>, float> || std::is_same_v<value_type_of<X>, double>;
template <class X>
inline constexpr bool runs_natively<cpu_simd, aten::max_pool2d, X> = true;
// scaled_dot_product_attention: the tiled kernel (flash; memory_efficient with a mask) for the
// floating types, and math (the decomposition, run from the kernel below) for every input.
template <class Forced, class... C>
inline constexpr bool runs_natively<cpu_simd, aten::sdpa<Forced>, C...> = true;
template <class Forced, class... C>
inline constexpr bool runs_natively<cpu_simd, aten::sdpa_grad<Forced>, C...> = true;
template <class T>
inline constexpr std::uint8_t sdpa_kernels<cpu_simd, T> = is_floating_v<T> ? 0b111 : 0b100;
// Pointwise composites run inside the fused loop (their `apply`), every dtype and arity (gelu_backward
// takes two operands).
template <class Op, class... C>
  requires std::is_same_v<typename Op::group, prim::pointwise_composite_group>
inline constexpr bool runs_natively<cpu_simd, Op, C...> = true;

// --- 3. pointwise -----------------------------------------------------------------------------
template <class Out, class M>
void run_pointwise_kernel(cpu_simd, const Out& out, const M& tree) {
  cpu::run_pointwise(out, tree);
}

// --- 4. node kernels (out: fresh and contiguous, of the node's sizes) ------------------------
/// The static type of child I of node E (a kernel's mask and dim are computed from it).
template <class E, std::size_t I = 0>
using child_t = std::remove_cvref_t<std::tuple_element_t<I, std::remove_cvref_t<decltype(std::declval<const E&>().children)>>>;

template <class Kind, bool Keep, auto... D, class E, class Out, class X>
void run_kernel(cpu_simd, const prim::reduce_<Kind, Keep, D...>&, const E&, const Out& out, const X& x) {
  cpu::run_reduce<Kind>(out, x, prim::reduce_<Kind, Keep, D...>::template mask<child_t<E>>());
}

template <bool Keep, auto... D, class E, class Out, class X>
void run_kernel(cpu_simd, const aten::var_<Keep, D...>& op, const E&, const Out& out, const X& x) {
  cpu::run_var(out, x, aten::var_<Keep, D...>::template mask<child_t<E>>(), op.correction);
}

template <class E, class Out, class A, class B>
void run_kernel(cpu_simd, const prim::matmul_&, const E&, const Out& out, const A& a, const B& b) {
  if constexpr (A::rank == 1 && B::rank == 1)
    cpu::run_matmul(out.template reshape<1, 1>(), a.template unsqueeze<0>(), b.template unsqueeze<1>());
  else if constexpr (A::rank == 1)
    cpu::run_matmul(out.template unsqueeze<-2>(), a.template unsqueeze<0>(), b);
  else if constexpr (B::rank == 1)
    cpu::run_matmul(out.template unsqueeze<-1>(), a, b.template unsqueeze<1>());
  else
    cpu::run_matmul(out, a, b);
}

/// The last dim's extent of a row kernel's output (1 for a 0-dim one).
template <class E, class Out>
std::int64_t row_length(const Out& out) {
  if constexpr (rank_of<E> == 0)
    return 1;
  else
    return out.sizes()[rank_of<E> - 1];
}

template <std::int64_t D, class E, class Out, class X>
void run_kernel(cpu_simd, const aten::softmax<D>&, const E&, const Out& out, const X& x) {
  using T = value_type_of<E>;
  const std::int64_t L = row_length<E>(out);
  cpu::run_rows(out, x, L, [L](const T* a, T* y) { cpu::softmax_row<false>(a, y, L); });
}
template <std::int64_t D, class E, class Out, class X>
void run_kernel(cpu_simd, const aten::log_softmax<D>&, const E&, const Out& out, const X& x) {
  using T = value_type_of<E>;
  const std::int64_t L = row_length<E>(out);
  cpu::run_rows(out, x, L, [L](const T* a, T* y) { cpu::softmax_row<true>(a, y, L); });
}

/// layer_norm (x, w, b) / rms_norm (x, w) over the last dims: one row kernel, x's producer fused.
template <std::size_t K, bool Rms, class E, class Out, class X, class W, class... Bias>
void run_kernel(cpu_simd, const aten::norm_last<K, Rms>&, const E& e, const Out& out, const X& x, const W& w0,
                const Bias&... b0) {
  using T = value_type_of<E>;
  const auto w = w0.contiguous();
  const std::int64_t L = w.numel();
  const T* wp = w.data();
  const double eps = e.op.eps;
  if constexpr (Rms) {
    cpu::run_rows(out, x, L, [&](const T* a, T* y) { cpu::norm_row<true>(a, y, wp, static_cast<const T*>(nullptr), L, eps); });
  } else {
    const auto b = std::get<0>(std::tie(b0...)).contiguous();
    const T* bp = b.data();
    cpu::run_rows(out, x, L, [&](const T* a, T* y) { cpu::norm_row<false>(a, y, wp, bp, L, eps); });
  }
}

/// layer_norm's (rms_norm's) input gradient: one row kernel over contiguous x and g.
template <std::size_t K, bool Rms, class E, class Out, class X, class W, class G>
void run_kernel(cpu_simd, const aten::norm_last_grad<K, Rms>&, const E& e, const Out& out, const X& x0, const W& w0,
                const G& g0) {
  using T = value_type_of<E>;
  const auto x = x0.contiguous();
  const auto g = g0.contiguous();
  const auto w = w0.contiguous();
  const std::int64_t L = w.numel(), n = out.numel();
  if (n == 0 || L == 0) return;
  const T *xp = x.data(), *gp = g.data(), *wp = w.data();
  T* o = out.data();
  const double eps = e.op.eps;
  const std::int64_t rows = n / L;
#pragma omp parallel for schedule(static) if (rows > 1 && n >= 32768)
  for (std::int64_t r = 0; r < rows; ++r) cpu::norm_grad_row<Rms>(xp + r * L, gp + r * L, wp, o + r * L, L, eps);
}

/// conv2d: im2col + GEMM (conv.hpp).
template <class E, class Out, class X, class W>
void run_kernel(cpu_simd, const aten::conv2d&, const E& e, const Out& out, const X& x0, const W& w0) {
  const auto x = x0.contiguous();
  const auto w = w0.contiguous();
  const auto g = e.op.geometry(x.sizes(), w.sizes());
  cpu::run_conv2d(x.data(), w.data(), out.data(), g);
}

template <class T, class S, class E>
void assign(const Tensor<T, S>& dst, const E& e);  // backend/evaluate.hpp
template <Expression E>
auto evaluate_untracked(const E& e);  // backend/evaluate.hpp

/// A stage of a composite's staged decomposition (aten::sdpa::math_with): decomposed and evaluated
/// now, on the backend of its device.
struct evaluate_stage {
  template <class X>
  auto operator()(const X& x) const {
    return evaluate_untracked(x);
  }
};

/// The tiled kernels' problem for the attention op `op` (a forward's), and its operands laid over
/// the scores' sizes (q, o, g, the mask) or over the key/value heads (k, v).
template <std::size_t R>
struct attention_layout {
  cpu::attn_problem pr;
  sizes_t<R> scores{}, kv{};
  template <class X>
  auto operand(const X& t, bool key_side = false) const {
    return cpu::attn_operand_of(static_cast<const value_type_of<X>*>(t.data()), t.sizes(), t.strides(),
                                key_side ? kv : scores);
  }
};
template <class Forced, class Q, class K, class V, class... M>
attention_layout<rank_of<Q>> attention_layout_of(const aten::sdpa<Forced>& op, const Q& q, const K& k, const V& v,
                                                 const M&... m) {
  constexpr std::size_t R = rank_of<Q>;
  const auto d = op.dims(q, k, v, m...);
  attention_layout<R> a;
  a.pr.batch = d.batch, a.pr.hq = d.hq, a.pr.group = d.hkv == 0 ? 1 : d.hq / d.hkv;
  a.pr.L = d.L, a.pr.S = d.S, a.pr.E = d.E, a.pr.Ev = d.Ev;
  a.pr.scale = op.scale, a.pr.causal = op.is_causal;
  a.pr.dropout_p = op.dropout_p, a.pr.seed = op.seed, a.pr.offset = op.offset;
  a.scores = q.sizes();
  a.scores[R - 1] = d.S;  // (batch..., hq, L, S)
  a.kv = a.scores;
  if constexpr (R >= 3) a.kv[R - 3] = d.hkv;
  return a;
}

/// scaled_dot_product_attention: the variant select_sdpa picks (decomp/attention.hpp); flash and
/// memory_efficient run the tiled kernel (attention.hpp), math its decomposition in stages. The
/// body takes its operands as dyn_view (backend/views.hpp): one instantiation per dtype and rank.
/// lse: where the tiled kernel writes each score row's log-sum-exp for the backward (null: nowhere).
template <class Forced, class Out, class Q, class K, class V, class... M>
void run_sdpa(cpu_simd, const aten::sdpa<Forced>& op, sdpa_backend variant, cpu::attn_acc_t<value_type_of<Q>>* lse,
              const Out& out, const Q& q, const K& k, const V& v, const M&... m) {
  using T = value_type_of<Q>;
  if (variant == sdpa_backend::math) {
    assign(out, op.math_with(evaluate_stage{}, q, k, v, m...));
    return;
  }
  if constexpr (is_floating_v<T>) {
    const auto a = attention_layout_of(op, q, k, v, m...);
    const auto qo = a.operand(q), ko = a.operand(k, true), vo = a.operand(v, true);
    if constexpr (sizeof...(M) == 0) {
      cpu::attention_tiled<void>(a.pr, qo, ko, vo, cpu::attn_operand<T>{}, out.data(), lse);
    } else {
      using MT = value_type_of<std::tuple_element_t<0, std::tuple<M...>>>;
      cpu::attention_tiled<MT>(a.pr, qo, ko, vo, a.operand(m...), out.data(), lse);
    }
  }
}
template <class Forced, class E, class Out, class Q, class K, class V, class... M>
void run_kernel(cpu_simd b, const aten::sdpa<Forced>& op, const E& e, const Out& out, const Q& q, const K& k,
                const V& v, const M&... m) {
  using A = cpu::attn_acc_t<value_type_of<Q>>;
  const sdpa_backend variant = select_sdpa<cpu_simd>(e).variant;
  A* lse = nullptr;  // kept for the backward inside a recorded forward (a row per (batch, head, query))
  if (variant != sdpa_backend::math && v.sizes()[rank_of<V> - 1] > 0) {
    std::int64_t rows = 1;
    for (std::size_t i = 0; i + 1 < rank_of<Q>; ++i) rows *= q.sizes()[i];
    lse = sdpa_lse_buffer<A>(e, rows, out.device());
  }
  run_sdpa(b, op, variant, lse, dyn_view(out), dyn_view(q), dyn_view(k), dyn_view(v), dyn_view(m)...);
}

/// scaled_dot_product_attention's backward: the tiled kernel when the selection gives a tiled
/// variant, else the math backward in stages. The result is dq, dk, dv (and a mask's slot) flat.
template <class Forced, class Out, class Q, class K, class V, class O, class G, class... M>
void run_sdpa_grad(cpu_simd, const aten::sdpa_grad<Forced>& op, sdpa_backend variant, const Out& out, const Q& q,
                   const K& k, const V& v, const O& o, const G& g, const M&... m) {
  using T = value_type_of<Q>;
  if (variant == sdpa_backend::math) {
    assign(out, op.decompose_with(evaluate_stage{}, q, k, v, o, g, m...));
    return;
  }
  if constexpr (is_floating_v<T>) {
    const auto a = attention_layout_of(op.forward, q, k, v, m...);
    const auto qo = a.operand(q), ko = a.operand(k, true), vo = a.operand(v, true);
    const auto oo = a.operand(o), go = a.operand(g);
    T* dq = out.data();
    T* dk = dq + q.numel();
    T* dv = dk + k.numel();
    const auto* lse = sdpa_saved_lse<cpu::attn_acc_t<T>>(op, a.pr.batch * a.pr.hq * a.pr.L, out.device());
    if constexpr (sizeof...(M) == 0) {
      cpu::attention_backward_tiled<void>(a.pr, qo, ko, vo, oo, go, cpu::attn_operand<T>{}, dq, dk, dv, lse);
    } else {
      using MT = value_type_of<std::tuple_element_t<0, std::tuple<M...>>>;
      cpu::attention_backward_tiled<MT>(a.pr, qo, ko, vo, oo, go, a.operand(m...), dq, dk, dv, lse);
      // an additive mask's slot: its gradient is not wanted here (else math was selected)
      std::fill(dv + v.numel(), out.data() + out.numel(), T(0));
    }
  }
}
template <class Forced, class E, class Out, class Q, class K, class V, class O, class G, class... M>
void run_kernel(cpu_simd b, const aten::sdpa_grad<Forced>& op, const E& e, const Out& out, const Q& q, const K& k,
                const V& v, const O& o, const G& g, const M&... m) {
  run_sdpa_grad(b, op, select_sdpa<cpu_simd>(e).variant, dyn_view(out), dyn_view(q), dyn_view(k), dyn_view(v),
                dyn_view(o), dyn_view(g), dyn_view(m)...);
}

/// max_pool2d: one pass over each window, NaN propagating as amax does (conv.hpp).
template <class E, class Out, class X>
void run_kernel(cpu_simd, const aten::max_pool2d&, const E& e, const Out& out, const X& x) {
  using T = value_type_of<E>;
  cpu::run_max_pool2d(out.data(), x.data(), x.sizes(), x.strides(), e.op.plan, static_cast<T>(E::op_type::template lowest<T>()));
}

template <class Kind, std::int64_t Dim, class E, class Out, class X>
void run_kernel(cpu_simd, const prim::scan_<Kind, Dim>&, const E&, const Out& out, const X& x) {
  cpu::run_scan<Kind>(out, x, prim::scan_<Kind, Dim>::template dim<child_t<E>>);
}

template <std::int64_t Dim, prim::sort_output Output, class E, class Out, class X>
void run_kernel(cpu_simd, const prim::sort_<Dim, Output>& op, const E&, const Out& out, const X& x) {
  using C = child_t<E>;
  constexpr std::size_t d = prim::sort_<Dim, Output>::template dim<C>;
  if constexpr (Output == prim::sort_output::values)
    cpu::run_sort<value_type_of<C>, shape_of<C>, value_type_of<C>, shape_of<Out>, shape_of<Out>>(x, d, op.descending, &out, nullptr);
  else
    cpu::run_sort<value_type_of<C>, shape_of<C>, value_type_of<C>, shape_of<Out>, shape_of<Out>>(x, d, op.descending, nullptr, &out);
}

template <class T, class E, class Out>
void run_kernel(cpu_simd, const prim::iota_<T>& op, const E&, const Out& out) {
  cpu::run_iota(out, op);
}

template <class T, class S, class E, class Out>
void run_kernel(cpu_simd, const prim::uniform_<T, S>& op, const E&, const Out& out) {
  cpu::run_uniform(out.data(), out.numel(), op.seed, op.offset);
}

template <std::int64_t D, class E, class Out, class X, class I>
void run_kernel(cpu_simd, const prim::gather_<D>&, const E&, const Out& out, const X& x, const I& idx) {
  constexpr std::size_t d = prim::detail_indexing::norm_dim<X::rank, D>();
  cpu::run_gather(at_least_1d(out), at_least_1d(x), at_least_1d(idx), d);
}

template <std::int64_t D, prim::scatter_op Op, class E, class Out, class X, class I, class Src>
void run_kernel(cpu_simd, const prim::scatter_<D, Op>& op, const E&, const Out& out, const X& self, const I& idx,
                const Src& src) {
  constexpr std::size_t d = prim::detail_indexing::norm_dim<X::rank, D>();
  cpu::run_pointwise(out, self);
  const auto o1 = at_least_1d(out);
  const auto i1 = at_least_1d(idx);
  if constexpr (Src::rank == 0 && X::rank != 0)
    cpu::run_scatter<Op>(o1, i1, src, d, op.include_self);
  else
    cpu::run_scatter<Op>(o1, i1, at_least_1d(src), d, op.include_self);
}

template <std::size_t R, class E, class Out, class X>
void run_kernel(cpu_simd, const prim::pad_<R>& op, const E&, const Out& out, const X& x) {
  pad_into(op, x, out, [](const auto& dst, const auto& src) { cpu::run_pointwise(dst, src); });
}

// --- 5. fused patterns ------------------------------------------------------------------------
/// The GEMM with its epilogue tree (the tree reads the product through `out`, the tile just written).
template <class E, class Out, class A0, class B, class Tree>
void run_pattern(cpu_simd, gemm_epilogue_pattern, const E&, const Out& out, const A0& a0, const B& b, const Tree& tree) {
  using T = value_type_of<E>;
  constexpr std::size_t R = rank_of<E>;
  constexpr std::size_t ra = A0::rank;
  // x[..., M, K] with a 2-D weight: the leading dims are rows of one GEMM
  auto a = [&] {
    if constexpr (ra == 2) return a0;
    else return a0.is_contiguous() ? a0 : a0.contiguous();
  }();
  const std::int64_t K = a.sizes()[ra - 1];
  const std::int64_t ars = ra == 2 ? a.strides()[0] : K, acs = ra == 2 ? a.strides()[1] : 1;
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < R; ++i) rows *= out.sizes()[i];
  cpu::run_gemm_epilogue<T>(out, tree, K ? a.data() : nullptr, ars, acs, K ? b.data() : nullptr, b.strides()[0],
                            b.strides()[1], rows, out.sizes()[R - 1], K);
}

/// conv2d with its epilogue tree (batch norm in eval, relu, residual add, bias): the convolution
/// writes out, and the tree runs in place on each output image (or band of rows: im2col's) as
/// soon as the kernel has written it, on the thread that wrote it, reading the convolution's value through `out` at the index it
/// writes (the pointwise kernel's tree, as the GEMM's epilogue: the same values as the unfused
/// expression).
template <class E, class Out, class X0, class W0, class Tree>
void run_pattern(cpu_simd, conv_epilogue_pattern, const E& e, const Out& out, const X0& x0, const W0& w0,
                 const Tree& tree) {
  using T = value_type_of<E>;
  const auto x = x0.contiguous();
  const auto w = w0.contiguous();
  const auto g = epilogue_head_of<aten::conv2d>(e).op.geometry(x.sizes(), w.sizes());
  using tree_t = cpu::pointwise_tree<Tree, 4>;
  const tree_t t(tree, out.sizes());
  const cpu::pointwise_epilogue<T, tree_t, 4> rows{&t, out.sizes()};
  T* const y = out.data();
  // rows of out: (n, o, oy) flattened, ow columns each
  const auto band = [&](std::int64_t n, std::int64_t oy0, std::int64_t oy1) {
    if (oy1 <= oy0 || g.ow == 0) return;
    if (oy0 == 0 && oy1 == g.oh) {  // a whole image: one run of O * oh rows
      rows(y + n * g.O * g.oh * g.ow, g.ow, n * g.O * g.oh, 0, g.O * g.oh, g.ow);
      return;
    }
    for (std::int64_t o = 0; o < g.O; ++o) {
      const std::int64_t r0 = (n * g.O + o) * g.oh + oy0;
      rows(y + r0 * g.ow, g.ow, r0, 0, oy1 - oy0, g.ow);
    }
  };
  cpu::run_conv2d(x.data(), w.data(), y, g, cpu::conv_band_epilogue::of(band));
  cpu::check_kernel_flags();
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

/// The reduction writes out, and the tree runs in place on each block of finished outputs (read
/// through a flat view of out, written at the same index). x: the reduction's (fused) input.
template <class E, class Out, class X>
void run_pattern(cpu_simd, reduce_epilogue_pattern, const E& e, const Out& out, const X& x) {
  using T = value_type_of<E>;
  const std::int64_t n = out.numel();
  const auto flat = Tensor<T, shape<dyn>>::from_storage(out.storage(), sizes_t<1>{n}, sizes_t<1>{1}, out.offset());
  const auto tree_expr = replace_epilogue_reduction(e, flat);
  using tree_t = cpu::pointwise_tree<std::remove_cvref_t<decltype(tree_expr)>, 1>;
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
  using Rd = typename find_epilogue_reduction<E>::type;
  using Op = typename Rd::op_type;
  using C = child_t<Rd>;
  if constexpr (requires { typename Op::kind; })
    cpu::run_reduce<typename Op::kind>(out, x, Op::template mask<C>(), ep);
  else
    cpu::run_var(out, x, Op::template mask<C>(), epilogue_reduction_of(e).op.correction, ep);
  cpu::check_kernel_flags();
}

// --- 6. sort's two results from one sort ------------------------------------------------------
template <class X, class V, class I>
void run_sort_both(cpu_simd, const X& x, std::size_t dim, bool descending, const V& values, const I& indices) {
  cpu::run_sort(x, dim, descending, &values, &indices);
}

}  // namespace tenet::detail
