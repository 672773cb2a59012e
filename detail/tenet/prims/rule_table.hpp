#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The rule table: one specialization `rules<Op>` per differentiable prim (and per composite that
// autograd keeps whole), written beside the op. Every reader of a prim's derivative looks it up
// here: the eager tape (autograd/vjp.hpp: backprop), forward mode (autograd/jvp.hpp: tangent) and
// the compiled backward's fused pointwise regions (schedule/backward_fusion.hpp: region_grads).
//
// Where a group's rules live (each includes the engine, autograd/jvp.hpp, then defines them):
//   prims/elementwise_rules.hpp   unary, binary, where, convert_element_type
//   prims/movement_rules.hpp      reshape, permute, expand, slice, pad, unfold
//   prims/reduce_rules.hpp        the reductions and matmul (with linear's fused bias gradient)
//   prims/indexing_rules.hpp      gather, scatter
//   prims/scan_rules.hpp          scan; prims/sort_rules.hpp: sort
//   prims/composite_rules.hpp     softmax, log_softmax and every `has_derivative` composite
//   include/tenet/conv.hpp        conv2d, max_pool2d (beside the composites themselves)
//   schedule/backward_fusion.hpp  fused_region (the compiled backward's own marker node)
// prims/rules.hpp includes them all; the prims without inputs (iota, uniform) need none (their
// gradient is nothing, their tangent zeros) and the prims of bool results (comparisons, isnan,
// bitwise) none either: no gradient flows through a non-floating dtype (argmax and argmin fall
// under the reductions' entry, which the walks never reach for their integer results).
//
// A specialization's members, all static:
//   vjp(e, g)          reverse mode: sends g (an expression broadcasting onto node e's sizes) to
//                      e's children with backprop(); every specialization but the unary pointwise
//                      ones has one.
//   jvp(e, ctx)        forward mode: the tangent of node e from its children's (tangent(c, ctx));
//                      likewise.
//   pointwise forms, for the ops whose gradient is an elementwise expression (read by vjp/jvp
//   and by the fused backward, which builds one unevaluated expression over a whole region):
//     derivative<T>(x, y, t)     unary_pointwise: f'(x) t, y the node f(x) itself; the walks
//                                apply it in both modes (such an entry has no vjp/jvp)
//     da<T>(a, b, y, g), db<T>   binary_pointwise: each operand's partial applied to g;
//                                reads_operands == false (add, sub): the partials do not read a,
//                                b, y (the walks pass unread_operand{} for them); da_reads_a,
//                                db_reads_b == false: only the other operand's partial reads it
//     from_output<T>(y, c, g)    maximum/minimum against a constant c: x's gradient from the output
//                                y (from_output_against_constant)
//     if_true<T>(c, g), if_false where: each branch's gradient; `selects`
//     back<From>(g)              convert_element_type: the gradient cast back; `casts`
//   batch              the batching rule: a nested type, for vmap to fill (not written yet). No
//                      specialization has one, and has_batch_rule<Op> says so at compile time.
#include <type_traits>

namespace tenet::detail::ag {

/// The rule table (above). Not defined for an op without rules.
template <class Op>
struct rules;

/// Whether Op has a batching rule (a `batch` member type of rules<Op>): false for every op until
/// vmap writes them. Ask after prims/rules.hpp is included (the specializations are declared
/// there).
template <class Op>
inline constexpr bool has_batch_rule = requires { typename rules<Op>::batch; };

}  // namespace tenet::detail::ag
