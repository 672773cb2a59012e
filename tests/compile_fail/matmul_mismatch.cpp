// matmul of shape<2, 3> by shape<4, 5>: the inner extents (3 and 4) differ.
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto a = zeros<float, shape<2, 3>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  auto b = zeros<float, shape<4, 5>>();
#else
  auto b = zeros<float, shape<3, 5>>();
#endif
  Tensor<float, shape<2, 5>> c = matmul(a, b);
  return static_cast<int>(c.numel() == 0);
}
// EXPECT: cannot_matmul
// EXPECT: matmul shape mismatch
