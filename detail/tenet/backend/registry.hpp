#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The backend registry: which backend policy type runs the kernels of a device type. A backend
// joins by its header specializing backend_of (backend/cpu/backend.hpp, backend/cuda/backend.cuh);
// backend/backends.hpp includes the backends this translation unit can run and defines on_backend,
// the one run-time dispatch from a device to its backend.
#include <tenet/device.hpp>

namespace tenet::detail {

/// The backend policy type of device type D in this translation unit; void when it has none.
template <device_type D>
struct backend_of {
  using type = void;
};

/// f(B{}) for the backend B of device d, as R (backend/backends.hpp); device_error when this
/// translation unit has no backend for d (`what` names the operation).
template <class R, class F>
R on_backend(const device& d, const char* what, F&& f);

}  // namespace tenet::detail
