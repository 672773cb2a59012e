#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CUDA kernel of the random prims (nvcc only): uniform_ (dropout's mask, rand_lazy) written by
// a thread per chunk of four consecutive elements, each from the same Philox range fill the CPU
// runs (runtime/philox.hpp: element k depends on (seed, offset, k) only), so a CUDA draw holds the
// CPU's values bit for bit for one manual_seed. A chunk of four starts on a Philox block for
// one-word dtypes (float, fp16, bf16) and on one of the two blocks four doubles read.
#include <cstdint>

#include <tenet/backend/cuda/pointwise.hpp>  // grid_for, check_launch
#include <tenet/backend/cuda/runtime.hpp>
#include <tenet/runtime/philox.hpp>

namespace tenet::detail::cuda {

template <class T>
__global__ void uniform_kernel(T* __restrict__ out, std::int64_t n, std::uint64_t seed, std::uint64_t offset) {
  const std::int64_t chunks = (n + 3) / 4;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += step) {
    const std::int64_t begin = 4 * c;
    const std::int64_t end = begin + 4 < n ? begin + 4 : n;
    fill_uniform_range(out + begin, begin, end, seed, offset);
  }
}

/// out[k] = element k of the uniform [0, 1) draw (seed, offset) for k < n (out contiguous, on the
/// current device's current stream).
template <class T>
void run_uniform(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t offset, const device& dev) {
  if (n == 0) return;
  device_context ctx(dev);
  constexpr int threads = 256;
  uniform_kernel<T><<<grid_for((n + 3) / 4, threads, dev.index), threads, 0, current_stream()>>>(out, n, seed, offset);
  check_launch("the uniform (random draw) kernel launch");
}

}  // namespace tenet::detail::cuda
