// Gradients of scaled_dot_product_attention: against PyTorch's (reference/attention.txt: q, k, v
// and an additive mask, for sum(out * w)) with each variant running the forward, against central
// finite differences in float64, and the forward-mode tangent against the reverse mode.
#include <cmath>
#include <string>

#include <catch2/catch.hpp>

#include <tenet/tenet.hpp>

#include "gradcheck.hpp"
#include "reference.hpp"

using namespace tenet;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;

namespace {
const std::string kFile = "attention.txt";

template <class T, std::size_t R>
void grad_case(const std::string& name, sdpa_backend variant) {
  using S = dyn_shape<R>;
  const auto& c = get_case(kFile, name);
  INFO(name << " forward by " << sdpa_backend_name(variant));
  sdpa_kernel only({variant});
  auto q = make<T, S>(c.at("q")), k = make<T, S>(c.at("k")), v = make<T, S>(c.at("v"));
  q.requires_grad_(), k.requires_grad_(), v.requires_grad_();
  const auto w = make<T, S>(c.at("w"));
  sdpa_options o;
  o.is_causal = c.at("causal").values[0] != 0;
  o.enable_gqa = c.at("gqa").values[0] != 0;
  if (c.at("scale").values[0] > 0) o.scale = c.at("scale").values[0];
  // bf16 / f16: torch's CPU kernels also accumulate in float; the two differ by the roundings to
  // the 16-bit dtype of the intermediate results (out, dP, ...), a few units of its precision
  const double tol = std::is_same_v<T, float>      ? 2e-5
                     : std::is_same_v<T, double>   ? 1e-10
                     : std::is_same_v<T, bfloat16> ? 4e-2
                                                   : 5e-3;
  if (c.count("mask") && c.at("mask").dtype == "bool") {  // rank 2 (L, S) or R
    auto run = [&]<std::size_t Rm>(std::integral_constant<std::size_t, Rm>) {
      const auto m = make<bool, dyn_shape<Rm>>(c.at("mask"));
      Tensor<T, S> y = scaled_dot_product_attention(q, k, v, m, o);
      Tensor<T, shape<>> loss = sum(y * w);
      loss.backward();
    };
    if (c.at("mask").sizes.size() == 2) run(std::integral_constant<std::size_t, 2>{});
    else run(std::integral_constant<std::size_t, R>{});
  } else if (c.count("mask")) {
    auto m = make<T, S>(c.at("mask"));
    m.requires_grad_();
    Tensor<T, S> y = scaled_dot_product_attention(q, k, v, m, o);
    Tensor<T, shape<>> loss = sum(y * w);
    loss.backward();
    check_close(m.grad(), c.at("dmask"), tol, tol);
  } else {
    Tensor<T, S> y = scaled_dot_product_attention(q, k, v, o);
    Tensor<T, shape<>> loss = sum(y * w);
    loss.backward();
  }
  check_close(q.grad(), c.at("dq"), tol, tol);
  check_close(k.grad(), c.at("dk"), tol, tol);
  check_close(v.grad(), c.at("dv"), tol, tol);
}
}  // namespace

TEST_CASE("autograd sdpa: gradients against torch, the forward by each variant", "[autograd][attention]") {
  // the tiled backward with whole rows of P, then by key blocks (attn_backward_full_keys = 0)
  const std::int64_t full_keys = detail::cpu::attn_backward_full_keys;
  for (std::int64_t limit : {full_keys, std::int64_t{0}}) {
    INFO("backward by key blocks " << (limit == 0));
    detail::cpu::attn_backward_full_keys = limit;
    for (auto b : {sdpa_backend::flash, sdpa_backend::memory_efficient, sdpa_backend::math}) {
      for (const char* n : {"basic_f32", "causal_long_q", "causal_long_k", "blocks_causal_f32", "gqa_f32", "scale_f32"}) {
        const std::string name = n;
        grad_case<float, 4>(name.find("_f32") == std::string::npos ? name + "_f32" : name, b);
      }
      grad_case<double, 4>("basic_f64", b);
      grad_case<double, 4>("gqa_f64", b);
    }
    for (auto b : {sdpa_backend::flash, sdpa_backend::memory_efficient, sdpa_backend::math}) {
      grad_case<bfloat16, 4>("half_bf16", b);
      grad_case<float16, 4>("half_f16", b);
    }
    for (auto b : {sdpa_backend::memory_efficient, sdpa_backend::math}) {
      grad_case<bfloat16, 4>("half_mask_bf16", b);
      grad_case<float16, 4>("half_mask_f16", b);
      grad_case<float, 4>("bool_mask_f32", b);  // a row with every key masked out: zero gradients, as torch
      grad_case<float, 4>("float_mask_f32", b);
      grad_case<float, 4>("float_mask_bcast_f32", b);
      grad_case<double, 4>("float_mask_f64", b);
    }
  }
  detail::cpu::attn_backward_full_keys = full_keys;
}

TEST_CASE("autograd sdpa: dropout, the tiled backward against the math backward (same draw)", "[autograd][attention]") {
  using S4 = dyn_shape<4>;
  manual_seed(21);
  const auto q0 = randn<float, S4>(1, 4, 140, 16), k0 = randn<float, S4>(1, 2, 600, 16), v0 = randn<float, S4>(1, 2, 600, 8);
  const auto w = randn<float, S4>(1, 4, 140, 8);
  const std::int64_t full_keys = detail::cpu::attn_backward_full_keys;
  for (std::int64_t limit : {full_keys, std::int64_t{0}})  // whole rows of P, and by key blocks
  for (const bool causal : {false, true}) {
    INFO("causal " << causal << ", backward by key blocks " << (limit == 0));
    detail::cpu::attn_backward_full_keys = limit;
    const sdpa_options o{.is_causal = causal, .dropout_p = 0.3, .enable_gqa = true};
    auto grads = [&](sdpa_backend b) {
      sdpa_kernel only({b});
      auto q = q0.clone(), k = k0.clone(), v = v0.clone();
      q.requires_grad_(), k.requires_grad_(), v.requires_grad_();
      manual_seed(31);
      Tensor<float, S4> y = scaled_dot_product_attention(q, k, v, o);
      Tensor<float, shape<>> loss = sum(y * w);
      loss.backward();
      return std::array<Tensor<float, S4>, 4>{y, q.grad(), k.grad(), v.grad()};
    };
    const auto m = grads(sdpa_backend::math);
    for (auto b : {sdpa_backend::flash, sdpa_backend::memory_efficient}) {
      const auto t = grads(b);
      for (int i = 0; i < 4; ++i) {
        INFO(sdpa_backend_name(b) << ", tensor " << i);
        const double diff = tenet::eval(amax(abs(t[i] - m[i]))).item();
        const double scale = tenet::eval(amax(abs(m[i]))).item();
        CHECK(diff <= 3e-5 * (1.0 + scale));
      }
    }
  }
  detail::cpu::attn_backward_full_keys = full_keys;
}

TEST_CASE("autograd sdpa: finite differences (float64), masks, causal, GQA", "[autograd][attention]") {
  using M4 = Tensor<double, dyn_shape<4>>;
  const M4 q = tenet_test::filled<4>({1, 4, 3, 5}, -1, 1, 0.1);
  const M4 k = tenet_test::filled<4>({1, 2, 4, 5}, -1, 1, 0.3);
  const M4 v = tenet_test::filled<4>({1, 2, 4, 3}, -1, 1, 0.7);
  tenet_test::gradcheck([](const auto& a, const auto& b, const auto& c) {
    return scaled_dot_product_attention(a, b, c, {.is_causal = true, .enable_gqa = true});
  }, q, k, v);
  const Tensor<double, dyn_shape<2>> m = tenet_test::filled<2>({3, 4}, -1, 1, 0.2);
  tenet_test::gradcheck([](const auto& a, const auto& b, const auto& c, const auto& mm) {
    return scaled_dot_product_attention(a, b, c, mm, {.scale = 0.7, .enable_gqa = true});
  }, q, k, v, m);
}

TEST_CASE("autograd sdpa: forward mode (JVP) against finite differences", "[autograd][attention]") {
  using M4 = Tensor<double, dyn_shape<4>>;
  const M4 q = tenet_test::filled<4>({1, 2, 3, 4}, -1, 1, 0.1);
  const M4 k = tenet_test::filled<4>({1, 2, 5, 4}, -1, 1, 0.3);
  const M4 v = tenet_test::filled<4>({1, 2, 5, 2}, -1, 1, 0.7);
  tenet_test::jvpcheck([](const auto& a, const auto& b, const auto& c) {
    return scaled_dot_product_attention(a, b, c, {.is_causal = true});
  }, q, k, v);
}

TEST_CASE("autograd sdpa: the tiled backward agrees with the math backward across blocks", "[autograd][attention]") {
  using S4 = dyn_shape<4>;
  manual_seed(5);
  // the backward keeps whole rows of P up to attn_backward_full_keys keys, else runs by key
  // blocks from each row's log-sum-exp: both, on the same problem
  // and from the log-sum-exp the forward kept, or recomputing it (sdpa_keep_lse off)
  const std::int64_t full_keys = detail::cpu::attn_backward_full_keys;
  for (bool keep : {true, false})
  for (std::int64_t limit : {full_keys, std::int64_t{0}})
  for (bool causal : {false, true}) {
    INFO("causal " << causal << ", backward by key blocks " << (limit == 0) << ", saved log-sum-exp " << keep);
    detail::cpu::attn_backward_full_keys = limit;
    detail::sdpa_keep_lse = keep;
    const auto q0 = randn<float, S4>(1, 4, 300, 16), k0 = randn<float, S4>(1, 2, 700, 16), v0 = randn<float, S4>(1, 2, 700, 8);
    const auto w = randn<float, S4>(1, 4, 300, 8);
    auto grads = [&](sdpa_backend b) {
      sdpa_kernel only({b});
      auto q = q0.clone(), k = k0.clone(), v = v0.clone();
      q.requires_grad_(), k.requires_grad_(), v.requires_grad_();
      Tensor<float, shape<>> loss = sum(scaled_dot_product_attention(q, k, v, {.is_causal = causal, .enable_gqa = true}) * w);
      loss.backward();
      return std::make_tuple(q.grad(), k.grad(), v.grad());
    };
    const std::int64_t reads = detail::sdpa_lse_reads();
    const auto [fq, fk, fv] = grads(sdpa_backend::flash);
    CHECK(detail::sdpa_lse_reads() - reads == (keep ? 1 : 0));
    const auto [mq, mk, mv] = grads(sdpa_backend::math);
    for (auto [a, b] : {std::pair{fq, mq}, std::pair{fk, mk}, std::pair{fv, mv}}) {
      const double diff = eval(amax(abs(a - b))).item(), scale = eval(amax(abs(b))).item();
      INFO("max difference " << diff << ", max magnitude " << scale);
      CHECK(diff <= 5e-5 * (1.0 + scale));
    }
  }
  detail::cpu::attn_backward_full_keys = full_keys;
  detail::sdpa_keep_lse = true;
}

TEST_CASE("autograd sdpa: rows with every key masked out, from a saved log-sum-exp and without", "[autograd][attention]") {
  using S4 = dyn_shape<4>;
  manual_seed(6);
  const std::int64_t full_keys = detail::cpu::attn_backward_full_keys;
  const auto q0 = randn<float, S4>(2, 3, 37, 16), k0 = randn<float, S4>(2, 3, 45, 16), v0 = randn<float, S4>(2, 3, 45, 8);
  const auto w = randn<float, S4>(2, 3, 37, 8);
  // keys hidden at random, and every key of rows 0, 5 and 36 (their output and gradients are 0)
  Tensor<bool, dyn_shape<2>> mask = rand<float, dyn_shape<2>>(37, 45) > 0.3f;
  for (std::int64_t i : {0, 5, 36})
    for (std::int64_t j = 0; j < 45; ++j) mask.data()[i * 45 + j] = false;
  auto grads = [&](sdpa_backend b) {
    sdpa_kernel only({b});
    auto q = q0.clone(), k = k0.clone(), v = v0.clone();
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_();
    Tensor<float, shape<>> loss = sum(scaled_dot_product_attention(q, k, v, mask) * w);
    loss.backward();
    return std::make_tuple(q.grad(), k.grad(), v.grad());
  };
  const auto [mq, mk, mv] = grads(sdpa_backend::math);
  for (bool keep : {true, false})
    for (std::int64_t limit : {full_keys, std::int64_t{0}}) {
      INFO("saved log-sum-exp " << keep << ", backward by key blocks " << (limit == 0));
      detail::sdpa_keep_lse = keep;
      detail::cpu::attn_backward_full_keys = limit;
      const std::int64_t reads = detail::sdpa_lse_reads();
      const auto [eq, ek, ev] = grads(sdpa_backend::memory_efficient);
      CHECK(detail::sdpa_lse_reads() - reads == (keep ? 1 : 0));
      for (auto [a, b] : {std::pair{eq, mq}, std::pair{ek, mk}, std::pair{ev, mv}}) {
        const double diff = eval(amax(abs(a - b))).item(), scale = eval(amax(abs(b))).item();
        INFO("max difference " << diff << ", max magnitude " << scale);
        CHECK(std::isfinite(diff));
        CHECK(diff <= 5e-5 * (1.0 + scale));
      }
      CHECK(eval(amax(abs(eq.template narrow<2>(5, 1)))).item() == 0.0f);  // a row with no key
    }
  detail::sdpa_keep_lse = true;
  detail::cpu::attn_backward_full_keys = full_keys;
}

TEST_CASE("autograd sdpa: a compiled training step gives eager autograd's gradients", "[autograd][attention][compile]") {
  using S4 = dyn_shape<4>;
  manual_seed(9);
  const auto q0 = randn<float, S4>(2, 2, 40, 16), k0 = randn<float, S4>(2, 2, 50, 16), v0 = randn<float, S4>(2, 2, 50, 8);
  const auto w = randn<float, S4>(2, 2, 40, 8);
  auto fresh = [](const auto& x) {
    auto t = x.clone();
    t.requires_grad_();
    return t;
  };
  auto q = fresh(q0), k = fresh(k0), v = fresh(v0);
  auto step = compile([&](const Tensor<float, S4>& ww) {
    return backward_of(sum(scaled_dot_product_attention(q, k, v, {.is_causal = true}) * ww));
  });
  const std::int64_t reads = detail::sdpa_lse_reads();
  const float loss = step(w).item();
  CHECK(detail::sdpa_lse_reads() - reads == 1);  // the backward started from the forward's log-sum-exp
  auto qe = fresh(q0), ke = fresh(k0), ve = fresh(v0);
  Tensor<float, shape<>> eager = sum(scaled_dot_product_attention(qe, ke, ve, {.is_causal = true}) * w);
  eager.backward();
  CHECK(loss == Approx(eager.item()).epsilon(1e-5));
  for (auto [a, b] : {std::pair{q.grad(), qe.grad()}, std::pair{k.grad(), ke.grad()}, std::pair{v.grad(), ve.grad()}}) {
    REQUIRE(a.defined());
    CHECK(eval(amax(abs(a - b))).item() <= 1e-5f * (1.0f + eval(amax(abs(b))).item()));
  }
}
