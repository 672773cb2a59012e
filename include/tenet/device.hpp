#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Devices: the run-time tag every tensor carries, the default device and an RAII guard
// (torch.set_default_device / `with torch.device(...)`).
#include <array>
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

/// `tenet::cuda(n)` is the device cuda:n (it converts to tenet::device); `tenet::cuda::...` holds
/// the CUDA runtime API (memory_stats, empty_cache, streams, events, allow_tf32, linear), declared
/// here and defined by <tenet/cuda.hpp>, which only translation units compiled by nvcc can include.
struct cuda {
  int index = 0;
  constexpr cuda(int i = 0) : index(i) {}  // NOLINT: implicit, as a device
  constexpr operator device() const { return {device_type::cuda, index}; }  // NOLINT
  std::string str() const { return "cuda:" + std::to_string(index); }

  struct memory_stats_t;
  class stream;
  class stream_guard;
  class event;
  enum class activation { none, relu, gelu_tanh };

  static inline bool is_available();
  static inline int device_count();
  static inline void synchronize();
  static inline memory_stats_t memory_stats();
  static inline void reset_peak_memory_stats();
  static inline void empty_cache();
  /// TF32 for fp32 matmuls (torch.backends.cuda.matmul.allow_tf32; off by default).
  static inline void set_allow_tf32(bool on);
  static inline bool allow_tf32();
  /// Matmul tuning (torch.cuda.tunable.enable): the first call of each GEMM problem (dtypes,
  /// sizes, layouts, epilogue) times cuBLASLt's candidate algorithms and keeps the fastest for the
  /// process; later calls cost nothing extra. Off by default (the heuristic's first choice).
  static inline void set_matmul_tuning(bool on);
  static inline bool matmul_tuning();
  /// act(x @ w.T + bias) in one cuBLASLt call (x [M, K], w [N, K], bias [N]; torch's linear layout).
  template <class X, class W, class B>
  static auto linear(const X& x, const W& w, const B& bias, activation act);
  /// A tensor in page-locked host memory (copies from and to it can overlap with kernels).
  template <class T, class S>
  static auto pinned_empty(const std::array<std::int64_t, S::rank>& sizes);
  /// Copies src into dst (same sizes and dtype, both contiguous, any two of host and CUDA) on the
  /// current stream without waiting for it (asynchronous with respect to the host when host memory
  /// is pinned).
  template <class Dst, class Src>
  static void copy_async(const Dst& dst, const Src& src);
};
constexpr device metal(int index = 0) { return {device_type::metal, index}; }

namespace detail {
inline device& default_device_slot() {
  thread_local device d = tenet::cpu;
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
