// sort<-3> of a rank-2 tensor: dim -3 is out of range.
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto a = ones<float, shape<2, 3>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  auto s = sort<-3>(a);
#else
  auto s = sort<-2>(a);
#endif
  return static_cast<int>(s.values.numel() == 0);
}
// EXPECT: invalid_scan_dim
// EXPECT: dim<-3>
