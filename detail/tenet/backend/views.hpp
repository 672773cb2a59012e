#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The movement prims over a Tensor, for every backend with strided tensors: the view prims
// (prim::is_view_prim) as strided views of their operand's value (stride arithmetic, no copy;
// reshape copies only when the strides cannot be viewed, as torch.reshape), and pad_'s value by
// two pointwise runs of the backend (fill, then one strided copy of the kept input elements).
#include <algorithm>
#include <cstdint>
#include <tuple>

#include <tenet/expr/node.hpp>
#include <tenet/prims/movement.hpp>
#include <tenet/tensor/views.hpp>  // detail::view_strides
#include <tenet/tensor.hpp>

namespace tenet::detail {

/// x as a view with run-time extents (same storage and strides); anything but a tensor unchanged.
/// A composite kernel whose body is templated on its operands' types (sdpa's staged math runs a
/// dozen kernels) takes dyn_view of them, so it is instantiated once per dtype and rank, not once
/// per static shape of its operands (five attention programs of the gradient fuzzer took 159 s
/// of g++ before, against 206 s for the other 27).
template <class X>
decltype(auto) dyn_view(const X& x) {
  if constexpr (TensorType<X>) {
    using D = Tensor<value_type_of<X>, dyn_shape<rank_of<X>>>;
    if constexpr (std::is_same_v<X, D>)
      return x;
    else
      return D(x);
  } else {
    return x;
  }
}

/// reshape: a view when the strides allow (torch.reshape), else a contiguous copy. Inputs with a
/// negative stride are copied too (kept away from the GEMM).
template <class S, class E, class X>
Tensor<value_type_of<E>, shape_of<E>> view_of(const prim::reshape_<S>&, const E& e, const X& x) {
  using R = Tensor<value_type_of<E>, shape_of<E>>;
  const auto ns = e.sizes();
  sizes_t<S::rank> st{};
  bool negative = false;
  for (auto v : x.strides()) negative = negative || v < 0;
  if (!negative && view_strides(x.sizes(), x.strides(), ns, st)) return x.template with_layout<shape_of<E>>(ns, st, x.offset());
  auto c = x.clone();
  return R(c.template with_layout<shape_of<E>>(ns, contiguous_strides(ns), c.offset()));
}

template <std::int64_t... P, class E, class X>
Tensor<value_type_of<E>, shape_of<E>> view_of(const prim::permute_<P...>& op, const E&, const X& x) {
  constexpr std::size_t rank = sizeof...(P);
  sizes_t<rank> ns{}, st{};
  for (std::size_t i = 0; i < rank; ++i) {
    ns[i] = x.sizes()[static_cast<std::size_t>(op.perm[i])];
    st[i] = x.strides()[static_cast<std::size_t>(op.perm[i])];
  }
  return x.template with_layout<shape_of<E>>(ns, st, x.offset());
}

template <class S, class E, class X>
Tensor<value_type_of<E>, shape_of<E>> view_of(const prim::expand_<S>&, const E& e, const X& x) {
  const auto ns = e.sizes();
  constexpr std::size_t R = S::rank, r = X::rank;
  sizes_t<R> st{};
  for (std::size_t i = 0; i < R; ++i) st[i] = i + r < R ? 0 : (x.sizes()[i + r - R] == ns[i] ? x.strides()[i + r - R] : 0);
  return x.template with_layout<shape_of<E>>(ns, st, x.offset());
}

template <std::size_t R, class E, class X>
Tensor<value_type_of<E>, shape_of<E>> view_of(const prim::slice_<R>& op, const E& e, const X& x) {
  const auto ns = e.sizes();
  sizes_t<R> st{};
  std::int64_t off = x.offset();
  for (std::size_t d = 0; d < R; ++d) {
    st[d] = x.strides()[d] * op.step[d];
    if (ns[d] > 0) off += op.start[d] * x.strides()[d];
  }
  return x.template with_layout<shape_of<E>>(ns, st, off);
}

template <std::int64_t D, std::int64_t Size, std::int64_t Step, class E, class X>
Tensor<value_type_of<E>, shape_of<E>> view_of(const prim::unfold_<D, Size, Step>& op, const E& e, const X& x) {
  using C = std::remove_cvref_t<decltype(std::get<0>(e.children))>;
  constexpr std::size_t d = prim::unfold_<D, Size, Step>::template dim<C>, r = rank_of<C>;
  const auto ns = e.sizes();
  sizes_t<r + 1> st{};
  for (std::size_t i = 0; i < r; ++i) st[i] = x.strides()[i];
  st[d] = x.strides()[d] * op.step;
  st[r] = x.strides()[d];
  return x.template with_layout<shape_of<E>>(ns, st, x.offset());
}

/// pad_'s value of x into out (contiguous, the result's sizes) by two pointwise runs of the backend's
/// run(dst, src): the fill where anything is padded, then one strided copy of the kept input
/// elements (a negative low/high crops). The CPU and CUDA backends share it.
template <std::size_t R, class X, class Out, class Run>
void pad_into(const prim::pad_<R>& op, const X& x, const Out& out, Run&& run) {
  using T = value_type_of<Out>;
  const auto xs = x.sizes();
  const auto os = out.sizes();
  bool fills = false;
  // per dim: the first kept input index, how many are kept, where the first lands in out
  sizes_t<R> first{}, kept{}, dst_start{}, dst_stride{};
  bool empty = false;
  for (std::size_t d = 0; d < R; ++d) {
    const std::int64_t pitch = op.interior[d] + 1;
    fills = fills || op.low[d] > 0 || op.high[d] > 0 || (op.interior[d] > 0 && xs[d] > 1);
    // input index i lands at low + i * pitch; keep those in [0, os[d])
    std::int64_t i0 = op.low[d] >= 0 ? 0 : (-op.low[d] + pitch - 1) / pitch;
    std::int64_t i1 = xs[d];  // exclusive
    if (os[d] - 1 - op.low[d] < 0) {
      i1 = 0;
    } else {
      i1 = std::min<std::int64_t>(i1, (os[d] - 1 - op.low[d]) / pitch + 1);
    }
    first[d] = i0;
    kept[d] = std::max<std::int64_t>(0, i1 - i0);
    if (kept[d] == 0) empty = true;
    dst_start[d] = op.low[d] + i0 * pitch;
    dst_stride[d] = out.strides()[d] * pitch;
  }
  if (fills || empty) run(out, scalar<T>{static_cast<T>(op.value)});
  if (empty || out.numel() == 0) return;
  std::int64_t doff = out.offset(), soff = x.offset();
  sizes_t<R> sst{};
  for (std::size_t d = 0; d < R; ++d) {
    doff += dst_start[d] * out.strides()[d];
    soff += first[d] * x.strides()[d];
    sst[d] = x.strides()[d];
  }
  auto dst = out.template with_layout<dyn_shape<R>>(kept, dst_stride, doff);
  auto src = x.template with_layout<dyn_shape<R>>(kept, sst, soff);
  run(dst, src);
}

/// t viewed with rank max(R, 1) (a 0-dim tensor as one element of a 1-D one).
template <class T, class S>
auto at_least_1d(const Tensor<T, S>& t) {
  if constexpr (S::rank == 0)
    return t.template reshape<1>();
  else
    return t;
}

}  // namespace tenet::detail
