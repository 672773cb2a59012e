// nn::MultiheadAttention and the Transformer modules against PyTorch (tests/reference/gen_transformer.py):
// each case's torch state_dict is loaded by name (strict) into the tenet module; the outputs, the
// attention weights and the gradients of sum(out * gy) (+ sum(weights * gw)) with respect to every
// parameter and input are compared. Plus the modules' names, options and errors.
#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;
using namespace tenet_test;

namespace {
const char* kFile = "transformer.txt";
constexpr int E = 8, H = 2, FF = 16;
constexpr double kRtol = 1e-4, kAtol = 1e-5;

template <class T, std::size_t R>
using dt = Tensor<T, dyn_shape<R>>;

tensor_dict params_of(const ref_case& c) {
  tensor_dict d;
  for (const auto& [k, v] : c)
    if (k.rfind("p:", 0) == 0) {
      any_tensor a = any_tensor::zeros(dtype::float32, v.sizes);
      float* p = a.flat<float>().data();
      for (std::size_t i = 0; i < v.values.size(); ++i) p[i] = static_cast<float>(v.values[i]);
      d.insert(k.substr(2), a);
    }
  return d;
}
template <std::size_t R>
dt<float, R> input(const ref_case& c, const std::string& k) {
  dt<float, R> t = make<float, dyn_shape<R>>(c.at(k));
  t.requires_grad_(true);
  return t;
}
/// A mask from the case: bool or float as stored, of rank R.
template <std::size_t R>
nn::attention_mask<float> mask(const ref_case& c, const std::string& k) {
  const auto& r = c.at(k);
  if (r.dtype == "bool") return make<bool, dyn_shape<R>>(r);
  return make<float, dyn_shape<R>>(r);
}
/// sum(t * the case's tensor k): the loss whose gradients the case holds.
template <class S>
Tensor<float, shape<>> dot(const Tensor<float, S>& t, const ref_case& c, const std::string& k) {
  return sum(t * make<float, S>(c.at(k)));
}
void backward(const Tensor<float, shape<>>& a, const Tensor<float, shape<>>& b = {}) {
  if (b.defined()) tenet::eval(a + b).backward();
  else a.backward();
}
/// Every parameter's gradient equals the case's "g:<name>".
void check_param_grads(const nn::Module& m, const ref_case& c) {
  std::size_t n = 0;
  for (const auto& [name, p] : m.named_parameters()) {
    INFO("grad of " << name);
    const any_tensor g = p.grad();
    REQUIRE(g.defined());
    ref_tensor want = c.at("g:" + name);
    want.sizes = {static_cast<std::int64_t>(want.values.size())};
    check_close(g.flat<float>(), want, kRtol, kAtol);
    ++n;
  }
  std::size_t want_n = 0;
  for (const auto& [k, v] : c) want_n += k.rfind("g:", 0) == 0;
  CHECK(n == want_n);
}
template <class T, class S>
void check_grad(const Tensor<T, S>& x, const ref_case& c, const std::string& k) {
  INFO("grad of input " << k);
  REQUIRE(x.grad().defined());
  check_close(x.grad(), c.at("g_" + k), kRtol, kAtol);
}
template <class M>
const ref_case& load(M& m, const std::string& name) {
  const auto& c = get_case(kFile, name);
  m.load_state_dict(params_of(c));
  return c;
}
}  // namespace

TEST_CASE("nn::MultiheadAttention: names and init as torch's") {
  nn::MultiheadAttention<8, 2> a;
  CHECK(a.state_dict().keys() == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"});
  CHECK(tenet::eval(sum(abs(a.in_proj_bias))).item() == 0.0f);
  CHECK(tenet::eval(sum(abs(a.out_proj.bias))).item() == 0.0f);
  nn::MultiheadAttention<8, 2, 5, 6> b({.bias = false, .add_bias_kv = true});
  CHECK(b.state_dict().keys() ==
        std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight", "bias_k", "bias_v", "out_proj.weight"});
  nn::TransformerEncoderLayer<8, 2, 16> l({.bias = false});
  CHECK(l.state_dict().keys() == std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.out_proj.weight", "linear1.weight",
                                                          "linear2.weight", "norm1.weight", "norm2.weight"});
  nn::TransformerEncoder<8, 2, 16> enc(2, {}, true);
  // torch clones the layer: the layers start equal
  CHECK(tenet::eval(sum(abs(enc.layers[0].self_attn.in_proj_weight - enc.layers[1].self_attn.in_proj_weight))).item() == 0.0f);
  CHECK(tenet::eval(sum(abs(enc.layers[0].self_attn.in_proj_weight))).item() > 0.0f);
  CHECK(enc.state_dict().keys().back() == "norm.bias");
  const nn::multihead_attention_options bad{.dropout = 1.5};
  CHECK_THROWS_AS((nn::MultiheadAttention<8, 2>(bad)), value_error);
  const auto m = nn::Transformer<8, 2, 16>::generate_square_subsequent_mask(3);
  CHECK(m(0, 0) == 0.0f);
  CHECK(std::isinf(m(0, 1)));
  CHECK(m(2, 1) == 0.0f);
}

TEST_CASE("nn::MultiheadAttention against torch: outputs, weights and gradients") {
  SECTION("seq-first, no masks, averaged weights") {
    nn::MultiheadAttention<E, H> m;
    const auto& c = load(m, "mha_basic");
    auto q = input<3>(c, "q"), k = input<3>(c, "k"), v = input<3>(c, "v");
    auto [y, w, wh] = m(q, k, v);
    CHECK(!wh.defined());
    check_close(y, c.at("y"), kRtol, kAtol);
    check_close(w, c.at("w"), kRtol, kAtol);
    backward(dot(y, c, "gy"), dot(w, c, "gw"));
    check_param_grads(m, c);
    check_grad(q, c, "q");
    check_grad(k, c, "k");
    check_grad(v, c, "v");
  }
  SECTION("batch_first, bool key_padding_mask, through scaled_dot_product_attention") {
    nn::MultiheadAttention<E, H> m({.batch_first = true});
    const auto& c = load(m, "mha_kpm_sdpa");
    auto q = input<3>(c, "q"), k = input<3>(c, "k"), v = input<3>(c, "v");
    auto r = m(q, k, v, {.key_padding_mask = mask<2>(c, "key_padding_mask"), .need_weights = false});
    CHECK(!r.weights.defined());
    check_close(r.output, c.at("y"), kRtol, kAtol);
    backward(dot(r.output, c, "gy"));
    check_param_grads(m, c);
    check_grad(q, c, "q");
    check_grad(v, c, "v");
  }
  SECTION("float (N*H, L, S) attn_mask, per-head weights") {
    nn::MultiheadAttention<E, H> m({.batch_first = true});
    const auto& c = load(m, "mha_mask3d_heads");
    auto q = input<3>(c, "q"), k = input<3>(c, "k"), v = input<3>(c, "v");
    auto r = m(q, k, v, {.attn_mask = mask<3>(c, "attn_mask"), .average_attn_weights = false});
    CHECK(!r.weights.defined());
    check_close(r.output, c.at("y"), kRtol, kAtol);
    check_close(r.head_weights, c.at("w"), kRtol, kAtol);
    backward(dot(r.output, c, "gy"), dot(r.head_weights, c, "gw"));
    check_param_grads(m, c);
    check_grad(k, c, "k");
  }
  SECTION("kdim, vdim, no bias, bool 2-D attn_mask and float key_padding_mask") {
    nn::MultiheadAttention<E, H, 5, 6> m({.bias = false});
    const auto& c = load(m, "mha_kdim_vdim");
    auto q = input<3>(c, "q");
    Tensor<float, shape<dyn, dyn, 5>> k = input<3>(c, "k");
    Tensor<float, shape<dyn, dyn, 6>> v = input<3>(c, "v");
    auto r = m(q, k, v, {.key_padding_mask = mask<2>(c, "key_padding_mask"), .attn_mask = mask<2>(c, "attn_mask")});
    check_close(r.output, c.at("y"), kRtol, kAtol);
    check_close(r.weights, c.at("w"), kRtol, kAtol);
    backward(dot(r.output, c, "gy"), dot(r.weights, c, "gw"));
    check_param_grads(m, c);
    check_grad(q, c, "q");
    check_close(k.grad(), c.at("g_k"), kRtol, kAtol);
    check_close(v.grad(), c.at("g_v"), kRtol, kAtol);
  }
  for (const bool nw : {true, false}) {
    DYNAMIC_SECTION("add_bias_kv and add_zero_attn, need_weights " << nw) {
      nn::MultiheadAttention<E, H> m({.add_bias_kv = true, .add_zero_attn = true});
      const auto& c = load(m, nw ? "mha_bias_kv_zero_attn_w" : "mha_bias_kv_zero_attn_sdpa");
      auto q = input<3>(c, "q"), k = input<3>(c, "k"), v = input<3>(c, "v");
      auto r = m(q, k, v, {.key_padding_mask = mask<2>(c, "key_padding_mask"), .need_weights = nw,
                           .attn_mask = mask<2>(c, "attn_mask")});
      check_close(r.output, c.at("y"), kRtol, kAtol);
      const Tensor<float, shape<>> loss = dot(r.output, c, "gy");
      if (nw) {
        check_close(r.weights, c.at("w"), kRtol, kAtol);
        backward(loss, dot(r.weights, c, "gw"));
      } else {
        backward(loss);
      }
      check_param_grads(m, c);
      check_grad(k, c, "k");
    }
  }
  SECTION("unbatched, the causal hint") {
    nn::MultiheadAttention<E, H> m;
    const auto& c = load(m, "mha_unbatched_causal");
    auto q = input<2>(c, "q");
    CHECK_THROWS_AS(m(q, q, q, {.need_weights = false, .is_causal = true}), value_error);
    auto r = m(q, q, q, {.need_weights = false, .attn_mask = mask<2>(c, "attn_mask"), .is_causal = true});
    check_close(r.output, c.at("y"), kRtol, kAtol);
    backward(dot(r.output, c, "gy"));
    check_param_grads(m, c);
    check_grad(q, c, "q");
  }
  SECTION("unbatched with weights and a key_padding_mask") {
    nn::MultiheadAttention<E, H> m;
    const auto& c = load(m, "mha_unbatched_weights");
    auto q = input<2>(c, "q"), k = input<2>(c, "k"), v = input<2>(c, "v");
    auto r = m(q, k, v, {.key_padding_mask = mask<1>(c, "key_padding_mask")});
    check_close(r.output, c.at("y"), kRtol, kAtol);
    check_close(r.weights, c.at("w"), kRtol, kAtol);
    backward(dot(r.output, c, "gy"), dot(r.weights, c, "gw"));
    check_param_grads(m, c);
    check_grad(v, c, "v");
  }
}

TEST_CASE("nn::MultiheadAttention: shape errors name the sizes") {
  nn::MultiheadAttention<E, H> m({.batch_first = true});
  const Tensor<float, shape<dyn, dyn, E>> q = randn<float, shape<dyn, dyn, E>>(2, 3), k = randn<float, shape<dyn, dyn, E>>(2, 4);
  const Tensor<float, shape<dyn, dyn, E>> k3 = randn<float, shape<dyn, dyn, E>>(3, 4), v5 = randn<float, shape<dyn, dyn, E>>(2, 5);
  CHECK_THROWS_AS(m(q, k3, k3), shape_error);
  CHECK_THROWS_WITH(m(q, k, v5), Catch::Contains("different sequence lengths (4 and 5)"));
  const Tensor<bool, shape<dyn, dyn>> bad_mask = zeros<bool, shape<dyn, dyn>>(3, 5);
  CHECK_THROWS_WITH(m(q, k, k, {.attn_mask = bad_mask}), Catch::Contains("2D attn_mask is shape<3, 5>, but should be (3, 4)"));
  const Tensor<bool, shape<dyn, dyn>> bad_kpm = zeros<bool, shape<dyn, dyn>>(2, 3);
  CHECK_THROWS_WITH(m(q, k, k, {.key_padding_mask = bad_kpm}), Catch::Contains("expected (2, 4)"));
  const Tensor<float, shape<dyn, dyn, dyn>> wide = randn<float, shape<dyn, dyn, dyn>>(2, 3, 9);
  CHECK_THROWS_WITH(m(wide, k, k), Catch::Contains("query's last dim is 9, expected 8"));
}

TEST_CASE("nn::MultiheadAttention: dropout in training mode only") {
  nn::MultiheadAttention<E, H> m({.dropout = 0.5, .batch_first = true});
  const Tensor<float, shape<dyn, dyn, E>> x = randn<float, shape<dyn, dyn, E>>(2, 6);
  m.eval();
  const auto ref = m(x, x, x);
  {
    sdpa_kernel only({sdpa_backend::math});
    const auto r = m(x, x, x, {.need_weights = false});  // the same in eval mode, through sdpa
    CHECK(tenet::eval(sum(abs(r.output - ref.output))).item() < 1e-4f);
  }
  m.train();
  const auto t = m(x, x, x);
  // dropped weights are zero, the kept ones scaled by 2: rows no longer sum to one
  const Tensor<float, shape<dyn, dyn, dyn>> w = m(x, x, x, {.average_attn_weights = true}).weights;
  CHECK(tenet::eval(sum(abs(t.output - ref.output))).item() > 1e-3f);
  CHECK(tenet::eval(sum(abs(sum<-1>(w) - 1.0f))).item() > 1e-3f);
}

TEST_CASE("nn::TransformerEncoderLayer / DecoderLayer / Encoder / Transformer against torch") {
  SECTION("encoder layer: post-norm, relu, batch_first, key padding") {
    nn::TransformerEncoderLayer<E, H, FF> m({.dropout = 0.0, .batch_first = true});
    const auto& c = load(m, "enc_post_relu");
    auto x = input<3>(c, "src");
    auto y = m(x, {.src_key_padding_mask = mask<2>(c, "src_key_padding_mask")});
    check_close(y, c.at("y"), kRtol, kAtol);
    backward(dot(y, c, "gy"));
    check_param_grads(m, c);
    check_grad(x, c, "src");
  }
  SECTION("encoder layer: norm_first, gelu, seq-first, float src_mask") {
    nn::TransformerEncoderLayer<E, H, FF> m({.dropout = 0.0, .activation = nn::transformer_activation::gelu, .norm_first = true});
    const auto& c = load(m, "enc_pre_gelu");
    auto x = input<3>(c, "src");
    auto y = m(x, {.src_mask = mask<2>(c, "src_mask")});
    check_close(y, c.at("y"), kRtol, kAtol);
    backward(dot(y, c, "gy"));
    check_param_grads(m, c);
    check_grad(x, c, "src");
  }
  SECTION("encoder layer: no bias, unbatched") {
    nn::TransformerEncoderLayer<E, H, FF> m({.dropout = 0.0, .norm_first = true, .bias = false});
    const auto& c = load(m, "enc_nobias_unbatched");
    auto x = input<2>(c, "src");
    auto y = m(x);
    check_close(y, c.at("y"), kRtol, kAtol);
    backward(dot(y, c, "gy"));
    check_param_grads(m, c);
    check_grad(x, c, "src");
  }
  SECTION("decoder layer: post-norm, causal tgt_mask, memory key padding") {
    nn::TransformerDecoderLayer<E, H, FF> m({.dropout = 0.0, .batch_first = true});
    const auto& c = load(m, "dec_post");
    auto t = input<3>(c, "tgt"), mem = input<3>(c, "memory");
    auto y = m(t, mem, {.tgt_mask = mask<2>(c, "tgt_mask"), .memory_key_padding_mask = mask<2>(c, "memory_key_padding_mask")});
    check_close(y, c.at("y"), kRtol, kAtol);
    backward(dot(y, c, "gy"));
    check_param_grads(m, c);
    check_grad(t, c, "tgt");
    check_grad(mem, c, "memory");
  }
  SECTION("decoder layer: norm_first, gelu, float memory_mask") {
    nn::TransformerDecoderLayer<E, H, FF> m({.dropout = 0.0, .activation = nn::transformer_activation::gelu, .norm_first = true});
    const auto& c = load(m, "dec_pre_gelu");
    auto t = input<3>(c, "tgt"), mem = input<3>(c, "memory");
    auto y = m(t, mem, {.memory_mask = mask<2>(c, "memory_mask")});
    check_close(y, c.at("y"), kRtol, kAtol);
    backward(dot(y, c, "gy"));
    check_param_grads(m, c);
    check_grad(mem, c, "memory");
  }
  SECTION("encoder stack with a final norm") {
    nn::TransformerEncoder<E, H, FF> m(2, {.dropout = 0.0, .batch_first = true}, true);
    const auto& c = load(m, "encoder_stack");
    auto x = input<3>(c, "src");
    auto y = m(x, {.src_key_padding_mask = mask<2>(c, "src_key_padding_mask")});
    check_close(y, c.at("y"), kRtol, kAtol);
    backward(dot(y, c, "gy"));
    check_param_grads(m, c);
    check_grad(x, c, "src");
  }
  SECTION("nn::Transformer") {
    nn::Transformer<E, H, FF> m({.num_encoder_layers = 2, .num_decoder_layers = 1, .layer = {.dropout = 0.0, .batch_first = true}});
    const auto& c = load(m, "transformer");
    auto s = input<3>(c, "src"), t = input<3>(c, "tgt");
    auto y = m(s, t, {.tgt_mask = mask<2>(c, "tgt_mask"), .src_key_padding_mask = mask<2>(c, "src_key_padding_mask"),
                      .memory_key_padding_mask = mask<2>(c, "memory_key_padding_mask")});
    check_close(y, c.at("y"), kRtol, kAtol);
    backward(dot(y, c, "gy"));
    check_param_grads(m, c);
    check_grad(s, c, "src");
    check_grad(t, c, "tgt");
  }
}

TEST_CASE("nn::TransformerEncoder: the padded fast path equals the dense path on the real positions") {
  for (const bool bf : {true, false}) {
    INFO("batch_first " << bf);
    nn::TransformerEncoder<E, H, FF> enc(2, {.dropout = 0.0, .batch_first = bf}, true);
    enc.eval();
    tenet::no_grad guard;
    const std::int64_t N = 3, S = 5;
    const std::int64_t len[N] = {5, 2, 0};
    Tensor<float, shape<dyn, dyn, E>> x = bf ? randn<float, shape<dyn, dyn, E>>(N, S) : randn<float, shape<dyn, dyn, E>>(S, N);
    Tensor<bool, shape<dyn, dyn>> pad = zeros<bool, shape<dyn, dyn>>(N, S);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t j = len[n]; j < S; ++j) pad(n, j) = true;
    const Tensor<float, shape<dyn, dyn, E>> fast = enc(x, {.src_key_padding_mask = pad});
    enc.enable_nested_tensor = false;
    const Tensor<float, shape<dyn, dyn, E>> dense = enc(x, {.src_key_padding_mask = pad});
    std::int64_t zeros_seen = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t j = 0; j < S; ++j)
        for (int e = 0; e < E; ++e) {
          const float f = bf ? fast(n, j, e) : fast(j, n, e), d = bf ? dense(n, j, e) : dense(j, n, e);
          if (j < len[n]) {
            CHECK(f == Approx(d).epsilon(1e-5).margin(1e-5));
          } else {
            zeros_seen += f == 0.0f;
          }
        }
    CHECK(zeros_seen == (0 + 3 + 5) * E);  // padded positions are 0, as torch's nested path gives
    // padding inside a sequence: the dense path
    enc.enable_nested_tensor = true;
    pad(1, 0) = true;
    const Tensor<float, shape<dyn, dyn, E>> holes = enc(x, {.src_key_padding_mask = pad});
    CHECK((bf ? holes(1, 0, 0) : holes(0, 1, 0)) != 0.0f);
  }
}
