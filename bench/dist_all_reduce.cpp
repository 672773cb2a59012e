// all_reduce of float32 tensors over MPI (tenet::dist): time per call and bus bandwidth
// (nccl-tests' definition: bytes * 2 (n - 1) / n / time), against plain MPI_Allreduce on the
// same buffer, to show what tenet's polled wait and staging cost.
//
//   mpirun -np 2 dist_all_reduce [MiB ...]        (default: 1 64)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <tenet/tensor.hpp>
#include <tenet/dist.hpp>

using namespace tenet;

int main(int argc, char** argv) {
  dist::init_process_group();
  std::vector<double> mib;
  for (int i = 1; i < argc; ++i) mib.push_back(std::atof(argv[i]));
  if (mib.empty()) mib = {1, 64};
  const int n = dist::world_size();
  for (double m : mib) {
    const std::int64_t count = static_cast<std::int64_t>(m * 1024 * 1024 / 4);
    Tensor<float, shape<dyn>> t({count});
    for (std::int64_t i = 0; i < count; ++i) t.data()[i] = 1.0f;
    const int iters = m <= 4 ? 50 : 5;
    auto time_it = [&](auto&& f) {
      f();  // warm-up
      dist::barrier();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) f();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    };
    const double tenet_s = time_it([&] { dist::all_reduce(t); });
    const double mpi_s = time_it([&] {
      MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    const double bytes = static_cast<double>(count) * 4;
    const double bus = bytes * 2.0 * (n - 1) / n;
    if (dist::rank() == 0)
      std::printf("%d ranks, %7.2f MiB float32: tenet::dist::all_reduce %9.3f ms (bus %6.2f GB/s), MPI_Allreduce %9.3f ms (bus %6.2f GB/s)\n",
                  n, m, tenet_s * 1e3, bus / tenet_s / 1e9, mpi_s * 1e3, bus / mpi_s / 1e9);
  }
  dist::destroy_process_group();
}
