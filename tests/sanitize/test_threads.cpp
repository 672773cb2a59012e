// Concurrency (docs/design.md, "Threads and integer overflow"): several threads at once evaluate
// expressions over a shared read-only input, train their own small model with autograd and Adam
// steps, load one safetensors checkpoint, and meet an integer division by zero. Each thread's
// results must equal the single-threaded ones bit for bit, and the division error must reach only
// the thread that divided. tests/CMakeLists.txt builds this file under ThreadSanitizer (run with
// OMP_NUM_THREADS=1: libgomp's own synchronisation is not annotated for TSan) and under ASan+UBSan.
// Catch2's assertions are not thread-safe: threads store their results, the main thread checks them.
#include <catch2/catch.hpp>

#include <cstdio>
#include <exception>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include <tenet/tenet.hpp>

using namespace tenet;

namespace {
using mlp = nn::Sequential<nn::Linear<4, 8>, nn::ReLU, nn::Linear<8, 3>>;
using F2 = Tensor<float, dyn_shape<2>>;

struct outcome {
  F2 expr;                  // an expression of the shared input
  std::vector<float> loaded;  // the loaded model's output
  float loss = 0;           // the last training loss
  std::vector<float> weight;  // the first layer's weight after training
  std::int64_t int_sum = 0;  // integer floor division that must not see another thread's error
  bool division_error = false;
};

std::vector<float> values(const F2& t) {
  const F2 c = t.contiguous();
  return std::vector<float>(c.data(), c.data() + c.numel());
}

outcome work(const F2& x, const Tensor<std::int64_t, dyn_shape<1>>& target, const std::string& path,
             bool divide_by_zero) {
  outcome r;
  // expressions of the shared x: fused pointwise, a reduction, a matmul, softmax, a scan, a view
  r.expr = eval(softmax<1>(matmul(x * 2.f + 1.f, x.transpose<0, 1>())) +
                cumsum<1>(tenet::abs(matmul(x, x.transpose<0, 1>()))) - sum<1>(x * x));
  // a checkpoint loaded into a fresh model
  mlp model;
  safetensors::load_model(model, path);
  r.loaded = values(eval(model(x)));
  // training with autograd and optimizer steps
  optim::Adam opt(model.parameters(), {.lr = 0.01});
  for (int step = 0; step < 4; ++step) {
    Tensor<float, shape<>> loss = cross_entropy(model(x), target);
    loss.backward();
    opt.step();
    opt.zero_grad();
    r.loss = loss.item();
  }
  r.weight = values(eval(model.get<0>().weight));
  // integer division: a zero divisor raises in this thread only
  const auto a = arange<std::int64_t>(-7, 9);
  try {
    r.int_sum = eval(sum(floor_divide(a, std::int64_t(divide_by_zero ? 0 : 3)))).item();
  } catch (const value_error&) {
    r.division_error = true;
  }
  return r;
}
}  // namespace

TEST_CASE("threads: expressions, training and checkpoint loading on several threads at once", "[threads]") {
  manual_seed(7);
  const std::string path = "tenet_threads_test.safetensors";
  {
    mlp init;
    safetensors::save_model(init, path);
  }
  const F2 x = randn<float, dyn_shape<2>>(8, 4);
  const auto target = eval(randint<std::int64_t, dyn_shape<1>>(0, 3, 8));
  const outcome want = work(x, target, path, false);
  REQUIRE_FALSE(want.division_error);

  constexpr int n = 4;
  std::vector<outcome> got(n);
  std::vector<std::exception_ptr> failed(n);
  std::latch start(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();  // all at once
      try {
        got[t] = work(x, target, path, t == 1);
      } catch (...) {
        failed[t] = std::current_exception();
      }
    });
  }
  for (auto& th : threads) th.join();
  std::remove(path.c_str());
  for (int t = 0; t < n; ++t) {
    INFO("thread " << t);
    if (failed[t]) std::rethrow_exception(failed[t]);
    CHECK(values(got[t].expr) == values(want.expr));
    CHECK(got[t].loaded == want.loaded);
    CHECK(got[t].loss == want.loss);
    CHECK(got[t].weight == want.weight);
    CHECK(got[t].division_error == (t == 1));
    if (t != 1) CHECK(got[t].int_sum == want.int_sum);
  }
}
