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

/// Philox blocks b0 .. b0 + philox_lanes - 1 of the stream (seed, offset) at once: the arithmetic
/// of philox_block (runtime/philox.hpp), laid out lane by lane so that the compiler vectorizes
/// the 32 x 32 -> 64-bit products across blocks (the scalar loop does one block at a time).
/// words[4 j + i] is word i of block b0 + j: the word that element 4 (b0 + j) + i of a one-word
/// draw reads.
inline constexpr int philox_lanes = 16;
inline void philox_blocks(std::uint64_t seed, std::uint64_t offset, std::uint64_t b0,
                          std::uint32_t (&words)[4 * philox_lanes]) {
  std::uint32_t x0[philox_lanes], x1[philox_lanes], x2[philox_lanes], x3[philox_lanes];
  for (int j = 0; j < philox_lanes; ++j) {
    const std::uint64_t c = offset + b0 + static_cast<std::uint64_t>(j);
    x0[j] = static_cast<std::uint32_t>(c);
    x1[j] = static_cast<std::uint32_t>(c >> 32);
    x2[j] = 0;
    x3[j] = 0;
  }
  philox_key key = philox_key_from_seed(seed);
  for (int round = 0; round < philox_rounds; ++round) {
    if (round > 0) {
      key.k0 += philox_weyl0;
      key.k1 += philox_weyl1;
    }
#pragma omp simd
    for (int j = 0; j < philox_lanes; ++j) {
      const std::uint64_t p0 = static_cast<std::uint64_t>(philox_multiplier0) * x0[j];
      const std::uint64_t p1 = static_cast<std::uint64_t>(philox_multiplier1) * x2[j];
      const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ x1[j] ^ key.k0;
      const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ x3[j] ^ key.k1;
      x1[j] = static_cast<std::uint32_t>(p1);
      x3[j] = static_cast<std::uint32_t>(p0);
      x0[j] = n0;
      x2[j] = n2;
    }
  }
  for (int j = 0; j < philox_lanes; ++j) {
    words[4 * j] = x0[j];
    words[4 * j + 1] = x1[j];
    words[4 * j + 2] = x2[j];
    words[4 * j + 3] = x3[j];
  }
}

/// out[k - begin] = element k of the uniform [0, 1) draw for k in [begin, end), begin a multiple
/// of 4: one-word kinds take philox_lanes blocks (4 elements each) per batch; double (two words
/// per element) and the tail run the scalar range fill. The values are fill_uniform_range's.
template <class T>
void fill_uniform01_batched(T* out, std::int64_t begin, std::int64_t end, std::uint64_t seed, std::uint64_t offset) {
  std::int64_t k = begin;
  if constexpr (uniform_words_per_element<T>() == 1) {
    constexpr std::int64_t per_batch = 4 * philox_lanes;
    std::uint32_t w[per_batch];
    for (; k + per_batch <= end; k += per_batch) {
      philox_blocks(seed, offset, static_cast<std::uint64_t>(k) / 4, w);
      T* o = out + (k - begin);
      for (int e = 0; e < per_batch; ++e) o[e] = uniform01_from_word<T>(w[e]);
    }
  }
  if (k < end) fill_uniform_range(out + (k - begin), k, end, seed, offset);
}

template <class T>
void run_uniform(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t offset) {
  constexpr std::int64_t grain = 1 << 14;  // a multiple of 4: chunks start on a block boundary
  const std::int64_t chunks = (n + grain - 1) / grain;
  if (chunks <= 1) {
    fill_uniform01_batched(out, 0, n, seed, offset);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * grain, end = std::min(n, begin + grain);
    fill_uniform01_batched(out + begin, begin, end, seed, offset);
  }
}

}  // namespace tenet::detail::cpu

