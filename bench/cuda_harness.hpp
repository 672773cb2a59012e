// Timing for the bench/cuda_*.cu programs: CUDA events around runs of calls on the current stream.
// measure_cuda(f): one warm-up call, one timed call; then runs of k back-to-back calls, k chosen so
// that a run takes about 1 ms of GPU time (1 for calls of 1 ms or more, at most 100), until at
// least 0.5 s of GPU time and 5 runs; returns the median time per call in seconds. Calls shorter
// than the host's work to launch them would otherwise be timed with that work (a single call's
// events also hold the launch: about 5 us of tenet's host path on a 50 us kernel); back to back,
// the host enqueues the next call while the GPU runs this one, as in a real program.
// bench/cuda_torch_twin.py times PyTorch the same way. Results are printed with bench::report
// (harness.hpp) with device "cuda".
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <tenet/cuda.hpp>

#include "harness.hpp"

namespace bench {

/// Calls per timed run for a call that took `seconds` alone: about 1 ms per run, 1 to 100 calls.
inline int calls_per_run(double seconds) {
  if (!(seconds > 0.0)) return 1;
  return static_cast<int>(std::clamp(std::ceil(1e-3 / seconds), 1.0, 100.0));
}

template <class F>
double measure_cuda(F&& f, double min_seconds = 0.5, int min_runs = 5) {
  f();
  tenet::cuda::synchronize();
  tenet::cuda::event start, stop;
  start.record();
  f();
  stop.record();
  stop.synchronize();
  const int k = calls_per_run(stop.elapsed_ms(start) * 1e-3);
  std::vector<double> times;
  double total = 0.0;
  while (total < min_seconds || static_cast<int>(times.size()) < min_runs) {
    start.record();
    for (int i = 0; i < k; ++i) f();
    stop.record();
    stop.synchronize();
    const double s = stop.elapsed_ms(start) * 1e-3;
    times.push_back(s / k);
    total += s;
  }
  std::sort(times.begin(), times.end());
  const std::size_t n = times.size();
  return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

inline std::string gpu_name() {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "unknown";
  return p.name;
}

/// Exits 77 (skipped) when there is no GPU.
inline void require_gpu(const char* program) {
  if (!tenet::cuda::is_available()) {
    std::fprintf(stderr, "%s: no CUDA device; skipped\n", program);
    std::exit(77);
  }
  std::printf("{\"workload\": \"device_info\", \"impl\": \"tenet\", \"device\": \"cuda\", \"metric\": \"name\", "
              "\"value\": \"%s\"}\n",
              gpu_name().c_str());
}

}  // namespace bench
