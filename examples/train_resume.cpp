// Resumable training with tenet's data kit, end to end: the 8x8 digits (examples/data/digits.txt,
// scikit-learn's load_digits, UCI, CC BY 4.0) written as .npy files and read back, a DataLoader that
// shuffles and prepares batches on a worker thread, an MLP with dropout trained with AdamW and
// OneCycleLR, and the whole training state (model, optimizer, scheduler, the loader's position in
// the middle of an epoch, the random generators, the step) saved in one safetensors file halfway.
// A fresh set of objects, initialized differently, loads the file and finishes the run. The program
// checks that the resumed run ends with exactly the parameters of a run that was never interrupted,
// and exits with 1 unless it does and the test accuracy is at least 95%.
//
//   train_resume [path/to/digits.txt]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <tenet/tenet.hpp>

#include "digits_data.hpp"  // read_digits

using namespace tenet;

#ifndef TENET_EXAMPLE_DATA_DIR
#define TENET_EXAMPLE_DATA_DIR "examples/data"
#endif

struct MLP : nn::Module {
  nn::Linear<64, 128> fc1;
  nn::Dropout drop{0.1};
  nn::Linear<128, 10> fc2;
  TENET_MODULE(fc1, drop, fc2);
  template <Expression X>
  auto operator()(const X& x) const {
    return fc2(drop(relu(fc1(x))));
  }
};

using images = Tensor<float, shape<dyn, 64>>;
using labels = Tensor<std::int64_t, shape<dyn>>;
using dataset = data::TensorDataset<images, labels>;

/// Reads digits.txt (read_digits) and writes it as two
/// .npy files: digits_x.npy (float32, pixels / 16) and digits_y.npy (int64 labels).
void write_npy(const std::string& txt, const std::string& x_path, const std::string& y_path) {
  std::vector<float> pixels;
  std::vector<std::int64_t> digits;
  for (const auto& [label, px] : read_digits(txt, "train_resume")) {
    pixels.insert(pixels.end(), px.begin(), px.end());
    digits.push_back(label);
  }
  const auto n = static_cast<std::int64_t>(digits.size());
  data::save_npy(x_path, from_blob<float, shape<dyn, 64>>(pixels.data(), {n, 64}));
  data::save_npy(y_path, from_blob<std::int64_t, shape<dyn>>(digits.data(), {n}));
}

/// Everything a training run is made of. Built fresh for each run (the model from `seed`).
struct trainer {
  static constexpr int epochs = 12;
  int seeded;
  MLP model;
  data::DataLoader<dataset> loader;
  optim::AdamW opt;
  optim::OneCycleLR sched;
  std::int64_t step = 0;
  trainer(const dataset& train, std::uint64_t seed)
      : seeded((manual_seed(seed), 0)),
        loader(train, {.batch_size = 64, .shuffle = true, .seed = seed, .prefetch = true}),
        opt(model.parameters(), {.lr = 3e-3, .weight_decay = 1e-4}),
        sched(opt, 1e-2, epochs * loader.len()) {}
  std::int64_t total_steps() const { return epochs * loader.len(); }

  /// What a checkpoint holds: torch.save({'model': ..., 'optimizer': ..., ...}) as one object.
  training_state state() {
    return {{"model", model},   {"optimizer", opt},           {"scheduler", sched},
            {"loader", loader}, {"rng", default_generator()}, {"step", step}};
  }

  /// Trains up to step `stop`. With a checkpoint path, saves the whole state after step `stop`,
  /// inside the loop (the loader then records its place in the epoch), and stops there.
  void train(std::int64_t stop, const std::string& checkpoint = {}) {
    model.train();
    while (step < stop) {
      for (auto& [x, y] : loader) {
        Tensor<float, shape<>> loss = cross_entropy(model(x), y);
        loss.backward();
        opt.step();
        opt.zero_grad();
        sched.step();
        ++step;
        if (step % loader.len() == 0)
          std::printf("  epoch %2lld  step %3lld  loss %.4f  lr %.5f\n", static_cast<long long>(step / loader.len()),
                      static_cast<long long>(step), static_cast<double>(loss.item()), opt.lr());
        if (step == stop) {
          if (!checkpoint.empty()) state().save(checkpoint);
          return;
        }
      }
    }
  }

  double accuracy(const images& x, const labels& y) {
    model.eval();
    no_grad guard;
    Tensor<std::int64_t, shape<dyn>> pred = argmax<1>(model(x));
    std::int64_t right = 0;
    for (std::int64_t i = 0; i < y.numel(); ++i) right += pred(i) == y(i);
    return static_cast<double>(right) / static_cast<double>(y.numel());
  }
};

bool same_parameters(const MLP& a, const MLP& b) {
  const tensor_dict da = a.state_dict(), db = b.state_dict();
  for (const auto& [k, t] : da) {
    const any_tensor& u = db.at(k);
    if (t.nbytes() != u.nbytes() || std::memcmp(t.raw_data(), u.raw_data(), t.nbytes()) != 0) return false;
  }
  return da.size() == db.size();
}

int main(int argc, char** argv) {
  const std::string txt = argc > 1 ? argv[1] : TENET_EXAMPLE_DATA_DIR "/digits.txt";
  const auto t0 = std::chrono::steady_clock::now();

  // the data: written as .npy files by tenet, read back with their dtype and shape checked
  const auto dir = std::filesystem::temp_directory_path();
  const std::string tag = std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  const std::string x_path = (dir / ("train_resume_x_" + tag + ".npy")).string();
  const std::string y_path = (dir / ("train_resume_y_" + tag + ".npy")).string();
  const std::string checkpoint = (dir / ("train_resume_" + tag + ".safetensors")).string();
  write_npy(txt, x_path, y_path);
  const auto x = data::load_npy<float, shape<dyn, 64>>(x_path);
  const auto y = data::load_npy<std::int64_t, shape<dyn>>(y_path);
  const std::int64_t n = x.size(0), n_train = n * 4 / 5;
  Generator split(1234);  // a fixed 80/20 split
  const labels order = randperm(n, split);
  const images train_x = index_select<0>(x, order.narrow<0>(0, n_train));
  const labels train_y = index_select<0>(y, order.narrow<0>(0, n_train));
  const images test_x = index_select<0>(x, order.narrow<0>(n_train, n - n_train));
  const labels test_y = index_select<0>(y, order.narrow<0>(n_train, n - n_train));
  const dataset train(train_x, train_y);
  std::printf("digits: %lld images from %s, %lld train, %lld test\n", static_cast<long long>(n), x_path.c_str(),
              static_cast<long long>(n_train), static_cast<long long>(n - n_train));

  // the reference: one run, never interrupted
  trainer straight(train, 0);
  std::cout << nn::summary(straight.model);
  const std::int64_t total = straight.total_steps(), stop = total / 2 + 5;  // halfway, mid-epoch
  std::printf("uninterrupted run: %lld steps (%lld batches per epoch)\n", static_cast<long long>(total),
              static_cast<long long>(straight.loader.len()));
  straight.train(total);

  // the same run, stopped after step `stop` with a checkpoint
  std::printf("interrupted run: stops after step %lld (batch %lld of epoch %lld) and saves %s\n",
              static_cast<long long>(stop), static_cast<long long>(stop % straight.loader.len()),
              static_cast<long long>(stop / straight.loader.len() + 1), checkpoint.c_str());
  {
    trainer first(train, 0);
    first.train(stop, checkpoint);
  }
  // ... and resumed from the file into new objects (another seed: the file brings everything back)
  trainer resumed(train, 42);
  resumed.state().load(checkpoint);
  std::printf("resumed at step %lld: the loader goes on with epoch %lld after its batch %lld\n",
              static_cast<long long>(resumed.step), static_cast<long long>(resumed.loader.epoch() + 1),
              static_cast<long long>(resumed.loader.state_dict().at("num_yielded").flat<std::int64_t>()(0)));
  resumed.train(total);

  const double acc = resumed.accuracy(test_x, test_y), acc_straight = straight.accuracy(test_x, test_y);
  const bool same = same_parameters(resumed.model, straight.model);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("test accuracy %.4f (uninterrupted run %.4f); resumed parameters %s the uninterrupted run's; %.2f s\n",
              acc, acc_straight, same ? "equal" : "DIFFER FROM", secs);
  for (const auto& f : {x_path, y_path, checkpoint}) std::filesystem::remove(f);
  if (!same) {
    std::cerr << "the resumed run does not end where the uninterrupted run ends\n";
    return 1;
  }
  if (acc < 0.95) {
    std::cerr << "test accuracy below 95%\n";
    return 1;
  }
  return 0;
}
