// func::grad of a function whose output is not a scalar (torch.func.grad's rule): a compile error
// pointing at vjp / jacrev.
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  Tensor<float, shape<3>> x = zeros<float, shape<3>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  auto g = func::grad([](const auto& a) { return a * a; })(x);
#else
  auto g = func::grad([](const auto& a) { return sum(a * a); })(x);
#endif
  return static_cast<int>(g.numel() == 0);
}
// EXPECT: func::grad: f must return a scalar
