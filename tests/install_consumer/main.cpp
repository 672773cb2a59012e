// Uses tenet through its installed package only (see tests/install_consumer/CMakeLists.txt).
#include <tenet/tenet.hpp>

int main() {
  tenet::Tensor<float, tenet::shape<2, 3>> a = tenet::ones<float, tenet::shape<2, 3>>();
  tenet::Tensor<float, tenet::shape<2, 3>> b = a + a;
  return b(1, 2) == 2.0f ? 0 : 1;
}
