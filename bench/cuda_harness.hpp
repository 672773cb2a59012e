// Timing for the bench/cuda_*.cu programs: CUDA events around each call on the current stream.
// measure_cuda(f): one warm-up call, then calls until at least 0.5 s of GPU time and 5 runs;
// returns the median run time in seconds. Results are printed with bench::report (harness.hpp)
// with device "cuda".
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <tenet/cuda.hpp>

#include "harness.hpp"

namespace bench {

template <class F>
double measure_cuda(F&& f, double min_seconds = 0.5, int min_runs = 5) {
  f();
  tenet::cuda::synchronize();
  std::vector<double> times;
  double total = 0.0;
  tenet::cuda::event start, stop;
  while (total < min_seconds || static_cast<int>(times.size()) < min_runs) {
    start.record();
    f();
    stop.record();
    stop.synchronize();
    const double s = stop.elapsed_ms(start) * 1e-3;
    times.push_back(s);
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
