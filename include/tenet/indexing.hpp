#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Indexing ops (torch.gather, scatter, index_select, masked_fill, nonzero, embedding, one_hot,
// bincount, histc ...). Each is a decomposition into the two indexing prims (gather_, scatter_;
// detail/tenet/prims/indexing.hpp), the elementwise prims and the reductions. Dims are template
// arguments (`gather<1>(x, idx)`); index tensors hold int64 (int32 is accepted by the prims too).
//
// Index tensors are views made when the op is built: index_select's 1-D index becomes a stride-0
// view of x's shape, embedding's flattened index a stride-0 view across the embedding's columns, so
// no index is copied.
// Ops whose result size depends on the data (nonzero, masked_select, one_hot without num_classes,
// bincount, histc) read what they need now (a reduction, .item()) and return a dyn extent.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <string>
#include <type_traits>

#include <tenet/factories.hpp>
#include <tenet/ops.hpp>
#include <tenet/sorting.hpp>  // cumsum (the scan prim)

#include <tenet/backend/cpu/indexing.hpp>
#include <tenet/prims/indexing.hpp>
#include <tenet/tensor/views.hpp>

namespace tenet {

namespace detail {

template <class I>
constexpr void check_index_dtype() {
  static_assert(prim::is_index_type<value_type_of<I>>,
                "tenet: an index tensor must hold int64 (or int32) values; convert it with .to<std::int64_t>()");
}

/// A 0-dim or 1-D index expression as a 1-D Tensor.
template <class I>
auto index_vector(const I& idx) {
  static_assert(rank_of<I> <= 1, "tenet: this op takes a 0-dim or 1-D index (as torch)");
  check_index_dtype<I>();
  auto t = eval(idx);
  if constexpr (rank_of<I> == 0)
    return t.template reshape<1>();  // (unsqueeze of a 0-dim tensor does not compile yet)
  else
    return t;
}

/// Throws index_error(message(v)) for the first value v of the evaluated integer tensor t outside
/// [lo, hi) (and not equal to `skip`, when given), in t's row-major order. Ops that rewrite their
/// indices before a gather / scatter (index_fill wraps negative ones; one_hot, nll_loss and
/// cross_entropy read targets) check them here, so that the error names the op and the value the
/// caller passed, not the gather / scatter kernel and the rewritten index (issue 27 item 8). CPU
/// tensors only: on a GPU the kernel reports the bad index at the next wait for the device.
template <class T, class S, class Msg>
void check_index_values(const Tensor<T, S>& t, std::int64_t lo, std::int64_t hi, std::optional<std::int64_t> skip,
                        Msg&& message) {
  if (t.numel() == 0 || !t.device().is_cpu()) return;
  constexpr std::size_t R = S::rank;
  const T* p = t.data();
  auto check = [&](std::int64_t off) {
    const auto v = static_cast<std::int64_t>(p[off]);
    if ((v < lo || v >= hi) && !(skip && v == *skip)) throw index_error(message(v));
  };
  if constexpr (R == 0) {
    check(0);
  } else {
    const auto sz = t.sizes();
    const auto st = t.strides();
    std::array<std::int64_t, R> c{};
    std::int64_t off = 0;
    for (std::int64_t n = t.numel(); n-- > 0;) {
      check(off);
      for (std::size_t k = R; k-- > 0;) {  // odometer, last dim fastest
        off += st[k];
        if (++c[k] < sz[k]) break;
        off -= st[k] * sz[k];
        c[k] = 0;
      }
    }
  }
}

/// The 1-D index v as a tensor of shape SI and sizes `target` that varies along dim d only
/// (target[d] must be v's length): a stride-0 view, nothing is copied.
template <class SI, class T, class S1>
Tensor<T, SI> along_dim(const Tensor<T, S1>& v, sizes_t<SI::rank> target, std::size_t d) {
  sizes_t<SI::rank> st{};
  target[d] = v.sizes()[0];
  st[d] = v.strides()[0];
  return v.template with_layout<SI>(target, st, v.offset());
}

/// A tensor of shape S and sizes s whose every element is v (one element, stride 0).
template <class T, class S>
Tensor<T, S> filled(T v, const sizes_t<S::rank>& s) {
  Tensor<T, shape<>> one(sizes_t<0>{}, tenet::cpu);  // written here, then moved (a device guard may
  *one.data() = v;                                   // make the default device a GPU)
  const Tensor<T, shape<>> on = one.to(default_device());
  return on.template with_layout<S>(s, sizes_t<S::rank>{}, on.offset());
}

/// i + n where i < 0 (the wrap-around of index_fill and take_along_dim), as an expression.
template <class I>
auto wrap_negative(const I& i, std::int64_t n) {
  using T = value_type_of<I>;
  return make_node(prim::where_{}, make_node(prim::lt_{}, i, scalar<T>{T(0)}),
                   make_node(prim::add_{}, i, scalar<T>{static_cast<T>(n)}), i);
}

template <class X, std::int64_t D>
constexpr std::size_t index_dim() {
  static_assert(rank_of<X> >= 1, "tenet: this op needs a tensor of rank >= 1");
  return static_dim<shape_of<X>, D>();
}

template <class X, class Src>
constexpr void check_same_dtype() {
  static_assert(std::is_same_v<value_type_of<X>, value_type_of<Src>>,
                "tenet: the source must have the dtype of self (as torch); cast it with .to<T>()");
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// gather / scatter
/// gather<d>(x, idx): out[i] = x[i with i_d := idx[i]]; out has idx's shape (torch.gather).
template <std::int64_t D, Expression X, Expression I>
auto gather(const X& x, const I& idx) {
  detail::check_index_dtype<I>();
  return make_node(prim::gather_<D>{}, x, idx);
}

namespace detail {
template <prim::scatter_op Op, std::int64_t D, class X, class I, class Src>
auto scatter_node(const X& x, const I& idx, const Src& src, bool include_self) {
  check_index_dtype<I>();
  using T = value_type_of<X>;
  if constexpr (Expression<Src>) {
    check_same_dtype<X, Src>();
    return make_node(prim::scatter_<D, Op>{include_self}, x, idx, src);
  } else {
    return make_node(prim::scatter_<D, Op>{include_self}, x, idx, cast_to<T>(src));
  }
}
template <scatter_reduction R>
inline constexpr prim::scatter_op scatter_op_of = R == scatter_reduction::sum    ? prim::scatter_op::sum
                                                  : R == scatter_reduction::prod ? prim::scatter_op::prod
                                                  : R == scatter_reduction::mean ? prim::scatter_op::mean
                                                  : R == scatter_reduction::amax ? prim::scatter_op::amax
                                                                                 : prim::scatter_op::amin;
}  // namespace detail

/// scatter<d>(x, idx, src): a copy of x with out[i with i_d := idx[i]] = src[i] (src a tensor of
/// x's dtype, or one number: torch.scatter's value form). Duplicates: the last along d wins.
template <std::int64_t D, Expression X, Expression I, class Src>
  requires ExprOrScalar<Src>
auto scatter(const X& x, const I& idx, const Src& src) {
  return detail::scatter_node<prim::scatter_op::replace, D>(x, idx, src, true);
}
/// scatter_add<d>(x, idx, src): values at the same position are added (torch.scatter_add).
template <std::int64_t D, Expression X, Expression I, Expression Src>
auto scatter_add(const X& x, const I& idx, const Src& src) {
  return detail::scatter_node<prim::scatter_op::sum, D>(x, idx, src, true);
}
/// scatter_reduce<d, reduce>(x, idx, src, include_self = true) (torch.scatter_reduce).
template <std::int64_t D, scatter_reduction R, Expression X, Expression I, Expression Src>
auto scatter_reduce(const X& x, const I& idx, const Src& src, bool include_self = true) {
  return detail::scatter_node<detail::scatter_op_of<R>, D>(x, idx, src, include_self);
}

// ---------------------------------------------------------------------------------------------
// index_* (a 0-dim or 1-D index along one dim)
/// index_select<d>(x, idx): the slices idx[0], idx[1], ... of dim d (gather with idx viewed
/// along d).
template <std::int64_t D, Expression X, Expression I>
auto index_select(const X& x, const I& idx) {
  constexpr std::size_t d = detail::index_dim<X, D>();
  auto v = detail::index_vector(idx);
  using SI = detail::set_extent_t<shape_of<X>, d, shape_of<decltype(v)>::template extent<0>>;
  return gather<D>(x, detail::along_dim<SI>(v, x.sizes(), d));
}

namespace detail {
/// The index of index_add/index_copy: idx along dim d of src's shape; src must be x's sizes but
/// at d, where it is idx's length.
template <std::size_t d, class X, class V, class Src>
auto source_index(const char* op, const X& x, const V& v, const Src& src) {
  static_assert(rank_of<Src> == rank_of<X>, "tenet: the source must have the rank of self");
  const auto xs = x.sizes();
  const auto ss = src.sizes();
  for (std::size_t k = 0; k < rank_of<X>; ++k) {
    const std::int64_t want = k == d ? v.sizes()[0] : xs[k];
    if (ss[k] != want)
      throw shape_error(std::string("tenet: ") + op + ": source of sizes " + sizes_text(ss) + " does not fit self " +
                        sizes_text(xs) + " and an index of length " + std::to_string(v.sizes()[0]) + " at dim " +
                        std::to_string(k) + " (expected " + std::to_string(want) + ")");
  }
  return along_dim<shape_of<Src>>(v, ss, d);
}
}  // namespace detail

/// index_add<d>(x, idx, src, alpha = 1): x with alpha * src[.., j, ..] added at x[.., idx[j], ..].
template <std::int64_t D, Expression X, Expression I, Expression Src, class A = int>
  requires Scalar<A>
auto index_add(const X& x, const I& idx, const Src& src, A alpha = 1) {
  using T = value_type_of<X>;
  constexpr std::size_t d = detail::index_dim<X, D>();
  detail::check_same_dtype<X, Src>();
  static_assert(!(std::is_integral_v<T> && std::is_floating_point_v<A>),
                "tenet: index_add: alpha must be an integer for an integer tensor (as torch)");
  auto v = detail::index_vector(idx);
  auto index = detail::source_index<d>("index_add", x, v, src);
  return scatter_add<D>(x, index, make_node(prim::mul_{}, src, detail::cast_to<T>(alpha)));
}
/// index_copy<d>(x, idx, src): x with src[.., j, ..] written at x[.., idx[j], ..].
template <std::int64_t D, Expression X, Expression I, Expression Src>
auto index_copy(const X& x, const I& idx, const Src& src) {
  constexpr std::size_t d = detail::index_dim<X, D>();
  detail::check_same_dtype<X, Src>();
  auto v = detail::index_vector(idx);
  return scatter<D>(x, detail::source_index<d>("index_copy", x, v, src), src);
}
/// index_fill<d>(x, idx, value): x with the slices idx[j] of dim d set to value (negative
/// indices count from the end, as torch.index_fill).
template <std::int64_t D, Expression X, Expression I, Scalar V>
auto index_fill(const X& x, const I& idx, V value) {
  constexpr std::size_t d = detail::index_dim<X, D>();
  auto v0 = detail::index_vector(idx);
  const std::int64_t n = x.sizes()[d];
  detail::check_index_values(v0, -n, n, std::nullopt, [&](std::int64_t bad) {
    return "tenet: index_fill: index " + std::to_string(bad) + " is out of bounds for dim " + std::to_string(d) +
           " with size " + std::to_string(n) + " (indices must be in [" + std::to_string(-n) + ", " +
           std::to_string(n) + "))";
  });
  Tensor<value_type_of<decltype(v0)>, shape_of<decltype(v0)>> v = detail::wrap_negative(v0, n);
  using SI = detail::set_extent_t<shape_of<X>, d, shape_of<decltype(v)>::template extent<0>>;
  return scatter<D>(x, detail::along_dim<SI>(v, x.sizes(), d), value);
}

// ---------------------------------------------------------------------------------------------
// masks
/// masked_fill(x, mask, value): value where mask (bool, broadcast to x's shape), else x.
template <Expression X, Expression M, class V>
  requires ExprOrScalar<V>
auto masked_fill(const X& x, const M& mask, const V& value) {
  static_assert(std::is_same_v<value_type_of<M>, bool>, "tenet: masked_fill needs a bool mask (as torch)");
  static_assert(rank_of<M> <= rank_of<X>, "tenet: masked_fill: the mask must broadcast to the tensor's shape");
  if constexpr (Expression<V>)
    static_assert(rank_of<V> == 0, "tenet: masked_fill: the value must be a number or a 0-dim tensor (as torch)");
  using T = value_type_of<X>;
  const auto xs = x.sizes();
  if (detail::broadcast_sizes<rank_of<X>>(xs, mask.sizes()) != xs)
    throw shape_error("tenet: masked_fill: the mask of sizes " + detail::sizes_text(mask.sizes()) +
                      " does not broadcast to the tensor's sizes " + detail::sizes_text(xs));
  return make_node(prim::where_{}, mask, detail::cast_to<T>(value), x);
}

namespace detail {
/// For a flat bool mask: the slot of each element in the compacted result (its rank among the
/// true elements; the false ones go to slot n, past the end) and n, the number of true elements.
inline std::pair<Tensor<std::int64_t, shape<dyn>>, std::int64_t> compaction_slots(
    const Tensor<bool, shape<dyn>>& m) {
  const std::int64_t N = m.numel();
  const Tensor<std::int64_t, shape<dyn>> c = cumsum<0>(m);  // bool counts sum to int64
  const std::int64_t n = N ? c(N - 1) : 0;
  Tensor<std::int64_t, shape<dyn>> slots = make_node(
      prim::where_{}, m, make_node(prim::sub_{}, c, scalar<std::int64_t>{1}), scalar<std::int64_t>{n});
  return {slots, n};
}
/// The values src (flat, one per mask element) at the true elements of the flat mask m, in order.
template <class T, class Src>
Tensor<T, shape<dyn>> compact(const Tensor<bool, shape<dyn>>& m, const Src& src) {
  auto [slots, n] = compaction_slots(m);
  Tensor<T, shape<dyn>> out = scatter<0>(filled<T, shape<dyn>>(T(0), {n + 1}), slots, src);
  return out.template narrow<0>(0, n);
}
}  // namespace detail

/// masked_select(x, mask): the elements of x where mask (both broadcast), as a 1-D tensor.
template <Expression X, Expression M>
Tensor<value_type_of<X>, shape<dyn>> masked_select(const X& x, const M& mask) {
  static_assert(std::is_same_v<value_type_of<M>, bool>, "tenet: masked_select needs a bool mask (as torch)");
  using T = value_type_of<X>;
  constexpr std::size_t R = rank_of<X> > rank_of<M> ? rank_of<X> : rank_of<M>;
  using S = detail::broadcast_t<shape_of<X>, shape_of<M>>;
  const auto bs = detail::broadcast_sizes<R>(x.sizes(), mask.sizes());
  const auto xf = eval(x).template expand_as_shape<S>(bs).template reshape<-1>();
  const auto mf = eval(mask).template expand_as_shape<S>(bs).template reshape<-1>();
  return detail::compact<T>(Tensor<bool, shape<dyn>>(mf), Tensor<T, shape<dyn>>(xf));
}

/// nonzero(x): the indices of the nonzero elements, [n, rank] int64, in row-major order.
template <Expression X>
Tensor<std::int64_t, shape<dyn, static_cast<int>(rank_of<X>)>> nonzero(const X& x) {
  using T = value_type_of<X>;
  constexpr std::size_t R = rank_of<X>;
  using Out = Tensor<std::int64_t, shape<dyn, static_cast<int>(R)>>;
  const auto xt = eval(x);
  Tensor<bool, shape<dyn>> m = make_node(prim::ne_{}, xt.template reshape<-1>(), scalar<T>{T(0)});
  const auto flat = detail::compact<std::int64_t>(m, arange(m.numel()));
  const std::int64_t n = flat.numel();
  if constexpr (R == 0) {
    return Out(sizes_t<2>{n, 0});
  } else {
    // coordinate k of flat position p: (p / stride_k) % size_k, for contiguous strides
    Tensor<std::int64_t, shape<1, static_cast<int>(R)>> strides(sizes_t<2>{1, static_cast<std::int64_t>(R)}, tenet::cpu);
    Tensor<std::int64_t, shape<1, static_cast<int>(R)>> sizes(sizes_t<2>{1, static_cast<std::int64_t>(R)}, tenet::cpu);
    const auto cs = detail::contiguous_strides(xt.sizes());
    for (std::size_t k = 0; k < R; ++k) {
      strides(0, k) = cs[k] > 0 ? cs[k] : 1;
      sizes(0, k) = xt.sizes()[k] > 0 ? xt.sizes()[k] : 1;
    }
    const auto p = flat.template unsqueeze<1>();
    return Out(make_node(prim::remainder_{}, make_node(prim::div_{}, p, strides.to(p.device())), sizes.to(p.device())));
  }
}

/// count_nonzero<d...>(x): the number of nonzero elements over dims d (all when none), int64.
template <auto... D, Expression X>
auto count_nonzero(const X& x) {
  using T = value_type_of<X>;
  return sum<D...>(make_node(prim::ne_{}, x, scalar<T>{T(0)}));
}

// ---------------------------------------------------------------------------------------------
/// take_along_dim<d>(x, idx): gather<d> after broadcasting x and idx in every dim but d
/// (negative indices count from the end, as torch.take_along_dim).
template <std::int64_t D, Expression X, Expression I>
auto take_along_dim(const X& x, const I& idx) {
  static_assert(rank_of<X> == rank_of<I>,
                "tenet: take_along_dim: the tensor and the indices need the same number of dims (as torch)");
  detail::check_index_dtype<I>();
  constexpr std::size_t d = detail::index_dim<X, D>();
  using SX = shape_of<X>;
  using SI = shape_of<I>;
  using B = detail::broadcast_t<detail::set_extent_t<SX, d, 1>, detail::set_extent_t<SI, d, 1>>;
  using BX = detail::set_extent_t<B, d, SX::template extent<d>>;
  using BI = detail::set_extent_t<B, d, SI::template extent<d>>;
  const auto xt = eval(x);
  const auto it = eval(idx);
  auto xs = xt.sizes(), is = it.sizes();
  auto ones_x = xs, ones_i = is;
  ones_x[d] = 1;
  ones_i[d] = 1;
  auto b = detail::broadcast_sizes<rank_of<X>>(ones_x, ones_i);
  auto bx = b, bi = b;
  bx[d] = xs[d];
  bi[d] = is[d];
  return gather<D>(xt.template expand_as_shape<BX>(bx),
                   detail::wrap_negative(it.template expand_as_shape<BI>(bi), xs[d]));
}
/// take_along_dim(x, idx): the flattened x at the flattened idx (no wrap-around here: a negative
/// index is an error, as torch).
template <Expression X, Expression I>
auto take_along_dim(const X& x, const I& idx) {
  detail::check_index_dtype<I>();
  return gather<0>(eval(x).template reshape<-1>(), eval(idx).template reshape<-1>());
}

// ---------------------------------------------------------------------------------------------
/// embedding(idx, weight, padding_idx): the rows weight[idx], shape idx.shape + [embedding_dim]
/// (torch.nn.functional.embedding). padding_idx (range-checked, negative counts from the end)
/// only matters for gradients: as in torch, the positions holding it send no gradient to the
/// weight (its row stays as it is under training).
/// The rows come from a gather<0> of weight [V, C] by the flattened idx (broadcast over the C
/// columns, stride 0), [N, C], then viewed as idx.shape + [C]. Its gradient is a scatter-add into
/// a [V, C] buffer: O(N C) work and memory. (An earlier form gathered from weight viewed with
/// stride 0 as [V, idx.shape..., C]; its gradient was a buffer of that view's size, V N C values:
/// 158 GB for GPT-2's token embedding at a batch of 16 x 1024.)
template <Expression I, Expression W>
auto embedding(const I& idx, const W& weight, std::optional<std::int64_t> padding_idx = std::nullopt) {
  static_assert(rank_of<W> == 2, "tenet: embedding needs a 2-D weight [num_embeddings, embedding_dim]");
  detail::check_index_dtype<I>();
  const auto w = eval(weight);
  if (padding_idx && (*padding_idx < -w.sizes()[0] || *padding_idx >= w.sizes()[0]))
    throw index_error("tenet: embedding: padding_idx " + std::to_string(*padding_idx) +
                      " must be within num_embeddings (" + std::to_string(w.sizes()[0]) + ")");
  constexpr std::size_t R = rank_of<I>;
  using SW = shape_of<W>;
  if constexpr (R == 0) {
    // the one row: a sum over a dim of size 1
    return detail::cast_to<value_type_of<W>>(sum<0>(embedding(eval(idx).template reshape<1>(), w, padding_idx)));
  } else {
    using SI = shape_of<I>;
    using Rows = shape<dyn, SW::template extent<1>>;
    using Out = detail::concat_shapes_t<SI, shape<SW::template extent<1>>>;
    const auto it = eval(idx);
    const auto flat = it.template reshape<-1>();
    const std::int64_t n = flat.sizes()[0], c = w.sizes()[1];
    const auto index = flat.template unsqueeze<-1>().template expand_as_shape<Rows>(sizes_t<2>{n, c});
    prim::gather_<0> op;
    if (padding_idx) op.skip_grad = *padding_idx < 0 ? *padding_idx + w.sizes()[0] : *padding_idx;
    const Tensor<value_type_of<W>, Rows> rows = make_node(op, w, index);
    sizes_t<R + 1> os{};
    for (std::size_t k = 0; k < R; ++k) os[k] = it.sizes()[k];
    os[R] = c;
    return rows.template with_layout<Out>(os, detail::contiguous_strides(os), rows.offset());
  }
}

/// one_hot(idx, num_classes = -1): int64, shape idx.shape + [num_classes]; -1 takes max(idx) + 1
/// (torch.nn.functional.one_hot). A value outside [0, num_classes) throws index_error.
template <Expression I>
auto one_hot(const I& idx, std::int64_t num_classes = -1) {
  static_assert(std::is_same_v<value_type_of<I>, std::int64_t>,
                "tenet: one_hot needs an int64 index tensor (as torch)");
  const auto it = eval(idx);
  if (num_classes < -1)
    throw value_error("tenet: one_hot: num_classes must be -1 or non-negative, got " + std::to_string(num_classes));
  if (num_classes == -1) {
    if (it.numel() == 0)
      throw value_error("tenet: one_hot: cannot infer the number of classes from an empty tensor; give num_classes");
    const std::int64_t lo = eval(amin(it)).item();
    if (lo < 0)
      throw index_error("tenet: one_hot: class values must be non-negative, got " + std::to_string(lo));
    num_classes = eval(amax(it)).item() + 1;
  }
  detail::check_index_values(it, 0, num_classes, std::nullopt, [&](std::int64_t bad) {
    return "tenet: one_hot: class value " + std::to_string(bad) + " is out of range for num_classes " +
           std::to_string(num_classes) + " (class values must be in [0, " + std::to_string(num_classes) + "))";
  });
  using S = detail::concat_shapes_t<shape_of<I>, shape<dyn>>;
  sizes_t<S::rank> s{};
  for (std::size_t k = 0; k + 1 < S::rank; ++k) s[k] = it.sizes()[k];
  s[S::rank - 1] = num_classes;
  return scatter<-1>(detail::filled<std::int64_t, S>(0, s), it.template unsqueeze<-1>(), std::int64_t{1});
}

/// bincount(x, minlength = 0): counts of each value of the 1-D non-negative integer x, int64, length
/// max(max(x) + 1, minlength) (torch.bincount).
template <Expression X>
auto bincount(const X& x, std::int64_t minlength = 0);
/// bincount(x, weights, minlength = 0): sums of weights per value; float32 weights give float32,
/// any other dtype float64 (as torch).
template <Expression X, Expression W>
auto bincount(const X& x, const W& weights, std::int64_t minlength = 0);

namespace detail {
template <class X>
std::pair<Tensor<std::int64_t, shape<dyn>>, std::int64_t> bincount_prepare(const X& x, std::int64_t minlength) {
  static_assert(rank_of<X> == 1, "tenet: bincount needs a 1-D tensor (as torch)");
  using T = value_type_of<X>;
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>,
                "tenet: bincount needs an integer tensor (as torch)");
  if (minlength < 0) throw value_error("tenet: bincount: minlength must be non-negative, got " + std::to_string(minlength));
  Tensor<std::int64_t, shape<dyn>> xi = cast_to<std::int64_t>(x);
  std::int64_t len = minlength;
  if (xi.numel() > 0) {
    const std::int64_t lo = eval(amin(xi)).item();
    if (lo < 0)
      throw value_error("tenet: bincount needs non-negative values, got " + std::to_string(lo));
    const std::int64_t hi = eval(amax(xi)).item();
    if (hi == std::numeric_limits<std::int64_t>::max())  // hi + 1 bins would overflow (torch's error too)
      throw value_error("tenet: bincount: the largest value " + std::to_string(hi) + " leaves no room for " +
                        std::to_string(hi) + " + 1 bins (it must be < 2^63 - 1)");
    len = std::max(len, hi + 1);
  }
  return {xi, len};
}
}  // namespace detail

template <Expression X>
auto bincount(const X& x, std::int64_t minlength) {
  auto [xi, len] = detail::bincount_prepare(x, minlength);
  return scatter_add<0>(detail::filled<std::int64_t, shape<dyn>>(0, {len}), xi,
                        detail::filled<std::int64_t, shape<dyn>>(1, xi.sizes()));
}
template <Expression X, Expression W>
auto bincount(const X& x, const W& weights, std::int64_t minlength) {
  static_assert(rank_of<W> == 1, "tenet: bincount: weights must be 1-D (as torch)");
  using R = std::conditional_t<std::is_same_v<value_type_of<W>, float>, float, double>;
  auto [xi, len] = detail::bincount_prepare(x, minlength);
  if (weights.sizes()[0] != xi.sizes()[0])
    throw shape_error("tenet: bincount: weights have " + std::to_string(weights.sizes()[0]) +
                      " elements, the input " + std::to_string(xi.sizes()[0]) + " (they must be equal)");
  return scatter_add<0>(detail::filled<R, shape<dyn>>(R(0), {len}), xi, detail::cast_to<R>(weights));
}

/// histc(x, bins = 100, min = 0, max = 0): a histogram of bins equal bins over [min, max]; with
/// min == max the data's range is used (widened by 1 each side when it is one value); elements
/// outside are ignored; the last bin includes max (torch.histc). Floating x; result x's dtype.
template <Expression X>
Tensor<value_type_of<X>, shape<dyn>> histc(const X& x, std::int64_t bins = 100, double min = 0.0, double max = 0.0) {
  using T = value_type_of<X>;
  static_assert(is_floating_v<T>, "tenet: histc needs a floating tensor (as torch on the CPU)");
  if (bins <= 0 || bins == std::numeric_limits<std::int64_t>::max())  // bins + 1 slots are made below
    throw value_error("tenet: histc: bins must be positive and below 2^63 - 1, got " + std::to_string(bins));
  const auto xf = eval(x).template reshape<-1>();
  double lo = min, hi = max;
  if (lo == hi && xf.numel() > 0) {
    lo = static_cast<double>(static_cast<compute_t<T>>(eval(amin(xf)).item()));
    hi = static_cast<double>(static_cast<compute_t<T>>(eval(amax(xf)).item()));
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  if (!std::isfinite(lo) || !std::isfinite(hi))
    throw value_error("tenet: histc: range of [" + std::to_string(lo) + ", " + std::to_string(hi) + "] is not finite");
  if (!(lo < hi)) throw value_error("tenet: histc: max must be larger than min");
  // bin = trunc((x - lo) * bins / (hi - lo)) in x's dtype, as torch's kernel; max falls in the last
  // bin; elements outside [lo, hi] (and NaN) go to slot `bins`, dropped at the end
  using C = compute_t<T>;
  const T tlo = T(static_cast<C>(lo)), thi = T(static_cast<C>(hi));
  const T width = T(static_cast<C>(thi) - static_cast<C>(tlo));
  auto inside = make_node(prim::bitwise_and_{}, make_node(prim::ge_{}, xf, scalar<T>{tlo}),
                          make_node(prim::le_{}, xf, scalar<T>{thi}));
  auto scaled = make_node(prim::div_{},
                          make_node(prim::mul_{}, make_node(prim::sub_{}, xf, scalar<T>{tlo}),
                                    scalar<T>{T(static_cast<C>(bins))}),
                          scalar<T>{width});
  // outside elements (and NaN) become 0 before the conversion to an integer
  auto pos = make_node(prim::minimum_{},
                       detail::cast_to<std::int64_t>(make_node(prim::where_{}, inside, scaled, scalar<T>{T(0)})),
                       scalar<std::int64_t>{bins - 1});
  auto slot = make_node(prim::where_{}, inside, pos, scalar<std::int64_t>{bins});
  Tensor<T, shape<dyn>> h = scatter_add<0>(detail::filled<T, shape<dyn>>(T(0), {bins + 1}), slot,
                                           detail::filled<T, shape<dyn>>(T(1), xf.sizes()));
  return h.template narrow<0>(0, bins);
}

}  // namespace tenet
