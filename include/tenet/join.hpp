#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// cat, stack (evaluate now: each input is copied into its slice of the result, which is allocated
// on the first input's device), split and chunk (views). A cat with a tracked operand (grad mode
// on) records one cat_node (autograd/cat.hpp); a lazy or cast operand that is tracked is evaluated
// (and recorded) first, then copied.
#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <tenet/autograd/cat.hpp>
#include <tenet/backend/evaluate.hpp>
#include <tenet/tensor.hpp>

namespace tenet::compile_error {
template <class ShapeA, class ShapeB, class Dim>
struct cannot_cat {
  static_assert(always_false<ShapeA>, "tenet: cat: in 'cannot_cat<shape A, shape B, dim<d>>' above the shapes differ "
                                      "at dim d, which is not the cat dim");
};
}  // namespace tenet::compile_error

namespace tenet {
namespace detail {
template <std::size_t D, class A, class B>
struct cat_shape {
  static_assert(A::rank == B::rank, "tenet: cat needs tensors of the same rank");
  template <std::size_t I>
  static constexpr auto extent() {
    constexpr auto a = A::info[I], b = B::info[I];
    if constexpr (I == D) {
      if constexpr (a.is_fixed() && b.is_fixed())
        return static_cast<int>(a.value + b.value);  // computed extents are int, as users write them
      else
        return dyn;
    } else if constexpr (a.is_fixed() && b.is_fixed() && a.value != b.value) {
      (void)sizeof(compile_error::cannot_cat<A, B, compile_error::dim<I>>);
      return dyn;
    } else if constexpr (a.is_fixed()) {
      return A::template extent<I>;
    } else {
      return B::template extent<I>;
    }
  }
  template <std::size_t... I>
  static auto make(std::index_sequence<I...>) -> shape<extent<I>()...>;
  using type = decltype(make(std::make_index_sequence<A::rank>{}));
};
template <std::size_t D, class... S>
struct cat_all;
template <std::size_t D, class A>
struct cat_all<D, A> {
  using type = A;
};
template <std::size_t D, class A, class B, class... Rest>
struct cat_all<D, A, B, Rest...> {
  using type = typename cat_all<D, typename cat_shape<D, A, B>::type, Rest...>::type;
};

template <std::size_t D, class T, class S, class Src>
void copy_into_slice(const Tensor<T, S>& out, std::int64_t& at, const Src& src) {
  const auto n = src.sizes()[D];
  assign(out.template narrow<static_cast<std::int64_t>(D)>(at, n), src);
  at += n;
}
template <std::size_t R>
void check_cat_sizes(const sizes_t<R>& a, const sizes_t<R>& b, std::size_t d) {
  for (std::size_t i = 0; i < R; ++i)
    if (i != d && a[i] != b[i])
      throw shape_error("tenet: cat: sizes " + sizes_text(a) + " and " + sizes_text(b) + " differ at dim " +
                        std::to_string(i) + " (" + std::to_string(a[i]) + " vs " + std::to_string(b[i]) +
                        "), which is not the cat dim " + std::to_string(d));
}

/// True when cat must record: grad mode is on and an operand of a floating dtype is tracked.
template <class T, class... X>
bool cat_records(const X&... xs) {
  if constexpr (!ag::is_autograd_dtype<T> || !(ag::has_float_tensor_leaf<X>() || ...))
    return false;
  else
    return ag::grad_mode() && (ag::needs_grad(xs) || ...);
}

/// Copies x into out's next slice along D and adds it to the cat node n: a tracked operand is
/// evaluated in out's dtype first (recorded, unless it is already such a tensor) and n gets its
/// identity; an untracked one is copied as it is.
template <std::size_t D, class T, class S, class Node, class X>
void copy_recorded(const Tensor<T, S>& out, std::int64_t& at, Node& n, const X& x) {
  if constexpr (ag::is_autograd_dtype<value_type_of<X>>) {
    if (ag::needs_grad(x)) {
      const Tensor<T, shape_of<X>> t = tenet::eval(cast_to<T>(x));
      n.add(t.autograd_meta(), t.sizes());
      copy_into_slice<D>(out, at, t.detach());
      return;
    }
  }
  n.add(nullptr, x.sizes());
  copy_into_slice<D>(out, at, x);
}
}  // namespace detail

/// cat<D>(a, b, ...): concatenation along dim D; dtypes promote as torch.cat.
template <std::int64_t D, Expression X0, Expression... X>
auto cat(const X0& x0, const X&... xs) {
  constexpr std::size_t d = detail::static_dim<shape_of<X0>, D>();
  using T = detail::promoted_t<X0, X...>;
  using S = typename detail::cat_all<d, shape_of<X0>, shape_of<X>...>::type;
  auto sizes = x0.sizes();
  auto add = [&](const auto& x) {
    detail::check_cat_sizes(sizes, x.sizes(), d);
    if (__builtin_add_overflow(sizes[d], x.sizes()[d], &sizes[d]))
      throw shape_error("tenet: cat: the sizes along dim " + std::to_string(d) + " add up to more than 2^63 - 1");
  };
  sizes[d] = x0.sizes()[d];
  (add(xs), ...);
  // on the first input's device (a mixed cat throws device_error when a slice is written); an
  // input without tensors (arange ...) takes the default device
  Tensor<T, S> out(sizes, detail::source_device(x0).value_or(default_device()));
  std::int64_t at = 0;
  if constexpr (detail::ag::is_autograd_dtype<T>) {
    if (detail::cat_records<T>(x0, xs...)) {
      auto n = std::make_shared<detail::ag::cat_node<T, S::rank>>();
      n->dim = d;
      n->dev = out.device();
      detail::copy_recorded<d>(out, at, *n, x0);
      (detail::copy_recorded<d>(out, at, *n, xs), ...);
      detail::ag::set_grad_fn(out, std::move(n));
      return out;
    }
  }
  detail::copy_into_slice<d>(out, at, x0);
  (detail::copy_into_slice<d>(out, at, xs), ...);
  return out;
}
/// cat<D>(list): a run-time number of tensors of one type.
template <std::int64_t D, class T, class S>
auto cat(const std::vector<Tensor<T, S>>& xs) {
  constexpr std::size_t d = detail::static_dim<S, D>();
  using S2 = detail::set_extent_t<S, d, dyn>;
  if (xs.empty()) throw value_error("tenet: cat needs at least one tensor");
  auto sizes = xs[0].sizes();
  sizes[d] = 0;
  for (auto& x : xs) {
    detail::check_cat_sizes(xs[0].sizes(), x.sizes(), d);
    if (__builtin_add_overflow(sizes[d], x.sizes()[d], &sizes[d]))
      throw shape_error("tenet: cat: the sizes along dim " + std::to_string(d) + " add up to more than 2^63 - 1");
  }
  Tensor<T, S2> out(sizes, xs[0].device());
  std::int64_t at = 0;
  if constexpr (detail::ag::is_autograd_dtype<T>) {
    if (detail::ag::grad_mode() && std::any_of(xs.begin(), xs.end(), [](const auto& x) { return detail::ag::is_tracked(x); })) {
      auto n = std::make_shared<detail::ag::cat_node<T, S::rank>>();
      n->dim = d;
      n->dev = out.device();
      for (auto& x : xs) detail::copy_recorded<d>(out, at, *n, x);
      detail::ag::set_grad_fn(out, std::move(n));
      return out;
    }
  }
  for (auto& x : xs) detail::copy_into_slice<d>(out, at, x);
  return out;
}

/// stack<D>(a, b, ...): a new dim D of extent = the number of tensors.
template <std::int64_t D, Expression X0, Expression... X>
auto stack(const X0& x0, const X&... xs) {
  // eval, not to_tensor: a lazy operand that is tracked is recorded (its view too)
  auto unsq = [](const auto& x) { return eval(x).template unsqueeze<D>(); };
  return cat<D>(unsq(x0), unsq(xs)...);
}

/// split<D>(x, size): views of `size` elements along D (the last may be shorter), as torch.split.
template <std::int64_t D, class T, class S>
auto split(const Tensor<T, S>& x, std::int64_t size) {
  constexpr std::size_t d = detail::static_dim<S, D>();
  if (size <= 0) throw value_error("tenet: split size must be positive, got " + std::to_string(size));
  using V = decltype(x.template narrow<D>(0, 0));
  std::vector<V> parts;
  const std::int64_t n = x.sizes()[d];
  for (std::int64_t at = 0;; at += size) {  // stops before `at + size` could overflow
    parts.push_back(x.template narrow<D>(at, std::min(size, n - at)));
    if (size >= n - at) break;
  }
  return parts;
}
/// chunk<D>(x, chunks): as torch.chunk (chunks of ceil(n / chunks); possibly fewer than asked).
template <std::int64_t D, class T, class S>
auto chunk(const Tensor<T, S>& x, std::int64_t chunks) {
  constexpr std::size_t d = detail::static_dim<S, D>();
  if (chunks <= 0) throw value_error("tenet: chunk expects chunks > 0, got " + std::to_string(chunks));
  const std::int64_t n = x.sizes()[d];
  return split<D>(x, n == 0 ? 1 : 1 + (n - 1) / chunks);  // ceil(n / chunks), no overflow for huge chunks
}

}  // namespace tenet
