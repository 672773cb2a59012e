#pragma once
// The expressions whose Metal kernels are generated (msl_generate.cpp) and run through the
// emulator against the CPU backend (test_metal_kernels.cpp): the pointwise rows of docs/ops.md
// (ops and activations) on float32, each a case with the ATen-level expression it builds. The
// kernel is generated from the expression decomposed into prims (decompose<reference_backend>);
// the CPU evaluates the expression itself (its native composites included).
#include <tenet/tenet.hpp>
#include <tenet/backend/metal/msl_pointwise.hpp>
#include <tenet/backend/metal/msl_gemm.hpp>
#include <tenet/backend/metal/msl_indexing.hpp>
#include <tenet/backend/metal/msl_rows.hpp>
#include <tenet/backend/metal/msl_scan.hpp>

#include <tuple>
#include <vector>

namespace tenet_metal_cases {

using operand = tenet::Tensor<float, tenet::shape<tenet::dyn, tenet::dyn>>;
using row_operand = tenet::Tensor<float, tenet::shape<tenet::dyn>>;
using f16_operand = tenet::Tensor<tenet::float16, tenet::shape<tenet::dyn, tenet::dyn>>;
using bf16_operand = tenet::Tensor<tenet::bfloat16, tenet::shape<tenet::dyn, tenet::dyn>>;

#define TENET_METAL_UNARY(NAME, ...)           \
  struct NAME {                                \
    static constexpr const char* name = #NAME; \
    static constexpr int arity = 1;            \
    template <class X>                         \
    static auto make(const X& x) {             \
      return __VA_ARGS__;                      \
    }                                          \
  };
#define TENET_METAL_BINARY(NAME, ...)                \
  struct NAME {                                      \
    static constexpr const char* name = #NAME;       \
    static constexpr int arity = 2;                  \
    template <class A, class B>                      \
    static auto make(const A& a, const B& b) {       \
      (void)a, (void)b;                              \
      return __VA_ARGS__;                            \
    }                                                \
  };

// unary ops (docs/ops.md, "Pointwise ops")
TENET_METAL_UNARY(neg, tenet::neg(x))
TENET_METAL_UNARY(abs, tenet::abs(x))
TENET_METAL_UNARY(sign, tenet::sign(x))
TENET_METAL_UNARY(exp, tenet::exp(x))
TENET_METAL_UNARY(exp2, tenet::exp2(x))
TENET_METAL_UNARY(expm1, tenet::expm1(x))
TENET_METAL_UNARY(log, tenet::log(x))
TENET_METAL_UNARY(log2, tenet::log2(x))
TENET_METAL_UNARY(log1p, tenet::log1p(x))
TENET_METAL_UNARY(log10, tenet::log10(x))
TENET_METAL_UNARY(sqrt, tenet::sqrt(x))
TENET_METAL_UNARY(rsqrt, tenet::rsqrt(x))
TENET_METAL_UNARY(sin, tenet::sin(x))
TENET_METAL_UNARY(cos, tenet::cos(x))
TENET_METAL_UNARY(tan, tenet::tan(x))
TENET_METAL_UNARY(tanh, tenet::tanh(x))
TENET_METAL_UNARY(erf, tenet::erf(x))
TENET_METAL_UNARY(reciprocal, tenet::reciprocal(x))
TENET_METAL_UNARY(floor, tenet::floor(x))
TENET_METAL_UNARY(ceil, tenet::ceil(x))
TENET_METAL_UNARY(round, tenet::round(x))
TENET_METAL_UNARY(trunc, tenet::trunc(x))
TENET_METAL_UNARY(frac, tenet::frac(x))
TENET_METAL_UNARY(square, tenet::square(x))
TENET_METAL_UNARY(atan, tenet::atan(x))
TENET_METAL_UNARY(asin, tenet::asin(x))
TENET_METAL_UNARY(acos, tenet::acos(x))
TENET_METAL_UNARY(sinh, tenet::sinh(x))
TENET_METAL_UNARY(cosh, tenet::cosh(x))
TENET_METAL_UNARY(asinh, tenet::asinh(x))
TENET_METAL_UNARY(acosh, tenet::acosh(x))
TENET_METAL_UNARY(atanh, tenet::atanh(x))
TENET_METAL_UNARY(deg2rad, tenet::deg2rad(x))
TENET_METAL_UNARY(rad2deg, tenet::rad2deg(x))
TENET_METAL_UNARY(sinc, tenet::sinc(x))
TENET_METAL_UNARY(logit, tenet::logit(x, 0.01))
TENET_METAL_UNARY(isnan, tenet::isnan(x))
TENET_METAL_UNARY(isinf, tenet::isinf(x))
TENET_METAL_UNARY(isfinite, tenet::isfinite(x))
TENET_METAL_UNARY(nan_to_num, tenet::nan_to_num(x))
TENET_METAL_UNARY(logical_not, tenet::logical_not(x))
// activations (docs/ops.md, "Activations")
TENET_METAL_UNARY(relu, tenet::relu(x))
TENET_METAL_UNARY(sigmoid, tenet::sigmoid(x))
TENET_METAL_UNARY(silu, tenet::silu(x))
TENET_METAL_UNARY(gelu, tenet::gelu(x))
TENET_METAL_UNARY(gelu_tanh, tenet::gelu(x, tenet::approximate_tanh))
TENET_METAL_UNARY(hardtanh, tenet::hardtanh(x))
TENET_METAL_UNARY(relu6, tenet::relu6(x))
TENET_METAL_UNARY(leaky_relu, tenet::leaky_relu(x))
TENET_METAL_UNARY(elu, tenet::elu(x))
TENET_METAL_UNARY(selu, tenet::selu(x))
TENET_METAL_UNARY(celu, tenet::celu(x))
TENET_METAL_UNARY(softplus, tenet::softplus(x))
TENET_METAL_UNARY(mish, tenet::mish(x))
TENET_METAL_UNARY(hardswish, tenet::hardswish(x))
TENET_METAL_UNARY(hardsigmoid, tenet::hardsigmoid(x))
TENET_METAL_UNARY(logsigmoid, tenet::logsigmoid(x))
TENET_METAL_UNARY(softshrink, tenet::softshrink(x))
TENET_METAL_UNARY(hardshrink, tenet::hardshrink(x))
TENET_METAL_UNARY(softsign, tenet::softsign(x))
TENET_METAL_UNARY(tanhshrink, tenet::tanhshrink(x))
// a fused tree with a scalar
TENET_METAL_UNARY(scaled_exp_plus, tenet::exp(x * 0.5f) + 1.0f)

// binary ops
TENET_METAL_BINARY(add, a + b)
TENET_METAL_BINARY(sub, a - b)
TENET_METAL_BINARY(mul, a * b)
TENET_METAL_BINARY(div, a / b)
TENET_METAL_BINARY(remainder, tenet::remainder(a, b))
TENET_METAL_BINARY(fmod, tenet::fmod(a, b))
TENET_METAL_BINARY(floor_divide, tenet::floor_divide(a, b))
TENET_METAL_BINARY(pow, tenet::pow(a, b))
TENET_METAL_BINARY(maximum, tenet::maximum(a, b))
TENET_METAL_BINARY(minimum, tenet::minimum(a, b))
TENET_METAL_BINARY(fmax, tenet::fmax(a, b))
TENET_METAL_BINARY(fmin, tenet::fmin(a, b))
TENET_METAL_BINARY(atan2, tenet::atan2(a, b))
TENET_METAL_BINARY(hypot, tenet::hypot(a, b))
TENET_METAL_BINARY(copysign, tenet::copysign(a, b))
TENET_METAL_BINARY(logaddexp, tenet::logaddexp(a, b))
TENET_METAL_BINARY(logaddexp2, tenet::logaddexp2(a, b))
TENET_METAL_BINARY(xlogy, tenet::xlogy(a, b))
TENET_METAL_BINARY(heaviside, tenet::heaviside(a, b))
TENET_METAL_BINARY(rsub, tenet::rsub(a, b, 2.0))
TENET_METAL_BINARY(eq, a == b)
TENET_METAL_BINARY(ne, a != b)
TENET_METAL_BINARY(lt, a < b)
TENET_METAL_BINARY(le, a <= b)
TENET_METAL_BINARY(gt, a > b)
TENET_METAL_BINARY(ge, a >= b)
TENET_METAL_BINARY(logical_and, tenet::logical_and(a, b))
TENET_METAL_BINARY(logical_or, tenet::logical_or(a, b))
TENET_METAL_BINARY(logical_xor, tenet::logical_xor(a, b))
TENET_METAL_BINARY(where, tenet::where(a > b, a, b * 2.0f))
TENET_METAL_BINARY(clamp, tenet::clamp(a, -0.5f, 0.75f))
TENET_METAL_BINARY(lerp, tenet::lerp(a, b, 0.3f))
TENET_METAL_BINARY(addcmul, tenet::addcmul(a, a, b, 0.5))
TENET_METAL_BINARY(addcdiv, tenet::addcdiv(a, a, b, 0.5))
TENET_METAL_BINARY(gelu_of_sum, tenet::gelu(a + b) * b)
using unary_cases = std::tuple<neg, abs, sign, exp, exp2, expm1, log, log2, log1p, log10, sqrt, rsqrt, sin, cos, tan, tanh, erf,
                               reciprocal, floor, ceil, round, trunc, frac, square, atan, asin, acos, sinh, cosh, asinh,
                               acosh, atanh, deg2rad, rad2deg, sinc, logit, isnan, isinf, isfinite, nan_to_num,
                               logical_not, relu, sigmoid, silu, gelu, gelu_tanh, hardtanh, relu6, leaky_relu, elu, selu,
                               celu, softplus, mish, hardswish, hardsigmoid, logsigmoid, softshrink, hardshrink,
                               softsign, tanhshrink, scaled_exp_plus>;
using binary_cases = std::tuple<add, sub, mul, div, remainder, fmod, floor_divide, pow, maximum, minimum, fmax, fmin, atan2,
                                hypot, copysign, logaddexp, logaddexp2, xlogy, heaviside, rsub, eq, ne, lt, le, gt, ge,
                                logical_and, logical_or, logical_xor, where, clamp, lerp, addcmul, addcdiv, gelu_of_sum>;

/// Cases also run on float16 and bfloat16 operands (computing in float, each node rounding to
/// the 16-bit type).
using half_unary_cases = std::tuple<exp, tanh, sigmoid, gelu, softplus, scaled_exp_plus>;
using half_binary_cases = std::tuple<add, mul, div, maximum, lt, where, gelu_of_sum>;

/// Cases also run on int32 operands (wrapping arithmetic, comparisons, bitwise ops).
using int_unary_cases = std::tuple<neg, abs, sign, square, relu, logical_not, isfinite>;
TENET_METAL_BINARY(bitwise_and, tenet::bitwise_and(a, b))
TENET_METAL_BINARY(bitwise_or, tenet::bitwise_or(a, b))
TENET_METAL_BINARY(bitwise_xor, tenet::bitwise_xor(a, b))
TENET_METAL_BINARY(int_clamp, tenet::clamp(a, -50, 60))
using int_binary_cases = std::tuple<add, sub, mul, pow, maximum, minimum, eq, lt, ge, logical_and, bitwise_and, bitwise_or,
                                    bitwise_xor, where, int_clamp>;
using i32_operand = tenet::Tensor<std::int32_t, tenet::shape<tenet::dyn, tenet::dyn>>;
#undef TENET_METAL_UNARY
#undef TENET_METAL_BINARY

/// The decomposed tree of case C on operands of types A... (the kernel's type).
template <class C, class... A>
using tree_t = decltype(tenet::detail::decompose<tenet::detail::reference_backend>(C::make(std::declval<const A&>()...)));
template <class C, class... A>
using result_t = tenet::value_type_of<decltype(C::make(std::declval<const A&>()...))>;

/// Calls f.template operator()<C, A...>() for every case with the operand types it is tested on:
/// every unary case on a rank-2 operand; every binary case on two rank-2 operands, and `add` and
/// `gelu_of_sum` also with a rank-1 second operand (broadcast by rank); the half cases on float16
/// and bfloat16 operands, the int cases on int32 operands.
template <class F>
void for_each_case(F&& f) {
  std::apply([&](auto... c) { (f.template operator()<decltype(c), operand>(), ...); }, unary_cases{});
  std::apply([&](auto... c) { (f.template operator()<decltype(c), operand, operand>(), ...); }, binary_cases{});
  f.template operator()<add, operand, row_operand>();
  f.template operator()<gelu_of_sum, operand, row_operand>();
  std::apply([&](auto... c) { (f.template operator()<decltype(c), f16_operand>(), ...); }, half_unary_cases{});
  std::apply([&](auto... c) { (f.template operator()<decltype(c), bf16_operand>(), ...); }, half_unary_cases{});
  std::apply([&](auto... c) { (f.template operator()<decltype(c), f16_operand, f16_operand>(), ...); }, half_binary_cases{});
  std::apply([&](auto... c) { (f.template operator()<decltype(c), bf16_operand, bf16_operand>(), ...); }, half_binary_cases{});
  std::apply([&](auto... c) { (f.template operator()<decltype(c), i32_operand>(), ...); }, int_unary_cases{});
  std::apply([&](auto... c) { (f.template operator()<decltype(c), i32_operand, i32_operand>(), ...); }, int_binary_cases{});
}

/// The row kernels generated and tested: sum and amax over the last dim of a rank-2 view and over
/// all of it, softmax over the last dim of rank-2 and rank-3 views, log_softmax, layer_norm and
/// rms_norm over the last dim of rank-2 views; sum, amax, softmax and layer_norm over the last dim
/// also on float16 and bfloat16.
inline std::vector<const tenet::detail::metal::kernel_source*> row_kernels() {
  namespace m = tenet::detail::metal;
  return {&m::reduce_kernel<m::row_reduction::sum, 1, 1>(), &m::reduce_kernel<m::row_reduction::sum, 0, 2>(),
          &m::reduce_kernel<m::row_reduction::amax, 1, 1>(), &m::reduce_kernel<m::row_reduction::amax, 0, 2>(),
          &m::softmax_kernel<1>(), &m::softmax_kernel<2>(), &m::softmax_kernel<1, true>(), &m::layer_norm_kernel<1>(),
          &m::layer_norm_kernel<1, true>(),
          // float16 and bfloat16
          &m::reduce_kernel<m::row_reduction::sum, 1, 1, tenet::float16>(), &m::reduce_kernel<m::row_reduction::amax, 1, 1, tenet::float16>(),
          &m::softmax_kernel<1, false, tenet::float16>(), &m::layer_norm_kernel<1, false, tenet::float16>(),
          &m::reduce_kernel<m::row_reduction::sum, 1, 1, tenet::bfloat16>(), &m::reduce_kernel<m::row_reduction::amax, 1, 1, tenet::bfloat16>(),
          &m::softmax_kernel<1, false, tenet::bfloat16>(), &m::layer_norm_kernel<1, false, tenet::bfloat16>()};
}

/// The scan and indexing kernels generated and run by test_metal_scan_index.cpp (a translation unit
/// of their own): cumsum, cumprod, logcumsumexp, cummax and cummin's values on float32 rank-2 views
/// (cumsum also rank 1 and 3); cumsum, cumprod and logcumsumexp on float16 and bfloat16; cumsum,
/// cumprod and cummax on int32; gather on float32 (int64 and int32 indices, rank 2 and 3),
/// float16, bfloat16 and int32; scatter with every combining op on float32, sum and amax on
/// float16, sum and mean on bfloat16, sum, prod and mean on int32; scatter_add with atomics on
/// float32 and int32.
inline std::vector<const tenet::detail::metal::kernel_source*> scan_index_kernels() {
  namespace m = tenet::detail::metal;
  namespace p = tenet::prim;
  using tenet::bfloat16;
  using tenet::float16;
  using i32 = std::int32_t;
  using i64 = std::int64_t;
  return {&m::scan_kernel<p::sum_kind, 1>(), &m::scan_kernel<p::sum_kind, 2>(), &m::scan_kernel<p::sum_kind, 3>(),
          &m::scan_kernel<p::prod_kind, 2>(), &m::scan_kernel<p::logaddexp_kind, 2>(), &m::scan_kernel<p::amax_kind, 2>(),
          &m::scan_kernel<p::amin_kind, 2>(),
          &m::scan_kernel<p::sum_kind, 2, float16>(), &m::scan_kernel<p::prod_kind, 2, float16>(),
          &m::scan_kernel<p::logaddexp_kind, 2, float16>(), &m::scan_kernel<p::sum_kind, 2, bfloat16>(),
          &m::scan_kernel<p::prod_kind, 2, bfloat16>(), &m::scan_kernel<p::logaddexp_kind, 2, bfloat16>(),
          &m::scan_kernel<p::sum_kind, 2, i32>(), &m::scan_kernel<p::prod_kind, 2, i32>(), &m::scan_kernel<p::amax_kind, 2, i32>(),
          &m::gather_kernel<2, float, i64>(), &m::gather_kernel<2, float, i32>(), &m::gather_kernel<3, float, i64>(),
          &m::gather_kernel<2, float16, i64>(), &m::gather_kernel<2, bfloat16, i64>(), &m::gather_kernel<2, i32, i64>(),
          &m::scatter_kernel<p::scatter_op::replace, 2, float>(), &m::scatter_kernel<p::scatter_op::sum, 2, float>(),
          &m::scatter_kernel<p::scatter_op::prod, 2, float>(), &m::scatter_kernel<p::scatter_op::mean, 2, float>(),
          &m::scatter_kernel<p::scatter_op::amax, 2, float>(), &m::scatter_kernel<p::scatter_op::amin, 2, float>(),
          &m::scatter_kernel<p::scatter_op::sum, 2, float16>(), &m::scatter_kernel<p::scatter_op::amax, 2, float16>(),
          &m::scatter_kernel<p::scatter_op::sum, 2, bfloat16>(), &m::scatter_kernel<p::scatter_op::mean, 2, bfloat16>(),
          &m::scatter_kernel<p::scatter_op::sum, 2, i32>(), &m::scatter_kernel<p::scatter_op::prod, 2, i32>(),
          &m::scatter_kernel<p::scatter_op::mean, 2, i32>(),
          &m::scatter_add_atomic_kernel<2, float>(), &m::scatter_add_atomic_kernel<2, i32>()};
}

/// The GEMM kernels generated and run by test_metal_gemm.cpp: every epilogue on float32; no
/// epilogue and bias + tanh-GELU on float16; none and bias + relu on bfloat16.
inline std::vector<const tenet::detail::metal::kernel_source*> gemm_kernels() {
  namespace m = tenet::detail::metal;
  using e = m::gemm_epilogue;
  return {&m::gemm_kernel<float>(), &m::gemm_kernel<float, e::bias>(), &m::gemm_kernel<float, e::bias_relu>(),
          &m::gemm_kernel<float, e::bias_gelu_tanh>(), &m::gemm_kernel<tenet::float16>(),
          &m::gemm_kernel<tenet::float16, e::bias_gelu_tanh>(), &m::gemm_kernel<tenet::bfloat16>(),
          &m::gemm_kernel<tenet::bfloat16, e::bias_relu>()};
}

/// The pointwise kernel of case C on operands A...
template <class C, class... A>
const tenet::detail::metal::kernel_source& pointwise_kernel_of() {
  using T = tree_t<C, A...>;
  return tenet::detail::metal::pointwise_kernel<result_t<C, A...>, tenet::shape_of<T>::rank == 0 ? 1 : tenet::shape_of<T>::rank, T>();
}

}  // namespace tenet_metal_cases
