// An activation torch has no integer kernel for (elu, softplus, gelu, ...) refuses an integer
// tensor with a clear message, as torch raises "not implemented for 'Int'"; relu, relu6, hardtanh
// and clamp keep the integer dtype instead (tests/test_activations.cpp).
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto x = ones<std::int32_t, shape<2, 3>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  Tensor<float, shape<2, 3>> y = elu(x);
#else
  Tensor<float, shape<2, 3>> y = elu(x.to<float>());
#endif
  return static_cast<int>(y.numel() == 0);
}
// EXPECT: elu needs a floating tensor
// EXPECT: cast with .to<float>()
