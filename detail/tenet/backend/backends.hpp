#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The backends this translation unit runs: the CPU always, CUDA where nvcc compiles it. Each
// specializes backend_of (backend/registry.hpp) for its device type; on_backend below is the one
// place where a device picks its backend.
#include <string>
#include <type_traits>

#include <tenet/backend/cpu/backend.hpp>
#include <tenet/backend/registry.hpp>
#if defined(__CUDACC__)
#include <tenet/backend/cuda/backend.cuh>
#endif

namespace tenet::detail {

/// f(B{}) (a template, so that a discarded branch of on_backend does not name B{} for a void B).
template <class B, class R, class F>
R call_backend(F& f) {
  return f(B{});
}

/// Throws device_error: this translation unit has no backend for d's device type.
[[noreturn]] inline void no_backend(const device& d, const char* what) {
  require_backend(d, what);
  throw device_error(std::string("tenet: no backend for ") + d.str());
}

/// Whether this translation unit has a backend for d's device type (the CPU's always; CUDA's in
/// a unit nvcc compiles).
inline bool has_backend(const device& d) {
  switch (d.type) {
    case device_type::cuda:
      return !std::is_void_v<typename backend_of<device_type::cuda>::type>;
    case device_type::metal:
      return !std::is_void_v<typename backend_of<device_type::metal>::type>;
    case device_type::cpu:
    default:
      return true;
  }
}

// on_backend is instantiated once per caller's lambda, that is once per expression node: a device
// type without a backend in this unit costs no instantiation of its own (no_backend is a plain
// function).
template <class R, class F>
R on_backend(const device& d, const char* what, F&& f) {
  using Cuda = typename backend_of<device_type::cuda>::type;
  using Metal = typename backend_of<device_type::metal>::type;
  using Cpu = typename backend_of<device_type::cpu>::type;
  static_assert(!std::is_void_v<Cpu>, "tenet: internal: no CPU backend");
  switch (d.type) {
    case device_type::cuda:
      if constexpr (std::is_void_v<Cuda>)
        no_backend(d, what);
      else
        return call_backend<Cuda, R>(f);
    case device_type::metal:
      if constexpr (std::is_void_v<Metal>)
        no_backend(d, what);
      else
        return call_backend<Metal, R>(f);
    case device_type::cpu:
    default:
      return f(Cpu{});
  }
}

}  // namespace tenet::detail
