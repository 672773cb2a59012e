// A CNN with static conv/pool options: the flattened features have a static count (8 * 6 * 6 = 288),
// so a Linear of the wrong in_features (8 * 3 * 3 = 72) is a compile-time error naming both shapes.
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  nn::Conv2d<1, 8, 3, conv2d_options{.padding = 1}> conv;  // (N, 1, 12, 12) -> (N, 8, 12, 12)
  nn::StaticMaxPool2d<2> pool;                             // -> (N, 8, 6, 6)
#ifndef TENET_COMPILE_FAIL_CONTROL
  nn::Linear<8 * 3 * 3, 10> fc;
#else
  nn::Linear<8 * 6 * 6, 10> fc;
#endif
  const Tensor<float, shape<dyn, 1, 12, 12>> x = zeros<float, shape<dyn, 1, 12, 12>>(2);
  Tensor<float, shape<dyn, 10>> y = fc(flatten<1>(pool(relu(conv(x)))));
  return static_cast<int>(y.numel() == 0);
}
// EXPECT: cannot_matmul
// EXPECT: shape<[^<>]*dyn[^<>]*, 288>
// EXPECT: shape<72, 10>
