// scaled_dot_product_attention's CUDA kernels (backend/cuda/attention.cuh: flash and
// memory_efficient, bf16 and fp16, forward and backward):
//   - against PyTorch (reference/attention.txt, gen_attention.py): outputs and the gradients of
//     sum(out * w), bool and additive masks (broadcast over heads or a batch dim, a row with no key
//     left), causal with L != S, GQA, head dims 16 to 256 with Ev != E, two batch dims;
//   - against the math variant in float32 on the GPU, from the same 16-bit inputs, on shapes that
//     cross many of the kernels' 64-row tiles, strided q, odd head dims (12, 7), and dropout (the
//     same Philox draw as the math variant for one seed);
//   - the selection: which variant runs automatically, and the reasons the others were passed over.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <tuple>

#include <tenet/cuda.hpp>

#include "../reference.hpp"
#include "check_close.hpp"

namespace {
using namespace tenet;
using tenet::test::gpu;
using S4 = dyn_shape<4>;

const std::string kAttentionFile = "attention.txt";

/// A reference case with `variant` only, forward and gradients on the GPU against torch's.
template <class T, std::size_t R>
void attention_reference_case(const std::string& name, sdpa_backend variant) {
  using S = dyn_shape<R>;
  const auto& c = tenet_test::get_case(kAttentionFile, name);
  INFO(name << " by " << sdpa_backend_name(variant));
  sdpa_kernel only({variant});
  Tensor<T, S> q = tenet_test::make<T, S>(c.at("q")).to(gpu), k = tenet_test::make<T, S>(c.at("k")).to(gpu),
               v = tenet_test::make<T, S>(c.at("v")).to(gpu);
  q.requires_grad_(), k.requires_grad_(), v.requires_grad_();
  const Tensor<T, S> w = tenet_test::make<T, S>(c.at("w")).to(gpu);
  sdpa_options o;
  o.is_causal = c.at("causal").values[0] != 0;
  o.enable_gqa = c.at("gqa").values[0] != 0;
  if (c.at("scale").values[0] > 0) o.scale = c.at("scale").values[0];
  // torch's values come from its CPU kernels (float accumulation, 16-bit intermediates)
  const double tol = std::is_same_v<T, bfloat16> ? 4e-2 : 5e-3;
  Tensor<T, S> y;
  if (c.count("mask") && c.at("mask").dtype == "bool") {
    const auto& ms = c.at("mask").sizes;
    if (ms.size() == 2) y = scaled_dot_product_attention(q, k, v, tenet_test::make<bool, dyn_shape<2>>(c.at("mask")).to(gpu), o);
    else y = scaled_dot_product_attention(q, k, v, tenet_test::make<bool, S>(c.at("mask")).to(gpu), o);
  } else if (c.count("mask")) {
    y = scaled_dot_product_attention(q, k, v, Tensor<T, S>(tenet_test::make<T, S>(c.at("mask")).to(gpu)), o);
  } else {
    y = scaled_dot_product_attention(q, k, v, o);
  }
  tenet_test::check_close(y.cpu(), c.at("out"), tol, tol);
  Tensor<T, shape<>> loss = sum(y * w);
  loss.backward();
  tenet_test::check_close(q.grad().cpu(), c.at("dq"), tol, tol);
  tenet_test::check_close(k.grad().cpu(), c.at("dk"), tol, tol);
  tenet_test::check_close(v.grad().cpu(), c.at("dv"), tol, tol);
}

/// A kernel variant on 16-bit inputs against the math variant in float32 on the same (rounded)
/// inputs, forward and gradients. mask: 0 none, 1 bool (L, S) with a row of no keys, 2 additive
/// (B, 1, L, S).
struct kernel_case {
  int B, H, Hk, L, S, E, Ev;
  bool causal = false;
  int mask = 0;
  double dropout = 0;
  bool strided_q = false;
};
template <class T>
void check_against_math(const kernel_case& c) {
  INFO("B " << c.B << " H " << c.H << "/" << c.Hk << " L " << c.L << " S " << c.S << " E " << c.E << " Ev " << c.Ev
            << " causal " << c.causal << " mask " << c.mask << " dropout " << c.dropout << " strided " << c.strided_q
            << (std::is_same_v<T, bfloat16> ? " bf16" : " fp16"));
  manual_seed(1234);
  const Tensor<T, S4> q0 = cast<T>(randn<float, S4>(c.B, c.H, c.L, c.E)), k0 = cast<T>(randn<float, S4>(c.B, c.Hk, c.S, c.E)),
                      v0 = cast<T>(randn<float, S4>(c.B, c.Hk, c.S, c.Ev));
  const Tensor<float, S4> w = randn<float, S4>(c.B, c.H, c.L, c.Ev).to(gpu);
  Tensor<bool, dyn_shape<2>> bmask = rand<float, dyn_shape<2>>(c.L, c.S) > 0.3f;
  if (c.L > 3)
    for (int j = 0; j < c.S; ++j) bmask.data()[3 * c.S + j] = false;
  const Tensor<float, S4> amask = randn<float, S4>(c.B, 1, c.L, c.S);
  Tensor<T, S4> q = q0.to(gpu);
  if (c.strided_q) q = q0.transpose(1, 2).contiguous().to(gpu).transpose(1, 2);  // (B, L, H, E) in memory
  const sdpa_options o{.is_causal = c.causal, .dropout_p = c.dropout, .enable_gqa = c.H != c.Hk};
  auto run = [&](auto qq, auto kk, auto vv, bool reference) {
    using X = value_type_of<decltype(qq)>;
    qq.requires_grad_(), kk.requires_grad_(), vv.requires_grad_();
    manual_seed(77);  // dropout's draw
    Tensor<X, S4> y;
    if (c.mask == 0) {
      y = reference ? Tensor<X, S4>(scaled_dot_product_attention<sdpa::math>(qq, kk, vv, o))
                    : Tensor<X, S4>(scaled_dot_product_attention<sdpa::flash>(qq, kk, vv, o));
    } else if (c.mask == 1) {
      const auto m = bmask.to(gpu);
      y = reference ? Tensor<X, S4>(scaled_dot_product_attention<sdpa::math>(qq, kk, vv, m, o))
                    : Tensor<X, S4>(scaled_dot_product_attention<sdpa::memory_efficient>(qq, kk, vv, m, o));
    } else {
      const Tensor<X, S4> m = Tensor<X, S4>(cast<X>(amask)).to(gpu);
      y = reference ? Tensor<X, S4>(scaled_dot_product_attention<sdpa::math>(qq, kk, vv, m, o))
                    : Tensor<X, S4>(scaled_dot_product_attention<sdpa::memory_efficient>(qq, kk, vv, m, o));
    }
    Tensor<float, shape<>> loss = sum(cast<float>(y) * w);
    loss.backward();
    return std::make_tuple(y, qq.grad(), kk.grad(), vv.grad());
  };
  const std::int64_t reads = detail::sdpa_lse_reads();
  const auto [y, dq, dk, dv] = run(q, k0.to(gpu), v0.to(gpu), false);
  CHECK(detail::sdpa_lse_reads() - reads == 1);  // the backward started from the forward's log-sum-exp
  const Tensor<float, S4> q32 = cast<float>(q), k32 = cast<float>(k0.to(gpu)), v32 = cast<float>(v0.to(gpu));
  const auto [y32, dq32, dk32, dv32] = run(q32, k32, v32, true);
  // the kernels round P and dS to T for their products (as FlashAttention does)
  const double tol = std::is_same_v<T, bfloat16> ? 2e-2 : 4e-3;
  using tenet::test::check_close;
  check_close(Tensor<float, S4>(cast<float>(y)), y32.cpu(), tol, tol);
  check_close(Tensor<float, S4>(cast<float>(dq)), dq32.cpu(), 2 * tol, 2 * tol);
  check_close(Tensor<float, S4>(cast<float>(dk)), dk32.cpu(), 2 * tol, 2 * tol);
  check_close(Tensor<float, S4>(cast<float>(dv)), dv32.cpu(), 2 * tol, 2 * tol);
}
}  // namespace

TEST_CASE("cuda attention: the flash and memory_efficient kernels against torch (bf16, fp16)", "[attention]") {
  constexpr auto flash = sdpa_backend::flash;
  constexpr auto mem = sdpa_backend::memory_efficient;
  for (auto b : {flash, mem}) {
    attention_reference_case<bfloat16, 4>("half_bf16", b);
    attention_reference_case<float16, 4>("half_f16", b);
    attention_reference_case<float16, 4>("cuda_gqa_causal_f16", b);
    attention_reference_case<bfloat16, 4>("cuda_e128_bf16", b);
    attention_reference_case<float16, 4>("cuda_e256_f16", b);
  }
  attention_reference_case<bfloat16, 4>("half_mask_bf16", mem);
  attention_reference_case<float16, 4>("half_mask_f16", mem);
  attention_reference_case<bfloat16, 4>("cuda_float_mask_bf16", mem);
  attention_reference_case<float16, 4>("cuda_float_mask_f16", mem);
  attention_reference_case<bfloat16, 5>("cuda_rank5_bf16", mem);
  attention_reference_case<float16, 5>("cuda_rank5_f16", mem);
}

TEST_CASE("cuda attention: the kernels against the float32 math variant across tiles, strides and dropout", "[attention]") {
  check_against_math<bfloat16>({.B = 2, .H = 4, .Hk = 2, .L = 37, .S = 45, .E = 16, .Ev = 8, .causal = true});
  check_against_math<float16>({.B = 2, .H = 3, .Hk = 3, .L = 130, .S = 77, .E = 64, .Ev = 64, .causal = true, .strided_q = true});
  check_against_math<bfloat16>({.B = 1, .H = 2, .Hk = 1, .L = 200, .S = 300, .E = 128, .Ev = 128});
  check_against_math<bfloat16>({.B = 1, .H = 2, .Hk = 2, .L = 129, .S = 129, .E = 128, .Ev = 128, .causal = true});
  check_against_math<bfloat16>({.B = 1, .H = 2, .Hk = 2, .L = 65, .S = 100, .E = 96, .Ev = 96, .causal = true});
  check_against_math<bfloat16>({.B = 1, .H = 2, .Hk = 2, .L = 33, .S = 20, .E = 12, .Ev = 7});
  check_against_math<bfloat16>({.B = 2, .H = 2, .Hk = 2, .L = 50, .S = 61, .E = 64, .Ev = 64, .mask = 1});
  check_against_math<float16>({.B = 2, .H = 2, .Hk = 1, .L = 50, .S = 61, .E = 32, .Ev = 32, .mask = 2});
  check_against_math<bfloat16>({.B = 1, .H = 2, .Hk = 2, .L = 80, .S = 90, .E = 64, .Ev = 64, .dropout = 0.2});
  check_against_math<bfloat16>({.B = 1, .H = 2, .Hk = 2, .L = 80, .S = 90, .E = 64, .Ev = 64, .causal = true, .dropout = 0.3});
  check_against_math<float16>({.B = 1, .H = 2, .Hk = 2, .L = 80, .S = 90, .E = 64, .Ev = 64, .mask = 2, .dropout = 0.3});
}

TEST_CASE("cuda attention: empty dims", "[attention]") {
  const auto q = Tensor<bfloat16, S4>(cast<bfloat16>(randn<float, S4>(1, 2, 5, 16))).to(gpu);
  const auto k0 = Tensor<bfloat16, S4>(cast<bfloat16>(randn<float, S4>(1, 2, 0, 16))).to(gpu);
  // no keys: every row is 0 (the math variant's, torch's)
  const Tensor<bfloat16, S4> y = scaled_dot_product_attention<sdpa::flash>(q, k0, k0);
  const auto yc = y.cpu();
  for (std::int64_t i = 0; i < yc.numel(); ++i) CHECK(static_cast<float>(yc.data()[i]) == 0.0f);
  // no queries
  const auto q0 = Tensor<bfloat16, S4>(cast<bfloat16>(randn<float, S4>(1, 2, 0, 16))).to(gpu);
  const Tensor<bfloat16, S4> y0 = scaled_dot_product_attention<sdpa::flash>(q0, q, q);
  CHECK(y0.numel() == 0);
}

TEST_CASE("cuda attention: the selection on CUDA and its reasons", "[attention]") {
  const auto h = [](auto x) { return Tensor<bfloat16, S4>(cast<bfloat16>(x)).to(gpu); };
  const auto q = h(randn<float, S4>(1, 2, 8, 16)), k = h(randn<float, S4>(1, 2, 8, 16));
  CHECK_THAT(explain(scaled_dot_product_attention(q, k, k)), Catch::Contains("variant: flash"));
  const Tensor<bool, dyn_shape<2>> m = Tensor<bool, dyn_shape<2>>(rand<float, dyn_shape<2>>(8, 8) > 0.5f).to(gpu);
  CHECK_THAT(explain(scaled_dot_product_attention(q, k, k, m)),
             Catch::Contains("variant: memory_efficient") && Catch::Contains("flash: an attn_mask is given"));
  // a head dim over 256: math, with the reason
  const auto wide = h(randn<float, S4>(1, 1, 4, 264));
  CHECK_THAT(explain(scaled_dot_product_attention(wide, wide, wide)),
             Catch::Contains("variant: math") && Catch::Contains("exceed 256"));
  CHECK_THROWS_WITH(eval(scaled_dot_product_attention<sdpa::flash>(wide, wide, wide)), Catch::Contains("exceed 256"));
  // float32 has the math variant only on CUDA
  const auto qf = randn<float, S4>(1, 2, 8, 16).to(gpu);
  CHECK_THAT(explain(scaled_dot_product_attention(qf, qf, qf)),
             Catch::Contains("variant: math") && Catch::Contains("no kernel for float32"));
}

// torch.autocast runs scaled_dot_product_attention in its low dtype: float32 q, k, v written under
// tenet::autocast run the half kernels (forward and backward, the backward outside the guard as in
// torch), so the output and the float32 gradients are exactly those of the same attention on the
// inputs cast to the low dtype, cast back to float32.
TEST_CASE("cuda attention: float32 attention under autocast runs the bf16 / fp16 kernels", "[attention]") {
  auto check_autocast = [&]<class L>(dtype low, const sdpa_options& o, bool mask) {
    INFO((low == dtype::bfloat16 ? "bf16" : "fp16") << " causal " << o.is_causal << " mask " << mask);
    manual_seed(5);
    const Tensor<float, S4> q0 = randn<float, S4>(2, 3, 70, 64).to(gpu), k0 = randn<float, S4>(2, 3, 90, 64).to(gpu),
                            v0 = randn<float, S4>(2, 3, 90, 64).to(gpu), w = randn<float, S4>(2, 3, 70, 64).to(gpu);
    const Tensor<bool, dyn_shape<2>> m = Tensor<bool, dyn_shape<2>>(rand<float, dyn_shape<2>>(70, 90) > 0.3f).to(gpu);
    // the reference: inputs cast to L by hand (torch's autocast casts them so)
    Tensor<L, S4> ql = cast<L>(q0), kl = cast<L>(k0), vl = cast<L>(v0);
    ql.requires_grad_(), kl.requires_grad_(), vl.requires_grad_();
    const Tensor<L, S4> yl = mask ? Tensor<L, S4>(scaled_dot_product_attention(ql, kl, vl, m, o))
                                  : Tensor<L, S4>(scaled_dot_product_attention(ql, kl, vl, o));
    Tensor<float, shape<>> ll = sum(cast<float>(yl) * Tensor<float, S4>(cast<float>(Tensor<L, S4>(cast<L>(w)))));
    ll.backward();
    // float32 under autocast
    Tensor<float, S4> q = q0.clone(), k = k0.clone(), v = v0.clone();
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_();
    Tensor<float, S4> y;
    {
      autocast ac(gpu, low);
      const auto e = mask ? Tensor<float, S4>(scaled_dot_product_attention(q, k, v, m, o))
                          : Tensor<float, S4>(scaled_dot_product_attention(q, k, v, o));
      y = e;
      CHECK_THAT(mask ? explain(scaled_dot_product_attention(q, k, v, m, o)) : explain(scaled_dot_product_attention(q, k, v, o)),
                 Catch::Contains(mask ? "variant: memory_efficient" : "variant: flash") &&
                     Catch::Contains(std::string(" in ") + name(low) + " (autocast)"));
    }
    Tensor<float, shape<>> loss = sum(y * Tensor<float, S4>(cast<float>(Tensor<L, S4>(cast<L>(w)))));
    loss.backward();
    const auto same = [](const Tensor<float, S4>& a, const Tensor<L, S4>& b) {
      const auto ac = a.cpu();
      const Tensor<float, S4> bc = Tensor<float, S4>(cast<float>(b)).cpu();
      double worst = 0;
      for (std::int64_t i = 0; i < ac.numel(); ++i)
        worst = std::max(worst, static_cast<double>(std::abs(ac.data()[i] - bc.data()[i])));
      return worst;
    };
    CHECK(same(y, yl) == 0.0);
    CHECK(same(q.grad(), ql.grad()) == 0.0);
    CHECK(same(k.grad(), kl.grad()) == 0.0);
    CHECK(same(v.grad(), vl.grad()) == 0.0);
  };
  check_autocast.operator()<bfloat16>(dtype::bfloat16, {.is_causal = true}, false);
  check_autocast.operator()<float16>(dtype::float16, {}, false);
  check_autocast.operator()<bfloat16>(dtype::bfloat16, {}, true);
  // outside autocast, float32 stays the math variant
  const auto qf = randn<float, S4>(1, 2, 8, 16).to(gpu);
  CHECK_THAT(explain(scaled_dot_product_attention(qf, qf, qf)), !Catch::Contains("autocast"));
}
