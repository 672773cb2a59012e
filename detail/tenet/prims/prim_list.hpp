#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The closed prim set, one list (as tinygrad's Ops), with its groups. A backend implements these
// (plus any composite it declares natively); decompose_t leaves nothing else. tests/test_prims.cpp
// counts the list. The movement prims (prims/movement.hpp) are expression nodes; on the CPU all but
// pad are views (stride arithmetic, as the eager Tensor views of runtime/views.hpp).
#include <cstdint>

#include <boost/hana/concat.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include <tenet/prims/elementwise.hpp>
#include <tenet/prims/movement.hpp>
#include <tenet/prims/reduce.hpp>

namespace tenet::prim {

namespace hana = boost::hana;

inline constexpr auto unary_prims =
    hana::tuple_t<neg_, abs_, exp_, exp2_, expm1_, log_, log2_, log1p_, sqrt_, rsqrt_, sin_, cos_, tan_, tanh_, erf_,
                  floor_, ceil_, round_, trunc_, reciprocal_, sign_, isnan_, logical_not_>;
inline constexpr auto binary_prims =
    hana::tuple_t<add_, sub_, mul_, div_, remainder_, fmod_, pow_, maximum_, minimum_, eq_, ne_, lt_, le_, gt_, ge_,
                  logical_and_, logical_or_, logical_xor_>;
inline constexpr auto ternary_prims = hana::tuple_t<where_>;
/// convert_element_type is one prim parameterized by its target dtype.
inline constexpr auto cast_prims = hana::tuple_t<convert_element_type_<float>>;
/// Each reduction kind is one prim parameterized by its dims.
inline constexpr auto reduction_prims =
    hana::tuple_t<reduce_<sum_kind, false>, reduce_<prod_kind, false>, reduce_<amax_kind, false>,
                  reduce_<amin_kind, false>, reduce_<argmax_kind, false>, reduce_<argmin_kind, false>>;
inline constexpr auto contraction_prims = hana::tuple_t<matmul_>;
/// Each movement prim is one prim whatever its (run-time or template) parameters.
inline constexpr auto movement_prims =
    hana::tuple_t<reshape_<shape<>>, permute_<>, expand_<shape<>>, slice_<0>, pad_<0>, unfold_<0>>;

inline constexpr auto all_prims = hana::concat(
    hana::concat(hana::concat(unary_prims, binary_prims), hana::concat(ternary_prims, cast_prims)),
    hana::concat(hana::concat(reduction_prims, contraction_prims), movement_prims));

}  // namespace tenet::prim
