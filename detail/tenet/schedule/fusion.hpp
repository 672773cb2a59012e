#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The scheduler's fusion rules, as predicates on expression types. The CPU evaluator
// (backend/evaluate.hpp) and the kernel plan (debug/plan.hpp) both decide with these, so what
// explain() prints is what runs.
//
// After decomposition an expression is a tree of prims (plus the composites a backend runs
// natively). Kernels are cut at every node that is not elementwise:
//   - a maximal elementwise tree is ONE pointwise kernel (any number of inputs, broadcasts);
//   - a reduction takes the elementwise tree below it as a fused prologue (it reads the tree's
//     inputs, never a materialized intermediate);
//   - a matmul whose consumers up to the kernel's root are all elementwise, and whose value is not
//     broadcast by them, is ONE GEMM with an epilogue: the tree runs on each finished C tile while
//     it is in cache (bias, activation, residual, scale), so linear+bias+gelu writes its output once;
//   - likewise a conv2d (the CPU's native one) under an elementwise tree: the tree runs on each
//     finished output image (batch norm in eval, relu, residual add);
//   - a native composite (softmax / log_softmax over the last dim) is one row kernel;
//   - view-like movement prims (reshape, permute, expand, slice, unfold) cost nothing: they are
//     strided views; pad, gather, scatter, scan, sort, iota, random draws are one kernel each;
//   - a shared value (`share()`) is one kernel, run once per evaluation however often it is read;
//   - an elementwise tree whose only non-scalar input is ONE reduction (sum/prod/amax/amin, or the
//     native var) of its dtype and rank is ONE reduction kernel with the tree as its epilogue: the
//     consumer of the reduced value (`sum(x) / n` of mean, `sqrt(var)` of std) runs on each block
//     of finished outputs, so mean, var and std are one kernel each.
#include <cstdint>
#include <type_traits>

#include <tenet/expr/concepts.hpp>
#include <tenet/expr/node.hpp>
#include <tenet/expr/shared.hpp>
#include <tenet/prims/elementwise.hpp>
#include <tenet/prims/reduce.hpp>

namespace tenet::aten {
template <bool Keep, auto... Dims>
struct var_;  // decomp/moments.hpp
struct conv2d;  // decomp/conv.hpp
}  // namespace tenet::aten

namespace tenet::detail {

/// An op that runs as one reduction-like kernel writing one value per output element, which can
/// take an elementwise epilogue: the reduction prims except argmax/argmin, and the CPU's var.
template <class Op>
inline constexpr bool is_reduction_kernel = false;
template <class Kind, bool KeepDim, auto... Dims>
inline constexpr bool is_reduction_kernel<prim::reduce_<Kind, KeepDim, Dims...>> = !prim::is_arg_kind<Kind>;
template <bool Keep, auto... Dims>
inline constexpr bool is_reduction_kernel<aten::var_<Keep, Dims...>> = true;

/// The number of reduction kernels E reads through elementwise nodes, or -1 when E also reads
/// something else than scalars (a tensor, a shared value, another kernel).
template <class E>
constexpr int epilogue_reduction_count() {
  if constexpr (ScalarLeaf<E>) {
    return 0;
  } else if constexpr (Node<E> && !SharedNode<E>) {
    using Op = typename E::op_type;
    if constexpr (is_reduction_kernel<Op>) {
      return 1;
    } else if constexpr (prim::is_elementwise_op<Op>) {
      return []<class... C>(std::tuple<C...>*) {
        constexpr int counts[] = {0, epilogue_reduction_count<C>()...};
        int n = 0;
        for (int c : counts) {
          if (c < 0) return -1;
          n += c;
        }
        return n;
      }(static_cast<decltype(std::declval<E>().children)*>(nullptr));
    } else {
      return -1;
    }
  } else {
    return -1;
  }
}

/// Calls f(r) on the reduction node epilogue_reduction_count counts.
template <class E, class F>
void visit_epilogue_reduction(const E& e, F&& f) {
  if constexpr (Node<E> && !SharedNode<E>) {
    using Op = typename E::op_type;
    if constexpr (is_reduction_kernel<Op>) {
      f(e);
    } else if constexpr (prim::is_elementwise_op<Op>) {
      detail::apply_tuple([&](const auto&... c) { (visit_epilogue_reduction(c, f), ...); }, e.children);
    }
  }
}

template <class... T>
struct first_non_void;
/// The type of the reduction node below E's elementwise nodes (void when there is none).
template <class E>
struct find_epilogue_reduction {
  using type = void;
};
template <class Op, class... C>
struct find_epilogue_reduction<node<Op, C...>> {
  using type = std::conditional_t<
      is_reduction_kernel<Op>, node<Op, C...>,
      std::conditional_t<prim::is_elementwise_op<Op>,
                         typename first_non_void<typename find_epilogue_reduction<C>::type...>::type, void>>;
};

/// True when E is an elementwise tree that runs as the epilogue of the one reduction kernel it
/// reads (its other leaves are scalars): the reduction has E's dtype and rank, so E's value at an
/// index depends on the reduced value at the same index only.
template <class E>
constexpr bool reduce_epilogue_candidate() {
  if constexpr (!Node<E> || SharedNode<E>) {
    return false;
  } else if constexpr (!prim::is_elementwise_op<typename E::op_type>) {
    return false;
  } else if constexpr (epilogue_reduction_count<E>() != 1) {
    return false;
  } else {
    using Rd = typename find_epilogue_reduction<E>::type;
    return std::is_same_v<value_type_of<Rd>, value_type_of<E>> && rank_of<Rd> == rank_of<E>;
  }
}

/// A native row composite (softmax, log_softmax, layer_norm, rms_norm) that evaluates the
/// elementwise producer of its first operand inside its row kernel.
template <class Op>
concept fuses_prologue = requires { requires Op::fuses_prologue; };

/// Number of Head nodes (prim::matmul_, aten::conv2d) reachable from E through elementwise nodes
/// only (not below a shared value or another kernel's boundary): the kernel an epilogue pattern
/// fuses the tree into.
template <class Head, class E>
constexpr int epilogue_head_count() {
  if constexpr (Node<E>) {
    using Op = typename E::op_type;
    if constexpr (std::is_same_v<Op, Head>) {
      return 1;
    } else if constexpr (prim::is_elementwise_op<Op>) {
      return []<class... C>(std::tuple<C...>*) { return (0 + ... + epilogue_head_count<Head, C>()); }(
          static_cast<decltype(std::declval<E>().children)*>(nullptr));
    } else {
      return 0;
    }
  } else {
    return 0;
  }
}
template <class E>
constexpr int epilogue_matmul_count() {
  return epilogue_head_count<prim::matmul_, E>();
}

/// Calls f(h) on the Head node epilogue_head_count counts (E must have exactly one).
template <class Head, class E, class F>
void visit_epilogue_head(const E& e, F&& f) {
  if constexpr (Node<E>) {
    using Op = typename E::op_type;
    if constexpr (std::is_same_v<Op, Head>) {
      f(e);
    } else if constexpr (prim::is_elementwise_op<Op>) {
      detail::apply_tuple([&](const auto&... c) { (visit_epilogue_head<Head>(c, f), ...); }, e.children);
    }
  }
}
template <class E, class F>
void visit_epilogue_matmul(const E& e, F&& f) {
  visit_epilogue_head<prim::matmul_>(e, f);
}

template <class... T>
struct first_non_void {
  using type = void;
};
template <class T0, class... T>
struct first_non_void<T0, T...> {
  using type = std::conditional_t<std::is_void_v<T0>, typename first_non_void<T...>::type, T0>;
};

/// The type of the Head node below E's elementwise nodes (void when there is none).
template <class Head, class E>
struct find_epilogue_head {
  using type = void;
};
template <class Head, class Op, class... C>
struct find_epilogue_head<Head, node<Op, C...>> {
  using type = std::conditional_t<
      std::is_same_v<Op, Head>, node<Op, C...>,
      std::conditional_t<prim::is_elementwise_op<Op>,
                         typename first_non_void<typename find_epilogue_head<Head, C>::type...>::type, void>>;
};
template <class Head, class E>
using epilogue_head_t = typename find_epilogue_head<Head, std::remove_cvref_t<E>>::type;
template <class E>
using epilogue_matmul_t = epilogue_head_t<prim::matmul_, E>;

/// True when E is an elementwise tree that the CPU runs as one GEMM with E as the epilogue: exactly
/// one matmul below elementwise nodes, of E's dtype (float or double) and rank, with 2-D operands
/// or a batch-free weight (x[..., M, K] @ w[K, N]: the leading dims become rows). Whether the
/// matmul's value is broadcast by the tree is checked on the run-time sizes.
template <class E>
constexpr bool gemm_epilogue_candidate() {
  if constexpr (!Node<E> || SharedNode<E>) {
    return false;
  } else if constexpr (!prim::is_elementwise_op<typename E::op_type>) {
    return false;
  } else if constexpr (epilogue_matmul_count<E>() != 1) {
    return false;
  } else {
    using M = epilogue_matmul_t<E>;
    using T = value_type_of<M>;
    using A = std::tuple_element_t<0, decltype(std::declval<M>().children)>;
    using B = std::tuple_element_t<1, decltype(std::declval<M>().children)>;
    return (std::is_same_v<T, float> || std::is_same_v<T, double>) && std::is_same_v<T, value_type_of<E>> &&
           rank_of<M> == rank_of<E> && rank_of<A> >= 2 && rank_of<B> == 2;
  }
}

/// True when E is an elementwise tree that the CPU runs as one conv2d with E as the epilogue
/// (conv_epilogue_pattern, lower.hpp): exactly one aten::conv2d below elementwise nodes, of E's
/// dtype (float or double) and rank (4). Whether the tree broadcasts the convolution's value is
/// checked on the run-time sizes; the batch norm of eval mode (x * scale + shift per channel, or
/// batch_norm's (x - mean) * invstd * weight + bias), relu and a residual add are such trees.
template <class E>
constexpr bool conv_epilogue_candidate() {
  if constexpr (!Node<E> || SharedNode<E>) {
    return false;
  } else if constexpr (!prim::is_elementwise_op<typename E::op_type>) {
    return false;
  } else if constexpr (epilogue_head_count<aten::conv2d, E>() != 1) {
    return false;
  } else {
    using T = value_type_of<epilogue_head_t<aten::conv2d, E>>;
    return (std::is_same_v<T, float> || std::is_same_v<T, double>) && std::is_same_v<T, value_type_of<E>> &&
           rank_of<E> == 4;
  }
}

/// The Head node below E's elementwise nodes (E must have exactly one: epilogue_head_count).
template <class Head, class E>
const epilogue_head_t<Head, E>& epilogue_head_of(const E& e);
template <class Head, std::size_t I, class E>
const epilogue_head_t<Head, E>& epilogue_head_in_children(const E& e) {
  using C = std::remove_cvref_t<std::tuple_element_t<I, std::remove_cvref_t<decltype(e.children)>>>;
  if constexpr (epilogue_head_count<Head, C>() > 0)
    return epilogue_head_of<Head>(std::get<I>(e.children));
  else
    return epilogue_head_in_children<Head, I + 1>(e);
}
template <class Head, class E>
const epilogue_head_t<Head, E>& epilogue_head_of(const E& e) {
  if constexpr (std::is_same_v<typename E::op_type, Head>)
    return e;
  else
    return epilogue_head_in_children<Head, 0>(e);
}
template <class E>
const epilogue_matmul_t<E>& epilogue_matmul_of(const E& e) {
  return epilogue_head_of<prim::matmul_>(e);
}

/// The reduction node below E's elementwise nodes (E must have exactly one: epilogue_reduction_count).
template <class E>
const typename find_epilogue_reduction<E>::type& epilogue_reduction_of(const E& e);
template <std::size_t I, class E>
const typename find_epilogue_reduction<E>::type& epilogue_reduction_in_children(const E& e) {
  using C = std::remove_cvref_t<std::tuple_element_t<I, std::remove_cvref_t<decltype(e.children)>>>;
  if constexpr (!std::is_void_v<typename find_epilogue_reduction<C>::type>)
    return epilogue_reduction_of(std::get<I>(e.children));
  else
    return epilogue_reduction_in_children<I + 1>(e);
}
template <class E>
const typename find_epilogue_reduction<E>::type& epilogue_reduction_of(const E& e) {
  if constexpr (is_reduction_kernel<typename E::op_type>)
    return e;
  else
    return epilogue_reduction_in_children<0>(e);
}

}  // namespace tenet::detail
