// Elementwise ops, type promotion, broadcasting and casts, checked against PyTorch reference data
// (tests/reference/elementwise.txt, written by tests/reference/gen_elementwise.py).
#include <tenet/tenet.hpp>

#include "reference.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

using tenet::dyn;
using tenet::shape;
using tenet::Tensor;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;

namespace {

const char* const kFile = "elementwise.txt";

using bf16 = tenet::bfloat16;
using f16 = tenet::float16;

template <class T, class Expect, class Fn>
void check_unary(const std::string& name, Fn fn) {
  tenet_test::check_unary<T, Expect>(kFile, name, fn);
}

/// Runs fn on the case's 1-D inputs "a" (TA) and "b" (TB).
template <class TA, class TB, class Expect, class Fn>
void check_binary(const std::string& name, Fn fn) {
  INFO("case " << name);
  const auto& c = get_case(kFile, name);
  const Tensor<TA, shape<dyn>> a = make<TA, shape<dyn>>(c.at("a"));
  const Tensor<TB, shape<dyn>> b = make<TB, shape<dyn>>(c.at("b"));
  auto e = fn(a, b);
  using R = tenet::value_type_of<decltype(e)>;
  static_assert(std::is_same_v<R, Expect>, "unexpected result dtype");
  const Tensor<R, shape<dyn>> y = e;
  check_close(y, c.at("out"));
}

#define TENET_OP(NAME) [](const auto& x) { return tenet::NAME(x); }
#define TENET_OP2(NAME) [](const auto& a, const auto& b) { return tenet::NAME(a, b); }

// Floating types: every unary op keeps the dtype.
template <class T>
void all_unary(const std::string& tag) {
  check_unary<T, T>("unary_neg_" + tag, TENET_OP(neg));
  check_unary<T, T>("unary_abs_" + tag, TENET_OP(abs));
  check_unary<T, T>("unary_exp_" + tag, TENET_OP(exp));
  check_unary<T, T>("unary_exp2_" + tag, TENET_OP(exp2));
  check_unary<T, T>("unary_expm1_" + tag, TENET_OP(expm1));
  check_unary<T, T>("unary_log_" + tag, TENET_OP(log));
  check_unary<T, T>("unary_log2_" + tag, TENET_OP(log2));
  check_unary<T, T>("unary_log1p_" + tag, TENET_OP(log1p));
  check_unary<T, T>("unary_sqrt_" + tag, TENET_OP(sqrt));
  check_unary<T, T>("unary_rsqrt_" + tag, TENET_OP(rsqrt));
  check_unary<T, T>("unary_sin_" + tag, TENET_OP(sin));
  check_unary<T, T>("unary_cos_" + tag, TENET_OP(cos));
  check_unary<T, T>("unary_tan_" + tag, TENET_OP(tan));
  check_unary<T, T>("unary_tanh_" + tag, TENET_OP(tanh));
  check_unary<T, T>("unary_erf_" + tag, TENET_OP(erf));
  check_unary<T, T>("unary_floor_" + tag, TENET_OP(floor));
  check_unary<T, T>("unary_ceil_" + tag, TENET_OP(ceil));
  check_unary<T, T>("unary_round_" + tag, TENET_OP(round));
  check_unary<T, T>("unary_trunc_" + tag, TENET_OP(trunc));
  check_unary<T, T>("unary_sign_" + tag, TENET_OP(sign));
  check_unary<T, T>("unary_reciprocal_" + tag, TENET_OP(reciprocal));
  check_unary<T, T>("unary_square_" + tag, TENET_OP(square));
  check_unary<T, T>("unary_relu_" + tag, TENET_OP(relu));
  check_unary<T, T>("unary_sigmoid_" + tag, TENET_OP(sigmoid));
  check_unary<T, T>("unary_silu_" + tag, TENET_OP(silu));
  check_unary<T, T>("unary_gelu_" + tag, TENET_OP(gelu));
  check_unary<T, T>("unary_gelu_tanh_" + tag, [](const auto& x) { return tenet::gelu(x, tenet::approximate_tanh); });
}

template <class T>
void half_unary(const std::string& tag) {
  check_unary<T, T>("unary_neg_" + tag, TENET_OP(neg));
  check_unary<T, T>("unary_abs_" + tag, TENET_OP(abs));
  check_unary<T, T>("unary_exp_" + tag, TENET_OP(exp));
  check_unary<T, T>("unary_log_" + tag, TENET_OP(log));
  check_unary<T, T>("unary_sqrt_" + tag, TENET_OP(sqrt));
  check_unary<T, T>("unary_rsqrt_" + tag, TENET_OP(rsqrt));
  check_unary<T, T>("unary_sin_" + tag, TENET_OP(sin));
  check_unary<T, T>("unary_tanh_" + tag, TENET_OP(tanh));
  check_unary<T, T>("unary_erf_" + tag, TENET_OP(erf));
  check_unary<T, T>("unary_round_" + tag, TENET_OP(round));
  check_unary<T, T>("unary_floor_" + tag, TENET_OP(floor));
  check_unary<T, T>("unary_reciprocal_" + tag, TENET_OP(reciprocal));
  check_unary<T, T>("unary_relu_" + tag, TENET_OP(relu));
  check_unary<T, T>("unary_sigmoid_" + tag, TENET_OP(sigmoid));
  check_unary<T, T>("unary_silu_" + tag, TENET_OP(silu));
  check_unary<T, T>("unary_gelu_" + tag, TENET_OP(gelu));
  check_unary<T, T>("unary_gelu_tanh_" + tag, [](const auto& x) { return tenet::gelu(x, tenet::approximate_tanh); });
  check_unary<T, T>("unary_square_" + tag, TENET_OP(square));
}

}  // namespace

TEST_CASE("elementwise: unary ops on float32 edge values", "[elementwise]") { all_unary<float>("f32"); }

TEST_CASE("elementwise: unary ops on float64", "[elementwise]") { all_unary<double>("f64"); }

TEST_CASE("elementwise: unary ops on bfloat16", "[elementwise]") { half_unary<bf16>("bf16"); }

TEST_CASE("elementwise: unary ops on float16", "[elementwise]") { half_unary<f16>("f16"); }

TEST_CASE("elementwise: unary ops on int32 (floating ops promote to float32)", "[elementwise]") {
  using I = std::int32_t;
  check_unary<I, float>("unary_exp_i32", TENET_OP(exp));
  check_unary<I, float>("unary_log_i32", TENET_OP(log));
  check_unary<I, float>("unary_sqrt_i32", TENET_OP(sqrt));
  check_unary<I, float>("unary_sin_i32", TENET_OP(sin));
  check_unary<I, float>("unary_erf_i32", TENET_OP(erf));
  check_unary<I, float>("unary_tanh_i32", TENET_OP(tanh));
  check_unary<I, float>("unary_sigmoid_i32", TENET_OP(sigmoid));
  check_unary<I, float>("unary_reciprocal_i32", TENET_OP(reciprocal));
  check_unary<I, I>("unary_neg_i32", TENET_OP(neg));
  check_unary<I, I>("unary_abs_i32", TENET_OP(abs));
  check_unary<I, I>("unary_square_i32", TENET_OP(square));
  check_unary<I, I>("unary_sign_i32", TENET_OP(sign));
  check_unary<I, I>("unary_relu_i32", TENET_OP(relu));
  check_unary<I, I>("unary_floor_i32", TENET_OP(floor));
  check_unary<I, I>("unary_round_i32", TENET_OP(round));
}

TEST_CASE("elementwise: isnan, logical_not", "[elementwise]") {
  check_unary<float, bool>("isnan_f32", TENET_OP(isnan));
  check_unary<float, bool>("logical_not_f32", TENET_OP(logical_not));
  check_unary<float, bool>("logical_not_f32", [](const auto& x) { return !x; });
}

TEST_CASE("elementwise: binary ops on float32 edge values", "[elementwise]") {
  const auto& c0 = get_case(kFile, "binary_add_f32");
  const Tensor<float, shape<4, 6>> a = make<float, shape<4, 6>>(c0.at("a"));
  const Tensor<float, shape<4, 6>> b = make<float, shape<4, 6>>(c0.at("b"));
  auto run = [&]<class R>(const std::string& name, const auto& e) {
    INFO("case " << name);
    static_assert(std::is_same_v<tenet::value_type_of<std::remove_cvref_t<decltype(e)>>, R>);
    const Tensor<R, shape<4, 6>> y = e;
    check_close(y, get_case(kFile, name).at("out"));
  };
  run.operator()<float>("binary_add_f32", a + b);
  run.operator()<float>("binary_sub_f32", a - b);
  run.operator()<float>("binary_mul_f32", a * b);
  run.operator()<float>("binary_div_f32", a / b);
  run.operator()<float>("binary_pow_f32", tenet::pow(a, b));
  run.operator()<float>("binary_maximum_f32", tenet::maximum(a, b));
  run.operator()<float>("binary_minimum_f32", tenet::minimum(a, b));
  run.operator()<float>("binary_remainder_f32", a % b);
  run.operator()<float>("binary_fmod_f32", tenet::fmod(a, b));
  run.operator()<bool>("binary_eq_f32", a == b);
  run.operator()<bool>("binary_ne_f32", a != b);
  run.operator()<bool>("binary_lt_f32", a < b);
  run.operator()<bool>("binary_le_f32", a <= b);
  run.operator()<bool>("binary_gt_f32", a > b);
  run.operator()<bool>("binary_ge_f32", a >= b);
  run.operator()<bool>("binary_logical_and_f32", a && b);
  run.operator()<bool>("binary_logical_or_f32", a || b);
  run.operator()<bool>("binary_logical_xor_f32", tenet::logical_xor(a, b));
}

TEST_CASE("elementwise: binary ops on float64", "[elementwise]") {
  using D = double;
  check_binary<D, D, D>("binary_add_f64", TENET_OP2(add));
  check_binary<D, D, D>("binary_div_f64", TENET_OP2(div));
  check_binary<D, D, D>("binary_pow_f64", TENET_OP2(pow));
  check_binary<D, D, D>("binary_remainder_f64", TENET_OP2(remainder));
  check_binary<D, D, D>("binary_fmod_f64", TENET_OP2(fmod));
  check_binary<D, D, D>("binary_maximum_f64", TENET_OP2(maximum));
}

TEST_CASE("elementwise: integer binary ops, negative operands (remainder floors, fmod truncates)", "[elementwise]") {
  using I32 = std::int32_t;
  using I64 = std::int64_t;
  check_binary<I32, I64, I64>("binary_add_i32i64", TENET_OP2(add));
  check_binary<I32, I64, I64>("binary_sub_i32i64", TENET_OP2(sub));
  check_binary<I32, I64, I64>("binary_mul_i32i64", TENET_OP2(mul));
  check_binary<I32, I64, float>("binary_div_i32i64", TENET_OP2(div));
  check_binary<I32, I64, I64>("binary_maximum_i32i64", TENET_OP2(maximum));
  check_binary<I32, I64, I64>("binary_minimum_i32i64", TENET_OP2(minimum));
  check_binary<I32, I64, I64>("binary_remainder_i32i64", TENET_OP2(remainder));
  check_binary<I32, I64, I64>("binary_fmod_i32i64", TENET_OP2(fmod));
  check_binary<I32, I64, bool>("binary_lt_i32i64", TENET_OP2(lt));
  check_binary<I32, I64, bool>("binary_eq_i32i64", TENET_OP2(eq));
  check_binary<I32, I64, bool>("binary_ge_i32i64", TENET_OP2(ge));
  check_binary<I32, I64, I64>("binary_pow_i32i64", TENET_OP2(pow));
  // floor(a / b) equals torch.div(a, b, rounding_mode="floor") on these values
  check_binary<I32, I64, float>("binary_floordiv_i32i64", [](const auto& a, const auto& b) { return tenet::floor(a / b); });
  check_binary<I32, I32, I32>("binary_remainder_i32i32", [](const auto& a, const auto& b) { return a % b; });
  check_binary<I32, I32, float>("binary_div_i32i32", [](const auto& a, const auto& b) { return a / b; });
}

TEST_CASE("elementwise: float32 with int32 promotes to float32", "[elementwise]") {
  using I = std::int32_t;
  check_binary<float, I, float>("binary_add_f32i32", TENET_OP2(add));
  check_binary<float, I, float>("binary_mul_f32i32", TENET_OP2(mul));
  check_binary<float, I, float>("binary_div_f32i32", TENET_OP2(div));
  check_binary<float, I, float>("binary_remainder_f32i32", TENET_OP2(remainder));
  check_binary<float, I, float>("binary_fmod_f32i32", TENET_OP2(fmod));
  check_binary<float, I, float>("binary_pow_f32i32", TENET_OP2(pow));
  check_binary<float, I, float>("binary_maximum_f32i32", TENET_OP2(maximum));
  check_binary<float, I, bool>("binary_gt_f32i32", TENET_OP2(gt));
}

TEST_CASE("elementwise: broadcasting", "[elementwise]") {
  {
    const auto& c = get_case(kFile, "bcast_31_14");
    const auto a = make<float, shape<3, 1>>(c.at("a"));
    const auto b = make<float, shape<1, 4>>(c.at("b"));
    const Tensor<float, shape<3, 4>> add = a + b;
    const Tensor<float, shape<3, 4>> mul = a * b;
    const Tensor<float, shape<3, 4>> mx = tenet::maximum(a, b);
    const Tensor<bool, shape<3, 4>> lt = a < b;
    check_close(add, c.at("add"));
    check_close(mul, c.at("mul"));
    check_close(mx, c.at("max"));
    check_close(lt, c.at("lt"));
  }
  {
    const auto& c = get_case(kFile, "bcast_4_234");
    const auto a = make<float, shape<4>>(c.at("a"));
    const auto b = make<float, shape<2, 3, 4>>(c.at("b"));
    const Tensor<float, shape<2, 3, 4>> sub = a - b;
    const Tensor<float, shape<2, 3, 4>> div = b / a;
    const Tensor<float, shape<2, 3, 4>> pw = tenet::pow(tenet::abs(b), a);
    check_close(sub, c.at("sub"));
    check_close(div, c.at("div"));
    check_close(pw, c.at("pow"));
  }
}

TEST_CASE("elementwise: scalar operands", "[elementwise]") {
  const auto& c = get_case(kFile, "scalar_ops");
  const auto x = make<float, shape<2, 3>>(c.at("x"));
  const auto xi = make<std::int32_t, shape<2, 3>>(c.at("xi"));
  const auto d = make<std::int32_t, shape<2, 3>>(c.at("d"));
  auto vt = [](const auto& e) { return std::type_identity<tenet::value_type_of<std::remove_cvref_t<decltype(e)>>>{}; };
  static_assert(std::is_same_v<decltype(vt(x * 2.5))::type, float>);
  static_assert(std::is_same_v<decltype(vt(2 - x))::type, float>);
  static_assert(std::is_same_v<decltype(vt(xi / d))::type, float>);
  static_assert(std::is_same_v<decltype(vt(xi * 2.5))::type, float>);
  static_assert(std::is_same_v<decltype(vt(xi + 2))::type, std::int32_t>);
  static_assert(std::is_same_v<decltype(vt(xi % 3))::type, std::int32_t>);
  static_assert(std::is_same_v<decltype(vt(xi < 1.5))::type, bool>);
  check_close(Tensor<float, shape<2, 3>>(x * 2.5), c.at("mul25"));
  check_close(Tensor<float, shape<2, 3>>(2 - x), c.at("rsub2"));
  check_close(Tensor<float, shape<2, 3>>(xi / d), c.at("div_int"));
  check_close(Tensor<float, shape<2, 3>>(xi * 2.5), c.at("int_mul25"));
  check_close(Tensor<std::int32_t, shape<2, 3>>(xi + 2), c.at("int_add2"));
  check_close(Tensor<std::int32_t, shape<2, 3>>(xi % 3), c.at("int_rem3"));
  check_close(Tensor<std::int32_t, shape<2, 3>>(tenet::remainder(xi, -3)), c.at("int_rem_neg3"));
  check_close(Tensor<float, shape<2, 3>>(tenet::pow(x, 2)), c.at("pow2"));
  check_close(Tensor<float, shape<2, 3>>(tenet::pow(2.0, x)), c.at("rpow2"));
  check_close(Tensor<bool, shape<2, 3>>(xi < 1.5), c.at("int_lt15"));
  check_close(Tensor<float, shape<2, 3>>(x / 2), c.at("fdiv2"));
}

TEST_CASE("elementwise: non-contiguous inputs", "[elementwise]") {
  const auto& c = get_case(kFile, "noncontig");
  const auto x = make<float, shape<4, 6>>(c.at("x"));
  const auto y = make<float, shape<6, 4>>(c.at("y"));
  const auto xt = x.transpose<0, 1>();
  CHECK_FALSE(xt.is_contiguous());
  const Tensor<float, shape<6, 4>> tadd = xt + y;
  check_close(tadd, c.at("tadd"));
  const auto sl = x.slice<1>(0, 6, 2);
  CHECK_FALSE(sl.is_contiguous());
  const Tensor<float, shape<dyn, dyn>> slm = sl * 3.0;
  check_close(slm, c.at("sl"));
  const Tensor<float, shape<dyn, dyn>> slexp = tenet::exp(x.slice<0>(0, 4, 2).slice<1>(1, 6, 2));
  check_close(slexp, c.at("slexp"));
}

TEST_CASE("elementwise: dyn shapes and size-1 dims", "[elementwise]") {
  {
    const auto& c = get_case(kFile, "dyn");
    const auto x = make<float, shape<dyn, dyn>>(c.at("x"));
    const auto y = make<float, shape<dyn, dyn>>(c.at("y"));
    const Tensor<float, shape<dyn, dyn>> out = tenet::relu(x) * y - 1.0;
    check_close(out, c.at("out"));
    const Tensor<float, shape<dyn, dyn>> bc = x + y.slice<0>(0, 1);
    check_close(bc, c.at("bc"));
  }
  {
    const auto& c = get_case(kFile, "size1");
    const auto u = make<float, shape<1, 1, 4>>(c.at("u"));
    const auto v = make<float, shape<1, 3, 1>>(c.at("v"));
    const auto w = make<float, shape<3, 1, 1>>(c.at("w"));
    const Tensor<float, shape<1, 3, 4>> uv = u * v;
    const Tensor<float, shape<3, 3, 4>> uvw = u + v + w;
    const Tensor<float, shape<3, 1, 1>> ew = tenet::exp(w);
    check_close(uv, c.at("uv"));
    check_close(uvw, c.at("uvw"));
    check_close(ew, c.at("expw"));
  }
}

TEST_CASE("elementwise: empty tensor", "[elementwise]") {
  const auto& c = get_case(kFile, "empty");
  const auto x = make<float, shape<0, 3>>(c.at("x"));
  const Tensor<float, shape<0, 3>> out = tenet::exp(x) + x;
  CHECK(out.numel() == 0);
  check_close(out, c.at("out"));
}

TEST_CASE("elementwise: fused chain gelu(x * a + b) * c", "[elementwise]") {
  const auto& c = get_case(kFile, "fused_chain");
  const auto x = make<float, shape<5, 7>>(c.at("x"));
  const auto a = make<float, shape<7>>(c.at("a"));
  const auto b = make<float, shape<5, 1>>(c.at("b"));
  const auto cc = make<float, shape<5, 7>>(c.at("c"));
  const Tensor<float, shape<5, 7>> out = tenet::gelu(x * a + b) * cc;
  check_close(out, c.at("out"));
  const Tensor<float, shape<5, 7>> out_tanh = tenet::gelu(x * a + b, tenet::approximate_tanh) * cc;
  check_close(out_tanh, c.at("out_tanh"));
}

TEST_CASE("elementwise: where and clamp", "[elementwise]") {
  {
    const auto& c = get_case(kFile, "where");
    const auto cond = make<bool, shape<2, 3>>(c.at("c"));
    const auto a = make<float, shape<2, 3>>(c.at("a"));
    const auto b = make<std::int32_t, shape<2, 3>>(c.at("b"));
    const auto row = make<float, shape<3>>(c.at("row"));
    auto e = tenet::where(cond, a, b);
    static_assert(std::is_same_v<tenet::value_type_of<decltype(e)>, float>);
    check_close(Tensor<float, shape<2, 3>>(e), c.at("out"));
    check_close(Tensor<float, shape<2, 3>>(tenet::where(cond, a, 0.5)), c.at("out_scalar"));
    check_close(Tensor<float, shape<2, 3>>(tenet::where(cond, row, a)), c.at("out_bcast"));
    check_close(Tensor<float, shape<2, 3>>(tenet::where(a > 2.5, a, -a)), c.at("out_cmp"));
  }
  {
    const auto& c = get_case(kFile, "clamp");
    const auto x = make<float, shape<10>>(c.at("x"));
    const auto lo = make<float, shape<10>>(c.at("lo"));
    const auto hi = make<float, shape<10>>(c.at("hi"));
    const auto xi = make<std::int32_t, shape<10>>(c.at("xi"));
    check_close(Tensor<float, shape<10>>(tenet::clamp(x, -1.0, 1.0)), c.at("scal"));
    check_close(Tensor<float, shape<10>>(tenet::clamp(x, lo, hi)), c.at("tens"));
    check_close(Tensor<float, shape<10>>(tenet::clamp_min(x, 0.25)), c.at("cmin"));
    check_close(Tensor<float, shape<10>>(tenet::clamp_max(x, 0.25)), c.at("cmax"));
    auto ei = tenet::clamp(xi, -2, 4);
    static_assert(std::is_same_v<tenet::value_type_of<decltype(ei)>, std::int32_t>);
    check_close(Tensor<std::int32_t, shape<10>>(ei), c.at("int_scal"));
    auto ef = tenet::clamp(xi, -2.5, 4.5);
    static_assert(std::is_same_v<tenet::value_type_of<decltype(ef)>, float>);
    check_close(Tensor<float, shape<10>>(ef), c.at("int_float"));
  }
}

TEST_CASE("elementwise: mixed dtype promotion", "[elementwise]") {
  const auto& c = get_case(kFile, "promote");
  using S = shape<6>;
  const auto i8 = make<std::int8_t, S>(c.at("i8"));
  const auto u8 = make<std::uint8_t, S>(c.at("u8"));
  const auto h16 = make<f16, S>(c.at("h16"));
  const auto b16 = make<bf16, S>(c.at("b16"));
  const auto bl1 = make<bool, S>(c.at("bl1"));
  const auto bl2 = make<bool, S>(c.at("bl2"));
  const auto ii = make<std::int32_t, S>(c.at("ii"));
  const auto z64 = make<double, shape<>>(c.at("z64"));
  Tensor<float, shape<>> two(tenet::sizes_t<0>{});
  two.fill_(2.0f);

  auto e1 = i8 + u8;
  static_assert(std::is_same_v<tenet::value_type_of<decltype(e1)>, std::int16_t>);
  check_close(Tensor<std::int16_t, S>(e1), c.at("i8u8"));
  auto e2 = h16 + b16;
  static_assert(std::is_same_v<tenet::value_type_of<decltype(e2)>, float>);
  check_close(Tensor<float, S>(e2), c.at("h16b16"));
  auto e3 = bl1 + bl2;
  static_assert(std::is_same_v<tenet::value_type_of<decltype(e3)>, bool>);
  check_close(Tensor<bool, S>(e3), c.at("blbl"));
  auto e4 = bl1 * bl2;
  static_assert(std::is_same_v<tenet::value_type_of<decltype(e4)>, bool>);
  check_close(Tensor<bool, S>(e4), c.at("blmul"));
  auto e5 = ii + z64;  // a float64 zero-dim tensor is of a higher category: result float64
  static_assert(std::is_same_v<tenet::value_type_of<decltype(e5)>, double>);
  check_close(Tensor<double, S>(e5), c.at("ii_z64"));
  auto e6 = ii * z64;
  static_assert(std::is_same_v<tenet::value_type_of<decltype(e6)>, double>);
  check_close(Tensor<double, S>(e6), c.at("ii_z64_mul"));
  auto e7 = h16 * two;  // same category: the dimensioned tensor's dtype wins
  static_assert(std::is_same_v<tenet::value_type_of<decltype(e7)>, f16>);
  check_close(Tensor<f16, S>(e7), c.at("h16_f32_zero"));
  auto e8 = bl1 + i8;
  static_assert(std::is_same_v<tenet::value_type_of<decltype(e8)>, std::int8_t>);
  check_close(Tensor<std::int8_t, S>(e8), c.at("bl_i8"));
}

TEST_CASE("elementwise: casts", "[elementwise]") {
  const auto& c = get_case(kFile, "cast");
  const auto f = make<float, shape<dyn>>(c.at("f"));
  const auto bsrc = make<float, shape<dyn>>(c.at("bsrc"));
  const auto bfsrc = make<float, shape<dyn>>(c.at("bfsrc"));
  const auto d = make<double, shape<dyn>>(c.at("d"));
  // float -> int truncates toward zero
  check_close(Tensor<std::int32_t, shape<dyn>>(tenet::cast<std::int32_t>(f)), c.at("to_i32"));
  check_close(Tensor<std::int64_t, shape<dyn>>(tenet::cast<std::int64_t>(f)), c.at("to_i64"));
  check_close(Tensor<std::int32_t, shape<dyn>>(tenet::cast<std::int32_t>(d)), c.at("d_to_i32"));
  check_close(Tensor<std::int32_t, shape<dyn>>(f.to<std::int32_t>()), c.at("to_i32"));
  // nonzero (nan included) -> true
  check_close(Tensor<bool, shape<dyn>>(tenet::cast<bool>(bsrc)), c.at("to_bool"));
  // round to nearest even, exact
  check_close(Tensor<bf16, shape<dyn>>(tenet::cast<bf16>(bfsrc)), c.at("to_bf16"), 0.0, 0.0);
  check_close(Tensor<f16, shape<dyn>>(tenet::cast<f16>(bfsrc)), c.at("to_f16"), 0.0, 0.0);
  const auto& p = get_case(kFile, "promote");
  const auto bl = make<bool, shape<dyn>>(p.at("bl1"));
  const auto i8 = make<std::int8_t, shape<dyn>>(p.at("i8"));
  check_close(Tensor<float, shape<dyn>>(tenet::cast<float>(bl)), c.at("bool_to_f"));
  check_close(Tensor<float, shape<dyn>>(tenet::cast<float>(i8)), c.at("i8_to_f"));
}

TEST_CASE("elementwise: runtime broadcast mismatch throws shape_error naming both shapes", "[elementwise]") {
  const Tensor<float, shape<dyn, dyn>> a = tenet::zeros<float, shape<dyn, dyn>>(2, 3);
  const Tensor<float, shape<dyn, dyn>> b = tenet::zeros<float, shape<dyn, dyn>>(4, 3);
  bool thrown = false;
  try {
    const Tensor<float, shape<dyn, dyn>> r = a + b;
    (void)r;
  } catch (const tenet::shape_error& e) {
    thrown = true;
    const std::string msg = e.what();
    INFO("message: " << msg);
    CHECK(msg.find("shape<2, 3>") != std::string::npos);
    CHECK(msg.find("shape<4, 3>") != std::string::npos);
  }
  CHECK(thrown);
  using T2 = Tensor<float, shape<dyn, dyn>>;
  CHECK_THROWS_AS(T2(a * b + 1.0f), tenet::shape_error);
}
