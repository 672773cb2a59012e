// Adding tensors whose static shapes cannot broadcast is a compile-time error that names both shapes.
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  Tensor<float, shape<64, 784>> a = zeros<float, shape<64, 784>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  Tensor<float, shape<10, 784>> b = zeros<float, shape<10, 784>>();
#else
  Tensor<float, shape<1, 784>> b = zeros<float, shape<1, 784>>();
#endif
  Tensor<float, shape<64, 784>> c = a + b;
  return static_cast<int>(c.numel() == 0);
}
// EXPECT: cannot broadcast
// EXPECT: shape<64, ?784>
// EXPECT: shape<10, ?784>
