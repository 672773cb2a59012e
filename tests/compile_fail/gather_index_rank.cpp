// gather with an index of another rank than the input: torch needs equal ranks.
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto x = ones<float, shape<3, 4>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  auto idx = zeros<std::int64_t, shape<3>>();
#else
  auto idx = zeros<std::int64_t, shape<3, 1>>();
#endif
  auto g = eval(gather<1>(x, idx));
  return static_cast<int>(g.numel() == 0);
}
// EXPECT: the index must have the same rank as the tensor it indexes
