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
  Tensor<T, dyn_shape<3>> x3, qkv;
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
  // attention's heads: three (B, H, T, D) views of one (B, T, 3C) projection, each a transpose of
  // a reshape of a narrow (a view of a strided view; the device copies each gradient once through
  // its layout relative to the strided base, ag::relative_layout)
  auto qkv = leaf(Tensor<T, dyn_shape<3>>(x30.template narrow<2>(0, 6).contiguous()), d);  // (3, 5, 6)
  auto head = [&](std::int64_t h) {
    return qkv.template narrow<2>(2 * h, 2).template reshape<dyn, dyn, 2, 1>(3, 5).template transpose<1, 2>();
  };
  S0<T> heads = sum(head(0) * head(0)) + sum(head(1) * head(1) * 2.0) + sum(head(2) * head(2) * 3.0);
  S0<T> loss = sum(a * a) + sum(b) + sum(flat * flat * flat) + sum(pq * pq) + heads;
  loss.backward();
  return {x.grad(), lt.grad(), x3.grad(), qkv.grad()};
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
  check_same(g.qkv, c.qkv, "d qkv through attention-style head views (transpose of a reshape of a narrow)");
  // and the value: d sum((h + 1) head_h^2) / d qkv[..., 2h + j] = 2 (h + 1) qkv[..., 2h + j]
  const Tensor<T, dyn_shape<3>> q0 = x3.template narrow<2>(0, 6).contiguous();
  const auto gq = c.qkv.contiguous();
  for (std::int64_t i = 0; i < q0.numel(); ++i)
    CHECK(static_cast<double>(gq.data()[i]) ==
          Approx(2.0 * static_cast<double>(i % 6 / 2 + 1) * static_cast<double>(q0.data()[i])).epsilon(1e-5));
  CHECK(g.leaf_t.sizes() == c.leaf_t.sizes());
}

}  // namespace

TEST_CASE("cuda autograd: views (transpose, permute, strided slice, reshape, a non-contiguous leaf)") {
  run_views<float>();
  run_views<double>();
}

// embedding(idx, w, padding_idx) on the GPU: the gather's gradient skips the padding positions
// (a where inside the scatter_add's source), as on the CPU and in torch
TEST_CASE("cuda autograd: embedding with padding_idx sends no gradient to the padding row") {
  manual_seed(14);
  M<float> w0 = randn<float, dyn_shape<2>>(7, 5);
  Tensor<float, dyn_shape<3>> u0 = randn<float, dyn_shape<3>>(2, 4, 5);
  Tensor<std::int64_t, dyn_shape<2>> idx({2, 4});
  const std::int64_t iv[] = {3, 0, 3, 6, 1, 3, 3, 2};
  for (int i = 0; i < 8; ++i) idx.data()[i] = iv[i];
  auto grad_on = [&](device d) {
    auto w = leaf(w0, d);
    const auto u = d.is_cpu() ? u0 : u0.to(d);
    const auto ix = d.is_cpu() ? idx : idx.to(d);
    S0<float> loss = sum(embedding(ix, w, 3) * u);
    loss.backward();
    return w.grad();
  };
  const M<float> c = grad_on(tenet::cpu), g = grad_on(gpu);
  check_same(g, c, "d w of embedding with padding_idx");
  const M<float> gh = g.cpu();
  for (std::int64_t j = 0; j < 5; ++j) CHECK(gh(3, j) == 0.0f);
}

// t.to(device) is differentiable (as torch's .to): the copy's gradient goes back to the source's
// device, through any number of moves; a detached copy is not tracked.
TEST_CASE("cuda autograd: t.to(device) and t.cpu() pass gradients back across devices") {
  manual_seed(17);
  const M<double> w0 = randn<double, dyn_shape<2>>(7, 5), y0 = randn<double, dyn_shape<2>>(7, 5);
  // a CPU leaf used on the GPU
  auto w = leaf(w0, tenet::cpu);
  const M<double> wg = w.to(gpu);
  CHECK(wg.requires_grad());
  CHECK_FALSE(wg.is_leaf());
  S0<double> loss = sum(wg * wg * y0.to(gpu));
  loss.backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().device().is_cpu());
  const M<double> expect = w0 * y0 * 2.0;
  for (std::int64_t i = 0; i < expect.numel(); ++i) CHECK(std::abs(w.grad().data()[i] - expect.data()[i]) < 1e-12);
  // a GPU leaf used on the CPU, and a round trip (GPU -> CPU -> GPU), a transposed (non-contiguous) source
  auto v = leaf(w0, gpu);
  S0<double> l2 = S0<double>(sum(v.t().cpu() * y0.t())).to(gpu) + sum(v.cpu().to(gpu) * 3.0);
  l2.backward();
  REQUIRE(v.grad().defined());
  CHECK(v.grad().device() == gpu);
  const M<double> vg = v.grad().cpu();
  for (std::int64_t i = 0; i < vg.numel(); ++i) CHECK(std::abs(vg.data()[i] - (y0.data()[i] + 3.0)) < 1e-12);
  // detach() and no_grad: nothing recorded
  CHECK_FALSE(v.detach().cpu().requires_grad());
  {
    no_grad off;
    CHECK_FALSE(v.cpu().requires_grad());
  }
}
