#pragma once
// What the Metal kernel tests share (test_metal_kernels.cpp, test_metal_scan_index.cpp): a kernel's
// argument table, launching a generated kernel (in the emulator through a translation unit's
// registry of the kernels it included, or with TENET_METAL_ON_DEVICE on the GPU through the
// metal-cpp runtime), deterministic inputs and the comparison with the CPU backend.
#include <tenet/tenet.hpp>
#include <tenet/backend/metal/msl_pointwise.hpp>  // buffer_view, view_extent

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(TENET_METAL_ON_DEVICE)
#include <tenet/backend/metal/runtime_apple.hpp>
#else
#include "emulator.hpp"
#endif

namespace tenet_metal_harness {

namespace m = tenet::detail::metal;
using tenet::dyn;
using tenet::shape;
using tenet::Tensor;

/// One entry of a kernel's argument table: a buffer (its first element and extent) or threadgroup
/// memory (its size). `written`: a buffer the kernel writes besides buffer 0 (on the GPU it is
/// copied back).
struct arg {
  const void* data = nullptr;
  std::size_t bytes = 0;
  bool threadgroup = false;
  bool written = false;
};

#if defined(TENET_METAL_ON_DEVICE)
/// Kernel k on the GPU: buffer 0 and the buffers marked written are copied back.
inline void launch_on_device(const m::kernel_source& k, std::uint32_t groups, std::uint32_t threads, const std::vector<arg>& args) {
  std::vector<m::runtime::argument> a;
  for (std::size_t i = 0; i < args.size(); ++i)
    a.push_back({args[i].data, args[i].bytes, args[i].threadgroup, i == 0 || args[i].written});
  m::runtime::get().dispatch(k, groups, threads, a);
}
#else
namespace emu = tenet::metal_emu;

/// A kernel a translation unit included (its generated .metal file), by name.
struct kernel_entry {
  std::string_view name;
  void (*run)(std::uint32_t groups, std::uint32_t threads, const std::vector<emu::binding>& args);
};
/// One line of a registry.inc: `const kernel_entry registry[] = {\n#include "registry.inc"\n};`
#define TENET_METAL_KERNEL(NAME)                                                                    \
  ::tenet_metal_harness::kernel_entry{#NAME, [](std::uint32_t g, std::uint32_t t, const std::vector<::tenet::metal_emu::binding>& a) { \
    ::tenet::metal_emu::launch(#NAME, &NAME, g, t, a);                                           \
  }},

inline std::vector<emu::binding> bindings(const std::vector<arg>& args) {
  std::vector<emu::binding> b;
  for (const auto& a : args) b.push_back(a.threadgroup ? emu::bind_threadgroup(a.bytes) : emu::bind_buffer(a.data, a.bytes));
  return b;
}

/// Kernel k in the emulator, found in `registry` (the kernels the calling unit included).
template <std::size_t N>
void launch_emulated(const kernel_entry (&registry)[N], const m::kernel_source& k, std::uint32_t groups, std::uint32_t threads,
                     const std::vector<arg>& args) {
  for (const auto& e : registry)
    if (e.name == k.name) return e.run(groups, threads, bindings(args));
  FAIL("kernel " << k.name << " (" << k.description << ") was not generated: add it to tests/metal/metal_cases.hpp");
}
#endif

template <class T, class S>
arg as_arg(const Tensor<T, S>& t) {
  const m::buffer_view v = m::view_extent(t);
  return {v.data, v.bytes};
}
inline arg as_arg(const m::buffer_view& v) { return {v.data, v.bytes}; }
inline arg as_arg(const std::vector<std::int64_t>& p) { return {p.data(), p.size() * sizeof(std::int64_t)}; }

/// Deterministic values in [-3, 3).
struct values {
  std::uint64_t state;
  float next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<double>(state >> 11) / 9007199254740992.0 * 6.0 - 3.0);
  }
};

template <class S, class T = float>
Tensor<T, S> random_tensor(const typename Tensor<T, S>::sizes_type& sizes, std::uint64_t seed, bool special = false) {
  Tensor<T, S> t(sizes);
  values v{seed};
  T* p = t.data();
  if constexpr (std::is_integral_v<T>) {  // [-120, 120), the extremes among the specials (wrapping)
    const T specials[] = {0, 1, -1, std::numeric_limits<T>::max(), std::numeric_limits<T>::min(), 2, -2, 31, -31};
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = special && i < 9 ? specials[i] : static_cast<T>(std::floor(v.next() * 40.0f));
  } else {
    const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, 0.5f, -0.5f};
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(special && i < 9 ? specials[i] : v.next());
  }
  return t;
}

/// The tolerance (rtol, atol) of dtype T: the tests' tolerance against PyTorch (reference.hpp).
template <class T>
std::pair<double, double> tolerance() {
  if constexpr (std::is_same_v<T, float>) return {1.3e-6, 1e-5};
  else if constexpr (std::is_same_v<T, tenet::float16>) return {1e-3, 1e-5};
  else if constexpr (std::is_same_v<T, tenet::bfloat16>) return {1.6e-2, 1e-5};
  else return {0.0, 0.0};
}

template <class T, class S>
std::vector<T> values_of(const Tensor<T, S>& t) {
  const auto ct = t.contiguous();
  return std::vector<T>(ct.data(), ct.data() + ct.numel());
}

template <class T, class S1, class S2>
void check_equal(const Tensor<T, S1>& got, const Tensor<T, S2>& want, const std::string& what,
                 double rtol = tolerance<T>().first, double atol = tolerance<T>().second) {
  REQUIRE(got.sizes() == want.sizes());
  using C = tenet::compute_t<T>;
  std::vector<C> g, w;
  for (const T& x : values_of(got)) g.push_back(static_cast<C>(x));
  for (const T& x : values_of(want)) w.push_back(static_cast<C>(x));
  int bad = 0;
  for (std::size_t i = 0; i < g.size() && bad < 5; ++i) {
    bool ok;
    if constexpr (std::is_same_v<C, float>) {
      if (std::isnan(w[i])) ok = std::isnan(g[i]);
      else if (std::isinf(w[i])) ok = g[i] == w[i];
      else ok = std::abs(static_cast<double>(g[i]) - w[i]) <= atol + rtol * std::abs(static_cast<double>(w[i]));
    } else {
      ok = g[i] == w[i];
    }
    if (!ok) {
      ++bad;
      FAIL_CHECK(what << ": element " << i << ": emulated Metal kernel " << +g[i] << ", CPU " << +w[i]);
    }
  }
}

}  // namespace tenet_metal_harness
