// scaled_dot_product_attention with a mask of (5, 6) for scores of (.., 5, 7).
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto q = zeros<float, shape<2, 4, 5, 16>>();
  auto k = zeros<float, shape<2, 4, 7, 16>>();
  auto v = zeros<float, shape<2, 4, 7, 8>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  auto mask = zeros<float, shape<5, 6>>();
#else
  auto mask = zeros<float, shape<5, 7>>();
#endif
  Tensor<float, shape<2, 4, 5, 8>> y = scaled_dot_product_attention(q, k, v, mask);
  return static_cast<int>(y.numel() == 0);
}
// EXPECT: cannot_broadcast
