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

template <class B, class R, class F>
R call_backend(const device& d, const char* what, F& f) {
  if constexpr (std::is_void_v<B>) {
    require_backend(d, what);  // throws: this translation unit has no such backend
    throw device_error(std::string("tenet: no backend for ") + d.str());
  } else {
    return f(B{});
  }
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

template <class R, class F>
R on_backend(const device& d, const char* what, F&& f) {
  switch (d.type) {
    case device_type::cuda:
      return call_backend<typename backend_of<device_type::cuda>::type, R>(d, what, f);
    case device_type::metal:
      return call_backend<typename backend_of<device_type::metal>::type, R>(d, what, f);
    case device_type::cpu:
    default:
      return call_backend<typename backend_of<device_type::cpu>::type, R>(d, what, f);
  }
}

}  // namespace tenet::detail
