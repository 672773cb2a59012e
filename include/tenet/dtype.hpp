#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Element types and PyTorch's type promotion.
//
// An element type is one of ten C++ types, each with a run-time tag `dtype`:
//
//   dtype      bool_  uint8         int8         int16         int32         int64
//   C++ type   bool   std::uint8_t  std::int8_t  std::int16_t  std::int32_t  std::int64_t
//
//   dtype      float16         bfloat16         float32  float64
//   C++ type   tenet::float16  tenet::bfloat16  float    double
//
// Promotion follows torch.result_type (PyTorch's "Type promotion" documentation), at the type level
// (`promote_t`, `result_type_t`) and at run time (`promote_types`, `result_type`):
//   - two tensors with dimensions promote by PyTorch's promote_types table;
//   - zero-dimensional tensors and C++ scalars (PyTorch's "wrapped numbers": a bool, an integer or
//     a floating value passed where a tensor is expected) only change the result when their
//     category (bool < integral < floating) is higher than that of the operands ranked above them:
//     tensors with dimensions, then zero-dimensional tensors, then scalars.
//   - a floating scalar that decides the result gives float32 (PyTorch's default dtype), an
//     integral one gives int64.
// tests/test_dtype.cpp checks both against tables generated with PyTorch
// (tests/reference/gen_dtype_promotion.py).
#include <tenet/config.hpp>
#include <tenet/runtime/half.hpp>  // float16, bfloat16

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace tenet {

enum class dtype : std::uint8_t { bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64 };

// Every dtype, in declaration order.
inline constexpr dtype all_dtypes[] = {dtype::bool_,   dtype::uint8,    dtype::int8,    dtype::int16,
                                       dtype::int32,   dtype::int64,    dtype::float16, dtype::bfloat16,
                                       dtype::float32, dtype::float64};

// The ten C++ types a tensor can hold (exactly these: `long long` is not std::int64_t on LP64
// Linux, and `char` is none of them).
template <class T>
concept Element = std::same_as<T, bool> || std::same_as<T, std::uint8_t> || std::same_as<T, std::int8_t> ||
                  std::same_as<T, std::int16_t> || std::same_as<T, std::int32_t> ||
                  std::same_as<T, std::int64_t> || std::same_as<T, float16> || std::same_as<T, bfloat16> ||
                  std::same_as<T, float> || std::same_as<T, double>;

namespace detail {
template <dtype D>
struct dtype_type;
template <> struct dtype_type<dtype::bool_> { using type = bool; };
template <> struct dtype_type<dtype::uint8> { using type = std::uint8_t; };
template <> struct dtype_type<dtype::int8> { using type = std::int8_t; };
template <> struct dtype_type<dtype::int16> { using type = std::int16_t; };
template <> struct dtype_type<dtype::int32> { using type = std::int32_t; };
template <> struct dtype_type<dtype::int64> { using type = std::int64_t; };
template <> struct dtype_type<dtype::float16> { using type = float16; };
template <> struct dtype_type<dtype::bfloat16> { using type = bfloat16; };
template <> struct dtype_type<dtype::float32> { using type = float; };
template <> struct dtype_type<dtype::float64> { using type = double; };
}  // namespace detail

// The dtype of an element type, and back: dtype_t<dtype_of<T>> is T for every Element T.
// clang-format off
template <Element T>
inline constexpr dtype dtype_of =
    std::same_as<T, bool>         ? dtype::bool_   : std::same_as<T, std::uint8_t> ? dtype::uint8   :
    std::same_as<T, std::int8_t>  ? dtype::int8    : std::same_as<T, std::int16_t> ? dtype::int16   :
    std::same_as<T, std::int32_t> ? dtype::int32   : std::same_as<T, std::int64_t> ? dtype::int64   :
    std::same_as<T, float16>      ? dtype::float16 : std::same_as<T, bfloat16>     ? dtype::bfloat16 :
    std::same_as<T, float>        ? dtype::float32 : dtype::float64;
// clang-format on
template <dtype D>
using dtype_t = typename detail::dtype_type<D>::type;

// Categories: bool < integral < floating.
TENET_HOST_DEVICE constexpr bool is_floating(dtype d) noexcept {
  return d == dtype::float16 || d == dtype::bfloat16 || d == dtype::float32 || d == dtype::float64;
}
TENET_HOST_DEVICE constexpr bool is_integral(dtype d) noexcept {  // bool excluded
  return d != dtype::bool_ && !is_floating(d);
}
template <class T>
inline constexpr bool is_floating_v = false;  // false for anything but the four floating elements
template <Element T>
inline constexpr bool is_floating_v<T> = is_floating(dtype_of<T>);
template <class T>
inline constexpr bool is_integral_v = false;  // false for anything but the five integral elements
template <Element T>
inline constexpr bool is_integral_v<T> = is_integral(dtype_of<T>);

// The type arithmetic on T is done in: float for the 16-bit floating types, T otherwise.
template <Element T>
using compute_t = std::conditional_t<half_precision<T>, float, T>;

// "float32", "bfloat16", "int64", "bool", ...
TENET_HOST_DEVICE constexpr char const* name(dtype d) noexcept {
  switch (d) {
    case dtype::bool_: return "bool";
    case dtype::uint8: return "uint8";
    case dtype::int8: return "int8";
    case dtype::int16: return "int16";
    case dtype::int32: return "int32";
    case dtype::int64: return "int64";
    case dtype::float16: return "float16";
    case dtype::bfloat16: return "bfloat16";
    case dtype::float32: return "float32";
    case dtype::float64: return "float64";
  }
  return "<invalid dtype>";
}

// "torch.float32", ...: the spelling PyTorch prints, for messages that compare with it.
TENET_HOST_DEVICE constexpr char const* torch_name(dtype d) noexcept {
  switch (d) {
    case dtype::bool_: return "torch.bool";
    case dtype::uint8: return "torch.uint8";
    case dtype::int8: return "torch.int8";
    case dtype::int16: return "torch.int16";
    case dtype::int32: return "torch.int32";
    case dtype::int64: return "torch.int64";
    case dtype::float16: return "torch.float16";
    case dtype::bfloat16: return "torch.bfloat16";
    case dtype::float32: return "torch.float32";
    case dtype::float64: return "torch.float64";
  }
  return "<invalid dtype>";
}

// Bytes per element.
TENET_HOST_DEVICE constexpr std::size_t itemsize(dtype d) noexcept {
  switch (d) {
    case dtype::bool_:
    case dtype::uint8:
    case dtype::int8: return 1;
    case dtype::int16:
    case dtype::float16:
    case dtype::bfloat16: return 2;
    case dtype::int32:
    case dtype::float32: return 4;
    case dtype::int64:
    case dtype::float64: return 8;
  }
  return 0;
}

// Writes name(d) to any stream (std::ostream included) without this header including <ostream>.
template <class Stream>
  requires requires(Stream& stream, char const* text) { stream << text; }
Stream& operator<<(Stream& stream, dtype d) {
  stream << name(d);
  return stream;
}

// ---------------------------------------------------------------------------------------------
// Promotion of two tensors with dimensions (torch.promote_types).
//
// @post promote_types(a, b) == promote_types(b, a), promote_types(a, a) == a,
//       promote_types(dtype::bool_, a) == a, and it is associative.
TENET_HOST_DEVICE constexpr dtype promote_types(dtype a, dtype b) noexcept {
  if (a == b || b == dtype::bool_) return a;
  if (a == dtype::bool_) return b;
  bool const a_floating = is_floating(a);
  bool const b_floating = is_floating(b);
  if (a_floating && b_floating)  // two different floating types
    return (a == dtype::float64 || b == dtype::float64) ? dtype::float64 : dtype::float32;
  if (a_floating) return a;  // an integer never changes a floating type
  if (b_floating) return b;
  // Two different integer types; uint8 is the only unsigned one. It needs a signed type wider
  // than itself: int8 goes to int16, the wider signed types are that already.
  if (a == dtype::uint8 || b == dtype::uint8) {
    dtype const other = (a == dtype::uint8) ? b : a;
    return other == dtype::int8 ? dtype::int16 : other;
  }
  return itemsize(a) > itemsize(b) ? a : b;
}

namespace detail {
template <Element First, Element... Rest>
inline constexpr dtype promoted_dtype = [] {
  dtype result = dtype_of<First>;
  ((result = promote_types(result, dtype_of<Rest>)), ...);
  return result;
}();
}  // namespace detail

// The promoted element type of tensors with dimensions holding As...: promote_t<uint8_t, int8_t>
// is int16_t, promote_t<float16, bfloat16> is float.
template <Element... As>
  requires(sizeof...(As) > 0)
using promote_t = dtype_t<detail::promoted_dtype<As...>>;

// ---------------------------------------------------------------------------------------------
// Promotion of mixed operands (torch.result_type).

// How an operand takes part in promotion, from strongest to weakest.
enum class operand_kind : std::uint8_t {
  tensor,    // a tensor with at least one dimension
  zero_dim,  // a tensor with no dimensions
  scalar,    // a C++ bool, integer or floating value (PyTorch's wrapped number)
};

// A run-time operand: its dtype and kind. For a scalar, only the category of `type` matters.
struct operand_dtype {
  dtype type;
  operand_kind kind;
};

// ATen's ResultTypeState: one running promotion per kind of operand, combined at the end by
// category. Feed every operand to add(), then read result().
class result_type_state {
 public:
  TENET_HOST_DEVICE constexpr result_type_state& add(dtype type, operand_kind kind) noexcept {
    switch (kind) {
      case operand_kind::tensor: tensors_.promote(type); break;
      case operand_kind::zero_dim: zero_dim_tensors_.promote(type); break;
      case operand_kind::scalar: scalars_.promote(scalar_dtype(type)); break;
    }
    return *this;
  }
  TENET_HOST_DEVICE constexpr result_type_state& add(operand_dtype operand) noexcept {
    return add(operand.type, operand.kind);
  }

  // The result type; with no operand added it is bool (never the case in PyTorch).
  TENET_HOST_DEVICE constexpr dtype result() const noexcept {
    running const combined = combine(tensors_, combine(zero_dim_tensors_, scalars_));
    return combined.defined ? combined.type : dtype::bool_;
  }

  // A scalar enters as PyTorch wraps a Python number: bool stays bool, an integer is int64, a
  // floating value takes the default dtype, float32.
  TENET_HOST_DEVICE static constexpr dtype scalar_dtype(dtype type) noexcept {
    if (type == dtype::bool_) return dtype::bool_;
    return is_floating(type) ? dtype::float32 : dtype::int64;
  }

 private:
  struct running {
    dtype type = dtype::bool_;
    bool defined = false;
    TENET_HOST_DEVICE constexpr void promote(dtype other) noexcept {
      type = defined ? promote_types(type, other) : other;
      defined = true;
    }
  };

  // ATen's combine_categories: the stronger operands decide unless the weaker ones are of a
  // higher category (a floating weaker over a non-floating stronger, or anything over bool).
  TENET_HOST_DEVICE static constexpr running combine(running stronger, running weaker) noexcept {
    if (!stronger.defined) return weaker;
    if (!weaker.defined || is_floating(stronger.type)) return stronger;
    if (stronger.type == dtype::bool_ || is_floating(weaker.type))
      return running{promote_types(stronger.type, weaker.type), true};
    return stronger;
  }

  running tensors_{};
  running zero_dim_tensors_{};
  running scalars_{};
};

// torch.result_type over any number of operands.
TENET_HOST_DEVICE constexpr dtype result_type(std::initializer_list<operand_dtype> operands) noexcept {
  result_type_state state;
  for (operand_dtype const& operand : operands) state.add(operand);
  return state.result();
}

namespace detail {
// The C++ types a scalar operand may have: bool, any integer, any floating type (tenet::Scalar in
// <tenet/expr/concepts.hpp> is the same set, with cv-ref qualifiers removed).
template <class T>
concept promotion_scalar = std::integral<T> || std::floating_point<T> || half_precision<T>;
}  // namespace detail

// A type-level operand: an element type T for a tensor or zero-dim tensor; bool, an integer or a
// floating type for a scalar.
template <class T, operand_kind Kind>
struct operand {
  static_assert(Kind == operand_kind::scalar ? detail::promotion_scalar<T> : Element<T>,
                "tenet::operand<T, kind>: T must be an element type (bool, std::[u]int8_t, std::int16_t, "
                "std::int32_t, std::int64_t, float16, bfloat16, float, double) for a tensor or zero_dim "
                "operand, or a bool, integer or floating type for a scalar operand");
  using type = T;
  static constexpr operand_kind kind = Kind;
  static constexpr dtype type_dtype = [] {
    if constexpr (Kind != operand_kind::scalar)
      return dtype_of<T>;
    else if constexpr (std::same_as<T, bool>)
      return dtype::bool_;
    else if constexpr (std::integral<T>)
      return dtype::int64;
    else
      return dtype::float64;  // as PyTorch wraps a Python float; result_type_state makes it float32
  }();
};
template <class T>
using tensor_operand = operand<T, operand_kind::tensor>;
template <class T>
using zero_dim_operand = operand<T, operand_kind::zero_dim>;
template <class T>
using scalar_operand = operand<T, operand_kind::scalar>;

namespace detail {
template <class T>
inline constexpr bool is_operand = false;
template <class T, operand_kind Kind>
inline constexpr bool is_operand<operand<T, Kind>> = true;
}  // namespace detail

// The element type torch.result_type gives for these operands:
//   result_type_t<tensor_operand<std::int32_t>, scalar_operand<double>> is float,
//   result_type_t<tensor_operand<std::uint8_t>, scalar_operand<int>> is std::uint8_t.
template <class... Operands>
  requires(sizeof...(Operands) > 0 && (detail::is_operand<Operands> && ...))
using result_type_t = dtype_t<result_type({operand_dtype{Operands::type_dtype, Operands::kind}...})>;

}  // namespace tenet
