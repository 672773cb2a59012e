#pragma once
// Small models shared by the tenet::func tests (test_autograd_func*.cpp).
#include <tenet/tenet.hpp>

namespace tenet_test {

/// x [.., 4] -> b(tanh(a(x))) [.., 2], float64; parameters "a.weight", "a.bias", "b.weight", "b.bias".
struct tanh_mlp : tenet::nn::Module {
  tenet::nn::Linear<4, 5, true, double> a;
  tenet::nn::Linear<5, 2, true, double> b;
  TENET_MODULE(a, b);
  template <tenet::Expression X>
  auto operator()(const X& x) const {
    return b(tenet::tanh(a(x)));
  }
};

}  // namespace tenet_test
