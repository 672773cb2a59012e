// A two-layer MLP forward pass on a batch of MNIST-sized inputs:
//   logits = gelu(x W1 + b1) W2 + b2,  log-probabilities = log_softmax over the classes.
// The batch size is a run-time extent (dyn); every other extent is static, so a wrong weight
// shape is a compile-time error that names both shapes.
#include <cstdint>
#include <iostream>

#include <tenet/tenet.hpp>

using namespace tenet;

int main(int argc, char** argv) {
  const std::int64_t batch = argc > 1 ? std::stoll(argv[1]) : 32;
  manual_seed(0);

  auto x = randn<float, shape<dyn, 784>>(batch);
  // weights scaled by 1/sqrt(fan_in), as nn.Linear's initialisation keeps activations O(1)
  Tensor<float, shape<784, 256>> w1 = randn<float, shape<784, 256>>() * (1.0f / 28.0f);
  auto b1 = zeros<float, shape<256>>();
  Tensor<float, shape<256, 10>> w2 = randn<float, shape<256, 10>>() * (1.0f / 16.0f);
  auto b2 = zeros<float, shape<10>>();

  Tensor<float, shape<dyn, 256>> h = gelu(matmul(x, w1) + b1);
  Tensor<float, shape<dyn, 10>> logp = log_softmax<-1>(matmul(h, w2) + b2);
  Tensor<std::int64_t, shape<dyn>> pred = argmax<1>(logp);

  std::cout << "input  " << x.sizes()[0] << " x " << x.sizes()[1] << "\n";
  std::cout << "hidden " << h.sizes()[0] << " x " << h.sizes()[1] << "\n";
  std::cout << "output " << logp.sizes()[0] << " x " << logp.sizes()[1] << "\n";
  std::cout << "log-probabilities of sample 0:\n" << logp.select<0>(0) << "\n";
  std::cout << "predictions:\n" << pred << "\n";

  // each row of exp(log_softmax) sums to 1
  Tensor<float, shape<dyn>> total = sum<1>(exp(logp));
  for (std::int64_t i = 0; i < batch; ++i)
    if (total(i) < 0.999f || total(i) > 1.001f) return 1;
  return 0;
}
