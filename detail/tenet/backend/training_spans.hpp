#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The lists of tensors that training's multi-tensor calls hand to a backend (backend/training.hpp
// declares the calls; CUDA's kernels: backend/cuda/autograd.cuh).
#include <cstdint>

namespace tenet::detail {

/// One gradient of a multi-tensor call (clip_grad_norm_, clip_grad_value_): n elements of device
/// memory at g; part: where its partial sums go (norm_partials_on_device).
template <class T>
struct grad_span {
  T* g = nullptr;
  std::int64_t n = 0;
  double* part = nullptr;
};
/// One parameter of a multi-tensor Adam update; vmax null without amsgrad.
template <class T>
struct adam_span {
  T* p = nullptr;
  const T* g = nullptr;
  T *m = nullptr, *v = nullptr, *vmax = nullptr;
  std::int64_t n = 0;
};
/// Adam's scalars for one step of a list of parameters (optim/optimizers.hpp adam_scalars_for).
template <class S>
struct adam_scalars {
  S neg_step_size, bc2_sqrt, w1, b2, w2, eps, wd, decay;
  bool maximize, use_wd, decoupled;
  bool operator==(const adam_scalars&) const = default;
};

}  // namespace tenet::detail
