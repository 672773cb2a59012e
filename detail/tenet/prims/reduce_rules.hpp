#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The differentiation rules of the reduction prims and matmul (prims/reduce.hpp), their entries of
// the rule table (prims/rule_table.hpp), with linear's fused bias gradient (matmul + bias on a
// device whose GEMM has a bias-gradient epilogue; add's rule, prims/elementwise_rules.hpp, asks).
#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include <tenet/autograd/jvp.hpp>
#include <tenet/autograd/vjp.hpp>
#include <tenet/prims/elementwise_rules.hpp>  // linear_backward_fused's declaration
#include <tenet/prims/reduce.hpp>
#include <tenet/prims/rule_table.hpp>

namespace tenet::detail::ag {

template <class Kind, bool K, auto... Dims>
struct rules<prim::reduce_<Kind, K, Dims...>> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto& x = std::get<0>(e.children);
    using X = std::remove_cvref_t<decltype(x)>;
    using T = value_type_of<E>;
    constexpr std::size_t r = rank_of<X>;
    constexpr auto mask = prim::reduce_<Kind, K, Dims...>::template mask<X>();
    const auto xs = x.sizes();
    sizes_t<r> ks{};
    for (std::size_t i = 0; i < r; ++i) ks[i] = mask[i] ? 1 : xs[i];
    const auto gk = as_sizes<r>(exact(g, e.sizes()), ks);
    const auto ge = make_node(prim::expand_<dyn_shape<r>>{xs}, gk);
    if constexpr (std::is_same_v<Kind, prim::sum_kind>) {
      backprop(x, ge);
    } else if constexpr (std::is_same_v<Kind, prim::prod_kind>) {
      // with z zeros in the group: z == 0: prod / x; z == 1: the product of the others at the zero
      const auto xv = forward_value(x);
      if (TENET_AUTOGRAD >= 2 && grad_mode()) {  // create_graph: this rule's derivative is wrong at zeros
        bool zero_seen = false;
        const auto xh = xv.cpu();  // (a host copy of a device tensor)
        const T* xp = static_cast<const T*>(xh.storage()->data);
        for_each_offset(xh.sizes(), xh.strides(), xh.offset(),
                        [&](std::int64_t, std::int64_t off) { zero_seen = zero_seen || to_double(xp[off]) == 0.0; });
        if (zero_seen)
          throw value_error("tenet: autograd: create_graph through prod of an input with an element equal to 0 is not "
                            "implemented (its second derivative there would be wrong); the first-order gradient works");
      }
      const auto zero = pw::eq(xv, pw::c<T>(0));
      const auto z = value(make_node(prim::reduce_<prim::sum_kind, true, Dims...>{}, pw::cast<T>(zero)));
      const auto p = value(make_node(prim::reduce_<prim::prod_kind, true, Dims...>{}, pw::where(zero, pw::c<T>(1), xv)));
      const auto local = pw::where(zero, pw::where(pw::eq(z, pw::c<T>(1)), p, pw::c<T>(0)),
                                   pw::where(pw::eq(z, pw::c<T>(0)), pw::div(p, xv), pw::c<T>(0)));
      backprop(x, pw::mul(ge, local));
    } else if constexpr (std::is_same_v<Kind, prim::amax_kind> || std::is_same_v<Kind, prim::amin_kind>) {
      // the gradient is split evenly among the elements equal to the extreme
      const auto xv = forward_value(x);
      const auto yk = as_sizes<r>(forward_value(e), ks);
      const auto hit = value(pw::cast<T>(pw::eq(xv, yk)));
      const auto count = value(make_node(prim::reduce_<prim::sum_kind, true, Dims...>{}, hit));
      backprop(x, pw::mul(ge, pw::div(hit, count)));
    } else {
      static_assert(compile_error::always_false<Kind>, "tenet: autograd: no VJP for this reduction kind");
    }
  }
  /// The tangent: sum's is the sum of the tangent; the others contract the tangent with their
  /// reverse-mode weights (prod: the product of the others; amax/amin: the tie-split mask).
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    using Op = prim::reduce_<Kind, K, Dims...>;
    using T = value_type_of<E>;
    const auto& x = std::get<0>(e.children);
    using X = std::remove_cvref_t<decltype(x)>;
    const auto tx = value(tangent(x, ctx));
    if constexpr (std::is_same_v<Kind, prim::sum_kind>) {
      return make_node(e.op, tx);
    } else {
      constexpr std::size_t rx = rank_of<X>;
      constexpr auto mask = Op::template mask<X>();
      const auto xv = forward_value(x);
      const auto xs = x.sizes();
      sizes_t<rx> ks{};
      for (std::size_t i = 0; i < rx; ++i) ks[i] = mask[i] ? 1 : xs[i];
      using kept = prim::reduce_<prim::sum_kind, true, Dims...>;
      using summed = prim::reduce_<prim::sum_kind, K, Dims...>;
      if constexpr (std::is_same_v<Kind, prim::prod_kind>) {
        const auto zero = pw::eq(xv, pw::c<T>(0));
        const auto z = value(make_node(kept{}, pw::cast<T>(zero)));
        const auto prod_nonzero =
            value(make_node(prim::reduce_<prim::prod_kind, true, Dims...>{}, pw::where(zero, pw::c<T>(1), xv)));
        const auto local = pw::where(zero, pw::where(pw::eq(z, pw::c<T>(1)), prod_nonzero, pw::c<T>(0)),
                                     pw::where(pw::eq(z, pw::c<T>(0)), pw::div(prod_nonzero, xv), pw::c<T>(0)));
        return make_node(summed{}, value(pw::mul(tx, local)));
      } else {
        const auto yk = as_sizes<rx>(forward_value(e), ks);
        const auto hit = value(pw::cast<T>(pw::eq(xv, yk)));
        const auto count = value(make_node(kept{}, hit));
        return make_node(summed{}, value(pw::mul(tx, pw::div(hit, count))));
      }
    }
  }
};

/// True for a 2-D operand that is the transpose of a contiguous matrix (linear's weight.t()): its
/// gradient is computed in the weight's own layout.
inline bool is_transposed_contiguous(const sizes_t<2>& sizes, const sizes_t<2>& strides) {
  return sizes[0] > 1 && sizes[1] > 1 && strides[0] == 1 && strides[1] == sizes[0];
}

template <>
struct rules<prim::matmul_> {
  template <class T, class S>
  static auto as_matrix_lhs(const Tensor<T, S>& t) {  // a vector operand as a 1 x k row
    if constexpr (S::rank == 1)
      return as_sizes<2>(t, sizes_t<2>{1, t.sizes()[0]});
    else
      return t;
  }
  template <class T, class S>
  static auto as_matrix_rhs(const Tensor<T, S>& t) {  // a vector operand as a k x 1 column
    if constexpr (S::rank == 1)
      return as_sizes<2>(t, sizes_t<2>{t.sizes()[0], 1});
    else
      return t;
  }
  /// The gradient with the vector operands' unit dims put back (the rank of the 2-D-ized product).
  template <class A2, class B2, class GV>
  static auto as_product_grad(const A2& a2, const B2& b2, const GV& gv) {
    constexpr std::size_t rg = std::max(rank_of<A2>, rank_of<B2>);
    sizes_t<rg> g2s{};
    const auto as = a2.sizes();
    const auto bs = b2.sizes();
    const auto os = gv.sizes();
    std::size_t j = 0;
    for (; j + 2 < rg; ++j) g2s[j] = os[j];
    g2s[rg - 2] = as[rank_of<A2> - 2];
    g2s[rg - 1] = bs[rank_of<B2> - 1];
    return as_sizes<rg>(gv, g2s);
  }
  /// Sends the left operand's gradient, g b^T (summed over the batch dims it was broadcast along);
  /// av, bv: the operands' forward values.
  template <class E, class GV, class AV, class BV>
  static void send_lhs(const E& e, const GV& gv, const AV& av, const BV& bv) {
    const auto& a = std::get<0>(e.children);
    constexpr std::size_t ra = rank_of<decltype(a)>;
    const auto a2 = as_matrix_lhs(av);
    const auto b2 = as_matrix_rhs(bv);
    const auto g2 = as_product_grad(a2, b2, gv);
    auto da = reduce_to<value_type_of<E>, rank_of<decltype(a2)>>(value(make_node(prim::matmul_{}, g2, b2.mT())),
                                                                  a2.sizes());
    backprop(a, as_sizes<ra>(da, a.sizes()));
  }
  /// Sends the right operand's gradient, a^T g. A 2-D right operand shared by every batch entry
  /// (linear over a batch of sequences) gets one GEMM over the flattened batch (k = batch x rows),
  /// not a batched GEMM summed afterwards.
  template <class E, class GV, class AV, class BV>
  static void send_rhs(const E& e, const GV& gv, const AV& av, const BV& bv) {
    using T = value_type_of<E>;
    const auto& b = std::get<1>(e.children);
    constexpr std::size_t rb = rank_of<decltype(b)>;
    const auto a2 = as_matrix_lhs(av);
    const auto b2 = as_matrix_rhs(bv);
    constexpr std::size_t ra2 = rank_of<decltype(a2)>;
    const auto g2 = as_product_grad(a2, b2, gv);
    if constexpr (rb == 2) {
      const auto as = a2.sizes();
      std::int64_t rows = 1;
      for (std::size_t d = 0; d + 1 < ra2; ++d) rows *= as[d];
      const auto af = as_sizes<2>(a2, sizes_t<2>{rows, as[ra2 - 1]});
      const auto gf = as_sizes<2>(g2, sizes_t<2>{rows, b2.sizes()[1]});
      // a column-major B (linear's weight.t()): its gradient is computed as (g^T a)^T, a
      // transposed view of a row-major GEMM result, which is the weight's own layout (the view's
      // backward then takes it without a copy)
      if (is_transposed_contiguous(bv.sizes(), bv.strides())) {
        const auto dbt = value(make_node(prim::matmul_{}, gf.mT(), af));
        backprop(b, grad_tensor<T, 2>(dbt.mT()));
      } else {
        backprop(b, grad_tensor<T, 2>(value(make_node(prim::matmul_{}, af.mT(), gf))));
      }
    } else {
      auto db = reduce_to<T, rank_of<decltype(b2)>>(value(make_node(prim::matmul_{}, a2.mT(), g2)), b2.sizes());
      backprop(b, as_sizes<rb>(db, b.sizes()));
    }
  }
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto gv = exact(g, e.sizes());
    const bool ga = needs_grad(std::get<0>(e.children)), gb = needs_grad(std::get<1>(e.children));
    // a's values are read for b's gradient only (a's own needs a's sizes), b's for a's
    const auto av = [&] {
      const unread_scope unread(!gb);
      return forward_value(std::get<0>(e.children));
    }();
    const auto bv = [&] {
      const unread_scope unread(!ga);
      return forward_value(std::get<1>(e.children));
    }();
    if (ga) send_lhs(e, gv, av, bv);
    if (gb) send_rhs(e, gv, av, bv);
  }
  /// The tangent: bilinear, ta @ b + a @ tb (only the operands with a tangent: no 0 * inf from a
  /// constant operand, as the binary pointwise rules).
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    using R = grad_tensor<value_type_of<E>, rank_of<E>>;
    const auto& a = std::get<0>(e.children);
    const auto& b = std::get<1>(e.children);
    auto from_a = [&] { return R(value(make_node(prim::matmul_{}, value(tangent(a, ctx)), forward_value(b)))); };
    auto from_b = [&] { return R(value(make_node(prim::matmul_{}, forward_value(a), value(tangent(b, ctx))))); };
    if (!carries_tangent(b)) return from_a();
    if (!carries_tangent(a)) return from_b();
    return R(value(pw::add(from_a(), from_b())));
  }
};

/// The backward of linear(x, w, b) = matmul(x, w^T) + b on a device whose backend has a GEMM with a
/// bias-gradient epilogue (CUDA: cuBLASLt's BGRADB): w's and b's gradients from one GEMM, x's as
/// usual. False (nothing sent) where the pattern or the device does not allow it; the caller then
/// runs the generic rules. Not under create_graph (the epilogue's result is not an expression).
template <class M, class Bias, class GV>
bool linear_backward_fused(const M& mm, const Bias& bias, const GV& gv) {
  using T = value_type_of<M>;
  const auto& w = std::get<1>(mm.children);
  using W = std::remove_cvref_t<decltype(w)>;
  if constexpr (!TensorType<W> || rank_of<W> != 2 || !std::is_same_v<value_type_of<Bias>, T>) {
    return false;
  } else {
    if (gv.device().is_cpu() || !is_tracked(bias) || !needs_grad(w)) return false;
    if constexpr (TENET_AUTOGRAD >= 2)
      if (grad_mode()) return false;
    if (!is_transposed_contiguous(w.sizes(), w.strides())) return false;  // w^T: [in, out]
    const std::int64_t in = w.sizes()[0], out = w.sizes()[1];
    const auto xv = forward_value(std::get<0>(mm.children));
    if (xv.device() != gv.device() || xv.numel() == 0) return false;
    const std::int64_t rows = xv.numel() / in;
    const auto x2 = as_sizes<2>(xv, sizes_t<2>{rows, in});
    const auto g2 = as_sizes<2>(gv, sizes_t<2>{rows, out});
    grad_tensor<T, 2> dw(sizes_t<2>{out, in}, gv.device());
    grad_tensor<T, 1> db(sizes_t<1>{out}, gv.device());
    if (!linear_grad_on_device<T>(x2, g2, dw, db)) return false;
    if (needs_grad(std::get<0>(mm.children))) rules<prim::matmul_>::send_lhs(mm, gv, xv, forward_value(w));
    backprop(w, grad_tensor<T, 2>(dw.mT()));
    backprop(bias, db);
    return true;
  }
}

}  // namespace tenet::detail::ag
