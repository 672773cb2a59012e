#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Classification losses (torch.nn.functional.nll_loss and cross_entropy), decompositions into
// log_softmax, the gather_ prim and reductions. The reduction is a template argument, as for the
// regression losses in nn_functional.hpp: `cross_entropy<reduction::sum>(logits, target)`.
//
// Layout, as torch: input [N, C] or [N, C, d1, ...] (classes in dim 1), or [C] unbatched; class-
// index targets [N] / [N, d1, ...] / [] of int64. The mean is torch's weighted mean:
// sum(-w[t_i] x[i, t_i]) / sum(w[t_i]) over the elements whose target is not ignore_index (NaN when
// every target is ignored).
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include <tenet/nn_functional.hpp>
#include <tenet/decomp/cross_entropy.hpp>
#include <tenet/indexing.hpp>
#include <tenet/ops.hpp>

namespace tenet {

namespace detail {

/// An empty weight (no class weights).
struct no_weight {};

template <class X, class Tg>
void check_class_target(const X& input, const Tg& target) {
  static_assert(rank_of<X> >= 1, "tenet: the loss input needs a class dim: [C], [N, C] or [N, C, d1, ...]");
  static_assert(std::is_same_v<value_type_of<Tg>, std::int64_t>,
                "tenet: class-index targets must be int64 (as torch); convert them with .to<std::int64_t>()");
  static_assert(rank_of<Tg> + 1 == rank_of<X>,
                "tenet: the target must have the input's shape without the class dim ([N] for [N, C])");
  const auto is = input.sizes();
  const auto ts = target.sizes();
  constexpr std::size_t cd = rank_of<X> == 1 ? 0 : 1;
  for (std::size_t k = 0, j = 0; k < rank_of<X>; ++k) {
    if (k == cd) continue;
    if (is[k] != ts[j++]) {
      sizes_t<rank_of<X> - 1> want{};
      for (std::size_t a = 0, b = 0; a < rank_of<X>; ++a)
        if (a != cd) want[b++] = is[a];
      throw shape_error("tenet: loss: expected a target of sizes " + sizes_text(want) + " for an input of sizes " +
                        sizes_text(is) + ", got " + sizes_text(ts));
    }
  }
}

template <class X, class W>
auto class_weight_view(const X& input, const W& weight) {
  static_assert(rank_of<W> == 1, "tenet: the class weight must be 1-D, one value per class");
  static_assert(std::is_same_v<value_type_of<W>, value_type_of<X>>,
                "tenet: the class weight must have the input's dtype (as torch)");
  const auto w = eval(weight);
  const auto is = input.sizes();
  if (w.sizes()[0] != is[1])
    throw shape_error("tenet: loss: the weight has " + std::to_string(w.sizes()[0]) + " values for " +
                      std::to_string(is[1]) + " classes");
  // w along the class dim, stride 0 elsewhere: shape of the input
  sizes_t<rank_of<X>> st{};
  st[1] = w.strides()[0];
  return w.template with_layout<dyn_shape<rank_of<X>>>(is, st, w.offset());
}

/// Throws index_error unless every class-index target (an evaluated tensor) is in [0, classes)
/// or equals ignore_index.
template <class Tt>
void check_class_values(const char* op, const Tt& t, std::int64_t classes, std::int64_t ignore_index) {
  check_index_values(t, 0, classes, ignore_index, [&](std::int64_t bad) {
    return std::string("tenet: ") + op + ": target " + std::to_string(bad) + " is out of bounds for " +
           std::to_string(classes) + " classes (targets must be in [0, " + std::to_string(classes) +
           ") or equal ignore_index " + std::to_string(ignore_index) + ")";
  });
}

/// The parts of nll_loss for an input with the class dim at 1 (rank >= 2), each of shape
/// [N, 1, d1, ...]: the per-element loss -w[t] x[t] (0 where ignored) and the weight w[t] (0 where
/// ignored).
template <class X, class Tg, class W>
auto nll_parts(const char* op, const X& input, const Tg& target, const W& weight, std::int64_t ignore_index) {
  using T = value_type_of<X>;
  const auto t = eval(target).template unsqueeze<1>();
  check_class_values(op, t, input.sizes()[1], ignore_index);
  auto valid = make_node(prim::ne_{}, t, scalar<std::int64_t>{ignore_index});
  // an ignored target reads class 0, and the result is masked
  auto safe = share(eval(make_node(prim::where_{}, valid, t, scalar<std::int64_t>{0})));
  auto picked = gather<1>(input, safe);
  auto wt = [&] {
    if constexpr (std::is_same_v<W, no_weight>)
      return cast_to<T>(valid);
    else
      return make_node(prim::where_{}, valid, gather<1>(class_weight_view(input, weight), safe), scalar<T>{T(0)});
  }();
  auto w_shared = share(wt);
  auto weighted = [&] {
    if constexpr (std::is_same_v<W, no_weight>)
      return picked;  // the weight is 1 where the result is kept
    else
      return make_node(prim::mul_{}, picked, w_shared);
  }();
  auto loss = make_node(prim::where_{}, valid, make_node(prim::neg_{}, weighted), scalar<T>{T(0)});
  return std::make_pair(loss, w_shared);
}

template <reduction R, class L, class Wt>
auto reduce_nll(const L& loss, const Wt& wt) {
  using T = value_type_of<L>;
  if constexpr (R == reduction::none)
    return sum<1>(loss);  // drops the unit class dim
  else if constexpr (R == reduction::sum)
    return sum(loss);
  else if constexpr (half_precision<T>)  // float sums, rounded once (as torch; see float_operand)
    return cast_to<T>(make_node(prim::div_{}, sum(cast_to<float>(loss)), sum(cast_to<float>(wt))));
  else
    return make_node(prim::div_{}, sum(loss), sum(wt));
}

/// x as float where it is a bfloat16 / float16 expression, else x itself. Losses of 16-bit inputs
/// run in float and round once, as torch: in 16 bits a sum of losses or of weights, or a count of
/// positions, above 65504 is infinite in float16 (a NaN mean).
template <class X>
auto float_operand(const X& x) {
  if constexpr (Expression<X>) {
    if constexpr (half_precision<value_type_of<X>>) return cast_to<float>(x);
    else return x;
  } else {
    return x;
  }
}

template <reduction R, class X, class Tg, class W>
auto nll_loss_impl(const X& input, const Tg& target, const W& weight, std::int64_t ignore_index) {
  static_assert(is_floating_v<value_type_of<X>>, "tenet: nll_loss needs a floating input (log-probabilities)");
  check_class_target(input, target);
  if constexpr (rank_of<X> == 1) {
    // unbatched [C]: as a batch of one
    auto r = nll_loss_impl<R>(eval(input).template unsqueeze<0>(), eval(target).template reshape<1>(), weight,
                              ignore_index);
    if constexpr (R == reduction::none)
      return cast_to<value_type_of<X>>(sum<0>(r));
    else
      return r;
  } else {
    auto [loss, wt] = nll_parts("nll_loss", input, target, weight, ignore_index);
    return reduce_nll<R>(loss, wt);
  }
}

}  // namespace detail

/// nll_loss<R>(input, target, ignore_index = -100): input holds log-probabilities.
template <reduction R = reduction::mean, Expression X, Expression Tg>
auto nll_loss(const X& input, const Tg& target, std::int64_t ignore_index = -100) {
  return detail::nll_loss_impl<R>(input, target, detail::no_weight{}, ignore_index);
}
/// nll_loss<R>(input, target, weight, ignore_index = -100): with a weight per class.
template <reduction R = reduction::mean, Expression X, Expression Tg, Expression W>
auto nll_loss(const X& input, const Tg& target, const W& weight, std::int64_t ignore_index = -100) {
  return detail::nll_loss_impl<R>(input, target, weight, ignore_index);
}

namespace detail {

/// The shape of a loss with reduction R for an input of shape S (classes at dim 1, or 0 for [C]).
template <reduction R, class S, bool Scalar = (R != reduction::none || S::rank == 1)>
struct class_loss_shape_of {
  using type = shape<>;
};
template <reduction R, class S>
struct class_loss_shape_of<R, S, false> {
  using type = concat_shapes_t<take_extents_t<S, 0, 1>, take_extents_t<S, 2, S::rank>>;
};
template <reduction R, class S>
using class_loss_shape = typename class_loss_shape_of<R, S>::type;

template <reduction R, class X, class Tg, class W>
auto cross_entropy_impl(const X& input0, const Tg& target, const W& weight, std::int64_t ignore_index,
                        double label_smoothing) {
  using T = floating_t<value_type_of<X>>;
  static_assert(rank_of<X> >= 1, "tenet: cross_entropy needs a class dim: [C], [N, C] or [N, C, d1, ...]");
  using Out = Tensor<T, class_loss_shape<R, shape_of<X>>>;
  if (label_smoothing < 0.0 || label_smoothing > 1.0)
    throw value_error("tenet: cross_entropy: label_smoothing must be in [0, 1], got " +
                      std::to_string(label_smoothing));
  if constexpr (rank_of<X> == 2 && is_floating_v<value_type_of<X>> && std::is_integral_v<value_type_of<Tg>> &&
                std::is_same_v<W, no_weight>) {
    if (label_smoothing == 0.0) {
      // [N, C] logits, class indices: the row composite (decomp/cross_entropy.hpp), one kernel
      // each way where the backend has them; a float cast of 16-bit logits is read through
      check_class_target(input0, target);
      const auto t = eval(target).template unsqueeze<1>();
      check_class_values("cross_entropy", t, input0.sizes()[1], ignore_index);
      using A = compute_t<value_type_of<X>>;
      auto loss = make_node(aten::cross_entropy_rows{ignore_index}, input0, t);
      auto wt = cast_to<A>(make_node(prim::ne_{}, t, scalar<std::int64_t>{ignore_index}));
      return Out(cast_to<T>(reduce_nll<R>(loss, wt)));
    }
  }
  if constexpr (rank_of<X> == 1) {
    // unbatched [C]: as a batch of one
    auto x1 = eval(input0).template unsqueeze<0>();
    auto t1 = eval(target).template reshape<1>();
    auto r = cross_entropy_impl<R>(x1, t1, weight, ignore_index, label_smoothing);
    if constexpr (R == reduction::none)
      return Out(cast_to<T>(sum<0>(r)));
    else
      return Out(r);
  } else if constexpr (half_precision<T>) {
    return Out(cast_to<T>(
        cross_entropy_impl<R>(cast_to<float>(input0), float_operand(target), float_operand(weight), ignore_index,
                              label_smoothing)));
  } else {
    const auto input = eval(cast_to<T>(input0));
    const std::int64_t C = input.sizes()[1];
    const auto lsm = share(log_softmax<1>(input));
    if constexpr (std::is_integral_v<value_type_of<Tg>>) {
      check_class_target(input, target);
      auto [loss, wt] = nll_parts("cross_entropy", lsm, target, weight, ignore_index);
      if (label_smoothing == 0.0) return Out(reduce_nll<R>(loss, wt));
      // torch: (1 - eps) nll + eps / C * smooth, smooth = -sum_c w_c lsm_c (0 where ignored)
      const auto t = eval(target);
      auto valid = make_node(prim::ne_{}, t, scalar<std::int64_t>{ignore_index});
      auto per_class = [&] {
        if constexpr (std::is_same_v<W, no_weight>)
          return lsm;
        else
          return make_node(prim::mul_{}, lsm, class_weight_view(input, weight));
      }();
      auto smooth = make_node(prim::where_{}, valid, make_node(prim::neg_{}, sum<1>(per_class)), scalar<T>{T(0)});
      const T one_minus = T(static_cast<compute_t<T>>(1.0 - label_smoothing));
      const T per_c = T(static_cast<compute_t<T>>(label_smoothing / static_cast<double>(C)));
      auto combine = [&](const auto& n, const auto& s) {
        return make_node(prim::add_{}, make_node(prim::mul_{}, n, scalar<T>{one_minus}),
                         make_node(prim::mul_{}, s, scalar<T>{per_c}));
      };
      if constexpr (R == reduction::none) {
        return Out(combine(sum<1>(loss), smooth));
      } else if constexpr (R == reduction::sum) {
        return Out(combine(sum(loss), sum(smooth)));
      } else {
        // the mean of the smooth term: over the weights of the kept targets (over their count
        // without weights), as torch
        auto total = share(sum(wt));
        return Out(combine(make_node(prim::div_{}, sum(loss), total), make_node(prim::div_{}, sum(smooth), total)));
      }
    } else {
      // class probabilities, the input's shape
      static_assert(std::is_same_v<value_type_of<Tg>, value_type_of<X>>,
                    "tenet: cross_entropy: probability targets must have the input's dtype");
      static_assert(rank_of<Tg> == rank_of<X>, "tenet: cross_entropy: probability targets have the input's shape");
      if (target.sizes() != input.sizes())
        throw shape_error("tenet: cross_entropy: probability targets of sizes " + sizes_text(target.sizes()) +
                          " for an input of sizes " + sizes_text(input.sizes()) + " (they must be equal)");
      if (ignore_index >= 0)
        throw value_error("tenet: cross_entropy: ignore_index is only for class-index targets");
      auto smoothed = make_node(prim::add_{}, make_node(prim::mul_{}, target, scalar<T>{T(static_cast<compute_t<T>>(
                                                                                   1.0 - label_smoothing))}),
                                scalar<T>{T(static_cast<compute_t<T>>(label_smoothing / static_cast<double>(C)))});
      auto terms = [&] {
        if constexpr (std::is_same_v<W, no_weight>)
          return make_node(prim::mul_{}, lsm, smoothed);
        else
          return make_node(prim::mul_{}, make_node(prim::mul_{}, lsm, smoothed), class_weight_view(input, weight));
      }();
      if constexpr (R == reduction::none) {
        return Out(make_node(prim::neg_{}, sum<1>(terms)));
      } else if constexpr (R == reduction::sum) {
        return Out(make_node(prim::neg_{}, sum(terms)));
      } else {
        // mean over the N * d1 * ... positions (NaN for an empty input)
        const double positions = C == 0 ? 0.0 : static_cast<double>(input.numel() / C);
        return Out(make_node(prim::div_{}, make_node(prim::neg_{}, sum(terms)),
                             scalar<T>{T(static_cast<compute_t<T>>(positions))}));
      }
    }
  }
}

}  // namespace detail

/// cross_entropy<R>(logits, target, ignore_index = -100, label_smoothing = 0): log_softmax over the
/// class dim, then nll_loss (int64 class-index targets) or -sum(p log q) (floating class-probability
/// targets of the input's shape), with torch's label smoothing. Evaluates now (label_smoothing is a
/// run-time value) and returns a Tensor.
template <reduction R = reduction::mean, Expression X, Expression Tg>
auto cross_entropy(const X& input, const Tg& target, std::int64_t ignore_index = -100, double label_smoothing = 0.0) {
  return detail::cross_entropy_impl<R>(input, target, detail::no_weight{}, ignore_index, label_smoothing);
}
/// cross_entropy<R>(logits, target, weight, ignore_index = -100, label_smoothing = 0).
template <reduction R = reduction::mean, Expression X, Expression Tg, Expression W>
auto cross_entropy(const X& input, const Tg& target, const W& weight, std::int64_t ignore_index = -100,
                   double label_smoothing = 0.0) {
  return detail::cross_entropy_impl<R>(input, target, weight, ignore_index, label_smoothing);
}

}  // namespace tenet
