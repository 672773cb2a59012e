#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The lowering: an expression, decomposed for backend B, cut into kernels. It is written once;
// what a kernel *becomes* is the Sink's business:
//   - the executor (backend/evaluate.hpp) runs each kernel on its tensor's backend and hands back
//     the Tensor it wrote;
//   - the planner (debug/plan.hpp) records each kernel in a kernel_plan (explain, tenet::plan,
//     tenet::compile's report).
// Both call lower_value / lower_operand below, so the plan's kernels are the kernels that run
// (tests hold kernels_launched() against the plan).
//
// Kernel kinds (the cut rules are schedule/fusion.hpp's predicates):
//   pointwise   a maximal elementwise tree over operands: one fused loop
//   node        a non-elementwise node (reduction, scan, sort, gather/scatter, pad, GEMM, row
//               composite, library op): its operands first, each a value or, where the backend's
//               kernel fuses it (takes_prologue), the elementwise tree producing it
//   pattern P   one of B's fused patterns (B::patterns), tried in order at the root of an
//               elementwise tree: the CPU's GEMM, conv2d and reduction with an epilogue,
//               CUDA's cuBLASLt GEMM with bias and activation
//   view        a movement prim that is a strided view of its operand (prim::is_view_prim): no kernel
//   shared      a share()d value: lowered once per evaluation, read by every user
//
// A Sink S provides, for operand types O (what a kernel reads) and value types V (a kernel's result):
//   s.input(t) -> O        a Tensor leaf          s.constant(c) -> O    a scalar or generator leaf
//   s.operand(v) -> O      a value read whole     s.tree(e, O...) -> O  an elementwise node
//   s.view(e, V) -> O      a view prim
//   s.find_shared(e) -> optional-like V, s.store_shared(e, V) -> V: a share()d value, once per evaluation
//   s.cse_enabled(e) -> bool (whether e may be a common subexpression), s.find_cached(e, key) ->
//                          optional-like V, s.store_cached(e, key*, V) -> V: CSE, a kernel already
//                          run (key: e's structural key, expr/cse.hpp; null: e has none)
//   s.node(B{}, e, O...) -> V                 a node kernel, on backend B's terms
//   s.pointwise(e, O) -> V                    a pointwise kernel
//   s.value(e, O) -> V     O itself when it is a value, else a pointwise kernel
//   s.output(e) -> X       a pattern's output, made before its operands (the executor allocates)
//   s.product(mm, X) -> O  the GEMM pattern's product, read from its output
//   s.template pattern<P>(B{}, e, X, O...) -> V   a fused pattern's kernel, on backend B
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <tenet/expr/concepts.hpp>
#include <tenet/expr/cse.hpp>
#include <tenet/expr/node.hpp>
#include <tenet/expr/shared.hpp>
#include <tenet/prims/elementwise.hpp>
#include <tenet/prims/movement.hpp>
#include <tenet/prims/reduce.hpp>
#include <tenet/schedule/fusion.hpp>

namespace tenet::detail {

/// An ordered list of a backend's fused patterns (B::patterns).
template <class... P>
struct pattern_list {};

template <class Op>
inline constexpr bool is_reduce_prim = false;
template <class Kind, bool KeepDim, auto... Dims>
inline constexpr bool is_reduce_prim<prim::reduce_<Kind, KeepDim, Dims...>> = true;

/// Whether B's kernel for Op reads operand I as the elementwise tree that produces it (fused, a
/// prologue) rather than as a value. The default: a reduction's input and a row composite's first
/// operand. A backend specializes it where its kernel differs (CUDA's argmax reads a value).
template <class B, class Op, std::size_t I>
inline constexpr bool takes_prologue = I == 0 && (is_reduce_prim<Op> || is_reduction_kernel<Op> || fuses_prologue<Op>);

template <class B, class S, class E>
auto lower_value(const E& e, S& s);
template <class B, class S, class E>
auto lower_operand(const E& e, S& s);

// The walk below calls no lambdas: a closure's type is named after the function it is written in,
// so a lambda here would name every subtree's whole expression type, and nvcc's front ends pay
// for such names over again (docs/design.md, "Compile cost of the trees"). Arities are spelled out
// (at most six children), operands lowered left to right, one variable each.

/// Operand I of node kernel e: the tree producing it when B's kernel fuses it, else its value.
template <class B, class Op, std::size_t I, class S, class C>
auto lower_node_operand(const C& c, S& s) {
  if constexpr (takes_prologue<B, Op, I>)
    return lower_operand<B>(c, s);
  else
    return s.operand(lower_value<B>(c, s));
}

template <class E>
inline constexpr std::size_t arity = std::tuple_size_v<std::remove_cvref_t<decltype(std::declval<const E&>().children)>>;

/// A node kernel: its operands in child order, then the kernel (Run::run(s, b, e, operands...):
/// the sink's kernel, or the executor's run into a given output).
template <class B, class Run, class S, class E>
auto lower_node_with(const E& e, S& s, Run& run) {
  using Op = typename E::op_type;
  constexpr std::size_t N = arity<E>;
  static_assert(N <= 6, "tenet: internal: a node kernel with more than 6 operands");
  const auto& ch = e.children;
  if constexpr (N == 0) {
    return run(B{}, e);
  } else if constexpr (N == 1) {
    auto o0 = lower_node_operand<B, Op, 0>(std::get<0>(ch), s);
    return run(B{}, e, o0);
  } else if constexpr (N == 2) {
    auto o0 = lower_node_operand<B, Op, 0>(std::get<0>(ch), s);
    auto o1 = lower_node_operand<B, Op, 1>(std::get<1>(ch), s);
    return run(B{}, e, o0, o1);
  } else if constexpr (N == 3) {
    auto o0 = lower_node_operand<B, Op, 0>(std::get<0>(ch), s);
    auto o1 = lower_node_operand<B, Op, 1>(std::get<1>(ch), s);
    auto o2 = lower_node_operand<B, Op, 2>(std::get<2>(ch), s);
    return run(B{}, e, o0, o1, o2);
  } else if constexpr (N == 4) {
    auto o0 = lower_node_operand<B, Op, 0>(std::get<0>(ch), s);
    auto o1 = lower_node_operand<B, Op, 1>(std::get<1>(ch), s);
    auto o2 = lower_node_operand<B, Op, 2>(std::get<2>(ch), s);
    auto o3 = lower_node_operand<B, Op, 3>(std::get<3>(ch), s);
    return run(B{}, e, o0, o1, o2, o3);
  } else if constexpr (N == 5) {  // attention's backward
    auto o0 = lower_node_operand<B, Op, 0>(std::get<0>(ch), s);
    auto o1 = lower_node_operand<B, Op, 1>(std::get<1>(ch), s);
    auto o2 = lower_node_operand<B, Op, 2>(std::get<2>(ch), s);
    auto o3 = lower_node_operand<B, Op, 3>(std::get<3>(ch), s);
    auto o4 = lower_node_operand<B, Op, 4>(std::get<4>(ch), s);
    return run(B{}, e, o0, o1, o2, o3, o4);
  } else {
    auto o0 = lower_node_operand<B, Op, 0>(std::get<0>(ch), s);
    auto o1 = lower_node_operand<B, Op, 1>(std::get<1>(ch), s);
    auto o2 = lower_node_operand<B, Op, 2>(std::get<2>(ch), s);
    auto o3 = lower_node_operand<B, Op, 3>(std::get<3>(ch), s);
    auto o4 = lower_node_operand<B, Op, 4>(std::get<4>(ch), s);
    auto o5 = lower_node_operand<B, Op, 5>(std::get<5>(ch), s);
    return run(B{}, e, o0, o1, o2, o3, o4, o5);
  }
}

/// The sink's node kernel, as lower_node_with's Run.
template <class S>
struct sink_node {
  S& s;
  template <class B, class E, class... O>
  auto operator()(B b, const E& e, const O&... o) {
    return s.node(b, e, o...);
  }
};

template <class B, class S, class E>
auto lower_node(const E& e, S& s) {
  sink_node<S> run{s};
  return lower_node_with<B>(e, s, run);
}

/// An elementwise node over its children's operands (lowered left to right).
template <class B, class S, class E>
auto lower_tree(const E& e, S& s) {
  constexpr std::size_t N = arity<E>;
  static_assert(N >= 1 && N <= 3, "tenet: internal: an elementwise node has one to three operands");
  const auto& ch = e.children;
  if constexpr (N == 1) {
    auto o0 = lower_operand<B>(std::get<0>(ch), s);
    return s.tree(e, o0);
  } else if constexpr (N == 2) {
    auto o0 = lower_operand<B>(std::get<0>(ch), s);
    auto o1 = lower_operand<B>(std::get<1>(ch), s);
    return s.tree(e, o0, o1);
  } else {
    auto o0 = lower_operand<B>(std::get<0>(ch), s);
    auto o1 = lower_operand<B>(std::get<1>(ch), s);
    auto o2 = lower_operand<B>(std::get<2>(ch), s);
    return s.tree(e, o0, o1, o2);
  }
}

/// What e contributes to the kernel that reads it: an input, a constant, a shared value, an
/// elementwise tree (fused into the reader), a view, or the value of its own kernel.
template <class B, class S, class E>
auto lower_operand(const E& e, S& s) {
  if constexpr (SharedNode<E>) {
    auto v = s.find_shared(e);
    return s.operand(v ? *v : s.store_shared(e, lower_value<B>(e.expr, s)));
  } else if constexpr (TensorType<E>) {
    return s.input(e);
  } else if constexpr (!Node<E>) {
    return s.constant(e);
  } else {
    using Op = typename E::op_type;
    if constexpr (prim::is_elementwise_op<Op>) {
      return lower_tree<B>(e, s);
    } else if constexpr (prim::is_view_prim<Op>) {
      return s.view(e, lower_value<B>(std::get<0>(e.children), s));
    } else {
      std::string key;
      const bool keyed = s.cse_enabled(e) && append_cse_key(key, e);
      auto v = keyed ? s.find_cached(e, key) : decltype(s.find_cached(e, key)){};
      return s.operand(v ? *v : s.store_cached(e, keyed ? &key : nullptr, lower_node<B>(e, s)));
    }
  }
}

/// The root of an elementwise tree: the first of B's patterns that applies, else one pointwise
/// kernel. Patterns are tried in order, and only those that are candidates for E's type (most
/// trees are candidates for none, and then cost one instantiation here).
template <class B, class S, class E>
auto lower_elementwise_root(const E& e, S& s, pattern_list<>) {
  return s.pointwise(e, lower_operand<B>(e, s));
}
template <class B, class S, class E, class P, class... Ps>
auto lower_elementwise_root(const E& e, S& s, pattern_list<P, Ps...>) {
  if constexpr (!P::template candidate<E>() && !(Ps::template candidate<E>() || ...)) {
    return s.pointwise(e, lower_operand<B>(e, s));
  } else if constexpr (!P::template candidate<E>()) {
    return lower_elementwise_root<B>(e, s, pattern_list<Ps...>{});
  } else {
    using V = decltype(lower_elementwise_root<B>(e, s, pattern_list<>{}));
    return P::applies(e) ? V(P::template lower<B>(e, s)) : V(lower_elementwise_root<B>(e, s, pattern_list<Ps...>{}));
  }
}

/// The value of e: a Tensor leaf as it is; an elementwise tree as one kernel (a pattern or a
/// pointwise loop); anything else through lower_operand (a node's kernel, a view, a shared value;
/// a constant becomes a one-element pointwise kernel).
template <class B, class S, class E>
auto lower_value(const E& e, S& s) {
  if constexpr (TensorType<E>) {
    return s.value(e, s.input(e));
  } else if constexpr (Node<E> && !SharedNode<E>) {
    if constexpr (prim::is_elementwise_op<typename E::op_type>) {
      std::string key;
      const bool keyed = s.cse_enabled(e) && append_cse_key(key, e);
      auto v = keyed ? s.find_cached(e, key) : decltype(s.find_cached(e, key)){};
      return v ? *v : s.store_cached(e, keyed ? &key : nullptr, lower_elementwise_root<B>(e, s, typename B::patterns{}));
    } else {
      return s.value(e, lower_operand<B>(e, s));
    }
  } else {
    return s.value(e, lower_operand<B>(e, s));
  }
}

// --- the CPU's two fused patterns (any backend may list them) ---------------------------------

/// The elementwise tree of an epilogue lowered with its Head node (the GEMM's matmul, the
/// convolution) replaced by `product` (the pattern's output, read at the index being written).
template <class B, class Head = prim::matmul_, class S, class E, class P>
auto lower_epilogue_tree(const E& e, S& s, const P& product) {
  if constexpr (Node<E> && !SharedNode<E>) {
    using Op = typename E::op_type;
    if constexpr (std::is_same_v<Op, Head>) {
      return s.product(e, product);
    } else if constexpr (prim::is_elementwise_op<Op> && epilogue_head_count<Head, E>() == 1) {
      constexpr std::size_t N = arity<E>;
      const auto& ch = e.children;
      if constexpr (N == 1) {
        auto o0 = lower_epilogue_tree<B, Head>(std::get<0>(ch), s, product);
        return s.tree(e, o0);
      } else if constexpr (N == 2) {
        auto o0 = lower_epilogue_tree<B, Head>(std::get<0>(ch), s, product);
        auto o1 = lower_epilogue_tree<B, Head>(std::get<1>(ch), s, product);
        return s.tree(e, o0, o1);
      } else {
        auto o0 = lower_epilogue_tree<B, Head>(std::get<0>(ch), s, product);
        auto o1 = lower_epilogue_tree<B, Head>(std::get<1>(ch), s, product);
        auto o2 = lower_epilogue_tree<B, Head>(std::get<2>(ch), s, product);
        return s.tree(e, o0, o1, o2);
      }
    } else {
      return lower_operand<B>(e, s);
    }
  } else {
    return lower_operand<B>(e, s);
  }
}

/// A matmul below an elementwise tree, run as one GEMM whose epilogue is the tree (fusion.hpp:
/// gemm_epilogue_candidate): when the matmul's value is not broadcast by the tree and both dims
/// of the product exceed 1 (a matrix-vector product takes the GEMV path), on the CPU.
struct gemm_epilogue_pattern {
  static constexpr const char* kind = "gemm+epilogue";
  template <class E>
  static constexpr bool candidate() {
    return gemm_epilogue_candidate<E>();
  }
  template <class E>
  static bool applies(const E& e);  // backend/evaluate.hpp (it needs the leaves' device)
  template <class B, class S, class E>
  static auto lower(const E& e, S& s) {
    // the output after the GEMM's operands, whose kernels run first (as the memory plan has it)
    const auto& mm = epilogue_matmul_of(e);
    auto a = s.operand(lower_value<B>(std::get<0>(mm.children), s));
    auto b = s.operand(lower_value<B>(std::get<1>(mm.children), s));
    auto out = s.output(e);
    auto tree = lower_epilogue_tree<B>(e, s, out);
    return s.template pattern<gemm_epilogue_pattern>(B{}, e, out, a, b, tree);
  }
};

/// A conv2d below an elementwise tree, run as the convolution with the tree applied to each image
/// of its output as soon as the kernel has written it (fusion.hpp: conv_epilogue_candidate): the
/// batch norm of eval mode, relu, a residual add, a bias, with no second pass over the output and
/// no buffer for the convolution's value. On the CPU, when the tree does not broadcast the
/// convolution's value and no forward is being recorded for autograd (whose backward reads the
/// convolution's value from the recorded forward: evaluate.hpp, applies).
struct conv_epilogue_pattern {
  static constexpr const char* kind = "conv2d+epilogue";
  template <class E>
  static constexpr bool candidate() {
    return conv_epilogue_candidate<E>();
  }
  template <class E>
  static bool applies(const E& e);  // backend/evaluate.hpp
  template <class B, class S, class E>
  static auto lower(const E& e, S& s) {
    const auto& cv = epilogue_head_of<aten::conv2d>(e);
    auto x = s.operand(lower_value<B>(std::get<0>(cv.children), s));
    auto w = s.operand(lower_value<B>(std::get<1>(cv.children), s));
    auto out = s.output(e);
    auto tree = lower_epilogue_tree<B, aten::conv2d>(e, s, out);
    return s.template pattern<conv_epilogue_pattern>(B{}, e, out, x, w, tree);
  }
  /// For the kernel plan (debug/plan.hpp): "conv2d" before the tree's ops, the convolution's flops
  /// (2 per multiply-add) plus one per op and output.
  template <class E, class Names>
  static void describe(const E& e, Names& fused, double& flops) {
    const auto& cv = epilogue_head_of<aten::conv2d>(e);
    const auto ws = std::get<1>(cv.children).sizes();
    double outputs = 1;
    for (const auto n : e.sizes()) outputs *= static_cast<double>(n);
    flops = 2.0 * outputs * static_cast<double>(ws[1] * ws[2] * ws[3]) + static_cast<double>(fused.size()) * outputs;
    fused.insert(fused.begin(), "conv2d");
  }
};

/// An elementwise tree over one reduction kernel (and scalars) run as that reduction with the tree
/// applied to each block of finished outputs (fusion.hpp: reduce_epilogue_candidate): mean, std.
struct reduce_epilogue_pattern {
  static constexpr const char* kind = "reduction+epilogue";
  template <class E>
  static constexpr bool candidate() {
    return reduce_epilogue_candidate<E>();
  }
  template <class E>
  static bool applies(const E& e);  // backend/evaluate.hpp
  template <class B, class S, class E>
  static auto lower(const E& e, S& s) {
    auto prologue = lower_operand<B>(std::get<0>(epilogue_reduction_of(e).children), s);
    auto out = s.output(e);  // after the kernels the prologue reads
    return s.template pattern<reduce_epilogue_pattern>(B{}, e, out, prologue);
  }
};

}  // namespace tenet::detail
