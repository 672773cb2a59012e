// Negating a bool tensor is an error, as in PyTorch (use logical_not).
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto m = ones<bool, shape<2, 3>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  Tensor<bool, shape<2, 3>> n = -m;
#else
  Tensor<bool, shape<2, 3>> n = logical_not(m);
#endif
  return static_cast<int>(n.numel() == 0);
}
// EXPECT: negation of a bool tensor is not supported
// EXPECT: logical_not
