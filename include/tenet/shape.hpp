#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Shapes as types: `shape<2, dyn, sym<"T">, 64>`.
//
// An extent is one of
//   - a number (static: known to the compiler, checked at compile time),
//   - `dyn` (known at run time only, checked at run time),
//   - `sym<"T">` (known at run time, but the same value everywhere the name "T" is used; two
//     `sym<"T">` meet without a compile-time check; the run-time check still guards them).
// The rules (broadcast, matmul, reduce, reshape) are computed on types here and, for run-time
// extents, by the matching functions in detail/tenet/shape/rules.hpp.
#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <tenet/error.hpp>

namespace tenet {

/// A run-time extent.
struct dyn_t {
  friend constexpr bool operator==(dyn_t, dyn_t) = default;
};
inline constexpr dyn_t dyn{};

/// A string usable as a template argument (the name of a symbolic extent).
template <std::size_t N>
struct fixed_string {
  char value[N]{};
  constexpr fixed_string(const char (&s)[N]) { std::copy_n(s, N, value); }
  constexpr std::string_view view() const { return {value, N - 1}; }
  template <std::size_t M>
  constexpr bool operator==(const fixed_string<M>& o) const {
    return view() == o.view();
  }
};

/// A symbolic extent: a run-time value that is the same wherever the name is used.
template <fixed_string Name>
struct sym_t {
  static constexpr std::string_view name = Name.view();
};
template <fixed_string Name>
inline constexpr sym_t<Name> sym{};

template <auto... Extents>
struct shape;

namespace detail {

template <class T>
struct is_sym_type : std::false_type {};
template <fixed_string N>
struct is_sym_type<sym_t<N>> : std::true_type {};

template <auto E>
inline constexpr bool is_static_extent = std::is_integral_v<decltype(E)> && !std::is_same_v<decltype(E), bool>;
template <auto E>
inline constexpr bool is_dyn_extent = std::is_same_v<std::remove_cvref_t<decltype(E)>, dyn_t>;
template <auto E>
inline constexpr bool is_sym_extent = is_sym_type<std::remove_cvref_t<decltype(E)>>::value;

template <auto E>
concept extent_value = is_static_extent<E> || is_dyn_extent<E> || is_sym_extent<E>;

/// Compile-time description of one extent, used by the constexpr shape rules.
struct extent_info {
  enum kind_t : std::uint8_t { fixed, dynamic, symbolic } kind = dynamic;
  std::int64_t value = -1;     // for fixed
  std::string_view name = {};  // for symbolic
  constexpr bool is_fixed() const { return kind == fixed; }
  constexpr bool same_symbol(const extent_info& o) const {
    return kind == symbolic && o.kind == symbolic && name == o.name;
  }
};

template <auto E>
constexpr extent_info info_of() {
  static_assert(extent_value<E>, "tenet: a shape extent must be a number, tenet::dyn or tenet::sym<\"name\">");
  if constexpr (is_static_extent<E>) {
    static_assert(E >= 0, "tenet: a static extent must not be negative");
    return {extent_info::fixed, static_cast<std::int64_t>(E), {}};
  } else if constexpr (is_dyn_extent<E>) {
    return {extent_info::dynamic, -1, {}};
  } else {
    return {extent_info::symbolic, -1, std::remove_cvref_t<decltype(E)>::name};
  }
}

template <class T>
struct is_shape : std::false_type {};
template <auto... E>
struct is_shape<shape<E...>> : std::true_type {};

/// The I-th extent value of a pack (keeps its exact type: number, dyn_t or sym_t<...>).
template <std::size_t I, auto First, auto... Rest>
constexpr auto nth_extent() {
  if constexpr (I == 0)
    return First;
  else
    return nth_extent<I - 1, Rest...>();
}

/// Writes an extent the way it appears in a shape type: 64, dyn, sym<"T">.
inline std::string extent_text(const extent_info& e) {
  switch (e.kind) {
    case extent_info::fixed: return std::to_string(e.value);
    case extent_info::dynamic: return "dyn";
    default: return "sym<\"" + std::string(e.name) + "\">";
  }
}

}  // namespace detail

template <class S>
concept Shape = detail::is_shape<S>::value;

/// A shape: a list of extents. `rank` is always static.
template <auto... Extents>
struct shape {
  static_assert((detail::extent_value<Extents> && ...),
                "tenet: a shape extent must be a number, tenet::dyn or tenet::sym<\"name\">");
  static constexpr std::size_t rank = sizeof...(Extents);
  static constexpr std::array<detail::extent_info, rank> info{detail::info_of<Extents>()...};
  /// True when every extent is a number.
  static constexpr bool is_static = (detail::is_static_extent<Extents> && ...);
  /// The product of the extents when all are static, else -1.
  static constexpr std::int64_t static_numel = [] {
    if constexpr (!is_static) {
      return std::int64_t{-1};
    } else {
      std::int64_t n = 1;
      ((n *= static_cast<std::int64_t>(Extents)), ...);
      return n;
    }
  }();
  template <std::size_t I>
  static constexpr auto extent = detail::nth_extent<I, Extents...>();
  /// Static extent I, or -1 when it is only known at run time.
  static constexpr std::int64_t static_extent(std::size_t i) { return info[i].is_fixed() ? info[i].value : -1; }
  /// "shape<64, dyn, sym<"T">>"
  static std::string text() {
    std::string s = "shape<";
    for (std::size_t i = 0; i < rank; ++i) s += (i ? ", " : "") + detail::extent_text(info[i]);
    return s + ">";
  }
};

template <>
struct shape<> {
  static constexpr std::size_t rank = 0;
  static constexpr std::array<detail::extent_info, 0> info{};
  static constexpr bool is_static = true;
  static constexpr std::int64_t static_numel = 1;
  static constexpr std::int64_t static_extent(std::size_t) { return -1; }
  static std::string text() { return "shape<>"; }
};

/// A shape of `N` run-time extents.
namespace detail {
template <std::size_t N, class Seq = std::make_index_sequence<N>>
struct dyn_shape_impl;
template <std::size_t N, std::size_t... I>
struct dyn_shape_impl<N, std::index_sequence<I...>> {
  using type = shape<((void)I, dyn)...>;
};
}  // namespace detail
template <std::size_t N>
using dyn_shape = typename detail::dyn_shape_impl<N>::type;

/// Run-time sizes of a tensor of rank R.
template <std::size_t R>
using sizes_t = std::array<std::int64_t, R>;

}  // namespace tenet
