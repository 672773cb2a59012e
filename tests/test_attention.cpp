// scaled_dot_product_attention against PyTorch (reference/attention.txt, gen_attention.py): every
// variant on every case it is eligible for (bool and additive masks, causal with L != S,
// grouped-query attention, lengths across the CPU kernel's blocks, head dims 16 to 128, float32,
// float64, bfloat16, float16), strided operands, the selection and its errors, dropout.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;

namespace {
const std::string kFile = "attention.txt";

template <class T>
std::pair<double, double> tolerance() {
  if constexpr (std::is_same_v<T, float>) return {2e-5, 2e-5};
  else if constexpr (std::is_same_v<T, double>) return {1e-10, 1e-10};
  else if constexpr (std::is_same_v<T, bfloat16>) return {2e-2, 2e-2};
  else return {4e-3, 4e-3};
}

sdpa_options options_of(const tenet_test::ref_case& c) {
  sdpa_options o;
  o.is_causal = c.at("causal").values[0] != 0;
  o.enable_gqa = c.at("gqa").values[0] != 0;
  if (c.at("scale").values[0] > 0) o.scale = c.at("scale").values[0];
  return o;
}

/// The same values with the heads and the rows swapped in memory (q as the transpose of a
/// (batch, L, heads, E) tensor, as a module's projections give it): strides the kernel must follow.
template <class T, class S>
Tensor<T, S> strided(const Tensor<T, S>& x) {
  constexpr std::size_t R = S::rank;
  if constexpr (R < 3) {
    return x.transpose(0, 1).contiguous().transpose(0, 1);
  } else {
    return x.transpose(R - 3, R - 2).contiguous().transpose(R - 3, R - 2);
  }
}

/// Runs case `name` with each variant in `variants` (the others disabled) and checks the output.
template <class T, std::size_t R>
void run_case(const std::string& name, std::initializer_list<sdpa_backend> variants) {
  using S = dyn_shape<R>;
  const auto& c = get_case(kFile, name);
  const auto q = make<T, S>(c.at("q")), k = make<T, S>(c.at("k")), v = make<T, S>(c.at("v"));
  const auto o = options_of(c);
  const auto [rtol, atol] = tolerance<T>();
  for (auto b : variants) {
    INFO(name << " variant " << sdpa_backend_name(b));
    sdpa_kernel only({b});
    for (int layout = 0; layout < 2; ++layout) {
      INFO("layout " << (layout ? "strided" : "contiguous"));
      const auto qq = layout ? strided(q) : q, kk = layout ? strided(k) : k, vv = layout ? strided(v) : v;
      if (!c.count("mask")) {
        check_close(Tensor<T, S>(scaled_dot_product_attention(qq, kk, vv, o)), c.at("out"), rtol, atol);
        continue;
      }
      // the mask as stored: bool or T, rank 2 (broadcast over the batch) or R
      auto with_mask = [&](auto element) {
        using MT = decltype(element);
        if (c.at("mask").sizes.size() == 2) {
          const auto m = make<MT, dyn_shape<2>>(c.at("mask"));
          check_close(Tensor<T, S>(scaled_dot_product_attention(qq, kk, vv, m, o)), c.at("out"), rtol, atol);
        } else {
          const auto m = make<MT, S>(c.at("mask"));
          check_close(Tensor<T, S>(scaled_dot_product_attention(qq, kk, vv, m, o)), c.at("out"), rtol, atol);
        }
      };
      if (c.at("mask").dtype == "bool")
        with_mask(bool{});
      else
        with_mask(T{});
    }
  }
}

constexpr auto flash = sdpa_backend::flash;
constexpr auto mem = sdpa_backend::memory_efficient;
constexpr auto math = sdpa_backend::math;
}  // namespace

TEST_CASE("sdpa: every variant against torch, float32 and float64", "[attention]") {
  for (const char* n : {"basic", "causal_square", "causal_long_q", "causal_long_k", "blocks", "blocks_causal", "gqa",
                        "gqa_causal", "scale", "e64", "e80", "empty_keys"}) {
    run_case<float, 4>(std::string(n) + "_f32", {flash, mem, math});
  }
  for (const char* n : {"bool_mask", "bool_mask_2d", "float_mask", "float_mask_bcast", "gqa_mask", "e128"})
    run_case<float, 4>(std::string(n) + "_f32", {mem, math});
  run_case<double, 4>("basic_f64", {flash, mem, math});
  run_case<double, 4>("gqa_f64", {flash, mem, math});
  run_case<double, 4>("float_mask_f64", {mem, math});
  run_case<float, 3>("rank3_f32", {flash, mem, math});
  run_case<float, 2>("rank2_f32", {flash, mem, math});
  run_case<float, 5>("rank5_f32", {mem, math});
}

TEST_CASE("sdpa: bfloat16 and float16 (float accumulation)", "[attention]") {
  run_case<bfloat16, 4>("half_bf16", {flash, mem, math});
  run_case<float16, 4>("half_f16", {flash, mem, math});
  run_case<bfloat16, 4>("half_mask_bf16", {mem, math});
  run_case<float16, 4>("half_mask_f16", {mem, math});
}

TEST_CASE("sdpa: static shapes, the forced variant and the result type", "[attention]") {
  const auto& c = get_case(kFile, "basic_f32");
  using Q = shape<2, 3, 5, 16>;
  using K = shape<2, 3, 7, 16>;
  using V = shape<2, 3, 7, 8>;
  const auto q = make<float, Q>(c.at("q"));
  const auto k = make<float, K>(c.at("k"));
  const auto v = make<float, V>(c.at("v"));
  auto y = scaled_dot_product_attention<sdpa::flash>(q, k, v);
  static_assert(std::is_same_v<shape_of<decltype(y)>, shape<2, 3, 5, 8>>);
  static_assert(std::is_same_v<value_type_of<decltype(y)>, float>);
  check_close(Tensor<float, shape<2, 3, 5, 8>>(y), c.at("out"), 2e-5, 2e-5);
  check_close(Tensor<float, shape<2, 3, 5, 8>>(scaled_dot_product_attention<sdpa::memory_efficient>(q, k, v)), c.at("out"),
              2e-5, 2e-5);
  check_close(Tensor<float, shape<2, 3, 5, 8>>(scaled_dot_product_attention<sdpa::math>(q, k, v)), c.at("out"), 2e-5, 2e-5);
  // a lazy operand: the projection is evaluated before the kernel reads it
  check_close(Tensor<float, shape<2, 3, 5, 8>>(scaled_dot_product_attention(q * 1.0f, k + 0.0f, v)), c.at("out"), 2e-5, 2e-5);
}

TEST_CASE("sdpa: selection, explain and the errors that list every variant's reason", "[attention]") {
  const auto q = randn<float, dyn_shape<4>>(1, 2, 4, 8);
  const auto k = randn<float, dyn_shape<4>>(1, 2, 6, 8);
  const auto v = randn<float, dyn_shape<4>>(1, 2, 6, 8);
  const auto mask = randn<float, dyn_shape<2>>(4, 6);
  CHECK_THAT(explain(scaled_dot_product_attention(q, k, v)), Catch::Contains("variant: flash"));
  CHECK_THAT(explain(scaled_dot_product_attention(q, k, v, mask)),
             Catch::Contains("variant: memory_efficient (passed over: flash: an attn_mask is given"));
  {
    sdpa_kernel only({math});
    const auto text = explain(scaled_dot_product_attention(q, k, v));
    CHECK_THAT(text, Catch::Contains("variant: math (passed over: flash: not enabled (sdpa_kernel); "
                                     "memory_efficient: not enabled (sdpa_kernel))"));
  }
  // the set is the one of when the expression was written
  auto written = [&] {
    sdpa_kernel only({flash});
    return scaled_dot_product_attention(q, k, v, mask);
  }();
  try {
    Tensor<float, dyn_shape<4>> y = written;
    FAIL("no variant should run");
  } catch (const value_error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("no variant can run these arguments on cpu_simd"));
    CHECK_THAT(what, Catch::Contains("flash: an attn_mask is given"));
    CHECK_THAT(what, Catch::Contains("memory_efficient: not enabled (sdpa_kernel)"));
    CHECK_THAT(what, Catch::Contains("math: not enabled (sdpa_kernel)"));
  }
  // dropout: the tiled kernels have it too
  CHECK_THAT(explain(scaled_dot_product_attention(q, k, v, {.dropout_p = 0.2})), Catch::Contains("variant: flash"));
  // integer inputs have no kernel: a compile error (compile_fail tests); mask and causal together
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k, v, mask, {.is_causal = true}), value_error);
}

TEST_CASE("sdpa: run-time shape errors name the sizes", "[attention]") {
  const auto q = randn<float, dyn_shape<4>>(1, 4, 4, 8);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, randn<float, dyn_shape<4>>(1, 4, 6, 7), randn<float, dyn_shape<4>>(1, 4, 6, 8)),
                    Catch::Contains("the last dims of q and k (E) differ") && Catch::Contains("k shape<1, 4, 6, 7>"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, randn<float, dyn_shape<4>>(1, 4, 6, 8), randn<float, dyn_shape<4>>(1, 4, 5, 8)),
                    Catch::Contains("k and v have different lengths S"));
  const auto k2 = randn<float, dyn_shape<4>>(1, 2, 6, 8), v2 = randn<float, dyn_shape<4>>(1, 2, 6, 8);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k2, v2), Catch::Contains("pass enable_gqa = true"));
  const auto k3 = randn<float, dyn_shape<4>>(1, 3, 6, 8), v3 = randn<float, dyn_shape<4>>(1, 3, 6, 8);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k3, v3, {.enable_gqa = true}), Catch::Contains("a multiple of k's (3)"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k2, v2, randn<float, dyn_shape<2>>(4, 5), {.enable_gqa = true}),
                    Catch::Contains("does not broadcast to the scores' sizes"));
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k2, v2, {.dropout_p = 1.5}), value_error);
}

TEST_CASE("sdpa: dropout (the math variant) is reproducible and scales what it keeps", "[attention]") {
  const auto q = randn<float, dyn_shape<4>>(2, 2, 64, 8);
  const auto k = randn<float, dyn_shape<4>>(2, 2, 64, 8);
  const auto v = ones<float, dyn_shape<4>>(2, 2, 64, 8);
  manual_seed(7);
  const Tensor<float, dyn_shape<4>> a = scaled_dot_product_attention(q, k, v, {.dropout_p = 0.3});
  manual_seed(7);
  const Tensor<float, dyn_shape<4>> b = scaled_dot_product_attention(q, k, v, {.dropout_p = 0.3});
  CHECK(eval(amax(abs(a - b))).item() == 0.0f);
  const Tensor<float, dyn_shape<4>> c = scaled_dot_product_attention(q, k, v, {.dropout_p = 0.3});
  CHECK(eval(amax(abs(a - c))).item() > 0.0f);
  // v = 1: each output is the kept weights' sum / (1 - p), 1 on average
  const double avg = eval(mean(a)).item();
  CHECK(avg > 0.9);
  CHECK(avg < 1.1);
  const Tensor<float, dyn_shape<4>> z = scaled_dot_product_attention(q, k, v, {.dropout_p = 1.0});
  CHECK(eval(amax(abs(z))).item() == 0.0f);
}

namespace {
/// max |a - b| <= tol (1 + max |b|)
template <class S>
void check_agree(const Tensor<float, S>& a, const Tensor<float, S>& b, double tol = 2e-5) {
  const double diff = eval(amax(abs(a - b))).item();
  const double scale = eval(amax(abs(b))).item();
  INFO("max difference " << diff << ", max magnitude " << scale);
  CHECK(diff <= tol * (1.0 + scale));
}
}  // namespace

TEST_CASE("sdpa: dropout in the tiled kernels draws the math variant's mask", "[attention]") {
  using S4 = dyn_shape<4>;
  manual_seed(5);
  const auto q = randn<float, S4>(2, 4, 150, 16), k = randn<float, S4>(2, 2, 700, 16), v = randn<float, S4>(2, 2, 700, 8);
  const Tensor<bool, dyn_shape<2>> keep = rand<float, dyn_shape<2>>(150, 700) > 0.3f;
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    const sdpa_options o{.is_causal = causal, .dropout_p = 0.25, .enable_gqa = true};
    manual_seed(11);
    const Tensor<float, S4> want = scaled_dot_product_attention<sdpa::math>(q, k, v, o);
    manual_seed(11);
    check_agree(Tensor<float, S4>(scaled_dot_product_attention<sdpa::flash>(q, k, v, o)), want);
    manual_seed(11);
    check_agree(Tensor<float, S4>(scaled_dot_product_attention<sdpa::memory_efficient>(q, k, v, o)), want);
  }
  manual_seed(12);
  const Tensor<float, S4> want = scaled_dot_product_attention<sdpa::math>(q, k, v, keep, {.dropout_p = 0.5, .enable_gqa = true});
  manual_seed(12);
  check_agree(Tensor<float, S4>(scaled_dot_product_attention<sdpa::memory_efficient>(q, k, v, keep,
                                                                                     {.dropout_p = 0.5, .enable_gqa = true})),
              want);
}

TEST_CASE("sdpa: the tiled kernel agrees with math across many blocks (120 queries, 480 keys), K and V packed per "
          "head and per block",
          "[attention]") {
  // the forward packs a whole key/value head, or (attn_pack_head_limit = 0: as for long keys) each
  // block of keys as it reaches it
  const std::int64_t limit = detail::cpu::attn_pack_head_limit;
  struct restore {
    std::int64_t v;
    ~restore() { detail::cpu::attn_pack_head_limit = v; }
  } restore_limit{limit};
  for (std::int64_t packing : {limit, std::int64_t(0)}) {
    INFO("pack head limit " << packing);
    detail::cpu::attn_pack_head_limit = packing;
    using S4 = dyn_shape<4>;
    manual_seed(3);
    const auto q = randn<float, S4>(2, 3, 300, 24), k = randn<float, S4>(2, 3, 1100, 24), v = randn<float, S4>(2, 3, 1100, 16);
    for (bool causal : {false, true}) {
      INFO("causal " << causal);
      const Tensor<float, S4> want = scaled_dot_product_attention<sdpa::math>(q, k, v, {.is_causal = causal});
      check_agree(Tensor<float, S4>(scaled_dot_product_attention<sdpa::flash>(q, k, v, {.is_causal = causal})), want);
      check_agree(Tensor<float, S4>(scaled_dot_product_attention<sdpa::memory_efficient>(q, k, v, {.is_causal = causal})), want);
    }
    // a bool mask with a row that sees no key, and an additive one broadcast over the batch
    Tensor<bool, dyn_shape<2>> keep = rand<float, dyn_shape<2>>(300, 1100) > 0.2f;
    for (std::int64_t j = 0; j < 1100; ++j) keep.data()[7 * 1100 + j] = false;
    check_agree(Tensor<float, S4>(scaled_dot_product_attention<sdpa::memory_efficient>(q, k, v, keep)),
                Tensor<float, S4>(scaled_dot_product_attention<sdpa::math>(q, k, v, keep)));
    const auto bias = randn<float, S4>(1, 3, 300, 1100);
    check_agree(Tensor<float, S4>(scaled_dot_product_attention<sdpa::memory_efficient>(q, k, v, bias)),
                Tensor<float, S4>(scaled_dot_product_attention<sdpa::math>(q, k, v, bias)));
    // grouped-query: 6 query heads over 3 key/value heads, causal with L > S
    const auto q6 = randn<float, S4>(2, 6, 700, 24);
    check_agree(Tensor<float, S4>(scaled_dot_product_attention<sdpa::flash>(q6, k.template narrow<2>(0, 600), v.template narrow<2>(0, 600),
                                                                            {.is_causal = true, .enable_gqa = true})),
                Tensor<float, S4>(scaled_dot_product_attention<sdpa::math>(q6, k.template narrow<2>(0, 600), v.template narrow<2>(0, 600),
                                                                           {.is_causal = true, .enable_gqa = true})));
    // bfloat16 (converted as it is packed), causal with L < S: the causal end cuts a packed chunk
    const auto qb = q.template to<bfloat16>(), kb = k.template to<bfloat16>(), vb = v.template to<bfloat16>();
    for (bool causal : {false, true}) {
      INFO("bfloat16, causal " << causal);
      const Tensor<float, S4> want = scaled_dot_product_attention<sdpa::math>(qb.template to<float>(), kb.template to<float>(),
                                                                              vb.template to<float>(), {.is_causal = causal});
      const Tensor<bfloat16, S4> got = scaled_dot_product_attention<sdpa::flash>(qb, kb, vb, {.is_causal = causal});
      check_agree(Tensor<float, S4>(got.template to<float>()), want, 1e-2);
    }
  }
}
