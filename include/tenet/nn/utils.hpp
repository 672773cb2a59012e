#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// nn::utils::clip_grad_norm_ and clip_grad_value_ (torch.nn.utils). CPU gradients: host loops;
// gradients on a device: its kernels (backend/training.hpp; CUDA in nvcc-compiled code), the total
// norm summed in double as on the CPU; the partial sums of all of a device's gradients come to the
// host in one copy (one wait per device and call).
#include <algorithm>
#include <cmath>
#include <utility>
#include <string>
#include <tuple>
#include <vector>

#include <tenet/backend/training.hpp>
#include <tenet/error.hpp>
#include <tenet/nn/module.hpp>

namespace tenet::nn::utils {

namespace detail {
/// f(data, n, device) on g's values (contiguous; host memory on the CPU, device memory elsewhere).
template <class F>
void visit_grad(const any_tensor& g, F&& f) {
  // 16-bit gradients too: their norms summed in double, the scale rounded to the gradient's dtype
  // before the products, as torch's mul_
  const bool floating = any_tensor::visit_floating_dtype(g.scalar_type(), [&]<class T>() {
    const auto t = g.flat<T>();
    f(t.data(), t.numel(), t.device());
  });
  if (!floating)
    throw dtype_error(std::string("tenet: nn::utils: gradients of ") + name(g.scalar_type()) + " are not supported");
}
/// f(data, n, device) on each defined gradient (visit_grad); write_back: the (possibly copied)
/// gradient is set back as the parameter's grad, so that writes into a strided gradient are kept.
template <class F>
void for_each_grad(const std::vector<tensor_ref>& params, F&& f, bool write_back = false) {
  for (const auto& p : params) {
    auto g = p.grad();
    if (!g.defined()) continue;
    visit_grad(g, f);
    any_tensor::visit_floating_dtype(g.scalar_type(), [&]<class T>() {  // f wrote into it
      tenet::detail::bump_version(g.flat<T>().storage().get());
    });
    if (write_back) p.set_grad(g);
  }
}
/// Device gradients gathered by device and dtype, so that each group goes to its backend in one
/// call (CUDA: one kernel launch per 24 tensors, not one per tensor).
class device_lists {
  template <class T>
  using groups = std::vector<std::pair<device, std::vector<tenet::detail::grad_span<T>>>>;
  std::tuple<groups<float>, groups<double>, groups<bfloat16>, groups<float16>> lists_;

 public:
  template <class T>
  void add(const device& d, T* g, std::int64_t n, double* part = nullptr) {
    auto& gs = std::get<groups<T>>(lists_);
    auto it = std::find_if(gs.begin(), gs.end(), [&](const auto& e) { return e.first == d; });
    if (it == gs.end()) it = gs.insert(gs.end(), {d, {}});
    it->second.push_back({g, n, part});
  }
  /// f(device, list) for each group.
  template <class F>
  void each(F&& f) const {
    std::apply([&](const auto&... gs) { (..., [&] { for (const auto& [d, l] : gs) f(d, l); }()); }, lists_);
  }
};
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
  auto fold = [inf](double acc, double v) {  // nan wins in a max, as torch's
    return inf ? (std::isnan(v) || std::isnan(acc) ? NAN : std::max(acc, v)) : acc + v;
  };
  // Each gradient's sum of |g|^p (max |g| when inf). A device gradient's partial sums go into one
  // buffer per device, copied to the host once for all of that device's gradients (one wait per
  // device, not per gradient). Two passes: the first sums the CPU gradients and places each device
  // gradient's partials in its device's buffer; the second launches the device kernels.
  struct on_device {
    device dev;
    std::int64_t total = 0;  // partial sums of this device's gradients
    Tensor<double, dyn_shape<1>> part;
  };
  std::vector<on_device> devices;
  struct share {
    std::size_t device_slot;
    std::int64_t offset, count;
  };
  std::vector<double> sums;
  std::vector<std::pair<std::size_t, share>> from_device;  // (index into sums, its partials), in order
  std::vector<any_tensor> grads;
  for (const auto& p : params)
    if (auto g = p.grad(); g.defined()) grads.push_back(std::move(g));
  for (const auto& gr : grads) detail::visit_grad(gr, [&](auto* g, std::int64_t n, const device& d) {
    double acc = 0.0;
    if (!d.is_cpu()) {
      std::size_t slot = 0;
      while (slot < devices.size() && !(devices[slot].dev == d)) ++slot;
      if (slot == devices.size()) devices.push_back(on_device{d, 0, {}});
      const std::int64_t count = detail::norm_partial_count(d, n);  // (backend/training.hpp)
      from_device.push_back({sums.size(), share{slot, devices[slot].total, count}});
      devices[slot].total += count;
    } else if (norm_type == 2.0) {  // the usual case: a * a (std::pow is a libm call per element)
      for (std::int64_t i = 0; i < n; ++i) {
        const double a = static_cast<double>(g[i]);
        acc += a * a;
      }
    } else {
      for (std::int64_t i = 0; i < n; ++i) {
        const double a = std::abs(static_cast<double>(g[i]));
        acc = inf ? fold(acc, a) : acc + std::pow(a, norm_type);
      }
    }
    sums.push_back(acc);
  });
  for (auto& od : devices) od.part = Tensor<double, dyn_shape<1>>({std::max<std::int64_t>(od.total, 1)}, od.dev);
  std::size_t next = 0;  // the device gradients come in from_device's order
  detail::device_lists lists;
  for (const auto& gr : grads) detail::visit_grad(gr, [&](auto* g, std::int64_t n, const device& d) {
    if (d.is_cpu()) return;
    const share& sh = from_device[next++].second;
    lists.add(d, g, n, devices[sh.device_slot].part.data() + sh.offset);
  });
  lists.each([&](const device& d, const auto& l) { detail::norm_partials_on_device(d, l, norm_type, inf); });
  std::vector<Tensor<double, dyn_shape<1>>> partials;  // on the host, one per device
  for (auto& od : devices) partials.push_back(od.part.cpu());  // waits for the device's kernels
  for (const auto& [i, sh] : from_device) {
    const double* h = partials[sh.device_slot].data() + sh.offset;
    double acc = 0.0;
    for (std::int64_t b = 0; b < sh.count; ++b) acc = fold(acc, h[b]);
    sums[i] = acc;
  }
  std::vector<double> norms;
  norms.reserve(sums.size());
  for (double acc : sums) norms.push_back(inf ? acc : std::pow(acc, 1.0 / norm_type));
  if (norms.empty()) return 0.0;
  for (double v : norms) total = fold(total, inf ? v : std::pow(v, norm_type));
  if (!inf) total = std::pow(total, 1.0 / norm_type);
  if (error_if_nonfinite && !std::isfinite(total))
    throw value_error("tenet: clip_grad_norm_: the total norm of order " + std::to_string(norm_type) +
                      " for gradients from `parameters` is non-finite, so it cannot be clipped");
  const double coef = std::min(max_norm / (total + 1e-6), 1.0);
  detail::device_lists scale;
  detail::for_each_grad(params, [&](auto* g, std::int64_t n, const device& d) {
    using T = std::remove_pointer_t<decltype(g)>;
    const T c = static_cast<T>(coef);
    if (!d.is_cpu()) return scale.add(d, g, n);
    for (std::int64_t i = 0; i < n; ++i) g[i] = g[i] * c;
  }, true);
  scale.each([&](const device& d, const auto& l) {
    using T = std::remove_pointer_t<decltype(l[0].g)>;
    detail::clip_on_device<T>(d, l, false, static_cast<T>(coef), T(0), T(0));
  });
  return total;
}

/// Clamps every gradient element to [-clip_value, clip_value].
inline void clip_grad_value_(const std::vector<tensor_ref>& params, double clip_value) {
  detail::device_lists clamp;
  detail::for_each_grad(params, [&](auto* g, std::int64_t n, const device& d) {
    using T = std::remove_pointer_t<decltype(g)>;
    const T hi = static_cast<T>(clip_value), lo = static_cast<T>(-clip_value);
    if (!d.is_cpu()) return clamp.add(d, g, n);
    for (std::int64_t i = 0; i < n; ++i) g[i] = std::min(std::max(g[i], lo), hi);
  }, true);
  clamp.each([&](const device& d, const auto& l) {
    using T = std::remove_pointer_t<decltype(l[0].g)>;
    detail::clip_on_device<T>(d, l, true, T(1), static_cast<T>(-clip_value), static_cast<T>(clip_value));
  });
}

}  // namespace tenet::nn::utils
