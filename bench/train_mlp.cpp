// bench-workloads: adamw_step_mlp784 mlp_train_b256_adamw mlp_train_b256_adamw_compiled
// Workloads of issue 5's training benchmark: an MLP 784 -> 1024 -> 1024 -> 10 (nn::Linear, relu),
// fp32, AdamW (lr 1e-3, weight decay 0.01).
//   adamw_step_mlp784: the optimizer step alone (1.86 M parameters, gradients given), steps/s;
//   mlp_train_b256_adamw: one training step on a batch of 256 (forward, cross_entropy,
//                         backward, AdamW step, zero_grad), steps/s;
//   mlp_train_b256_adamw_compiled: the same step with forward and backward as one compiled graph
//                         (tenet::compile of a function returning backward_of(loss)).
#include <tenet/compile.hpp>
#include <tenet/tenet.hpp>

#include "harness.hpp"

using namespace tenet;

struct MLP : nn::Module {
  nn::Linear<784, 1024> fc1;
  nn::Linear<1024, 1024> fc2;
  nn::Linear<1024, 10> fc3;
  MLP() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  template <Expression X>
  auto operator()(const X& x) const {
    return fc3(relu(fc2(relu(fc1(x)))));
  }
};

int main() {
  manual_seed(0);
  {
    MLP model;
    optim::AdamW opt(model.parameters(), {.lr = 1e-3, .weight_decay = 0.01});
    std::vector<any_tensor> grads;
    for (auto& p : model.parameters()) {
      any_tensor g = any_tensor::zeros(p.scalar_type(), p.sizes());
      Tensor<float, shape<dyn>> f = g.flat<float>();
      f.copy_(randn<float, shape<dyn>>(f.numel()) * 1e-3f);
      grads.push_back(g);
    }
    const double t = bench::measure([&] { opt.step(grads); });
    bench::report("adamw_step_mlp784", "tenet", "steps/s", 1.0 / t);
  }
  {
    MLP model;
    optim::AdamW opt(model.parameters(), {.lr = 1e-3, .weight_decay = 0.01});
    auto x = randn<float, shape<dyn, 784>>(256);
    auto y = randint<std::int64_t, shape<dyn>>(0, 10, 256);
    const double t = bench::measure([&] {
      Tensor<float, shape<>> loss = cross_entropy(model(x), y);
      loss.backward();
      opt.step();
      opt.zero_grad();
      bench::do_not_optimize(loss.item());
    });
    bench::report("mlp_train_b256_adamw", "tenet", "steps/s", 1.0 / t);
  }
  {
    MLP model;
    optim::AdamW opt(model.parameters(), {.lr = 1e-3, .weight_decay = 0.01});
    auto x = randn<float, shape<dyn, 784>>(256);
    auto y = randint<std::int64_t, shape<dyn>>(0, 10, 256);
    auto step = compile([&](const Tensor<float, shape<dyn, 784>>& in, const Tensor<std::int64_t, shape<dyn>>& target) {
      return backward_of(cross_entropy(model(in), target));
    }, {.mode = compile_mode::reduce_overhead});
    const double t = bench::measure([&] {
      const auto loss = step(x, y);
      opt.step();
      opt.zero_grad();
      bench::do_not_optimize(loss.item());
    });
    bench::report("mlp_train_b256_adamw_compiled", "tenet", "steps/s", 1.0 / t);
  }
}
