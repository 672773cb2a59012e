// A float expression assigned to an int64 tensor: no implicit narrowing (convert with cast<T>).
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto x = ones<float, shape<2, 3>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  Tensor<std::int64_t, shape<2, 3>> y = x * 2.0f;
#else
  Tensor<std::int64_t, shape<2, 3>> y = cast<std::int64_t>(x * 2.0f);
#endif
  return static_cast<int>(y.numel() == 0);
}
// EXPECT: dtype differs
