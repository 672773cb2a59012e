#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// nn::Linear, nn::Bilinear, nn::Embedding, nn::Identity, nn::Flatten, nn::Dropout: torch.nn's layers
// with compile-time feature counts. Each forward (`operator()`) returns the lazy expression of the
// functional op (tenet::linear, einsum, embedding, ...); default initializations are torch's.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <tenet/nn_functional.hpp>
#include <tenet/indexing.hpp>
#include <tenet/nn/init.hpp>
#include <tenet/nn/module.hpp>

namespace tenet::nn {

/// y = x Wᵀ + b, W: [Out, In], b: [Out]. Init (torch's reset_parameters): W ~ kaiming_uniform_(a = √5),
/// i.e. U(-1/√In, 1/√In); b ~ U(-1/√In, 1/√In).
template <int In, int Out, bool Bias = true, class T = float>
class Linear : public Module {
  static_assert(In >= 0 && Out >= 0, "tenet: nn::Linear needs non-negative feature counts");

 public:
  static constexpr int in_features = In, out_features = Out;
  Tensor<T, shape<Out, In>> weight{{Out, In}};
  Tensor<T, shape<Out>> bias;

  Linear() {
    register_parameter("weight", &Linear::weight);
    if constexpr (Bias) {
      bias = Tensor<T, shape<Out>>({Out});
      register_parameter("bias", &Linear::bias);
    }
    reset_parameters();
  }
  void reset_parameters() {
    init::kaiming_uniform_(weight, std::sqrt(5.0));
    if constexpr (Bias) {
      const double bound = In > 0 ? 1.0 / std::sqrt(static_cast<double>(In)) : 0.0;
      init::uniform_(bias, -bound, bound);
    }
  }
  template <Expression X>
  auto operator()(const X& x) const {
    if constexpr (Bias) return linear(x, weight, bias);
    else return linear(x, weight);
  }
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override {
    return "in_features=" + std::to_string(In) + ", out_features=" + std::to_string(Out) +
           ", bias=" + detail::py_bool(Bias);
  }
};

/// y[b, o] = Σ_ij x1[b, i] W[o, i, j] x2[b, j] + bias[o] for 2-D x1 [B, In1] and x2 [B, In2]
/// (torch.nn.Bilinear; tenet's takes 2-D inputs only). Init: W, b ~ U(-1/√In1, 1/√In1).
template <int In1, int In2, int Out, bool Bias = true, class T = float>
class Bilinear : public Module {
 public:
  Tensor<T, shape<Out, In1, In2>> weight{{Out, In1, In2}};
  Tensor<T, shape<Out>> bias;
  Bilinear() {
    register_parameter("weight", &Bilinear::weight);
    if constexpr (Bias) {
      bias = Tensor<T, shape<Out>>({Out});
      register_parameter("bias", &Bilinear::bias);
    }
    reset_parameters();
  }
  void reset_parameters() {
    const double bound = In1 > 0 ? 1.0 / std::sqrt(static_cast<double>(In1)) : 0.0;
    init::uniform_(weight, -bound, bound);
    if constexpr (Bias) init::uniform_(bias, -bound, bound);
  }
  template <Expression X1, Expression X2>
  auto operator()(const X1& x1, const X2& x2) const {
    static_assert(rank_of<X1> == 2 && rank_of<X2> == 2, "tenet: nn::Bilinear takes 2-D inputs [B, In1] and [B, In2]");
    if constexpr (Bias) return einsum<"bi,oij,bj->bo">(x1, weight, x2) + bias;
    else return einsum<"bi,oij,bj->bo">(x1, weight, x2);
  }
  std::string type_name() const override { return "Bilinear"; }
  std::string extra_repr() const override {
    return "in1_features=" + std::to_string(In1) + ", in2_features=" + std::to_string(In2) +
           ", out_features=" + std::to_string(Out) + ", bias=" + detail::py_bool(Bias);
  }
};

/// A lookup table of Num vectors of size Dim (torch.nn.Embedding). Init: N(0, 1), the padding_idx
/// row (when given; negative counts from the end) zero.
template <int Num, int Dim, class T = float>
class Embedding : public Module {
 public:
  Tensor<T, shape<Num, Dim>> weight{{Num, Dim}};
  std::optional<std::int64_t> padding_idx;
  explicit Embedding(std::optional<std::int64_t> padding = std::nullopt) {
    if (padding) {
      if (*padding >= Num || *padding < -Num)
        throw index_error("tenet: nn::Embedding: padding_idx " + std::to_string(*padding) +
                          " must be within num_embeddings (" + std::to_string(Num) + ")");
      padding_idx = *padding < 0 ? *padding + Num : *padding;
    }
    register_parameter("weight", &Embedding::weight);
    reset_parameters();
  }
  void reset_parameters() {
    init::normal_(weight);
    tenet::no_grad guard;
    if (padding_idx) weight.template select<0>(*padding_idx).fill_(0);
  }
  template <Expression I>
  auto operator()(const I& idx) const {
    return embedding(idx, weight, padding_idx);
  }
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override {
    std::string s = std::to_string(Num) + ", " + std::to_string(Dim);
    if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
    return s;
  }
};

/// The input unchanged.
class Identity : public Module {
 public:
  template <Expression X>
  auto operator()(const X& x) const {
    return x;
  }
  std::string type_name() const override { return "Identity"; }
};

/// Dims Start..End flattened into one (torch.nn.Flatten; defaults 1, -1). A view of the evaluated input.
template <std::int64_t Start = 1, std::int64_t End = -1>
class Flatten : public Module {
 public:
  template <Expression X>
  auto operator()(const X& x) const {
    return tenet::eval(x).template flatten<Start, End>();
  }
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override {
    return "start_dim=" + std::to_string(Start) + ", end_dim=" + std::to_string(End);
  }
};

/// Zeroes each element with probability p in training mode and scales the rest by 1/(1-p);
/// the identity in eval mode (torch.nn.Dropout).
class Dropout : public Module {
 public:
  double p = 0.5;
  explicit Dropout(double prob = 0.5) : p(prob) {
    if (!(p >= 0.0 && p <= 1.0))
      throw value_error("tenet: nn::Dropout: dropout probability has to be between 0 and 1, but got " +
                        std::to_string(p));
  }
  template <Expression X>
  auto operator()(const X& x) const {
    return dropout(x, p, training());
  }
  std::string type_name() const override { return "Dropout"; }
  /// torch's text; tenet's dropout is never in place.
  std::string extra_repr() const override { return "p=" + detail::py_float(p) + ", inplace=False"; }
};

}  // namespace tenet::nn
