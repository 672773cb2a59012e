#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// nn::utils::clip_grad_norm_ and clip_grad_value_ (torch.nn.utils). CPU gradients: host loops;
// gradients on a device: its kernels (autograd/device.hpp; CUDA in nvcc-compiled code), the total
// norm summed in double as on the CPU.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <tenet/autograd/device.hpp>
#include <tenet/error.hpp>
#include <tenet/nn/module.hpp>

namespace tenet::nn::utils {

namespace detail {
/// f(data, n, device) on each defined gradient (contiguous; host memory on the CPU, device memory
/// elsewhere); write_back: the (possibly copied) gradient is set back as the parameter's grad, so
/// that writes into a strided gradient are kept.
template <class F>
void for_each_grad(const std::vector<tensor_ref>& params, F&& f, bool write_back = false) {
  for (const auto& p : params) {
    auto g = p.grad();
    if (!g.defined()) continue;
    if (g.scalar_type() == dtype::float32) {
      const auto t = g.flat<float>();
      f(t.data(), t.numel(), t.device());
    } else if (g.scalar_type() == dtype::float64) {
      const auto t = g.flat<double>();
      f(t.data(), t.numel(), t.device());
    } else {
      throw dtype_error(std::string("tenet: nn::utils: gradients of ") + name(g.scalar_type()) + " are not supported");
    }
    if (write_back) p.set_grad(g);
  }
}
}  // namespace detail

/// Scales all gradients together so that their total norm (the norm of the vector of per-tensor
/// norms) is at most max_norm: g *= min(1, max_norm / (total + 1e-6)). norm_type is p > 0 or
/// INFINITY. Returns the total norm before clipping. error_if_nonfinite: value_error when the total
/// norm is nan or inf (otherwise the gradients become nan, as torch's).
inline double clip_grad_norm_(const std::vector<tensor_ref>& params, double max_norm, double norm_type = 2.0,
                              bool error_if_nonfinite = false) {
  if (!(norm_type > 0))
    throw value_error("tenet: clip_grad_norm_: norm_type must be positive or inf, got " + std::to_string(norm_type));
  double total = 0.0;
  const bool inf = std::isinf(norm_type);
  std::vector<double> norms;
  detail::for_each_grad(params, [&](auto* g, std::int64_t n, const device& d) {
    double acc = 0.0;
    if (!d.is_cpu()) {
      acc = detail::norm_partial_on_device(d, g, n, norm_type, inf);  // (autograd/device.hpp)
    } else {
      if (norm_type == 2.0) {  // the usual case: a * a (std::pow is a libm call per element)
        for (std::int64_t i = 0; i < n; ++i) {
          const double a = static_cast<double>(g[i]);
          acc += a * a;
        }
      } else {
        for (std::int64_t i = 0; i < n; ++i) {
          const double a = std::abs(static_cast<double>(g[i]));
          if (inf) acc = std::isnan(a) || std::isnan(acc) ? NAN : std::max(acc, a);
          else acc += std::pow(a, norm_type);
        }
      }
    }
    norms.push_back(inf ? acc : std::pow(acc, 1.0 / norm_type));
  });
  if (norms.empty()) return 0.0;
  for (double v : norms) {
    if (inf) total = std::isnan(v) || std::isnan(total) ? NAN : std::max(total, v);
    else total += std::pow(v, norm_type);
  }
  if (!inf) total = std::pow(total, 1.0 / norm_type);
  if (error_if_nonfinite && !std::isfinite(total))
    throw value_error("tenet: clip_grad_norm_: the total norm of order " + std::to_string(norm_type) +
                      " for gradients from `parameters` is non-finite, so it cannot be clipped");
  const double coef = std::min(max_norm / (total + 1e-6), 1.0);
  detail::for_each_grad(params, [&](auto* g, std::int64_t n, const device& d) {
    using T = std::remove_pointer_t<decltype(g)>;
    const T c = static_cast<T>(coef);
    if (!d.is_cpu()) return detail::clip_on_device<T>(d, g, n, false, c, T(0), T(0));
    for (std::int64_t i = 0; i < n; ++i) g[i] = g[i] * c;
  }, true);
  return total;
}

/// Clamps every gradient element to [-clip_value, clip_value].
inline void clip_grad_value_(const std::vector<tensor_ref>& params, double clip_value) {
  detail::for_each_grad(params, [&](auto* g, std::int64_t n, const device& d) {
    using T = std::remove_pointer_t<decltype(g)>;
    const T hi = static_cast<T>(clip_value), lo = static_cast<T>(-clip_value);
    if (!d.is_cpu()) return detail::clip_on_device<T>(d, g, n, true, T(1), lo, hi);
    for (std::int64_t i = 0; i < n; ++i) g[i] = std::min(std::max(g[i], lo), hi);
  }, true);
}

}  // namespace tenet::nn::utils
