// Uses tenet's CUDA backend through its installed package only (tenet::cuda of
// find_package(tenet COMPONENTS cuda); see tests/install_consumer/CMakeLists.txt). Exit 77 where
// there is no GPU: built, not run.
#include <tenet/cuda.hpp>

#include <cstdio>

int main() {
  if (!tenet::cuda::is_available()) {
    std::puts("tenet_install_consumer_cuda: no CUDA device here; built, not run (exit code 77)");
    return 77;
  }
  using S = tenet::shape<2, 3>;
  tenet::Tensor<float, S> a = tenet::ones<float, S>().to(tenet::cuda(0));
  tenet::Tensor<float, S> b = a * 3.0f + a;  // one fused kernel on cuda:0
  if (b.device() != a.device()) return 1;
  tenet::Tensor<float, S> h = b.cpu();
  return h(1, 2) == 4.0f ? 0 : 1;
}
