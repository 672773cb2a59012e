// einsum<"bij,bjk->bik"> given a 2-D second operand: its subscripts name 3 dims.
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto a = zeros<float, shape<2, 3, 4>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  auto b = zeros<float, shape<4, 5>>();
#else
  auto b = zeros<float, shape<2, 4, 5>>();
#endif
  Tensor<float, shape<2, 3, 5>> c = einsum<"bij,bjk->bik">(a, b);
  return static_cast<int>(c.numel() == 0);
}
// EXPECT: einsum: an operand's rank differs from the number of its subscripts
