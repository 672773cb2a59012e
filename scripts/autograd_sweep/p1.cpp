#include "harness.hpp"
using namespace sw;
void part1() {
  std::printf("== pointwise unary\n");
  const M x = filled<2>({3, 4}, -2.3, 2.3, 0.05);   // no integers, no 0
  const M p = filled<2>({3, 4}, 0.2, 3.1, 0.11);    // positive
  const M u = filled<2>({3, 4}, -0.9, 0.9, 0.13);   // (-1, 1)
  const M g1 = filled<2>({3, 4}, 1.2, 3.3, 0.17);   // > 1
  const M u01 = filled<2>({3, 4}, 0.05, 0.95, 0.19);
#define U(op, in) PROBE(#op, [](const auto& a) { return op(a); }, in)
  U(neg, x); U(abs, x); U(sign, x); U(sgn, x); U(exp, x); U(exp2, x); U(expm1, x); U(log, p); U(log2, p);
  U(log1p, p); U(sqrt, p); U(rsqrt, p); U(sin, x); U(cos, x); U(tan, u); U(tanh, x); U(erf, x);
  U(reciprocal, p); U(log10, p); U(floor, x); U(ceil, x); U(round, x); U(trunc, x); U(fix, x); U(frac, x);
  U(square, x); U(positive, x); U(negative, x); U(absolute, x); U(atan, x); U(asin, u); U(acos, u);
  U(sinh, x); U(cosh, x); U(asinh, x); U(acosh, g1); U(atanh, u); U(deg2rad, x); U(rad2deg, x); U(sinc, x);
  U(logit, u01); U(isnan, x); U(isinf, x); U(isfinite, x); U(nan_to_num, x); U(logical_not, x);
  PROBE("logit(eps)", [](const auto& a) { return logit(a, 0.1); }, u01);
  std::printf("== pointwise binary\n");
  const M y = filled<2>({3, 4}, -1.7, 2.9, 0.41);
  const V b = filled<1>({4}, 0.3, 1.9, 0.23);  // broadcast operand, positive
#define B(op, a_, b_) PROBE(#op, [](const auto& a, const auto& c) { return op(a, c); }, a_, b_)
  B(add, x, y); B(sub, x, y); B(mul, x, y); B(div, x, b); B(remainder, x, b); B(fmod, x, b);
  B(floor_divide, x, b); B(pow, p, y); B(float_power, p, y); B(maximum, x, y); B(minimum, x, y); B(fmax, x, y);
  B(fmin, x, y); B(atan2, x, y); B(hypot, x, y); B(copysign, x, y); B(logaddexp, x, y); B(logaddexp2, x, y);
  B(xlogy, x, b); B(heaviside, x, y); B(rsub, x, y); B(eq, x, y); B(ne, x, y); B(lt, x, y); B(le, x, y);
  B(gt, x, y); B(ge, x, y); B(logical_and, x, y); B(logical_or, x, y); B(logical_xor, x, y);
  PROBE("pow(x, 2.5)", [](const auto& a) { return pow(abs(a) + 0.5, 2.5); }, x);
  PROBE("clamp", [](const auto& a) { return clamp(a, -1.0, 1.0); }, x);
  PROBE("clamp(tensors)", [](const auto& a, const auto& l) { return clamp(a, l, l + 1.0); }, x, y);
  PROBE("clamp_min", [](const auto& a) { return clamp_min(a, 0.5); }, x);
  PROBE("clamp_max", [](const auto& a) { return clamp_max(a, 0.5); }, x);
  PROBE("where", [](const auto& a, const auto& c) { return where(a > c, a, c * 2.0); }, x, y);
  PROBE("lerp", [](const auto& a, const auto& c, const auto& w) { return lerp(a, c, w); }, x, y, u01);
  PROBE("addcmul", [](const auto& a, const auto& c, const auto& w) { return addcmul(a, c, w, 0.7); }, x, y, u01);
  PROBE("addcdiv", [](const auto& a, const auto& c, const auto& w) { return addcdiv(a, c, w, 0.7); }, x, y, p);
  fd_h = 1e-2;  // float32 inside: linear, so a large step is exact
  PROBE("cast<float>", [](const auto& a) { return cast<double>(cast<float>(a) * 2.0f); }, x);
  PROBE("to<float>", [](const auto& a) { return eval(a).template to<float>(); }, x);
  fd_h = 1e-6;
  std::printf("== activations\n");
  U(relu, x); U(sigmoid, x); U(silu, x); U(gelu, x); U(hardtanh, x); U(relu6, M(x * 3.0)); U(leaky_relu, x); U(elu, x);
  U(selu, x); U(celu, x); U(softplus, x); U(mish, x); U(softsign, x); U(hardswish, x); U(hardsigmoid, x);
  U(logsigmoid, x); U(tanhshrink, x); U(softshrink, x); U(hardshrink, x);
  PROBE("gelu(tanh)", [](const auto& a) { return gelu(a, approximate_tanh); }, x);
  PROBE("glu<1>", [](const auto& a) { return glu<1>(a); }, x);
}
