#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Devices: the run-time tag every tensor carries, the default device and an RAII guard
// (torch.set_default_device / `with torch.device(...)`).
#include <cstdint>
#include <string>

#include <tenet/error.hpp>

namespace tenet {

enum class device_type : std::uint8_t { cpu, cuda, metal };

struct device {
  device_type type = device_type::cpu;
  int index = 0;
  friend constexpr bool operator==(const device&, const device&) = default;
  /// "cpu", "cuda:0", "metal:0" (the form PyTorch prints).
  std::string str() const {
    switch (type) {
      case device_type::cpu: return "cpu";
      case device_type::cuda: return "cuda:" + std::to_string(index);
      default: return "metal:" + std::to_string(index);
    }
  }
  constexpr bool is_cpu() const { return type == device_type::cpu; }
};

inline constexpr device cpu{device_type::cpu, 0};
constexpr device cuda(int index = 0) { return {device_type::cuda, index}; }
constexpr device metal(int index = 0) { return {device_type::metal, index}; }

namespace detail {
inline device& default_device_slot() {
  thread_local device d = cpu;
  return d;
}
/// Throws unless a backend for `d` is compiled into this translation unit.
inline void require_backend(const device& d, const char* what) {
  if (d.type == device_type::cuda)
    throw device_error(std::string("tenet: ") + what + " on " + d.str() +
                       ": the CUDA backend is not compiled in (configure with -DTENET_CUDA=ON and compile this "
                       "translation unit with nvcc)");
  if (d.type == device_type::metal)
    throw device_error(std::string("tenet: ") + what + " on " + d.str() +
                       ": the Metal backend is not compiled in (it needs an Apple platform and -DTENET_METAL=ON)");
}
}  // namespace detail

/// The device factories use when none is given (per thread, like PyTorch's).
inline device default_device() { return detail::default_device_slot(); }
inline void set_default_device(device d) { detail::default_device_slot() = d; }

/// Sets the default device for the lifetime of the guard.
class device_guard {
 public:
  explicit device_guard(device d) : previous_(default_device()) { set_default_device(d); }
  ~device_guard() { set_default_device(previous_); }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  device previous_;
};

}  // namespace tenet
