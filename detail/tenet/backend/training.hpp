#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The device side of training: the kernels autograd's backward (autograd/device.hpp declares
// them), the optimizers' updates (optim/optimizers.hpp) and gradient clipping (nn/utils.hpp) run
// on a tensor that is not on the CPU. Each is sent to the tensor's backend by on_backend, as a
// call `run_<what>(backend, ...)`: a backend provides the overloads it has (CUDA:
// backend/cuda/autograd.cuh); the fallbacks below, for a backend without one, throw a
// device_error naming the device (linear's fused gradient returns false: the caller computes the
// two gradients apart).
#include <cstdint>
#include <string>
#include <vector>

#include <tenet/autograd/device.hpp>
#include <tenet/backend/backends.hpp>
#include <tenet/backend/training_spans.hpp>
#include <tenet/dtype.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail {

/// A backend that declares `has_training_kernels` provides every run_ function below for its
/// tensors; a fallback chosen for it means its overload did not match the call (a compile error).
template <class B>
constexpr void require_no_training_kernels() {
  if constexpr (requires { B::has_training_kernels; })
    static_assert(!B::has_training_kernels,
                  "tenet: this backend declares training kernels but none of its overloads matches this call "
                  "(backend/training.hpp; check the overload's parameter types)");
}

// ---------------------------------------------------------------------------------------------
// the fallbacks: a backend without the kernel
template <class B, class G, class Out>
void run_sum_to(B, const G&, const Out& out) {
  require_no_training_kernels<B>();
  ag::no_device_kernel(out.device(), "autograd's backward (sum_to_size)");
}
template <class B, class X, class G, class W, class Bias>
bool run_linear_weight_bias_grad(B, const X&, const G&, const W&, const Bias&) {
  require_no_training_kernels<B>();
  return false;
}
template <class B, class G, class VS, class Out, class BS>
void run_view_backward(B, const G&, const VS&, std::int64_t, const Out& out, const BS&, std::int64_t, std::int64_t,
                       std::int64_t) {
  require_no_training_kernels<B>();
  ag::no_device_kernel(out.device(), "autograd's backward (a view's gradient)");
}
template <class B, class T, class C>
void run_sgd(B, device dev, T*, const T*, T*, std::int64_t, C, C, C, C, bool, bool, bool, bool) {
  require_no_training_kernels<B>();
  ag::no_device_kernel(dev, "optim::SGD::step");
}
template <class B, class T, class S>
void run_adam(B, device dev, const adam_span<T>*, std::size_t, const adam_scalars<S>&) {
  require_no_training_kernels<B>();
  ag::no_device_kernel(dev, "optim::Adam::step");
}
template <class B, class T, class C>
void run_rmsprop(B, device dev, T*, const T*, T*, T*, T*, std::int64_t, C, C, C, C, C, C, bool, bool) {
  require_no_training_kernels<B>();
  ag::no_device_kernel(dev, "optim::RMSprop::step");
}
template <class B, class T, class C>
void run_adagrad(B, device dev, T*, const T*, T*, std::int64_t, C, C, C, bool, bool) {
  require_no_training_kernels<B>();
  ag::no_device_kernel(dev, "optim::Adagrad::step");
}
template <class B>
std::int64_t clip_norm_partial_count(B, device dev, std::int64_t) {
  require_no_training_kernels<B>();
  ag::no_device_kernel(dev, "nn::utils::clip_grad_norm_");
}
template <class B, class T>
void run_clip_norm_partials(B, device dev, const grad_span<T>*, std::size_t, double, bool) {
  require_no_training_kernels<B>();
  ag::no_device_kernel(dev, "nn::utils::clip_grad_norm_");
}
template <class B, class T>
void run_clip(B, device dev, const grad_span<T>*, std::size_t, bool clamp, T, T, T) {
  require_no_training_kernels<B>();
  ag::no_device_kernel(dev, clamp ? "nn::utils::clip_grad_value_" : "nn::utils::clip_grad_norm_");
}

}  // namespace tenet::detail

namespace tenet::detail::ag {

template <class T, std::size_t Rg, std::size_t R>
void sum_to_on_device(const Tensor<T, dyn_shape<Rg>>& g, const Tensor<T, dyn_shape<R>>& out) {
  on_backend<void>(out.device(), "autograd's backward (sum_to_size)", [&](auto b) { run_sum_to(b, g, out); });
}

template <class T>
bool linear_grad_on_device(const Tensor<T, dyn_shape<2>>& x, const Tensor<T, dyn_shape<2>>& g,
                           const Tensor<T, dyn_shape<2>>& dw, const Tensor<T, dyn_shape<1>>& db) {
  return on_backend<bool>(g.device(), "autograd's backward (linear)",
                          [&](auto b) { return run_linear_weight_bias_grad(b, x, g, dw, db); });
}

template <class T, std::size_t RV, std::size_t RB>
void view_backward_on_device(const Tensor<T, dyn_shape<RV>>& g, const sizes_t<RV>& vstrides, std::int64_t voffset,
                             const Tensor<T, dyn_shape<RB>>& out, const sizes_t<RB>& bstrides, std::int64_t boffset,
                             std::int64_t lo, std::int64_t hi) {
  on_backend<void>(out.device(), "autograd's backward (a view's gradient)",
                   [&](auto b) { run_view_backward(b, g, vstrides, voffset, out, bstrides, boffset, lo, hi); });
}

}  // namespace tenet::detail::ag

namespace tenet::optim::detail {
using tenet::detail::on_backend;

/// The SGD update (optim/optimizers.hpp SGD::run) of n elements of device memory; buf null
/// without momentum.
template <class T>
void sgd_on_device(device dev, T* p, const T* g, T* buf, std::int64_t n, compute_t<T> wd, compute_t<T> mu,
                   compute_t<T> keep, compute_t<T> neg_lr, bool maximize, bool nesterov, bool use_wd, bool fresh) {
  on_backend<void>(dev, "optim::SGD::step", [&](auto b) {
    run_sgd(b, dev, p, g, buf, n, wd, mu, keep, neg_lr, maximize, nesterov, use_wd, fresh);
  });
}

/// The Adam / AdamW update (optim/optimizers.hpp) of a list of parameters on dev, all with the
/// same scalars: one call to the backend (CUDA: a kernel launch per 24 tensors).
template <class T>
void adam_on_device(device dev, const std::vector<tenet::detail::adam_span<T>>& list,
                    const tenet::detail::adam_scalars<compute_t<T>>& s) {
  on_backend<void>(dev, "optim::Adam::step", [&](auto b) { run_adam(b, dev, list.data(), list.size(), s); });
}

/// The RMSprop update (optim/optimizers.hpp RMSprop::run) of n elements of device memory; buf
/// null without momentum, ga null unless centered.
template <class T>
void rmsprop_on_device(device dev, T* p, const T* g, T* sq, T* buf, T* ga, std::int64_t n, compute_t<T> alpha,
                       compute_t<T> w, compute_t<T> eps, compute_t<T> wd, compute_t<T> mu, compute_t<T> neg_lr,
                       bool maximize, bool use_wd) {
  on_backend<void>(dev, "optim::RMSprop::step", [&](auto b) {
    run_rmsprop(b, dev, p, g, sq, buf, ga, n, alpha, w, eps, wd, mu, neg_lr, maximize, use_wd);
  });
}

/// The Adagrad update (optim/optimizers.hpp Adagrad::run) of n elements of device memory.
template <class T>
void adagrad_on_device(device dev, T* p, const T* g, T* sum, std::int64_t n, compute_t<T> neg_clr, compute_t<T> eps,
                       compute_t<T> wd, bool maximize, bool use_wd) {
  on_backend<void>(dev, "optim::Adagrad::step",
                   [&](auto b) { run_adagrad(b, dev, p, g, sum, n, neg_clr, eps, wd, maximize, use_wd); });
}

}  // namespace tenet::optim::detail

namespace tenet::nn::utils::detail {
using tenet::detail::on_backend;

/// How many partial sums norm_partials_on_device writes for n elements of a gradient on dev.
inline std::int64_t norm_partial_count(device dev, std::int64_t n) {
  return on_backend<std::int64_t>(dev, "nn::utils::clip_grad_norm_",
                                  [&](auto b) { return clip_norm_partial_count(b, dev, n); });
}

/// For each gradient of the list (device memory on dev): part[0, norm_partial_count(n)) =
/// partial sums of |g_i|^p (maxima of |g_i| when inf) over its n elements, in double
/// (clip_grad_norm_); enqueued, not waited for.
template <class T>
void norm_partials_on_device(device dev, const std::vector<tenet::detail::grad_span<T>>& list, double p, bool inf) {
  on_backend<void>(dev, "nn::utils::clip_grad_norm_",
                   [&](auto b) { run_clip_norm_partials(b, dev, list.data(), list.size(), p, inf); });
}

/// g *= c, or g = min(max(g, lo), hi) when clamp, over each gradient of the list (device memory on dev).
template <class T>
void clip_on_device(device dev, const std::vector<tenet::detail::grad_span<T>>& list, bool clamp, T c, T lo, T hi) {
  on_backend<void>(dev, clamp ? "nn::utils::clip_grad_value_" : "nn::utils::clip_grad_norm_",
                   [&](auto b) { run_clip(b, dev, list.data(), list.size(), clamp, c, lo, hi); });
}

}  // namespace tenet::nn::utils::detail
