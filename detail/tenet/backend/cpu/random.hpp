#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CPU kernel of the random prims: the Philox range fill (runtime/philox.hpp) split over OpenMP
// threads in chunks of whole Philox blocks (the values do not depend on the split).
#include <algorithm>
#include <cstdint>

#include <omp.h>

#include <tenet/prims/random.hpp>
#include <tenet/runtime/philox.hpp>

namespace tenet::detail::cpu {

template <class T>
void run_uniform(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t offset) {
  constexpr std::int64_t grain = 1 << 14;  // a multiple of 4: chunks start on a block boundary
  const std::int64_t chunks = (n + grain - 1) / grain;
  if (chunks <= 1) {
    fill_uniform_range(out, 0, n, seed, offset);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * grain, end = std::min(n, begin + grain);
    fill_uniform_range(out + begin, begin, end, seed, offset);
  }
}

}  // namespace tenet::detail::cpu

namespace tenet::prim {
template <class T, class S>
template <class E, class Out>
void uniform_<T, S>::run_on_cpu_into(const E& e, const Out& out) {
  detail::cpu::run_uniform(out.data(), out.numel(), e.op.seed, e.op.offset);
}
}  // namespace tenet::prim
