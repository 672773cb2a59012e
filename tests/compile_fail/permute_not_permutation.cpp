// permute<0, 0, 2> names dim 0 twice: not a permutation.
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto a = ones<float, shape<2, 3, 4>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  auto p = a.permute<0, 0, 2>();
#else
  auto p = a.permute<2, 0, 1>();
#endif
  return static_cast<int>(p.numel() == 0);
}
// EXPECT: permute<...> needs each dim of the shape exactly once
// EXPECT: not_a_permutation
