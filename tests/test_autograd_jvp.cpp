// Forward mode (tenet::jvp) against central finite differences in float64, and
// tenet::custom_function (a user's forward with its own VJP and JVP).
#include "gradcheck.hpp"

using namespace tenet;
using tenet_test::filled;
using tenet_test::jvpcheck;
using V = Tensor<double, dyn_shape<1>>;
using M = Tensor<double, dyn_shape<2>>;
using M3 = Tensor<double, dyn_shape<3>>;
namespace P = tenet::prim;


TEST_CASE("autograd jvp: prims and ops against finite differences", "[autograd]") {
  const M a = filled<2>({3, 4}, 0.3, 1.5);
  const M b = filled<2>({4, 2}, -1, 1, 0.2);
  const V v = filled<1>({4}, 0.5, 1.5, 0.4);
  const M3 x3 = filled<3>({2, 3, 4}, -1, 1, 0.1);
  jvpcheck([](const auto& x) { return sin(x) * exp(x) + sqrt(x) / (x + 1.0); }, a);
  jvpcheck([](const auto& x, const auto& y) { return pow(x, y) + maximum(x, y) + atan2(x, y); }, a, v);
  jvpcheck([](const auto& x) { return where(x > 0.9, log(x), tanh(x)); }, a);
  jvpcheck([](const auto& x, const auto& y) { return matmul(x, y); }, a, b);
  jvpcheck([](const auto& x) { return sum<1>(x) + prod<1>(x) + amax<1>(x) + amin<1>(x); }, a);
  jvpcheck([](const auto& x) { return softmax<1>(x) + log_softmax<0>(x); }, a);
  jvpcheck([](const auto& x) { return gelu(x) + relu(x - 0.8) + sigmoid(x); }, a);
  jvpcheck([](const auto& x) { return x.template transpose<0, 1>() * 2.0; }, a);  // a view
  jvpcheck([](const auto& x) { return cumsum<1>(x) + cumprod<1>(x) + logcumsumexp<1>(x); }, a);
  jvpcheck([](const auto& x) { return sort<1>(x, true).values * 1.0; }, x3);
  jvpcheck([](const auto& x) { return flip<1>(pad(x, {1, 2})) * 1.0; }, a);
}
