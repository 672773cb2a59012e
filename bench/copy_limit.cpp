// bench-workloads: copy_256MiB_memcpy copy_256MiB_omp (always run: the GB/s limit)
// The bandwidth limit: copy of 256 MiB with std::memcpy (one thread) and with a parallel
// OpenMP copy loop (all OpenMP threads, each copying one contiguous chunk with memcpy).
// Metric GB/s counting read+write (2 * 256 MiB per copy); impl "limit". The bench/run table
// uses the faster of the two as "copy bandwidth".
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "harness.hpp"

int main() {
  constexpr std::size_t bytes = std::size_t{256} << 20;
  auto* src = static_cast<char*>(std::aligned_alloc(64, bytes));
  auto* dst = static_cast<char*>(std::aligned_alloc(64, bytes));
  // First touch in parallel, matching the parallel copy's chunking.
#pragma omp parallel
  {
    const std::size_t threads = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t id = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t chunk = (bytes + threads - 1) / threads;
    const std::size_t lo = std::min(bytes, id * chunk), hi = std::min(bytes, lo + chunk);
    std::memset(src + lo, 1, hi - lo);
    std::memset(dst + lo, 0, hi - lo);
  }
  const double t_memcpy = bench::measure([&] {
    std::memcpy(dst, src, bytes);
    bench::do_not_optimize(dst[bytes - 1]);
  });
  bench::report("copy_256MiB_memcpy", "limit", "GB/s", bench::gbps(2.0 * bytes, t_memcpy));
  const double t_omp = bench::measure([&] {
#pragma omp parallel
    {
      const std::size_t threads = static_cast<std::size_t>(omp_get_num_threads());
      const std::size_t id = static_cast<std::size_t>(omp_get_thread_num());
      const std::size_t chunk = (bytes + threads - 1) / threads;
      const std::size_t lo = std::min(bytes, id * chunk), hi = std::min(bytes, lo + chunk);
      std::memcpy(dst + lo, src + lo, hi - lo);
    }
    bench::do_not_optimize(dst[bytes - 1]);
  });
  bench::report("copy_256MiB_omp", "limit", "GB/s", bench::gbps(2.0 * bytes, t_omp));
  std::free(src);
  std::free(dst);
}
