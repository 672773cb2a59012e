// The CUDA backend's header in a translation unit the host compiler builds: a compile error that
// says to compile the file with nvcc and TENET_CUDA=ON.
#ifndef TENET_COMPILE_FAIL_CONTROL
#include <tenet/cuda.hpp>
#else
#include <tenet/tenet.hpp>
#endif

int main() { return static_cast<int>(tenet::device(tenet::cuda(1)).index != 1); }
// EXPECT: tenet/cuda.hpp needs nvcc
// EXPECT: TENET_CUDA=ON
