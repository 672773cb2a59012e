// tenet::compile on CUDA tensors where launch overhead matters: an MLP block forward
// x + linear(gelu(linear(x, w1, b1)), w2, b2), x 8 x 1024, hidden 1024 and 4096, fp32 (TF32 off),
// eager vs compile(reduce_overhead) (a CUDA graph per shape class, results copied out) and
// compile(max_autotune). Metric: microseconds of wall time per call, calls issued back to back
// on the default stream and the device synchronized once per 200 calls (median of 7 batches):
// the host's launch cost is part of it, as it is of a real forward. bench/cuda_torch_twin.py
// times torch eager and torch.compile(mode="reduce-overhead") the same way (filter: mlp_block).
#include <chrono>
#include <cstdint>
#include <string>

#include <tenet/compile.hpp>

#include "cuda_harness.hpp"

using namespace tenet;
using F1 = Tensor<float, dyn_shape<1>>;
using F2 = Tensor<float, dyn_shape<2>>;

template <class F>
double us_per_call(F&& f) {
  for (int i = 0; i < 20; ++i) f();  // warm-up (records and captures a compiled function's graph)
  tenet::cuda::synchronize();
  std::vector<double> t;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; ++i) f();
    tenet::cuda::synchronize();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 200 * 1e6);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  bench::require_gpu("cuda_compile");
  manual_seed(0);
  const tenet::device gpu = tenet::cuda(0);
  for (std::int64_t hidden : {1024, 4096}) {
    const std::int64_t b = 8, d = 1024;
    F2 x = (randn<float, dyn_shape<2>>(b, d)).to(gpu);
    F2 w1 = F2(randn<float, dyn_shape<2>>(hidden, d) * 0.03f).to(gpu);
    F2 w2 = F2(randn<float, dyn_shape<2>>(d, hidden) * 0.03f).to(gpu);
    F1 b1 = F1(randn<float, dyn_shape<1>>(hidden) * 0.1f).to(gpu);
    F1 b2 = F1(randn<float, dyn_shape<1>>(d) * 0.1f).to(gpu);
    auto mlp = [&](const auto& v) { return v + linear(gelu(linear(v, w1, b1)), w2, b2); };
    auto ro = tenet::compile(mlp, {.mode = compile_mode::reduce_overhead});
    auto mt = tenet::compile(mlp, {.mode = compile_mode::max_autotune});
    F2 y;
    const std::string w = "mlp_block_8x1024_h" + std::to_string(hidden) + "_fp32";
    bench::report(w, "tenet eager", "us/call", us_per_call([&] { y = mlp(x); }), "cuda");
    bench::report(w, "tenet compile(reduce_overhead)", "us/call", us_per_call([&] { y = ro(x); }), "cuda");
    bench::report(w, "tenet compile(max_autotune)", "us/call", us_per_call([&] { y = mt(x); }), "cuda");
    std::printf("# %s: reduce_overhead graph launches %lld, captures %lld, fallbacks %lld\n", w.c_str(),
                static_cast<long long>(ro.stats().graph_launches), static_cast<long long>(ro.stats().graph_captures),
                static_cast<long long>(ro.stats().graph_fallbacks));
    std::printf("# explain (reduce_overhead):\n%s# explain (max_autotune):\n%s", ro.explain().c_str(),
                mt.explain().c_str());
  }
  return 0;
}
