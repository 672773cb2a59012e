// ResNet-18's first stage in tenet (bench/resnet18_stage1.cpp times it, tests/test_conv.cpp checks
// it against PyTorch): conv 7x7/2 (3 -> 64, pad 3) + batch norm (eval mode: x * scale + shift per
// channel) + relu + max_pool 3x3/2 pad 1, then layer1: two BasicBlocks
// (conv3x3 + bn + relu + conv3x3 + bn + residual add + relu).
// Parameters are a deterministic formula (make_param), so tests/reference/gen_conv.py builds the
// same values in Python without storing them.
#pragma once

#include <cmath>
#include <cstdint>

#include <tenet/tenet.hpp>

namespace resnet {

using S4 = tenet::dyn_shape<4>;
using C3 = tenet::shape<tenet::dyn, 1, 1>;  // a per-channel vector shaped to broadcast over (N, C, H, W)

/// value i of parameter `seed`: scale * sin(0.7853 i + 1.618 seed) + offset, rounded to float.
inline float param_value(std::int64_t i, int seed, double scale, double offset) {
  return static_cast<float>(scale * std::sin(0.7853 * static_cast<double>(i) + 1.618 * seed) + offset);
}
template <class S, std::integral... N>
tenet::Tensor<float, S> make_param(int seed, double scale, double offset, N... n) {
  auto t = tenet::empty<float, S>(n...);
  float* p = t.data();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = param_value(i, seed, scale, offset);
  return t;
}

struct conv_bn {
  tenet::Tensor<float, S4> w;
  tenet::Tensor<float, C3> scale, shift;
  conv_bn(int seed, std::int64_t out, std::int64_t in, std::int64_t k)
      : w(make_param<S4>(seed, std::sqrt(2.0 / static_cast<double>(in * k * k)), 0.0, out, in, k, k)),
        scale(make_param<C3>(seed + 1, 0.25, 1.0, out)),
        shift(make_param<C3>(seed + 2, 0.1, 0.0, out)) {}
  /// The parameters on device d.
  void to(tenet::device d) {
    w = w.to(d);
    scale = scale.to(d);
    shift = shift.to(d);
  }
};

struct stage1 {
  conv_bn stem{1, 64, 3, 7};
  conv_bn blocks[4] = {{11, 64, 64, 3}, {21, 64, 64, 3}, {31, 64, 64, 3}, {41, 64, 64, 3}};

  /// Moves every parameter to device d (x must then live there too).
  void to(tenet::device d) {
    stem.to(d);
    for (auto& b : blocks) b.to(d);
  }

  tenet::Tensor<float, S4> operator()(const tenet::Tensor<float, S4>& x) const {
    using namespace tenet;
    Tensor<float, S4> y = relu(conv2d(x, stem.w, {.stride = 2, .padding = 3}) * stem.scale + stem.shift);
    y = max_pool2d(y, 3, {.stride = 2, .padding = 1});
    for (int b = 0; b < 2; ++b) {
      const conv_bn& c1 = blocks[2 * b];
      const conv_bn& c2 = blocks[2 * b + 1];
      Tensor<float, S4> z = relu(conv2d(y, c1.w, {.padding = 1}) * c1.scale + c1.shift);
      y = relu(conv2d(z, c2.w, {.padding = 1}) * c2.scale + c2.shift + y);
    }
    return y;
  }
};

}  // namespace resnet
