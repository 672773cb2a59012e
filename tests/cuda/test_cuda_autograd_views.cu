// CUDA autograd tests, part 4: views (transpose, permute, strided slice, reshape of a
// non-contiguous view, a non-contiguous leaf), gradients on cuda(0) against the CPU backend's.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <tenet/cuda.hpp>

#include "autograd_checks.hpp"

using namespace tenet;
using namespace tenet::test;

namespace {

// --- views ------------------------------------------------------------------------------------
template <class T>
struct view_grads {
  M<T> x, leaf_t;
  Tensor<T, dyn_shape<3>> x3;
};
template <class T>
view_grads<T> view_case(const M<T>& x0, const M<T>& base0, const Tensor<T, dyn_shape<3>>& x30, device d) {
  auto x = leaf(x0, d);    // (m, n)
  auto x3 = leaf(x30, d);  // (p, q, r)
  // a non-contiguous leaf: the transpose of a device tensor, requiring grad itself
  M<T> base = d.is_cpu() ? base0.detach().clone() : base0.detach().to(d);
  auto lt = base.template transpose<0, 1>();  // (m, n) over an (n, m) tensor
  lt.requires_grad_();
  auto xt = x.template transpose<0, 1>();                  // (n, m) view
  auto every_other = x.template slice<1>(1, x.sizes()[1], 2);  // strided, not covering the base
  M<T> a = xt * 2.0 + lt.template transpose<0, 1>() * x.template transpose<0, 1>();
  M<T> b = every_other * every_other;
  V1<T> flat = x.template transpose<0, 1>().template reshape<dyn>(x.numel());  // reshape of a non-contiguous view
  auto p = x3.template permute<2, 0, 1>();
  Tensor<T, dyn_shape<3>> pq = exp(p) * 0.5;
  S0<T> loss = sum(a * a) + sum(b) + sum(flat * flat * flat) + sum(pq * pq);
  loss.backward();
  return {x.grad(), lt.grad(), x3.grad()};
}

template <class T>
void run_views() {
  manual_seed(13);
  const std::int64_t m = 9, n = 14;
  M<T> x = randn<T, dyn_shape<2>>(m, n);
  M<T> base = randn<T, dyn_shape<2>>(n, m);
  Tensor<T, dyn_shape<3>> x3 = randn<T, dyn_shape<3>>(3, 5, 7);
  const auto c = view_case<T>(x, base, x3, tenet::cpu);
  const auto g = view_case<T>(x, base, x3, gpu);
  check_same(g.x, c.x, "d x through transpose, strided slice, reshape");
  check_same(g.leaf_t, c.leaf_t, "d of a transposed leaf");
  check_same(g.x3, c.x3, "d x3 through permute");
  CHECK(g.leaf_t.sizes() == c.leaf_t.sizes());
}

}  // namespace

TEST_CASE("cuda autograd: views (transpose, permute, strided slice, reshape, a non-contiguous leaf)") {
  run_views<float>();
  run_views<double>();
}

