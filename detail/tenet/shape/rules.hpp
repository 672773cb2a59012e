#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Shape rules on types (broadcast, matmul, reduction, reshape) and their run-time twins.
//
// Contract: for every rule R, `R<A, B>::type` is the static result and `R::sizes(a, b)` the run-time
// result; a static mismatch is a static_assert inside a `tenet::compile_error::...` template whose
// arguments show both shapes and the dimension; a run-time mismatch throws tenet::shape_error with
// the same words and the actual sizes.
#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include <tenet/shape.hpp>

namespace tenet::compile_error {
// These templates exist to be named in compiler diagnostics: their arguments are the values.
template <std::int64_t D>
struct dim {};
template <auto... E>
struct extents {};
template <class>
inline constexpr bool always_false = false;

template <class ShapeA, class ShapeB, class Dim>
struct cannot_broadcast {
  static_assert(always_false<ShapeA>,
                "tenet: cannot broadcast the shapes named in 'cannot_broadcast<shape A, shape B, dim<d>>' above: "
                "at dim d the extents differ and neither is 1");
};
template <class ShapeA, class ShapeB, class Extents>
struct cannot_matmul {
  static_assert(always_false<ShapeA>,
                "tenet: matmul shape mismatch in 'cannot_matmul<shape A, shape B, extents<k of A, k of B>>' above: "
                "the last dim of A must equal the second-to-last dim of B (the only dim of a 1-D B)");
};
template <class Shape, class Dim>
struct invalid_dim {
  static_assert(always_false<Shape>,
                "tenet: dimension out of range in 'invalid_dim<shape, dim<d>>' above: d must be in [-rank, rank)");
};
template <class Shape, class Dim>
struct repeated_dim {
  static_assert(always_false<Shape>, "tenet: dimension named twice in 'repeated_dim<shape, dim<d>>' above");
};
template <class ShapeFrom, class ShapeTo>
struct cannot_reshape {
  static_assert(always_false<ShapeFrom>,
                "tenet: cannot reshape: 'cannot_reshape<from, to>' above have different numbers of elements");
};
template <class ShapeA, class ShapeB>
struct rank_mismatch {
  static_assert(always_false<ShapeA>, "tenet: ranks differ in 'rank_mismatch<shape A, shape B>' above");
};
}  // namespace tenet::compile_error

namespace tenet::detail {

template <std::size_t R>
std::string sizes_text(const std::array<std::int64_t, R>& s) {
  std::string t = "shape<";
  for (std::size_t i = 0; i < R; ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ">";
}
inline std::string sizes_text(const std::int64_t* s, std::size_t r) {
  std::string t = "shape<";
  for (std::size_t i = 0; i < r; ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ">";
}

/// Normalizes a dimension index in [-rank, rank) to [0, rank); -1 when out of range.
constexpr std::int64_t normalize_dim(std::int64_t d, std::int64_t rank) {
  if (d < -rank || d >= rank) return -1;
  return d < 0 ? d + rank : d;
}

// ---------------------------------------------------------------------------------------------
// Sub-shapes and concatenation.
template <class S, std::size_t Begin, std::size_t End>
struct take_extents;
template <auto... E, std::size_t Begin, std::size_t End>
struct take_extents<shape<E...>, Begin, End> {
  // a partial specialization on the index sequence, not decltype of a function declaration:
  // nvcc's front end (EDG) rejects the latter's pack expansion in the return type
  template <class Seq>
  struct make;
  template <std::size_t... I>
  struct make<std::index_sequence<I...>> {
    using type = shape<shape<E...>::template extent<Begin + I>...>;
  };
  using type = typename make<std::make_index_sequence<End - Begin>>::type;
};
/// An empty range (also of shape<>, which has no extents to name).
template <auto... E, std::size_t At>
struct take_extents<shape<E...>, At, At> {
  using type = shape<>;
};
template <class S, std::size_t Begin, std::size_t End>
using take_extents_t = typename take_extents<S, Begin, End>::type;

// Shapes picked from another shape's extents, as partial specializations rather than
// decltype(lambda) (nvcc's front end mishandles lambdas in unevaluated operands of member
// templates: it re-emits the class's default template arguments).
template <class S, auto Src, class Seq = std::make_index_sequence<Src.size()>>
struct pick_extents;
template <class S, auto Src, std::size_t... I>
struct pick_extents<S, Src, std::index_sequence<I...>> {
  using type = shape<S::template extent<static_cast<std::size_t>(Src[I])>...>;
};
template <class S, auto Src>
using pick_extents_t = typename pick_extents<S, Src>::type;


template <class... S>
struct concat_shapes;
template <>
struct concat_shapes<> {
  using type = shape<>;
};
template <auto... A>
struct concat_shapes<shape<A...>> {
  using type = shape<A...>;
};
template <auto... A, auto... B, class... Rest>
struct concat_shapes<shape<A...>, shape<B...>, Rest...> {
  using type = typename concat_shapes<shape<A..., B...>, Rest...>::type;
};
template <class... S>
using concat_shapes_t = typename concat_shapes<S...>::type;

/// Replaces extent I of S by the value V.
template <class S, std::size_t I, auto V>
struct set_extent {
  using type = concat_shapes_t<take_extents_t<S, 0, I>, shape<V>, take_extents_t<S, I + 1, S::rank>>;
};
template <class S, std::size_t I, auto V>
using set_extent_t = typename set_extent<S, I, V>::type;

// ---------------------------------------------------------------------------------------------
// Broadcasting (right-aligned, as NumPy and PyTorch).
enum class pick : std::uint8_t { a, b, dynamic, mismatch };

/// The pick of two present extents (a dim only one shape has takes that shape's: broadcast::choice).
/// References, not pointers with nullptr for an absent dim: under -fsanitize=null (the debug preset)
/// GCC 12 instruments the null test of a pointer into a static constexpr array, and the comparison
/// is then "not a constant expression" (issue 27 item 5).
constexpr pick broadcast_pick(const extent_info& a, const extent_info& b) {
  if (a.is_fixed() && b.is_fixed()) {
    if (a.value == b.value || b.value == 1) return pick::a;
    if (a.value == 1) return pick::b;
    return pick::mismatch;
  }
  if (a.is_fixed()) return a.value == 1 ? pick::b : pick::a;
  if (b.is_fixed()) return b.value == 1 ? pick::a : pick::b;
  if (a.kind == extent_info::symbolic && (b.kind == extent_info::dynamic || a.same_symbol(b))) return pick::a;
  if (b.kind == extent_info::symbolic && a.kind == extent_info::dynamic) return pick::b;
  return pick::dynamic;
}

template <class A, class B>
struct broadcast {
  static constexpr std::size_t ra = A::rank, rb = B::rank, rank = ra > rb ? ra : rb;
  static constexpr pick choice(std::size_t i) {
    if (i + ra < rank) return pick::b;  // A has no dim here
    if (i + rb < rank) return pick::a;
    return broadcast_pick(A::info[i + ra - rank], B::info[i + rb - rank]);
  }
  template <std::size_t I>
  static constexpr auto extent() {
    constexpr pick c = choice(I);
    if constexpr (c == pick::a) {
      return A::template extent<I + ra - rank>;
    } else if constexpr (c == pick::b) {
      return B::template extent<I + rb - rank>;
    } else {
      if constexpr (c == pick::mismatch)
        (void)sizeof(compile_error::cannot_broadcast<A, B, compile_error::dim<static_cast<std::int64_t>(I)>>);
      return dyn;
    }
  }
  template <std::size_t... I>
  static auto make(std::index_sequence<I...>) -> shape<extent<I>()...>;
  using type = decltype(make(std::make_index_sequence<rank>{}));
};
template <class A, class B>
using broadcast_t = typename broadcast<A, B>::type;

template <class... S>
struct broadcast_all;
template <class A>
struct broadcast_all<A> {
  using type = A;
};
template <class A, class B, class... Rest>
struct broadcast_all<A, B, Rest...> {
  using type = typename broadcast_all<broadcast_t<A, B>, Rest...>::type;
};
template <class... S>
using broadcast_all_t = typename broadcast_all<S...>::type;

[[noreturn]] inline void throw_broadcast_error(const std::int64_t* a, std::size_t ra, const std::int64_t* b,
                                               std::size_t rb, std::size_t dim, std::int64_t ea, std::int64_t eb) {
  throw shape_error("tenet: cannot broadcast " + sizes_text(a, ra) + " with " + sizes_text(b, rb) + " (dim " +
                    std::to_string(dim) + ": " + std::to_string(ea) + " vs " + std::to_string(eb) + ")");
}

/// Run-time broadcast of two size arrays into a result of rank R (R >= both ranks).
template <std::size_t R, std::size_t RA, std::size_t RB>
std::array<std::int64_t, R> broadcast_sizes(const std::array<std::int64_t, RA>& a, const std::array<std::int64_t, RB>& b) {
  static_assert(R >= RA && R >= RB);
  std::array<std::int64_t, R> out{};
  for (std::size_t i = 0; i < R; ++i) {
    const bool has_a = i + RA >= R, has_b = i + RB >= R;
    const std::int64_t ea = has_a ? a[i + RA - R] : 1, eb = has_b ? b[i + RB - R] : 1;
    if (ea == eb || eb == 1)
      out[i] = ea;
    else if (ea == 1)
      out[i] = eb;
    else
      throw_broadcast_error(a.data(), RA, b.data(), RB, i, ea, eb);
  }
  return out;
}

/// A symbolic extent is bound once: where two operands name the same symbol in the same (right-
/// aligned) position, their run-time sizes must be equal (even 1 against n is an error).
template <class A, class B>
void check_symbols(const std::array<std::int64_t, A::rank>& a, const std::array<std::int64_t, B::rank>& b) {
  constexpr std::size_t ra = A::rank, rb = B::rank, n = ra < rb ? ra : rb;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& ea = A::info[ra - 1 - i];
    const auto& eb = B::info[rb - 1 - i];
    if (ea.same_symbol(eb) && a[ra - 1 - i] != b[rb - 1 - i])
      throw shape_error("tenet: symbolic extent " + extent_text(ea) + " is " + std::to_string(a[ra - 1 - i]) +
                        " in " + sizes_text(a) + " and " + std::to_string(b[rb - 1 - i]) + " in " + sizes_text(b) +
                        " (a symbol names one value everywhere)");
  }
}

/// Checks run-time sizes against the static extents of S (static extents must match exactly).
template <class S>
void check_sizes_match(const std::array<std::int64_t, S::rank>& s, const char* what) {
  for (std::size_t i = 0; i < S::rank; ++i) {
    if (S::info[i].is_fixed() && S::info[i].value != s[i])
      throw shape_error(std::string("tenet: ") + what + ": sizes " + sizes_text(s) + " do not fit " + S::text() +
                        " (dim " + std::to_string(i) + ": " + std::to_string(s[i]) + " vs " +
                        std::to_string(S::info[i].value) + ")");
    if (s[i] < 0)
      throw shape_error(std::string("tenet: ") + what + ": negative extent in " + sizes_text(s));
  }
}

/// The element count of sizes s[0, r) (each >= 0), checked: shape_error naming `what` and the sizes
/// when the product overflows int64. As torch, the product of the sizes with 0 read as 1 must fit
/// too (the contiguous strides are such products), so a zero size does not excuse huge others.
inline std::int64_t checked_numel(const std::int64_t* s, std::size_t r, const char* what) {
  std::int64_t span = 1;
  bool empty = false;
  for (std::size_t i = 0; i < r; ++i) {
    if (s[i] < 0) throw shape_error(std::string("tenet: ") + what + ": negative extent in " + sizes_text(s, r));
    empty = empty || s[i] == 0;
    if (__builtin_mul_overflow(span, s[i] == 0 ? std::int64_t{1} : s[i], &span))
      throw shape_error(std::string("tenet: ") + what + ": sizes " + sizes_text(s, r) +
                        " have too many elements (the product overflows int64)");
  }
  return empty ? 0 : span;
}
template <std::size_t R>
std::int64_t checked_numel(const std::array<std::int64_t, R>& s, const char* what) {
  return checked_numel(s.data(), R, what);
}
/// The bytes of a contiguous tensor of sizes s[0, r) and `itemsize`-byte elements, checked: at most
/// 2^63 - 1 (torch's limit), else shape_error naming `what` and the sizes. Never a wrapped size.
inline std::size_t checked_nbytes(const std::int64_t* s, std::size_t r, std::size_t itemsize, const char* what) {
  const std::int64_t n = checked_numel(s, r, what);
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<std::int64_t>(itemsize), &bytes))
    throw shape_error(std::string("tenet: ") + what + ": sizes " + sizes_text(s, r) + " of " + std::to_string(itemsize) +
                      "-byte elements need more than 2^63 - 1 bytes");
  return static_cast<std::size_t>(bytes);
}
template <std::size_t R>
std::size_t checked_nbytes(const std::array<std::int64_t, R>& s, std::size_t itemsize, const char* what) {
  return checked_nbytes(s.data(), R, itemsize, what);
}

/// Two shapes can describe the same tensor: same rank, and no two static extents differ.
template <class A, class B>
constexpr bool shapes_compatible() {
  if constexpr (A::rank != B::rank) {
    return false;
  } else {
    for (std::size_t i = 0; i < A::rank; ++i)
      if (A::info[i].is_fixed() && B::info[i].is_fixed() && A::info[i].value != B::info[i].value) return false;
    return true;
  }
}

// ---------------------------------------------------------------------------------------------
// Reductions: Dims are normalized at compile time; out-of-range or repeated dims are errors.
template <class S, auto... Dims>
struct reduce_dims {
  static constexpr std::int64_t rank = static_cast<std::int64_t>(S::rank);
  static constexpr std::size_t count = sizeof...(Dims);
  static constexpr std::array<std::int64_t, count> raw{static_cast<std::int64_t>(Dims)...};
  template <std::size_t I>
  static constexpr std::int64_t check_one() {
    constexpr std::int64_t d = normalize_dim(raw[I], rank == 0 ? 1 : rank);
    if constexpr (d < 0 || (rank == 0 && d != 0)) {
      (void)sizeof(compile_error::invalid_dim<S, compile_error::dim<raw[I]>>);
      return 0;
    } else {
      constexpr bool repeated = [] {
        for (std::size_t j = 0; j < I; ++j)
          if (normalize_dim(raw[j], rank == 0 ? 1 : rank) == d) return true;
        return false;
      }();
      if constexpr (repeated) (void)sizeof(compile_error::repeated_dim<S, compile_error::dim<raw[I]>>);
      return d;
    }
  }
  template <std::size_t... I>
  static constexpr std::array<std::int64_t, count> make(std::index_sequence<I...>) {
    return {check_one<I>()...};
  }
  static constexpr std::array<std::int64_t, count> dims = make(std::make_index_sequence<count>{});
  /// mask[i]: dim i is reduced. No dims at all means "reduce everything".
  static constexpr std::array<bool, S::rank> mask = [] {
    std::array<bool, S::rank> m{};
    for (std::size_t i = 0; i < S::rank; ++i) m[i] = count == 0;
    for (auto d : dims)
      if (d < static_cast<std::int64_t>(S::rank)) m[static_cast<std::size_t>(d)] = true;
    return m;
  }();
};

template <class S, bool KeepDim, auto... Dims>
struct reduce_shape {
  using dims_t = reduce_dims<S, Dims...>;
  static constexpr std::size_t kept = [] {
    std::size_t n = 0;
    for (bool m : dims_t::mask) n += (!m || KeepDim);
    return n;
  }();
  // index in S of result extent j
  static constexpr std::array<std::size_t, kept> source = [] {
    std::array<std::size_t, kept> s{};
    std::size_t j = 0;
    for (std::size_t i = 0; i < S::rank; ++i)
      if (!dims_t::mask[i] || KeepDim) s[j++] = i;
    return s;
  }();
  template <std::size_t J>
  static constexpr auto extent() {
    if constexpr (dims_t::mask[source[J]])
      return 1;
    else
      return S::template extent<source[J]>;
  }
  template <std::size_t... J>
  static auto make(std::index_sequence<J...>) -> shape<extent<J>()...>;
  using type = decltype(make(std::make_index_sequence<kept>{}));

  static std::array<std::int64_t, kept> sizes(const std::array<std::int64_t, S::rank>& in) {
    std::array<std::int64_t, kept> out{};
    for (std::size_t j = 0; j < kept; ++j) out[j] = dims_t::mask[source[j]] ? 1 : in[source[j]];
    return out;
  }
};

// ---------------------------------------------------------------------------------------------
// matmul (torch.matmul semantics: 1-D operands are promoted and the added dim removed again).
template <class A, class B>
struct matmul_shape {
  static_assert(A::rank >= 1 && B::rank >= 1, "tenet: matmul needs operands of rank >= 1 (both were given a 0-dim)");
  static constexpr std::size_t ra = A::rank, rb = B::rank;
  using A2 = std::conditional_t<ra == 1, shape<1, A::template extent<0>>, A>;
  using B2 = std::conditional_t<rb == 1, concat_shapes_t<B, shape<1>>, B>;
  static constexpr std::size_t ra2 = A2::rank, rb2 = B2::rank;
  // contraction check
  static constexpr extent_info ka = A2::info[ra2 - 1], kb = B2::info[rb2 - 2];
  static constexpr bool k_mismatch = ka.is_fixed() && kb.is_fixed() && ka.value != kb.value;
  static constexpr bool checked = [] {
    if constexpr (k_mismatch)
      (void)sizeof(compile_error::cannot_matmul<A, B,
                                                compile_error::extents<A2::template extent<ra2 - 1>,
                                                                       B2::template extent<rb2 - 2>>>);
    return true;
  }();
  static_assert(checked);
  using batch = broadcast_t<take_extents_t<A2, 0, ra2 - 2>, take_extents_t<B2, 0, rb2 - 2>>;
  using rows = std::conditional_t<ra == 1, shape<>, shape<A2::template extent<ra2 - 2>>>;
  using cols = std::conditional_t<rb == 1, shape<>, shape<B2::template extent<rb2 - 1>>>;
  using type = concat_shapes_t<batch, rows, cols>;
};
template <class A, class B>
using matmul_shape_t = typename matmul_shape<A, B>::type;

}  // namespace tenet::detail
