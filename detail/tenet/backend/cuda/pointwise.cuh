#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CUDA pointwise kernel: one kernel for a whole tree of elementwise prims (nvcc only).
//
// `pointwise_tree<E, R>` mirrors the expression E over an iteration space of rank R, as the CPU's: each
// Tensor leaf keeps a device pointer and its strides in that space (0 where it broadcasts), each
// node applies its prim's scalar `apply` (host and device code). The tree is passed to the kernel
// by value. The host coalesces dims as the CPU kernel does (cpu::coalesce); then
// - flat case (one dim, every stride 0 or 1, 16-byte aligned pointers): each thread handles
//   16-byte groups of output (four per loop step for 4- and 8-byte types, loaded before any is
//   computed), every unit-stride leaf is read with vector loads of its whole lane group;
// - any other layout: each thread turns its linear index into an index over the (coalesced) dims
//   and every leaf takes the dot product with its strides.
// Both loops are grid-stride loops over a grid sized to the card (SM count x blocks per SM).
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include <tenet/autocast.hpp>  // with_autocast_dtype
#include <tenet/backend/cpu/elementwise.hpp>  // cpu::coalesce (host code, reused)
#include <tenet/backend/node_kids.hpp>
#include <tenet/backend/cuda/runtime.hpp>
#include <tenet/expr/node.hpp>
#include <tenet/fast_divisor.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::cuda {

inline constexpr int pointwise_threads = 256;

/// The pointwise kernel's launch configuration on this thread: threads per block and the cap on
/// blocks per SM of its grid-stride grid (tenet::compile's max_autotune sets it per shape class).
/// 32 blocks of 256 threads per SM (four times what an SM holds at once, so each thread runs a few
/// loop steps and blocks that finish early are replaced): faster than 16 or 64 on an H200 for
/// every measured workload but dropout (docs/cuda.md, "Launch-parameter measurements").
struct pointwise_launch {
  int threads = pointwise_threads;
  int blocks_per_sm = 32;
};
inline pointwise_launch& pointwise_config() {
  thread_local pointwise_launch c;
  return c;
}
/// Pointwise kernels launched on this thread.
inline std::int64_t& pointwise_launches() {
  thread_local std::int64_t n = 0;
  return n;
}

/// 16-byte-or-more register group of N values of T (one vector load/store when aligned).
template <class T, int N>
struct alignas(sizeof(T) * N >= 16 ? 16 : sizeof(T) * N) lanes {
  T v[N];
};

/// N values a leaf loaded for the flat loop (a leaf's `group<N>`).
template <class T, int N>
struct value_group {
  T v[N];
  __device__ TENET_INLINE T operator[](int j) const { return v[j]; }
  /// x in every lane (a leaf broadcast along the flat dim).
  __device__ static TENET_INLINE value_group filled(T x) {
    value_group g;
#pragma unroll
    for (int j = 0; j < N; ++j) g.v[j] = x;
    return g;
  }
};

/// Paired evaluation of bfloat16 / float16 trees: the flat kernel computes its 16-bit output two
/// lanes at a time, as one 32-bit word (lane j in the low half). add, sub and mul of two 16-bit
/// operands then take one bf16x2 / f16x2 instruction for both lanes (H100: a bf16 add as float
/// math is two widenings, the add and a narrowing per lane). The result is the same bits: the float
/// sum, difference or product of two 16-bit values is exact or rounds innocuously before the
/// narrowing (24 >= 2 * 11 + 2 significand bits), so rounding it once to nearest even, as the
/// paired instruction does, is what the float path gives. Other prims take both lanes' operands
/// from the pair and apply their scalar `apply` to each.
template <class T>
__device__ TENET_INLINE std::uint32_t pack_pair(T lo, T hi) {
  return static_cast<std::uint32_t>(lo.bits) | (static_cast<std::uint32_t>(hi.bits) << 16);
}
template <class T>
struct lane_pair {
  T lo, hi;
};
template <class T>
__device__ TENET_INLINE lane_pair<T> unpack_pair(std::uint32_t w) {
  return {T::from_bits(static_cast<std::uint16_t>(w & 0xffffu)), T::from_bits(static_cast<std::uint16_t>(w >> 16))};
}
/// Whether P on two 16-bit T operands has a paired instruction.
template <class P, class T>
inline constexpr bool paired_prim =
    half_precision<T> && (std::is_same_v<P, prim::add_> || std::is_same_v<P, prim::sub_> || std::is_same_v<P, prim::mul_>);
template <class P, class T>
__device__ TENET_INLINE std::uint32_t paired_apply(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // bf16x2 arithmetic is sm_90; f16x2 since sm_53
  constexpr bool bf = std::is_same_v<T, bfloat16>;
  std::uint32_t r;
  if constexpr (std::is_same_v<P, prim::add_>) {
    if constexpr (bf) asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    else asm("add.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  } else if constexpr (std::is_same_v<P, prim::sub_>) {
    if constexpr (bf) asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    else asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  } else {
    if constexpr (bf) asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    else asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  }
  return r;
#else
  const auto x = unpack_pair<T>(a), y = unpack_pair<T>(b);
  return pack_pair(P::apply(x.lo, y.lo), P::apply(x.hi, y.hi));
#endif
}
/// Lanes j and j + 1 of a loaded group: from its pair where it has one, else lane by lane.
template <class G>
__device__ TENET_INLINE auto group_lanes(const G& g, int j) {
  using V = std::remove_cvref_t<decltype(g[j])>;
  if constexpr (requires { g.pair(j); }) return unpack_pair<V>(g.pair(j));
  else return lane_pair<V>{g[j], g[j + 1]};
}
template <class G>
__device__ TENET_INLINE std::uint32_t group_pair(const G& g, int j) {
  if constexpr (requires { g.pair(j); }) return g.pair(j);
  else return pack_pair(g[j], g[j + 1]);
}

template <class E, std::size_t R>
struct pointwise_tree;

/// Integer div / remainder / fmod nodes check their divisor: a zero writes the device's fault
/// record (runtime.hpp), and the host raises value_error at its next wait for the device, as the
/// CPU backend raises it after its loop. (The prims' `note_division_by_zero` only reaches the
/// host's flag.) Other nodes carry nothing: an empty base.
template <class P, class V>
inline constexpr bool checks_divisor = (std::is_same_v<P, prim::div_> || std::is_same_v<P, prim::remainder_> ||
                                        std::is_same_v<P, prim::fmod_>)&&std::is_integral_v<compute_t<V>>;
template <bool Check>
struct divisor_check {
  template <class P>
  void bind() {}
  template <class B>
  __device__ TENET_INLINE void check(const B&) const {}
};
template <>
struct divisor_check<true> {
  fault_record* rec = nullptr;
  const char* op = nullptr;
  template <class P>
  void bind() {
    int dev = 0;
    TENET_CUDA_CHECK(cudaGetDevice(&dev));
    rec = fault_record_for_launch(dev);
    op = P::name.data();  // a string literal: null-terminated, static storage
  }
  template <class B>
  __device__ TENET_INLINE void check(const B& b) const {
    if (b == B(0) && atomicCAS(&rec->flag, 0ull, fault_zero_divisor) == 0ull) rec->op = op;
  }
};

/// Tensor leaf.
template <class T, class S, std::size_t R>
struct pointwise_tree<Tensor<T, S>, R> {
  using value_type = T;
  const T* base;
  std::int64_t st[R];

  pointwise_tree(const Tensor<T, S>& t, const sizes_t<R>& out) : base(t.numel() ? t.data() : nullptr), st{} {
    constexpr std::size_t r = S::rank;
    static_assert(r <= R);
    for (std::size_t i = 0; i < R; ++i) {
      if (i + r < R) continue;
      const std::size_t k = i + r - R;
      st[i] = t.sizes()[k] == out[i] ? t.strides()[k] : 0;
    }
  }
  template <class F>
  void for_each_strides(F&& f) {
    f(st);
  }
  template <class F>
  void for_each_leaf(F&& f) const {
    f(static_cast<const void*>(base), sizeof(T), st);
  }
  __device__ TENET_INLINE T at(const std::int64_t* idx, int nd) const {
    std::int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += idx[d] * st[d];
    return base[off];
  }
  /// Flat layout: element i (stride 0 or 1).
  __device__ TENET_INLINE T flat(std::int64_t i) const { return st[0] ? base[i] : base[0]; }
  /// Flat layout: N elements from i, one vector load when the stride is 1.
  template <int N>
  using group = value_group<T, N>;
  template <int N>
  __device__ TENET_INLINE group<N> load(std::int64_t i) const {
    if (!st[0]) return group<N>::filled(base[0]);
    return vector_at<N>(base + i);
  }
  /// Rows layout (the pointwise rows mode): N elements from row (i0, i1, i2), column j, at
  /// strides st[0], st[1], st[2] on the row dims and st[R - 1] (0 or 1) on the vector dim; row
  /// indices past the layout's row dims are 0.
  template <int N>
  __device__ TENET_INLINE group<N> load_rows(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t j) const {
    const T* p = base + i0 * st[0];
    if constexpr (R >= 2) p += i1 * st[1];
    if constexpr (R >= 3) p += i2 * st[2];
    if (!st[R - 1]) return group<N>::filled(p[0]);
    return vector_at<N>(p + j);
  }
  /// Two-dim layout (reductions, reduce.hpp): N elements from (i0, i1) at stride st[0] on the
  /// outer dim and st[R - 1] (0 or 1) on the vector dim.
  template <int N>
  __device__ TENET_INLINE group<N> load_at(std::int64_t i0, std::int64_t i1) const {
    return load_rows<N>(i0, 0, 0, i1);
  }
  /// N elements from p, one vector load (p aligned to the group's size).
  template <int N>
  __device__ static TENET_INLINE group<N> vector_at(const T* p) {
    group<N> g;
    const lanes<T, N> l = *reinterpret_cast<const lanes<T, N>*>(p);
#pragma unroll
    for (int j = 0; j < N; ++j) g.v[j] = l.v[j];
    return g;
  }
};

/// Scalar leaf.
template <class T, std::size_t R>
struct pointwise_tree<scalar<T>, R> {
  using value_type = T;
  T value;
  pointwise_tree(const scalar<T>& s, const sizes_t<R>&) : value(s.value) {}
  template <class F>
  void for_each_strides(F&&) {}
  template <class F>
  void for_each_leaf(F&&) const {}
  __device__ TENET_INLINE T at(const std::int64_t*, int) const { return value; }
  __device__ TENET_INLINE T flat(std::int64_t) const { return value; }
  template <int N>
  struct group {
    T v;
    __device__ TENET_INLINE T operator[](int) const { return v; }
  };
  template <int N>
  __device__ TENET_INLINE group<N> load(std::int64_t) const {
    return group<N>{value};
  }
  template <int N>
  __device__ TENET_INLINE group<N> load_at(std::int64_t, std::int64_t) const {
    return group<N>{value};
  }
  template <int N>
  __device__ TENET_INLINE group<N> load_rows(std::int64_t, std::int64_t, std::int64_t, std::int64_t) const {
    return group<N>{value};
  }
};

/// P applied to its operands' values as Out; a divisor is checked first where P divides integers
/// (the two-operand overload). A free function: its name carries P and the value types only.
template <class Out, class P, class Check, class... V>
__device__ TENET_INLINE Out node_apply(const Check&, const V&... v) {
  return P::apply(v...);
}
template <class Out, class P, class Check, class A, class B>
__device__ TENET_INLINE Out node_apply(const Check& c, const A& a, const B& b) {
  c.check(b);
  return P::apply(a, b);
}

/// Elementwise node.
template <class P, class... C, std::size_t R>
struct pointwise_tree<node<P, C...>, R> : divisor_check<checks_divisor<P, typename node<P, C...>::value_type>> {
  using value_type = typename node<P, C...>::value_type;
  using check_t = divisor_check<checks_divisor<P, value_type>>;
  static constexpr std::size_t arity = sizeof...(C);
  node_kids<pointwise_tree<C, R>...> kids;

  pointwise_tree(const node<P, C...>& n, const sizes_t<R>& out) : pointwise_tree(n, out, std::index_sequence_for<C...>{}) {}
  template <std::size_t... I>
  pointwise_tree(const node<P, C...>& n, const sizes_t<R>& out, std::index_sequence<I...>)
      : kids{pointwise_tree<C, R>(std::get<I>(n.children), out)...} {
    this->template bind<P>();
  }
  template <class F>
  void for_each_strides(F&& f) {
    kids.a.for_each_strides(f);
    if constexpr (arity > 1) kids.b.for_each_strides(f);
    if constexpr (arity > 2) kids.c.for_each_strides(f);
  }
  template <class F>
  void for_each_leaf(F&& f) const {
    kids.a.for_each_leaf(f);
    if constexpr (arity > 1) kids.b.for_each_leaf(f);
    if constexpr (arity > 2) kids.c.for_each_leaf(f);
  }
  __device__ TENET_INLINE value_type at(const std::int64_t* idx, int nd) const {
    const check_t& c = *this;
    if constexpr (arity == 1) return node_apply<value_type, P>(c, kids.a.at(idx, nd));
    else if constexpr (arity == 2) return node_apply<value_type, P>(c, kids.a.at(idx, nd), kids.b.at(idx, nd));
    else return node_apply<value_type, P>(c, kids.a.at(idx, nd), kids.b.at(idx, nd), kids.c.at(idx, nd));
  }
  __device__ TENET_INLINE value_type flat(std::int64_t i) const {
    const check_t& c = *this;
    if constexpr (arity == 1) return node_apply<value_type, P>(c, kids.a.flat(i));
    else if constexpr (arity == 2) return node_apply<value_type, P>(c, kids.a.flat(i), kids.b.flat(i));
    else return node_apply<value_type, P>(c, kids.a.flat(i), kids.b.flat(i), kids.c.flat(i));
  }

  /// A group evaluates lazily from its children's loaded groups.
  template <int N>
  struct group : check_t {
    node_kids<typename pointwise_tree<C, R>::template group<N>...> g;
    __device__ TENET_INLINE value_type operator[](int j) const {
      const check_t& c = *this;
      if constexpr (arity == 1) return node_apply<value_type, P>(c, g.a[j]);
      else if constexpr (arity == 2) return node_apply<value_type, P>(c, g.a[j], g.b[j]);
      else return node_apply<value_type, P>(c, g.a[j], g.b[j], g.c[j]);
    }
    /// Lanes j and j + 1 as one word (16-bit floating nodes; see paired_apply).
    __device__ TENET_INLINE std::uint32_t pair(int j) const
      requires half_precision<value_type>
    {
      if constexpr (paired_prim<P, value_type> &&
                    (std::is_same_v<typename pointwise_tree<C, R>::value_type, value_type> && ...)) {
        return paired_apply<P, value_type>(group_pair(g.a, j), group_pair(g.b, j));  // add, sub, mul: two operands
      } else {
        const check_t& c = *this;
        if constexpr (arity == 1) {
          const auto a = group_lanes(g.a, j);
          return pack_pair(node_apply<value_type, P>(c, a.lo), node_apply<value_type, P>(c, a.hi));
        } else if constexpr (arity == 2) {
          const auto a = group_lanes(g.a, j);
          const auto b = group_lanes(g.b, j);
          return pack_pair(node_apply<value_type, P>(c, a.lo, b.lo), node_apply<value_type, P>(c, a.hi, b.hi));
        } else {
          const auto a = group_lanes(g.a, j);
          const auto b = group_lanes(g.b, j);
          const auto d = group_lanes(g.c, j);
          return pack_pair(node_apply<value_type, P>(c, a.lo, b.lo, d.lo), node_apply<value_type, P>(c, a.hi, b.hi, d.hi));
        }
      }
    }
  };
  template <int N>
  __device__ TENET_INLINE group<N> load(std::int64_t i) const {
    const check_t& c = *this;
    if constexpr (arity == 1) return group<N>{c, {kids.a.template load<N>(i)}};
    else if constexpr (arity == 2) return group<N>{c, {kids.a.template load<N>(i), kids.b.template load<N>(i)}};
    else return group<N>{c, {kids.a.template load<N>(i), kids.b.template load<N>(i), kids.c.template load<N>(i)}};
  }
  template <int N>
  __device__ TENET_INLINE group<N> load_rows(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t j) const {
    const check_t& c = *this;
    if constexpr (arity == 1) return group<N>{c, {kids.a.template load_rows<N>(i0, i1, i2, j)}};
    else if constexpr (arity == 2)
      return group<N>{c, {kids.a.template load_rows<N>(i0, i1, i2, j), kids.b.template load_rows<N>(i0, i1, i2, j)}};
    else
      return group<N>{c, {kids.a.template load_rows<N>(i0, i1, i2, j), kids.b.template load_rows<N>(i0, i1, i2, j),
                          kids.c.template load_rows<N>(i0, i1, i2, j)}};
  }
  template <int N>
  __device__ TENET_INLINE group<N> load_at(std::int64_t i0, std::int64_t i1) const {
    return load_rows<N>(i0, 0, 0, i1);
  }
};

/// Whether a pointwise_tree draws random numbers (random.cuh specializes it for its uniform leaf).
template <class D>
struct dpw_draws : std::false_type {};
template <class P, class... C, std::size_t R>
struct dpw_draws<pointwise_tree<node<P, C...>, R>> : std::bool_constant<(dpw_draws<pointwise_tree<C, R>>::value || ...)> {};
template <class D>
struct dpw_is_tensor_leaf : std::false_type {};
template <class U, class S, std::size_t R>
struct dpw_is_tensor_leaf<pointwise_tree<Tensor<U, S>, R>> : std::true_type {};

/// 16-byte groups each thread keeps in flight per loop step of the flat kernel. 16-bit outputs: 1
/// (more groups cost registers and warps where bf16 is bound by arithmetic). 4- and 8-byte
/// outputs: 4, except a plain copy (a tensor leaf) 8 and a tree that draws random numbers
/// (Philox: many registers per group) 2. The figures behind each choice: docs/cuda.md,
/// "Launch-parameter measurements".
template <class T, class Tree>
inline constexpr int flat_groups_per_step =
    sizeof(T) < 4 ? 1 : dpw_is_tensor_leaf<Tree>::value ? 8 : dpw_draws<Tree>::value ? 2 : 4;

/// Stores group v (of a tree whose values are V) as N elements of T at p (16-byte aligned).
template <class T, class V, int N, class G>
__device__ TENET_INLINE void store_group(T* p, const G& v) {
  if constexpr (half_precision<T> && std::is_same_v<V, T>) {
    lanes<std::uint32_t, N / 2> o;  // two lanes per word (paired_apply)
#pragma unroll
    for (int j = 0; j < N / 2; ++j) o.v[j] = group_pair(v, 2 * j);
    *reinterpret_cast<lanes<std::uint32_t, N / 2>*>(p) = o;
  } else {
    lanes<T, N> o;
#pragma unroll
    for (int j = 0; j < N; ++j) o.v[j] = static_cast<T>(v[j]);
    *reinterpret_cast<lanes<T, N>*>(p) = o;
  }
}

template <class T, class Tree>
__global__ void pointwise_flat_kernel(T* __restrict__ out, Tree tree, std::int64_t n) {
  constexpr int N = 16 / sizeof(T) > 0 ? static_cast<int>(16 / sizeof(T)) : 1;
  constexpr int U = flat_groups_per_step<T, Tree>;
  const std::int64_t groups = n / N;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x * U;
  // a block's step covers U * blockDim consecutive groups, thread t takes t, t + blockDim, ...:
  // every load of the U is coalesced across the warp, and all U are issued before any is used
  for (std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * blockDim.x * U + threadIdx.x; b < groups; b += step) {
    typename Tree::template group<N> v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t g = b + static_cast<std::int64_t>(u) * blockDim.x;
      if (g < groups) v[u] = tree.template load<N>(g * N);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t g = b + static_cast<std::int64_t>(u) * blockDim.x;
      if (g < groups) store_group<T, typename Tree::value_type, N>(out + g * N, v[u]);
    }
  }
  // the tail (fewer than N elements)
  const std::int64_t t = groups * N + static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n) out[t] = static_cast<T>(tree.flat(t));
}

template <class T, std::size_t R>
struct out_layout {
  std::int64_t sizes[R];
  std::int64_t st[R];
  int nd;
  // rows mode: the second and third row dims (1: none) and their strides
  std::int64_t rows_b = 1, rows_b_st = 0, rows_c = 1, rows_c_st = 0;
  fast_divisor per_row_div, rows_b_div, rows_c_div;  // rows mode: by the groups per row, rows_b, rows_c
};

/// Any layout: an index per element. lay.nd == -2 is the rows layout instead: rows (a, b, c) of
/// lay.sizes[0] x lay.rows_b x lay.rows_c at output strides lay.st[0], lay.rows_b_st,
/// lay.rows_c_st (rows_b, rows_c 1: fewer row dims), lay.sizes[1] columns a whole number of
/// 16-byte groups, every leaf's column stride 0 or 1, read with load_rows (a row bias; a
/// per-channel scale over N, C, H x W; attention's (B, H, T, D) heads read from a (B, T, 3C)
/// projection): groups as in the flat kernel, each group's row and column from one division, or
/// with more row dims from 32-bit multiply-highs (fast_divisor; fewer than 2^30 groups), which
/// take the per-channel case to about 60% of a 64-bit division's time (docs/cuda.md,
/// "Launch-parameter measurements").
template <class T, std::size_t R, class Tree>
__global__ void pointwise_strided_kernel(T* __restrict__ out, Tree tree, out_layout<T, R> lay, std::int64_t n) {
  if (lay.nd == -2) {
    constexpr int N = 16 / sizeof(T) > 0 ? static_cast<int>(16 / sizeof(T)) : 1;
    constexpr int U = flat_groups_per_step<T, Tree>;
    const std::int64_t per_row = lay.sizes[1] / N, B = lay.rows_b, C = lay.rows_c;
    const std::int64_t groups = lay.sizes[0] * B * C * per_row;
    const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x * U;
    for (std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * blockDim.x * U + threadIdx.x; b < groups; b += step) {
      typename Tree::template group<N> v[U];
      std::int64_t at[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const std::int64_t g = b + static_cast<std::int64_t>(u) * blockDim.x;
        std::int64_t i0, i1 = 0, i2 = 0, j;
        if (B != 1 || C != 1) {  // two or three row dims: 32-bit multiply-highs (g is under 2^31: run_pointwise)
          const auto g32 = static_cast<std::uint32_t>(g);
          const std::uint32_t i = lay.per_row_div.div(g32);
          j = static_cast<std::int64_t>(g32 - i * static_cast<std::uint32_t>(per_row)) * N;
          const std::uint32_t ab = C != 1 ? lay.rows_c_div.div(i) : i;
          i2 = i - ab * static_cast<std::uint32_t>(C);
          const std::uint32_t a = lay.rows_b_div.div(ab);
          i0 = a, i1 = ab - a * static_cast<std::uint32_t>(B);
        } else {  // one: a plain division (faster here, H200: 2720 against 2484 GB/s for x + bias)
          i0 = g / per_row, j = (g - i0 * per_row) * N;
        }
        at[u] = i0 * lay.st[0] + i1 * lay.rows_b_st + i2 * lay.rows_c_st + j;
        if (g < groups) v[u] = tree.template load_rows<N>(i0, i1, i2, j);
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (b + static_cast<std::int64_t>(u) * blockDim.x < groups)
          store_group<T, typename Tree::value_type, N>(out + at[u], v[u]);
    }
    return;
  }
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    std::int64_t idx[R];
    std::int64_t rem = i, off = 0;
    for (int d = lay.nd - 1; d >= 0; --d) {
      const std::int64_t q = rem / lay.sizes[d];
      idx[d] = rem - q * lay.sizes[d];
      rem = q;
      off += idx[d] * lay.st[d];
    }
    out[off] = static_cast<T>(tree.at(idx, lay.nd));
  }
}

/// A copy whose source (a tensor leaf) is transposed against its destination over the last two
/// dims of the coalesced space [B,] M, N (the source's unit stride on M, the destination's on N):
/// 32 x 32 tiles through shared memory, read along M and written along N, so that both sides
/// coalesce (the strided kernel reads a column of the tile per warp). Block (32, 8); grid-stride
/// over the tiles of every batch.
template <class T, std::size_t R, class Leaf>
__global__ void transpose_copy_kernel(T* __restrict__ out, Leaf leaf, out_layout<T, R> lay) {
  __shared__ alignas(16) unsigned char raw[32 * 33 * sizeof(T)];  // raw: T may have a constructor
  T(*tile)[33] = reinterpret_cast<T(*)[33]>(raw);
  const bool batched = lay.nd == 3;
  const std::int64_t M = lay.sizes[lay.nd - 2], N = lay.sizes[lay.nd - 1];
  const std::int64_t src_b = batched ? leaf.st[0] : 0, src_n = leaf.st[lay.nd - 1];
  const std::int64_t dst_b = batched ? lay.st[0] : 0, dst_m = lay.st[lay.nd - 2];
  const std::int64_t tm = (M + 31) / 32, tn = (N + 31) / 32, tiles = (batched ? lay.sizes[0] : 1) * tm * tn;
  for (std::int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const std::int64_t b = t / (tm * tn), i0 = (t / tn) % tm * 32, j0 = t % tn * 32;
    const std::int64_t i = i0 + threadIdx.x;  // the source's unit-stride dim
#pragma unroll
    for (int k = 0; k < 32; k += 8) {
      const std::int64_t j = j0 + threadIdx.y + k;
      if (i < M && j < N) tile[threadIdx.y + k][threadIdx.x] = static_cast<T>(leaf.base[b * src_b + i + j * src_n]);
    }
    __syncthreads();
    const std::int64_t j = j0 + threadIdx.x;  // the destination's unit-stride dim
#pragma unroll
    for (int k = 0; k < 32; k += 8) {
      const std::int64_t m = i0 + threadIdx.y + k;
      if (m < M && j < N) out[b * dst_b + m * dst_m + j] = tile[threadIdx.x][threadIdx.y + k];
    }
    __syncthreads();
  }
}

/// Blocks for `work` threads of `threads` each: enough to fill the card, capped (grid-stride loops).
inline unsigned grid_for(std::int64_t work, int threads, int dev, int blocks_per_sm = 16) {
  const std::int64_t want = (work + threads - 1) / threads;
  const std::int64_t cap = static_cast<std::int64_t>(sm_count(dev)) * blocks_per_sm;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min(want, cap)));
}

/// The most threads per block kernel K can be launched with on the current device (its registers
/// per thread decide it: a tree that needs more than 64 cannot run 1024 threads). Asked once.
template <auto K>
int kernel_max_threads() {
  static const int m = [] {
    cudaFuncAttributes a{};
    check(cudaFuncGetAttributes(&a, K), "cudaFuncGetAttributes of the pointwise kernel");
    return std::max(32, a.maxThreadsPerBlock / 32 * 32);
  }();
  return m;
}

/// Throws device_error if the last launch failed (bad configuration, no kernel image ...).
inline void check_launch(const char* what) { check(cudaGetLastError(), what); }

/// Launches the grid-stride kernel K for `work` threads' worth of work on stream s, its block
/// size cfg.threads capped by what K allows.
template <auto K, class... A>
void launch_grid_stride(pointwise_launch cfg, std::int64_t work, int dev, cudaStream_t s, const A&... args) {
  cfg.threads = std::min(cfg.threads, kernel_max_threads<K>());
  K<<<grid_for(work, cfg.threads, dev, cfg.blocks_per_sm), cfg.threads, 0, s>>>(args...);
}

/// Whether a leaf read as groups of n elements (one vector load each, at most 16 bytes) keeps
/// every group aligned to its own size: its start p and its stride `outer` (elements of `size`
/// bytes) between rows of groups (0 for a flat layout).
inline bool groups_aligned(const void* p, std::size_t size, int n, std::int64_t outer) {
  const auto a = static_cast<std::int64_t>(std::min<std::size_t>(16, size * static_cast<std::size_t>(n)));
  return static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(a)) == 0 &&
         (outer * static_cast<std::int64_t>(size)) % a == 0;
}

/// out[i...] = e(i...) for every index of out (out: a CUDA tensor, any strides; e's leaves on the
/// same device).
template <class T, class S, class E>
void run_pointwise(const Tensor<T, S>& out, const E& e) {
  constexpr std::size_t R = S::rank == 0 ? 1 : S::rank;
  const std::int64_t n = out.numel();
  if (n == 0) return;
  device_context ctx(out.device());
  sizes_t<R> sizes{};
  std::array<std::int64_t, R> ost{};
  if constexpr (S::rank == 0) {
    sizes[0] = 1;
  } else {
    sizes = out.sizes();
    ost = out.strides();
  }
  using tree_t = pointwise_tree<E, R>;
  tree_t tree(e, sizes);
  const auto sp = cpu::coalesce<R>(sizes, ost.data(), tree);
  T* const obase = out.data();
  const cudaStream_t s = current_stream();
  const int dev = out.device().index;

  constexpr int N = 16 / sizeof(T) > 0 ? static_cast<int>(16 / sizeof(T)) : 1;
  bool flat = sp.nd == 1 && ost[0] == 1;
  if (flat) {
    tree.for_each_leaf([&](const void* p, std::size_t size, const std::int64_t* st) {
      if (st[0] != 0 && st[0] != 1) flat = false;
      if (st[0] == 1 && !groups_aligned(p, size, N, 0)) flat = false;
    });
    if (reinterpret_cast<std::uintptr_t>(obase) % 16 != 0) flat = false;
  }
  const pointwise_launch cfg = pointwise_config();
  ++pointwise_launches();
  constexpr int U = flat_groups_per_step<T, tree_t>;
  const std::int64_t group_steps = std::max<std::int64_t>((n / N + U - 1) / U, 1);  // flat and two-dim modes
  if (flat) {
    launch_grid_stride<pointwise_flat_kernel<T, tree_t>>(cfg, group_steps, dev, s, obase, tree, n);
  } else {
    out_layout<T, R> lay{};
    lay.nd = static_cast<int>(sp.nd);
    for (std::size_t d = 0; d < sp.nd; ++d) lay.sizes[d] = sp.sizes[d], lay.st[d] = ost[d];
    // two to four dims, the output's and every leaf's inner stride 0 or 1: 16-byte groups along
    // rows of one to three dims (a row bias, a column scale, a mask broadcast over a batch, a
    // per-channel scale or shift of an N, C, H x W tensor, attention's heads as (B, H, T, D)
    // views of a (B, T, 3C) projection and their gradients)
    if constexpr (R >= 2) {
      const std::size_t nd = sp.nd, v = nd - 1;  // v: the vector dim
      const auto aligned16 = [](std::int64_t stride) { return (stride * static_cast<std::int64_t>(sizeof(T))) % 16 == 0; };
      bool rows = nd >= 2 && nd <= 4 && ost[v] == 1 && sp.sizes[v] % N == 0 && (nd == 2 || n / N < (std::int64_t{1} << 30)) &&
                  reinterpret_cast<std::uintptr_t>(obase) % 16 == 0;
      for (std::size_t d = 0; rows && d < v; ++d) rows = aligned16(ost[d]);
      if (rows) {
        tree.for_each_leaf([&](const void* p, std::size_t size, const std::int64_t* st) {
          if (st[v] != 0 && st[v] != 1) rows = false;
          for (std::size_t d = 0; st[v] == 1 && d < v; ++d)
            if (!groups_aligned(p, size, N, st[d])) rows = false;
        });
        if (rows) {
          tree.for_each_strides([v](std::int64_t* st) { st[R - 1] = st[v]; });  // load_rows's vector stride
          lay.nd = -2;
          if (nd >= 3) lay.rows_b = sp.sizes[1], lay.rows_b_st = ost[1];
          if (nd == 4) lay.rows_c = sp.sizes[2], lay.rows_c_st = ost[2];
          lay.sizes[1] = sp.sizes[v];
          lay.per_row_div = fast_divisor(static_cast<std::uint32_t>(sp.sizes[v] / N));
          lay.rows_b_div = fast_divisor(static_cast<std::uint32_t>(lay.rows_b));
          lay.rows_c_div = fast_divisor(static_cast<std::uint32_t>(lay.rows_c));
          launch_grid_stride<pointwise_strided_kernel<T, R, tree_t>>(cfg, group_steps, dev, s, obase, tree, lay, n);
          check_launch("the pointwise kernel launch");
          return;
        }
      }
    }
    if constexpr (dpw_is_tensor_leaf<tree_t>::value && R >= 2) {
      const std::size_t nd = sp.nd;
      if ((nd == 2 || nd == 3) && ost[nd - 1] == 1 && tree.st[nd - 2] == 1 && tree.st[nd - 1] != 1 && tree.st[nd - 1] != 0) {
        const std::int64_t tiles = (nd == 3 ? sp.sizes[0] : 1) * ((sp.sizes[nd - 2] + 31) / 32) * ((sp.sizes[nd - 1] + 31) / 32);
        transpose_copy_kernel<T, R, tree_t><<<grid_for(tiles, 1, dev, 8), dim3(32, 8), 0, s>>>(obase, tree, lay);
        check_launch("the transposed copy kernel launch");
        return;
      }
    }
    launch_grid_stride<pointwise_strided_kernel<T, R, tree_t>>(cfg, n, dev, s, obase, tree, lay, n);
  }
  check_launch("the pointwise kernel launch");
}


/// True when the elements of a tensor of these sizes and strides are one dense run of memory in
/// some order of the dims (a transposed or permuted contiguous tensor; size-1 dims take any stride).
template <std::size_t R>
bool dense_in_some_order(const sizes_t<R>& sizes, const sizes_t<R>& strides) {
  std::array<std::pair<std::int64_t, std::int64_t>, R> dims{};  // (stride, size) of the dims of size > 1
  std::size_t k = 0;
  for (std::size_t d = 0; d < R; ++d) {
    if (sizes[d] == 0) return false;
    if (sizes[d] > 1) dims[k++] = {strides[d], sizes[d]};
  }
  std::sort(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(k));
  std::int64_t expected = 1;
  for (std::size_t i = 0; i < k; ++i) {
    if (dims[i].first != expected) return false;
    expected *= dims[i].second;
  }
  return true;
}

/// Calls f(L{}) with the autocast dtype L (float16 or bfloat16) when autocast is on and the
/// operands are float32; false: autocast does not apply (include/tenet/autocast.hpp).
template <class T, class F>
bool with_autocast_dtype(F&& f) {
  if constexpr (std::is_same_v<T, float>) {
    const auto& ac = cuda_autocast_slot();
    if (!ac.enabled) return false;
    if (ac.low == dtype::bfloat16)
      f(bfloat16{});
    else
      f(float16{});
    return true;
  } else {
    return false;
  }
}

/// t converted to L on its device (one pointwise kernel). A permuted contiguous t (a transposed
/// weight under autocast) is converted as its one flat run of memory, and the result keeps t's
/// strides: a coalesced pass instead of a transposing copy.
template <class L, class T, class S>
Tensor<L, S> cast_on_device(const Tensor<T, S>& t) {
  if constexpr (S::rank >= 2) {
    if (!t.is_contiguous() && dense_in_some_order<S::rank>(t.sizes(), t.strides())) {
      const std::int64_t n = t.numel();
      const auto src = t.detach().template with_layout<shape<dyn>>(sizes_t<1>{n}, sizes_t<1>{1}, t.offset());
      Tensor<L, shape<dyn>> flat(sizes_t<1>{n}, t.device());
      run_pointwise(flat, cast_to<L>(src));
      return flat.template with_layout<S>(t.sizes(), t.strides(), 0);
    }
  }
  Tensor<L, S> r(t.sizes(), t.device());
  run_pointwise(r, cast_to<L>(t));
  return r;
}

}  // namespace tenet::detail::cuda
