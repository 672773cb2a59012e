// Autograd of bfloat16 CUDA tensors against the CPU's 16-bit backward from the same values (both
// compute each kernel in float and round per prim; sums differ in order, so the tolerance is 8
// units of the 16-bit precision at the gradient's scale: autograd_checks.hpp), and a float leaf
// used through a 16-bit cast (fp32 master weights) getting its float gradient. bfloat16 only: the
// kernels are the same code for float16 (one more instantiation of every VJP here, about 50 s of
// a CI core), whose gradients tests/test_autograd_half.cpp checks on the CPU and whose training
// test_cuda_autograd_train.cu runs on the GPU.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include <tenet/cuda.hpp>

#include "autograd_checks.hpp"

using namespace tenet;
using namespace tenet::test;

namespace {

template <class T>
void half_block_on_both() {
  manual_seed(21);
  M<float> x0 = randn<float, dyn_shape<2>>(16, 32);
  M<float> w0 = randn<float, dyn_shape<2>>(24, 32) * 0.2f;
  V1<float> b0 = randn<float, dyn_shape<1>>(24);
  V1<float> g0 = randn<float, dyn_shape<1>>(24) * 0.1f + 1.0f;
  V1<std::int64_t> target = remainder(arange<std::int64_t>(0, 16) * std::int64_t{7}, std::int64_t{24});
  const M<T> xh = x0.to<T>();
  const M<T> wh = w0.to<T>();
  const V1<T> bh = b0.to<T>();
  const V1<T> gh = g0.to<T>();
  auto run = [&](device d, std::vector<M<T>>& m, std::vector<V1<T>>& v, std::vector<M<float>>& f) {
    auto x = leaf(xh, d);
    auto w = leaf(wh, d);
    auto b = leaf(bh, d);
    auto g = leaf(gh, d);
    M<T> h = gelu(linear(x, w, b));
    M<T> n = layer_norm(h, g, b);
    S0<T> loss = cross_entropy(n, d.is_cpu() ? target : target.to(d)) + mean(softmax<1>(h) * h);
    loss.backward();
    CHECK(x.grad().device() == d);
    m.push_back(x.grad());
    m.push_back(w.grad());
    v.push_back(b.grad());
    v.push_back(g.grad());
    // fp32 master weights: a float leaf cast to T inside the expression gets a float gradient
    auto wf = leaf(w0, d);
    S0<T> l2 = sum(linear(x.detach(), cast<T>(wf)) * T(0.5f));
    l2.backward();
    f.push_back(wf.grad());
  };
  std::vector<M<T>> mc, mg;
  std::vector<V1<T>> vc, vg;
  std::vector<M<float>> fc, fg;
  run(tenet::cpu, mc, vc, fc);
  run(gpu, mg, vg, fg);
  check_same(mg[0], mc[0], "dx");
  check_same(mg[1], mc[1], "dw");
  check_same(vg[0], vc[0], "db");
  check_same(vg[1], vc[1], "dgamma");
  check_same(fg[0], fc[0], "the float master weight's gradient");
}

}  // namespace

TEST_CASE("cuda autograd: bfloat16 tensors (linear, gelu, layer_norm, cross_entropy, softmax)") {
  half_block_on_both<bfloat16>();
}
