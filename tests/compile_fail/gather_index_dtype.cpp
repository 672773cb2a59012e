// gather with a float index: an index tensor holds int64 (or int32).
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto x = ones<float, shape<3, 4>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  auto idx = zeros<float, shape<3, 2>>();
#else
  auto idx = zeros<std::int64_t, shape<3, 2>>();
#endif
  auto g = eval(gather<1>(x, idx));
  return static_cast<int>(g.numel() == 0);
}
// EXPECT: an index tensor must hold int64
