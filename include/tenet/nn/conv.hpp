#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// nn::Conv1d, nn::Conv2d, nn::ConvTranspose2d and the pooling modules (MaxPool2d, AvgPool2d,
// AdaptiveAvgPool2d). Channel counts, kernel sizes and groups are compile-time (they fix the weight's
// shape); stride, padding and dilation are run-time options, as in tenet::conv2d. Init as torch's
// reset_parameters: W ~ kaiming_uniform_(a = √5), i.e. U(-1/√fan_in, 1/√fan_in), b ~ U(-1/√fan_in,
// 1/√fan_in), with fan_in = W.size(1) * kernel elements (for ConvTranspose2d, W.size(1) = Out/groups).
#include <cmath>
#include <cstdint>

#include <tenet/conv.hpp>
#include <tenet/nn/init.hpp>
#include <tenet/nn/module.hpp>

namespace tenet::nn {

namespace detail {
template <class W, class B>
void conv_default_init(const W& weight, const B& bias, bool has_bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (has_bias) {
    const auto fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}
}  // namespace detail

/// (N, In, L) -> (N, Out, L'); weight [Out, In/Groups, K].
template <int In, int Out, int K, int Groups = 1, bool Bias = true, class T = float>
class Conv1d : public Module {
  static_assert(Groups > 0 && In % Groups == 0 && Out % Groups == 0,
                "tenet: nn::Conv1d: in_channels and out_channels must be divisible by groups");

 public:
  conv1d_options options;
  Tensor<T, shape<Out, In / Groups, K>> weight{{Out, In / Groups, K}};
  Tensor<T, shape<Out>> bias;
  explicit Conv1d(conv1d_options o = {}) : options(o) {
    options.groups = Groups;
    register_parameter("weight", weight);
    if constexpr (Bias) {
      bias = Tensor<T, shape<Out>>({Out});
      register_parameter("bias", bias);
    }
    reset_parameters();
  }
  void reset_parameters() { detail::conv_default_init(weight, bias, Bias); }
  template <Expression X>
  auto operator()(const X& x) const {
    if constexpr (Bias) return conv1d(x, weight, bias, options);
    else return conv1d(x, weight, options);
  }
};

/// (N, In, H, W) -> (N, Out, H', W'); weight [Out, In/Groups, KH, KW].
template <int In, int Out, int KH, int KW = KH, int Groups = 1,
          bool Bias = true, class T = float>
class Conv2d : public Module {
  static_assert(Groups > 0 && In % Groups == 0 && Out % Groups == 0,
                "tenet: nn::Conv2d: in_channels and out_channels must be divisible by groups");

 public:
  conv2d_options options;
  Tensor<T, shape<Out, In / Groups, KH, KW>> weight{{Out, In / Groups, KH, KW}};
  Tensor<T, shape<Out>> bias;
  explicit Conv2d(conv2d_options o = {}) : options(o) {
    options.groups = Groups;
    register_parameter("weight", weight);
    if constexpr (Bias) {
      bias = Tensor<T, shape<Out>>({Out});
      register_parameter("bias", bias);
    }
    reset_parameters();
  }
  void reset_parameters() { detail::conv_default_init(weight, bias, Bias); }
  template <Expression X>
  auto operator()(const X& x) const {
    if constexpr (Bias) return conv2d(x, weight, bias, options);
    else return conv2d(x, weight, options);
  }
};

/// (N, In, H, W) -> (N, Out, H', W'); weight [In, Out/Groups, KH, KW].
template <int In, int Out, int KH, int KW = KH, int Groups = 1,
          bool Bias = true, class T = float>
class ConvTranspose2d : public Module {
  static_assert(Groups > 0 && In % Groups == 0 && Out % Groups == 0,
                "tenet: nn::ConvTranspose2d: in_channels and out_channels must be divisible by groups");

 public:
  conv_transpose2d_options options;
  Tensor<T, shape<In, Out / Groups, KH, KW>> weight{{In, Out / Groups, KH, KW}};
  Tensor<T, shape<Out>> bias;
  explicit ConvTranspose2d(conv_transpose2d_options o = {}) : options(o) {
    options.groups = Groups;
    register_parameter("weight", weight);
    if constexpr (Bias) {
      bias = Tensor<T, shape<Out>>({Out});
      register_parameter("bias", bias);
    }
    reset_parameters();
  }
  void reset_parameters() { detail::conv_default_init(weight, bias, Bias); }
  template <Expression X>
  auto operator()(const X& x) const {
    if constexpr (Bias) return conv_transpose2d(x, weight, bias, options);
    else return conv_transpose2d(x, weight, options);
  }
};

class MaxPool2d : public Module {
 public:
  ints<2> kernel_size;
  max_pool2d_options options;
  explicit MaxPool2d(ints<2> kernel, max_pool2d_options o = {}) : kernel_size(kernel), options(o) {}
  template <Expression X>
  auto operator()(const X& x) const {
    return max_pool2d(x, kernel_size, options);
  }
};
class AvgPool2d : public Module {
 public:
  ints<2> kernel_size;
  avg_pool2d_options options;
  explicit AvgPool2d(ints<2> kernel, avg_pool2d_options o = {}) : kernel_size(kernel), options(o) {}
  template <Expression X>
  auto operator()(const X& x) const {
    return avg_pool2d(x, kernel_size, options);
  }
};
class AdaptiveAvgPool2d : public Module {
 public:
  ints<2> output_size;
  explicit AdaptiveAvgPool2d(ints<2> size) : output_size(size) {}
  template <Expression X>
  auto operator()(const X& x) const {
    return adaptive_avg_pool2d(x, output_size);
  }
};

}  // namespace tenet::nn
