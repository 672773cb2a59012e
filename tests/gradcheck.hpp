#pragma once
// gradcheck: the VJP of f (tenet's autograd) against central finite differences, in float64.
//
//   gradcheck(f, x, y, ...)   f takes the inputs as tracked float64 tensors and returns an
//                             expression or tensor; the loss is sum(f(...) * w) for fixed weights w
//                             (so every output element is checked); each input element is moved by
//                             +-h and (L(x+h) - L(x-h)) / 2h is compared with x.grad().
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <utility>

#include <tenet/tenet.hpp>

namespace tenet_test {

/// The largest |a - b| over the elements (in float64), after checking that a and b hold the same
/// number of elements (and, at equal ranks, the same sizes).
template <class A, class B>
double max_diff(const A& a, const B& b) {
  if constexpr (tenet::rank_of<A> == tenet::rank_of<B>)
    REQUIRE(a.sizes() == b.sizes());
  else
    REQUIRE(a.numel() == b.numel());
  const auto ca = a.detach().contiguous();
  const auto cb = b.detach().contiguous();
  double m = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::abs(static_cast<double>(ca.data()[i]) - static_cast<double>(cb.data()[i])));
  return m;
}

/// Fixed weights in [-1, 1] (deterministic, no two alike in a small tensor).
template <class S>
tenet::Tensor<double, S> weights_like(const tenet::sizes_t<S::rank>& sizes) {
  tenet::Tensor<double, S> w(sizes);
  double* p = w.data();
  for (std::int64_t i = 0; i < w.numel(); ++i) p[i] = std::sin(1.7 * static_cast<double>(i) + 0.3);
  return w;
}

template <class T, class S>
double weighted_sum(const tenet::Tensor<T, S>& y, const tenet::Tensor<T, S>& w) {
  const auto c = y.contiguous();
  double s = 0;
  for (std::int64_t i = 0; i < c.numel(); ++i) s += static_cast<double>(c.data()[i]) * w.data()[i];
  return s;
}

template <class F, class... X>
void gradcheck(F f, X... inputs) {
  auto xs = std::make_tuple(inputs.detach().clone()...);
  std::apply([](auto&... x) { (x.requires_grad_(), ...); }, xs);
  auto out = std::apply([&](const auto&... x) { return tenet::eval(f(x...)); }, xs);
  using Out = decltype(out);
  REQUIRE(out.requires_grad());
  const auto w = weights_like<typename Out::shape_type>(out.sizes());
  out.backward(w);
  const double h = 1e-6;
  auto loss = [&] {
    tenet::no_grad off;
    return weighted_sum(std::apply([&](const auto&... x) { return tenet::eval(f(x...)); }, xs), w);
  };
  std::size_t which = 0;
  auto check_one = [&](auto& x) {
    INFO("input " << which);
    auto g = x.grad();
    REQUIRE(g.defined());
    const auto gc = g.contiguous();
    double* p = x.data();
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const double x0 = p[i];
      p[i] = x0 + h;
      const double lp = loss();
      p[i] = x0 - h;
      const double lm = loss();
      p[i] = x0;
      const double numeric = (lp - lm) / (2 * h);
      const double analytic = gc.data()[i];
      if (!(std::abs(numeric - analytic) <= 1e-5 + 1e-4 * std::abs(numeric)) && bad++ < 5)
        UNSCOPED_INFO("input " << which << " element " << i << ": VJP " << analytic << ", finite differences "
                               << numeric);
    }
    CHECK(bad == 0);
    ++which;
  };
  std::apply([&](auto&... x) { (check_one(x), ...); }, xs);
}

/// A float64 tensor of the given sizes with values lo + (hi - lo) * u, u in [0, 1) spread over
/// the elements (deterministic, distinct).
template <std::size_t R>
tenet::Tensor<double, tenet::dyn_shape<R>> filled(const tenet::sizes_t<R>& sizes, double lo, double hi,
                                                  double phase = 0.0) {
  tenet::Tensor<double, tenet::dyn_shape<R>> t(sizes);
  double* p = t.data();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double u = std::fmod(0.618033988749895 * static_cast<double>(i + 1) + phase, 1.0);
    p[i] = lo + (hi - lo) * u;
  }
  return t;
}

inline int jvp_calls = 0;
/// jvp(f, x, t) against (f(x + h t) - f(x - h t)) / 2h, for one or two inputs.
template <class F, class... X>
void jvpcheck(F f, X... xs) {
  INFO("jvpcheck call " << jvp_calls++);
  auto ts = std::make_tuple(filled<X::rank>(xs.sizes(), -1, 1, 0.37)...);
  auto [y, dy] = tenet::jvp(f, std::make_tuple(xs...), ts);
  const double h = 1e-6;
  auto shifted = [&](double s) {
    tenet::no_grad off;
    auto moved = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::make_tuple(X(std::get<I>(std::make_tuple(xs...)) + std::get<I>(ts) * s)...);
    }(std::index_sequence_for<X...>{});
    return std::apply([&](const auto&... a) { return tenet::eval(f(a...)); }, moved);
  };
  const auto yp = shifted(h).contiguous(), ym = shifted(-h).contiguous();
  const auto dc = dy.contiguous();
  REQUIRE(dc.sizes() == yp.sizes());
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < yp.numel(); ++i) {
    const double numeric = (yp.data()[i] - ym.data()[i]) / (2 * h);
    if (!(std::abs(numeric - dc.data()[i]) <= 1e-5 + 1e-4 * std::abs(numeric)) && bad++ < 5)
      UNSCOPED_INFO("element " << i << ": JVP " << dc.data()[i] << ", finite differences " << numeric);
  }
  CHECK(bad == 0);
}

}  // namespace tenet_test
