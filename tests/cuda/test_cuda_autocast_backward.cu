// The backward of an autocast forward (graph.hpp: a node's backward runs under the autocast state
// it was written with; backend/cuda/autograd.cuh: the fused linear weight + bias gradient GEMM in
// the low dtype): loss.backward() called after the guard, as torch's recipe does, should still run
// the gradient products in bf16 / fp16, so that the float32 parameters' gradients are bf16 / fp16
// values (torch's: a bf16 gradient cast to float32).
// Also the sums that give a broadcast operand its gradient (the bias-gradient reductions of a
// training step).
#include <catch2/catch.hpp>

#include <cstdint>

#include <tenet/cuda.hpp>

#include "check_close.hpp"

namespace {
using namespace tenet;
using tenet::test::gpu;
using F1 = Tensor<float, dyn_shape<1>>;
using F2 = Tensor<float, dyn_shape<2>>;

template <class L>
bool every_value_is(const F2& g) {
  const auto h = g.cpu();
  for (std::int64_t i = 0; i < h.numel(); ++i)
    if (static_cast<float>(static_cast<L>(h.data()[i])) != h.data()[i]) return false;
  return true;
}
}  // namespace

// Found at stop 45 (issue 32) as a known bug: here the gradients came out as float32 sums, not
// bf16 values. The cause (stop 46): gelu's decomposition reads its input four times, and the
// backward walked into a shared subexpression once per use, so linear's backward (its GEMMs) ran
// four times, each on a partial gradient rounded to bf16 on its own, and the four results were
// added in float32. The walk now sums a shared subexpression's gradients first and descends once
// (autograd/vjp.hpp, backprop_root), as torch's single gelu backward does.
TEST_CASE("cuda autocast: the backward of an autocast 2-D linear + gelu runs its products in the low dtype",
          "[autocast]") {
  manual_seed(31);
  const F2 x0 = randn<float, dyn_shape<2>>(256, 96).to(gpu), w0 = randn<float, dyn_shape<2>>(80, 96).to(gpu),
           u = randn<float, dyn_shape<2>>(256, 80).to(gpu);
  const F1 b0 = randn<float, dyn_shape<1>>(80).to(gpu);
  F2 x = x0.clone(), w = w0.clone();
  F1 b = b0.clone();
  x.requires_grad_(), w.requires_grad_(), b.requires_grad_();
  F2 y;
  {
    autocast ac(gpu, dtype::bfloat16);
    y = gelu(linear(x, w, b), approximate_tanh);
  }
  Tensor<float, shape<>> loss = sum(y * u);
  loss.backward();
  // the products (dx = g w, dw = gᵀ x with db from its epilogue) round to bf16
  CHECK(every_value_is<bfloat16>(F2(x.grad())));
  CHECK(every_value_is<bfloat16>(F2(w.grad())));
  CHECK(every_value_is<bfloat16>(F2(F1(b.grad()).reshape<1, -1>())));
}

// Passed on an H200 at stop 45: without autocast the gradients are float32 products, and a node
// written outside any guard runs its backward without autocast even when backward() is called
// inside one.
TEST_CASE("cuda autocast: nodes written outside a guard run their backward without it", "[autocast]") {
  manual_seed(31);
  const F2 x0 = randn<float, dyn_shape<2>>(256, 96).to(gpu), w0 = randn<float, dyn_shape<2>>(80, 96).to(gpu),
           u = randn<float, dyn_shape<2>>(256, 80).to(gpu);
  F2 w = w0.clone();
  w.requires_grad_();
  F2 y = linear(x0, w);
  Tensor<float, shape<>> loss = sum(y * u);
  {
    autocast ac(gpu, dtype::bfloat16);
    loss.backward();
  }
  CHECK_FALSE(every_value_is<bfloat16>(w.grad()));
}

// The gradient of a broadcast operand is g summed over the broadcast dims (sum_to_into,
// backend/cuda/autograd.cuh); with the summed dims leading and g contiguous it runs as a column
// sum in two passes. Against the CPU's sums, in double on both sides, for float and double.
TEST_CASE("cuda autograd: broadcast gradients summed over leading dims (the column-sum path) and others") {
  manual_seed(41);
  using F3 = Tensor<float, dyn_shape<3>>;
  const F3 x0 = randn<float, dyn_shape<3>>(300, 4, 40), u0 = randn<float, dyn_shape<3>>(300, 4, 40);
  auto grads = [&](device d) {
    const F3 x = x0.to(d), u = u0.to(d);
    manual_seed(3);
    // b: the column-sum path (300 rows summed); c: a kept dim before a summed one; r: the row-sum
    // path (the trailing 40 summed, keepdim: LayerNorm's statistics)
    Tensor<float, dyn_shape<2>> b = randn<float, dyn_shape<2>>(4, 40).to(d);
    Tensor<float, dyn_shape<3>> c = randn<float, dyn_shape<3>>(300, 1, 40).to(d);
    Tensor<float, dyn_shape<3>> r = randn<float, dyn_shape<3>>(300, 4, 1).to(d);
    b.requires_grad_(), c.requires_grad_(), r.requires_grad_();
    Tensor<float, shape<>> loss = sum((x + b + c + r) * u);
    loss.backward();
    return std::make_tuple(Tensor<float, dyn_shape<2>>(b.grad()).cpu(), F3(c.grad()).cpu(), F3(r.grad()).cpu());
  };
  const auto [bg, cg, rg] = grads(gpu);
  const auto [bc, cc, rc] = grads(tenet::cpu);
  using tenet::test::check_close;
  check_close(bg.to(gpu), bc, 1e-6, 1e-5);
  check_close(cg.to(gpu), cc, 1e-6, 1e-5);
  check_close(rg.to(gpu), rc, 1e-6, 1e-5);
}
