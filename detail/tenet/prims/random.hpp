#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The random prims: uniform_, a lazy draw of uniform [0, 1) values from tenet's Philox stream.
//
// A uniform_ node has no children: it carries its output sizes and where it reads the stream
// (seed, offset in blocks, see runtime/philox.hpp). Element k of the output (row-major) is
// uniform_element<T>(philox_block(seed, offset, block_of(k)), k, 0, 1), the same value the eager
// factory rand<T, S>() writes at k for the same (seed, offset): the prim and the factories are one
// stream. Normal samples are not a prim: the eager randn keeps its own Box-Muller stream
// (philox.hpp: u1 in (0, 1], pairs of elements share a block), which a composite of uniform_ draws
// would not reproduce bit for bit; a lazy normal, when one is needed, is Box-Muller on uniform_.
// A uniform_ node has no tensor leaf to say where it lives, so it carries its device (`placement`:
// dropout's input's, rand_lazy's default device); expr_device counts it as a leaf would be counted.
// @post element k depends on (seed, offset, k) only, so any backend may split the output freely
//       (the CUDA kernel writes the CPU's values: backend/cuda/random.cuh).
#include <cstdint>
#include <string_view>

#include <tenet/device.hpp>
#include <tenet/dtype.hpp>
#include <tenet/shape.hpp>

namespace tenet::prim {

struct random_group {};

/// uniform_<T, S>: values of dtype T (floating), shape S, uniform on [0, 1).
template <class T, class S>
struct uniform_ {
  static_assert(is_floating_v<T>, "tenet: uniform_ draws floating values; cast the result for other dtypes");
  static constexpr bool is_prim = true;
  using group = random_group;
  static constexpr std::string_view name = "uniform";
  template <class... C>
  using result_type = T;
  template <class... C>
  using result_shape = S;

  sizes_t<S::rank> extents{};
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;  // in Philox blocks
  device placement = tenet::cpu;  // where the draw is evaluated (no leaf says it)

  sizes_t<S::rank> sizes() const { return extents; }
};

}  // namespace tenet::prim
