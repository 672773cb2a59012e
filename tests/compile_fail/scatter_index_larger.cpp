// scatter_add along dim 1 with an index larger than self in dim 0 (static shapes).
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto x = zeros<float, shape<3, 4>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  auto idx = zeros<std::int64_t, shape<5, 2>>();
  auto src = ones<float, shape<5, 2>>();
#else
  auto idx = zeros<std::int64_t, shape<3, 2>>();
  auto src = ones<float, shape<3, 2>>();
#endif
  auto s = eval(scatter_add<1>(x, idx, src));
  return static_cast<int>(s.numel() == 0);
}
// EXPECT: index_larger_than_input
// EXPECT: dim<0>
