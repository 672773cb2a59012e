// bench-workloads: sgemm_2048
// The sgemm limit: OpenBLAS cblas_sgemm on the same 2048^3 problem as bench/sgemm.cpp.
// Metric GFLOP/s = 2*n^3/t; impl "openblas".
#include <cblas.h>

#include <cstdint>
#include <random>
#include <vector>

#include "harness.hpp"

int main() {
  constexpr int n = 2048;
  std::vector<float> a(std::size_t{n} * n), b(std::size_t{n} * n), c(std::size_t{n} * n);
  std::mt19937 gen(0);
  std::normal_distribution<float> dist;
  for (auto& v : a) v = dist(gen);
  for (auto& v : b) v = dist(gen);
  const double t = bench::measure([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    bench::do_not_optimize(c.back());
  });
  bench::report("sgemm_2048", "openblas", "GFLOP/s", 2.0 * n * n * n / t / 1e9);
}
