#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The device side of autograd and of the optimizers: what the backward and optim.hpp run on a
// tensor that is not on the CPU. Each entry forwards to the backend's kernels (CUDA:
// backend/cuda/autograd.cuh, compiled only in translation units nvcc compiles) or throws a
// device_error naming the device when this translation unit has no backend for it.
#include <cstdint>
#include <string>

#include <tenet/device.hpp>
#include <tenet/error.hpp>
#include <tenet/tensor.hpp>

#if defined(__CUDACC__)
namespace tenet::detail::cuda {
template <class T, std::size_t Rg, std::size_t R>
void sum_to_into(const Tensor<T, dyn_shape<Rg>>& g, const Tensor<T, dyn_shape<R>>& out);
template <class T, std::size_t RV, std::size_t RB>
void view_backward_into(const Tensor<T, dyn_shape<RV>>& g, const sizes_t<RV>& vstrides, std::int64_t voffset,
                        const Tensor<T, dyn_shape<RB>>& out, const sizes_t<RB>& bstrides, std::int64_t boffset,
                        std::int64_t lo, std::int64_t hi);
template <class T>
void optim_sgd(device dev, T* p, const T* g, T* buf, std::int64_t n, compute_t<T> wd, compute_t<T> mu,
               compute_t<T> keep, compute_t<T> neg_lr, bool maximize, bool nesterov, bool use_wd, bool fresh);
template <class T>
void optim_adam(device dev, T* p, const T* g, T* m, T* v, T* vmax, std::int64_t n, compute_t<T> neg_step_size,
                compute_t<T> bc2_sqrt, compute_t<T> w1, compute_t<T> b2, compute_t<T> w2, compute_t<T> eps,
                compute_t<T> wd, compute_t<T> decay, bool maximize, bool use_wd, bool decoupled);
template <class T>
void optim_rmsprop(device dev, T* p, const T* g, T* sq, T* buf, T* ga, std::int64_t n, compute_t<T> alpha,
                   compute_t<T> w, compute_t<T> eps, compute_t<T> wd, compute_t<T> mu, compute_t<T> neg_lr,
                   bool maximize, bool use_wd);
template <class T>
void optim_adagrad(device dev, T* p, const T* g, T* sum, std::int64_t n, compute_t<T> neg_clr, compute_t<T> eps,
                   compute_t<T> wd, bool maximize, bool use_wd);
std::int64_t clip_norm_blocks(device dev, std::int64_t n);
template <class T>
void clip_norm_partials(device dev, const T* g, std::int64_t n, double p, bool inf, double* part);
template <class T>
void clip_apply(device dev, T* g, std::int64_t n, bool clamp, T c, T lo, T hi);
template <class T>
bool linear_weight_bias_grad(const Tensor<T, dyn_shape<2>>& x, const Tensor<T, dyn_shape<2>>& g,
                             const Tensor<T, dyn_shape<2>>& dw, const Tensor<T, dyn_shape<1>>& db);
}  // namespace tenet::detail::cuda
#endif

// Without nvcc the forwarders below only report the missing kernel: their arguments are unused.
#if !defined(__CUDACC__) && defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif

namespace tenet::detail::ag {

[[noreturn]] inline void no_device_kernel(const device& d, const char* what) {
  require_backend(d, what);
  throw device_error(std::string("tenet: ") + what + " has no kernel for tensors on " + d.str());
}

/// out (contiguous, on g's device) = g summed over the dims where out has size 1 and over g's
/// leading extra dims (autograd's sum_to_size, vjp.hpp reduce_to).
template <class T, std::size_t Rg, std::size_t R>
void sum_to_on_device(const Tensor<T, dyn_shape<Rg>>& g, const Tensor<T, dyn_shape<R>>& out) {
#if defined(__CUDACC__)
  if (out.device().type == device_type::cuda) return tenet::detail::cuda::sum_to_into<T, Rg, R>(g, out);
#endif
  no_device_kernel(out.device(), "autograd's backward (sum_to_size)");
}

/// A linear layer's weight and bias gradients in one GEMM with a bias-gradient epilogue, where
/// the device's backend has one: dw (out x in) = g^T x and db = g's column sums, for x (rows x in)
/// and g (rows x out) on one device. False (nothing written) where there is none: the caller
/// computes them apart.
template <class T>
bool linear_grad_on_device(const Tensor<T, dyn_shape<2>>& x, const Tensor<T, dyn_shape<2>>& g,
                           const Tensor<T, dyn_shape<2>>& dw, const Tensor<T, dyn_shape<1>>& db) {
#if defined(__CUDACC__)
  if (g.device().type == device_type::cuda) return tenet::detail::cuda::linear_weight_bias_grad<T>(x, g, dw, db);
#endif
  return false;
}

/// out (contiguous, the base's sizes) = the gradient of a base read through (bstrides, boffset)
/// given the gradient g of a view reading (g's sizes, vstrides, voffset) of the same storage; lo
/// and hi bound the storage positions both touch (graph.hpp view_backward).
template <class T, std::size_t RV, std::size_t RB>
void view_backward_on_device(const Tensor<T, dyn_shape<RV>>& g, const sizes_t<RV>& vstrides, std::int64_t voffset,
                             const Tensor<T, dyn_shape<RB>>& out, const sizes_t<RB>& bstrides, std::int64_t boffset,
                             std::int64_t lo, std::int64_t hi) {
#if defined(__CUDACC__)
  if (out.device().type == device_type::cuda)
    return tenet::detail::cuda::view_backward_into<T, RV, RB>(g, vstrides, voffset, out, bstrides, boffset, lo, hi);
#endif
  no_device_kernel(out.device(), "autograd's backward (a view's gradient)");
}

}  // namespace tenet::detail::ag

namespace tenet::optim::detail {

/// The SGD update (optim.hpp SGD::run) of n elements of device memory; buf null without momentum.
template <class T>
void sgd_on_device(device dev, T* p, const T* g, T* buf, std::int64_t n, compute_t<T> wd, compute_t<T> mu,
                   compute_t<T> keep, compute_t<T> neg_lr, bool maximize, bool nesterov, bool use_wd, bool fresh) {
#if defined(__CUDACC__)
  if (dev.type == device_type::cuda)
    return tenet::detail::cuda::optim_sgd<T>(dev, p, g, buf, n, wd, mu, keep, neg_lr, maximize, nesterov, use_wd, fresh);
#endif
  tenet::detail::ag::no_device_kernel(dev, "optim::SGD::step");
}

/// The Adam / AdamW update (optim.hpp adam_update) of n elements of device memory; vmax null
/// without amsgrad.
template <class T>
void adam_on_device(device dev, T* p, const T* g, T* m, T* v, T* vmax, std::int64_t n, compute_t<T> neg_step_size,
                    compute_t<T> bc2_sqrt, compute_t<T> w1, compute_t<T> b2, compute_t<T> w2, compute_t<T> eps,
                    compute_t<T> wd, compute_t<T> decay, bool maximize, bool use_wd, bool decoupled) {
#if defined(__CUDACC__)
  if (dev.type == device_type::cuda)
    return tenet::detail::cuda::optim_adam<T>(dev, p, g, m, v, vmax, n, neg_step_size, bc2_sqrt, w1, b2, w2, eps, wd,
                                              decay, maximize, use_wd, decoupled);
#endif
  tenet::detail::ag::no_device_kernel(dev, "optim::Adam::step");
}

/// The RMSprop update (optim.hpp RMSprop::run) of n elements of device memory; buf null without
/// momentum, ga null unless centered.
template <class T>
void rmsprop_on_device(device dev, T* p, const T* g, T* sq, T* buf, T* ga, std::int64_t n, compute_t<T> alpha,
                       compute_t<T> w, compute_t<T> eps, compute_t<T> wd, compute_t<T> mu, compute_t<T> neg_lr,
                       bool maximize, bool use_wd) {
#if defined(__CUDACC__)
  if (dev.type == device_type::cuda)
    return tenet::detail::cuda::optim_rmsprop<T>(dev, p, g, sq, buf, ga, n, alpha, w, eps, wd, mu, neg_lr, maximize,
                                                 use_wd);
#endif
  tenet::detail::ag::no_device_kernel(dev, "optim::RMSprop::step");
}

/// The Adagrad update (optim.hpp Adagrad::run) of n elements of device memory.
template <class T>
void adagrad_on_device(device dev, T* p, const T* g, T* sum, std::int64_t n, compute_t<T> neg_clr, compute_t<T> eps,
                       compute_t<T> wd, bool maximize, bool use_wd) {
#if defined(__CUDACC__)
  if (dev.type == device_type::cuda)
    return tenet::detail::cuda::optim_adagrad<T>(dev, p, g, sum, n, neg_clr, eps, wd, maximize, use_wd);
#endif
  tenet::detail::ag::no_device_kernel(dev, "optim::Adagrad::step");
}

}  // namespace tenet::optim::detail

namespace tenet::nn::utils::detail {

/// How many partial sums norm_partials_on_device writes for n elements of a gradient on dev.
inline std::int64_t norm_partial_count(device dev, std::int64_t n) {
#if defined(__CUDACC__)
  if (dev.type == device_type::cuda) return tenet::detail::cuda::clip_norm_blocks(dev, n);
#endif
  tenet::detail::ag::no_device_kernel(dev, "nn::utils::clip_grad_norm_");
}

/// part[0, norm_partial_count(n)) (device memory on dev) = partial sums of |g_i|^p (maxima of
/// |g_i| when inf) over the n elements of device memory g, in double (clip_grad_norm_); enqueued,
/// not waited for.
template <class T>
void norm_partials_on_device(device dev, const T* g, std::int64_t n, double p, bool inf, double* part) {
#if defined(__CUDACC__)
  if (dev.type == device_type::cuda) return tenet::detail::cuda::clip_norm_partials<T>(dev, g, n, p, inf, part);
#endif
  tenet::detail::ag::no_device_kernel(dev, "nn::utils::clip_grad_norm_");
}

/// g *= c, or g = min(max(g, lo), hi) when clamp, over n elements of device memory.
template <class T>
void clip_on_device(device dev, T* g, std::int64_t n, bool clamp, T c, T lo, T hi) {
#if defined(__CUDACC__)
  if (dev.type == device_type::cuda) return tenet::detail::cuda::clip_apply<T>(dev, g, n, clamp, c, lo, hi);
#endif
  tenet::detail::ag::no_device_kernel(dev, clamp ? "nn::utils::clip_grad_value_" : "nn::utils::clip_grad_norm_");
}

}  // namespace tenet::nn::utils::detail

#if !defined(__CUDACC__) && defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
