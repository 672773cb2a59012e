#pragma once
// Sweep: for an op applied to tracked float64 inputs, does autograd record a correct gradient,
// refuse with an error, or (silently) record nothing / something wrong?
#include <tenet/tenet.hpp>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <type_traits>

namespace sw {
using namespace tenet;
using V = Tensor<double, dyn_shape<1>>;
using M = Tensor<double, dyn_shape<2>>;
using M3 = Tensor<double, dyn_shape<3>>;
using M4 = Tensor<double, dyn_shape<4>>;
using I1 = Tensor<std::int64_t, dyn_shape<1>>;
using I2 = Tensor<std::int64_t, dyn_shape<2>>;

template <std::size_t R>
Tensor<double, dyn_shape<R>> filled(const sizes_t<R>& sizes, double lo, double hi, double phase = 0.0) {
  Tensor<double, dyn_shape<R>> t(sizes);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double u = std::fmod(0.618033988749895 * static_cast<double>(i + 1) + phase, 1.0);
    t.data()[i] = lo + (hi - lo) * u;
  }
  return t;
}
template <class T, class S>
Tensor<T, S> weights_like(const sizes_t<S::rank>& sizes) {
  Tensor<T, S> w(sizes);
  for (std::int64_t i = 0; i < w.numel(); ++i) w.data()[i] = static_cast<T>(std::sin(1.7 * static_cast<double>(i) + 0.3));
  return w;
}
inline int n_ok = 0, n_problem = 0;
inline double fd_h = 1e-6;  // larger for ops that round to float32
/// Set before a probe whose gradient differs from finite differences on purpose (as torch's).
inline const char* expected_difference = nullptr;

template <class X>
auto prep(const X& x) {
  auto c = x.detach().clone();
  if constexpr (std::is_same_v<value_type_of<X>, double>) c.requires_grad_();
  return c;
}

template <class F, class... X>
void probe(const char* name, F f, X... inputs) {
  struct reset {
    ~reset() { expected_difference = nullptr; }
  } reset_after;
  auto xs = std::make_tuple(prep(inputs)...);
  auto run = [&] { return std::apply([&](const auto&... x) { return eval(f(x...)); }, xs); };
  using Out = decltype(run());
  using T = typename Out::value_type;
  Out out;
  try {
    out = run();
  } catch (const std::exception& e) {
    std::printf("%-28s REFUSED: %s\n", name, e.what());
    ++n_ok;
    return;
  }
  if constexpr (!std::is_floating_point_v<T>) {
    std::printf("%-28s no gradient (integer/bool output)\n", name);
    ++n_ok;
    return;
  } else {
    const bool recorded = out.requires_grad();
    const auto w = weights_like<T, typename Out::shape_type>(out.sizes());
    if (recorded) {
      try {
        out.backward(w);
      } catch (const std::exception& e) {
        std::printf("%-28s BACKWARD ERROR: %s\n", name, e.what());
        ++n_ok;
        return;
      }
    }
    auto loss = [&] {
      no_grad off;
      const auto y = run().contiguous();
      double s = 0;
      for (std::int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y.data()[i]) * static_cast<double>(w.data()[i]);
      return s;
    };
    double worst = 0;
    std::string where;
    int which = 0;
    auto check_one = [&](auto& x) {
      using XT = value_type_of<std::remove_cvref_t<decltype(x)>>;
      if constexpr (std::is_same_v<XT, double>) {
        auto g = x.grad();
        const auto gc = g.defined() ? g.contiguous() : g;
        for (std::int64_t i = 0; i < x.numel(); ++i) {
          const double h = fd_h, x0 = x.data()[i];
          x.data()[i] = x0 + h;
          const double lp = loss();
          x.data()[i] = x0 - h;
          const double lm = loss();
          x.data()[i] = x0;
          const double num = (lp - lm) / (2 * h);
          const double ana = g.defined() ? gc.data()[i] : 0.0;
          const double err = std::abs(num - ana) / (1e-4 + std::abs(num));
          if (err > worst) {
            worst = err;
            where = "input " + std::to_string(which) + " elem " + std::to_string(i) + ": autograd " +
                    std::to_string(ana) + (g.defined() ? "" : " (no grad)") + " vs FD " + std::to_string(num);
          }
        }
      }
      ++which;
    };
    std::apply([&](auto&... x) { (check_one(x), ...); }, xs);
    if (!recorded) {
      if (worst > 1e-3) {
        std::printf("%-28s *** SILENT: output does not require grad; %s\n", name, where.c_str());
        ++n_problem;
      } else {
        std::printf("%-28s not recorded, finite differences are 0 (fine)\n", name);
        ++n_ok;
      }
    } else if (worst > 1e-3 && expected_difference) {
      std::printf("%-28s differs from finite differences as intended (%s): %s\n", name, expected_difference,
                  where.c_str());
      ++n_ok;
    } else if (worst > 1e-3) {
      std::printf("%-28s *** WRONG gradient: %s\n", name, where.c_str());
      ++n_problem;
    } else {
      std::printf("%-28s ok\n", name);
      ++n_ok;
    }
  }
}
}  // namespace sw
#define PROBE(name, f, ...) sw::probe(name, f, __VA_ARGS__)
