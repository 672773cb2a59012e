#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// layer_norm and rms_norm over the last K dims with an affine weight (aten::norm_last): a
// composite the CPU and CUDA run natively as one row kernel; decompose() is the reference.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <tenet/decomp/moments.hpp>
#include <tenet/error.hpp>

namespace tenet {

namespace detail {
template <std::size_t R, std::size_t K, class F>
auto with_trailing_dims(F&& f) {
  static_assert(K >= 1 && K <= R, "tenet: the normalized shape must cover 1..rank trailing dims");
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return f.template operator()<static_cast<std::int64_t>(R - K + I)...>();
  }(std::make_index_sequence<K>{});
}
}  // namespace detail

namespace aten {
/// layer_norm / rms_norm over the last K dims with an affine weight (and bias): composites the CPU
/// runs natively as one row kernel (backend/cpu/norm.hpp); decompose() is the reference.
template <std::size_t K, bool Rms>
struct norm_last {
  static constexpr bool is_prim = false;
  static constexpr std::string_view name = Rms ? "rms_norm" : "layer_norm";
  double eps = 1e-5;
  template <class X, class... P>
  using result_type = value_type_of<X>;
  template <class X, class... P>
  using result_shape = shape_of<X>;
  /// The weight (and bias) must have exactly the normalized trailing sizes, as torch checks.
  template <class X, class... P>
  static auto sizes(const X& x, const P&... p) {
    const auto xs = x.sizes();
    constexpr std::size_t R = rank_of<X>;
    auto check = [&](const auto& q, const char* what) {
      const auto qs = q.sizes();
      bool ok = true;
      for (std::size_t i = 0; i < K; ++i) ok = ok && qs[i] == xs[R - K + i];
      if (!ok)
        throw shape_error(std::string("tenet: ") + std::string(name) + ": the " + what + " has sizes " +
                          detail::sizes_text(qs) + ", expected the input's last " + std::to_string(K) +
                          " sizes (input " + detail::sizes_text(xs) + ")");
    };
    const char* whats[] = {"weight", "bias"};
    std::size_t i = 0;
    (check(p, whats[i++]), ...);
    return xs;
  }
  template <class X, class W, class... Bias>
  auto decompose(const X& x0, const W& w, const Bias&... b) const {
    using T = value_type_of<X>;
    auto x = detail::share(x0);
    return detail::with_trailing_dims<rank_of<X>, K>([&]<std::int64_t... D>() {
      if constexpr (Rms) {
        return x * rsqrt(detail::mean_impl<true, D...>(x * x) + T(eps)) * w;
      } else {
        auto mu = detail::share(detail::mean_impl<true, D...>(x));
        auto centered = x - mu;
        auto v = detail::share(detail::mean_impl<true, D...>(centered * centered));
        return centered * rsqrt(v + T(eps)) * w + (b + ...);
      }
    });
  }
  /// The CPU and CUDA backends run it as one row kernel; a pointwise producer of x (a residual
  /// add) is fused into it.
  static constexpr bool fuses_prologue = true;
};
/// The input gradient of norm_last (torch's formulas, in the compute type, the row statistics
/// recomputed from x; result rounded once to x's dtype):
///   layer_norm: xhat = (x - mu) rstd, dx = rstd (g w - mean(g w) - xhat mean(g w xhat)),
///   rms_norm:   xhat = x r,          dx = r (g w - xhat mean(g w xhat)).
/// Children (x, w, g), g of x's sizes. The CPU (float, double) and CUDA run it as one row kernel;
/// the weight and bias gradients stay expressions (prims/composite_rules.hpp).
template <std::size_t K, bool Rms>
struct norm_last_grad {
  static constexpr bool is_prim = false;
  static constexpr std::string_view name = Rms ? "rms_norm_backward" : "layer_norm_backward";
  double eps = 1e-5;
  template <class X, class W, class G>
  using result_type = value_type_of<X>;
  template <class X, class W, class G>
  using result_shape = shape_of<X>;
  template <class X, class W, class G>
  static auto sizes(const X& x, const W& w, const G& g) {
    const auto xs = x.sizes();
    if (g.sizes() != xs)
      throw shape_error(std::string("tenet: ") + std::string(name) + ": a gradient of sizes " +
                        detail::sizes_text(g.sizes()) + " for an input of sizes " + detail::sizes_text(xs));
    norm_last<K, Rms>::sizes(x, w);
    return xs;
  }
  template <class X, class W, class G>
  auto decompose(const X& x0, const W& w0, const G& g0) const {
    using T = value_type_of<X>;
    using C = compute_t<T>;
    auto x = detail::share(detail::cast_to<C>(x0));
    auto gw = detail::share(detail::cast_to<C>(g0) * detail::cast_to<C>(w0));
    const C e = static_cast<C>(eps);
    return detail::with_trailing_dims<rank_of<X>, K>([&]<std::int64_t... D>() {
      if constexpr (Rms) {
        auto r = detail::share(rsqrt(detail::mean_impl<true, D...>(x * x) + e));
        auto xhat = detail::share(x * r);
        return detail::cast_to<T>(r * (gw - xhat * detail::mean_impl<true, D...>(gw * xhat)));
      } else {
        auto xc = detail::share(x - detail::mean_impl<true, D...>(x));
        auto rstd = detail::share(rsqrt(detail::mean_impl<true, D...>(xc * xc) + e));
        auto xhat = detail::share(xc * rstd);
        return detail::cast_to<T>(rstd * (gw - detail::mean_impl<true, D...>(gw) -
                                          xhat * detail::mean_impl<true, D...>(gw * xhat)));
      }
    });
  }
};
}  // namespace aten

}  // namespace tenet
