#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// cross_entropy of class-index targets over rows (aten::cross_entropy_rows) and its input
// gradient (aten::cross_entropy_rows_grad): composites that a backend may run as one row kernel
// each (CUDA: backend/cuda/cross_entropy.cuh), so that a [N, C] input of 16-bit logits is read
// once by the forward and once by the backward (plus an L2-resident second read of the row), with
// no [N, C] log-probabilities, float copies or one-hot gradients in memory. losses.hpp uses them for
// cross_entropy of a 2-D input with int64 targets, no class weight and no label smoothing.
//
//   cross_entropy_rows(x [N, C], t [N, 1])        [N, 1] in compute_t<x>:
//       logsumexp(x[i, :]) - x[i, t_i], 0 where t_i == ignore_index
//   cross_entropy_rows_grad(x, t [N, 1], g [N, 1]) [N, C] in x's dtype:
//       (softmax(x[i, :]) - onehot(t_i)) g_i, 0 in rows where t_i == ignore_index
// The targets are checked to be in [0, C) or ignore_index before either is built (losses.hpp), as
// for nll_loss; the decompositions (log_softmax / softmax, gather, comparisons) are the reference.
#include <cstdint>
#include <string>
#include <string_view>

#include <tenet/decomp/build.hpp>
#include <tenet/decomp/softmax.hpp>
#include <tenet/error.hpp>
#include <tenet/expr/shared.hpp>
#include <tenet/prims/indexing.hpp>
#include <tenet/prims/iota.hpp>

namespace tenet::aten {

namespace detail_ce {
template <class X, class Tt>
void check_rows(const char* what, const X& x, const Tt& t) {
  static_assert(rank_of<X> == 2 && rank_of<Tt> == 2, "tenet: cross_entropy_rows takes x [N, C] and t [N, 1]");
  const auto xs = x.sizes();
  const auto ts = t.sizes();
  if (ts[0] != xs[0] || ts[1] != 1)
    throw shape_error(std::string("tenet: ") + what + ": targets of sizes " + detail::sizes_text(ts) +
                      " for an input of sizes " + detail::sizes_text(xs) + " (expected [" + std::to_string(xs[0]) +
                      ", 1])");
}
}  // namespace detail_ce

struct cross_entropy_rows {
  static constexpr bool is_prim = false;
  static constexpr std::string_view name = "cross_entropy_rows";
  std::int64_t ignore_index = -100;
  template <class X, class Tt>
  using result_type = compute_t<value_type_of<X>>;
  template <class X, class Tt>
  using result_shape = shape_of<Tt>;
  template <class X, class Tt>
  static auto sizes(const X& x, const Tt& t) {
    detail_ce::check_rows("cross_entropy", x, t);
    return t.sizes();
  }
  /// A row kernel reads a pointwise producer of x (a cast of 16-bit logits) while loading.
  static constexpr bool fuses_prologue = true;
  template <class X, class Tt>
  auto decompose(const X& x, const Tt& t) const {
    using A = compute_t<value_type_of<X>>;
    auto lsm = make_node(log_softmax<1>{}, detail::cast_to<A>(x));
    auto valid = detail::share(make_node(prim::ne_{}, t, scalar<std::int64_t>{ignore_index}));
    // an ignored target reads class 0, and the result is masked
    auto safe = make_node(prim::where_{}, valid, t, scalar<std::int64_t>{0});
    auto picked = make_node(prim::gather_<1>{}, lsm, safe);
    return make_node(prim::where_{}, valid, make_node(prim::neg_{}, picked), scalar<A>{A(0)});
  }
};

struct cross_entropy_rows_grad {
  static constexpr bool is_prim = false;
  static constexpr std::string_view name = "cross_entropy_rows_grad";
  std::int64_t ignore_index = -100;
  template <class X, class Tt, class G>
  using result_type = value_type_of<X>;
  template <class X, class Tt, class G>
  using result_shape = shape_of<X>;
  template <class X, class Tt, class G>
  static auto sizes(const X& x, const Tt& t, const G& g) {
    detail_ce::check_rows("cross_entropy backward", x, t);
    if (g.sizes() != t.sizes())
      throw shape_error("tenet: cross_entropy backward: a gradient of sizes " + detail::sizes_text(g.sizes()) +
                        " for targets of sizes " + detail::sizes_text(t.sizes()));
    return x.sizes();
  }
  template <class X, class Tt, class G>
  auto decompose(const X& x, const Tt& t, const G& g) const {
    using T = value_type_of<X>;
    using A = compute_t<T>;
    auto p = make_node(softmax<1>{}, detail::cast_to<A>(x));
    auto classes = make_node(prim::iota_<std::int64_t>{x.sizes()[1], 0, 1});
    auto onehot = detail::cast_to<A>(make_node(prim::eq_{}, classes, t));
    auto valid = make_node(prim::ne_{}, t, scalar<std::int64_t>{ignore_index});
    auto dx = make_node(prim::mul_{}, make_node(prim::sub_{}, p, onehot), detail::cast_to<A>(g));
    return detail::cast_to<T>(make_node(prim::where_{}, valid, dx, scalar<A>{A(0)}));
  }
};

}  // namespace tenet::aten
