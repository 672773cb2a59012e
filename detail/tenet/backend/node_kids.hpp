#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The operands of a fused pointwise node in the backends' kernel trees (cpu::pointwise_tree, cuda::pointwise_tree), as
// plain members: a node has one to three (where_ has three).
//
// Not a std::tuple, and no std::apply over it: every std::get, tuple base, std::apply and the
// lambda it calls is a function of its own whose name spells the whole subtree, instantiated at
// every level of every tree. nvcc at -O0 (CI's compile-only build) kept each one as a call: with
// tuples, half of an OpInfo unit's PTX and of cicc's intermediate file were these functions, and
// cicc took 193 s on tu_opinfo_half_1 against 72 s with members. The trees spell the three arities
// out with `if constexpr (arity == ...)` instead.
#include <cstddef>

namespace tenet::detail {

template <class... K>
struct node_kids {
  static_assert(sizeof...(K) >= 1 && sizeof...(K) <= 3, "a fused pointwise node takes one to three operands");
};
template <class A>
struct node_kids<A> {
  A a;
};
template <class A, class B>
struct node_kids<A, B> {
  A a;
  B b;
};
template <class A, class B, class C>
struct node_kids<A, B, C> {
  A a;
  B b;
  C c;
};

}  // namespace tenet::detail
