#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Activation functions (torch.nn.functional), each a decomposition into existing prims.
// Integer inputs compute in float32, floating inputs keep their dtype; run-time parameters are
// doubles converted (rounded once) to the input's dtype.
#include <cstdint>
#include <string>

#include <tenet/error.hpp>
#include <tenet/ops.hpp>

namespace tenet {

namespace detail {
/// x as the float type it computes in (float types stay, others become float32), shared when
/// it is read more than once.
template <class X>
auto act_input(const X& x) {
  return share(cast_to<floating_t<value_type_of<X>>>(x));
}
/// where(x > 0, x * pos, alpha * expm1(x * in)) as torch's elu kernel (selu, celu, elu).
template <class X>
auto elu_impl(const X& x0, double alpha, double scale, double input_scale) {
  auto x = act_input(x0);
  using T = value_type_of<decltype(x)>;
  auto neg_part = make_node(prim::mul_{}, make_node(prim::expm1_{}, make_node(prim::mul_{}, x, cast_to<T>(input_scale))),
                            cast_to<T>(alpha * scale));
  return make_node(prim::where_{}, make_node(prim::gt_{}, x, cast_to<T>(0.0)),
                   make_node(prim::mul_{}, x, cast_to<T>(scale)), neg_part);
}
}  // namespace detail

/// hardtanh(x) = min(max(x, min_val), max_val)
template <Expression X>
auto hardtanh(const X& x0, double min_val = -1.0, double max_val = 1.0) {
  auto x = detail::cast_to<detail::floating_t<value_type_of<X>>>(x0);
  using T = value_type_of<decltype(x)>;
  return make_node(prim::minimum_{}, make_node(prim::maximum_{}, x, detail::cast_to<T>(min_val)),
                   detail::cast_to<T>(max_val));
}

/// relu6(x) = min(max(x, 0), 6)
template <Expression X>
auto relu6(const X& x) {
  return hardtanh(x, 0.0, 6.0);
}

/// leaky_relu(x) = x > 0 ? x : negative_slope * x
template <Expression X>
auto leaky_relu(const X& x0, double negative_slope = 0.01) {
  auto x = detail::act_input(x0);
  using T = value_type_of<decltype(x)>;
  return make_node(prim::where_{}, make_node(prim::gt_{}, x, detail::cast_to<T>(0.0)), x,
                   make_node(prim::mul_{}, x, detail::cast_to<T>(negative_slope)));
}

/// elu(x) = x > 0 ? x : alpha * (exp(x) - 1)
template <Expression X>
auto elu(const X& x, double alpha = 1.0) {
  return detail::elu_impl(x, alpha, 1.0, 1.0);
}

/// selu(x) = scale * (x > 0 ? x : alpha * (exp(x) - 1)), alpha = 1.6732632..., scale = 1.0507009...
template <Expression X>
auto selu(const X& x) {
  return detail::elu_impl(x, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0);
}

/// celu(x) = x > 0 ? x : alpha * (exp(x / alpha) - 1)
template <Expression X>
auto celu(const X& x, double alpha = 1.0) {
  return detail::elu_impl(x, alpha, 1.0, 1.0 / alpha);
}

/// softplus(x) = beta * x > threshold ? x : log(1 + exp(beta * x)) / beta
template <Expression X>
auto softplus(const X& x0, double beta = 1.0, double threshold = 20.0) {
  auto x = detail::act_input(x0);
  using T = value_type_of<decltype(x)>;
  auto bx = make_node(prim::mul_{}, x, detail::cast_to<T>(beta));
  auto soft = make_node(prim::div_{}, make_node(prim::log1p_{}, make_node(prim::exp_{}, bx)), detail::cast_to<T>(beta));
  return make_node(prim::where_{}, make_node(prim::gt_{}, bx, detail::cast_to<T>(threshold)), x, soft);
}

/// softsign(x) = x / (1 + |x|)   (nan at +-inf, as torch)
template <Expression X>
auto softsign(const X& x0) {
  auto x = detail::act_input(x0);
  using T = value_type_of<decltype(x)>;
  return make_node(prim::div_{}, x, make_node(prim::add_{}, make_node(prim::abs_{}, x), detail::cast_to<T>(1.0)));
}

/// mish(x) = x * tanh(log(1 + exp(x)))   (no threshold, as torch; nan at -inf, as torch)
template <Expression X>
auto mish(const X& x0) {
  auto x = detail::act_input(x0);
  return make_node(prim::mul_{}, x,
                   make_node(prim::tanh_{}, make_node(prim::log1p_{}, make_node(prim::exp_{}, x))));
}

/// hardsigmoid(x) = min(max(x + 3, 0), 6) / 6
template <Expression X>
auto hardsigmoid(const X& x0) {
  auto x = detail::cast_to<detail::floating_t<value_type_of<X>>>(x0);
  using T = value_type_of<decltype(x)>;
  return make_node(prim::div_{}, hardtanh(make_node(prim::add_{}, x, detail::cast_to<T>(3.0)), 0.0, 6.0),
                   detail::cast_to<T>(6.0));
}

/// hardswish(x) = x * min(max(x + 3, 0), 6) / 6   (nan at -inf, as torch)
template <Expression X>
auto hardswish(const X& x0) {
  auto x = detail::act_input(x0);
  using T = value_type_of<decltype(x)>;
  return make_node(prim::div_{},
                   make_node(prim::mul_{}, x, hardtanh(make_node(prim::add_{}, x, detail::cast_to<T>(3.0)), 0.0, 6.0)),
                   detail::cast_to<T>(6.0));
}

/// logsigmoid(x) = min(x, 0) - log(1 + exp(-|x|))
template <Expression X>
auto logsigmoid(const X& x0) {
  auto x = detail::act_input(x0);
  using T = value_type_of<decltype(x)>;
  return make_node(prim::sub_{}, make_node(prim::minimum_{}, x, detail::cast_to<T>(0.0)),
                   make_node(prim::log1p_{}, make_node(prim::exp_{}, make_node(prim::neg_{}, make_node(prim::abs_{}, x)))));
}

/// tanhshrink(x) = x - tanh(x)
template <Expression X>
auto tanhshrink(const X& x0) {
  auto x = detail::act_input(x0);
  return make_node(prim::sub_{}, x, make_node(prim::tanh_{}, x));
}

/// softshrink(x) = x > lambd ? x - lambd : x < -lambd ? x + lambd : 0
template <Expression X>
auto softshrink(const X& x0, double lambd = 0.5) {
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
  auto x = detail::act_input(x0);
  using T = value_type_of<decltype(x)>;
  auto inside = make_node(prim::bitwise_and_{}, make_node(prim::ge_{}, x, detail::cast_to<T>(-lambd)),
                          make_node(prim::le_{}, x, detail::cast_to<T>(lambd)));
  return make_node(prim::where_{}, inside, detail::cast_to<T>(0.0), x);
}

/// glu<Dim>(x) = a * sigmoid(b), where a, b are the first and second halves of x along Dim
template <std::int64_t Dim, Expression X>
auto glu(const X& x) {
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
