// TENET_MODULE names a member that is neither a Tensor nor an nn::Module (an int): a compile error
// saying what it registers.
#include <tenet/tenet.hpp>

using namespace tenet;

struct Net : nn::Module {
  nn::Linear<2, 2> fc;
  int steps = 0;
#ifndef TENET_COMPILE_FAIL_CONTROL
  TENET_MODULE(fc, steps);
#else
  TENET_MODULE(fc);
#endif
};

int main() {
  Net n;
  return static_cast<int>(n.named_parameters().size() != 2);
}
// EXPECT: TENET_MODULE / TENET_MODULE_BUFFERS name Tensor and nn::Module members only
