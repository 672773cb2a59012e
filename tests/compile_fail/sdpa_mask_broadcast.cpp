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
  auto y = scaled_dot_product_attention(q, k, v, mask);
  // The error is the expression's own; the control stops at its shape (evaluating it would only
  // cost compile time: the attention kernels for one more set of operand types).
  static_assert(std::is_same_v<shape_of<decltype(y)>, shape<2, 4, 5, 8>>);
  return static_cast<int>(y.sizes()[0] == 0);
}
// EXPECT: cannot_broadcast
