// TENET_CPU_KERNELS=0 for a translation unit the host compiler builds: a compile error that says
// the switch is for units nvcc compiles (without the CUDA backend such a unit could evaluate
// nothing). The failing build defines it on its command line (the DEFINE line); the control builds
// the same file without it.
#include <tenet/tenet.hpp>

int main() {
  const auto x = tenet::tensor<float>({1.f, 2.f});
  return static_cast<int>(tenet::eval(x * 2.f).data()[1]) == 4 ? 0 : 1;
}
// DEFINE: TENET_CPU_KERNELS=0
// EXPECT: TENET_CPU_KERNELS=0
// EXPECT: units nvcc compiles
