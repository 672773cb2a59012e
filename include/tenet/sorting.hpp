#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Scans, sorting and selection (torch.cumsum ... torch.mode), tril/triu and iota, as
// decompositions into the prims scan_, sort_ and iota_ (prims/scan.hpp, sort.hpp, iota.hpp) and the
// elementwise/reduction prims. Dims are template arguments (`cumsum<1>(x)`, `sort<-1>(x)`); a bad
// dim is a compile error.
//
// Single results are lazy expressions (cumsum, cumprod, logcumsumexp, argsort, msort, tril, triu,
// iota). The ops that return values and indices (cummax, cummin, sort, topk, kthvalue, median,
// mode) evaluate now and return `values_indices{values, indices}` of Tensors, as torch's named
// tuples (`auto [v, i] = sort<1>(x);`): one sort fills both.
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include <tenet/error.hpp>
#include <tenet/ops.hpp>
#include <tenet/tensor.hpp>

#include <tenet/backend/evaluate.hpp>
#include <tenet/prims/iota.hpp>
#include <tenet/prims/scan.hpp>
#include <tenet/prims/sort.hpp>
#include <tenet/join.hpp>
#include <tenet/tensor/views.hpp>

namespace tenet {

/// The two results of cummax, sort, topk, kthvalue, median and mode (torch's named tuples).
template <class V, class I>
struct values_indices {
  V values;
  I indices;
};

namespace detail {
template <std::size_t R, std::size_t... I>
auto ones_shape_impl(std::index_sequence<I...>) -> shape<((void)I, 1)...>;
/// shape<1, ..., 1> of rank R.
template <std::size_t R>
using ones_shape = decltype(ones_shape_impl<R>(std::make_index_sequence<R>{}));

/// The int64 sequence 0, 1, ..., n-1 laid along dim D of a rank-R shape (extent 1 elsewhere), to
/// broadcast against a tensor of rank R on device `dev` (made on the host, copied there).
template <std::size_t D, std::size_t R>
auto iota_along(std::int64_t n, device dev = tenet::cpu) {
  using S = set_extent_t<ones_shape<R>, D, dyn>;
  Tensor<std::int64_t, shape<dyn>> v = make_node(prim::iota_<std::int64_t>{n, 0, 1});
  if (dev != v.device()) v = v.to(dev);
  sizes_t<R> sizes{}, strides{};
  for (std::size_t i = 0; i < R; ++i) sizes[i] = 1, strides[i] = 1;
  sizes[D] = n;
  return v.template with_layout<S>(sizes, strides, v.offset());
}

template <std::size_t R>
std::int64_t line_length(const sizes_t<R>& s, std::size_t d) {
  return R == 0 ? 1 : s[d];
}

/// x sorted along D (stable): values and int64 indices, both contiguous.
template <std::int64_t D, class X>
auto sort_both(const X& x, bool descending) {
  const auto t = eval(x);
  using T = value_type_of<X>;
  using S = shape_of<X>;
  Tensor<T, S> values(t.sizes(), t.device());
  Tensor<std::int64_t, S> indices(t.sizes(), t.device());
  detail::sort_both_into<D>(t, values, indices, descending);
  // autograd: the values are the sort prim's (its VJP scatters the gradient back by the indices)
  if constexpr (ag::is_autograd_dtype<T>)
    if (ag::grad_mode() && ag::needs_grad(t)) ag::attach(make_node(prim::sort_<D, prim::sort_output::values>{descending}, t), values);
  return values_indices<Tensor<T, S>, Tensor<std::int64_t, S>>{values, indices};
}

template <class T>
constexpr T lowest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity)
    return -std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::lowest();
}

[[noreturn]] inline void throw_empty_dim(const char* op, std::size_t d) {
  throw index_error(std::string("tenet: ") + op + ": dim " + std::to_string(d) +
                    " has size 0; the op needs at least one element along it (as torch)");
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// scans
/// cumsum<D>(x): running sum along D; bool and integer inputs give int64 (as torch). cumsum<D, To>
/// converts the input to To first and gives To (torch's `dtype=` argument).
template <std::int64_t D, class To = void, Expression X>
auto cumsum(const X& x) {
  if constexpr (std::is_void_v<To>)
    return make_node(prim::scan_<prim::sum_kind, D>{}, x);
  else
    return detail::cast_to<To>(make_node(prim::scan_<prim::sum_kind, D>{}, detail::cast_to<To>(x)));
}
/// cumprod<D>(x): running product along D; bool and integer inputs give int64 (as torch).
template <std::int64_t D, class To = void, Expression X>
auto cumprod(const X& x) {
  if constexpr (std::is_void_v<To>)
    return make_node(prim::scan_<prim::prod_kind, D>{}, x);
  else
    return detail::cast_to<To>(make_node(prim::scan_<prim::prod_kind, D>{}, detail::cast_to<To>(x)));
}
/// logcumsumexp<D>(x): log(cumsum(exp(x))) along D without overflow (floating dtypes, as torch).
template <std::int64_t D, Expression X>
auto logcumsumexp(const X& x) {
  static_assert(is_floating_v<value_type_of<X>>,
                "tenet: logcumsumexp needs a floating dtype (as torch); cast with tenet::cast<float>(x)");
  return make_node(prim::scan_<prim::logaddexp_kind, D>{}, x);
}
/// cummax<D>(x): running maximum and the index where it was taken (the latest of equal values; a
/// NaN propagates, as torch.cummax).
template <std::int64_t D, Expression X>
auto cummax(const X& x) {
  const auto t = eval(x);
  using S = shape_of<X>;
  return values_indices<Tensor<value_type_of<X>, S>, Tensor<std::int64_t, S>>{
      eval(make_node(prim::scan_<prim::amax_kind, D>{}, t)), eval(make_node(prim::scan_<prim::running_arg<true>, D>{}, t))};
}
/// cummin<D>(x): running minimum and its index (as torch.cummin).
template <std::int64_t D, Expression X>
auto cummin(const X& x) {
  const auto t = eval(x);
  using S = shape_of<X>;
  return values_indices<Tensor<value_type_of<X>, S>, Tensor<std::int64_t, S>>{
      eval(make_node(prim::scan_<prim::amin_kind, D>{}, t)), eval(make_node(prim::scan_<prim::running_arg<false>, D>{}, t))};
}

// ---------------------------------------------------------------------------------------------
// sorting
/// sort<D>(x, descending = false): stable sort along D (NaN is the largest value), with the int64
/// indices into x (as torch.sort(stable=True)).
template <std::int64_t D = -1, Expression X>
auto sort(const X& x, bool descending = false) {
  (void)detail::line_dim<shape_of<X>, D>();
  return detail::sort_both<D>(x, descending);
}
/// argsort<D>(x, descending = false): the indices of sort (lazy).
template <std::int64_t D = -1, Expression X>
auto argsort(const X& x, bool descending = false) {
  return make_node(prim::sort_<D, prim::sort_output::indices>{descending}, x);
}
/// msort(x): the values of x sorted along dim 0 (lazy).
template <Expression X>
auto msort(const X& x) {
  return make_node(prim::sort_<0, prim::sort_output::values>{false}, x);
}

/// topk<D>(x, k, largest = true, sorted = true): the k largest (smallest) values along D and their
/// indices, in sorted order (also when sorted = false, which torch leaves unspecified). NaN counts
/// as the largest value; equal values come in input order. k outside [0, size] is an index_error.
template <std::int64_t D = -1, Expression X>
auto topk(const X& x, std::int64_t k, bool largest = true, bool sorted = true) {
  static_assert(rank_of<X> >= 1, "tenet: topk needs a tensor of rank >= 1");
  (void)sorted;
  constexpr std::size_t d = detail::line_dim<shape_of<X>, D>();
  const std::int64_t n = x.sizes()[d];
  if (k < 0 || k > n)
    throw index_error("tenet: topk: k = " + std::to_string(k) + " is out of range for dim " + std::to_string(d) +
                      " of size " + std::to_string(n) + " (need 0 <= k <= size)");
  auto s = detail::sort_both<D>(x, largest);
  auto v = s.values.template narrow<D>(0, k).contiguous();
  auto i = s.indices.template narrow<D>(0, k).contiguous();
  return values_indices<decltype(v), decltype(i)>{v, i};
}

namespace detail {
template <bool Keep, std::int64_t D, class X>
auto kthvalue_impl(const X& x, std::int64_t k) {
  static_assert(rank_of<X> >= 1, "tenet: kthvalue needs a tensor of rank >= 1");
  constexpr std::size_t d = line_dim<shape_of<X>, D>();
  const std::int64_t n = x.sizes()[d];
  if (k < 1 || k > n)
    throw index_error("tenet: kthvalue: k = " + std::to_string(k) + " is out of range for dim " + std::to_string(d) +
                      " of size " + std::to_string(n) + " (need 1 <= k <= size)");
  auto s = sort_both<D>(x, false);
  if constexpr (Keep) {
    auto v = s.values.template narrow<D>(k - 1, 1).contiguous();
    auto i = s.indices.template narrow<D>(k - 1, 1).contiguous();
    return values_indices<decltype(v), decltype(i)>{v, i};
  } else {
    auto v = s.values.template select<D>(k - 1).contiguous();
    auto i = s.indices.template select<D>(k - 1).contiguous();
    return values_indices<decltype(v), decltype(i)>{v, i};
  }
}
}  // namespace detail
/// kthvalue<D>(x, k): the k-th smallest value along D (k from 1) and its index (NaN is the largest
/// value; on ties, the index a stable sort puts at position k - 1).
template <std::int64_t D = -1, Expression X>
auto kthvalue(const X& x, std::int64_t k) {
  return detail::kthvalue_impl<false, D>(x, k);
}
template <std::int64_t D = -1, Expression X>
auto kthvalue(const X& x, std::int64_t k, keepdim_t) {
  return detail::kthvalue_impl<true, D>(x, k);
}

namespace detail {
template <bool Keep, std::int64_t D, class X>
auto median_impl(const X& x0) {
  static_assert(rank_of<X> >= 1, "tenet: median<D> needs a tensor of rank >= 1");
  constexpr std::size_t d = line_dim<shape_of<X>, D>();
  const auto x = eval(x0);
  const std::int64_t n = x.sizes()[d];
  if (n == 0) throw_empty_dim("median", d);
  auto s = sort_both<D>(x, false);
  const std::int64_t mid = (n - 1) / 2;
  auto pick = [&](const auto& t, std::int64_t at) {
    if constexpr (Keep)
      return t.template narrow<D>(at, 1);
    else
      return t.template select<D>(at);
  };
  using T = value_type_of<X>;
  if constexpr (is_floating_v<T>) {
    // a NaN in the line (sorted last) is the median, at the index of the first NaN (as torch)
    auto has_nan = isnan(pick(s.values, n - 1));
    auto first_nan = [&] {
      if constexpr (Keep)
        return argmax<D>(isnan(x), keepdim);
      else
        return argmax<D>(isnan(x));
    }();
    auto v = eval(where(has_nan, pick(s.values, n - 1), pick(s.values, mid)));
    auto i = eval(where(has_nan, first_nan, pick(s.indices, mid)));
    return values_indices<decltype(v), decltype(i)>{v, i};
  } else {
    auto v = pick(s.values, mid).contiguous();
    auto i = pick(s.indices, mid).contiguous();
    return values_indices<decltype(v), decltype(i)>{v, i};
  }
}
}  // namespace detail
/// median<D>(x): the lower median along D (position (n - 1) / 2 of the stable sort) and its index;
/// a line holding NaN gives NaN at the index of its first NaN (as torch.median(x, dim)).
template <std::int64_t D, Expression X>
auto median(const X& x) {
  return detail::median_impl<false, D>(x);
}
template <std::int64_t D, Expression X>
auto median(const X& x, keepdim_t) {
  return detail::median_impl<true, D>(x);
}
/// median(x): the lower median of all elements (0-dim; NaN when x holds a NaN or is empty, as torch).
template <Expression X>
auto median(const X& x0) {
  using T = value_type_of<X>;
  const auto x = eval(x0).template reshape<-1>();
  const std::int64_t n = x.numel();
  if (n == 0) {
    if constexpr (is_floating_v<T>) {
      Tensor<T, shape<>> r(sizes_t<0>{});
      r.fill_(std::numeric_limits<compute_t<T>>::quiet_NaN());
      return r;
    } else {
      throw value_error("tenet: median() of an empty integer tensor has no value (torch returns NaN only for floats)");
    }
  }
  const Tensor<T, shape<dyn>> s = make_node(prim::sort_<0, prim::sort_output::values>{false}, x);
  const T last = s.template select<0>(n - 1).cpu().item();  // (one element from the device)
  return Tensor<T, shape<>>(s.template select<0>(std::isnan(static_cast<double>(static_cast<compute_t<T>>(last))) ? n - 1 : (n - 1) / 2));
}

namespace detail {
template <bool Keep, std::int64_t D, class X>
auto mode_impl(const X& x) {
  static_assert(rank_of<X> >= 1, "tenet: mode needs a tensor of rank >= 1");
  constexpr std::size_t d = line_dim<shape_of<X>, D>();
  constexpr std::size_t R = rank_of<X>;
  using T = value_type_of<X>;
  const std::int64_t n = x.sizes()[d];
  if (n == 0) throw_empty_dim("mode", d);
  auto s = sort_both<D>(x, false);
  const auto pos = iota_along<d, R>(n, s.values.device());
  // a run of equal values starts where the sorted line changes (a comparison: nothing to record)
  const auto sorted = s.values.detach();
  const auto prev = cat<D>(sorted.template narrow<D>(0, 1), sorted.template narrow<D>(0, n - 1));
  auto starts = logical_or(eq(pos, std::int64_t{0}), ne(sorted, prev));
  // the length of the run so far at each position; its first maximum ends the most frequent run of
  // the smallest value (the sorted line is ascending)
  auto run_start = make_node(prim::scan_<prim::amax_kind, D>{}, where(starts, pos, std::int64_t{0}));
  auto count = pos - run_start;
  const auto at = eval(argmax<D>(count, keepdim));
  auto chosen = eq(pos, at);
  auto v = [&] {
    if constexpr (Keep)
      return eval(amax<D>(where(chosen, s.values, lowest_value<T>()), keepdim));
    else
      return eval(amax<D>(where(chosen, s.values, lowest_value<T>())));
  }();
  auto i = [&] {
    if constexpr (Keep)
      return eval(amax<D>(where(chosen, s.indices, std::int64_t{-1}), keepdim));
    else
      return eval(amax<D>(where(chosen, s.indices, std::int64_t{-1})));
  }();
  return values_indices<decltype(v), decltype(i)>{v, i};
}
}  // namespace detail
/// mode<D>(x): the most frequent value along D (the smallest of equally frequent ones) and the
/// index of its last occurrence.
template <std::int64_t D = -1, Expression X>
auto mode(const X& x) {
  return detail::mode_impl<false, D>(eval(x));
}
template <std::int64_t D = -1, Expression X>
auto mode(const X& x, keepdim_t) {
  return detail::mode_impl<true, D>(eval(x));
}

// ---------------------------------------------------------------------------------------------
// iota, tril, triu
/// iota<T>(n, start = 0, step = 1): the lazy 1-D sequence start + step * i, i < n (torch.arange's
/// values, as an expression).
template <class T = std::int64_t>
auto iota(std::int64_t n, double start = 0, double step = 1) {
  using P = prim::iota_<T>;
  if (n < 0) throw value_error("tenet: iota: negative length " + std::to_string(n));
  return make_node(P{n, static_cast<typename P::step_type>(start), static_cast<typename P::step_type>(step)});
}

namespace detail {
template <bool Lower, class X>
auto triangle(const X& x, std::int64_t diagonal) {
  constexpr std::size_t R = rank_of<X>;
  static_assert(R >= 2, "tenet: tril/triu need a tensor of rank >= 2 (a matrix or a batch of matrices)");
  using T = value_type_of<X>;
  const auto s = x.sizes();
  const device dev = expr_device(x);  // the masks live where x does
  const auto rows = iota_along<R - 2, R>(s[R - 2], dev);
  const auto cols = iota_along<R - 1, R>(s[R - 1], dev);
  // tril keeps col - row <= diagonal, triu keeps col - row >= diagonal
  auto shifted = make_node(prim::add_{}, rows, scalar<std::int64_t>{diagonal});
  auto keep = [&] {
    if constexpr (Lower)
      return make_node(prim::le_{}, cols, shifted);
    else
      return make_node(prim::ge_{}, cols, shifted);
  }();
  return make_node(prim::where_{}, keep, x, scalar<T>{T(0)});
}
}  // namespace detail
/// tril(x, diagonal = 0): x with the elements above the diagonal-th diagonal set to 0 (lazy).
template <Expression X>
auto tril(const X& x, std::int64_t diagonal = 0) {
  return detail::triangle<true>(x, diagonal);
}
/// triu(x, diagonal = 0): x with the elements below the diagonal-th diagonal set to 0 (lazy).
template <Expression X>
auto triu(const X& x, std::int64_t diagonal = 0) {
  return detail::triangle<false>(x, diagonal);
}

}  // namespace tenet
