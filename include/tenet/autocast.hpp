#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Automatic mixed precision on CUDA (torch.autocast("cuda", dtype)): an RAII guard under which the
// matmul-class ops of fp32 CUDA tensors run in float16 or bfloat16 on the tensor cores.
//
//   {
//     tenet::autocast ac(tenet::cuda(0), tenet::dtype::bfloat16);  // torch's default is float16
//     Tensor<float, dyn_shape<2>> y = x.matmul(w.t()) + b;          // bf16 GEMM (fp32 accumulation)
//   }                                                               // the previous state is back
//
// What it changes (the op lists and the one difference from PyTorch are in docs/cuda.md):
// - matmul-class ops (matmul, mm, bmm, linear, conv via its matmul, the linear + bias (+ act)
//   cuBLASLt epilogue) of float32 CUDA tensors cast their operands (and a fused bias) to the
//   autocast dtype and run the GEMM in it with fp32 accumulation;
// - float64 operands are not cast (as torch); CPU tensors are not affected (torch.autocast("cuda")
//   does not touch CPU ops either);
// - tenet's dtypes are compile-time types: the value of `matmul(a, b)` with fp32 a and b stays a
//   float32 tensor holding the float16/bfloat16-rounded product (torch returns a bf16 tensor);
// - the ops of torch's fp32 list (softmax, log_softmax, layer_norm, losses, sum, exp, log, ...)
//   already compute in fp32 on CUDA for every dtype: they are unchanged.
// The state is per thread and per device type, as PyTorch's; guards nest and restore.
#include <string>

#include <tenet/device.hpp>
#include <tenet/dtype.hpp>
#include <tenet/error.hpp>

namespace tenet {

namespace detail {
struct autocast_state {
  bool enabled = false;
  dtype low = dtype::float16;
};
/// This thread's CUDA autocast state.
inline autocast_state& cuda_autocast_slot() {
  thread_local autocast_state s;
  return s;
}
/// Sets this thread's state for its lifetime and restores the one it found (also on an exception):
/// the public guard below, and the autograd engine running a node's backward under the state the
/// node was recorded with (autograd/graph.hpp).
class autocast_scope {
 public:
  explicit autocast_scope(autocast_state s) : previous_(cuda_autocast_slot()) { cuda_autocast_slot() = s; }
  ~autocast_scope() { cuda_autocast_slot() = previous_; }
  autocast_scope(const autocast_scope&) = delete;
  autocast_scope& operator=(const autocast_scope&) = delete;

 private:
  autocast_state previous_;
};
}  // namespace detail

/// Whether autocast is on for `type` in this thread (torch.is_autocast_enabled(device_type)).
inline bool is_autocast_enabled(device_type type = device_type::cuda) {
  return type == device_type::cuda && detail::cuda_autocast_slot().enabled;
}
/// The dtype autocast casts to for `type` (torch.get_autocast_dtype).
inline dtype get_autocast_dtype(device_type type = device_type::cuda) {
  (void)type;
  return detail::cuda_autocast_slot().low;
}

/// torch.autocast(device_type, dtype, enabled): sets this thread's autocast state for the guard's
/// lifetime; the destructor restores the state it found (guards nest). Only CUDA devices and
/// float16 / bfloat16 (a CPU device or another dtype is a value_error).
class autocast {
 public:
  explicit autocast(device d, dtype low = dtype::float16, bool enabled = true) : scope_(checked(d, low, enabled)) {}

 private:
  static detail::autocast_state checked(device d, dtype low, bool enabled) {
    if (d.type != device_type::cuda)
      throw value_error("tenet: autocast supports CUDA devices only (got " + d.str() +
                        "); CPU autocast (torch.autocast('cpu')) is not implemented");
    if (low != dtype::float16 && low != dtype::bfloat16)
      throw value_error(std::string("tenet: autocast casts to float16 or bfloat16, not ") + name(low));
    return {enabled, low};
  }
  detail::autocast_scope scope_;
};

}  // namespace tenet
