// cumsum<2> of a rank-2 tensor: dim 2 is out of range.
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto a = ones<float, shape<2, 3>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  Tensor<float, shape<2, 3>> s = cumsum<2>(a);
#else
  Tensor<float, shape<2, 3>> s = cumsum<1>(a);
#endif
  return static_cast<int>(s.numel() == 0);
}
// EXPECT: invalid_scan_dim
// EXPECT: out of range
