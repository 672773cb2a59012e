#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CUDA backend's tag for decompose<>: what it runs whole (CUDA translation units only; the
// evaluator decomposes an expression on a CUDA device with it, one on the CPU with cpu_simd).
//
//   softmax / log_softmax over the last dim      one row kernel (backend/cuda/row_kernels.cuh)
//   layer_norm / rms_norm (aten::norm_last)      one row kernel, weight/bias of the input's dtype
//   their input gradient (aten::norm_last_grad)  one row kernel (rows up to 4096 vectors)
//   var over the last dim (aten::var_; std too)  one row kernel, one output per row
//   cross_entropy over rows, and its gradient    a block per row (backend/cuda/cross_entropy.cuh)
//   pointwise composites (gelu, sigmoid, ...)    inside the fused pointwise kernel (their apply)
//   conv2d, conv2d_weight (float types)          im2col + cuBLASLt (backend/cuda/conv.cuh)
//   max_pool2d                                   a thread per output (backend/cuda/conv.cuh)
// for float, double, float16 and bfloat16 (row kernels accumulate in float, or double for double).
// Everything else is decomposed into prims.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <string>
#include <tuple>
#include <string_view>

#include <tenet/backend/registry.hpp>
#include <tenet/decomp/decompose.hpp>
#include <tenet/decomp/activations.hpp>
#include <tenet/decomp/attention.hpp>
#include <tenet/decomp/cross_entropy.hpp>
#include <tenet/decomp/moments.hpp>
#include <tenet/decomp/norm.hpp>
#include <tenet/decomp/softmax.hpp>
#include <tenet/schedule/lower.hpp>
#include <tenet/prims/random.hpp>  // prim::uniform_ (a leaf of the fused kernels here)

namespace tenet::aten {
template <std::size_t K, bool Rms>
struct norm_last;  // decomp/norm.hpp
template <std::size_t K, bool Rms>
struct norm_last_grad;
struct conv2d;      // include/tenet/conv.hpp
struct conv2d_weight;
struct max_pool2d;  // include/tenet/conv.hpp
}  // namespace tenet::aten

namespace tenet::detail {

struct bias_act_pattern;  // backend/cuda/backend.cuh

/// The CUDA backend's policy type: fused pointwise kernels, row kernels, reductions, cuBLASLt
/// (its run functions: backend/cuda/backend.cuh).
struct cuda_gpu {
  static constexpr const char* name() { return "cuda_gpu"; }
  /// It has the device kernels of training (backend/cuda/autograd.cuh: run_sum_to, run_adam, ...):
  /// backend/training.hpp's fallbacks refuse to compile for it, so an overload that does not match
  /// is a compile error, not a device_error at run time.
  static constexpr bool has_training_kernels = true;
  static constexpr device_type device = device_type::cuda;
  using patterns = pattern_list<bias_act_pattern>;
  /// It decomposes and lowers every expression on a CUDA device, and runs every node: a composite
  /// it has no kernel for runs its decomposition, a prim without one throws (backend.cuh).
  template <class E>
  static constexpr bool decomposes() {
    return true;
  }
  template <class E>
  static constexpr bool evaluates() {
    return true;
  }
  template <class E>
  static constexpr bool runs_node() {
    return true;
  }
  [[noreturn]] static void cannot_run(std::string_view what) {
    throw device_error("tenet: internal: '" + std::string(what) + "' cannot run on CUDA");
  }
};

template <>
struct backend_of<device_type::cuda> {
  using type = cuda_gpu;
};

/// argmax / argmin read their input as a value on CUDA (scan_argreduce.cuh), not as a fused producer.
template <class Kind, bool KeepDim, auto... Dims>
inline constexpr bool takes_prologue<cuda_gpu, prim::reduce_<Kind, KeepDim, Dims...>, 0> = !prim::is_arg_kind<Kind>;

namespace cuda {
/// A uniform_ draw inside CUDA's fused kernels (prim_leaf below): element k of the draw (row-major
/// in its own extents) is computed where it is read (backend/cuda/random.cuh: pointwise_tree of this leaf), so
/// dropout's mask never goes through memory. The CPU's values, bit for bit.
template <class T, class S>
struct uniform_leaf {
  static constexpr bool is_expression = true;
  static constexpr bool cpu_evaluates = false;  // only CUDA's kernels read it (evaluate.hpp)
  using value_type = T;
  using shape_type = S;
  static constexpr std::size_t rank = S::rank;
  sizes_t<S::rank> extents{};
  std::uint64_t seed = 0, offset = 0;
  device placement = tenet::cpu;  // counted by expr_device, as the prim's
  sizes_t<S::rank> sizes() const { return extents; }
};
}  // namespace cuda

template <class T, class S>
struct prim_leaf<cuda_gpu, prim::uniform_<T, S>> {
  static constexpr bool applies = true;
  static cuda::uniform_leaf<T, S> make(const prim::uniform_<T, S>& op) {
    return {op.extents, op.seed, op.offset, op.placement};
  }
};

template <class T>
inline constexpr bool cuda_row_dtype = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                       std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

template <std::int64_t D, class C>
inline constexpr bool runs_natively<cuda_gpu, aten::softmax<D>, C> =
    rank_of<C> >= 1 && (D == -1 || D == static_cast<std::int64_t>(rank_of<C>) - 1) && cuda_row_dtype<value_type_of<C>>;
template <std::int64_t D, class C>
inline constexpr bool runs_natively<cuda_gpu, aten::log_softmax<D>, C> = runs_natively<cuda_gpu, aten::softmax<D>, C>;

/// var over the last dim alone (var<-1>, var<rank - 1>, or var() of a 1-D input): the var row
/// kernel (row_kernels.cuh), one read of the input. Other dims: the decomposition's reductions.
template <class C, auto... D>
constexpr bool var_over_last_dim() {
  constexpr auto r = static_cast<std::int64_t>(rank_of<C>);
  if constexpr (sizeof...(D) == 0) {
    return r == 1;
  } else if constexpr (sizeof...(D) == 1) {
    constexpr auto d = static_cast<std::int64_t>((D, ...));
    return r >= 1 && (d == -1 || d == r - 1);
  } else {
    return false;
  }
}
template <bool Keep, auto... D, class C>
inline constexpr bool runs_natively<cuda_gpu, aten::var_<Keep, D...>, C> =
    cuda_row_dtype<value_type_of<C>> && var_over_last_dim<C, D...>();

template <std::size_t K, bool Rms, class X, class... P>
inline constexpr bool runs_natively<cuda_gpu, aten::norm_last<K, Rms>, X, P...> =
    cuda_row_dtype<value_type_of<X>> && (std::is_same_v<value_type_of<P>, value_type_of<X>> && ...);

template <std::size_t K, bool Rms, class X, class W, class G>
inline constexpr bool runs_natively<cuda_gpu, aten::norm_last_grad<K, Rms>, X, W, G> =
    cuda_row_dtype<value_type_of<X>> && std::is_same_v<value_type_of<W>, value_type_of<X>> &&
    std::is_same_v<value_type_of<G>, value_type_of<X>>;
template <class X, class Tt>
inline constexpr bool runs_natively<cuda_gpu, aten::cross_entropy_rows, X, Tt> = cuda_row_dtype<value_type_of<X>>;
template <class X, class Tt, class G>
inline constexpr bool runs_natively<cuda_gpu, aten::cross_entropy_rows_grad, X, Tt, G> =
    cuda_row_dtype<value_type_of<X>>;

template <class X, class W>
inline constexpr bool runs_natively<cuda_gpu, aten::conv2d, X, W> =
    cuda_row_dtype<value_type_of<X>> && std::is_same_v<value_type_of<X>, value_type_of<W>>;
template <class X, class G>
inline constexpr bool runs_natively<cuda_gpu, aten::conv2d_weight, X, G> =
    cuda_row_dtype<value_type_of<X>> && std::is_same_v<value_type_of<X>, value_type_of<G>>;
template <class X>
inline constexpr bool runs_natively<cuda_gpu, aten::max_pool2d, X> = true;
// scaled_dot_product_attention and its backward: kept whole, so that a run_kernel overload
// (backend.cuh) runs the selection, then the tensor-core kernels (flash, memory_efficient: bf16 and
// fp16, backend/cuda/attention.cuh) or the decomposition (math).
template <class Forced, class... C>
inline constexpr bool runs_natively<cuda_gpu, aten::sdpa<Forced>, C...> = true;
template <class Forced, class... C>
inline constexpr bool runs_natively<cuda_gpu, aten::sdpa_grad<Forced>, C...> = true;
template <class E>
device expr_device(const E& e);  // backend/evaluate.hpp
template <class T>
inline constexpr std::uint8_t sdpa_kernels<cuda_gpu, T> = half_precision<T> ? 0b111 : 0b100;
/// float32 attention written under autocast runs in the autocast dtype (run_kernel, backend.cuh).
template <>
inline constexpr bool backend_autocasts<cuda_gpu> = true;
/// The CUDA attention kernels' limits: head dims up to 256, up to four batch dims before the
/// heads, a device of compute capability 8.0 or later (mma.sync on bf16 / fp16).
template <>
struct sdpa_kernel_limits<cuda_gpu> {
  template <class E>
  static std::string check(const E& e) {
    const auto& q = std::get<0>(e.children);
    const auto& v = std::get<2>(e.children);
    constexpr std::size_t R = rank_of<std::remove_cvref_t<decltype(q)>>;
    const std::int64_t E_ = q.sizes()[R - 1], Ev = v.sizes()[R - 1];
    if (E_ > 256 || Ev > 256)
      return "the head dims (E " + std::to_string(E_) + ", Ev " + std::to_string(Ev) + ") exceed 256, the CUDA kernels' limit";
    if (R > 7) return "q has " + std::to_string(R - 3) + " batch dims before the heads (the CUDA kernels take up to 4)";
    const device d = expr_device(q);
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d.index) != cudaSuccess || major < 8)
      return "the device's compute capability is below 8.0 (the CUDA kernels use bf16 / fp16 mma.sync)";
    return {};
  }
};

template <class Op, class... C>
  requires std::is_same_v<typename Op::group, prim::pointwise_composite_group>
inline constexpr bool runs_natively<cuda_gpu, Op, C...> = true;

}  // namespace tenet::detail

// --- linear + bias (+ relu / tanh-gelu) as one cuBLASLt call with an epilogue -----------------
namespace tenet::detail::cuda {

/// add_(matmul_(a, b), bias) or add_(bias, matmul_(a, b)): 2-D a and b, a 1-D Tensor bias, one
/// dtype cuBLASLt takes.
template <class E>
struct bias_add : std::false_type {};
template <class A, class B, class T, class S>
struct bias_add<node<prim::add_, node<prim::matmul_, A, B>, Tensor<T, S>>>
    : std::bool_constant<S::rank == 1 && (rank_of<A> == 2 || rank_of<A> == 3) && rank_of<B> == 2 && cuda_row_dtype<T> &&
                         std::is_same_v<value_type_of<node<prim::matmul_, A, B>>, T>> {
  static constexpr std::size_t mm = 0;
};
template <class A, class B, class T, class S>
struct bias_add<node<prim::add_, Tensor<T, S>, node<prim::matmul_, A, B>>>
    : bias_add<node<prim::add_, node<prim::matmul_, A, B>, Tensor<T, S>>> {
  static constexpr std::size_t mm = 1;
};

/// The elementwise trees that run as one GEMM with a cuBLASLt epilogue: bias_add, relu(bias_add)
/// (maximum_ with a scalar, checked to be 0 at run time) and gelu(bias_add, approximate_tanh). The
/// exact (erf) gelu is not cuBLASLt's GELU and is never fused.
enum class bias_act_kind { none, bias, relu, gelu_tanh };
template <class E>
struct bias_act {
  static constexpr bias_act_kind kind = bias_add<E>::value ? bias_act_kind::bias : bias_act_kind::none;
  static const E& add(const E& e) { return e; }
};
template <class X>
struct bias_act<node<aten::gelu<true>, X>> {
  static constexpr bias_act_kind kind = bias_add<X>::value ? bias_act_kind::gelu_tanh : bias_act_kind::none;
  static const X& add(const node<aten::gelu<true>, X>& e) { return std::get<0>(e.children); }
};
template <class X, class T>
struct bias_act<node<prim::maximum_, X, scalar<T>>> {
  static constexpr bias_act_kind kind = bias_add<X>::value ? bias_act_kind::relu : bias_act_kind::none;
  static const X& add(const node<prim::maximum_, X, scalar<T>>& e) { return std::get<0>(e.children); }
};

}  // namespace tenet::detail::cuda
