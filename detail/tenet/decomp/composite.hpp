#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The base classes of the ATen-level composites: ops that stay nodes of their own until
// decompose_t rewrites them into prims (decomp/decompose.hpp), so that a backend may run them
// natively (backend/<name>/: runs_natively and run_kernel). Each composite lives in
// decomp/<group>.hpp with its decomposition; its differentiation rules are in
// prims/composite_rules.hpp (or its `derivative` for the pointwise ones).
//
// A decomposition is written with prim nodes (make_node) and the expression builders; the public
// names it uses (exp, sqrt, where, the operators) are found by argument-dependent lookup where it
// is instantiated, so no decomposition header includes a public op header (the layering test,
// tests/check_layers.cmake, holds this).
#include <string_view>

#include <tenet/decomp/build.hpp>
#include <tenet/prims/elementwise.hpp>

namespace tenet {

// ---------------------------------------------------------------------------------------------
// ATen-level composites (decomposed by decompose_t; a backend may run them natively)
// ---------------------------------------------------------------------------------------------
// ATen-level composites (decomposed by decompose_t; a backend may run them natively)
namespace aten {

/// Shape and dtype of the (single) input.
struct same_as_input {
  static constexpr bool is_prim = false;
  template <class C>
  using result_type = value_type_of<C>;
  template <class C>
  using result_shape = shape_of<C>;
  template <class C>
  static auto sizes(const C& c) {
    return c.sizes();
  }
};

/// Pointwise composites: a backend may run them natively inside a fused loop through `apply`
/// (one value in, one out), which must agree with `decompose` (tests/test_prims.cpp checks).
struct pointwise_composite : same_as_input {
  using group = prim::pointwise_composite_group;
};

}  // namespace aten

}  // namespace tenet
