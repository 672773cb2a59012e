// With static options and static channel counts, an input whose channels do not fit the
// convolution's in_channels is a compile-time error naming both shapes.
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  const Tensor<float, shape<dyn, 3, 8, 8>> x = zeros<float, shape<dyn, 3, 8, 8>>(2);
#ifndef TENET_COMPILE_FAIL_CONTROL
  nn::Conv2d<4, 8, 3, conv2d_options{.stride = 2}> conv;
#else
  nn::Conv2d<3, 8, 3, conv2d_options{.stride = 2}> conv;
#endif
  Tensor<float, shape<dyn, 8, 3, 3>> y = conv(x);
  return static_cast<int>(y.numel() == 0);
}
// EXPECT: conv_channel_mismatch<[^<>]*shape<[^<>]*dyn[^<>]*, 3, 8, 8>, [^<>]*shape<8, 4, 3, 3>, [^<>]*extents<3, 4>
// EXPECT: convolution channel mismatch
