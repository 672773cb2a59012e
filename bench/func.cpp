// bench-workloads: func_jacrev_tanh_mlp256 func_jacfwd_tanh_mlp256 func_hessian_64 func_per_sample_grad_mlp784_b64
// Issue 33's function-transform benchmarks (tenet::func, docs/func.md), float32:
//   func_jacrev_tanh_mlp256 / func_jacfwd_tanh_mlp256: the 256 x 256 Jacobian of
//     x -> tanh(W2 tanh(W1 x + b1) + b2) (W 256 x 256), jacobians/s;
//   func_hessian_64: the 64 x 64 Hessian of x -> sum(tanh(W x)^2) + sum(x^4) (W 64 x 64), hessians/s;
//   func_per_sample_grad_mlp784_b64: the gradients of an MLP 784 -> 512 -> 10's cross_entropy
//     loss with respect to its parameters for each of 64 samples, batches/s: tenet's vmap(grad)
//     with the batching rules (func::batching: one batched backward pass), as
//     tenet-per-sample-vmap the plain vmap (grad per sample, stacked) and, as tenet-loop, a plain
//     loop of func::grad over functional_call (torch's row: vmap(grad)).
// The tenet rows of jacrev / jacfwd / hessian use func::batching (one batched pass, as torch.func
// batches with vmap); tenet-unbatched is the same transform without it (one backward pass per
// output element, one tangent pass per input element).
#define TENET_AUTOGRAD 2  // hessian differentiates a recorded backward
#include <tenet/tenet.hpp>

#include "harness.hpp"

using namespace tenet;

struct per_sample_mlp : nn::Module {
  nn::Linear<784, 512> fc1;
  nn::Linear<512, 10> fc2;
  per_sample_mlp() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  template <Expression X>
  auto operator()(const X& x) const {
    return fc2(relu(fc1(x)));
  }
};

int main() {
  manual_seed(0);
  {
    using V = Tensor<float, shape<256>>;
    using M = Tensor<float, shape<256, 256>>;
    const M w1 = randn<float, shape<256, 256>>() * (1.0f / 16), w2 = randn<float, shape<256, 256>>() * (1.0f / 16);
    const V b1 = randn<float, shape<256>>(), b2 = randn<float, shape<256>>(), x = randn<float, shape<256>>();
    auto f = [&](const auto& v) { return tanh(matmul(w2, tanh(matmul(w1, v) + b1)) + b2); };
    // func::batching: every row (jacrev) or column (jacfwd) in one batched pass
    const double tr = bench::measure([&] { bench::do_not_optimize(func::jacrev(f, func::batching)(x).data()); });
    bench::report("func_jacrev_tanh_mlp256", "tenet", "jacobians/s", 1.0 / tr);
    const double tf = bench::measure([&] { bench::do_not_optimize(func::jacfwd(f, func::batching)(x).data()); });
    bench::report("func_jacfwd_tanh_mlp256", "tenet", "jacobians/s", 1.0 / tf);
    // without it: one backward / tangent pass per row / column
    const double ur = bench::measure([&] { bench::do_not_optimize(func::jacrev(f)(x).data()); });
    bench::report("func_jacrev_tanh_mlp256", "tenet-unbatched", "jacobians/s", 1.0 / ur);
    const double uf = bench::measure([&] { bench::do_not_optimize(func::jacfwd(f)(x).data()); });
    bench::report("func_jacfwd_tanh_mlp256", "tenet-unbatched", "jacobians/s", 1.0 / uf);
  }
  {
    const Tensor<float, shape<64, 64>> w = randn<float, shape<64, 64>>() * 0.125f;
    const Tensor<float, shape<64>> x = randn<float, shape<64>>();
    auto g = [&](const auto& v) { return sum(pow(tanh(matmul(w, v)), 2.0f)) + sum(pow(v, 4.0f)); };
    const double t = bench::measure([&] { bench::do_not_optimize(func::hessian(g, func::batching)(x).data()); });
    bench::report("func_hessian_64", "tenet", "hessians/s", 1.0 / t);
    const double u = bench::measure([&] { bench::do_not_optimize(func::hessian(g)(x).data()); });
    bench::report("func_hessian_64", "tenet-unbatched", "hessians/s", 1.0 / u);
  }
  {
    per_sample_mlp model;
    const auto xs = randn<float, shape<64, 784>>();
    const auto ys = randint<std::int64_t, shape<64>>(0, 10);
    const func::tensor_map params = func::parameters(model);
    auto loss = [&](const func::tensor_map& p, const auto& x, const auto& y) {
      return cross_entropy(func::functional_call(model, p, x), y);
    };
    auto grad_loss = func::grad(loss);
    const double t = bench::measure([&] {
      for (std::int64_t i = 0; i < 64; ++i) {
        // one sample as a batch of one (torch's per-sample recipe unsqueezes it too)
        Tensor<float, shape<1, 784>> x = xs.narrow<0>(i, 1);
        Tensor<std::int64_t, shape<1>> y = ys.narrow<0>(i, 1);
        func::tensor_map g = grad_loss(params, x, y);
        bench::do_not_optimize(g.size());
      }
    });
    bench::report("func_per_sample_grad_mlp784_b64", "tenet-loop", "batches/s", 1.0 / t);
    // the same through vmap(grad) over the parameters as tensors (vmap stacks each gradient)
    const auto w1 = model.fc1.weight.detach();
    const auto w2 = model.fc2.weight.detach();
    const auto b1 = model.fc1.bias.detach();
    const auto b2 = model.fc2.bias.detach();
    auto sample_loss = [](const auto& a1, const auto& c1, const auto& a2, const auto& c2, const auto& x, const auto& y) {
      return cross_entropy(linear(relu(linear(x.template unsqueeze<0>(), a1, c1)), a2, c2), y.template unsqueeze<0>());
    };
    auto per_sample = func::vmap(func::grad(sample_loss, func::argnums<0, 1, 2, 3>),
                                 func::in_dims<func::none, func::none, func::none, func::none, 0, 0>);
    const double tv = bench::measure([&] { bench::do_not_optimize(std::get<0>(per_sample(w1, b1, w2, b2, xs, ys)).data()); });
    bench::report("func_per_sample_grad_mlp784_b64", "tenet-per-sample-vmap", "batches/s", 1.0 / tv);
    // vmap with the batching rules: one batched forward and backward for the 64 samples
    auto batched = func::vmap(func::grad(sample_loss, func::argnums<0, 1, 2, 3>),
                              func::in_dims<func::none, func::none, func::none, func::none, 0, 0>, func::batching);
    const double tb = bench::measure([&] { bench::do_not_optimize(std::get<0>(batched(w1, b1, w2, b2, xs, ys)).data()); });
    bench::report("func_per_sample_grad_mlp784_b64", "tenet", "batches/s", 1.0 / tb);
  }
}
