#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// nn::Conv1d, nn::Conv2d, nn::ConvTranspose2d and the pooling modules (MaxPool2d, AvgPool2d,
// AdaptiveAvgPool2d). Channel counts, kernel sizes and groups are compile-time (they fix the weight's
// shape); stride, padding and dilation are run-time options, as in tenet::conv2d, or static ones
// given as a template argument in place of Conv2d's kernel width / Conv1d's groups
// (`Conv2d<1, 8, 3, conv2d_options{.padding = 1}>`), and the pools have static twins
// (StaticMaxPool2d<2>, StaticAvgPool2d, StaticAdaptiveAvgPool2d): with those, the output extents of
// an input with static spatial extents are static (docs/ops.md, "Static shapes through CNNs"). Init as torch's
// reset_parameters: W ~ kaiming_uniform_(a = √5), i.e. U(-1/√fan_in, 1/√fan_in), b ~ U(-1/√fan_in,
// 1/√fan_in), with fan_in = W.size(1) * kernel elements (for ConvTranspose2d, W.size(1) = Out/groups).
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

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

/// What Conv1d, Conv2d and ConvTranspose2d share: the options (groups fixed by the type; const
/// when Fixed, i.e. given as a template argument), the weight (of shape W, sizes given by the
/// module), the bias of Out elements when Bias, registered by torch's names, and torch's
/// reset_parameters: W ~ kaiming_uniform_(a = √5), b ~ U(±1/√fan_in).
template <class Opts, class W, int Out, bool Bias, class T, bool Fixed = false>
class conv_module : public Module {
 public:
  std::conditional_t<Fixed, const Opts, Opts> options;
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
  conv_module(Opts o, int groups, const typename W::sizes_type& sizes) : options(with_groups(o, groups)), weight(sizes) {
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
  static constexpr Opts with_groups(Opts o, int groups) {
    o.groups = groups;
    return o;
  }
};

/// V when it is an integer, else D.
template <auto V, int D>
constexpr int integer_or() {
  if constexpr (std::is_integral_v<std::remove_cvref_t<decltype(V)>>) return static_cast<int>(V);
  else return D;
}

/// A conv module's template argument that is either an integer (Conv2d's kernel width, Conv1d's
/// groups: run-time options) or the static options (conv_options<N>): what it fixes.
template <std::size_t N, auto Arg, int Groups>
struct conv_arg {
  static constexpr bool fixed = std::is_same_v<std::remove_cvref_t<decltype(Arg)>, conv_options<N>>;
  static_assert(fixed || std::is_integral_v<std::remove_cvref_t<decltype(Arg)>>,
                "tenet: a conv module's template argument after the kernel size is an integer or the static "
                "options of its dimension (conv2d_options{...} for Conv2d, conv1d_options{...} for Conv1d)");
  /// groups: the options' groups when not 1, else Groups
  static constexpr int groups = [] {
    if constexpr (fixed) {
      static_assert(Arg.groups == 1 || Groups == 1 || Arg.groups == Groups,
                    "tenet: a conv module's groups are given twice, with different values (in the static options "
                    "and as a template argument)");
      return static_cast<int>(Arg.groups != 1 ? Arg.groups : Groups);
    } else {
      return Groups;
    }
  }();
  /// the static options, with those groups (unused when not fixed)
  static constexpr conv_options<N> options = [] {
    conv_options<N> o{};
    if constexpr (fixed) o = Arg;
    o.groups = groups;
    return o;
  }();
};
/// Conv1d's: its argument after the kernel size is the groups or the options
template <auto Arg>
using conv1d_arg = conv_arg<1, Arg, integer_or<Arg, 1>()>;
}  // namespace detail

/// (N, In, L) -> (N, Out, L'); weight [Out, In/Groups, K]. GroupsOrOptions: the groups (an
/// integer; run-time options, given to the constructor) or static options (conv1d_options{...};
/// groups from them), with which the output's length is static where the input's is.
template <int In, int Out, int K, auto GroupsOrOptions = 1, bool Bias = true, class T = float>
class Conv1d : public detail::conv_module<conv1d_options,
                                          Tensor<T, shape<Out, In / detail::conv1d_arg<GroupsOrOptions>::groups, K>>,
                                          Out, Bias, T, detail::conv1d_arg<GroupsOrOptions>::fixed> {
  using arg = detail::conv1d_arg<GroupsOrOptions>;
  static constexpr int Groups = arg::groups;
  static_assert(Groups > 0 && In % Groups == 0 && Out % Groups == 0,
                "tenet: nn::Conv1d: in_channels and out_channels must be divisible by groups");
  using base = detail::conv_module<conv1d_options, Tensor<T, shape<Out, In / Groups, K>>, Out, Bias, T, arg::fixed>;

 public:
  /// whether the options are static (a template argument)
  static constexpr bool static_options = arg::fixed;
  explicit Conv1d(conv1d_options o = {})
    requires(!arg::fixed)
      : base(o, Groups, {Out, In / Groups, K}) {}
  Conv1d()
    requires(arg::fixed)
      : base(arg::options, Groups, {Out, In / Groups, K}) {}
  template <Expression X>
  auto operator()(const X& x) const {
    if constexpr (!arg::fixed)
      return this->apply(x, [](const auto&... a) { return conv1d(a...); });
    else if constexpr (Bias)
      return conv1d<arg::options>(x, this->weight, this->bias);
    else
      return conv1d<arg::options>(x, this->weight);
  }
  std::string type_name() const override { return "Conv1d"; }
  std::string extra_repr() const override {
    const auto& o = this->options;
    return detail::conv_extra_repr<1>(In, Out, {K}, o.stride, detail::padding_text(o.padding), o.dilation, 0, Groups,
                                      Bias);
  }
};

/// (N, In, H, W) -> (N, Out, H', W'); weight [Out, In/Groups, KH, KW]. KWOrOptions: the kernel
/// width (an integer; run-time options, given to the constructor) or static options
/// (conv2d_options{...}; the kernel is then KH x KH, the groups those of the options when not 1,
/// else Groups), with which the output's extents are static where the input's are:
/// `nn::Conv2d<1, 8, 3, conv2d_options{.stride = 2, .padding = 1}> conv;`
template <int In, int Out, int KH, auto KWOrOptions = KH, int GroupsArg = 1, bool Bias = true, class T = float>
class Conv2d : public detail::conv_module<
                   conv2d_options,
                   Tensor<T, shape<Out, In / detail::conv_arg<2, KWOrOptions, GroupsArg>::groups, KH,
                                   detail::integer_or<KWOrOptions, KH>()>>,
                   Out, Bias, T, detail::conv_arg<2, KWOrOptions, GroupsArg>::fixed> {
  using arg = detail::conv_arg<2, KWOrOptions, GroupsArg>;
  static constexpr int Groups = arg::groups, KW = detail::integer_or<KWOrOptions, KH>();
  static_assert(Groups > 0 && In % Groups == 0 && Out % Groups == 0,
                "tenet: nn::Conv2d: in_channels and out_channels must be divisible by groups");
  using base = detail::conv_module<conv2d_options, Tensor<T, shape<Out, In / Groups, KH, KW>>, Out, Bias, T, arg::fixed>;

 public:
  /// whether the options are static (a template argument)
  static constexpr bool static_options = arg::fixed;
  explicit Conv2d(conv2d_options o = {})
    requires(!arg::fixed)
      : base(o, Groups, {Out, In / Groups, KH, KW}) {}
  Conv2d()
    requires(arg::fixed)
      : base(arg::options, Groups, {Out, In / Groups, KH, KW}) {}
  template <Expression X>
  auto operator()(const X& x) const {
    if constexpr (!arg::fixed)
      return this->apply(x, [](const auto&... a) { return conv2d(a...); });
    else if constexpr (Bias)
      return conv2d<arg::options>(x, this->weight, this->bias);
    else
      return conv2d<arg::options>(x, this->weight);
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

namespace detail {
/// torch's text of MaxPool2d and AvgPool2d; a size whose two values are equal prints as one
/// integer (as MaxPool2d(2)).
inline std::string max_pool_repr(const ints<2>& kernel, const max_pool2d_options& o) {
  return "kernel_size=" + pool_size_text(kernel) + ", stride=" + pool_size_text(all_equal(o.stride, 0) ? kernel : o.stride) +
         ", padding=" + pool_size_text(o.padding) + ", dilation=" + pool_size_text(o.dilation) +
         ", ceil_mode=" + py_bool(o.ceil_mode);
}
inline std::string avg_pool_repr(const ints<2>& kernel, const avg_pool2d_options& o) {
  return "kernel_size=" + pool_size_text(kernel) + ", stride=" + pool_size_text(all_equal(o.stride, 0) ? kernel : o.stride) +
         ", padding=" + pool_size_text(o.padding);
}
}  // namespace detail

/// The pools with run-time kernel sizes and options (results with run-time spatial extents).
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
  std::string extra_repr() const override { return detail::max_pool_repr(kernel_size, options); }
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
  std::string extra_repr() const override { return detail::avg_pool_repr(kernel_size, options); }
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

/// The pools with the kernel size (output size) and options as template arguments: the same
/// math and text as MaxPool2d, AvgPool2d and AdaptiveAvgPool2d, and static output extents where
/// the input's are (always, for the adaptive pool): `nn::StaticMaxPool2d<2> pool;`,
/// `nn::StaticMaxPool2d<3, max_pool2d_options{.stride = 2, .padding = 1}>`,
/// `nn::StaticAdaptiveAvgPool2d<1> gap;`.
template <ints<2> Kernel, max_pool2d_options Options = max_pool2d_options{}>
class StaticMaxPool2d : public Module {
 public:
  static constexpr ints<2> kernel_size = Kernel;
  static constexpr max_pool2d_options options = Options;
  template <Expression X>
  auto operator()(const X& x) const {
    return max_pool2d<Kernel, Options>(x);
  }
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override { return detail::max_pool_repr(Kernel, Options); }
};
template <ints<2> Kernel, avg_pool2d_options Options = avg_pool2d_options{}>
class StaticAvgPool2d : public Module {
 public:
  static constexpr ints<2> kernel_size = Kernel;
  static constexpr avg_pool2d_options options = Options;
  template <Expression X>
  auto operator()(const X& x) const {
    return avg_pool2d<Kernel, Options>(x);
  }
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override { return detail::avg_pool_repr(Kernel, Options); }
};
template <ints<2> Size>
class StaticAdaptiveAvgPool2d : public Module {
 public:
  static constexpr ints<2> output_size = Size;
  template <Expression X>
  auto operator()(const X& x) const {
    return adaptive_avg_pool2d<Size>(x);
  }
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override { return "output_size=" + detail::pool_size_text(Size); }
};

}  // namespace tenet::nn
