#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// tenet::nn::init: torch.nn.init. Each function fills a tensor in place (through its storage, under
// no_grad as torch's) and returns it; the random ones draw from tenet's default Philox generator
// (manual_seed), so the values differ from torch's but the distributions, bounds and fan
// computations are torch's:
//   fan_in = size(1) * prod(size(2..)), fan_out = size(0) * prod(size(2..))  (rank >= 2)
//   kaiming_uniform_: U(-b, b), b = gain * sqrt(3 / fan);  kaiming_normal_: N(0, gain / sqrt(fan))
//   xavier_uniform_: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))
//   xavier_normal_: N(0, gain * sqrt(2 / (fan_in + fan_out)))
//   trunc_normal_: N(mean, std) restricted to [a, b] (inverse-CDF sampling, as torch)
// A tensor on a device (CUDA) is filled on the host and copied to it: it gets the same values as a
// CPU tensor initialized after the same manual_seed (torch draws from the device's generator).
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include <tenet/error.hpp>
#include <tenet/factories.hpp>  // random_fill, fill_random
#include <tenet/autograd.hpp>  // no_grad: initialization is not recorded
#include <tenet/tensor.hpp>

#include <tenet/runtime/philox.hpp>
#include <tenet/api/tensor_eval.hpp>

namespace tenet::nn::init {

enum class fan_mode { fan_in, fan_out };
enum class nonlinearity { linear, conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d,
                          sigmoid, tanh, relu, leaky_relu, selu };

/// torch.nn.init.calculate_gain(nonlinearity, param): param is leaky_relu's negative slope
/// (0.01 when negative, i.e. not given).
inline double calculate_gain(nonlinearity nl, double param = -1.0) {
  switch (nl) {
    case nonlinearity::tanh: return 5.0 / 3.0;
    case nonlinearity::relu: return std::sqrt(2.0);
    case nonlinearity::leaky_relu: {
      const double slope = param < 0.0 ? 0.01 : param;
      return std::sqrt(2.0 / (1.0 + slope * slope));
    }
    case nonlinearity::selu: return 3.0 / 4.0;
    default: return 1.0;
  }
}

/// {fan_in, fan_out} of a tensor of these sizes (value_error for rank < 2, as torch).
inline std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const std::vector<std::int64_t>& sizes) {
  if (sizes.size() < 2)
    throw value_error("tenet: nn::init: fan in and fan out can not be computed for a tensor with fewer than 2 "
                      "dimensions (sizes " + tenet::detail::sizes_text(sizes.data(), sizes.size()) + ")");
  std::int64_t receptive = 1;
  for (std::size_t i = 2; i < sizes.size(); ++i) receptive *= sizes[i];
  return {sizes[1] * receptive, sizes[0] * receptive};
}
template <class T, class S>
std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const Tensor<T, S>& t) {
  return calculate_fan_in_and_fan_out(std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()));
}

namespace detail {
template <class T, class S>
void require_float(const Tensor<T, S>& t, const char* what) {
  static_assert(is_floating_v<T>, "tenet: nn::init's random fills need a floating tensor");
  if (!t.defined()) throw value_error(std::string("tenet: nn::init::") + what + " on an undefined tensor");
}
/// t = a CPU tensor of t's sizes made by make(host) (host: contiguous, on the CPU): a copy to t's
/// device and/or into its strides. A device tensor thus gets the CPU generator's values, the same
/// as a CPU tensor initialized after the same manual_seed.
template <class T, class S, class F>
void set_from_host(const Tensor<T, S>& t, F&& make) {
  Tensor<T, S> host(t.sizes(), tenet::cpu);  // (never the default device)
  make(host);
  t.copy_(host.to(t.device()));  // (the host tensor itself for a CPU t)
}
/// Fills t (any strides, any device) from a contiguous host buffer of the same sizes made by
/// fill(T*, n).
template <class T, class S, class F>
void fill_with(const Tensor<T, S>& t, F&& fill) {
  const std::int64_t n = t.numel();
  if (n == 0) return;
  if (t.is_contiguous() && t.device().is_cpu()) {
    tenet::detail::bump_version(t.storage().get());  // (the other path's copy_ counts itself)
    fill(t.data(), n);
  } else
    set_from_host(t, [&](const Tensor<T, S>& h) { fill(h.data(), n); });
}
/// t = the draw r: a contiguous tensor directly (on a CUDA tensor by a kernel in an nvcc-compiled
/// translation unit, factories.hpp), a strided one through a contiguous host copy.
template <class T, class S>
void fill_draw(const Tensor<T, S>& t, const tenet::detail::random_fill& r) {
  if (t.numel() == 0) return;
  if (t.is_contiguous()) {
    tenet::detail::bump_version(t.storage().get());
    tenet::detail::fill_random(t, r);
  } else
    fill_with(t, [&](T* p, std::int64_t n) { tenet::detail::fill_random_on_host(p, n, r); });
}
/// erfinv(y) for y in (-1, 1): Giles' single-precision approximation refined by two Newton steps on erf.
inline double erfinv(double y) {
  if (y <= -1.0) return -INFINITY;
  if (y >= 1.0) return INFINITY;
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5.0) {
    w -= 2.5;
    double p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w; p = -3.5233877e-06 + p * w; p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w; p = -0.00125372503 + p * w; p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w; p = 1.50140941 + p * w;
    x = p * y;
  } else {
    w = std::sqrt(w) - 3.0;
    double p = -0.000200214257;
    p = 0.000100950558 + p * w; p = 0.00134934322 + p * w; p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w; p = -0.0076224613 + p * w; p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w; p = 2.83297682 + p * w;
    x = p * y;
  }
  const double two_over_sqrt_pi = 2.0 / std::sqrt(std::numbers::pi);
  for (int i = 0; i < 2; ++i) x -= (std::erf(x) - y) / (two_over_sqrt_pi * std::exp(-x * x));
  return x;
}
}  // namespace detail

/// U(a, b)
template <class T, class S>
const Tensor<T, S>& uniform_(const Tensor<T, S>& t, double a = 0.0, double b = 1.0) {
  tenet::no_grad guard;
  detail::require_float(t, "uniform_");
  if (!(a <= b))
    throw value_error("tenet: nn::init::uniform_: expects a <= b, got a=" + std::to_string(a) + ", b=" + std::to_string(b));
  auto r = tenet::detail::reserve_draw(tenet::detail::random_fill::uniform, t.numel());
  r.a = a;
  r.b = b;
  detail::fill_draw(t, r);
  return t;
}
/// N(mean, std)
template <class T, class S>
const Tensor<T, S>& normal_(const Tensor<T, S>& t, double mean = 0.0, double std = 1.0) {
  tenet::no_grad guard;
  detail::require_float(t, "normal_");
  if (!(std >= 0.0)) throw value_error("tenet: nn::init::normal_: expects std >= 0, got " + std::to_string(std));
  auto r = tenet::detail::reserve_draw(tenet::detail::random_fill::normal, t.numel());
  r.a = mean;
  r.b = std;
  detail::fill_draw(t, r);
  return t;
}
/// N(mean, std) truncated to [a, b]: u ~ U(cdf(a), cdf(b)), x = mean + std sqrt(2) erfinv(2u - 1),
/// clamped to [a, b] (torch.nn.init.trunc_normal_).
template <class T, class S>
const Tensor<T, S>& trunc_normal_(const Tensor<T, S>& t, double mean = 0.0, double std = 1.0, double a = -2.0,
                                  double b = 2.0) {
  tenet::no_grad guard;
  detail::require_float(t, "trunc_normal_");
  if (!(std >= 0.0) || !(a < b))
    throw value_error("tenet: nn::init::trunc_normal_: expects std >= 0 and a < b, got std=" + std::to_string(std) +
                      ", a=" + std::to_string(a) + ", b=" + std::to_string(b));
  auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double lo = 2.0 * cdf((a - mean) / std) - 1.0, hi = 2.0 * cdf((b - mean) / std) - 1.0;
  detail::fill_with(t, [&](T* p, std::int64_t n) {
    std::vector<double> u(static_cast<std::size_t>(n));
    const auto d = tenet::detail::default_generator().reserve(n);
    tenet::detail::fill_uniform(u.data(), n, d.seed, d.offset, lo, hi);
    for (std::int64_t i = 0; i < n; ++i) {
      double x = mean + std * std::sqrt(2.0) * detail::erfinv(u[static_cast<std::size_t>(i)]);
      p[i] = static_cast<T>(std::fmin(std::fmax(x, a), b));
    }
  });
  return t;
}
template <class T, class S>
const Tensor<T, S>& constant_(const Tensor<T, S>& t, double value) {
  tenet::no_grad guard;
  if (!t.defined()) throw value_error("tenet: nn::init::constant_ on an undefined tensor");
  t.fill_(value);
  return t;
}
template <class T, class S>
const Tensor<T, S>& zeros_(const Tensor<T, S>& t) { return constant_(t, 0.0); }
template <class T, class S>
const Tensor<T, S>& ones_(const Tensor<T, S>& t) { return constant_(t, 1.0); }

/// The identity in a 2-D tensor (torch.nn.init.eye_).
template <class T, class S>
const Tensor<T, S>& eye_(const Tensor<T, S>& t) {
  tenet::no_grad guard;
  static_assert(S::rank == 2, "tenet: nn::init::eye_ needs a 2-D tensor");
  if (!t.device().is_cpu()) {  // (element writes need the host)
    detail::set_from_host(t, [](const Tensor<T, S>& h) { eye_(h); });
    return t;
  }
  t.fill_(0);
  for (std::int64_t i = 0; i < std::min(t.sizes()[0], t.sizes()[1]); ++i) t(i, i) = T(1);
  return t;
}

template <class T, class S>
std::int64_t chosen_fan(const Tensor<T, S>& t, fan_mode mode) {
  auto [fi, fo] = calculate_fan_in_and_fan_out(t);
  return mode == fan_mode::fan_in ? fi : fo;
}

/// He initialization, uniform: U(-bound, bound), bound = gain(nonlinearity, a) * sqrt(3 / fan).
template <class T, class S>
const Tensor<T, S>& kaiming_uniform_(const Tensor<T, S>& t, double a = 0.0, fan_mode mode = fan_mode::fan_in,
                                     nonlinearity nl = nonlinearity::leaky_relu) {
  if (t.numel() == 0) return t;  // torch warns and does nothing
  const double std = calculate_gain(nl, a) / std::sqrt(static_cast<double>(chosen_fan(t, mode)));
  return uniform_(t, -std::sqrt(3.0) * std, std::sqrt(3.0) * std);
}
/// He initialization, normal: N(0, gain(nonlinearity, a) / sqrt(fan)).
template <class T, class S>
const Tensor<T, S>& kaiming_normal_(const Tensor<T, S>& t, double a = 0.0, fan_mode mode = fan_mode::fan_in,
                                    nonlinearity nl = nonlinearity::leaky_relu) {
  if (t.numel() == 0) return t;
  const double std = calculate_gain(nl, a) / std::sqrt(static_cast<double>(chosen_fan(t, mode)));
  return normal_(t, 0.0, std);
}
/// Glorot initialization, uniform: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)).
template <class T, class S>
const Tensor<T, S>& xavier_uniform_(const Tensor<T, S>& t, double gain = 1.0) {
  auto [fi, fo] = calculate_fan_in_and_fan_out(t);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(fi + fo));
  return uniform_(t, -std::sqrt(3.0) * std, std::sqrt(3.0) * std);
}
/// Glorot initialization, normal: N(0, gain * sqrt(2 / (fan_in + fan_out))).
template <class T, class S>
const Tensor<T, S>& xavier_normal_(const Tensor<T, S>& t, double gain = 1.0) {
  auto [fi, fo] = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fi + fo)));
}

}  // namespace tenet::nn::init
