#include <tenet/tenet.hpp>
#include <iostream>
using namespace tenet;

int main() {
  manual_seed(0);
  auto x = randn<float, shape<dyn, 3>>(4);             // a batch of 4 rows; 4 is known at run time
  Tensor<float, shape<3, 2>> w = ones<float, shape<3, 2>>() * 0.5f;
  Tensor<float, shape<dyn, 2>> y = relu(matmul(x, w) + 1.0f);  // evaluated here, in one pass
  std::cout << y << "\n";                                // printed as PyTorch prints it
  std::cout << y.t() << "\n";                            // t() is a view: no copy
  std::cout << Tensor<float, shape<2>>(sum<0>(y)) << "\n"; // an expression is lazy until stored
  // auto bad = matmul(w, w);  // compile error: matmul shape mismatch (shape<3, 2> · shape<3, 2>)
  return 0;
}
