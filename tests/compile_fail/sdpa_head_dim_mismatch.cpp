// scaled_dot_product_attention of q (.., 16) with k (.., 8): E of q and k differ.
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto q = zeros<float, shape<2, 4, 5, 16>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  auto k = zeros<float, shape<2, 4, 7, 8>>();
#else
  auto k = zeros<float, shape<2, 4, 7, 16>>();
#endif
  auto v = zeros<float, shape<2, 4, 7, 8>>();
  Tensor<float, shape<2, 4, 5, 8>> y = scaled_dot_product_attention(q, k, v);
  return static_cast<int>(y.numel() == 0);
}
// EXPECT: cannot_attend
// EXPECT: scaled_dot_product_attention shape mismatch
