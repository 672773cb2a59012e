// CUDA autograd tests, part 5: a small MLP trained with AdamW and SGD on cuda(0) and on the CPU
// from the same parameters and batches, parameters compared after every step; optimizer errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <tenet/cuda.hpp>

#include "autograd_checks.hpp"

using namespace tenet;
using namespace tenet::test;

// --- an MLP trained with AdamW / SGD on both devices ---------------------------------------------
namespace {
template <class T>
struct mlp : nn::Module {
  M<T> w1, w2;
  V1<T> b1, b2;
  mlp(std::int64_t k, std::int64_t h, std::int64_t o)
      : w1(randn<T, dyn_shape<2>>(h, k) * 0.2), w2(randn<T, dyn_shape<2>>(o, h) * 0.2),
        b1(randn<T, dyn_shape<1>>(h) * 0.1), b2(randn<T, dyn_shape<1>>(o) * 0.1) {
    register_parameter("w1", w1);
    register_parameter("b1", b1);
    register_parameter("w2", w2);
    register_parameter("b2", b2);
  }
  S0<T> loss(const M<T>& x, const Tensor<std::int64_t, dyn_shape<1>>& y) const {
    return cross_entropy(linear(relu(linear(x, w1, b1)), w2, b2), y);
  }
};

template <class T, class Opt, class Options>
void run_training(const Options& o, const char* what) {
  INFO(what);
  manual_seed(21);
  const std::int64_t batch = 32, k = 20, h = 48, classes = 7;
  mlp<T> cpu_model(k, h, classes);
  mlp<T> gpu_model(k, h, classes);
  gpu_model.load_state_dict(cpu_model.state_dict());
  gpu_model.to(gpu);
  for (const auto& [n, r] : gpu_model.named_parameters()) {
    CHECK(r.device() == gpu);
    CHECK(r.requires_grad());
  }
  Opt cpu_opt(cpu_model.parameters(), o);
  Opt gpu_opt(gpu_model.parameters(), o);
  for (int step = 0; step < 4; ++step) {
    M<T> x = randn<T, dyn_shape<2>>(batch, k);
    Tensor<std::int64_t, dyn_shape<1>> y = randint<std::int64_t, dyn_shape<1>>(0, classes, batch);
    S0<T> lc = cpu_model.loss(x, y);
    S0<T> lg = gpu_model.loss(x.to(gpu), y.to(gpu));
    check_same(lg.detach(), lc.detach(), "loss");
    lc.backward();
    lg.backward();
    cpu_opt.step();
    gpu_opt.step();
    cpu_opt.zero_grad(step % 2 == 0);  // set_to_none, then zeroing in place on the device
    gpu_opt.zero_grad(step % 2 == 0);
    if (step % 2 == 1) CHECK(gpu_model.w1.grad().device() == gpu);
    check_same(gpu_model.w1, cpu_model.w1, "w1 after a step");
    check_same(gpu_model.b1, cpu_model.b1, "b1 after a step");
    check_same(gpu_model.w2, cpu_model.w2, "w2 after a step");
    check_same(gpu_model.b2, cpu_model.b2, "b2 after a step");
  }
  // the optimizer state lives on the device
  const auto sd = gpu_opt.state_dict();
  std::int64_t buffers = 0;
  for (const auto& key : sd.keys())
    if (key.rfind("state.", 0) == 0 &&
        (key.find(".exp_avg") != std::string::npos || key.find(".momentum_buffer") != std::string::npos ||
         key.find(".square_avg") != std::string::npos || key.find(".sum") != std::string::npos)) {
      CHECK(sd.at(key).template flat<T>().device() == gpu);
      ++buffers;
    }
  CHECK(buffers >= 4);  // one buffer or more for each of the 4 parameters
}
}  // namespace

TEST_CASE("cuda autograd: an MLP trained with each optimizer matches the CPU's parameters (fp32, fp64)") {
  run_training<float, optim::AdamW>(optim::adamw_options{.lr = 1e-2, .weight_decay = 0.05}, "AdamW fp32");
  run_training<double, optim::AdamW>(optim::adamw_options{.lr = 1e-2, .weight_decay = 0.05, .amsgrad = true},
                                     "AdamW amsgrad fp64");
  run_training<float, optim::SGD>(optim::sgd_options{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3}, "SGD fp32");
  run_training<double, optim::SGD>(optim::sgd_options{.lr = 0.1, .momentum = 0.9, .nesterov = true}, "SGD nesterov fp64");
  run_training<float, optim::RMSprop>(optim::rmsprop_options{.lr = 1e-2, .weight_decay = 1e-3}, "RMSprop fp32");
  run_training<double, optim::RMSprop>(
      optim::rmsprop_options{.lr = 1e-2, .momentum = 0.9, .centered = true, .maximize = true}, "RMSprop centered momentum fp64");
  run_training<float, optim::Adagrad>(
      optim::adagrad_options{.lr = 0.1, .lr_decay = 0.01, .weight_decay = 1e-3, .initial_accumulator_value = 0.1},
      "Adagrad fp32");
  run_training<double, optim::Adagrad>(optim::adagrad_options{.lr = 0.1, .maximize = true}, "Adagrad maximize fp64");
}

TEST_CASE("cuda autograd: an MLP of bfloat16 / float16 parameters trained on both devices (16-bit state)") {
  run_training<bfloat16, optim::AdamW>(optim::adamw_options{.lr = 1e-2, .weight_decay = 0.05}, "AdamW bf16");
  run_training<float16, optim::SGD>(optim::sgd_options{.lr = 0.1, .momentum = 0.9, .nesterov = true}, "SGD nesterov fp16");
}

TEST_CASE("cuda autograd: clip_grad_norm_ and clip_grad_value_ on CUDA gradients match the CPU's") {
  for (const double p : {2.0, 1.0, 3.0, static_cast<double>(INFINITY)}) {
    INFO("norm_type " << p);
    manual_seed(23);
    mlp<double> cpu_model(6, 9, 4);
    mlp<double> gpu_model(6, 9, 4);
    gpu_model.load_state_dict(cpu_model.state_dict());
    gpu_model.to(gpu);
    M<double> x = randn<double, dyn_shape<2>>(16, 6) * 3.0;
    Tensor<std::int64_t, dyn_shape<1>> y = randint<std::int64_t, dyn_shape<1>>(0, 4, 16);
    cpu_model.loss(x, y).backward();
    gpu_model.loss(x.to(gpu), y.to(gpu)).backward();
    const double tc = nn::utils::clip_grad_norm_(cpu_model.parameters(), 0.05, p);
    const double tg = nn::utils::clip_grad_norm_(gpu_model.parameters(), 0.05, p);
    CHECK(std::abs(tg - tc) <= 1e-12 * tc);
    CHECK(tc > 0.05);  // the clip scaled the gradients
    check_same(gpu_model.w1.grad(), cpu_model.w1.grad(), "d w1 clipped by norm");
    check_same(gpu_model.b2.grad(), cpu_model.b2.grad(), "d b2 clipped by norm");
    nn::utils::clip_grad_value_(cpu_model.parameters(), 0.004);
    nn::utils::clip_grad_value_(gpu_model.parameters(), 0.004);
    check_same(gpu_model.w1.grad(), cpu_model.w1.grad(), "d w1 clipped by value");
    check_same(gpu_model.w2.grad(), cpu_model.w2.grad(), "d w2 clipped by value");
  }
}

namespace {
/// Parameters of two dtypes, more than one multi-tensor launch holds (24) and sizes around its
/// chunks (4096 elements a block; 32768 a partial norm), an empty one among them.
struct many_params : nn::Module {
  std::vector<Tensor<double, dyn_shape<1>>> d;
  std::vector<Tensor<float, dyn_shape<1>>> f;
  many_params() {
    const std::int64_t sizes[] = {1, 3, 4095, 4096, 4097, 32768, 40000, 0, 70001, 17};
    d.reserve(30);  // (registered by address)
    for (int i = 0; i < 30; ++i) d.push_back(randn<double, dyn_shape<1>>(sizes[i % 10] + i));
    f.reserve(3);
    for (int i = 0; i < 3; ++i) f.push_back(randn<float, dyn_shape<1>>(sizes[(i * 3 + 2) % 10]));
    for (int i = 0; i < 30; ++i) register_parameter("d" + std::to_string(i), d[static_cast<std::size_t>(i)]);
    for (int i = 0; i < 3; ++i) register_parameter("f" + std::to_string(i), f[static_cast<std::size_t>(i)]);
  }
};
}  // namespace

TEST_CASE("cuda autograd: clip_grad_norm_ and AdamW over 33 parameters of two dtypes (multi-tensor launches) match the CPU's") {
  manual_seed(29);
  many_params cpu_model, gpu_model;
  gpu_model.load_state_dict(cpu_model.state_dict());
  gpu_model.to(gpu);
  const auto cp = cpu_model.parameters(), gp = gpu_model.parameters();
  REQUIRE(cp.size() == 33);
  optim::AdamW cpu_opt(cp, {.lr = 1e-2, .weight_decay = 0.05}), gpu_opt(gp, {.lr = 1e-2, .weight_decay = 0.05});
  for (int step = 0; step < 2; ++step) {
    for (std::size_t i = 0; i < cp.size(); ++i) {
      any_tensor::visit_floating_dtype(cp[i].scalar_type(), [&]<class T>() {
        const Tensor<T, dyn_shape<1>> g = randn<T, dyn_shape<1>>(cp[i].numel()) * 0.3;
        cp[i].set_grad(any_tensor(g));
        gp[i].set_grad(any_tensor(g.to(gpu)));
      });
    }
    const double tc = nn::utils::clip_grad_norm_(cp, 1.0), tg = nn::utils::clip_grad_norm_(gp, 1.0);
    CHECK(std::abs(tg - tc) <= 1e-12 * tc);
    CHECK(tc > 1.0);  // the clip scaled the gradients
    check_same(gpu_model.d[6].grad(), cpu_model.d[6].grad(), "d6's gradient clipped by norm");
    check_same(gpu_model.f[2].grad(), cpu_model.f[2].grad(), "f2's gradient clipped by norm");
    cpu_opt.step();
    gpu_opt.step();
    for (std::size_t i = 0; i < 30; ++i) check_same(gpu_model.d[i], cpu_model.d[i], "a float64 parameter after AdamW");
    for (std::size_t i = 0; i < 3; ++i) check_same(gpu_model.f[i], cpu_model.f[i], "a float32 parameter after AdamW");
  }
}

TEST_CASE("cuda: nn::init fills CUDA tensors with the values a CPU tensor gets from the same seed") {
  using F2 = Tensor<float, dyn_shape<2>>;
  auto both = [](auto&& init, const char* what) {
    INFO(what);
    F2 c({24, 40}, tenet::cpu), g({24, 40}, gpu), gt({40, 24}, gpu);
    manual_seed(31);
    init(c);
    manual_seed(31);
    init(g);
    CHECK(g.device() == gpu);
    check_same(g, c, what);
    manual_seed(31);
    init(F2(gt.transpose<0, 1>()));  // a non-contiguous view of a device tensor
    check_same(F2(gt.transpose<0, 1>().contiguous()), c, what);
  };
  both([](const F2& t) { nn::init::kaiming_uniform_(t, std::sqrt(5.0)); }, "kaiming_uniform_");
  both([](const F2& t) { nn::init::xavier_normal_(t); }, "xavier_normal_");
  both([](const F2& t) { nn::init::trunc_normal_(t, 0.0, 0.02); }, "trunc_normal_");
  both([](const F2& t) { nn::init::eye_(t); }, "eye_");
  both([](const F2& t) { nn::init::constant_(t, 0.25); }, "constant_");
  // a module built while CUDA is the default device: its parameters are initialized there
  manual_seed(32);
  nn::Linear<40, 24> cpu_lin;
  manual_seed(32);
  std::optional<nn::Linear<40, 24>> gpu_lin;
  {
    device_guard on(gpu);
    gpu_lin.emplace();
  }
  check_same(gpu_lin->weight, cpu_lin.weight, "Linear weight made on cuda(0)");
  check_same(gpu_lin->bias, cpu_lin.bias, "Linear bias made on cuda(0)");
}

TEST_CASE("cuda autograd: optimizers refuse a gradient on another device") {
  manual_seed(22);
  mlp<float> model(4, 5, 3);
  model.to(gpu);
  optim::SGD sgd(model.parameters(), {.lr = 0.1});
  mlp<float> host(4, 5, 3);
  std::vector<any_tensor> grads;
  for (const auto& r : host.parameters()) grads.push_back(r.value());
  CHECK_THROWS_AS(sgd.step(grads), device_error);
}

