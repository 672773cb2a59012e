#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// nn::MultiheadAttention and the Transformer modules (torch.nn.MultiheadAttention,
// TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder, TransformerDecoder,
// Transformer), with PyTorch's parameter names, so that a PyTorch state_dict loads by name.
//
//   nn::MultiheadAttention<512, 8> mha({.batch_first = true});
//   auto [out, w, w_heads] = mha(q, k, v, {.key_padding_mask = pad});        // w: (N, L, S)
//   nn::TransformerEncoderLayer<512, 8, 2048> layer({.dropout = 0.1, .batch_first = true});
//   auto y = layer(x, {.src_key_padding_mask = pad});
//
// Widths (embed_dim, num_heads, kdim, vdim, dim_feedforward) are template arguments; batch and
// sequence lengths are run-time sizes. Masks follow torch.nn (not scaled_dot_product_attention):
// a bool mask is true where a position is *not* attended, a floating mask is added to the scores.
// Without need_weights the attention runs through scaled_dot_product_attention (its flash or
// memory-efficient kernels); with it, through the explicit softmax whose weights are returned.
// docs/nn.md has the details and the differences from torch.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <tenet/attention.hpp>
#include <tenet/join.hpp>
#include <tenet/nn_functional.hpp>
#include <tenet/nn/container.hpp>
#include <tenet/nn/init.hpp>
#include <tenet/nn/linear.hpp>  // Dropout
#include <tenet/nn/module.hpp>

namespace tenet::nn {

/// A mask argument of the attention modules: a bool tensor (true: not attended) or a T tensor
/// (added to the scores), of rank 1 to 3, kept as an additive T tensor of rank 3 (leading 1s).
template <class T>
class attention_mask {
 public:
  attention_mask() = default;
  template <class U, class S>
  attention_mask(const Tensor<U, S>& m) {  // NOLINT: implicit, as torch takes any mask tensor
    static_assert(std::is_same_v<U, bool> || std::is_same_v<U, T>,
                  "tenet: an attention mask is bool (true: not attended) or of the attention's dtype (added)");
    static_assert(S::rank >= 1 && S::rank <= 3, "tenet: an attention mask has rank 1, 2 or 3");
    if (!m.defined()) return;
    rank_ = S::rank;
    from_bool_ = std::is_same_v<U, bool>;
    const auto s = m.sizes();
    std::int64_t d[3] = {1, 1, 1};
    for (std::size_t i = 0; i < S::rank; ++i) d[3 - S::rank + i] = s[i];
    if constexpr (std::is_same_v<U, bool>) {
      const T ninf = static_cast<T>(-std::numeric_limits<float>::infinity());
      const Tensor<T, shape_of<Tensor<U, S>>> f = masked_fill(zeros_like(m.template to<T>()), m, ninf);
      additive_ = f.template reshape<dyn, dyn, dyn>(d[0], d[1], d[2]);
    } else {
      additive_ = m.template reshape<dyn, dyn, dyn>(d[0], d[1], d[2]);
    }
  }
  bool defined() const { return rank_ != 0; }
  std::size_t rank() const { return rank_; }
  /// Given as a bool mask.
  bool from_bool() const { return from_bool_; }
  /// The mask's sizes as given (rank() of them).
  std::vector<std::int64_t> sizes() const {
    std::vector<std::int64_t> s;
    for (std::size_t i = 3 - rank_; i < 3; ++i) s.push_back(additive_.size(static_cast<std::int64_t>(i)));
    return s;
  }
  const Tensor<T, shape<dyn, dyn, dyn>>& additive() const { return additive_; }

 private:
  std::size_t rank_ = 0;
  bool from_bool_ = false;
  Tensor<T, shape<dyn, dyn, dyn>> additive_;
};

/// MultiheadAttention's constructor options after embed_dim, num_heads, kdim and vdim (torch's keywords).
struct multihead_attention_options {
  double dropout = 0.0;     // on the attention weights, in training mode
  bool bias = true;         // in_proj_bias and out_proj.bias
  bool add_bias_kv = false; // bias_k and bias_v appended to the keys and values
  bool add_zero_attn = false;  // a zero key and value appended after the projections
  bool batch_first = false; // inputs (N, L, E) instead of (L, N, E)
};

/// MultiheadAttention's forward arguments after query, key and value (torch's keywords).
template <class T = float>
struct attention_args {
  attention_mask<T> key_padding_mask{};  // (N, S), or (S) unbatched
  bool need_weights = true;              // return the attention weights (computes them explicitly)
  attention_mask<T> attn_mask{};         // (L, S) or (N * num_heads, L, S)
  bool average_attn_weights = true;      // the weights averaged over the heads, else per head
  bool is_causal = false;                // a hint that attn_mask is the causal mask (attn_mask needed)
};

/// MultiheadAttention's result: the output, and the weights when need_weights was set
/// (`weights` averaged over the heads, (N, L, S); or `head_weights`, (N, H, L, S); rank one less
/// unbatched). The other weights tensor is undefined.
template <class T, class OutS, std::size_t R>
struct attention_output {
  Tensor<T, OutS> output;
  Tensor<T, dyn_shape<R>> weights;
  Tensor<T, dyn_shape<R + 1>> head_weights;
};

namespace detail {
/// A linear layer whose bias is a run-time choice (torch's `bias=` keyword): weight [Out, In], bias [Out].
template <int In, int Out, class T>
class linear_layer : public Module {
 public:
  Tensor<T, shape<Out, In>> weight{{Out, In}};
  Tensor<T, shape<Out>> bias;
  /// The printed name: "Linear", or torch's "NonDynamicallyQuantizableLinear" for MultiheadAttention's out_proj.
  const char* printed_name = "Linear";
  explicit linear_layer(bool with_bias = true) {
    register_parameter("weight", &linear_layer::weight);
    if (with_bias) {
      bias = Tensor<T, shape<Out>>({Out});
      register_parameter("bias", &linear_layer::bias);
    }
    init::kaiming_uniform_(weight, std::sqrt(5.0));  // torch.nn.Linear's reset_parameters
    if (with_bias) {
      const double bound = In > 0 ? 1.0 / std::sqrt(static_cast<double>(In)) : 0.0;
      init::uniform_(bias, -bound, bound);
    }
  }
  template <Expression X>
  auto operator()(const X& x) const {
    using Y = Tensor<T, shape_of<decltype(linear(x, weight))>>;
    if (bias.defined()) return Y(linear(x, weight) + bias);
    return Y(linear(x, weight));
  }
  std::string type_name() const override { return printed_name; }
  std::string extra_repr() const override {
    return "in_features=" + std::to_string(In) + ", out_features=" + std::to_string(Out) +
           ", bias=" + py_bool(bias.defined());
  }
};

/// LayerNorm over the last dim whose bias is a run-time choice (torch.nn.LayerNorm(bias=)).
template <int N, class T>
class layer_norm_layer : public Module {
 public:
  double eps;
  Tensor<T, shape<N>> weight{{N}}, bias{{N}};
  bool has_bias;
  explicit layer_norm_layer(double epsilon = 1e-5, bool with_bias = true) : eps(epsilon), has_bias(with_bias) {
    register_parameter("weight", &layer_norm_layer::weight);
    if (with_bias) register_parameter("bias", &layer_norm_layer::bias);
    init::ones_(weight);
    init::zeros_(bias);  // stays zero (and unregistered) without a bias
  }
  template <Expression X>
  auto operator()(const X& x) const {
    return layer_norm(x, weight, bias, eps);
  }
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override {
    return "(" + std::to_string(N) + ",), eps=" + py_float(eps) +
           ", elementwise_affine=True, bias=" + py_bool(has_bias);
  }
};

/// Zeros of sizes s on device d.
template <class T, class S>
Tensor<T, S> zeros_on(const sizes_t<S::rank>& s, tenet::device d) {
  Tensor<T, S> z(s, d);
  z.zero_();
  return z;
}

template <class T, std::size_t R, int C>
using seq_t = std::conditional_t<R == 3, Tensor<T, shape<dyn, dyn, C>>, Tensor<T, shape<dyn, C>>>;

/// x (rank 2 or 3, last dim C) as a rank-3 tensor in batch-first order: (N, L, C).
template <class T, int C, Expression X>
Tensor<T, shape<dyn, dyn, C>> batch_first_view(const X& x, bool batch_first, const char* what) {
  constexpr std::size_t R = rank_of<X>;
  static_assert(R == 2 || R == 3, "tenet: nn::MultiheadAttention takes (L, E) unbatched or (L, N, E) / (N, L, E) inputs");
  static_assert(std::is_same_v<value_type_of<X>, T>, "tenet: nn::MultiheadAttention: the inputs must have the module's dtype");
  if (x.sizes()[R - 1] != C)
    throw shape_error(std::string("tenet: nn::MultiheadAttention: the ") + what + "'s last dim is " +
                      std::to_string(x.sizes()[R - 1]) + ", expected " + std::to_string(C));
  if constexpr (R == 2) {
    const Tensor<T, shape<dyn, C>> t = x;
    return t.template unsqueeze<0>();
  } else {
    const Tensor<T, shape<dyn, dyn, C>> t = x;
    return batch_first ? t : t.template transpose<0, 1>();
  }
}
}  // namespace detail

/// torch.nn.MultiheadAttention: EmbedDim split over NumHeads heads; keys of KDim and values of VDim
/// features (in_proj_weight [3E, E] when both are EmbedDim, else q_proj_weight, k_proj_weight,
/// v_proj_weight), out_proj [E, E]. Init as torch: xavier_uniform_ projections, zero biases,
/// xavier_normal_ bias_k / bias_v.
template <int EmbedDim, int NumHeads, int KDim = EmbedDim, int VDim = EmbedDim, class T = float>
class MultiheadAttention : public Module {
  static_assert(EmbedDim > 0 && NumHeads > 0, "tenet: nn::MultiheadAttention needs embed_dim > 0 and num_heads > 0");
  static_assert(EmbedDim % NumHeads == 0, "tenet: nn::MultiheadAttention: embed_dim must be divisible by num_heads");
  static_assert(is_floating_v<T>, "tenet: nn::MultiheadAttention needs a floating dtype");
  static constexpr bool same_dims = KDim == EmbedDim && VDim == EmbedDim;

 public:
  static constexpr int embed_dim = EmbedDim, num_heads = NumHeads, head_dim = EmbedDim / NumHeads;
  static constexpr int kdim = KDim, vdim = VDim;
  multihead_attention_options options;
  Tensor<T, shape<3 * EmbedDim, EmbedDim>> in_proj_weight;  // same_dims
  Tensor<T, shape<EmbedDim, EmbedDim>> q_proj_weight;       // !same_dims
  Tensor<T, shape<EmbedDim, KDim>> k_proj_weight;
  Tensor<T, shape<EmbedDim, VDim>> v_proj_weight;
  Tensor<T, shape<3 * EmbedDim>> in_proj_bias;
  Tensor<T, shape<1, 1, EmbedDim>> bias_k, bias_v;
  detail::linear_layer<EmbedDim, EmbedDim, T> out_proj;

  explicit MultiheadAttention(const multihead_attention_options& o = {}) : options(o), out_proj(o.bias) {
    if (!(o.dropout >= 0.0 && o.dropout <= 1.0))
      throw value_error("tenet: nn::MultiheadAttention: dropout probability has to be between 0 and 1, but got " +
                        std::to_string(o.dropout));
    if constexpr (same_dims) {
      in_proj_weight = decltype(in_proj_weight)({3 * EmbedDim, EmbedDim});
      register_parameter("in_proj_weight", &MultiheadAttention::in_proj_weight);
    } else {
      q_proj_weight = decltype(q_proj_weight)({EmbedDim, EmbedDim});
      k_proj_weight = decltype(k_proj_weight)({EmbedDim, KDim});
      v_proj_weight = decltype(v_proj_weight)({EmbedDim, VDim});
      register_parameter("q_proj_weight", &MultiheadAttention::q_proj_weight);
      register_parameter("k_proj_weight", &MultiheadAttention::k_proj_weight);
      register_parameter("v_proj_weight", &MultiheadAttention::v_proj_weight);
    }
    if (o.bias) {
      in_proj_bias = decltype(in_proj_bias)({3 * EmbedDim});
      register_parameter("in_proj_bias", &MultiheadAttention::in_proj_bias);
    }
    if (o.add_bias_kv) {
      bias_k = decltype(bias_k)({1, 1, EmbedDim});
      bias_v = decltype(bias_v)({1, 1, EmbedDim});
      register_parameter("bias_k", &MultiheadAttention::bias_k);
      register_parameter("bias_v", &MultiheadAttention::bias_v);
    }
    out_proj.printed_name = "NonDynamicallyQuantizableLinear";  // torch's class for out_proj
    register_module("out_proj", &MultiheadAttention::out_proj);
    reset_parameters();
  }
  /// torch's MultiheadAttention prints no options, only out_proj.
  std::string type_name() const override { return "MultiheadAttention"; }

  void reset_parameters() {
    if constexpr (same_dims) {
      init::xavier_uniform_(in_proj_weight);
    } else {
      init::xavier_uniform_(q_proj_weight);
      init::xavier_uniform_(k_proj_weight);
      init::xavier_uniform_(v_proj_weight);
    }
    if (options.bias) {
      init::zeros_(in_proj_bias);
      init::zeros_(out_proj.bias);
    }
    if (options.add_bias_kv) {
      init::xavier_normal_(bias_k);
      init::xavier_normal_(bias_v);
    }
  }

  /// Attention of query (L, E) / (L, N, E) / (N, L, E) over key (S, KDim ...) and value (S, VDim ...).
  template <Expression Q, Expression K, Expression V>
  auto operator()(const Q& query, const K& key, const V& value, const attention_args<T>& a = {}) const {
    constexpr std::size_t R = rank_of<Q>;
    static_assert(rank_of<K> == R && rank_of<V> == R,
                  "tenet: nn::MultiheadAttention: query, key and value must all be batched (rank 3) or all unbatched (rank 2)");
    const bool bf = options.batch_first;
    auto r = attend(detail::batch_first_view<T, EmbedDim>(query, bf, "query"),
                    detail::batch_first_view<T, KDim>(key, bf, "key"),
                    detail::batch_first_view<T, VDim>(value, bf, "value"), a, R == 2);
    attention_output<T, typename detail::seq_t<T, R, EmbedDim>::shape_type, R> out;
    if constexpr (R == 2) {
      out.output = r.output.template select<0>(0);  // the batch of one
      if (r.weights.defined()) out.weights = r.weights.template select<0>(0);
      if (r.head_weights.defined()) out.head_weights = r.head_weights.template select<0>(0);
    } else {
      out.output = bf ? r.output : r.output.template transpose<0, 1>();
      out.weights = r.weights;
      out.head_weights = r.head_weights;
    }
    return out;
  }

 private:
  using t3 = Tensor<T, shape<dyn, dyn, dyn>>;
  using t4 = Tensor<T, shape<dyn, dyn, dyn, dyn>>;

  /// (N, 1 or H, L, S0) additive mask from attn_mask and key_padding_mask (undefined when neither).
  t4 merged_mask(const attention_args<T>& a, std::int64_t N, std::int64_t L, std::int64_t S0, bool unbatched) const {
    t4 m;
    if (a.attn_mask.defined()) {
      const auto s = a.attn_mask.sizes();
      const auto& am = a.attn_mask.additive();
      if (a.attn_mask.rank() == 2) {
        if (s[0] != L || s[1] != S0)
          throw shape_error("tenet: nn::MultiheadAttention: the shape of the 2D attn_mask is " + tenet::detail::sizes_text(s) +
                            ", but should be (" + std::to_string(L) + ", " + std::to_string(S0) + ")");
        m = am.template reshape<dyn, dyn, dyn, dyn>(1, 1, L, S0);
      } else if (a.attn_mask.rank() == 3) {
        if (s[0] != N * NumHeads || s[1] != L || s[2] != S0)
          throw shape_error("tenet: nn::MultiheadAttention: the shape of the 3D attn_mask is " + tenet::detail::sizes_text(s) +
                            ", but should be (" + std::to_string(N * NumHeads) + ", " + std::to_string(L) + ", " +
                            std::to_string(S0) + ")");
        m = am.template reshape<dyn, dyn, dyn, dyn>(N, NumHeads, L, S0);
      } else {
        throw shape_error("tenet: nn::MultiheadAttention: attn_mask's dimension " + std::to_string(a.attn_mask.rank()) +
                          " is not supported (2 or 3)");
      }
    }
    if (a.key_padding_mask.defined()) {
      const auto s = a.key_padding_mask.sizes();
      const bool ok = unbatched ? (s.size() == 1 && s[0] == S0) : (s.size() == 2 && s[0] == N && s[1] == S0);
      if (!ok)
        throw shape_error("tenet: nn::MultiheadAttention: key_padding_mask has sizes " + tenet::detail::sizes_text(s) +
                          ", expected " + (unbatched ? "(" + std::to_string(S0) + ")" :
                          "(" + std::to_string(N) + ", " + std::to_string(S0) + ")"));
      t4 k = a.key_padding_mask.additive().template reshape<dyn, dyn, dyn, dyn>(N, 1, 1, S0);
      m = m.defined() ? t4(m + k) : k;
    }
    return m;
  }
  /// m with a zero column appended to its last dim (a key that every query may attend).
  static t4 pad_key(const t4& m) {
    if (!m.defined()) return m;
    return cat<3>(m, detail::zeros_on<T, shape<dyn, dyn, dyn, dyn>>({m.size(0), m.size(1), m.size(2), 1}, m.device()));
  }

  using bf_q = Tensor<T, shape<dyn, dyn, EmbedDim>>;
  attention_output<T, shape<dyn, dyn, EmbedDim>, 3> attend(const bf_q& q, const Tensor<T, shape<dyn, dyn, KDim>>& k,
                                                           const Tensor<T, shape<dyn, dyn, VDim>>& v,
                                                           const attention_args<T>& a, bool unbatched) const {
    constexpr int E = EmbedDim, H = NumHeads, D = head_dim;
    const std::int64_t N = q.size(0), L = q.size(1), S0 = k.size(1);
    if (k.size(0) != N || v.size(0) != N)
      throw shape_error("tenet: nn::MultiheadAttention: the batch sizes of query (" + std::to_string(N) + "), key (" +
                        std::to_string(k.size(0)) + ") and value (" + std::to_string(v.size(0)) + ") differ");
    if (v.size(1) != S0)
      throw shape_error("tenet: nn::MultiheadAttention: key and value have different sequence lengths (" +
                        std::to_string(S0) + " and " + std::to_string(v.size(1)) + ")");
    if (a.is_causal && !a.attn_mask.defined())
      throw value_error("tenet: nn::MultiheadAttention: is_causal is a hint that attn_mask is the causal mask; "
                        "pass attn_mask too (as torch)");
    // input projections
    bf_q qp, kp, vp;
    auto project = [&](const auto& x, const auto& w, int part) -> bf_q {
      if (options.bias) return linear(x, w, in_proj_bias.template narrow<0>(part * E, E));
      return linear(x, w);
    };
    if constexpr (same_dims) {
      qp = project(q, in_proj_weight.template narrow<0>(0, E), 0);
      kp = project(k, in_proj_weight.template narrow<0>(E, E), 1);
      vp = project(v, in_proj_weight.template narrow<0>(2 * E, E), 2);
    } else {
      qp = project(q, q_proj_weight, 0);
      kp = project(k, k_proj_weight, 1);
      vp = project(v, v_proj_weight, 2);
    }
    // torch drops attn_mask for the is_causal hint when nothing else needs the mask
    const bool causal = a.is_causal && !a.key_padding_mask.defined() && !a.need_weights;
    t4 mask = causal ? t4() : merged_mask(a, N, L, S0, unbatched);
    if (options.add_bias_kv) {
      kp = cat<1>(kp, bias_k.template expand<dyn, 1, E>(N));
      vp = cat<1>(vp, bias_v.template expand<dyn, 1, E>(N));
      mask = pad_key(mask);
    }
    // heads: (N, H, L, D)
    using heads_t = Tensor<T, shape<dyn, H, dyn, D>>;
    const heads_t qh = qp.template reshape<dyn, dyn, H, D>(N, L).template transpose<1, 2>();
    heads_t kh = kp.template reshape<dyn, dyn, H, D>(N, kp.size(1)).template transpose<1, 2>();
    heads_t vh = vp.template reshape<dyn, dyn, H, D>(N, vp.size(1)).template transpose<1, 2>();
    if (options.add_zero_attn) {
      const auto z = detail::zeros_on<T, shape<dyn, H, 1, D>>({N, H, 1, D}, q.device());
      kh = cat<2>(kh, z);
      vh = cat<2>(vh, z);
      mask = pad_key(mask);
    }
    const double p = training() ? options.dropout : 0.0;
    attention_output<T, shape<dyn, dyn, EmbedDim>, 3> r;
    heads_t y;
    if (a.need_weights) {
      t4 scores = matmul(qh * static_cast<T>(1.0 / std::sqrt(static_cast<double>(D))), kh.template transpose<-2, -1>());
      if (mask.defined()) scores = scores + mask;
      t4 w = softmax<-1>(scores);
      if (p > 0) w = dropout(w, p, true);
      y = matmul(w, vh);
      if (a.average_attn_weights) r.weights = mean<1>(w);
      else r.head_weights = w;
    } else if (mask.defined()) {
      y = scaled_dot_product_attention(qh, kh, vh, mask, {.dropout_p = p});
    } else {
      y = scaled_dot_product_attention(qh, kh, vh, {.is_causal = causal, .dropout_p = p});
    }
    r.output = out_proj(y.template transpose<1, 2>().template reshape<dyn, dyn, E>(N, L));
    return r;
  }
};

// ---------------------------------------------------------------------------------------------
// Transformer layers

enum class transformer_activation { relu, gelu };

/// TransformerEncoderLayer's / DecoderLayer's constructor options after d_model, nhead and
/// dim_feedforward (torch's keywords).
struct transformer_layer_options {
  double dropout = 0.1;
  transformer_activation activation = transformer_activation::relu;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  bool bias = true;
};

/// TransformerEncoderLayer's forward arguments after src.
template <class T = float>
struct encoder_layer_args {
  attention_mask<T> src_mask{};
  attention_mask<T> src_key_padding_mask{};
  bool is_causal = false;
};

/// TransformerDecoderLayer's forward arguments after tgt and memory.
template <class T = float>
struct decoder_layer_args {
  attention_mask<T> tgt_mask{};
  attention_mask<T> memory_mask{};
  attention_mask<T> tgt_key_padding_mask{};
  attention_mask<T> memory_key_padding_mask{};
  bool tgt_is_causal = false;
  bool memory_is_causal = false;
};

namespace detail {
/// The feed-forward block, the options and the Dropout modules shared by both layer types (torch's
/// names: `dropout` inside the feed-forward block, `dropout1` after the self-attention, `dropout2`
/// after the encoder's feed-forward block or the decoder's cross-attention). Each Dropout module's
/// p and training mode apply, as torch's; all start at options.dropout.
template <int DModel, int DimFF, class T>
class transformer_ff : public Module {
 public:
  transformer_layer_options options;
  linear_layer<DModel, DimFF, T> linear1;
  linear_layer<DimFF, DModel, T> linear2;
  Dropout dropout, dropout1, dropout2;
  explicit transformer_ff(const transformer_layer_options& o) : options(o), linear1(o.bias), linear2(o.bias) {
    if (!(o.dropout >= 0.0 && o.dropout <= 1.0))
      throw value_error("tenet: nn::Transformer layers: dropout probability has to be between 0 and 1, but got " +
                        std::to_string(o.dropout));
    dropout.p = dropout1.p = dropout2.p = o.dropout;
  }
  /// linear2(dropout(activation(linear1(x)))), then the dropout `after`.
  template <class X>
  X ff(const X& x, const Dropout& after) const {
    auto h = linear1(x);  // (..., DimFF)
    if (options.activation == transformer_activation::relu) h = relu(h);
    else h = gelu(h);
    h = drop(dropout, h);
    return drop(after, X(linear2(h)));
  }
  /// x through the Dropout module d (nothing to do when p is 0 or d is in eval mode).
  template <class X>
  static X drop(const Dropout& d, const X& x) {
    const double p = d.training() ? d.p : 0.0;
    if (p > 0) return tenet::dropout(x, p, true);
    return x;
  }
};
}  // namespace detail

/// torch.nn.TransformerEncoderLayer: self-attention then a feed-forward block, each with a residual
/// connection and a LayerNorm (after, or before with norm_first).
template <int DModel, int NHead, int DimFF = 2048, class T = float>
class TransformerEncoderLayer : public detail::transformer_ff<DModel, DimFF, T> {
  using base = detail::transformer_ff<DModel, DimFF, T>;

 public:
  MultiheadAttention<DModel, NHead, DModel, DModel, T> self_attn;
  detail::layer_norm_layer<DModel, T> norm1, norm2;
  explicit TransformerEncoderLayer(const transformer_layer_options& o = {})
      : base(o), self_attn({.dropout = o.dropout, .bias = o.bias, .batch_first = o.batch_first}),
        norm1(o.layer_norm_eps, o.bias), norm2(o.layer_norm_eps, o.bias) {
    this->register_module("self_attn", &TransformerEncoderLayer::self_attn);  // torch's order (its print and named_modules)
    this->register_module("linear1", &TransformerEncoderLayer::linear1);
    this->register_module("dropout", &TransformerEncoderLayer::dropout);
    this->register_module("linear2", &TransformerEncoderLayer::linear2);
    this->register_module("norm1", &TransformerEncoderLayer::norm1);
    this->register_module("norm2", &TransformerEncoderLayer::norm2);
    this->register_module("dropout1", &TransformerEncoderLayer::dropout1);
    this->register_module("dropout2", &TransformerEncoderLayer::dropout2);
  }
  std::string type_name() const override { return "TransformerEncoderLayer"; }
  /// src: (S, E) unbatched, (S, N, E), or (N, S, E) with batch_first.
  template <Expression X>
  auto operator()(const X& src, const encoder_layer_args<T>& a = {}) const {
    using Y = detail::seq_t<T, rank_of<X>, DModel>;
    Y x = src;
    auto sa = [&](const Y& h) -> Y {
      return this->drop(this->dropout1, Y(self_attn(h, h, h, {.key_padding_mask = a.src_key_padding_mask,
                                                              .need_weights = false, .attn_mask = a.src_mask,
                                                              .is_causal = a.is_causal}).output));
    };
    if (this->options.norm_first) {
      x = x + sa(norm1(x));
      x = x + this->ff(Y(norm2(x)), this->dropout2);
    } else {
      x = norm1(x + sa(x));
      x = norm2(x + this->ff(x, this->dropout2));
    }
    return x;
  }
};

/// torch.nn.TransformerDecoderLayer: self-attention, attention over the memory, then a
/// feed-forward block, each with a residual connection and a LayerNorm.
template <int DModel, int NHead, int DimFF = 2048, class T = float>
class TransformerDecoderLayer : public detail::transformer_ff<DModel, DimFF, T> {
  using base = detail::transformer_ff<DModel, DimFF, T>;

 public:
  MultiheadAttention<DModel, NHead, DModel, DModel, T> self_attn, multihead_attn;
  detail::layer_norm_layer<DModel, T> norm1, norm2, norm3;
  Dropout dropout3;  // after the feed-forward block (dropout1, dropout2: after the attentions)
  explicit TransformerDecoderLayer(const transformer_layer_options& o = {})
      : base(o), self_attn({.dropout = o.dropout, .bias = o.bias, .batch_first = o.batch_first}),
        multihead_attn({.dropout = o.dropout, .bias = o.bias, .batch_first = o.batch_first}),
        norm1(o.layer_norm_eps, o.bias), norm2(o.layer_norm_eps, o.bias), norm3(o.layer_norm_eps, o.bias) {
    dropout3.p = o.dropout;
    this->register_module("self_attn", &TransformerDecoderLayer::self_attn);  // torch's order (its print and named_modules)
    this->register_module("multihead_attn", &TransformerDecoderLayer::multihead_attn);
    this->register_module("linear1", &TransformerDecoderLayer::linear1);
    this->register_module("dropout", &TransformerDecoderLayer::dropout);
    this->register_module("linear2", &TransformerDecoderLayer::linear2);
    this->register_module("norm1", &TransformerDecoderLayer::norm1);
    this->register_module("norm2", &TransformerDecoderLayer::norm2);
    this->register_module("norm3", &TransformerDecoderLayer::norm3);
    this->register_module("dropout1", &TransformerDecoderLayer::dropout1);
    this->register_module("dropout2", &TransformerDecoderLayer::dropout2);
    this->register_module("dropout3", &TransformerDecoderLayer::dropout3);
  }
  std::string type_name() const override { return "TransformerDecoderLayer"; }
  template <Expression X, Expression M>
  auto operator()(const X& tgt, const M& memory, const decoder_layer_args<T>& a = {}) const {
    static_assert(rank_of<X> == rank_of<M>, "tenet: nn::TransformerDecoderLayer: tgt and memory must both be batched or both unbatched");
    using Y = detail::seq_t<T, rank_of<X>, DModel>;
    Y x = tgt;
    const Y mem = memory;
    auto sa = [&](const Y& h) -> Y {
      return this->drop(this->dropout1, Y(self_attn(h, h, h, {.key_padding_mask = a.tgt_key_padding_mask,
                                                              .need_weights = false, .attn_mask = a.tgt_mask,
                                                              .is_causal = a.tgt_is_causal}).output));
    };
    auto ca = [&](const Y& h) -> Y {
      return this->drop(this->dropout2, Y(multihead_attn(h, mem, mem, {.key_padding_mask = a.memory_key_padding_mask,
                                                                        .need_weights = false, .attn_mask = a.memory_mask,
                                                                        .is_causal = a.memory_is_causal}).output));
    };
    if (this->options.norm_first) {
      x = x + sa(norm1(x));
      x = x + ca(norm2(x));
      x = x + this->ff(Y(norm3(x)), dropout3);
    } else {
      x = norm1(x + sa(x));
      x = norm2(x + ca(x));
      x = norm3(x + this->ff(x, dropout3));
    }
    return x;
  }
};

namespace detail {
/// Copies the parameters of list[0] into every other layer: torch's TransformerEncoder/Decoder clone
/// the layer they are given, so their layers start equal.
template <class L>
void clone_first(ModuleList<L>& list) {
  if (list.size() < 2) return;
  const tensor_dict first = list[0].state_dict();
  for (std::size_t i = 1; i < list.size(); ++i) list[static_cast<std::int64_t>(i)].load_state_dict(first);
}
}  // namespace detail

/// torch.nn.TransformerEncoder: num_layers copies of a TransformerEncoderLayer ("layers.N.…") and
/// an optional final LayerNorm ("norm.…").
///
/// The padded fast path (torch's nested tensors, enable_nested_tensor): in eval mode, with no
/// gradient to record, a batched input whose only mask is a bool src_key_padding_mask that pads
/// each sequence at its end runs each sequence over its real positions only; the padded positions
/// of the output are 0, as torch's.
template <int DModel, int NHead, int DimFF = 2048, class T = float>
class TransformerEncoder : public Module {
 public:
  ModuleList<TransformerEncoderLayer<DModel, NHead, DimFF, T>> layers;
  detail::layer_norm_layer<DModel, T> norm;
  bool has_norm;
  bool enable_nested_tensor = true;
  bool batch_first;
  TransformerEncoder(int num_layers, const transformer_layer_options& o = {}, bool final_norm = false)
      : norm(o.layer_norm_eps, o.bias), has_norm(final_norm), batch_first(o.batch_first) {
    if (num_layers < 0) throw value_error("tenet: nn::TransformerEncoder: num_layers must be >= 0, got " + std::to_string(num_layers));
    for (int i = 0; i < num_layers; ++i) layers.append(o);
    detail::clone_first(layers);
    register_module("layers", &TransformerEncoder::layers);
    if (has_norm) register_module("norm", &TransformerEncoder::norm);
  }
  std::string type_name() const override { return "TransformerEncoder"; }
  template <Expression X>
  auto operator()(const X& src, const encoder_layer_args<T>& a = {}) const {
    using Y = detail::seq_t<T, rank_of<X>, DModel>;
    Y x = src;
    if constexpr (rank_of<X> == 3) {
      const auto lengths = padded_lengths(x, a);
      if (!lengths.empty()) return padded_forward(x, lengths);
    }
    return dense(x, a);
  }

 private:
  template <class Y>
  Y dense(Y x, const encoder_layer_args<T>& a) const {
    for (const auto& l : layers) x = l(x, a);
    if (has_norm) x = norm(x);
    return x;
  }
  /// Each sequence's real length when the fast path applies, else nothing.
  template <class Y>
  std::vector<std::int64_t> padded_lengths(const Y& x, const encoder_layer_args<T>& a) const {
    const auto& kpm = a.src_key_padding_mask;
    if (!enable_nested_tensor || training() || !kpm.from_bool() || a.src_mask.defined() || a.is_causal) return {};
    if (is_grad_enabled()) {
      if (x.requires_grad()) return {};
      for (const auto& [n, p] : named_parameters())
        if (p.requires_grad()) return {};
    }
    const std::int64_t N = batch_first ? x.size(0) : x.size(1), S = batch_first ? x.size(1) : x.size(0);
    const auto s = kpm.sizes();
    if (s.size() != 2 || s[0] != N || s[1] != S) return {};  // the dense path reports the mismatch
    const Tensor<T, shape<dyn, dyn, dyn>> m = kpm.additive().cpu().contiguous();
    const T* p = m.data();
    std::vector<std::int64_t> len(static_cast<std::size_t>(N));
    for (std::int64_t n = 0; n < N; ++n) {
      std::int64_t l = 0;
      while (l < S && !(static_cast<float>(p[n * S + l]) < 0)) ++l;
      for (std::int64_t j = l; j < S; ++j)
        if (!(static_cast<float>(p[n * S + j]) < 0)) return {};  // padding inside a sequence
      len[static_cast<std::size_t>(n)] = l;
    }
    return len;
  }
  template <class Y>
  Y padded_forward(const Y& x, const std::vector<std::int64_t>& len) const {
    Y out(x.sizes(), x.device());
    out.zero_();
    for (std::size_t n = 0; n < len.size(); ++n) {
      const auto b = static_cast<std::int64_t>(n);
      if (len[n] == 0) continue;
      if (batch_first) {
        const Y seq = x.template select<0>(b).template narrow<0>(0, len[n]).template unsqueeze<0>();
        out.template select<0>(b).template narrow<0>(0, len[n]).copy_(dense(seq, {}).template select<0>(0));
      } else {
        const Y seq = x.template select<1>(b).template narrow<0>(0, len[n]).template unsqueeze<1>();
        out.template select<1>(b).template narrow<0>(0, len[n]).copy_(dense(seq, {}).template select<1>(0));
      }
    }
    return out;
  }
};

/// torch.nn.TransformerDecoder: num_layers copies of a TransformerDecoderLayer and an optional final LayerNorm.
template <int DModel, int NHead, int DimFF = 2048, class T = float>
class TransformerDecoder : public Module {
 public:
  ModuleList<TransformerDecoderLayer<DModel, NHead, DimFF, T>> layers;
  detail::layer_norm_layer<DModel, T> norm;
  bool has_norm;
  TransformerDecoder(int num_layers, const transformer_layer_options& o = {}, bool final_norm = false)
      : norm(o.layer_norm_eps, o.bias), has_norm(final_norm) {
    if (num_layers < 0) throw value_error("tenet: nn::TransformerDecoder: num_layers must be >= 0, got " + std::to_string(num_layers));
    for (int i = 0; i < num_layers; ++i) layers.append(o);
    detail::clone_first(layers);
    register_module("layers", &TransformerDecoder::layers);
    if (has_norm) register_module("norm", &TransformerDecoder::norm);
  }
  std::string type_name() const override { return "TransformerDecoder"; }
  template <Expression X, Expression M>
  auto operator()(const X& tgt, const M& memory, const decoder_layer_args<T>& a = {}) const {
    using Y = detail::seq_t<T, rank_of<X>, DModel>;
    Y x = tgt;
    const Y mem = memory;
    for (const auto& l : layers) x = l(x, mem, a);
    if (has_norm) x = norm(x);
    return x;
  }
};

/// nn::Transformer's constructor options after d_model, nhead and dim_feedforward.
struct transformer_options {
  int num_encoder_layers = 6;
  int num_decoder_layers = 6;
  transformer_layer_options layer{};
};

/// nn::Transformer's forward arguments after src and tgt (torch's keywords).
template <class T = float>
struct transformer_args {
  attention_mask<T> src_mask{}, tgt_mask{}, memory_mask{};
  attention_mask<T> src_key_padding_mask{}, tgt_key_padding_mask{}, memory_key_padding_mask{};
  bool src_is_causal = false, tgt_is_causal = false, memory_is_causal = false;
};

/// torch.nn.Transformer: an encoder and a decoder, each with a final LayerNorm; every parameter of
/// more than one dim xavier_uniform_-initialized (as torch's _reset_parameters).
template <int DModel = 512, int NHead = 8, int DimFF = 2048, class T = float>
class Transformer : public Module {
 public:
  TransformerEncoder<DModel, NHead, DimFF, T> encoder;
  TransformerDecoder<DModel, NHead, DimFF, T> decoder;
  explicit Transformer(const transformer_options& o = {})
      : encoder(o.num_encoder_layers, o.layer, true), decoder(o.num_decoder_layers, o.layer, true) {
    register_module("encoder", &Transformer::encoder);
    register_module("decoder", &Transformer::decoder);
    for (auto& l : encoder.layers) xavier_init(l, l.self_attn);
    for (auto& l : decoder.layers) {
      xavier_init(l, l.self_attn);
      init::xavier_uniform_(l.multihead_attn.in_proj_weight);
      init::xavier_uniform_(l.multihead_attn.out_proj.weight);
    }
  }
  std::string type_name() const override { return "Transformer"; }
  template <Expression S, Expression X>
  auto operator()(const S& src, const X& tgt, const transformer_args<T>& a = {}) const {
    static_assert(rank_of<S> == rank_of<X>, "tenet: nn::Transformer: src and tgt must both be batched or both unbatched");
    const auto memory = encoder(src, {.src_mask = a.src_mask, .src_key_padding_mask = a.src_key_padding_mask,
                                      .is_causal = a.src_is_causal});
    return decoder(tgt, memory, {.tgt_mask = a.tgt_mask, .memory_mask = a.memory_mask,
                                 .tgt_key_padding_mask = a.tgt_key_padding_mask,
                                 .memory_key_padding_mask = a.memory_key_padding_mask,
                                 .tgt_is_causal = a.tgt_is_causal, .memory_is_causal = a.memory_is_causal});
  }
  /// A (sz, sz) float mask: -inf above the diagonal, 0 elsewhere (torch's generate_square_subsequent_mask).
  static Tensor<T, shape<dyn, dyn>> generate_square_subsequent_mask(std::int64_t sz) {
    if (sz < 0) throw value_error("tenet: generate_square_subsequent_mask: size must be >= 0, got " + std::to_string(sz));
    Tensor<T, shape<dyn, dyn>> m = zeros<T, shape<dyn, dyn>>(sz, sz);
    for (std::int64_t i = 0; i < sz; ++i)
      for (std::int64_t j = i + 1; j < sz; ++j) m(i, j) = static_cast<T>(-std::numeric_limits<float>::infinity());
    return m;
  }

 private:
  template <class L, class A>
  static void xavier_init(L& l, A& attn) {  // the parameters of more than one dim
    init::xavier_uniform_(attn.in_proj_weight);
    init::xavier_uniform_(attn.out_proj.weight);
    init::xavier_uniform_(l.linear1.weight);
    init::xavier_uniform_(l.linear2.weight);
  }
};

}  // namespace tenet::nn
