// What runs for an expression, without running it: the ATen graph, the prim graph the CPU backend
// runs (composites it runs natively marked), the fully decomposed graph, and op counts by group.
// docs/explain.md shows this program's output.
#include <tenet/tenet.hpp>

#include <iostream>

using namespace tenet;

int main() {
  auto x = randn<float, shape<dyn, 64>>(8);
  auto w = randn<float, shape<64, 16>>();
  auto y = log_softmax<-1>(gelu(matmul(x, w) * 0.125f + 1.0f));
  std::cout << explain(y);
  std::cout << "\n" << to_dot(sigmoid(x) * 2.0f);
  return 0;
}
