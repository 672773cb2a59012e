// Second order (create_graph) through cat, stack, repeat, tile, repeat_interleave and diag of a
// vector (issue 26): Hessian-vector products by double backward against finite differences of the
// first-order gradient (hesscheck.hpp). The cat node's backward slices the gradient with views,
// which create_graph records; the others are expressions of movement prims (or index_select).
#include "hesscheck.hpp"

#include <vector>

using namespace tenet;
using tenet_test::filled;
using tenet_test::hesscheck;
using V = Tensor<double, dyn_shape<1>>;
using M = Tensor<double, dyn_shape<2>>;
using I1 = Tensor<std::int64_t, shape<dyn>>;

TEST_CASE("autograd second order: cat, stack, repeat, repeat_interleave, diag", "[autograd]") {
  const M a = filled<2>({3, 4}, -1.5, 1.5), b = filled<2>({2, 4}, -1, 1, 0.3);
  const V v = filled<1>({4}, -1, 1, 0.2);
  // a gradient that depends on x on both sides of the op: y * sin(y) with y = op(...)
  auto cube = [](const auto& y) { return y * sin(y); };
  hesscheck([&](const auto& x, const auto& z) { return cube(cat<0>(x, z * z, x)); }, a, b);
  hesscheck([&](const auto& x, const auto& z) { return cube(cat<1>(x.t(), z.t())); }, a, b);
  hesscheck([&](const auto& x, const auto& z) { return cube(cat<0>(std::vector<M>{x, M(z * x.template narrow<0>(0, 2))})); },
            a, b);
  hesscheck([&](const auto& x) { return cube(stack<1>(x, exp(x))); }, a);
  hesscheck([&](const auto& x) { return cube(repeat(x, 2, 1, 2)); }, a);
  hesscheck([&](const auto& x) { return cube(tile(x.t(), 2)); }, a);
  hesscheck([&](const auto& x) { return cube(repeat_interleave<1>(x, 2)); }, a);
  hesscheck([&](const auto& x) { return cube(repeat_interleave<0>(x, I1(tensor<std::int64_t>({2, 0, 1})))); }, a);
  hesscheck([&](const auto& x) { return cube(diag(x, 1)); }, v);
  hesscheck([&](const auto& x) { return cube(diag(x * x, -2)); }, v);
}
