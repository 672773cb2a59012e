#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CPU pointwise kernel: one fused loop for a whole tree of elementwise prims.
//
// `pointwise_tree<E, R>` mirrors the expression E over an iteration space of rank R: each Tensor leaf keeps its
// strides in that space (0 where it broadcasts), each node applies its prim. The kernel coalesces
// dims that are contiguous for every operand (a contiguous case becomes one flat loop), splits the
// work into chunks over OpenMP threads, and runs the innermost dim on xsimd batches when every leaf
// there has unit or zero stride and the tree has vector kernels (simd.hpp); otherwise the same loop
// calls the prims' scalar `apply`.
#include <algorithm>
#include <array>
#include <utility>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <vector>

#include <omp.h>

#include <tenet/backend/cpu/simd.hpp>
#include <tenet/backend/node_kids.hpp>
#include <tenet/expr/node.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::cpu {

inline constexpr std::int64_t pointwise_grain = 32768;  // elements per thread chunk, at least

template <class E, std::size_t R>
struct pointwise_tree;

/// Tensor leaf.
template <class T, class S, std::size_t R>
struct pointwise_tree<Tensor<T, S>, R> {
  using value_type = T;
  using lane = T;
  static constexpr bool simd = simd_lane<T>;
  static constexpr bool mask = false;
  const T* base;
  std::array<std::int64_t, R> st{};
  const T* row = nullptr;
  std::int64_t inner = 0;

  pointwise_tree(const Tensor<T, S>& t, const sizes_t<R>& out) : base(t.numel() ? t.data() : nullptr) {
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
    f(st.data());
  }
  void set_row(const std::int64_t* idx, std::size_t nd) {
    const T* p = base;
    for (std::size_t d = 0; d + 1 < nd; ++d) p += idx[d] * st[d];
    row = p;
    inner = nd ? st[nd - 1] : 0;
  }
  bool unit_inner() const { return inner == 0 || inner == 1; }
  TENET_INLINE T get(std::int64_t i) const { return row[i * inner]; }
  template <class B>
  TENET_INLINE B load(std::int64_t i) const {
    if (inner == 1) return B::load_unaligned(row + i);
    return B(row[0]);  // inner == 0 (checked by unit_inner before the vector loop)
  }
};

/// Scalar leaf.
template <class T, std::size_t R>
struct pointwise_tree<scalar<T>, R> {
  using value_type = T;
  using lane = T;
  static constexpr bool simd = simd_lane<T>;
  static constexpr bool mask = false;
  T value;
  pointwise_tree(const scalar<T>& s, const sizes_t<R>&) : value(s.value) {}
  template <class F>
  void for_each_strides(F&&) {}
  void set_row(const std::int64_t*, std::size_t) {}
  bool unit_inner() const { return true; }
  TENET_INLINE T get(std::int64_t) const { return value; }
  template <class B>
  TENET_INLINE B load(std::int64_t) const {
    return B(value);
  }
};

template <class... K>
struct same_lane : std::false_type {};
template <class K0, class... K>
struct same_lane<K0, K...> : std::bool_constant<(std::is_same_v<typename K0::lane, typename K::lane> && ...)> {};

/// Elementwise node.
template <class P, class... C, std::size_t R>
struct pointwise_tree<node<P, C...>, R> {
  using value_type = typename node<P, C...>::value_type;
  static constexpr std::size_t arity = sizeof...(C);
  using kid_types = std::tuple<pointwise_tree<C, R>...>;  // for tuple_element only: never instantiated
  using lane = typename std::tuple_element_t<(arity == 3 ? 1 : 0), kid_types>::lane;
  static constexpr bool mask = simd_mask_result<P>;
  static constexpr bool kids_ok = [] {
    if constexpr (std::is_same_v<P, prim::where_>) {
      using c0 = std::tuple_element_t<0, kid_types>;
      using c1 = std::tuple_element_t<1, kid_types>;
      using c2 = std::tuple_element_t<2, kid_types>;
      return c0::simd && c0::mask && c1::simd && !c1::mask && c2::simd && !c2::mask &&
             same_lane<c0, c1, c2>::value;
    } else {
      return (pointwise_tree<C, R>::simd && ...) && (!pointwise_tree<C, R>::mask && ...) && same_lane<pointwise_tree<C, R>...>::value;
    }
  }();
  static constexpr bool simd = simd_impl<P>::supported && kids_ok;
  node_kids<pointwise_tree<C, R>...> kids;  // members a, b, c (node_kids.hpp: why not a std::tuple)

  pointwise_tree(const node<P, C...>& n, const sizes_t<R>& out) : pointwise_tree(n, out, std::index_sequence_for<C...>{}) {}
  template <std::size_t... I>
  pointwise_tree(const node<P, C...>& n, const sizes_t<R>& out, std::index_sequence<I...>)
      : kids{pointwise_tree<C, R>(std::get<I>(n.children), out)...} {}
  template <class F>
  void for_each_strides(F&& f) {
    kids.a.for_each_strides(f);
    if constexpr (arity > 1) kids.b.for_each_strides(f);
    if constexpr (arity > 2) kids.c.for_each_strides(f);
  }
  void set_row(const std::int64_t* idx, std::size_t nd) {
    kids.a.set_row(idx, nd);
    if constexpr (arity > 1) kids.b.set_row(idx, nd);
    if constexpr (arity > 2) kids.c.set_row(idx, nd);
  }
  bool unit_inner() const {
    if constexpr (arity == 1) return kids.a.unit_inner();
    else if constexpr (arity == 2) return kids.a.unit_inner() && kids.b.unit_inner();
    else return kids.a.unit_inner() && kids.b.unit_inner() && kids.c.unit_inner();
  }
  TENET_INLINE value_type get(std::int64_t i) const {
    if constexpr (arity == 1) return P::apply(kids.a.get(i));
    else if constexpr (arity == 2) return P::apply(kids.a.get(i), kids.b.get(i));
    else return P::apply(kids.a.get(i), kids.b.get(i), kids.c.get(i));
  }
  template <class B>
  TENET_INLINE auto load(std::int64_t i) const {
    using S = simd_impl<P>;
    if constexpr (arity == 1) return S::apply(kids.a.template load<B>(i));
    else if constexpr (arity == 2) return S::apply(kids.a.template load<B>(i), kids.b.template load<B>(i));
    else return S::apply(kids.a.template load<B>(i), kids.b.template load<B>(i), kids.c.template load<B>(i));
  }
};

/// Iteration space after coalescing: sizes plus every operand's strides, innermost last.
template <std::size_t R>
struct iteration_space {
  std::array<std::int64_t, R> sizes{};
  std::size_t nd = R;
};

/// Every operand's stride array (the output's first, when given), to be rewritten together.
template <class Tree>
std::vector<std::int64_t*> stride_arrays(Tree& tree, std::int64_t* out_strides = nullptr) {
  std::vector<std::int64_t*> arrays;
  if (out_strides) arrays.push_back(out_strides);
  tree.for_each_strides([&](std::int64_t* s) { arrays.push_back(s); });
  return arrays;
}

/// Merges dims d-1 and d wherever every stride array allows it, drops size-1 dims.
/// @post for every operand, offset(idx) over the new space equals offset over the old one.
template <std::size_t R, class Tree>
iteration_space<R> coalesce(const sizes_t<R>& sizes, std::int64_t* out_strides, Tree& tree) {
  const auto arrays = stride_arrays(tree, out_strides);
  const std::size_t na = arrays.size();
  iteration_space<R> sp;
  std::size_t nd = 0;
  for (std::size_t d = 0; d < R; ++d) {
    if (sizes[d] == 1) continue;
    if (nd > 0) {
      bool merge = true;
      for (std::size_t a = 0; a < na; ++a)
        if (arrays[a][nd - 1] != arrays[a][d] * sizes[d]) merge = false;
      if (merge) {
        sp.sizes[nd - 1] *= sizes[d];
        for (std::size_t a = 0; a < na; ++a) arrays[a][nd - 1] = arrays[a][d];
        continue;
      }
    }
    sp.sizes[nd] = sizes[d];
    for (std::size_t a = 0; a < na; ++a) arrays[a][nd] = arrays[a][d];
    ++nd;
  }
  if (nd == 0) {  // a single element
    sp.sizes[0] = 1;
    for (std::size_t a = 0; a < na; ++a) arrays[a][0] = 0;
    nd = 1;
  }
  sp.nd = nd;
  return sp;
}

/// The iteration space of a reduction: kept dims first, reduced dims last, each group coalesced
/// (size-1 dims dropped; when every reduced dim has size 1, one reduced dim of size 1 with stride
/// 0 stands for them). The stride arrays (stride_arrays of the tree) are rewritten to match. K is
/// the number of outputs, N the number of elements reduced into each.
template <std::size_t R>
struct reduce_space {
  std::array<std::int64_t, R + 1> sizes{};
  std::size_t nk = 0, nd = 0;  // kept dims, all dims
  std::int64_t K = 1, N = 1;
};

template <std::size_t R>
reduce_space<R> coalesce_reduction(const sizes_t<R>& in, const std::array<bool, R>& mask,
                              const std::vector<std::int64_t*>& arrays) {
  std::array<std::size_t, R> order{};
  std::size_t n = 0;
  for (std::size_t d = 0; d < R; ++d)
    if (!mask[d]) order[n++] = d;
  const std::size_t kept_raw = n;
  for (std::size_t d = 0; d < R; ++d)
    if (mask[d]) order[n++] = d;
  const std::size_t na = arrays.size();
  std::vector<std::array<std::int64_t, R>> saved(na);
  for (std::size_t a = 0; a < na; ++a)
    for (std::size_t d = 0; d < R; ++d) saved[a][d] = arrays[a][order[d]];
  reduce_space<R> sp;
  auto& sz = sp.sizes;
  std::size_t& nd = sp.nd;
  auto push_group = [&](std::size_t from, std::size_t to) {
    const std::size_t start = nd;
    for (std::size_t d = from; d < to; ++d) {
      const std::int64_t s = in[order[d]];
      if (s == 1) continue;
      if (nd > start) {
        bool merge = true;
        for (std::size_t a = 0; a < na; ++a)
          if (arrays[a][nd - 1] != saved[a][d] * s) merge = false;
        if (merge) {
          sz[nd - 1] *= s;
          for (std::size_t a = 0; a < na; ++a) arrays[a][nd - 1] = saved[a][d];
          continue;
        }
      }
      sz[nd] = s;
      for (std::size_t a = 0; a < na; ++a) arrays[a][nd] = saved[a][d];
      ++nd;
    }
    return nd - start;
  };
  sp.nk = push_group(0, kept_raw);
  if (push_group(kept_raw, R) == 0) {  // every reduced dim had size 1 (so was dropped and nd < R)
    sz[nd] = 1;
    for (std::size_t a = 0; a < na; ++a) arrays[a][nd] = 0;
    ++nd;
  }
  for (std::size_t d = 0; d < sp.nk; ++d) sp.K *= sz[d];
  for (std::size_t d = sp.nk; d < nd; ++d) sp.N *= sz[d];
  return sp;
}

/// Runs `body(row_index[nd], begin, end)` over the space in chunks spread over the threads.
template <std::size_t R, class Body>
void parallel_rows(const iteration_space<R>& sp, std::int64_t grain, Body&& body) {
  const std::size_t nd = sp.nd;
  const std::int64_t inner = sp.sizes[nd - 1];
  std::int64_t outer = 1;
  for (std::size_t d = 0; d + 1 < nd; ++d) outer *= sp.sizes[d];
  const std::int64_t total = outer * inner;
  if (total == 0) return;
  const int threads = total >= 2 * grain ? omp_get_max_threads() : 1;
  // chunks of the inner dim so that a flat (or short-outer) space still spreads over the threads
  std::int64_t per_row = 1;
  if (outer < 4 * threads && inner > grain) per_row = std::min<std::int64_t>((inner + grain - 1) / grain, 4 * threads);
  const std::int64_t chunk = (inner + per_row - 1) / per_row;
  const std::int64_t items = outer * per_row;
  using index_t = std::array<std::int64_t, R>;
  auto run = [&](std::int64_t item) {
    const std::int64_t r = item / per_row, c = item % per_row;
    index_t idx{};
    std::int64_t rem = r;
    for (std::size_t d = nd - 1; d-- > 0;) {
      idx[d] = rem % sp.sizes[d];
      rem /= sp.sizes[d];
    }
    body(idx.data(), c * chunk, std::min(inner, (c + 1) * chunk));
  };
  if (threads > 1 && items > 1) {
    kernel_flag_collector flags;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t item = 0; item < items; ++item) {
      run(item);
      flags.collect();
    }
  } else {
    for (std::int64_t item = 0; item < items; ++item) run(item);
  }
}

/// Throws for errors the prims flagged inside a kernel (see note_division_by_zero).
inline void check_kernel_flags() {
  if (std::exchange(integer_division_by_zero(), 0))
    throw value_error("tenet: integer division by zero (remainder, fmod or division of integer tensors; PyTorch "
                      "raises ZeroDivisionError)");
}

/// out[i...] = e(i...) for every index of out (out may be a strided view; it must not overlap e's
/// inputs unless it is read at exactly the same index).
template <class T, class S, class E>
void run_pointwise(const Tensor<T, S>& out, const E& e) {
  constexpr std::size_t R = S::rank == 0 ? 1 : S::rank;
  if (out.numel() == 0) return;
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
  const auto sp = coalesce<R>(sizes, ost.data(), tree);
  T* const obase = out.data();
  const std::size_t nd = sp.nd;
  parallel_rows(sp, pointwise_grain, [&](const std::int64_t* idx, std::int64_t b, std::int64_t en) {
    tree_t t = tree;  // per-chunk row pointers
    t.set_row(idx, nd);
    T* orow = obase;
    for (std::size_t d = 0; d + 1 < nd; ++d) orow += idx[d] * ost[d];
    const std::int64_t os = ost[nd - 1];
    std::int64_t i = b;
    if constexpr (tree_t::simd && !tree_t::mask && std::is_same_v<typename tree_t::lane, T>) {
      using B = xsimd::batch<T>;
      constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
      if (os == 1 && t.unit_inner()) {
        for (; i + W <= en; i += W) t.template load<B>(i).store_unaligned(orow + i);
      }
    }
    for (; i < en; ++i) orow[i * os] = static_cast<T>(t.get(i));
  });
  check_kernel_flags();
}

}  // namespace tenet::detail::cpu
