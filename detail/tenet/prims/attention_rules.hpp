#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The rule-table entry (prims/rule_table.hpp) of scaled_dot_product_attention (decomp/attention.hpp):
// autograd keeps the node whole, so its forward runs the selected kernel.
//   VJP: one aten::sdpa_grad node (the CPU's tiled backward where eligible; else the math backward
//        in stages) whose flat result holds dq, dk, dv (and an additive mask's gradient), taken
//        apart as views.
//   JVP: the tangent pushed through the math variant (one lazy expression).
// aten::sdpa_grad's own VJP (second order, TENET_AUTOGRAD=2): through its math decomposition, which
// recomputes the weights from q and k (the saved output is not an input of it).
#include <cstdint>
#include <memory>

#include <tenet/autograd/jvp.hpp>
#include <tenet/autograd/record.hpp>  // autograd_backend
#include <tenet/autograd/vjp.hpp>
#include <tenet/decomp/attention.hpp>
#include <tenet/prims/movement.hpp>

namespace tenet::detail {
template <class Forced, class... C>
inline constexpr bool runs_natively<ag::autograd_backend, aten::sdpa<Forced>, C...> = true;
}  // namespace tenet::detail

namespace tenet::detail::ag {
/// The log-sum-exp the forward kernel of attention node e kept (sdpa_lse_buffer), from the
/// recorded forward's table or the compiled step's session, where saved_value finds e's output.
template <class E>
std::shared_ptr<const void> sdpa_saved_entry(const E& e) {
  const cse_table* t = saved_table();
  if (!t) return nullptr;
  const auto key = sdpa_lse_key(e);
  if (!key) return nullptr;
  const auto it = t->find(*key);
  return it == t->end() ? nullptr : std::shared_ptr<const void>(it->second);
}

template <class Forced>
struct rules<aten::sdpa<Forced>> {
  /// Part [begin, begin + numel(x)) of the flat gradient, with x's sizes.
  template <class P, class X>
  static auto part(const P& packed, std::int64_t begin, const X& x) {
    constexpr std::size_t R = rank_of<X>;
    const auto xs = x.sizes();
    std::int64_t n = 1;
    for (auto s : xs) n *= s;
    return make_node(prim::reshape_<dyn_shape<R>>{xs}, make_node(prim::slice_<1>{{begin}, {begin + n}, {1}}, packed));
  }
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    const auto& ch = e.children;
    const auto gv = value(exact(g, e.sizes()));
    const auto y = forward_value(e);
    const auto q = forward_value(std::get<0>(ch)), k = forward_value(std::get<1>(ch)), v = forward_value(std::get<2>(ch));
    aten::sdpa_grad<Forced> op{e.op};
    op.saved_lse = sdpa_saved_entry(e);
    std::int64_t at = 0;
    const auto next = [&](const auto& x) {
      const std::int64_t b = at;
      std::int64_t n = 1;
      for (auto s : x.sizes()) n *= s;
      at += n;
      return b;
    };
    const std::int64_t bq = next(q), bk = next(k), bv = next(v);
    if constexpr (sdpa_mask_kind<E> == attn_mask_kind::none) {
      const auto packed = value(make_node(op, q, k, v, y, gv));
      if (needs_grad(std::get<0>(ch))) backprop(std::get<0>(ch), part(packed, bq, q));
      if (needs_grad(std::get<1>(ch))) backprop(std::get<1>(ch), part(packed, bk, k));
      if (needs_grad(std::get<2>(ch))) backprop(std::get<2>(ch), part(packed, bv, v));
    } else {
      const auto& mc = std::get<3>(ch);
      const auto m = forward_value(mc);
      if constexpr (sdpa_mask_kind<E> == attn_mask_kind::additive) op.mask_grad = needs_grad(mc);
      const auto packed = value(make_node(op, q, k, v, y, gv, m));
      if (needs_grad(std::get<0>(ch))) backprop(std::get<0>(ch), part(packed, bq, q));
      if (needs_grad(std::get<1>(ch))) backprop(std::get<1>(ch), part(packed, bk, k));
      if (needs_grad(std::get<2>(ch))) backprop(std::get<2>(ch), part(packed, bv, v));
      if constexpr (sdpa_mask_kind<E> == attn_mask_kind::additive)
        if (op.mask_grad) backprop(mc, part(packed, next(m), m));
    }
  }
  template <class E>
  static auto jvp(const E& e, jvp_context& ctx) {
    return tangent(detail::apply_tuple([&](const auto&... c) { return e.op.math(c...); }, e.children), ctx);
  }
};

template <class Forced>
struct rules<aten::sdpa_grad<Forced>> {
  template <class E, class G>
  static void vjp(const E& e, const G& g) {
    backprop(detail::apply_tuple([&](const auto&... c) { return e.op.decompose(c...); }, e.children), g);
  }
};
}  // namespace tenet::detail::ag
