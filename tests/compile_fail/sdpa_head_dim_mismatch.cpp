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
  auto y = scaled_dot_product_attention(q, k, v);
  // The error is the expression's own; the control stops at its shape (evaluating it would only
  // cost compile time: the attention kernels for one more set of operand types).
  static_assert(std::is_same_v<shape_of<decltype(y)>, shape<2, 4, 5, 8>>);
  return static_cast<int>(y.sizes()[0] == 0);
}
// EXPECT: cannot_attend
// EXPECT: scaled_dot_product_attention shape mismatch
