#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// nn::LayerNorm, nn::RMSNorm, nn::GroupNorm, nn::BatchNorm1d / BatchNorm2d (torch.nn's). Affine weights
// start at 1, biases at 0; BatchNorm keeps running_mean (0), running_var (1) and num_batches_tracked
// (0) as buffers, updated in training mode when the forward is called (as torch does), and normalizes
// with them in eval mode.
#include <cstdint>
#include <optional>
#include <string>

#include <tenet/nn_functional.hpp>
#include <tenet/nn/init.hpp>
#include <tenet/nn/module.hpp>

namespace tenet::nn {

namespace detail {
/// torch's normalized_shape text: "(8,)", "(4, 8)".
template <int... N>
std::string normalized_shape_text() {
  const std::int64_t v[] = {N...};
  return py_tuple(v, sizeof...(N));
}
}  // namespace detail

/// Normalizes over the last sizeof...(N) dims, whose extents are N... (torch.nn.LayerNorm(normalized_shape)).
/// Affine = false keeps no parameters (weight 1 and bias 0 are still applied).
template <class T, bool Affine, int... N>
class LayerNormT : public Module {
 public:
  double eps = 1e-5;
  Tensor<T, shape<N...>> weight{{N...}}, bias{{N...}};
  explicit LayerNormT(double epsilon = 1e-5) : eps(epsilon) {
    if constexpr (Affine) {
      register_parameter("weight", &LayerNormT::weight);
      register_parameter("bias", &LayerNormT::bias);
    }
    reset_parameters();
  }
  void reset_parameters() {
    init::ones_(weight);
    init::zeros_(bias);
  }
  template <Expression X>
  auto operator()(const X& x) const {
    return layer_norm(x, weight, bias, eps);
  }
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override {
    return detail::normalized_shape_text<N...>() + ", eps=" + detail::py_float(eps) +
           ", elementwise_affine=" + detail::py_bool(Affine) + ", bias=" + detail::py_bool(Affine);
  }
};
template <int... N>
using LayerNorm = LayerNormT<float, true, N...>;

/// x / sqrt(mean(x², last dims) + eps) * weight (torch.nn.RMSNorm; eps unset: the dtype's epsilon).
template <class T, int... N>
class RMSNormT : public Module {
 public:
  std::optional<double> eps;
  Tensor<T, shape<N...>> weight{{N...}};
  explicit RMSNormT(std::optional<double> epsilon = std::nullopt) : eps(epsilon) {
    register_parameter("weight", &RMSNormT::weight);
    reset_parameters();
  }
  void reset_parameters() { init::ones_(weight); }
  template <Expression X>
  auto operator()(const X& x) const {
    return rms_norm(x, weight, eps ? *eps : -1.0);
  }
  std::string type_name() const override { return "RMSNorm"; }
  std::string extra_repr() const override {
    return detail::normalized_shape_text<N...>() + ", eps=" + (eps ? detail::py_float(*eps) : "None") +
           ", elementwise_affine=True";
  }
};
template <int... N>
using RMSNorm = RMSNormT<float, N...>;

/// Channels (dim 1) split into G groups, each (sample, group) normalized (torch.nn.GroupNorm(G, C)).
template <int G, int C, bool Affine = true, class T = float>
class GroupNorm : public Module {
  static_assert(G > 0 && C % G == 0, "tenet: nn::GroupNorm: num_channels must be divisible by num_groups");

 public:
  double eps = 1e-5;
  Tensor<T, shape<C>> weight{{C}}, bias{{C}};
  explicit GroupNorm(double epsilon = 1e-5) : eps(epsilon) {
    if constexpr (Affine) {
      register_parameter("weight", &GroupNorm::weight);
      register_parameter("bias", &GroupNorm::bias);
    }
    reset_parameters();
  }
  void reset_parameters() {
    init::ones_(weight);
    init::zeros_(bias);
  }
  template <Expression X>
  auto operator()(const X& x) const {
    return group_norm(x, G, weight, bias, eps);
  }
  std::string type_name() const override { return "GroupNorm"; }
  std::string extra_repr() const override {
    return std::to_string(G) + ", " + std::to_string(C) + ", eps=" + detail::py_float(eps) +
           ", affine=" + detail::py_bool(Affine) + ", bias=" + detail::py_bool(Affine);
  }
};

struct batch_norm_options {
  double eps = 1e-5;
  /// nullopt: a cumulative moving average (factor 1 / num_batches_tracked), as torch's momentum=None.
  std::optional<double> momentum = 0.1;
  bool track_running_stats = true;
};

/// Batch normalization over C channels for inputs of rank MinRank..MaxRank (torch.nn.BatchNorm1d:
/// (N, C) or (N, C, L); BatchNorm2d: (N, C, H, W)).
template <int C, std::size_t MinRank, std::size_t MaxRank, bool Affine = true, class T = float>
class BatchNormT : public Module {
 public:
  batch_norm_options options;
  Tensor<T, shape<C>> weight{{C}}, bias{{C}}, running_mean{{C}}, running_var{{C}};
  Tensor<std::int64_t, shape<>> num_batches_tracked{sizes_t<0>{}};

  explicit BatchNormT(batch_norm_options o = {}) : options(o) {
    if (o.momentum) tenet::detail::check_momentum("nn::BatchNorm", *o.momentum);
    if constexpr (Affine) {
      register_parameter("weight", &BatchNormT::weight);
      register_parameter("bias", &BatchNormT::bias);
    }
    if (o.track_running_stats) {
      register_buffer("running_mean", &BatchNormT::running_mean);
      register_buffer("running_var", &BatchNormT::running_var);
      register_buffer("num_batches_tracked", &BatchNormT::num_batches_tracked);
    }
    reset_parameters();
  }
  void reset_running_stats() {
    running_mean.zero_();
    running_var.fill_(1);
    num_batches_tracked.zero_();
  }
  void reset_parameters() {
    reset_running_stats();
    init::ones_(weight);
    init::zeros_(bias);
  }
  template <Expression X>
  auto operator()(const X& x) const {
    static_assert(rank_of<X> >= MinRank && rank_of<X> <= MaxRank,
                  "tenet: nn::BatchNorm: the input's rank does not fit (BatchNorm1d: (N, C) or (N, C, L); "
                  "BatchNorm2d: (N, C, H, W))");
    double factor = options.momentum.value_or(0.0);
    if (training() && options.track_running_stats) {
      num_batches_tracked.add_(std::int64_t{1});
      if (!options.momentum) factor = 1.0 / static_cast<double>(num_batches_tracked.item());
    }
    const bool use_batch_stats = training() || !options.track_running_stats;
    if (options.track_running_stats)
      return batch_norm(x, running_mean, running_var, weight, bias, use_batch_stats, factor, options.eps);
    return batch_norm(x, none, none, weight, bias, true, factor, options.eps);
  }
  std::string type_name() const override { return MinRank == 4 ? "BatchNorm2d" : "BatchNorm1d"; }
  std::string extra_repr() const override {
    return std::to_string(C) + ", eps=" + detail::py_float(options.eps) +
           ", momentum=" + (options.momentum ? detail::py_float(*options.momentum) : "None") +
           ", affine=" + detail::py_bool(Affine) + ", bias=" + detail::py_bool(Affine) +
           ", track_running_stats=" + detail::py_bool(options.track_running_stats);
  }
};
template <int C, bool Affine = true, class T = float>
using BatchNorm1d = BatchNormT<C, 2, 3, Affine, T>;
template <int C, bool Affine = true, class T = float>
using BatchNorm2d = BatchNormT<C, 4, 4, Affine, T>;

}  // namespace tenet::nn
