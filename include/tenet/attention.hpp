#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// scaled_dot_product_attention (torch.nn.functional.scaled_dot_product_attention) and the
// switch between its kernels (torch.nn.attention.sdpa_kernel):
//
//   auto y = scaled_dot_product_attention(q, k, v, {.is_causal = true});
//   auto y = scaled_dot_product_attention(q, k, v, mask);                   // bool or additive
//   auto y = scaled_dot_product_attention<sdpa::flash>(q, k, v);            // this variant only
//   { sdpa_kernel only({sdpa_backend::math}); Tensor y = scaled_dot_product_attention(q, k, v); }
//
// q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev). The variants are flash (tiled with
// an online softmax; no attn_mask), memory_efficient (tiled, any mask) and math (the
// decomposition into prims, the reference); the fastest eligible one that is enabled runs, and
// explain() names it. docs/attention.md has the rules and the figures.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include <tenet/autocast.hpp>
#include <tenet/error.hpp>
#include <tenet/tensor.hpp>

#include <tenet/backend/evaluate.hpp>
#include <tenet/decomp/attention.hpp>
#include <tenet/prims/attention_rules.hpp>
#include <tenet/runtime/philox.hpp>

namespace tenet {

/// scaled_dot_product_attention's arguments after q, k, v and the mask (torch's keywords).
struct sdpa_options {
  bool is_causal = false;        // key j is masked out for query i when j > i (top-left triangle)
  std::optional<double> scale = std::nullopt;  // the scores' factor; 1 / sqrt(E) when not given
  double dropout_p = 0.0;        // each attention weight zeroed with this probability (Philox)
  bool enable_gqa = false;       // q's heads (dim -3) a multiple of k's and v's: grouped-query attention
};

/// The variants scaled_dot_product_attention may choose from on this thread while this lives
/// (torch.nn.attention.sdpa_kernel); an attention expression keeps the set of when it was written.
class sdpa_kernel {
 public:
  sdpa_kernel(std::initializer_list<sdpa_backend> enabled) : previous_(detail::sdpa_enabled_mask()) {
    std::uint8_t m = 0;
    for (auto b : enabled) m |= static_cast<std::uint8_t>(1u << static_cast<int>(b));
    detail::sdpa_enabled_mask() = m;
  }
  ~sdpa_kernel() { detail::sdpa_enabled_mask() = previous_; }
  sdpa_kernel(const sdpa_kernel&) = delete;
  sdpa_kernel& operator=(const sdpa_kernel&) = delete;

 private:
  std::uint8_t previous_;
};

namespace detail {
template <class Variant, class Q, class K, class V, class... M>
auto make_sdpa(const Q& q, const K& k, const V& v, const sdpa_options& o, const M&... m) {
  using T = value_type_of<Q>;
  static_assert(is_floating_v<T>, "tenet: scaled_dot_product_attention needs floating q, k and v");
  static_assert(std::is_same_v<value_type_of<K>, T> && std::is_same_v<value_type_of<V>, T>,
                "tenet: scaled_dot_product_attention needs q, k and v of one dtype");
  static_assert(((std::is_same_v<value_type_of<M>, bool> || is_floating_v<value_type_of<M>>) && ...),
                "tenet: scaled_dot_product_attention: attn_mask must be bool (true: attend) or floating (added)");
  static_assert(check_sdpa_shapes<Q, K, V, M...>());
  if constexpr (std::is_same_v<Variant, sdpa::flash> && sizeof...(M) > 0)
    (void)sizeof(compile_error::sdpa_variant_ineligible<Variant, compile_error::flash_takes_no_attn_mask>);
  if (!(o.dropout_p >= 0.0 && o.dropout_p <= 1.0))
    throw value_error("tenet: scaled_dot_product_attention: dropout_p must be in [0, 1], got " + std::to_string(o.dropout_p));
  if (o.is_causal && sizeof...(M) > 0)
    throw value_error("tenet: scaled_dot_product_attention: pass either an attn_mask or is_causal = true, not both (as torch)");
  aten::sdpa<Variant> op;
  const auto qs = q.sizes();
  const std::int64_t E = qs[rank_of<Q> - 1];
  op.scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(E));
  op.is_causal = o.is_causal;
  op.enable_gqa = o.enable_gqa;
  op.dropout_p = o.dropout_p;
  op.enabled = sdpa_enabled_mask();
  op.placement = expr_device(q);  // where dropout's draw and the causal mask are made
  // under CUDA autocast, float32 attention on a CUDA device runs in the autocast dtype (as torch's)
  if constexpr (std::is_same_v<T, float>)
    if (op.placement.type == device_type::cuda && is_autocast_enabled(device_type::cuda))
      op.autocast = get_autocast_dtype(device_type::cuda);
  auto n = make_node(op, q, k, v, m...);
  const auto d = n.op.dims(q, k, v, m...);  // shape errors now, with the sizes in the message
  if (o.dropout_p > 0) {
    std::int64_t scores = d.L * d.S;
    for (std::size_t i = 0; i + 2 < rank_of<Q>; ++i) scores *= qs[i];
    const auto draw = default_generator().reserve(scores);
    n.op.seed = draw.seed, n.op.offset = draw.offset;
  }
  return n;
}
}  // namespace detail

/// softmax(q kᵀ · scale + mask) v over q (..., L, E), k (..., S, E), v (..., S, Ev): (..., L, Ev).
/// Variant: sdpa::automatic (the fastest eligible of those enabled), or sdpa::flash,
/// sdpa::memory_efficient, sdpa::math to run that one (an error where it cannot).
template <class Variant = sdpa::automatic, Expression Q, Expression K, Expression V>
auto scaled_dot_product_attention(const Q& q, const K& k, const V& v, const sdpa_options& o = {}) {
  return detail::make_sdpa<Variant>(q, k, v, o);
}
/// The same with attn_mask, broadcast to (..., L, S): bool (true: attend) or floating (added).
template <class Variant = sdpa::automatic, Expression Q, Expression K, Expression V, Expression M>
auto scaled_dot_product_attention(const Q& q, const K& k, const V& v, const M& attn_mask, const sdpa_options& o = {}) {
  return detail::make_sdpa<Variant>(q, k, v, o, attn_mask);
}

}  // namespace tenet
