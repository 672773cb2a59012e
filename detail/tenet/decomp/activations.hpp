#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The activation composites: sigmoid, silu, gelu (erf and tanh forms) of include/tenet/ops.hpp,
// elu (and selu, celu), softplus, mish, hardswish, logsigmoid of include/tenet/activations.hpp.
// The pointwise ones have `apply` (one value in, one out) so a backend may run them inside a
// fused loop, which must agree with the decomposition (tests/test_prims.cpp checks).
#include <cmath>
#include <numbers>
#include <string_view>

#include <tenet/decomp/composite.hpp>
#include <tenet/expr/shared.hpp>

namespace tenet {
namespace aten {

/// sigmoid and silu carry torch's derivative (has_derivative, autograd/vjp.hpp): through the
/// decomposition it is 0 * inf = NaN once exp(-x) overflows (x below -89 in float32).
struct sigmoid : pointwise_composite {
  static constexpr std::string_view name = "sigmoid";
  static constexpr bool has_derivative = true;
  /// d/dx = (1 - y) y
  template <class X, class Y, class G>
  static auto derivative(const X&, const Y& y, const G& g) {
    return g * (1.0 - y) * y;
  }
  template <class X>
  auto decompose(const X& x) const {
    using T = value_type_of<X>;
    return reciprocal(make_node(prim::add_{}, scalar<T>{T(1)}, exp(neg(x))));
  }
  template <class T>
  TENET_HOST_DEVICE static T apply(T xin) {
    using C = compute_t<T>;
    const C x = static_cast<C>(xin);
    return static_cast<T>(C(1) / (C(1) + std::exp(-x)));
  }
};
struct silu : pointwise_composite {
  static constexpr std::string_view name = "silu";
  static constexpr bool has_derivative = true;
  /// d/dx = s (1 + x (1 - s)), s = sigmoid(x)
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y&, const G& g) {
    return g * make_node(sigmoid{}, x) * (1.0 + x * (1.0 - make_node(sigmoid{}, x)));
  }
  template <class X>
  auto decompose(const X& x) const {
    using T = value_type_of<X>;
    return make_node(prim::div_{}, x, make_node(prim::add_{}, scalar<T>{T(1)}, exp(neg(x))));
  }
  template <class T>
  TENET_HOST_DEVICE static T apply(T xin) {
    using C = compute_t<T>;
    const C x = static_cast<C>(xin);
    return static_cast<T>(x / (C(1) + std::exp(-x)));
  }
};
/// g gelu'(x), torch's gelu_backward (gelu's derivative below): one pointwise node, so that a
/// fused loop reads g and x once and computes tanh (or erf and exp) once per element, in the
/// compute type (float for 16-bit inputs):
///   tanh: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3)),
///         k = sqrt(2 / pi), c = 0.044715;
///   erf:  Phi(x) + x phi(x) = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi).
/// `decompose` is the same formula in prims (the reference; autograd differentiates it for a
/// second order).
template <bool Tanh>
struct gelu_backward {
  static constexpr bool is_prim = false;
  using group = prim::pointwise_composite_group;
  static constexpr std::string_view name = Tanh ? "gelu_tanh_backward" : "gelu_backward";
  // (g, x) of x's sizes: the VJP gives g exactly x's shape
  template <class G, class X>
  using result_type = value_type_of<X>;
  template <class G, class X>
  using result_shape = shape_of<X>;
  template <class G, class X>
  static auto sizes(const G&, const X& x) {
    return x.sizes();
  }
  static constexpr double k_tanh = std::numbers::sqrt2 * std::numbers::inv_sqrtpi, k_cube = 0.044715;
  static constexpr double k_erf = std::numbers::sqrt2 / 2, k_pdf = std::numbers::inv_sqrtpi / std::numbers::sqrt2;
  template <class G, class X>
  auto decompose(const G& g, const X& x) const;
  template <class T>
  TENET_HOST_DEVICE static T apply(T gin, T xin) {
    using C = compute_t<T>;
    const C g = static_cast<C>(gin), x = static_cast<C>(xin);
    if constexpr (Tanh) {
      const C k = C(k_tanh), c = C(k_cube), x2 = x * x;
      const C t = std::tanh(k * (x + c * x2 * x));
      return static_cast<T>(g * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * (k * (C(1) + C(3) * c * x2))));
    } else {
      return static_cast<T>(g * (C(0.5) * (C(1) + std::erf(x * C(k_erf))) + x * (C(k_pdf) * std::exp(C(-0.5) * x * x))));
    }
  }
};

/// gelu: exact (erf) form, or the tanh approximation. It carries torch's derivative
/// (gelu_backward, one node) so that autograd's backward is one fused kernel, where the
/// decomposition's chain rule ran one kernel per step (nine or more for the tanh form, each over
/// the whole activation: GPT-2's MLP backward was mostly these).
template <bool Tanh>
struct gelu : pointwise_composite {
  static constexpr std::string_view name = Tanh ? "gelu_tanh" : "gelu";
  static constexpr bool has_derivative = true;
  template <class X>
  auto decompose(const X& x) const;
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y&, const G& g) {
    return make_node(gelu_backward<Tanh>{}, detail::cast_to<value_type_of<X>>(g), x);
  }
  template <class T>
  TENET_HOST_DEVICE static T apply(T xin) {
    using C = compute_t<T>;
    const C x = static_cast<C>(xin);
    if constexpr (Tanh) {
      const C k = C(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
      return static_cast<T>(C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x))));
    } else if constexpr (half_precision<T>) {  // rounded to 16 bits: Phi to 2^-17 is enough
      return static_cast<T>(x * detail::normal_cdf_half(x));
    } else {
      return static_cast<T>(x * C(0.5) * (C(1) + std::erf(x * C(std::numbers::sqrt2 / 2))));
    }
  }
};

}  // namespace aten

template <bool Tanh>
template <class G, class X>
auto aten::gelu_backward<Tanh>::decompose(const G& gin, const X& xin) const {
  using T = value_type_of<X>;
  using C = compute_t<T>;
  const auto x = detail::cast_to<C>(xin);
  const auto g = detail::cast_to<C>(gin);
  if constexpr (Tanh) {
    auto t = tanh(k_tanh * (x + k_cube * (x * x * x)));
    return detail::cast_to<T>(g * (0.5 * (1.0 + t) + (0.5 * x) * (1.0 - t * t) * (k_tanh * (1.0 + (3.0 * k_cube) * (x * x)))));
  } else {
    return detail::cast_to<T>(g * (0.5 * (1.0 + erf(x * k_erf)) + x * (k_pdf * exp(-0.5 * (x * x)))));
  }
}

template <bool Tanh>
template <class X>
auto aten::gelu<Tanh>::decompose(const X& x) const {
  using T = value_type_of<X>;
  using C = compute_t<T>;
  const T half = T(C(0.5)), one = T(C(1));
  if constexpr (!Tanh) {  // 0.5 x (1 + erf(x / sqrt 2))
    const T k_erf = T(C(std::numbers::sqrt2 / 2));
    auto t = erf(make_node(prim::mul_{}, x, scalar<T>{k_erf}));
    return make_node(prim::mul_{}, make_node(prim::mul_{}, x, scalar<T>{half}), make_node(prim::add_{}, t, scalar<T>{one}));
  } else {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    const T k_tanh = T(C(std::numbers::sqrt2 * std::numbers::inv_sqrtpi));
    const T k_cube = T(C(0.044715));
    auto t = tanh(make_node(
        prim::mul_{}, scalar<T>{k_tanh},
        make_node(prim::add_{}, x, make_node(prim::mul_{}, scalar<T>{k_cube}, make_node(prim::mul_{}, x, square(x))))));
    return make_node(prim::mul_{}, make_node(prim::mul_{}, x, scalar<T>{half}), make_node(prim::add_{}, t, scalar<T>{one}));
  }
}


namespace aten {
/// elu, selu, celu: where(x > 0, scale x, alpha scale expm1(input_scale x)), as torch's elu kernel.
/// d/dx: scale for x > 0 (and NaN), else alpha scale input_scale exp(input_scale x).
struct elu : same_as_input {
  static constexpr std::string_view name = "elu";
  static constexpr bool has_derivative = true;
  double alpha = 1.0, scale = 1.0, input_scale = 1.0;
  template <class X>
  auto decompose(const X& x) const {
    using T = value_type_of<X>;
    auto neg_part = make_node(prim::mul_{}, make_node(prim::expm1_{}, make_node(prim::mul_{}, x, detail::cast_to<T>(input_scale))),
                              detail::cast_to<T>(alpha * scale));
    return make_node(prim::where_{}, make_node(prim::gt_{}, x, detail::cast_to<T>(0.0)),
                     make_node(prim::mul_{}, x, detail::cast_to<T>(scale)), neg_part);
  }
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y& y, const G& g) {
    const auto& o = y.op;
    return where(x <= 0.0, g * o.input_scale * (o.alpha * o.scale) * exp(x * o.input_scale), g * o.scale);
  }
};
/// softplus(x) = beta x > threshold ? x : log1p(exp(beta x)) / beta.
/// d/dx: 1 above the threshold, else z / (z + 1) with z = exp(beta x).
struct softplus : same_as_input {
  static constexpr std::string_view name = "softplus";
  static constexpr bool has_derivative = true;
  double beta = 1.0, threshold = 20.0;
  template <class X>
  auto decompose(const X& x) const {
    using T = value_type_of<X>;
    auto bx = make_node(prim::mul_{}, x, detail::cast_to<T>(beta));
    auto soft = make_node(prim::div_{}, make_node(prim::log1p_{}, make_node(prim::exp_{}, bx)), detail::cast_to<T>(beta));
    return make_node(prim::where_{}, make_node(prim::gt_{}, bx, detail::cast_to<T>(threshold)), x, soft);
  }
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y& y, const G& g) {
    auto z = exp(x * y.op.beta);
    return where(x * y.op.beta > y.op.threshold, g, g * z / (z + 1.0));
  }
};
/// mish(x) = x tanh(log1p(exp(x))) (no threshold, as torch).
/// d/dx = t + x s (1 - t^2), s = sigmoid(x), t = tanh(log1p(exp(x))).
struct mish : same_as_input {
  static constexpr std::string_view name = "mish";
  static constexpr bool has_derivative = true;
  template <class X>
  auto decompose(const X& x) const {
    return make_node(prim::mul_{}, x, make_node(prim::tanh_{}, make_node(prim::log1p_{}, make_node(prim::exp_{}, x))));
  }
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y&, const G& g) {
    auto s = 1.0 / (1.0 + exp(-x));
    auto t = tanh(log1p(exp(x)));
    return g * (t + x * s * (1.0 - t * t));
  }
};
/// hardswish(x) = x min(max(x + 3, 0), 6) / 6.
/// d/dx: 0 up to -3, x / 3 + 1/2 inside (-3, 3), else 1 (also for NaN), as torch.
struct hardswish : same_as_input {
  static constexpr std::string_view name = "hardswish";
  static constexpr bool has_derivative = true;
  template <class X>
  auto decompose(const X& x) const;  // (after hardtanh)
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y&, const G& g) {
    return where(x <= -3.0, 0.0, where(x < 3.0, g * (x / 3.0 + 0.5), g));
  }
};
/// logsigmoid(x) = min(x, 0) - log1p(exp(-|x|)).
/// d/dx = [x < 0] - sign z / (1 + z), z = exp(-|x|), sign +1 for x < 0, else -1 (1/2 at 0).
struct logsigmoid : same_as_input {
  static constexpr std::string_view name = "logsigmoid";
  static constexpr bool has_derivative = true;
  template <class X>
  auto decompose(const X& x) const {
    using T = value_type_of<X>;
    return make_node(prim::sub_{}, make_node(prim::minimum_{}, x, detail::cast_to<T>(0.0)),
                     make_node(prim::log1p_{}, make_node(prim::exp_{}, make_node(prim::neg_{}, make_node(prim::abs_{}, x)))));
  }
  template <class X, class Y, class G>
  static auto derivative(const X& x, const Y&, const G& g) {
    auto z = exp(-abs(x));
    return where(x < 0.0, g * (1.0 - z / (1.0 + z)), g * (z / (1.0 + z)));
  }
};
}  // namespace aten

template <class X>
auto aten::hardswish::decompose(const X& x) const {
  using T = value_type_of<X>;
  return make_node(prim::div_{},
                   make_node(prim::mul_{}, x, hardtanh(make_node(prim::add_{}, x, detail::cast_to<T>(3.0)), 0.0, 6.0)),
                   detail::cast_to<T>(6.0));
}

}  // namespace tenet
