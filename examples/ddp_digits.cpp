// Data-parallel training of the digits MLP (examples/digits_mlp.cpp's model, data and optimizer)
// on several MPI ranks with tenet::dist::DistributedDataParallel:
//
//   mpirun -np 2 ddp_digits [--check-single] [path/to/digits.txt]      (or -np 4; srun --mpi=pmix)
//
// Every rank reads the same data and takes its share of each global batch of 64 images (the
// batches that do not split evenly over the ranks are dropped, so every step averages equal
// shares); DDP averages the gradients, so all ranks keep one model. Rank 0 prints the loss (the
// mean over all ranks) and the test accuracy. Exits with 1 unless the test accuracy is at least
// 95%. With --check-single, rank 0 also trains the same model on whole global batches in one
// process and checks that the parameters agree (float32, within 1e-4 after all the steps).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <tenet/tenet.hpp>
#include <tenet/dist.hpp>

#include "digits_data.hpp"  // read_digits

using namespace tenet;

#ifndef TENET_EXAMPLE_DATA_DIR
#define TENET_EXAMPLE_DATA_DIR "examples/data"
#endif

struct MLP : nn::Module {
  nn::Linear<64, 128> fc1;
  nn::Linear<128, 10> fc2;
  TENET_MODULE(fc1, fc2);
  template <Expression X>
  auto operator()(const X& x) const {
    return fc2(relu(fc1(x)));
  }
};

struct dataset {
  Tensor<float, shape<dyn, 64>> x;
  Tensor<std::int64_t, shape<dyn>> y;
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

double accuracy(const MLP& model, const dataset& d) {
  no_grad guard;
  Tensor<std::int64_t, shape<dyn>> pred = argmax<1>(model(d.x));
  std::int64_t right = 0;
  for (std::int64_t i = 0; i < d.y.numel(); ++i) right += pred(i) == d.y(i);
  return static_cast<double>(right) / static_cast<double>(d.y.numel());
}

constexpr int epochs = 20;
constexpr std::int64_t global_batch = 64;

/// Trains `model` on rows [first + share * part, + share) of each global batch; `step` wraps the
/// forward and backward (DDP's or the plain module's). Returns the seconds per step.
template <class Forward>
double train(MLP& model, const dataset& train_set, std::int64_t share, std::int64_t part, Forward&& forward,
             bool report, const dataset& test_set) {
  const std::int64_t steps_per_epoch = train_set.y.numel() / global_batch;  // drop_last
  optim::AdamW opt(model.parameters(), {.lr = 3e-3, .weight_decay = 1e-4});
  optim::OneCycleLR sched(opt, 1e-2, epochs * steps_per_epoch);
  const auto t0 = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < epochs; ++epoch) {
    double total = 0;
    for (std::int64_t s = 0; s < steps_per_epoch; ++s) {
      const std::int64_t start = s * global_batch + part * share;
      total += forward(train_set.x.narrow<0>(start, share), train_set.y.narrow<0>(start, share));
      opt.step();
      opt.zero_grad();
      sched.step();
    }
    if (report && (epoch % 5 == 4 || epoch == 0))
      std::printf("epoch %2d  loss %.4f  test accuracy %.4f\n", epoch + 1, total / static_cast<double>(steps_per_epoch),
                  accuracy(model, test_set));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return secs / static_cast<double>(epochs * steps_per_epoch);
}

int run(int argc, char** argv) {
  std::string path = TENET_EXAMPLE_DATA_DIR "/digits.txt";
  bool check_single = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--check-single") check_single = true;
    else path = a;
  }
  const int rank = dist::rank(), world = dist::world_size();
  if (global_batch % world != 0)
    throw value_error("ddp_digits: the global batch of " + std::to_string(global_batch) + " does not split over " +
                      std::to_string(world) + " ranks; run with 1, 2, 4, 8, ... ranks");
  const auto rows = read_digits(path, "ddp_digits");
  std::vector<std::size_t> order(rows.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937 rng(1234);
  std::shuffle(order.begin(), order.end(), rng);
  const std::size_t n_train = rows.size() * 4 / 5;
  const dataset train_set = make_set(rows, {order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n_train)});
  const dataset test_set = make_set(rows, {order.begin() + static_cast<std::ptrdiff_t>(n_train), order.end()});
  if (rank == 0)
    std::printf("digits: %lld train, %lld test images; %d ranks, %lld images per rank per step\n",
                static_cast<long long>(train_set.y.numel()), static_cast<long long>(test_set.y.numel()), world,
                static_cast<long long>(global_batch / world));

  manual_seed(static_cast<std::uint64_t>(rank));  // different on each rank: DDP broadcasts rank 0's
  MLP model;
  dist::DistributedDataParallel ddp(model);
  const std::int64_t share = global_batch / world;
  const double step_s = train(
      model, train_set, share, rank,
      [&](const auto& x, const auto& y) {
        Tensor<float, shape<>> loss = cross_entropy(ddp(x), y);
        loss.backward();
        Tensor<float, shape<1>> l({1});
        l(0) = loss.item();
        dist::all_reduce(l, dist::reduce_op::avg);  // the loss of the global batch, for the report
        return static_cast<double>(l(0));
      },
      rank == 0, test_set);
  int ok = 1;
  if (rank == 0) {
    const double acc = accuracy(model, test_set);
    std::printf("%d ranks: %.3f ms per step (forward, backward with DDP's all-reduce, AdamW); test accuracy %.4f\n",
                world, step_s * 1e3, acc);
    if (acc < 0.95) {
      std::cerr << "test accuracy below 95%\n";
      ok = 0;
    }
    if (check_single) {
      manual_seed(0);
      MLP single;
      const double single_s = train(
          single, train_set, global_batch, 0,
          [&](const auto& x, const auto& y) {
            Tensor<float, shape<>> loss = cross_entropy(single(x), y);
            loss.backward();
            return static_cast<double>(loss.item());
          },
          false, test_set);
      double worst = 0;
      const auto pa = model.parameters(), pb = single.parameters();
      for (std::size_t k = 0; k < pa.size(); ++k) {
        const auto a = pa[k].value().flat<float>(), b = pb[k].value().flat<float>();
        for (std::int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a(i) - b(i))));
      }
      std::printf("one process on the whole batches: %.3f ms per step; largest parameter difference %.3g\n",
                  single_s * 1e3, worst);
      if (!(worst <= 1e-4)) {
        std::cerr << "DDP and single-process training disagree\n";
        ok = 0;
      }
    }
  }
  Tensor<std::int32_t, shape<1>> verdict({1});
  verdict(0) = ok;
  dist::broadcast(verdict, 0);
  return verdict(0) ? 0 : 1;
}

int main(int argc, char** argv) {
  dist::init_process_group();
  int rc = 1;
  try {
    rc = run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "ddp_digits (rank " << dist::rank() << "): " << e.what() << "\n";
  }
  dist::destroy_process_group();
  return rc;
}
