#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Factories: empty, zeros, ones, full, arange, linspace, eye, tensor, rand, randn, randint,
// randperm and *_like.
// Shapes are template arguments; each dyn or sym extent takes one size argument, in order:
//   auto a = zeros<float, shape<2, 3>>();   auto b = randn<float, shape<dyn, 64>>(n);
// Random factories draw from the default Philox generator (manual_seed): the same numbers on every
// backend for the same seed.
#include <cmath>
#include <concepts>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <tenet/device.hpp>
#include <tenet/tensor.hpp>

#include <tenet/runtime/philox.hpp>
#include <tenet/api/tensor_eval.hpp>

namespace tenet {

namespace detail {
template <class S, std::integral... N>
sizes_t<S::rank> sizes_from(N... n) {
  constexpr std::size_t runtime = [] {
    std::size_t k = 0;
    for (auto& e : S::info) k += !e.is_fixed();
    return k;
  }();
  static_assert(sizeof...(N) == runtime, "tenet: give one size argument for each dyn or sym extent of the shape");
  const std::array<std::int64_t, sizeof...(N)> args{static_cast<std::int64_t>(n)...};
  sizes_t<S::rank> s{};
  std::size_t a = 0;
  for (std::size_t i = 0; i < S::rank; ++i) {
    s[i] = S::info[i].is_fixed() ? S::info[i].value : args[a++];
    if (s[i] < 0) throw shape_error("tenet: negative size " + std::to_string(s[i]) + " for " + S::text());
  }
  return s;
}
}  // namespace detail

template <class T, class S, std::integral... N>
Tensor<T, S> empty(N... n) {
  return Tensor<T, S>(detail::sizes_from<S>(n...));
}
template <class T, class S, std::integral... N>
Tensor<T, S> full(T value, N... n) {
  Tensor<T, S> t(detail::sizes_from<S>(n...));
  t.fill_(value);
  return t;
}
template <class T, class S, std::integral... N>
Tensor<T, S> zeros(N... n) {
  return full<T, S>(T(0), n...);
}
template <class T, class S, std::integral... N>
Tensor<T, S> ones(N... n) {
  return full<T, S>(T(1), n...);
}

/// Values start, start+step, ... < end (as torch.arange; the count is ceil((end-start)/step)).
template <class T = std::int64_t>
Tensor<T, shape<dyn>> arange(double start, double end, double step = 1.0) {
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  if (!std::isfinite(start) || !std::isfinite(end))  // as torch: the count of nan or inf is undefined
    throw value_error("tenet: arange: unsupported range: " + num(start) + " -> " + num(end) +
                      " (start and end must be finite)");
  if (!std::isfinite(step)) throw value_error("tenet: arange: step must be finite but got " + num(step));
  if (step == 0.0) throw value_error("tenet: arange: step must be nonzero");
  if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw value_error("tenet: arange: unsupported range " + std::to_string(start) + " -> " + std::to_string(end) +
                      " with step " + std::to_string(step) + " (it must be finite)");
  if ((end - start) / step < 0)
    throw value_error("tenet: arange: upper bound and larger bound inconsistent with step sign (start " +
                      std::to_string(start) + ", end " + std::to_string(end) + ", step " + std::to_string(step) + ")");
  const double count = std::ceil((end - start) / step);
  if (!(count < 9223372036854775808.0))  // 2^63: the cast below would be undefined
    throw value_error("tenet: arange: " + std::to_string(start) + " -> " + std::to_string(end) + " with step " +
                      std::to_string(step) + " has more than 2^63 - 1 elements");
  const auto n = static_cast<std::int64_t>(count);
  Tensor<T, shape<dyn>> t({n});  // shape_error when n elements of T need more than 2^63 - 1 bytes
  T* p = t.data();
  for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  return t;
}
template <class T = std::int64_t>
Tensor<T, shape<dyn>> arange(double end) {
  return arange<T>(0.0, end, 1.0);
}

/// `steps` values from start to end inclusive (as torch.linspace: the second half computed from the end).
template <class T = float>
Tensor<T, shape<dyn>> linspace(double start, double end, std::int64_t steps) {
  if (steps < 0) throw value_error("tenet: linspace: number of steps must be non-negative, got " + std::to_string(steps));
  Tensor<T, shape<dyn>> t({steps});
  T* p = t.data();
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  const std::int64_t half = steps / 2;
  if (steps == 1) {
    p[0] = static_cast<T>(start);
    return t;
  }
  for (std::int64_t i = 0; i < steps; ++i)
    p[i] = static_cast<T>(i < half ? start + step * static_cast<double>(i)
                                   : end - step * static_cast<double>(steps - i - 1));
  return t;
}

/// The n x m identity; a negative n or m raises value_error, as torch.eye.
template <class T = float>
Tensor<T, shape<dyn, dyn>> eye(std::int64_t n, std::int64_t m) {
  if (n < 0) throw value_error("tenet: eye: n must be non-negative, got " + std::to_string(n));
  if (m < 0) throw value_error("tenet: eye: m must be non-negative, got " + std::to_string(m));
  Tensor<T, shape<dyn, dyn>> t({n, m});
  t.fill_(0);
  for (std::int64_t i = 0; i < std::min(n, m); ++i) t(i, i) = T(1);
  return t;
}
/// The n x n identity.
template <class T = float>
Tensor<T, shape<dyn, dyn>> eye(std::int64_t n) {
  return eye<T>(n, n);
}
template <class T, int N>
Tensor<T, shape<N, N>> eye() {
  return Tensor<T, shape<N, N>>(eye<T>(N));
}

/// tensor<T>({...}): a 1-D tensor holding the values (torch.tensor of a list).
template <class T>
Tensor<T, shape<dyn>> tensor(std::initializer_list<T> values) {
  Tensor<T, shape<dyn>> t({static_cast<std::int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data());
  return t;
}
/// tensor(values): a 1-D tensor holding a copy of the values of a std::span or std::vector (data a
/// program read or computed; torch.tensor of a list).
template <class T>
  requires(!std::is_same_v<T, bool>)
Tensor<T, shape<dyn>> tensor(std::span<const T> values) {
  Tensor<T, shape<dyn>> t({static_cast<std::int64_t>(values.size())});
  if (!values.empty())
    detail::copy_bytes(t.data(), t.device(), values.data(), tenet::cpu, values.size() * sizeof(T));
  return t;
}
template <class T>
  requires(!std::is_same_v<T, bool>)
Tensor<T, shape<dyn>> tensor(const std::vector<T>& values) {
  return tensor(std::span<const T>(values.data(), values.size()));
}
/// tensor<T>({{...}, {...}}): a 2-D tensor from rows of equal length (shape_error otherwise).
template <class T>
Tensor<T, shape<dyn, dyn>> tensor(std::initializer_list<std::initializer_list<T>> rows) {
  const auto n = static_cast<std::int64_t>(rows.size());
  const auto m = n == 0 ? std::int64_t{0} : static_cast<std::int64_t>(rows.begin()->size());
  Tensor<T, shape<dyn, dyn>> t({n, m});
  T* p = t.data();
  std::int64_t i = 0;
  for (const auto& r : rows) {
    if (static_cast<std::int64_t>(r.size()) != m)
      throw shape_error("tenet: tensor: row " + std::to_string(i) + " has " + std::to_string(r.size()) +
                        " values, row 0 has " + std::to_string(m));
    p = std::copy(r.begin(), r.end(), p);
    ++i;
  }
  return t;
}

/// Seeds the default generator (torch.manual_seed).
inline void manual_seed(std::uint64_t seed) { detail::default_generator().manual_seed(seed); }

namespace detail {
/// A backend without a random-fill kernel: false (fill_random fills a host buffer and copies it).
template <class B, class T>
bool run_fill_random(B, device, T*, std::int64_t, const random_fill&) {
  return false;
}
/// Fills t (any device) with the draw r: in place for a CPU tensor; on a device tensor by its
/// backend's kernel where this translation unit has one (CUDA under nvcc; the same values: the
/// stream is defined per element), else in a host buffer copied to t's device.
template <class T, class S>
void fill_random(const Tensor<T, S>& t, const random_fill& r) {
  if (t.device().is_cpu()) {
    fill_random_on_host(t.data(), t.numel(), r);
    return;
  }
  if (t.is_contiguous() && has_backend(t.device())) {  // the device's kernel (CUDA: backend/cuda/random.cuh)
    fill_random_on_host(static_cast<T*>(nullptr), 0, r);  // the bounds' value_error, before any launch
    const device d = t.device();
    if (on_backend<bool>(d, "a random draw", [&](auto b) { return run_fill_random(b, d, t.data(), t.numel(), r); }))
      return;
  }
  Tensor<T, S> h(t.sizes(), tenet::cpu);
  fill_random_on_host(h.data(), h.numel(), r);
  copy_bytes(t.data(), t.device(), h.data(), tenet::cpu, static_cast<std::size_t>(t.numel()) * sizeof(T));
}
/// A draw of n elements reserved from the default generator.
inline random_fill reserve_draw(random_fill::kind_t kind, std::int64_t n) {
  const auto d = default_generator().reserve(n);
  return random_fill{kind, d.seed, d.offset};
}
}  // namespace detail

/// torch.Generator: a Philox stream of its own (a seed and an offset), for draws that must not
/// move the default generator's stream: `tenet::Generator g(seed); randperm(n, g);`.
using Generator = detail::generator;
/// The generator that manual_seed seeds and tenet's random ops draw from (torch.default_generator):
/// its state() / set_state() save and restore the stream (training_state does).
inline Generator& default_generator() { return detail::default_generator(); }

namespace detail {
/// randperm's values from n uniform draws of the stream at `draw` (Fisher-Yates).
template <class T>
Tensor<T, shape<dyn>> randperm_from(std::int64_t n, Generator* g) {
  static_assert((std::is_integral_v<T> && !std::is_same_v<T, bool>) || is_floating_v<T>,
                "tenet: randperm needs an integer or floating dtype");
  if (n < 0) throw value_error("tenet: randperm: n must be non-negative, got " + std::to_string(n));
  // every value 0 .. n-1 exact in T: for an integer T, n - 1 at most its maximum; for a floating T,
  // n - 1 and n - 2 exact (the spacing of T's values at n - 2 is then at most 1)
  const auto exact = [](std::int64_t k) {
    if constexpr (std::is_integral_v<T>) return k <= static_cast<std::int64_t>(std::numeric_limits<T>::max());
    else return static_cast<double>(static_cast<T>(static_cast<double>(k))) == static_cast<double>(k);
  };
  if (n > 0 && !(exact(n - 1) && exact(std::max<std::int64_t>(n - 2, 0))))
    throw value_error("tenet: randperm: n = " + std::to_string(n) + " does not fit the values of " +
                      std::string(name(dtype_of<T>)));
  std::vector<double> u(static_cast<std::size_t>(n));
  if (g) {
    const auto d = g->reserve(n);
    fill_random_on_host(u.data(), n, random_fill{random_fill::uniform, d.seed, d.offset});
  } else {
    fill_random_on_host(u.data(), n, reserve_draw(random_fill::uniform, n));
  }
  std::vector<T> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_integral_v<T>) v[i] = static_cast<T>(i);
    else v[i] = static_cast<T>(static_cast<double>(i));
  }
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = std::min<std::int64_t>(i, static_cast<std::int64_t>(u[static_cast<std::size_t>(i)] * static_cast<double>(i + 1)));
    std::swap(v[static_cast<std::size_t>(i)], v[static_cast<std::size_t>(j)]);
  }
  return tensor(std::span<const T>(v.data(), v.size()));
}
}  // namespace detail

/// randperm<T = int64>(n): a random permutation of 0 .. n-1 (torch.randperm), from n uniform draws
/// of the default generator (Fisher-Yates), so a seed gives the same permutation on every device.
/// value_error for a negative n or one whose values T cannot hold.
template <class T = std::int64_t>
Tensor<T, shape<dyn>> randperm(std::int64_t n) {
  return detail::randperm_from<T>(n, nullptr);
}
/// randperm(n, generator): the same from g's stream (torch.randperm(n, generator=g)); the default
/// generator does not move. A Generator seeded with s gives the permutation randperm(n) gives
/// right after manual_seed(s).
template <class T = std::int64_t>
Tensor<T, shape<dyn>> randperm(std::int64_t n, Generator& g) {
  return detail::randperm_from<T>(n, &g);
}

template <class T, class S, std::integral... N>
Tensor<T, S> rand(N... n) {
  static_assert(is_floating_v<T>, "tenet: rand needs a floating dtype");
  Tensor<T, S> t(detail::sizes_from<S>(n...));
  detail::fill_random(t, detail::reserve_draw(detail::random_fill::uniform, t.numel()));
  return t;
}
template <class T, class S, std::integral... N>
Tensor<T, S> randn(N... n) {
  static_assert(is_floating_v<T>, "tenet: randn needs a floating dtype");
  Tensor<T, S> t(detail::sizes_from<S>(n...));
  detail::fill_random(t, detail::reserve_draw(detail::random_fill::normal, t.numel()));
  return t;
}
/// Integers in [low, high).
template <class T, class S, std::integral... N>
Tensor<T, S> randint(std::int64_t low, std::int64_t high, N... n) {
  Tensor<T, S> t(detail::sizes_from<S>(n...));
  auto r = detail::reserve_draw(detail::random_fill::randint, t.numel());
  r.low = low;
  r.high = high;
  detail::fill_random(t, r);
  return t;
}

template <Expression E>
auto empty_like(const E& e) {
  if constexpr (TensorType<E>)  // on the tensor's device, as torch's *_like
    return Tensor<value_type_of<E>, shape_of<E>>(e.sizes(), e.device());
  else
    return Tensor<value_type_of<E>, shape_of<E>>(e.sizes());
}
template <Expression E>
auto zeros_like(const E& e) {
  auto t = empty_like(e);
  t.fill_(0);
  return t;
}
template <Expression E>
auto ones_like(const E& e) {
  auto t = empty_like(e);
  t.fill_(1);
  return t;
}
template <Expression E, Scalar V>
auto full_like(const E& e, V v) {
  auto t = empty_like(e);
  t.fill_(v);
  return t;
}
template <Expression E>
auto rand_like(const E& e) {
  auto t = empty_like(e);
  static_assert(is_floating_v<value_type_of<E>>, "tenet: rand_like needs a floating dtype");
  detail::fill_random(t, detail::reserve_draw(detail::random_fill::uniform, t.numel()));
  return t;
}
template <Expression E>
auto randn_like(const E& e) {
  auto t = empty_like(e);
  static_assert(is_floating_v<value_type_of<E>>, "tenet: randn_like needs a floating dtype");
  detail::fill_random(t, detail::reserve_draw(detail::random_fill::normal, t.numel()));
  return t;
}

}  // namespace tenet
