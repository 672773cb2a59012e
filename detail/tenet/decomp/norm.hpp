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
}  // namespace aten

}  // namespace tenet
