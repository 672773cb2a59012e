// With static options, a window larger than a static input's padded extent is a compile-time
// error naming the input shape, the dim and both extents (with run-time extents: a shape_error).
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  const Tensor<float, shape<dyn, 3, 4, 6>> x = zeros<float, shape<dyn, 3, 4, 6>>(2);
#ifndef TENET_COMPILE_FAIL_CONTROL
  nn::Conv2d<3, 8, 5, conv2d_options{}> conv;                    // 5 rows against 4
#else
  nn::Conv2d<3, 8, 5, conv2d_options{.padding = {1, 0}}> conv;   // 5 rows against 4 + 2
#endif
  Tensor<float, shape<dyn, 8, dyn, 2>> y = conv(x);
  return static_cast<int>(y.numel() == 0);
}
// EXPECT: window_larger_than_input<[^<>]*shape<[^<>]*dyn[^<>]*, 3, 4, 6>, [^<>]*dim<2>, [^<>]*extents<5, 4>
// EXPECT: output extent would not be positive
