// Benchmark harness for the bench/*.cpp programs (see bench/README.md).
//
// measure(f): one warm-up call, then calls f until at least 0.5 s have passed and at least 5
// runs were made; returns the median run time in seconds.
// report(workload, impl, metric, value): prints one JSON line on stdout, the format of
// docs/DESIGN "Benchmarks": {"workload": ..., "impl": ..., "device": "cpu", "metric": ..., "value": ...}
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string_view>
#include <vector>

namespace bench {

// Keeps the compiler from removing a computation whose result is otherwise unused.
template <class T>
inline void do_not_optimize(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

template <class F>
double measure(F&& f, double min_seconds = 0.5, int min_runs = 5) {
  using clock = std::chrono::steady_clock;
  f();  // warm-up: first-touch page faults, thread pool start, caches
  std::vector<double> times;
  double total = 0.0;
  while (total < min_seconds || static_cast<int>(times.size()) < min_runs) {
    const auto t0 = clock::now();
    f();
    const auto t1 = clock::now();
    const double s = std::chrono::duration<double>(t1 - t0).count();
    times.push_back(s);
    total += s;
  }
  std::sort(times.begin(), times.end());
  const std::size_t n = times.size();
  return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

inline void report(std::string_view workload, std::string_view impl, std::string_view metric,
                   double value, std::string_view device = "cpu") {
  std::printf(
      "{\"workload\": \"%.*s\", \"impl\": \"%.*s\", \"device\": \"%.*s\", \"metric\": \"%.*s\", "
      "\"value\": %.4g}\n",
      static_cast<int>(workload.size()), workload.data(), static_cast<int>(impl.size()),
      impl.data(), static_cast<int>(device.size()), device.data(),
      static_cast<int>(metric.size()), metric.data(), value);
  std::fflush(stdout);
}

// Bytes moved per second, in GB/s (10^9).
inline double gbps(double bytes, double seconds) { return bytes / seconds / 1e9; }

}  // namespace bench
