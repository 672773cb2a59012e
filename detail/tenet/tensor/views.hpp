#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The view members of Tensor: new sizes/strides/offset over the same storage.
// @post every view v of t satisfies v(i...) == t(f(i...)) for the index map f of the op, and
//       shares t's storage (tests/test_views.cpp checks both).
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include <tenet/tensor.hpp>

namespace tenet::compile_error {
template <class Shape, auto... Permutation>
struct not_a_permutation {
  static_assert(always_false<Shape>, "tenet: permute<...> needs each dim of the shape exactly once (see "
                                     "'not_a_permutation<shape, dims...>' above)");
};
template <class Shape, class Dim>
struct squeeze_non_unit {
  static_assert(always_false<Shape>, "tenet: squeeze<d> of a static extent that is not 1 (see "
                                     "'squeeze_non_unit<shape, dim<d>>' above)");
};
template <class From, class To>
struct cannot_expand {
  static_assert(always_false<From>, "tenet: cannot expand 'cannot_expand<from, to>' above: a non-1 static extent "
                                    "differs from the target");
};
}  // namespace tenet::compile_error

namespace tenet::detail {

/// True for a static extent equal to -1 (false, without a cast, for dyn and sym extents).
template <auto E>
constexpr bool is_minus_one_extent() {
  if constexpr (is_static_extent<E>)
    return static_cast<std::int64_t>(E) == -1;
  else
    return false;
}

template <class S, std::size_t R2, std::size_t I, auto... E>
constexpr auto expand_extent() {
  constexpr auto e = nth_extent<I, E...>();
  if constexpr (is_minus_one_extent<e>()) {
    static_assert(I + S::rank >= R2, "tenet: expand: -1 is not allowed for a new leading dim");
    return S::template extent<I + S::rank - R2>;
  } else {
    return e;
  }
}
template <class S, std::size_t R2, class Seq, auto... E>
struct expand_shape;
template <class S, std::size_t R2, std::size_t... I, auto... E>
struct expand_shape<S, R2, std::index_sequence<I...>, E...> {
  using type = shape<expand_extent<S, R2, I, E...>()...>;
};
template <auto E>
constexpr bool is_negative_static_extent() {
  if constexpr (is_static_extent<E>)
    return static_cast<std::int64_t>(E) < 0;
  else
    return false;
}

// reshape target: -1 is inferred (statically when the other extents and the source are static).
template <class S, auto... E>
struct reshape_target {
  static constexpr std::size_t rank = sizeof...(E);
  static constexpr int minus_ones = ((is_minus_one_extent<E>() ? 1 : 0) + ... + 0);
  static_assert(minus_ones <= 1, "tenet: reshape: only one extent can be -1");
  static constexpr bool others_static = ((is_static_extent<E>) && ...);
  static constexpr std::int64_t known_product = [] {
    std::int64_t p = 1;
    (
        [&] {
          if constexpr (is_static_extent<E>) {
            if (static_cast<std::int64_t>(E) != -1) p *= static_cast<std::int64_t>(E);
          }
        }(),
        ...);
    return p;
  }();
  static constexpr bool fully_static = S::is_static && others_static;
  template <auto X>
  static constexpr auto map_extent() {
    if constexpr (is_minus_one_extent<X>()) {
      if constexpr (fully_static && known_product != 0)
        return static_cast<int>(S::static_numel / known_product);
      else
        return dyn;
    } else {
      static_assert(!is_negative_static_extent<X>(), "tenet: reshape extents must be >= 0 or -1");
      return X;
    }
  }
  using type = shape<map_extent<E>()...>;
  static constexpr bool checked = [] {
    if constexpr (fully_static) {
      constexpr bool ok = minus_ones ? (known_product != 0 && S::static_numel % known_product == 0)
                                     : known_product == S::static_numel;
      if constexpr (!ok) (void)sizeof(compile_error::cannot_reshape<S, shape<E...>>);
    }
    return true;
  }();
  static_assert(checked);
};

/// torch's rule for viewing a strided tensor with new sizes without copying; false when impossible.
template <std::size_t R, std::size_t R2>
bool view_strides(const std::array<std::int64_t, R>& sizes, const std::array<std::int64_t, R>& strides,
                  const std::array<std::int64_t, R2>& new_sizes, std::array<std::int64_t, R2>& out) {
  std::int64_t numel = 1;
  for (auto s : sizes) numel *= s;
  if (numel == 0) {
    out = contiguous_strides(new_sizes);
    return true;
  }
  // Walk the old dims from the back, grouping those that are contiguous with each other into chunks;
  // each chunk must be covered exactly by a run of new dims.
  std::int64_t view_d = static_cast<std::int64_t>(R2) - 1;
  std::int64_t chunk_base_stride = R ? strides[R - 1] : 1;
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (std::int64_t d = static_cast<std::int64_t>(R) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

}  // namespace tenet::detail

namespace tenet {

template <class T, class S>
template <auto... E, std::integral... N>
auto Tensor<T, S>::reshape(N... n) const {
  using target = detail::reshape_target<S, E...>;
  using S2 = typename target::type;
  constexpr std::size_t R2 = S2::rank;
  constexpr std::size_t runtime_extents = ((detail::is_static_extent<E> ? 0 : 1) + ... + 0);
  static_assert(sizeof...(N) == runtime_extents,
                "tenet: reshape<E...>(n...) takes one size argument for each dyn or sym extent of E");
  require_defined("reshape");
  const std::array<std::int64_t, sizeof...(N)> args{static_cast<std::int64_t>(n)...};
  sizes_t<R2> ns{};
  std::size_t ai = 0, i = 0;
  std::int64_t infer_at = -1, known = 1;
  (
      [&] {
        if constexpr (detail::is_static_extent<E>) {
          if (static_cast<std::int64_t>(E) == -1)
            infer_at = static_cast<std::int64_t>(i);
          else
            ns[i] = static_cast<std::int64_t>(E);
        } else {
          ns[i] = args[ai++];
          if (ns[i] < 0)
            throw shape_error("tenet: reshape: negative size " + std::to_string(ns[i]) + " for " + S2::text());
        }
        if (infer_at != static_cast<std::int64_t>(i) && __builtin_mul_overflow(known, ns[i], &known))
          throw shape_error("tenet: reshape: the sizes given for " + S2::text() +
                            " have too many elements (their product overflows int64)");
        ++i;
      }(),
      ...);
  const std::int64_t total = numel();
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0)
      throw shape_error("tenet: cannot reshape " + detail::sizes_text(sizes_) + " (" + std::to_string(total) +
                        " elements) into " + detail::sizes_text(ns) + " with -1 at dim " + std::to_string(infer_at));
    ns[static_cast<std::size_t>(infer_at)] = total / known;
  } else if (known != total) {
    throw shape_error("tenet: cannot reshape " + detail::sizes_text(sizes_) + " (" + std::to_string(total) +
                      " elements) into " + detail::sizes_text(ns) + " (" + std::to_string(known) + " elements)");
  }
  (void)detail::checked_numel(ns, "reshape");  // also with a 0 size: the strides must not overflow
  sizes_t<R2> st{};
  if (detail::view_strides(sizes_, strides_, ns, st)) return with_layout<S2>(ns, st, offset_);
  Tensor c = contiguous();
  return c.template with_layout<S2>(ns, detail::contiguous_strides(ns), c.offset_);
}

template <class T, class S>
template <std::int64_t... P>
auto Tensor<T, S>::permute() const {
  static_assert(sizeof...(P) == rank, "tenet: permute<...> needs one dim per dimension");
  static constexpr std::array<std::int64_t, rank> perm{detail::normalize_dim(P, static_cast<std::int64_t>(rank))...};
  constexpr bool ok = [&] {
    std::array<bool, rank> seen{};
    for (auto p : perm) {
      if (p < 0 || seen[static_cast<std::size_t>(p)]) return false;
      seen[static_cast<std::size_t>(p)] = true;
    }
    return true;
  }();
  if constexpr (!ok) {
    (void)sizeof(compile_error::not_a_permutation<S, P...>);
    return *this;
  } else {
    using S3 = detail::pick_extents_t<S, perm>;
    sizes_t<rank> ns{}, st{};
    for (std::size_t i = 0; i < rank; ++i) {
      ns[i] = sizes_[static_cast<std::size_t>(perm[i])];
      st[i] = strides_[static_cast<std::size_t>(perm[i])];
    }
    return with_layout<S3>(ns, st, offset_);
  }
}

template <class T, class S>
template <std::int64_t D0, std::int64_t D1>
auto Tensor<T, S>::transpose() const {
  constexpr std::size_t a = detail::static_dim<S, D0>(), b = detail::static_dim<S, D1>();
  static constexpr std::array<std::size_t, rank> src = [] {
    std::array<std::size_t, rank> r{};
    for (std::size_t i = 0; i < rank; ++i) r[i] = i == a ? b : i == b ? a : i;
    return r;
  }();
  using S2 = detail::pick_extents_t<S, src>;
  sizes_t<rank> ns = sizes_, st = strides_;
  std::swap(ns[a], ns[b]);
  std::swap(st[a], st[b]);
  return with_layout<S2>(ns, st, offset_);
}

template <class T, class S>
auto Tensor<T, S>::transpose(std::int64_t d0, std::int64_t d1) const {
  using S2 = typename detail::runtime_permuted<S>::type;
  const auto a = static_cast<std::size_t>(detail::checked_dim(d0, rank, "transpose"));
  const auto b = static_cast<std::size_t>(detail::checked_dim(d1, rank, "transpose"));
  sizes_t<rank> ns = sizes_, st = strides_;
  std::swap(ns[a], ns[b]);
  std::swap(st[a], st[b]);
  return with_layout<S2>(ns, st, offset_);
}

template <class T, class S>
template <std::int64_t D>
auto Tensor<T, S>::slice(std::int64_t start, std::int64_t end, std::int64_t step) const {
  constexpr std::size_t d = detail::static_dim<S, D>();
  if (step <= 0) throw value_error("tenet: slice step must be positive, got " + std::to_string(step));
  const std::int64_t n = sizes_[d];
  auto clamp = [n](std::int64_t v) { return std::clamp(v < 0 ? v + n : v, std::int64_t{0}, n); };
  const std::int64_t s = clamp(start), e = std::max(clamp(end), s);
  sizes_t<rank> ns = sizes_, st = strides_;
  ns[d] = e == s ? 0 : 1 + (e - s - 1) / step;  // ceil((e - s) / step) without overflowing for a huge step
  // the step only matters between two elements: a step beyond the extent keeps the stride
  if (ns[d] > 1 && __builtin_mul_overflow(strides_[d], step, &st[d]))
    throw value_error("tenet: slice: stride " + std::to_string(strides_[d]) + " times step " + std::to_string(step) +
                      " overflows int64");
  using S2 = detail::set_extent_t<S, d, dyn>;
  return with_layout<S2>(ns, st, offset_ + s * strides_[d]);
}

template <class T, class S>
template <std::int64_t D>
auto Tensor<T, S>::narrow(std::int64_t start, std::int64_t length) const {
  constexpr std::size_t d = detail::static_dim<S, D>();
  const std::int64_t n = sizes_[d];
  const std::int64_t s = start < 0 ? start + n : start;
  if (s < 0 || length < 0 || s > n || length > n - s)
    throw index_error("tenet: narrow(dim " + std::to_string(d) + ", start " + std::to_string(start) + ", length " +
                      std::to_string(length) + ") is out of range for size " + std::to_string(n));
  return slice<D>(s, s + length);
}

template <class T, class S>
template <std::int64_t D>
auto Tensor<T, S>::select(std::int64_t index) const {
  constexpr std::size_t d = detail::static_dim<S, D>();
  const std::int64_t i = checked_index(index, d);
  using S2 = detail::concat_shapes_t<detail::take_extents_t<S, 0, d>, detail::take_extents_t<S, d + 1, rank>>;
  sizes_t<rank - 1> ns{}, st{};
  for (std::size_t k = 0, j = 0; k < rank; ++k)
    if (k != d) ns[j] = sizes_[k], st[j++] = strides_[k];
  return with_layout<S2>(ns, st, offset_ + i * strides_[d]);
}

template <class T, class S>
template <class S2>
auto Tensor<T, S>::expand_as_shape(const sizes_t<S2::rank>& target) const {
  constexpr std::size_t R2 = S2::rank;
  static_assert(R2 >= rank, "tenet: expand cannot lower the rank");
  // static check: each non-1 static extent of S must equal the static target extent
  constexpr bool ok = [] {
    for (std::size_t i = 0; i < rank; ++i) {
      const auto& a = S::info[i];
      const auto& b = S2::info[i + R2 - rank];
      if (a.is_fixed() && b.is_fixed() && a.value != 1 && a.value != b.value) return false;
    }
    return true;
  }();
  if constexpr (!ok) (void)sizeof(compile_error::cannot_expand<S, S2>);
  sizes_t<R2> st{};
  for (std::size_t i = 0; i < R2; ++i) {
    if (i + rank < R2) {
      st[i] = 0;
      continue;
    }
    const std::size_t k = i + rank - R2;
    if (sizes_[k] == target[i])
      st[i] = strides_[k];
    else if (sizes_[k] == 1)
      st[i] = 0;
    else
      throw shape_error("tenet: cannot expand " + detail::sizes_text(sizes_) + " to " + detail::sizes_text(target) +
                        " (dim " + std::to_string(i) + ": " + std::to_string(sizes_[k]) + " vs " +
                        std::to_string(target[i]) + ")");
  }
  (void)detail::checked_numel(target, "expand");  // a view's numel must fit int64 (as torch)
  return with_layout<S2>(target, st, offset_);
}

template <class T, class S>
template <auto... E, std::integral... N>
auto Tensor<T, S>::expand(N... n) const {
  constexpr std::size_t R2 = sizeof...(E);
  static_assert(R2 >= rank, "tenet: expand cannot lower the rank");
  constexpr std::size_t runtime_extents = ((detail::is_static_extent<E> ? 0 : 1) + ... + 0);
  static_assert(sizeof...(N) == runtime_extents, "tenet: expand<E...>(n...) takes one size per dyn/sym extent");
  // -1 keeps the source extent
  using S2 = typename detail::expand_shape<S, R2, std::make_index_sequence<R2>, E...>::type;
  const std::array<std::int64_t, sizeof...(N)> args{static_cast<std::int64_t>(n)...};
  sizes_t<R2> target{};
  std::size_t ai = 0, i = 0;
  (
      [&] {
        if constexpr (detail::is_static_extent<E>) {
          target[i] = static_cast<std::int64_t>(E) == -1 ? sizes_[i + rank - R2] : static_cast<std::int64_t>(E);
        } else {
          target[i] = args[ai++];
        }
        ++i;
      }(),
      ...);
  return expand_as_shape<S2>(target);
}

template <class T, class S>
template <std::int64_t D>
auto Tensor<T, S>::unsqueeze() const {
  constexpr std::int64_t n = detail::normalize_dim(D, static_cast<std::int64_t>(rank) + 1);
  if constexpr (n < 0) (void)sizeof(compile_error::invalid_dim<S, compile_error::dim<D>>);
  constexpr std::size_t d = n < 0 ? 0 : static_cast<std::size_t>(n);
  using S2 = detail::concat_shapes_t<detail::take_extents_t<S, 0, d>, shape<1>, detail::take_extents_t<S, d, rank>>;
  sizes_t<rank + 1> ns{}, st{};
  for (std::size_t k = 0, j = 0; k <= rank; ++k) {
    if (k == d) {
      ns[k] = 1;
      st[k] = d < rank ? strides_[d] * sizes_[d] : 1;
    } else {
      ns[k] = sizes_[j];
      st[k] = strides_[j++];
    }
  }
  return with_layout<S2>(ns, st, offset_);
}

template <class T, class S>
template <std::int64_t D>
auto Tensor<T, S>::squeeze() const {
  constexpr std::size_t d = detail::static_dim<S, D>();
  if constexpr (S::info[d].is_fixed() && S::info[d].value != 1) {
    return *this;  // torch leaves a non-1 dim alone
  } else if constexpr (!S::info[d].is_fixed()) {
    static_assert(S::info[d].is_fixed(), "tenet: squeeze<d> of a run-time extent would give a run-time rank; "
                                         "use select<d>(0) after checking the size, or reshape");
    return *this;
  } else {
    return select<D>(0);
  }
}

template <class T, class S>
auto Tensor<T, S>::squeeze() const {
  // drops every static extent 1 (run-time extents are kept: the rank must stay static)
  constexpr std::size_t kept = [] {
    std::size_t k = 0;
    for (auto& e : S::info) k += !(e.is_fixed() && e.value == 1);
    return k;
  }();
  static constexpr std::array<std::size_t, kept> src = [] {
    std::array<std::size_t, kept> s{};
    std::size_t j = 0;
    for (std::size_t i = 0; i < rank; ++i)
      if (!(S::info[i].is_fixed() && S::info[i].value == 1)) s[j++] = i;
    return s;
  }();
  using S2 = detail::pick_extents_t<S, src>;
  sizes_t<kept> ns{}, st{};
  for (std::size_t j = 0; j < kept; ++j) ns[j] = sizes_[src[j]], st[j] = strides_[src[j]];
  return with_layout<S2>(ns, st, offset_);
}

template <class T, class S>
template <std::int64_t Start, std::int64_t End>
auto Tensor<T, S>::flatten() const {
  if constexpr (rank == 0) {
    return reshape<1>();
  } else {
    constexpr std::size_t a = detail::static_dim<S, Start>(), b = detail::static_dim<S, End>();
    static_assert(a <= b, "tenet: flatten<start, end> needs start <= end");
    constexpr std::int64_t merged = [] {
      std::int64_t p = 1;
      for (std::size_t i = a; i <= b; ++i) {
        if (!S::info[i].is_fixed()) return std::int64_t{-1};
        p *= S::info[i].value;
      }
      return p;
    }();
    using mid = std::conditional_t<merged >= 0, shape<static_cast<int>(merged)>, shape<dyn>>;
    using S2 = detail::concat_shapes_t<detail::take_extents_t<S, 0, a>, mid, detail::take_extents_t<S, b + 1, rank>>;
    sizes_t<S2::rank> ns{};
    std::int64_t m = 1;
    for (std::size_t i = a; i <= b; ++i) m *= sizes_[i];
    for (std::size_t i = 0, j = 0; i < rank; ++i) {
      if (i < a || i > b)
        ns[j++] = sizes_[i];
      else if (i == a)
        ns[j++] = m;
    }
    sizes_t<S2::rank> st{};
    if (detail::view_strides(sizes_, strides_, ns, st)) return with_layout<S2>(ns, st, offset_);
    Tensor c = contiguous();
    return c.template with_layout<S2>(ns, detail::contiguous_strides(ns), c.offset_);
  }
}

}  // namespace tenet

// ---------------------------------------------------------------------------------------------
// Free-function forms of the views, for any expression: a Tensor is viewed without a copy, an
// unevaluated expression is evaluated first (`transpose<0, 1>(a + b)`).
namespace tenet {
#define TENET_VIEW_FUNCTION(NAME, TEMPLATE_PARAMS, TEMPLATE_ARGS)                        \
  template <TEMPLATE_PARAMS, Expression E, class... A>                                 \
  auto NAME(const E& e, A... args) {                                                   \
    return eval(e).template NAME<TEMPLATE_ARGS>(args...);                              \
  }
TENET_VIEW_FUNCTION(reshape, auto... X, X...)
TENET_VIEW_FUNCTION(view, auto... X, X...)
TENET_VIEW_FUNCTION(expand, auto... X, X...)
TENET_VIEW_FUNCTION(permute, std::int64_t... P, P...)
TENET_VIEW_FUNCTION(slice, std::int64_t D, D)
TENET_VIEW_FUNCTION(narrow, std::int64_t D, D)
TENET_VIEW_FUNCTION(select, std::int64_t D, D)
TENET_VIEW_FUNCTION(unsqueeze, std::int64_t D, D)
#undef TENET_VIEW_FUNCTION
template <std::int64_t D0, std::int64_t D1, Expression E>
auto transpose(const E& e) {
  return eval(e).template transpose<D0, D1>();
}
template <Expression E>
auto transpose(const E& e, std::int64_t d0, std::int64_t d1) {
  return eval(e).transpose(d0, d1);
}
template <std::int64_t Start = 0, std::int64_t End = -1, Expression E>
auto flatten(const E& e) {
  return eval(e).template flatten<Start, End>();
}
template <Expression E>
auto squeeze(const E& e) {
  return eval(e).squeeze();
}
template <std::int64_t D, Expression E>
auto squeeze(const E& e) {
  return eval(e).template squeeze<D>();
}
template <Expression E>
auto contiguous(const E& e) {
  return eval(e).contiguous();
}

// The members of an unevaluated expression (expr/node.hpp, expr_members): the free functions above.
template <class D>
template <auto... E, std::integral... N>
auto expr_members<D>::reshape(N... n) const {
  return tenet::reshape<E...>(derived(), n...);
}
template <class D>
template <auto... E, std::integral... N>
auto expr_members<D>::view(N... n) const {
  return tenet::view<E...>(derived(), n...);
}
template <class D>
template <auto... E, std::integral... N>
auto expr_members<D>::expand(N... n) const {
  return tenet::expand<E...>(derived(), n...);
}
template <class D>
template <class E>
auto expr_members<D>::expand_as(const E& other) const {
  return tenet::contiguous(derived()).expand_as(other);
}
template <class D>
template <std::int64_t... P>
auto expr_members<D>::permute() const {
  return tenet::permute<P...>(derived());
}
template <class D>
template <std::int64_t D0, std::int64_t D1>
auto expr_members<D>::transpose() const {
  return tenet::transpose<D0, D1>(derived());
}
template <class D>
auto expr_members<D>::transpose(std::int64_t d0, std::int64_t d1) const {
  return tenet::transpose(derived(), d0, d1);
}
template <class D>
auto expr_members<D>::t() const {
  return tenet::contiguous(derived()).t();
}
template <class D>
auto expr_members<D>::mT() const {
  return tenet::contiguous(derived()).mT();
}
template <class D>
template <std::int64_t Dim>
auto expr_members<D>::slice(std::int64_t start, std::int64_t end, std::int64_t step) const {
  return tenet::slice<Dim>(derived(), start, end, step);
}
template <class D>
template <std::int64_t Dim>
auto expr_members<D>::narrow(std::int64_t start, std::int64_t length) const {
  return tenet::narrow<Dim>(derived(), start, length);
}
template <class D>
template <std::int64_t Dim>
auto expr_members<D>::select(std::int64_t index) const {
  return tenet::select<Dim>(derived(), index);
}
template <class D>
template <std::int64_t Dim>
auto expr_members<D>::unsqueeze() const {
  return tenet::unsqueeze<Dim>(derived());
}
template <class D>
template <std::int64_t Dim>
auto expr_members<D>::squeeze() const {
  return tenet::squeeze<Dim>(derived());
}
template <class D>
auto expr_members<D>::squeeze() const {
  return tenet::squeeze(derived());
}
template <class D>
template <std::int64_t Start, std::int64_t End>
auto expr_members<D>::flatten() const {
  return tenet::flatten<Start, End>(derived());
}
template <class D>
auto expr_members<D>::contiguous() const {
  return tenet::contiguous(derived());
}
template <class D>
auto expr_members<D>::clone() const {
  return tenet::contiguous(derived());
}
}  // namespace tenet
