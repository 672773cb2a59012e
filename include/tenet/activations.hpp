#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Activation functions (torch.nn.functional), each a decomposition into existing prims.
// Floating inputs keep their dtype; integer inputs as torch: hardtanh and relu6 keep the integer
// dtype, softsign and tanhshrink compute in float32, and the activations torch has no integer
// kernel for (elu, softplus, hardswish, ...) refuse integer and bool tensors at compile time.
// Run-time parameters are doubles converted (rounded once) to the input's dtype.
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include <tenet/error.hpp>
#include <tenet/decomp/activations.hpp>
#include <tenet/ops.hpp>

namespace tenet {

namespace detail {
/// x as the float type it computes in (float types stay, others become float32), shared when
/// it is read more than once.
template <class X>
auto act_input(const X& x) {
  return share(cast_to<floating_t<value_type_of<X>>>(x));
}
/// Whether X has a floating dtype: the activations torch implements for floating dtypes only
/// (its kernels raise "not implemented for 'Int'") static_assert it.
template <class X>
inline constexpr bool floating_activation_input = is_floating_v<value_type_of<X>>;
}  // namespace detail

// Activations with torch's derivative (has_derivative: autograd keeps the composite whole and
// applies `derivative`, autograd/vjp.hpp), where the chain rule through the decomposition is NaN
// (0 * inf: an exp that overflows in a where() branch not taken, elu of 100 or softplus of 100 in
// float32) or picks the wrong side of a kink (logsigmoid'(0) through min(x, 0) and |x|). Each
// runs on the floating operand (detail::act_input).

namespace detail {
/// elu's composite with its parameters, on the floating operand (elu, selu, celu).
template <class X>
auto elu_impl(const X& x, double alpha, double scale, double input_scale) {
  aten::elu op;
  op.alpha = alpha, op.scale = scale, op.input_scale = input_scale;
  return make_node(op, act_input(x));
}
}  // namespace detail

/// hardtanh(x) = min(max(x, min_val), max_val). An integer tensor keeps its dtype, as torch: the
/// bounds truncated toward zero and saturated to the dtype's range; bool is refused (as torch).
template <Expression X>
auto hardtanh(const X& x, double min_val = -1.0, double max_val = 1.0) {
  using T = value_type_of<X>;
  static_assert(!std::is_same_v<T, bool>, "tenet: hardtanh (and relu6) of a bool tensor is not supported (as in PyTorch)");
  return make_node(prim::minimum_{}, make_node(prim::maximum_{}, x, detail::clamp_bound<T>(min_val)),
                   detail::clamp_bound<T>(max_val));
}

/// relu6(x) = min(max(x, 0), 6) (integer tensors keep their dtype)
template <Expression X>
auto relu6(const X& x) {
  return hardtanh(x, 0.0, 6.0);
}

/// leaky_relu(x) = x > 0 ? x : negative_slope * x
template <Expression X>
auto leaky_relu(const X& x0, double negative_slope = 0.01) {
  static_assert(detail::floating_activation_input<X>,
                "tenet: leaky_relu needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  auto x = detail::act_input(x0);
  using T = value_type_of<decltype(x)>;
  return make_node(prim::where_{}, make_node(prim::gt_{}, x, detail::cast_to<T>(0.0)), x,
                   make_node(prim::mul_{}, x, detail::cast_to<T>(negative_slope)));
}

/// elu(x) = x > 0 ? x : alpha * (exp(x) - 1)
template <Expression X>
auto elu(const X& x, double alpha = 1.0) {
  static_assert(detail::floating_activation_input<X>,
                "tenet: elu needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  return detail::elu_impl(x, alpha, 1.0, 1.0);
}

/// selu(x) = scale * (x > 0 ? x : alpha * (exp(x) - 1)), alpha = 1.6732632..., scale = 1.0507009...
template <Expression X>
auto selu(const X& x) {
  static_assert(detail::floating_activation_input<X>,
                "tenet: selu needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  return detail::elu_impl(x, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0);
}

/// celu(x) = x > 0 ? x : alpha * (exp(x / alpha) - 1)
template <Expression X>
auto celu(const X& x, double alpha = 1.0) {
  static_assert(detail::floating_activation_input<X>,
                "tenet: celu needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  return detail::elu_impl(x, alpha, 1.0, 1.0 / alpha);
}

/// softplus(x) = beta * x > threshold ? x : log(1 + exp(beta * x)) / beta (aten::softplus)
template <Expression X>
auto softplus(const X& x, double beta = 1.0, double threshold = 20.0) {
  static_assert(detail::floating_activation_input<X>,
                "tenet: softplus needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  aten::softplus op;
  op.beta = beta, op.threshold = threshold;
  return make_node(op, detail::act_input(x));
}

/// softsign(x) = x / (1 + |x|)   (nan at +-inf, as torch). An integer x divides as float32, with
/// 1 + |x| taken in x's dtype as torch does (so it wraps: softsign of uint8 255 is inf).
template <Expression X>
auto softsign(const X& x0) {
  using V = value_type_of<X>;
  static_assert(!std::is_same_v<V, bool>, "tenet: softsign of a bool tensor is not supported (as in PyTorch)");
  if constexpr (std::is_integral_v<V>) {
    auto x = detail::share(x0);
    return div(x, make_node(prim::add_{}, make_node(prim::abs_{}, x), scalar<V>{V(1)}));
  } else {
    auto x = detail::act_input(x0);
    using T = value_type_of<decltype(x)>;
    return make_node(prim::div_{}, x, make_node(prim::add_{}, make_node(prim::abs_{}, x), detail::cast_to<T>(1.0)));
  }
}

/// mish(x) = x * tanh(log(1 + exp(x)))   (no threshold, as torch; nan at -inf, as torch; aten::mish)
template <Expression X>
auto mish(const X& x) {
  static_assert(detail::floating_activation_input<X>,
                "tenet: mish needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  return make_node(aten::mish{}, detail::act_input(x));
}

/// hardsigmoid(x) = min(max(x + 3, 0), 6) / 6
template <Expression X>
auto hardsigmoid(const X& x0) {
  static_assert(detail::floating_activation_input<X>,
                "tenet: hardsigmoid needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  auto x = detail::cast_to<detail::floating_t<value_type_of<X>>>(x0);
  using T = value_type_of<decltype(x)>;
  return make_node(prim::div_{}, hardtanh(make_node(prim::add_{}, x, detail::cast_to<T>(3.0)), 0.0, 6.0),
                   detail::cast_to<T>(6.0));
}

/// hardswish(x) = x * min(max(x + 3, 0), 6) / 6   (nan at -inf, as torch; aten::hardswish)
template <Expression X>
auto hardswish(const X& x) {
  static_assert(detail::floating_activation_input<X>,
                "tenet: hardswish needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  return make_node(aten::hardswish{}, detail::act_input(x));
}

/// logsigmoid(x) = min(x, 0) - log(1 + exp(-|x|)) (aten::logsigmoid)
template <Expression X>
auto logsigmoid(const X& x) {
  static_assert(detail::floating_activation_input<X>,
                "tenet: logsigmoid needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  return make_node(aten::logsigmoid{}, detail::act_input(x));
}

/// tanhshrink(x) = x - tanh(x)
template <Expression X>
auto tanhshrink(const X& x0) {
  static_assert(!std::is_same_v<value_type_of<X>, bool>, "tenet: tanhshrink of a bool tensor is not supported (as in PyTorch)");
  auto x = detail::act_input(x0);
  return make_node(prim::sub_{}, x, make_node(prim::tanh_{}, x));
}

/// softshrink(x) = x > lambd ? x - lambd : x < -lambd ? x + lambd : 0
template <Expression X>
auto softshrink(const X& x0, double lambd = 0.5) {
  static_assert(detail::floating_activation_input<X>,
                "tenet: softshrink needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  auto x = detail::act_input(x0);
  using T = value_type_of<decltype(x)>;
  auto l = detail::cast_to<T>(lambd), ml = detail::cast_to<T>(-lambd);
  auto inner = make_node(prim::where_{}, make_node(prim::lt_{}, x, ml), make_node(prim::add_{}, x, l),
                         make_node(prim::add_{}, make_node(prim::mul_{}, x, detail::cast_to<T>(0.0)),
                                   detail::cast_to<T>(0.0)));  // x * 0 + 0: nan stays, -0.0 becomes 0
  return make_node(prim::where_{}, make_node(prim::gt_{}, x, l), make_node(prim::sub_{}, x, l), inner);
}

/// hardshrink(x) = -lambd <= x <= lambd ? 0 : x
template <Expression X>
auto hardshrink(const X& x0, double lambd = 0.5) {
  static_assert(detail::floating_activation_input<X>,
                "tenet: hardshrink needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  auto x = detail::act_input(x0);
  using T = value_type_of<decltype(x)>;
  auto inside = make_node(prim::bitwise_and_{}, make_node(prim::ge_{}, x, detail::cast_to<T>(-lambd)),
                          make_node(prim::le_{}, x, detail::cast_to<T>(lambd)));
  return make_node(prim::where_{}, inside, detail::cast_to<T>(0.0), x);
}

/// glu<Dim>(x) = a * sigmoid(b), where a, b are the first and second halves of x along Dim
template <std::int64_t Dim, Expression X>
auto glu(const X& x) {
  static_assert(detail::floating_activation_input<X>,
                "tenet: glu needs a floating tensor (torch has no integer or bool kernel for it); cast with .to<float>()");
  if constexpr (!TensorType<X>) {
    return glu<Dim>(tenet::eval(x));
  } else {
    constexpr std::size_t d = detail::static_dim<shape_of<X>, Dim>();
    const std::int64_t n = x.sizes()[d];
    if (n % 2 != 0)
      throw shape_error("tenet: glu: halving dimension " + std::to_string(d) + " must be even, got size " +
                        std::to_string(n));
    auto a = x.template narrow<Dim>(0, n / 2);
    auto b = x.template narrow<Dim>(n / 2, n / 2);
    return make_node(prim::mul_{}, detail::cast_to<detail::floating_t<value_type_of<X>>>(a), sigmoid(b));
  }
}

}  // namespace tenet
