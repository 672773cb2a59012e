// bench-workloads: first_call_cnn first_call_mlp
// Where a process's first inference call goes (issue 37, item 8). For a small CNN (the digits
// classifier of the issue: conv 1->8, relu, max pool, conv 8->16, relu, max pool, flatten, linear;
// batch 64 of 1x8x8) and an MLP (64 -> 128 -> 10, batch 64), in one fresh process:
//   omp_start   the first OpenMP parallel region (the thread pool starts), alone;
//   first       the model's first call after that;
//   second      the second call;
//   steady      the median of 200 calls after those;
// each with the minor page faults it took (getrusage). `--no-warmup` runs the first call without
// the separate thread-pool start, so that `first` includes it. `--warmup` calls tenet::warm_up()
// first, as a program would. `--primed` runs another instance of each model once before the
// measured one: what is left of `first` then is per instance, the rest per process.
// Prints JSON lines (microseconds, and faults) like the other benchmarks.
#include <tenet/tenet.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace tenet;

namespace {

struct CNN : nn::Module {
  nn::Conv2d<1, 8, 3> conv1{{.padding = 1}};
  nn::Conv2d<8, 16, 3> conv2{{.padding = 1}};
  nn::Linear<16 * 2 * 2, 10> fc;
  TENET_MODULE(conv1, conv2, fc);
  Tensor<float, shape<dyn, 10>> operator()(const Tensor<float, shape<dyn, 1, 8, 8>>& x) const {
    const std::int64_t B = x.size(0);
    auto h = max_pool2d(relu(conv1(x)), 2);
    Tensor<float, shape<dyn, 8, dyn, dyn>> h1 = h;
    Tensor<float, shape<dyn, 16, dyn, dyn>> h2 = max_pool2d(relu(conv2(h1)), 2);
    return fc(h2.reshape<dyn, 16 * 2 * 2>(B));
  }
};

struct MLP : nn::Module {
  nn::Linear<64, 128> fc1;
  nn::Linear<128, 10> fc2;
  TENET_MODULE(fc1, fc2);
  Tensor<float, shape<dyn, 10>> operator()(const Tensor<float, shape<dyn, 64>>& x) const { return fc2(relu(fc1(x))); }
};

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct phase {
  double us;
  long faults;
};
template <class F>
phase timed(F&& f) {
  const long f0 = minor_faults();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  const auto t1 = std::chrono::steady_clock::now();
  return {std::chrono::duration<double, std::micro>(t1 - t0).count(), minor_faults() - f0};
}

void report_phase(const std::string& workload, const std::string& mode, const char* name, phase p) {
  bench::report(workload, "tenet " + mode + " " + name, "us", p.us);
  bench::report(workload, "tenet " + mode + " " + name, "minor_faults", static_cast<double>(p.faults));
}

template <class Model, class In>
void run(const std::string& workload, const std::string& mode, const In& x, bool primed) {
  if (primed) {  // another instance of the model ran once in this process
    Model other;
    other.eval();
    Tensor<float, shape<dyn, 10>> y = other(x);
    bench::do_not_optimize(y.data()[0]);
  }
  Model model;
  model.eval();
  Tensor<float, shape<dyn, 10>> y;
  report_phase(workload, mode, "first", timed([&] { y = model(x); }));
  report_phase(workload, mode, "second", timed([&] { y = model(x); }));
  std::vector<double> us;
  for (int i = 0; i < 200; ++i) us.push_back(timed([&] { y = model(x); }).us);
  std::nth_element(us.begin(), us.begin() + 100, us.end());
  bench::report(workload, "tenet " + mode + " steady", "us", us[100]);
  bench::do_not_optimize(y.data()[0]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "omp_first";
  bool primed = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-warmup")) mode = "cold";
    if (!std::strcmp(argv[i], "--warmup")) mode = "warm_up";
    if (!std::strcmp(argv[i], "--primed")) primed = true;
  }
  if (primed) mode += "_primed";
  manual_seed(0);
  if (mode.rfind("omp_first", 0) == 0) {
    report_phase("first_call", mode, "omp_start", timed([] {
                   int n = 0;
#pragma omp parallel reduction(+ : n)
                   n += 1;
                   bench::do_not_optimize(n);
                 }));
  } else if (mode.rfind("warm_up", 0) == 0) {
    report_phase("first_call", mode, "warm_up", timed([] { tenet::warm_up(); }));
  }
  const auto xc = randn<float, shape<dyn, 1, 8, 8>>(64);
  const auto xm = randn<float, shape<dyn, 64>>(64);
  run<CNN>("first_call_cnn", mode, xc, primed);
  run<MLP>("first_call_mlp", mode, xm, primed);
  return 0;
}
