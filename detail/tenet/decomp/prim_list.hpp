#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The closed prim set, one list (as tinygrad's Ops), with its groups. A backend implements these
// (plus any composite it declares natively); decompose_t leaves nothing else. tests/test_prims.cpp
// counts the list. The movement prims (prims/movement.hpp) are expression nodes; on the CPU all but
// pad are views (stride arithmetic, as the eager Tensor views of tensor/views.hpp).
#include <cstdint>

#include <boost/hana/flatten.hpp>
#include <boost/hana/unpack.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include <tenet/prims/elementwise.hpp>
#include <tenet/prims/indexing.hpp>
#include <tenet/prims/iota.hpp>
#include <tenet/prims/random.hpp>
#include <tenet/prims/movement.hpp>
#include <tenet/prims/reduce.hpp>
#include <tenet/decomp/decompose.hpp>
#include <tenet/prims/iota.hpp>
#include <tenet/prims/scan.hpp>
#include <tenet/prims/sort.hpp>

namespace tenet::prim {

namespace hana = boost::hana;

inline constexpr auto unary_prims =
    hana::tuple_t<neg_, abs_, exp_, exp2_, expm1_, log_, log2_, log1p_, sqrt_, rsqrt_, sin_, cos_, tan_, tanh_, erf_,
                  floor_, ceil_, round_, trunc_, reciprocal_, sign_, isnan_, bitwise_not_>;
inline constexpr auto binary_prims =
    hana::tuple_t<add_, sub_, mul_, div_, remainder_, fmod_, pow_, maximum_, minimum_, atan2_, eq_, ne_, lt_, le_, gt_, ge_,
                  bitwise_and_, bitwise_or_, bitwise_xor_>;
inline constexpr auto ternary_prims = hana::tuple_t<where_>;
/// convert_element_type is one prim parameterized by its target dtype.
inline constexpr auto cast_prims = hana::tuple_t<convert_element_type_<float>>;
/// Each reduction kind is one prim parameterized by its dims.
inline constexpr auto reduction_prims =
    hana::tuple_t<reduce_<sum_kind, false>, reduce_<prod_kind, false>, reduce_<amax_kind, false>,
                  reduce_<amin_kind, false>, reduce_<argmax_kind, false>, reduce_<argmin_kind, false>>;
inline constexpr auto contraction_prims = hana::tuple_t<matmul_>;
/// scan_ is one prim parameterized by its combiner kind (sum, prod, amax, amin, logaddexp,
/// running_arg) and dim; sort_ one prim parameterized by its dim and output (values | indices).
inline constexpr auto scan_prims = hana::tuple_t<scan_<sum_kind, 0>>;
inline constexpr auto sort_prims = hana::tuple_t<sort_<0, sort_output::values>>;
inline constexpr auto iota_prims = hana::tuple_t<iota_<std::int64_t>>;

/// Each movement prim is one prim whatever its (run-time or template) parameters.
inline constexpr auto movement_prims =
    hana::tuple_t<reshape_<shape<>>, permute_<>, expand_<shape<>>, slice_<0>, pad_<0>, unfold_<0>>;

/// uniform_ is one prim parameterized by its dtype and shape.
inline constexpr auto random_prims = hana::tuple_t<uniform_<float, shape<>>>;

/// gather_ and scatter_, each one prim parameterized by its dim (scatter_ also by its combining op).
inline constexpr auto indexing_prims = hana::tuple_t<gather_<0>, scatter_<0, scatter_op::replace>>;

inline constexpr auto all_prims =
    hana::flatten(hana::make_tuple(unary_prims, binary_prims, ternary_prims, cast_prims, movement_prims,
                                   reduction_prims, contraction_prims, indexing_prims, scan_prims, sort_prims,
                                   iota_prims, random_prims));

/// The name a prim is listed by: its `family` when it has one (scan_ of every kind is "scan"),
/// else its name (reduce_<sum_kind, true, 0> is the listed "sum", convert_element_type_<int> the
/// listed cast).
template <class Op>
constexpr std::string_view family() {
  if constexpr (requires { Op::family; })
    return Op::family;
  else
    return Op::name;
}
/// True when Op is a listed prim.
template <class Op>
constexpr bool is_listed() {
  if constexpr (!requires { Op::name; }) {
    return false;
  } else {
    return hana::unpack(all_prims, [](auto... t) { return ((family<typename decltype(t)::type>() == family<Op>()) || ...); });
  }
}

}  // namespace tenet::prim

namespace tenet::detail {
/// The closure check of the decomposition layer: every op of E is in the prim list.
template <class E>
constexpr bool holds_only_listed_prims() {
  return boost::hana::unpack(ops_of(boost::hana::type_c<E>), [](auto... t) {
    return ((decltype(t)::type::is_prim && prim::is_listed<typename decltype(t)::type>()) && ... && true);
  });
}
}  // namespace tenet::detail
