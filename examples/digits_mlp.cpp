// Trains an MLP classifier on the 8x8 handwritten digits (examples/data/digits.txt: the 1797 images
// of scikit-learn's load_digits, UCI, CC BY 4.0) with eager autograd and AdamW, checkpoints it with
// safetensors, reloads it into a fresh model and checks that the reloaded model scores the same.
// Exits with 1 unless the test accuracy is at least 95% and the reload reproduces it.
//
//   digits_mlp [--device cpu|cuda] [--compiled] [path/to/digits.txt]
//
// --compiled trains with a compiled step instead of eager `loss.backward()`: tenet::compile of a
// function returning backward_of(loss) plans the forward and the backward as one graph (saved
// activations, fused gradient kernels; docs/compile.md). It fills the same .grad, so the optimizer,
// the scheduler and the rest of the loop are unchanged. The last batch is smaller: a second shape
// class of the same compiled step.
//
// --device cuda trains on cuda(0): the model and the batches live on the GPU, the backward and the
// AdamW step run there; the checkpoint is written from the CPU copy. CUDA code must be compiled
// by nvcc: examples/digits_mlp_cuda.cu is this program built as CUDA (TENET_CUDA=ON); the C++
// build refuses --device cuda with a device_error.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <tenet/compile.hpp>
#include <tenet/tenet.hpp>

#include "digits_data.hpp"  // read_digits

using namespace tenet;

#ifndef TENET_EXAMPLE_DATA_DIR
#define TENET_EXAMPLE_DATA_DIR "examples/data"
#endif

struct MLP : nn::Module {
  nn::Linear<64, 128> fc1;
  nn::Linear<128, 10> fc2;
  TENET_MODULE(fc1, fc2);  // registers them as "fc1", "fc2"; the module stays movable
  template <Expression X>
  auto operator()(const X& x) const {
    return fc2(relu(fc1(x)));
  }
};

struct dataset {
  Tensor<float, shape<dyn, 64>> x;       // pixels / 16
  Tensor<std::int64_t, shape<dyn>> y;    // labels 0..9
};

dataset make_set(const std::vector<std::pair<int, std::vector<float>>>& rows, const std::vector<std::size_t>& idx) {
  const auto n = static_cast<std::int64_t>(idx.size());
  dataset d{Tensor<float, shape<dyn, 64>>({n, 64}), Tensor<std::int64_t, shape<dyn>>({n})};
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& [label, px] = rows[idx[static_cast<std::size_t>(i)]];
    std::copy(px.begin(), px.end(), d.x.data() + i * 64);
    d.y(i) = label;
  }
  return d;
}

double accuracy(const MLP& model, const dataset& d, device dev) {
  no_grad guard;
  Tensor<std::int64_t, shape<dyn>> pred_on = argmax<1>(model(d.x.to(dev)));
  const auto pred = pred_on.cpu();
  std::int64_t right = 0;
  for (std::int64_t i = 0; i < d.y.numel(); ++i) right += pred(i) == d.y(i);
  return static_cast<double>(right) / static_cast<double>(d.y.numel());
}

int main(int argc, char** argv) {
  std::string path = TENET_EXAMPLE_DATA_DIR "/digits.txt";
  device dev = tenet::cpu;
  bool compiled = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--compiled") {
      compiled = true;
    } else if (a == "--device" && i + 1 < argc) {
      const std::string d = argv[++i];
      if (d == "cuda") dev = tenet::cuda(0);
      else if (d != "cpu") throw value_error("digits_mlp: unknown device '" + d + "' (cpu or cuda)");
    } else {
      path = a;
    }
  }
#if defined(__CUDACC__)
  if (dev.type == device_type::cuda && !tenet::cuda::is_available()) {
    std::cout << "digits_mlp: no CUDA device here; skipped (exit code 77)\n";
    return 77;
  }
#else
  if (!dev.is_cpu()) {
    std::cerr << "digits_mlp: --device cuda needs the CUDA build of this program (digits_mlp_cuda, built by nvcc "
                 "with -DTENET_CUDA=ON)\n";
    return 2;
  }
#endif
  const auto rows = read_digits(path, "digits_mlp");
  // a fixed shuffle, 80% train / 20% test
  std::vector<std::size_t> order(rows.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937 rng(1234);
  std::shuffle(order.begin(), order.end(), rng);
  const std::size_t n_train = rows.size() * 4 / 5;
  const dataset train = make_set(rows, {order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n_train)});
  const dataset test = make_set(rows, {order.begin() + static_cast<std::ptrdiff_t>(n_train), order.end()});
  std::cout << "digits: " << rows.size() << " images, " << train.y.numel() << " train, " << test.y.numel() << " test\n";

  manual_seed(0);
  MLP model;
  model.to(dev);  // the parameters (created on the CPU from the seed) move to the device
  const auto train_x = train.x.to(dev);
  const auto train_y = train.y.to(dev);
  std::cout << "training on " << dev.str() << (compiled ? ", compiled step" : ", eager autograd") << "\n";
  const int epochs = 20;
  const std::int64_t batch = 64, n = train.y.numel(), steps_per_epoch = (n + batch - 1) / batch;
  optim::AdamW opt(model.parameters(), {.lr = 3e-3, .weight_decay = 1e-4});
  optim::OneCycleLR sched(opt, 1e-2, epochs * steps_per_epoch);
  // The compiled training step: returns the loss (detached) and leaves the gradients in .grad.
  auto step = compile(
      [&](const Tensor<float, shape<dyn, 64>>& in, const Tensor<std::int64_t, shape<dyn>>& target) {
        return backward_of(cross_entropy(model(in), target));
      },
      {.mode = compile_mode::reduce_overhead});

  const auto t0 = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < epochs; ++epoch) {
    double total = 0;
    for (std::int64_t s = 0; s < n; s += batch) {
      const std::int64_t len = std::min(batch, n - s);
      auto xb = train_x.narrow<0>(s, len);
      auto yb = train_y.narrow<0>(s, len);
      Tensor<float, shape<>> loss;
      if (compiled) {
        loss = step(xb, yb);
      } else {
        loss = cross_entropy(model(xb), yb);
        loss.backward();
      }
      opt.step();
      opt.zero_grad();
      sched.step();
      total += static_cast<double>(loss.cpu().item()) * static_cast<double>(len);
    }
    if (epoch % 5 == 4 || epoch == 0)
      std::printf("epoch %2d  loss %.4f  test accuracy %.4f\n", epoch + 1, total / static_cast<double>(n),
                  accuracy(model, test, dev));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("trained %d epochs in %.2f s on %s: train accuracy %.4f, test accuracy %.4f\n", epochs, secs,
              dev.str().c_str(), accuracy(model, train, dev), accuracy(model, test, dev));
  model.to(tenet::cpu);  // checkpoint and reload on the CPU
  const double acc = accuracy(model, test, tenet::cpu);

  const std::string ckpt = "digits_mlp.safetensors";
  safetensors::save_model(model, ckpt);
  MLP reloaded;
  safetensors::load_model(reloaded, ckpt);
  const double acc2 = accuracy(reloaded, test, tenet::cpu);
  std::printf("reloaded from %s: test accuracy %.4f\n", ckpt.c_str(), acc2);
  std::remove(ckpt.c_str());
  if (acc < 0.95) {
    std::cerr << "test accuracy below 95%\n";
    return 1;
  }
  if (acc2 != acc) {
    std::cerr << "the reloaded model scores differently\n";
    return 1;
  }
  return 0;
}
