#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The builders the ATen-level ops (include/tenet/*.hpp) and the composites' decompositions
// (decomp/*.hpp) share: torch's type promotion (promoted_t, cast_to), the float type of
// floating-only ops, reduction nodes, and gelu's half-precision normal CDF.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <tenet/dtype.hpp>
#include <tenet/expr/node.hpp>
#include <tenet/prims/elementwise.hpp>
#include <tenet/prims/reduce.hpp>
#include <tenet/tensor.hpp>

namespace tenet {
namespace detail {

template <class A, bool IsExpr = Expression<A>>
struct promotion_operand;
template <class A>
struct promotion_operand<A, true> {
  using type = std::conditional_t<rank_of<A> == 0, zero_dim_operand<value_type_of<A>>, tensor_operand<value_type_of<A>>>;
};
template <class A>
struct promotion_operand<A, false> {
  using type = scalar_operand<std::remove_cvref_t<A>>;
};
/// torch.result_type of the arguments (expressions and C++ numbers).
template <class... A>
using promoted_t = result_type_t<typename promotion_operand<std::remove_cvref_t<A>>::type...>;

/// The expression e with element type To (a cast prim when the type differs).
template <class To, class E>
auto cast_to(const E& e) {
  if constexpr (!Expression<E>) {
    if constexpr (std::is_same_v<To, bool>)
      return scalar<To>{static_cast<double>(e) != 0.0};
    else
      return scalar<To>{static_cast<To>(e)};
  } else if constexpr (std::is_same_v<value_type_of<E>, To>) {
    return e;
  } else if constexpr (ScalarLeaf<E>) {
    return scalar<To>{prim::convert_element_type_<To>::apply(e.value)};
  } else {
    return make_node(prim::convert_element_type_<To>{}, e);
  }
}

/// The float type a floating-only op computes in: float types stay, others become float32.
template <class T>
using floating_t = std::conditional_t<is_floating_v<T>, T, float>;

template <class P, class X>
auto float_unary(const X& x) {
  return make_node(P{}, cast_to<floating_t<value_type_of<X>>>(x));
}
template <class P, class X>
auto same_unary(const X& x) {
  return make_node(P{}, x);
}
template <class P, class A, class B>
auto promoted_binary(const A& a, const B& b) {
  using T = promoted_t<A, B>;
  return make_node(P{}, cast_to<T>(a), cast_to<T>(b));
}

template <class A, class B>
concept binary_args = (Expression<A> || Expression<B>) && ExprOrScalar<A> && ExprOrScalar<B>;

/// The standard normal CDF Phi(x) in float, for gelu on bfloat16 / float16: Phi(-|x|) is
/// 2^q(|x|) with q a degree-7 polynomial (|x| clamped to 6; Phi(-6) = 1e-9 and below is taken as
/// 0), a least-squares fit (reweighted toward minimax) to log2 Phi(-t) on [0, 6] made for tenet,
/// checked against 30-digit values: max relative error 6.4e-6 (2^-17, under a tenth of a float16
/// ulp). On the GPU it is branch-free, 8 FMAs and one ex2.approx, where erff takes about twice the
/// instructions and a branch: with it gelu(x*a+b)*c on bf16 stopped being bound by arithmetic
/// (docs/cuda.md). Near x = -5.5, where 1 + erff(x / sqrt 2) cancels to 0 in float, it gives the
/// small true value where PyTorch gives 0.
TENET_HOST_DEVICE TENET_INLINE float normal_cdf_half(float x) {
  const float a = std::fabs(x), t = std::fmin(a, 6.0f);
  float q = -1.793850515e-06f;  // q(0) = -1 exactly: Phi(0) = 1/2, gelu(x) = x / 2 for tiny x
  q = q * t + 6.072793985e-05f;
  q = q * t - 9.232023731e-04f;
  q = q * t + 8.476920426e-03f;
  q = q * t - 5.389109254e-02f;
  q = q * t - 4.585414529e-01f;
  q = q * t - 1.151214361e+00f;
  q = q * t - 1.0f;
#if defined(__CUDA_ARCH__)
  float h;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(h) : "f"(q));
#else
  float h = std::exp2(q);
#endif
  if (a > 6.0f) h = 0.0f;
  return x > 0.0f ? 1.0f - h : h;
}

}  // namespace detail

namespace detail {
template <class Kind, bool Keep, auto... D, class X>
auto reduce(const X& x) {
  return make_node(prim::reduce_<Kind, Keep, D...>{}, x);
}
template <class X, auto... D>
std::int64_t reduced_count(const X& x) {
  const auto s = x.sizes();
  constexpr auto mask = reduce_dims<shape_of<X>, D...>::mask;
  std::int64_t n = 1;
  for (std::size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) n *= s[i];
  return n;
}
}  // namespace detail
}  // namespace tenet
