#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// scaled_dot_product_attention as a composite: aten::sdpa<Forced, Mask> with its shape rule, its
// math decomposition (the reference: two matmuls around a softmax that gives 0 on a row with no
// key left, as torch's), the variants (flash, memory_efficient, math) with their eligibility, and
// the selection among the variants a backend has kernels for (sdpa_kernels<B, T>). The CPU runs
// flash and memory_efficient natively (backend/cpu/attention.hpp); a backend without a kernel of
// its own runs the math decomposition. The public API is include/tenet/attention.hpp; the
// differentiation rules are prims/attention_rules.hpp.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <tenet/decomp/composite.hpp>
#include <tenet/device.hpp>
#include <tenet/error.hpp>
#include <tenet/expr/cse.hpp>
#include <tenet/expr/shared.hpp>
#include <tenet/prims/iota.hpp>
#include <tenet/prims/random.hpp>
#include <tenet/prims/movement.hpp>
#include <tenet/prims/reduce.hpp>
#include <tenet/shape/rules.hpp>
#include <tenet/tensor.hpp>

namespace tenet::compile_error {
template <class ShapeQ, class ShapeKV, class Extents>
struct cannot_attend {
  static_assert(always_false<ShapeQ>,
                "tenet: scaled_dot_product_attention shape mismatch in 'cannot_attend<shape of q, shape of k or v, "
                "extents<...>>' above: with q (..., L, E), k (..., S, E) and v (..., S, Ev), E of q and k, S of k "
                "and v, and the batch dims must agree (the heads dim, third from last, may divide with enable_gqa)");
};
template <class ShapeMask, class ShapeScores>
struct attention_mask_mismatch {
  static_assert(always_false<ShapeMask>,
                "tenet: scaled_dot_product_attention: the attn_mask's shape (first in "
                "'attention_mask_mismatch<mask, (..., L, S)>' above) does not broadcast to the scores' (..., L, S)");
};
template <class Variant, class Reason>
struct sdpa_variant_ineligible {
  static_assert(always_false<Variant>,
                "tenet: scaled_dot_product_attention: the variant forced in 'sdpa_variant_ineligible<variant, "
                "reason>' above cannot run these arguments");
};
struct flash_takes_no_attn_mask {};
struct needs_floating_inputs {};
}  // namespace tenet::compile_error

namespace tenet {

/// The kernels of scaled_dot_product_attention (torch.nn.attention.SDPBackend's FLASH_ATTENTION,
/// EFFICIENT_ATTENTION and MATH).
enum class sdpa_backend : std::uint8_t { flash = 0, memory_efficient = 1, math = 2 };
inline constexpr int sdpa_backend_count = 3;

inline constexpr std::string_view sdpa_backend_name(sdpa_backend b) {
  switch (b) {
    case sdpa_backend::flash:
      return "flash";
    case sdpa_backend::memory_efficient:
      return "memory_efficient";
    default:
      return "math";
  }
}

namespace sdpa {
/// A variant forced by the template argument of scaled_dot_product_attention<V>(...).
struct automatic {
  static constexpr bool forced = false;
};
struct flash {
  static constexpr bool forced = true;
  static constexpr sdpa_backend value = sdpa_backend::flash;
};
struct memory_efficient {
  static constexpr bool forced = true;
  static constexpr sdpa_backend value = sdpa_backend::memory_efficient;
};
struct math {
  static constexpr bool forced = true;
  static constexpr sdpa_backend value = sdpa_backend::math;
};
}  // namespace sdpa

namespace detail {
/// The set of variants enabled on this thread (bit b: sdpa_backend b), as sdpa_kernel sets it. An
/// attention expression keeps the set of when it was written.
inline std::uint8_t& sdpa_enabled_mask() {
  thread_local std::uint8_t m = 0b111;
  return m;
}

/// What kind of attn_mask the node has: none, bool (false: masked out) or additive (float).
enum class attn_mask_kind : std::uint8_t { none, boolean, additive };
template <class... M>
constexpr attn_mask_kind attn_mask_kind_of() {
  if constexpr (sizeof...(M) == 0)
    return attn_mask_kind::none;
  else if constexpr ((std::is_same_v<value_type_of<M>, bool> && ...))
    return attn_mask_kind::boolean;
  else
    return attn_mask_kind::additive;
}

/// The sizes of one attention: q (batch..., L, E), k (batch'..., S, E), v (batch'..., S, Ev).
struct sdpa_dims {
  std::int64_t batch = 1;  // product of the dims before the heads dim
  std::int64_t hq = 1, hkv = 1;  // the heads dim (third from last; 1 for rank 2)
  std::int64_t L = 0, S = 0, E = 0, Ev = 0;
};

/// The scores' shape (batch of q..., L, S of k).
template <class Q, class K>
using sdpa_scores_shape = concat_shapes_t<take_extents_t<shape_of<Q>, 0, rank_of<Q> - 1>,
                                          shape<shape_of<K>::template extent<rank_of<K> - 2>>>;

/// Static checks (compile errors naming both shapes) of q, k, v and the mask.
template <class Q, class K, class V, class... M>
constexpr bool check_sdpa_shapes() {
  using SQ = shape_of<Q>;
  using SK = shape_of<K>;
  using SV = shape_of<V>;
  constexpr std::size_t R = SQ::rank;
  static_assert(R >= 2, "tenet: scaled_dot_product_attention needs q, k and v of rank >= 2: (..., L, E)");
  if constexpr (SK::rank != R)
    (void)sizeof(compile_error::rank_mismatch<SQ, SK>);
  else if constexpr (SV::rank != R)
    (void)sizeof(compile_error::rank_mismatch<SQ, SV>);
  else {
    constexpr auto differ = [](extent_info a, extent_info b) { return a.is_fixed() && b.is_fixed() && a.value != b.value; };
    if constexpr (differ(SQ::info[R - 1], SK::info[R - 1]))
      (void)sizeof(compile_error::cannot_attend<SQ, SK, compile_error::extents<SQ::template extent<R - 1>, SK::template extent<R - 1>>>);
    if constexpr (differ(SK::info[R - 2], SV::info[R - 2]))
      (void)sizeof(compile_error::cannot_attend<SK, SV, compile_error::extents<SK::template extent<R - 2>, SV::template extent<R - 2>>>);
    constexpr bool batch_ok = [&] {
      for (std::size_t i = 0; i + 3 < R; ++i)
        if (differ(SQ::info[i], SK::info[i]) || differ(SK::info[i], SV::info[i])) return false;
      if constexpr (R >= 3) {
        constexpr extent_info hq = SQ::info[R - 3], hk = SK::info[R - 3];
        if (differ(hk, SV::info[R - 3])) return false;
        if (hq.is_fixed() && hk.is_fixed() && (hk.value == 0 ? hq.value != 0 : hq.value % hk.value != 0)) return false;
      }
      return true;
    }();
    if constexpr (!batch_ok) (void)sizeof(compile_error::cannot_attend<SQ, SK, compile_error::extents<>>);
    if constexpr (sizeof...(M) == 1) {
      using SM = shape_of<std::tuple_element_t<0, std::tuple<M...>>>;
      using SS = sdpa_scores_shape<Q, K>;
      if constexpr (SM::rank > R)
        (void)sizeof(compile_error::attention_mask_mismatch<SM, SS>);
      else
        (void)sizeof(broadcast_t<SM, SS>);  // cannot_broadcast<mask, scores, dim> where they differ
    }
  }
  return true;
}
}  // namespace detail

namespace detail {
struct sdpa_choice;
template <class B, class E>
sdpa_choice select_sdpa(const E& e);
template <class B, class T, class E>
sdpa_choice select_sdpa_as(const E& e);
template <class B, class E>
std::string sdpa_note(const E& e);
}  // namespace detail

namespace aten {
/// scaled_dot_product_attention(q, k, v[, mask]): softmax(q kᵀ · scale + mask) v, with the variant
/// `Forced` (sdpa::automatic: the fastest eligible one among those enabled when it was written).
template <class Forced = tenet::sdpa::automatic>
struct sdpa {
  static constexpr bool is_prim = false;
  static constexpr std::string_view name = "scaled_dot_product_attention";
  using forced_variant = Forced;
  static constexpr std::size_t mask_child = 3;  // the attn_mask's child index, if any
  double scale = 1.0;
  double dropout_p = 0.0;
  bool is_causal = false;
  bool enable_gqa = false;
  std::uint8_t enabled = 0b111;  // the variants enabled when the node was written
  // dropout's draw (dropout_p > 0): Philox blocks reserved from the default generator when the node
  // was written, one uniform value per score (row-major over (batch..., L, S)), on `placement`
  std::uint64_t seed = 0, offset = 0;
  device placement = tenet::cpu;
  // float16 / bfloat16: float32 inputs written under CUDA autocast (torch's autocast runs attention
  // in its low dtype); a backend that autocasts (backend_autocasts<B>) runs the forward and the
  // backward in it. float32: not autocast.
  dtype autocast = dtype::float32;

  template <class Q, class K, class V, class... M>
  using result_type = value_type_of<Q>;
  template <class Q, class K, class V, class... M>
  using result_shape = detail::concat_shapes_t<detail::take_extents_t<shape_of<Q>, 0, rank_of<Q> - 1>,
                                       shape<shape_of<V>::template extent<rank_of<V> - 1>>>;

  /// The sizes of q, k, v checked against each other (and the mask's against the scores'): shape_error.
  template <class Q, class K, class V, class... M>
  detail::sdpa_dims dims(const Q& q, const K& k, const V& v, const M&... m) const {
    constexpr std::size_t R = rank_of<Q>;
    const auto qs = q.sizes(), ks = k.sizes(), vs = v.sizes();
    const auto fail = [&](const std::string& what) {
      throw shape_error("tenet: scaled_dot_product_attention: " + what + " (q " + detail::sizes_text(qs) + ", k " +
                        detail::sizes_text(ks) + ", v " + detail::sizes_text(vs) + ")");
    };
    if (qs[R - 1] != ks[R - 1]) fail("the last dims of q and k (E) differ");
    if (ks[R - 2] != vs[R - 2]) fail("k and v have different lengths S (dim -2)");
    detail::sdpa_dims d;
    for (std::size_t i = 0; i + 3 < R; ++i) {
      if (qs[i] != ks[i] || ks[i] != vs[i]) fail("the batch dims differ at dim " + std::to_string(i));
      d.batch *= qs[i];
    }
    if constexpr (R >= 3) {
      d.hq = qs[R - 3], d.hkv = ks[R - 3];
      if (ks[R - 3] != vs[R - 3]) fail("k and v have different numbers of heads (dim -3)");
      if (d.hq != d.hkv) {
        if (!enable_gqa)
          fail("q has " + std::to_string(d.hq) + " heads (dim -3) and k " + std::to_string(d.hkv) +
               "; pass enable_gqa = true for grouped-query attention");
        if (d.hkv == 0 || d.hq % d.hkv != 0)
          fail("grouped-query attention needs q's heads (" + std::to_string(d.hq) + ") to be a multiple of k's (" +
               std::to_string(d.hkv) + ")");
      }
    }
    d.L = qs[R - 2], d.E = qs[R - 1], d.S = ks[R - 2], d.Ev = vs[R - 1];
    if constexpr (sizeof...(M) == 1) {
      const auto ms = (m.sizes(), ...);
      constexpr std::size_t RM = rank_of<std::tuple_element_t<0, std::tuple<M...>>>;
      for (std::size_t i = 0; i < RM; ++i) {
        const std::size_t j = R - RM + i;  // the scores' dim it lines up with
        const std::int64_t want = j == R - 1 ? d.S : qs[j];
        if (ms[i] != want && ms[i] != 1)
          throw shape_error("tenet: scaled_dot_product_attention: the attn_mask " + detail::sizes_text(ms) +
                            " does not broadcast to the scores' sizes (q's batch dims, L = " + std::to_string(d.L) +
                            ", S = " + std::to_string(d.S) + ") at dim " + std::to_string(i));
      }
    }
    return d;
  }
  template <class Q, class K, class V, class... M>
  sizes_t<rank_of<Q>> sizes(const Q& q, const K& k, const V& v, const M&... m) const {
    const auto d = dims(q, k, v, m...);
    auto s = q.sizes();
    s[rank_of<Q> - 1] = d.Ev;
    return s;
  }

  /// The math variant: softmax(q kᵀ · scale (+ mask, causal)) v in compute_t (float for 16-bit
  /// inputs), where a row whose keys are all masked out gives 0 (torch's), K and V repeated over
  /// the query heads of a group (enable_gqa), dropout applied to the weights. `ev` marks the
  /// stages: detail::share (lazy, one expression: the reference) or a backend's evaluator
  /// (to_tensor: each stage a tensor, so that no expression type holds the whole computation; as
  /// one expression nvcc's front end did not finish compiling it in ten minutes).
  template <class Ev, class Q, class K, class V, class... M>
  auto math_with(Ev&& ev, const Q& q, const K& k, const V& v, const M&... m) const {
    using T = value_type_of<Q>;
    using C = compute_t<T>;
    constexpr std::size_t R = rank_of<Q>;
    const auto d = dims(q, k, v, m...);
    auto w = weights<C>(ev, q, ev(repeat_heads(detail::cast_to<C>(k), d)), d, m...);
    auto vv = ev(repeat_heads(detail::cast_to<C>(v), d));
    if constexpr (std::is_same_v<std::remove_cvref_t<Ev>, lazy_stage>) {
      return detail::cast_to<T>(make_node(prim::matmul_{}, make_node(prim::mul_{}, w, keep<C>(q, d)), vv));
    } else {
      // staged: dropout's draw only where there is dropout
      const Tensor<C, dyn_shape<R>> attn = dropout_p > 0 ? Tensor<C, dyn_shape<R>>(ev(make_node(prim::mul_{}, w, keep<C>(q, d))))
                                                         : Tensor<C, dyn_shape<R>>(ev(w));
      return detail::cast_to<T>(make_node(prim::matmul_{}, attn, vv));
    }
  }
  /// The math variant as one lazy expression (autograd's JVP differentiates it).
  /// A stage of the lazy form: a shared value (evaluated once where it is read twice).
  struct lazy_stage {
    template <class X>
    auto operator()(const X& x) const {
      return detail::share(x);
    }
  };
  template <class Q, class K, class V, class... M>
  auto math(const Q& q, const K& k, const V& v, const M&... m) const {
    return math_with(lazy_stage{}, q, k, v, m...);
  }
  /// Dropout's factor on each weight: 0 where its draw is < p, else 1 / (1 - p); without dropout
  /// the draw is one value (broadcast, never < 0), so the expression has one type.
  template <class C, class Q>
  auto keep(const Q& q, const detail::sdpa_dims& d) const {
    constexpr std::size_t R = rank_of<Q>;
    prim::uniform_<C, dyn_shape<R>> draw;
    draw.seed = seed, draw.offset = offset, draw.placement = placement;
    for (auto& x : draw.extents) x = 1;
    if (dropout_p > 0) {
      draw.extents = q.sizes();
      draw.extents[R - 1] = d.S;
    }
    return make_node(prim::where_{}, make_node(prim::lt_{}, make_node(draw), scalar<C>{static_cast<C>(dropout_p)}),
                     scalar<C>{C(0)}, scalar<C>{static_cast<C>(dropout_p < 1 ? 1.0 / (1.0 - dropout_p) : 0.0)});
  }
  /// The attention weights softmax(q kᵀ · scale (+ mask, causal)) in C, k already repeated over the
  /// heads of a group; a row whose keys are all masked out is 0. Stages by ev (math_with).
  template <class C, class Ev, class Q, class KK, class... M>
  auto weights(Ev&& ev, const Q& q, const KK& kk, const detail::sdpa_dims& d, const M&... m) const {
    constexpr std::size_t R = rank_of<Q>;
    constexpr double inf = std::numeric_limits<double>::infinity();
    auto kt = make_node(transpose_last<R>(), kk);
    auto scores = make_node(prim::mul_{}, make_node(prim::matmul_{}, detail::cast_to<C>(q), kt), scalar<C>{static_cast<C>(scale)});
    auto masked = ev(apply_mask<C>(ev, scores, d, m...));  // read by amax and exp
    auto mx = ev(detail::reduce<prim::amax_kind, true, -1>(masked));
    auto mx0 = make_node(prim::where_{}, make_node(prim::eq_{}, mx, scalar<C>{static_cast<C>(-inf)}), scalar<C>{C(0)}, mx);
    auto ex = ev(make_node(prim::exp_{}, make_node(prim::sub_{}, masked, mx0)));
    auto total = ev(detail::reduce<prim::sum_kind, true, -1>(ex));
    auto safe = make_node(prim::where_{}, make_node(prim::eq_{}, total, scalar<C>{C(0)}), scalar<C>{C(1)}, total);
    return make_node(prim::div_{}, ex, safe);
  }
  /// The decomposition a backend without an attention kernel runs: the math variant, where the
  /// node allows it (forced to math or automatic with math enabled).
  template <class Q, class K, class V, class... M>
  auto decompose(const Q& q, const K& k, const V& v, const M&... m) const {
    if (!allows(sdpa_backend::math))
      throw value_error("tenet: scaled_dot_product_attention: this device's backend has only the math variant, and " +
                        std::string(Forced::forced ? "another variant was forced" : "math is not enabled (sdpa_kernel)"));
    return math(q, k, v, m...);
  }
  /// The FLOPs of the two products (a causal one does about half).
  template <class E>
  static double kernel_flops(const E& e) {
    const auto d = detail::apply_tuple([&](const auto&... c) { return e.op.dims(c...); }, e.children);
    const double f = 2.0 * static_cast<double>(d.batch * d.hq) * static_cast<double>(d.L) * static_cast<double>(d.S) *
                     static_cast<double>(d.E + d.Ev);
    return e.op.is_causal ? f / 2 : f;
  }
  /// The kernel plan's note (explain): the variant backend B runs and why.
  template <class B, class E>
  static std::string kernel_note(const E& e) {
    return detail::sdpa_note<B>(e);
  }
  const sdpa& attention() const {
    return *this;
  }
  /// The bytes that identify the op (CSE, expr/cse.hpp): every field, the doubles by their bits.
  void append_key(std::string& k) const {
    const auto put = [&](const auto& x) { k.append(reinterpret_cast<const char*>(&x), sizeof(x)); };
    put(scale), put(dropout_p), put(is_causal), put(enable_gqa), put(enabled), put(seed), put(offset);
    put(placement.type), put(placement.index), put(autocast);
  }
  /// Whether the node may run variant b (forced to it, or automatic with b enabled).
  constexpr bool allows(sdpa_backend b) const {
    if constexpr (Forced::forced)
      return b == Forced::value;
    else
      return (enabled >> static_cast<int>(b)) & 1;
  }

  template <std::size_t R>
  static auto transpose_last() {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return prim::permute_<static_cast<std::int64_t>(I)..., static_cast<std::int64_t>(R - 1), static_cast<std::int64_t>(R - 2)>{};
    }(std::make_index_sequence<R - 2>{});
  }
  /// x (..., hq, S, X) summed over the q heads of each group: (..., hkv, S, X) (the VJP of repeat_heads).
  template <class X>
  static auto sum_groups(const X& x, const detail::sdpa_dims& d) {
    constexpr std::size_t R = rank_of<X>;
    if constexpr (R < 3) {
      return x;
    } else {
      const auto xs = x.sizes();
      sizes_t<R + 1> split{};
      for (std::size_t i = 0; i + 3 < R; ++i) split[i] = xs[i];
      split[R - 3] = d.hkv, split[R - 2] = d.hkv == 0 ? 1 : d.hq / d.hkv, split[R - 1] = xs[R - 2], split[R] = xs[R - 1];
      return detail::reduce<prim::sum_kind, false, static_cast<std::int64_t>(R - 2)>(
          make_node(prim::reshape_<dyn_shape<R + 1>>{split}, x));
    }
  }
  /// k or v with each of its hkv heads repeated hq / hkv times (heads h * g ... h * g + g - 1 of q
  /// read head h): (…, hkv, S, X) -> (…, hkv, g, S, X) expanded -> (…, hq, S, X).
  template <class X>
  static auto repeat_heads(const X& x, const detail::sdpa_dims& d) {
    constexpr std::size_t R = rank_of<X>;
    using S = shape_of<X>;
    if constexpr (R < 3) {
      return x;
    } else {
      const auto xs = x.sizes();
      sizes_t<R + 1> split{}, wide{};
      sizes_t<R> merged{};
      for (std::size_t i = 0; i + 2 < R; ++i) split[i] = wide[i] = merged[i] = xs[i];
      split[R - 2] = 1, wide[R - 2] = d.hkv == 0 ? 1 : d.hq / d.hkv;
      for (std::size_t i = R - 2; i < R; ++i) split[i + 1] = wide[i + 1] = merged[i] = xs[i];
      merged[R - 3] = d.hq;
      using S1 = detail::concat_shapes_t<detail::take_extents_t<S, 0, R - 2>, shape<1>, detail::take_extents_t<S, R - 2, R>>;
      using S2 = dyn_shape<R + 1>;
      using S3 = detail::set_extent_t<S, R - 3, dyn>;
      auto e = make_node(prim::expand_<S2>{wide}, make_node(prim::reshape_<S1>{split}, x));
      return make_node(prim::reshape_<S3>{merged}, e);
    }
  }
  /// scores with the mask applied: where(mask, s, -inf) for a bool mask, s + mask for an additive
  /// one, and the causal triangle (key j > query i masked) where is_causal.
  template <class C, class Ev, class Sc, class... M>
  auto apply_mask(Ev&& ev, const Sc& s, const detail::sdpa_dims& d, const M&... m) const {
    constexpr double inf = std::numeric_limits<double>::infinity();
    auto with_mask = [&] {
      if constexpr (sizeof...(M) == 0)
        return s;
      else if constexpr (std::is_same_v<value_type_of<std::tuple_element_t<0, std::tuple<M...>>>, bool>)
        return make_node(prim::where_{}, m..., s, scalar<C>{static_cast<C>(-inf)});
      else
        return make_node(prim::add_{}, s, detail::cast_to<C>(m)...);
    }();
    // key j is kept for query i where j <= i + diagonal: 0 when causal (top-left), S otherwise
    const std::int64_t diagonal = is_causal ? 0 : d.S;
    auto rows = make_node(prim::reshape_<shape<dyn, 1>>{{d.L, 1}}, make_node(prim::iota_<std::int64_t>{d.L, diagonal, 1}));
    auto cols = make_node(prim::reshape_<shape<1, dyn>>{{1, d.S}}, make_node(prim::iota_<std::int64_t>{d.S, 0, 1}));
    // a stage of its own: the index sequences have no device, the evaluator puts them on q's
    auto kept = ev(make_node(prim::le_{}, cols, rows));
    return make_node(prim::where_{}, kept, with_mask, scalar<C>{static_cast<C>(-inf)});
  }
};

/// The backward of scaled_dot_product_attention (prims/attention_rules.hpp): children q, k, v,
/// the forward's output o, its gradient g and the attn_mask if any; the result is dq, dk, dv and,
/// for an additive mask, its gradient (zeros unless mask_grad), flattened one after the other
/// (the VJP takes them apart as views). The CPU runs the tiled backward where it is eligible
/// (no mask gradient); otherwise, and on other backends, the math backward runs in
/// stages (decompose_with, staged as sdpa::math_with):
///   P = weights, Pd = P keep (dropout), dV = Pdᵀ g, dP = (g Vᵀ) keep,
///   dS = P (dP - rowsum(dP P)), dQ = dS K scale, dK = dSᵀ Q scale, dmask = dS summed to the mask
/// with dK and dV summed over the q heads of a group.
template <class Forced = tenet::sdpa::automatic>
struct sdpa_grad {
  static constexpr bool is_prim = false;
  static constexpr std::string_view name = "scaled_dot_product_attention_backward";
  using forced_variant = Forced;
  static constexpr std::size_t mask_child = 5;
  sdpa<Forced> forward;
  bool mask_grad = false;  // an additive mask's gradient is wanted
  // the forward's log-sum-exp of each score row when its kernel kept one (sdpa_lse_buffer): a
  // Tensor<float or double, (rows)> on the forward's device, in that backend's own form; the
  // backward's tiled kernels start from it instead of recomputing it. Not part of the key: it
  // changes no value.
  std::shared_ptr<const void> saved_lse = nullptr;

  const sdpa<Forced>& attention() const {
    return forward;
  }
  void append_key(std::string& k) const {
    forward.append_key(k);
    k.push_back(mask_grad ? 'm' : '-');
  }
  template <class Q, class... C>
  using result_type = value_type_of<Q>;
  template <class Q, class... C>
  using result_shape = shape<dyn>;
  template <class X>
  static std::int64_t count(const X& x) {
    std::int64_t n = 1;
    for (auto s : x.sizes()) n *= s;
    return n;
  }
  template <class... M>
  static constexpr bool additive_mask = sizeof...(M) == 1 && !(std::is_same_v<value_type_of<M>, bool> && ...);
  template <class Q, class K, class V, class O, class G, class... M>
  sizes_t<1> sizes(const Q& q, const K& k, const V& v, const O&, const G&, const M&... m) const {
    std::int64_t n = count(q) + count(k) + count(v);
    if constexpr (additive_mask<M...>) n += (count(m) + ...);
    return {n};
  }
  /// The math backward as one lazy expression (the reference; a mask gradient over broadcast dims
  /// needs the staged form).
  template <class Q, class K, class V, class O, class G, class... M>
  auto decompose(const Q& q, const K& k, const V& v, const O& o, const G& g, const M&... m) const {
    return decompose_with(typename sdpa<Forced>::lazy_stage{}, q, k, v, o, g, m...);
  }
  template <class Ev, class Q, class K, class V, class O, class G, class... M>
  auto decompose_with(Ev&& ev, const Q& q, const K& k, const V& v, const O&, const G& g, const M&... m) const {
    using T = value_type_of<Q>;
    using C = compute_t<T>;
    using F = sdpa<Forced>;
    constexpr std::size_t R = rank_of<Q>;
    const auto d = forward.dims(q, k, v, m...);
    const auto tr = F::template transpose_last<R>();
    auto qc = ev(detail::cast_to<C>(q));
    auto kk = ev(F::repeat_heads(detail::cast_to<C>(k), d));
    auto vv = ev(F::repeat_heads(detail::cast_to<C>(v), d));
    auto gc = ev(detail::cast_to<C>(g));
    auto p = ev(forward.template weights<C>(ev, qc, kk, d, m...));
    const auto sc = scalar<C>{static_cast<C>(forward.scale)};
    const std::int64_t nq = count(q), nk = count(k), nv = count(v);
    std::int64_t n = nq + nk + nv;
    if constexpr (additive_mask<M...>) n += (count(m) + ...);
    auto flat = [&](const auto& x, std::int64_t before, std::int64_t size) {
      return make_node(prim::pad_<1>{{before}, {n - before - size}, {0}, 0.0},
                       make_node(prim::reshape_<shape<dyn>>{{size}}, detail::cast_to<T>(x)));
    };
    // from the dropped weights pd and the gradient dp of the weights before dropout
    auto finish = [&](const auto& pd, const auto& dp) {
      auto dv = F::sum_groups(make_node(prim::matmul_{}, make_node(tr, pd), gc), d);
      auto rowdot = detail::reduce<prim::sum_kind, true, -1>(make_node(prim::mul_{}, dp, p));
      auto ds = ev(make_node(prim::mul_{}, p, make_node(prim::sub_{}, dp, rowdot)));
      auto dq = make_node(prim::mul_{}, make_node(prim::matmul_{}, ds, kk), sc);
      auto dk = F::sum_groups(make_node(prim::mul_{}, make_node(prim::matmul_{}, make_node(tr, ds), qc), sc), d);
      auto qkv = make_node(prim::add_{}, make_node(prim::add_{}, flat(dq, 0, nq), flat(dk, nq, nk)), flat(dv, nq + nk, nv));
      if constexpr (additive_mask<M...>)
        return make_node(prim::add_{}, qkv, flat(mask_gradient(ev, ds, m...), nq + nk + nv, (count(m) + ...)));
      else
        return qkv;
    };
    auto gv = make_node(prim::matmul_{}, gc, make_node(tr, vv));  // the gradient of the dropped weights
    if constexpr (std::is_same_v<std::remove_cvref_t<Ev>, typename F::lazy_stage>) {
      auto keep = ev(forward.template keep<C>(q, d));
      return finish(make_node(prim::mul_{}, p, keep), ev(make_node(prim::mul_{}, gv, keep)));
    } else {
      // staged: dropout's draw only where there is dropout
      using W = Tensor<C, dyn_shape<R>>;
      if (forward.dropout_p > 0) {
        const W keep = ev(forward.template keep<C>(q, d));
        return finish(W(ev(make_node(prim::mul_{}, p, keep))), W(ev(make_node(prim::mul_{}, gv, keep))));
      }
      return finish(W(p), W(ev(gv)));
    }
  }

 private:
  /// ds (batch..., hq, L, S) summed to the mask's sizes: over the dims the mask lacks, then (one by
  /// one, staged only) over those where the mask has 1; zeros when no gradient is wanted.
  template <class Ev, class DS, class Mk>
  auto mask_gradient(Ev&& ev, const DS& ds, const Mk& mask) const {
    using C = value_type_of<DS>;
    constexpr std::size_t R = rank_of<DS>, RM = rank_of<Mk>;
    const auto s = ds.sizes();
    const auto ms = mask.sizes();
    sizes_t<RM + 1> folded{};
    folded[0] = 1;
    for (std::size_t i = 0; i < R - RM; ++i) folded[0] *= s[i];
    for (std::size_t i = 0; i < RM; ++i) folded[i + 1] = s[R - RM + i];
    auto lead = detail::reduce<prim::sum_kind, false, 0>(make_node(prim::reshape_<dyn_shape<RM + 1>>{folded}, ds));
    auto zero_unless_wanted = [&](const auto& x) {
      return make_node(prim::mul_{}, x, scalar<C>{mask_grad ? C(1) : C(0)});
    };
    bool broadcast = false;
    for (std::size_t i = 0; i < RM; ++i) broadcast = broadcast || (ms[i] == 1 && folded[i + 1] != 1);
    if constexpr (std::is_same_v<std::remove_cvref_t<Ev>, typename sdpa<Forced>::lazy_stage>) {
      if (broadcast && mask_grad)
        throw value_error("tenet: scaled_dot_product_attention: the lazy math backward cannot give the gradient of "
                          "an attn_mask broadcast over a dim of size 1");
      return zero_unless_wanted(lead);
    } else {
      Tensor<C, dyn_shape<RM>> x = ev(lead);
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((ms[I] == 1 && x.sizes()[I] != 1 ? (void)(x = ev(detail::reduce<prim::sum_kind, true, static_cast<std::int64_t>(I)>(x))) : (void)0), ...);
      }(std::make_index_sequence<RM>{});
      return ev(zero_unless_wanted(x));
    }
  }
};
}  // namespace aten

namespace detail {
/// The variants backend B has a kernel of its own for, for inputs of type T (bit b: sdpa_backend
/// b). Math is the decomposition, which every backend runs; the CPU adds flash and
/// memory_efficient (backend/cpu/backend.hpp).
template <class B, class T>
inline constexpr std::uint8_t sdpa_kernels = 1u << static_cast<int>(sdpa_backend::math);

/// Whether backend B honours an attention node's recorded autocast dtype (aten::sdpa::autocast):
/// CUDA does (backend/cuda/native.hpp); elsewhere autocast does not apply (torch.autocast("cuda")
/// leaves CPU ops alone).
template <class B>
inline constexpr bool backend_autocasts = false;

/// A backend's run-time limits on its own attention kernels (head dims, the device's capability):
/// why node e is outside them, or empty. Specialised by a backend that has limits
/// (backend/cuda/native.hpp).
template <class B>
struct sdpa_kernel_limits {
  template <class E>
  static std::string check(const E&) {
    return {};
  }
};

/// The forward's per-row log-sum-exp, kept for the backward (FlashAttention's saved statistic).
/// A tiled forward kernel that runs inside a CSE session (autograd's recorded forward, a compiled
/// training step: the sessions whose table the backward reads) asks sdpa_lse_buffer for a buffer
/// and writes each score row's log-sum-exp into it; the buffer is kept in the session's table under
/// the node's key plus a suffix, so the VJP finds it exactly where it finds the node's saved output
/// (prims/attention_rules.hpp). Outside a session, or for a node that cannot be keyed: null, and
/// the backward recomputes the statistic. A is the kernel's accumulation type; the values' form
/// (natural or base-2 log, the mark of a row with no key) is the backend's own.
template <class E>
std::optional<std::string> sdpa_lse_key(const E& e) {
  auto k = cse_key(e);
  if (k) k->append("\0sdpa.lse", 9);
  return k;
}
/// Whether the forward keeps it (the tests turn this off to run the backward that recomputes it).
inline bool sdpa_keep_lse = true;
template <class A, class E>
A* sdpa_lse_buffer(const E& e, std::int64_t rows, device where) {
  cse_session* s = cse_session::current();
  if (!s || !sdpa_keep_lse) return nullptr;
  auto key = sdpa_lse_key(e);
  if (!key) return nullptr;
  auto t = std::make_shared<Tensor<A, dyn_shape<1>>>(sizes_t<1>{rows}, where);
  A* p = t->data();
  s->table.insert_or_assign(std::move(*key), std::move(t));
  return p;
}
/// The saved log-sum-exp of op (a backward's) when it fits: rows values of A on `where`; else null.
/// Counts its uses (sdpa_lse_reads) for the tests.
inline std::atomic<std::int64_t>& sdpa_lse_reads() {
  static std::atomic<std::int64_t> n{0};
  return n;
}
template <class A, class Op>
const A* sdpa_saved_lse(const Op& op, std::int64_t rows, device where) {
  if (!op.saved_lse) return nullptr;
  const auto& t = *static_cast<const Tensor<A, dyn_shape<1>>*>(op.saved_lse.get());
  if (t.numel() != rows || t.device() != where) return nullptr;
  ++sdpa_lse_reads();
  return t.data();
}

template <class E>
constexpr attn_mask_kind sdpa_mask_kind_of() {
  using Ch = std::remove_cvref_t<decltype(std::declval<const E&>().children)>;
  constexpr std::size_t I = E::op_type::mask_child;
  if constexpr (std::tuple_size_v<Ch> == I + 1)
    return std::is_same_v<value_type_of<std::tuple_element_t<I, Ch>>, bool> ? attn_mask_kind::boolean
                                                                              : attn_mask_kind::additive;
  else
    return attn_mask_kind::none;
}
template <class E>
inline constexpr attn_mask_kind sdpa_mask_kind = sdpa_mask_kind_of<E>();

/// Why variant b cannot run the attention node e on backend B with inputs of type T (e's own, or
/// the autocast dtype); empty when it can.
template <class B, class T, class E>
std::string sdpa_ineligible(sdpa_backend b, const E& e) {
  using Op = typename E::op_type;
  const auto& op = e.op.attention();  // the forward's op (of a backward node too)
  // an additive mask's gradient: only the math backward gives it, whatever the enabled set
  if constexpr (requires { e.op.mask_grad; })
    if (e.op.mask_grad)
      return b == sdpa_backend::math ? std::string() : "the attn_mask's gradient is wanted (only the math backward gives it)";
  if (!op.allows(b)) return Op::forced_variant::forced ? "another variant is forced" : "not enabled (sdpa_kernel)";
  if (!((sdpa_kernels<B, T> >> static_cast<int>(b)) & 1))
    return "the " + std::string(B::name()) + " backend has no kernel for " + name(dtype_of<T>) + " inputs";
  if (b == sdpa_backend::math) return {};
  if (b == sdpa_backend::flash && sdpa_mask_kind<E> != attn_mask_kind::none)
    return "an attn_mask is given (flash takes is_causal only)";
  return sdpa_kernel_limits<B>::check(e);
}

/// The variant that runs node e on backend B: the first eligible of flash, memory_efficient,
/// math; `why` gives the reasons the ones before it were passed over. Throws value_error listing
/// every variant's reason when none can run.
struct sdpa_choice {
  sdpa_backend variant = sdpa_backend::math;
  std::string why;
};
/// The type node e's attention runs in on backend B: e's value type, or the autocast dtype it was
/// written under (float32 inputs, a backend that autocasts). Calls f.template operator()<T>().
template <class B, class E, class F>
decltype(auto) with_sdpa_compute_type(const E& e, F&& f) {
  if constexpr (std::is_same_v<value_type_of<E>, float> && backend_autocasts<B>) {
    const dtype a = e.op.attention().autocast;
    if (a == dtype::bfloat16) return f.template operator()<bfloat16>();
    if (a == dtype::float16) return f.template operator()<float16>();
  }
  return f.template operator()<value_type_of<E>>();
}
template <class B, class E>
sdpa_choice select_sdpa(const E& e) {
  return with_sdpa_compute_type<B>(e, [&]<class T>() { return select_sdpa_as<B, T>(e); });
}
template <class B, class T, class E>
sdpa_choice select_sdpa_as(const E& e) {
  sdpa_choice c;
  for (int i = 0; i < sdpa_backend_count; ++i) {
    const auto b = static_cast<sdpa_backend>(i);
    const std::string r = sdpa_ineligible<B, T>(b, e);
    if (r.empty()) {
      c.variant = b;
      return c;
    }
    c.why += (c.why.empty() ? "" : "; ") + std::string(sdpa_backend_name(b)) + ": " + r;
  }
  throw value_error("tenet: scaled_dot_product_attention: no variant can run these arguments on " +
                    std::string(B::name()) + " (" + c.why + ")");
}
template <class B, class E>
std::string sdpa_note(const E& e) {
  const sdpa_choice c = select_sdpa<B>(e);
  std::string s = "variant: " + std::string(sdpa_backend_name(c.variant));
  with_sdpa_compute_type<B>(e, [&]<class T>() {
    if constexpr (!std::is_same_v<T, value_type_of<E>>) s += " in " + std::string(name(dtype_of<T>)) + " (autocast)";
  });
  if (!c.why.empty()) s += " (passed over: " + c.why + ")";
  return s;
}
}  // namespace detail
}  // namespace tenet
