#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// nn::Conv1d, nn::Conv2d, nn::ConvTranspose2d and the pooling modules (MaxPool2d, AvgPool2d,
// AdaptiveAvgPool2d). Channel counts, kernel sizes and groups are compile-time (they fix the weight's
// shape); stride, padding and dilation are run-time options, as in tenet::conv2d. Init as torch's
// reset_parameters: W ~ kaiming_uniform_(a = √5), i.e. U(-1/√fan_in, 1/√fan_in), b ~ U(-1/√fan_in,
// 1/√fan_in), with fan_in = W.size(1) * kernel elements (for ConvTranspose2d, W.size(1) = Out/groups).
#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include <tenet/conv.hpp>
#include <tenet/nn/init.hpp>
#include <tenet/nn/module.hpp>

namespace tenet::nn {

namespace detail {
template <std::size_t N>
bool all_equal(const ints<N>& v, std::int64_t x) {
  for (std::size_t i = 0; i < N; ++i)
    if (v[i] != x) return false;
  return true;
}
template <std::size_t N>
std::string tuple_text(const ints<N>& v) {
  return py_tuple(v.v.data(), N);
}
/// A conv's padding as torch prints it: "same", "valid", a tuple, or "" when all zero (not printed).
template <std::size_t N>
std::string padding_text(const conv_pad<N>& p) {
  if (p.mode) return *p.mode == conv_padding::same ? "same" : "valid";
  return all_equal(p, 0) ? std::string() : tuple_text<N>(p);
}
template <std::size_t N>
std::string padding_text(const ints<N>& p) {
  return all_equal(p, 0) ? std::string() : tuple_text(p);
}
/// torch's _ConvNd.extra_repr: channels, kernel_size and stride always; padding, dilation,
/// output_padding, groups and bias when not their defaults.
template <std::size_t N>
std::string conv_extra_repr(int in, int out, const std::array<std::int64_t, N>& kernel, const ints<N>& stride,
                            const std::string& padding, const ints<N>& dilation, const ints<N>& output_padding,
                            int groups, bool bias) {
  std::string s = std::to_string(in) + ", " + std::to_string(out) + ", kernel_size=" + py_tuple(kernel.data(), N) +
                  ", stride=" + tuple_text(stride);
  if (!padding.empty()) s += ", padding=" + padding;
  if (!all_equal(dilation, 1)) s += ", dilation=" + tuple_text(dilation);
  if (!all_equal(output_padding, 0)) s += ", output_padding=" + tuple_text(output_padding);
  if (groups != 1) s += ", groups=" + std::to_string(groups);
  if (!bias) s += ", bias=False";
  return s;
}
/// A pooling size as torch prints the one a user passes: one integer when both are equal (as
/// MaxPool2d(2)), else a tuple; stride 0 means the kernel size.
inline std::string pool_size_text(const ints<2>& v) {
  return v[0] == v[1] ? std::to_string(v[0]) : tuple_text(v);
}

/// What Conv1d, Conv2d and ConvTranspose2d share: the options (groups fixed by the type), the
/// weight (of shape W, sizes given by the module), the bias of Out elements when Bias, registered
/// by torch's names, and torch's reset_parameters: W ~ kaiming_uniform_(a = √5), b ~ U(±1/√fan_in).
template <class Opts, class W, int Out, bool Bias, class T>
class conv_module : public Module {
 public:
  Opts options;
  W weight;
  Tensor<T, shape<Out>> bias;
  void reset_parameters() {
    init::kaiming_uniform_(weight, std::sqrt(5.0));
    if constexpr (Bias) {
      const auto fan_in = init::calculate_fan_in_and_fan_out(weight).first;
      const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
      init::uniform_(bias, -bound, bound);
    }
  }

 protected:
  conv_module(Opts o, int groups, const typename W::sizes_type& sizes) : options(o), weight(sizes) {
    options.groups = groups;
    register_parameter("weight", &conv_module::weight);
    if constexpr (Bias) {
      bias = Tensor<T, shape<Out>>({Out});
      register_parameter("bias", &conv_module::bias);
    }
    reset_parameters();
  }
  /// conv(x, weight[, bias], options): the functional form of the module
  template <class X, class F>
  auto apply(const X& x, F conv) const {
    if constexpr (Bias) return conv(x, weight, bias, options);
    else return conv(x, weight, options);
  }
};
}  // namespace detail

/// (N, In, L) -> (N, Out, L'); weight [Out, In/Groups, K].
template <int In, int Out, int K, int Groups = 1, bool Bias = true, class T = float>
class Conv1d : public detail::conv_module<conv1d_options, Tensor<T, shape<Out, In / Groups, K>>, Out, Bias, T> {
  static_assert(Groups > 0 && In % Groups == 0 && Out % Groups == 0,
                "tenet: nn::Conv1d: in_channels and out_channels must be divisible by groups");
  using base = detail::conv_module<conv1d_options, Tensor<T, shape<Out, In / Groups, K>>, Out, Bias, T>;

 public:
  explicit Conv1d(conv1d_options o = {}) : base(o, Groups, {Out, In / Groups, K}) {}
  template <Expression X>
  auto operator()(const X& x) const {
    return this->apply(x, [](const auto&... a) { return conv1d(a...); });
  }
  std::string type_name() const override { return "Conv1d"; }
  std::string extra_repr() const override {
    const auto& o = this->options;
    return detail::conv_extra_repr<1>(In, Out, {K}, o.stride, detail::padding_text(o.padding), o.dilation, 0, Groups,
                                      Bias);
  }
};

/// (N, In, H, W) -> (N, Out, H', W'); weight [Out, In/Groups, KH, KW].
template <int In, int Out, int KH, int KW = KH, int Groups = 1,
          bool Bias = true, class T = float>
class Conv2d
    : public detail::conv_module<conv2d_options, Tensor<T, shape<Out, In / Groups, KH, KW>>, Out, Bias, T> {
  static_assert(Groups > 0 && In % Groups == 0 && Out % Groups == 0,
                "tenet: nn::Conv2d: in_channels and out_channels must be divisible by groups");
  using base = detail::conv_module<conv2d_options, Tensor<T, shape<Out, In / Groups, KH, KW>>, Out, Bias, T>;

 public:
  explicit Conv2d(conv2d_options o = {}) : base(o, Groups, {Out, In / Groups, KH, KW}) {}
  template <Expression X>
  auto operator()(const X& x) const {
    return this->apply(x, [](const auto&... a) { return conv2d(a...); });
  }
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override {
    const auto& o = this->options;
    return detail::conv_extra_repr<2>(In, Out, {KH, KW}, o.stride, detail::padding_text(o.padding), o.dilation, 0,
                                      Groups, Bias);
  }
};

/// (N, In, H, W) -> (N, Out, H', W'); weight [In, Out/Groups, KH, KW].
template <int In, int Out, int KH, int KW = KH, int Groups = 1,
          bool Bias = true, class T = float>
class ConvTranspose2d : public detail::conv_module<conv_transpose2d_options,
                                                   Tensor<T, shape<In, Out / Groups, KH, KW>>, Out, Bias, T> {
  static_assert(Groups > 0 && In % Groups == 0 && Out % Groups == 0,
                "tenet: nn::ConvTranspose2d: in_channels and out_channels must be divisible by groups");
  using base =
      detail::conv_module<conv_transpose2d_options, Tensor<T, shape<In, Out / Groups, KH, KW>>, Out, Bias, T>;

 public:
  explicit ConvTranspose2d(conv_transpose2d_options o = {}) : base(o, Groups, {In, Out / Groups, KH, KW}) {}
  template <Expression X>
  auto operator()(const X& x) const {
    return this->apply(x, [](const auto&... a) { return conv_transpose2d(a...); });
  }
  std::string type_name() const override { return "ConvTranspose2d"; }
  std::string extra_repr() const override {
    const auto& o = this->options;
    return detail::conv_extra_repr<2>(In, Out, {KH, KW}, o.stride, detail::padding_text(o.padding), o.dilation,
                                      o.output_padding, Groups, Bias);
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
  std::string type_name() const override { return "MaxPool2d"; }
  /// torch's text; a size whose two values are equal prints as one integer (as MaxPool2d(2)).
  std::string extra_repr() const override {
    const auto& o = options;
    return "kernel_size=" + detail::pool_size_text(kernel_size) +
           ", stride=" + detail::pool_size_text(detail::all_equal(o.stride, 0) ? kernel_size : o.stride) +
           ", padding=" + detail::pool_size_text(o.padding) + ", dilation=" + detail::pool_size_text(o.dilation) +
           ", ceil_mode=" + detail::py_bool(o.ceil_mode);
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
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override {
    const auto& o = options;
    return "kernel_size=" + detail::pool_size_text(kernel_size) +
           ", stride=" + detail::pool_size_text(detail::all_equal(o.stride, 0) ? kernel_size : o.stride) +
           ", padding=" + detail::pool_size_text(o.padding);
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
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override { return "output_size=" + detail::pool_size_text(output_size); }
};

}  // namespace tenet::nn
