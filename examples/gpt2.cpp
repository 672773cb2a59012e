// GPT-2 (Radford et al. 2019) for inference, loading Hugging Face's GPT2LMHeadModel checkpoints
// (safetensors), with a KV cache for generation. The model is a template over its sizes
// (gpt2_small: 50257 / 1024 / 768 / 12 / 12; gpt2_tiny: the byte-level test model).
//
//   gpt2                                    the self-check (CTest's example.gpt2), see below
//   gpt2 --weights model.safetensors [--config small|tiny] [--prompt "..."] [--tokens 128]
//        [--temperature 0.8] [--top-k 40] [--seed 1] [--vocab vocab.json]
//
// The layout is HF's: transformer.wte.weight [V, C], transformer.wpe.weight [n_ctx, C],
// transformer.h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}.{weight, bias},
// transformer.ln_f.{weight, bias}. The four projections are HF's Conv1D: weight [in, out],
// y = x @ W + b. lm_head is tied to wte: a file may hold lm_head.weight or not; when it does, its
// values must equal wte's (an untied head is not GPT-2 and is refused). Files saved from GPT2Model
// (no "transformer." prefix, as the hub's gpt2/model.safetensors) load too. The attention buffers
// attn.bias and attn.masked_bias of HF files are ignored; any other missing or extra key, or a
// parameter of another dtype (F32 only) or shape, is a tenet error naming the key.
//
// Forward: x = wte[idx] + wpe[pos]; per block x += attn(ln_1(x)), x += mlp(ln_2(x)); attention is
// scaled_dot_product_attention over the heads (causal for a prompt that starts at position 0; one
// new token attends to every cached key, so no mask then: is_causal is torch's top-left triangle);
// mlp is c_proj(gelu_tanh(c_fc(x))) (HF's "gelu_new"); LayerNorm eps 1e-5; logits = ln_f(x) wteᵀ.
//
// Generation: the prompt runs once (prefill) and fills per-layer caches K, V of [B, H, n_ctx,
// head_dim]; each new token is one forward over one position. Greedy (--temperature 0), else
// softmax(logits / temperature) over the top-k logits, drawn with a seeded std::mt19937_64.
// Tokens are bytes for the tiny model. For GPT-2 small without --vocab the prompt is encoded byte by
// byte (GPT-2's first 256 tokens are its byte alphabet) and tokens above 255 print as <id>; with
// --vocab (HF's vocab.json) every token is decoded. There is no BPE encoder (merges.txt).
//
// The self-check (no arguments): loads examples/data/gpt2_tiny.safetensors (written with PyTorch by
// tests/reference/gen_gpt2.py), compares the logits of two 32-token sequences with PyTorch's
// (examples/data/gpt2_tiny_expected.safetensors), generates greedily to the full context with the
// cache and without it (full recompute) and compares both with PyTorch's greedy continuation and
// the logits with each other, checks the loader's errors, then samples a continuation. Exit code
// 1 on any mismatch.
// Inference only: built without autograd (TENET_AUTOGRAD=0, which compiles no VJP for the
// expressions it evaluates).
#ifndef TENET_AUTOGRAD
#define TENET_AUTOGRAD 0
#endif
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <tenet/tenet.hpp>
#include <tenet/io/json.hpp>  // vocab.json

using namespace tenet;

#ifndef TENET_EXAMPLE_DATA_DIR
#define TENET_EXAMPLE_DATA_DIR "examples/data"
#endif

// ------------------------------------------------------------------------------------------------
// configurations

struct gpt2_small {
  static constexpr int vocab_size = 50257, n_ctx = 1024, n_embd = 768, n_head = 12, n_layer = 12;
  static constexpr const char* name = "small";
};
/// The self-check's model: byte tokens (tests/reference/gen_gpt2.py).
struct gpt2_tiny {
  static constexpr int vocab_size = 256, n_ctx = 64, n_embd = 32, n_head = 4, n_layer = 2;
  static constexpr const char* name = "tiny";
};

using tokens_t = Tensor<std::int64_t, shape<dyn, dyn>>;  // [B, T]

// ------------------------------------------------------------------------------------------------
// the model

/// HF's Conv1D: weight [In, Out], y = x @ W + b.
template <int In, int Out>
struct Conv1D : nn::Module {
  Tensor<float, shape<In, Out>> weight{{In, Out}};
  Tensor<float, shape<Out>> bias{{Out}};
  Conv1D() {
    register_parameter("weight", weight);
    register_parameter("bias", bias);
    init(0.02);
  }
  void init(double std) {
    nn::init::normal_(weight, 0.0, std);
    nn::init::zeros_(bias);
  }
  template <Expression X>
  auto operator()(const X& x) const {
    return matmul(x, weight) + bias;
  }
};

/// Per-layer key and value caches [B, H, n_ctx, head_dim] and the number of positions they hold.
template <class C>
struct kv_cache {
  static constexpr int hd = C::n_embd / C::n_head;
  using cache_t = Tensor<float, shape<dyn, C::n_head, dyn, hd>>;
  std::vector<cache_t> k, v;
  std::int64_t len = 0;
  explicit kv_cache(std::int64_t batch) {
    for (int l = 0; l < C::n_layer; ++l) {
      k.push_back(zeros<float, shape<dyn, C::n_head, dyn, hd>>(batch, C::n_ctx));
      v.push_back(zeros<float, shape<dyn, C::n_head, dyn, hd>>(batch, C::n_ctx));
    }
  }
};

template <class C>
struct Attention : nn::Module {
  static constexpr int E = C::n_embd, H = C::n_head, hd = E / H;
  static_assert(E % H == 0, "gpt2: n_embd must be a multiple of n_head");
  using act_t = Tensor<float, shape<dyn, dyn, E>>;
  using heads_t = Tensor<float, shape<dyn, H, dyn, hd>>;
  Conv1D<E, 3 * E> c_attn;
  Conv1D<E, E> c_proj;
  Attention() {
    register_module("c_attn", c_attn);
    register_module("c_proj", c_proj);
  }
  /// x [B, T, C] at positions pos .. pos + T - 1. Without a cache: causal attention over x itself
  /// (pos must be 0). With one: k and v go to positions pos .. of the layer's cache first; then a
  /// prompt (pos 0) attends causally, one token (T = 1) attends to all pos + 1 cached keys.
  act_t operator()(const act_t& x, heads_t* kc, heads_t* vc, std::int64_t pos) const {
    const std::int64_t B = x.size(0), T = x.size(1);
    const Tensor<float, shape<dyn, dyn, 3 * E>> qkv = c_attn(x);
    auto heads = [&](int i) -> heads_t {  // [B, T, C] viewed as [B, T, H, hd], heads moved forward
      return qkv.template narrow<2>(i * E, E).template reshape<dyn, dyn, H, hd>(B, T).template transpose<1, 2>();
    };
    const heads_t q = heads(0);
    heads_t k = heads(1), v = heads(2);
    bool causal = true;
    if (kc) {
      kc->template narrow<2>(pos, T).copy_(k);
      vc->template narrow<2>(pos, T).copy_(v);
      k = kc->template narrow<2>(0, pos + T);
      v = vc->template narrow<2>(0, pos + T);
      if (pos > 0) {
        if (T != 1)
          throw value_error("gpt2: a chunk of " + std::to_string(T) + " tokens after " + std::to_string(pos) +
                            " cached positions (the cache takes a prompt at position 0, then one token at a time)");
        causal = false;  // the one query is the newest position: it sees every cached key
      }
    }
    const heads_t y = scaled_dot_product_attention(q, k, v, {.is_causal = causal});  // [B, H, T, hd]
    return c_proj(y.template transpose<1, 2>().template reshape<dyn, dyn, E>(B, T));
  }
};

template <class C>
struct MLP : nn::Module {
  static constexpr int E = C::n_embd;
  using act_t = Tensor<float, shape<dyn, dyn, E>>;
  Conv1D<E, 4 * E> c_fc;
  Conv1D<4 * E, E> c_proj;
  MLP() {
    register_module("c_fc", c_fc);
    register_module("c_proj", c_proj);
  }
  act_t operator()(const act_t& x) const {
    const Tensor<float, shape<dyn, dyn, 4 * E>> h = gelu(c_fc(x), approximate_tanh);
    return c_proj(h);
  }
};

template <class C>
struct Block : nn::Module {
  using act_t = Tensor<float, shape<dyn, dyn, C::n_embd>>;
  using heads_t = typename Attention<C>::heads_t;
  nn::LayerNorm<C::n_embd> ln_1, ln_2;
  Attention<C> attn;
  MLP<C> mlp;
  Block() {
    register_module("ln_1", ln_1);
    register_module("attn", attn);
    register_module("ln_2", ln_2);
    register_module("mlp", mlp);
  }
  act_t operator()(const act_t& x, heads_t* kc, heads_t* vc, std::int64_t pos) const {
    const act_t a = x + attn(ln_1(x), kc, vc, pos);
    return a + mlp(ln_2(a));
  }
};

template <class C>
struct Transformer : nn::Module {
  nn::Embedding<C::vocab_size, C::n_embd> wte;
  nn::Embedding<C::n_ctx, C::n_embd> wpe;
  nn::ModuleList<Block<C>> h;
  nn::LayerNorm<C::n_embd> ln_f;
  Transformer() {
    register_module("wte", wte);
    register_module("wpe", wpe);
    for (int i = 0; i < C::n_layer; ++i) h.append();
    register_module("h", h);
    register_module("ln_f", ln_f);
  }
};

template <class C = gpt2_small>
struct GPT2 : nn::Module {
  static constexpr int V = C::vocab_size, E = C::n_embd;
  using config = C;
  using act_t = Tensor<float, shape<dyn, dyn, E>>;
  using logits_t = Tensor<float, shape<dyn, dyn, V>>;
  Transformer<C> transformer;
  GPT2() {
    register_module("transformer", transformer);
    eval();
  }

  /// GPT-2's initialization: N(0, 0.02), the residual projections N(0, 0.02 / sqrt(2 n_layer)),
  /// biases 0, LayerNorms 1 and 0 (tenet's generator: seed with manual_seed first).
  void init_weights() {
    nn::init::normal_(transformer.wte.weight, 0.0, 0.02);
    nn::init::normal_(transformer.wpe.weight, 0.0, 0.01);
    for (Block<C>& b : transformer.h) {
      b.attn.c_attn.init(0.02);
      b.attn.c_proj.init(0.02 / std::sqrt(2.0 * C::n_layer));
      b.mlp.c_fc.init(0.02);
      b.mlp.c_proj.init(0.02 / std::sqrt(2.0 * C::n_layer));
    }
  }

  /// Logits [B, T, V] of token ids idx [B, T] at positions pos .. pos + T - 1 (last_only: the last
  /// position's, [B, 1, V]). With a cache, the positions' keys and values are stored in it and
  /// cache->len becomes pos + T; without, pos must be 0 (the whole sequence, causal).
  logits_t operator()(const tokens_t& idx, kv_cache<C>* cache = nullptr, bool last_only = false) const {
    const std::int64_t T = idx.size(1);
    const std::int64_t pos = cache ? cache->len : 0;
    if (T < 1 || pos + T > C::n_ctx)
      throw value_error("gpt2: " + std::to_string(T) + " tokens at position " + std::to_string(pos) +
                        " do not fit the context of " + std::to_string(C::n_ctx));
    if (cache && cache->k[0].size(0) != idx.size(0))
      throw shape_error("gpt2: a batch of " + std::to_string(idx.size(0)) + " with a cache made for " +
                        std::to_string(cache->k[0].size(0)));
    act_t x = embedding(idx, transformer.wte.weight) + transformer.wpe.weight.template narrow<0>(pos, T);
    int l = 0;
    for (const Block<C>& b : transformer.h) {
      x = b(x, cache ? &cache->k[l] : nullptr, cache ? &cache->v[l] : nullptr, pos);
      ++l;
    }
    if (cache) cache->len = pos + T;
    if (last_only) x = x.template narrow<1>(T - 1, 1);
    return linear(transformer.ln_f(x), transformer.wte.weight);
  }

  /// Loads an HF GPT-2 checkpoint (see the top of the file).
  void load(const std::string& path) { load(safetensors::load_file(path), path); }
  void load(const tensor_dict& file, const std::string& where) {
    bool prefixed = false;
    for (const auto& [name, t] : file) prefixed = prefixed || name.rfind("transformer.", 0) == 0;
    tensor_dict d;
    const any_tensor* head = nullptr;
    for (const auto& [name, t] : file) {
      if (name == "lm_head.weight") {
        head = &t;
        continue;
      }
      const std::string n = prefixed ? name : "transformer." + name;
      const auto ends_with = [&](const std::string& s) {
        return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
      };
      if (n.rfind("transformer.h.", 0) == 0 && (ends_with(".attn.bias") || ends_with(".attn.masked_bias")))
        continue;  // HF's causal-mask buffers, not parameters
      d.insert(n, t);
    }
    check_config(d, where);
    try {
      load_state_dict(d, /*strict=*/true);
    } catch (const error& e) {
      throw_again(e, where);
    }
    if (head) {  // tied: the same values as wte, or the file is not a GPT-2 checkpoint
      const any_tensor& wte = d.at("transformer.wte.weight");
      if (head->scalar_type() != wte.scalar_type() || head->sizes() != wte.sizes() ||
          std::memcmp(head->raw_data(), wte.raw_data(), wte.nbytes()) != 0)
        throw value_error("gpt2: " + where + ": \"lm_head.weight\" differs from \"transformer.wte.weight\"; GPT-2 ties "
                          "them (an untied lm_head is not supported)");
    }
  }

 private:
  /// A file of another configuration: one short message (instead of a list of every key).
  static void check_config(const tensor_dict& d, const std::string& where) {
    const auto text = [](const std::vector<std::int64_t>& s) {
      std::string t = "[";
      for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
      return t + "]";
    };
    const std::string cfg = std::string(" (config ") + C::name + ": vocab_size " + std::to_string(C::vocab_size) +
                            ", n_ctx " + std::to_string(C::n_ctx) + ", n_embd " + std::to_string(C::n_embd) +
                            ", n_layer " + std::to_string(C::n_layer) + "; another --config?)";
    for (const auto& [key, want] : {std::pair<std::string, std::vector<std::int64_t>>{"transformer.wte.weight", {V, E}},
                                    {"transformer.wpe.weight", {C::n_ctx, E}}})
      if (const any_tensor* t = d.find(key); t && t->sizes() != want)
        throw shape_error("gpt2: " + where + ": \"" + key + "\" is " + text(t->sizes()) + ", not " + text(want) + cfg);
    int layers = 0;
    for (const auto& [name, t] : d)
      if (name.rfind("transformer.h.", 0) == 0) layers = std::max(layers, 1 + std::atoi(name.c_str() + 14));
    if (layers != C::n_layer)
      throw value_error("gpt2: " + where + ": the file has " + std::to_string(layers) + " layers (transformer.h.N)" + cfg);
  }
  [[noreturn]] static void throw_again(const error& e, const std::string& where) {
    const std::string msg = "gpt2: " + where + ": " + e.what();
    if (dynamic_cast<const dtype_error*>(&e)) throw dtype_error(msg);
    if (dynamic_cast<const shape_error*>(&e)) throw shape_error(msg);
    throw value_error(msg);
  }
};

// ------------------------------------------------------------------------------------------------
// generation

struct sampling {
  double temperature = 0.0;  // 0: greedy
  int top_k = 0;             // 0: the whole vocabulary
  std::uint64_t seed = 1;
};

/// Picks the next token from one row of logits.
class sampler {
 public:
  explicit sampler(sampling s) : s_(s), rng_(s.seed) {}
  std::int64_t operator()(const float* logits, std::int64_t V) {
    std::int64_t best = 0;
    for (std::int64_t i = 1; i < V; ++i)
      if (logits[i] > logits[best]) best = i;  // the first maximum, as torch.argmax
    if (s_.temperature <= 0) return best;
    order_.resize(static_cast<std::size_t>(V));
    for (std::int64_t i = 0; i < V; ++i) order_[static_cast<std::size_t>(i)] = i;
    std::int64_t k = s_.top_k > 0 ? std::min<std::int64_t>(s_.top_k, V) : V;
    std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), [&](std::int64_t a, std::int64_t b) {
      return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
    });
    w_.resize(static_cast<std::size_t>(k));
    double total = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      const auto i = order_[static_cast<std::size_t>(j)];
      w_[static_cast<std::size_t>(j)] = std::exp((static_cast<double>(logits[i]) - logits[best]) / s_.temperature);
      total += w_[static_cast<std::size_t>(j)];
    }
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;  // [0, total)
    double acc = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      acc += w_[static_cast<std::size_t>(j)];
      if (u < acc) return order_[static_cast<std::size_t>(j)];
    }
    return order_[static_cast<std::size_t>(k - 1)];
  }

 private:
  sampling s_;
  std::mt19937_64 rng_;
  std::vector<std::int64_t> order_;
  std::vector<double> w_;
};

tokens_t row_of(const std::vector<std::int64_t>& ids, std::size_t from = 0) {
  tokens_t t({1, static_cast<std::int64_t>(ids.size() - from)});
  for (std::size_t i = from; i < ids.size(); ++i) t(0, static_cast<std::int64_t>(i - from)) = ids[i];
  return t;
}

struct generation {
  std::vector<std::int64_t> tokens;        // the new tokens
  std::vector<std::vector<float>> logits;  // the logits each was drawn from (when kept)
  double prefill_s = 0, decode_s = 0;
};

/// n tokens after the prompt: with the KV cache (prefill, then one position per token), or
/// without (use_cache false: the whole sequence again for every token). on_token sees each token.
template <class C>
generation generate(const GPT2<C>& model, const std::vector<std::int64_t>& prompt, int n, sampling s,
                    bool use_cache = true, bool keep_logits = false,
                    const std::function<void(std::int64_t)>& on_token = {}) {
  using clock = std::chrono::steady_clock;
  if (prompt.empty()) throw value_error("gpt2: generate needs a prompt of at least one token");
  if (prompt.size() + static_cast<std::size_t>(n) > static_cast<std::size_t>(C::n_ctx))
    throw value_error("gpt2: " + std::to_string(prompt.size()) + " prompt tokens and " + std::to_string(n) +
                      " new ones exceed the context of " + std::to_string(C::n_ctx));
  generation g;
  sampler pick(s);
  std::vector<std::int64_t> ids = prompt;
  kv_cache<C> cache(1);
  auto t0 = clock::now();
  for (int i = 0; i < n; ++i) {
    const auto logits = use_cache ? model(row_of(ids, i == 0 ? 0 : ids.size() - 1), &cache, true)
                                  : model(row_of(ids), nullptr, true);
    const float* row = logits.data();  // [1, 1, V], contiguous
    const std::int64_t next = pick(row, C::vocab_size);
    if (keep_logits) g.logits.emplace_back(row, row + C::vocab_size);
    ids.push_back(next);
    g.tokens.push_back(next);
    if (on_token) on_token(next);
    if (i == 0) {
      const auto t1 = clock::now();
      g.prefill_s = std::chrono::duration<double>(t1 - t0).count();
      t0 = t1;
    }
  }
  g.decode_s = std::chrono::duration<double>(clock::now() - t0).count();
  return g;
}

#ifndef GPT2_MODEL_ONLY  // bench/gpt2.cpp takes the model and generate() only
// ------------------------------------------------------------------------------------------------
// tokens as text

/// GPT-2's byte alphabet: token i (< 256) stands for byte byte_of[i] (the printable bytes 33..126,
/// 161..172, 174..255 first, then the others in order), as its vocab.json starts.
struct byte_alphabet {
  int byte_of[256];
  int token_of[256];
  byte_alphabet() {
    int n = 0;
    auto printable = [](int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); };
    for (int b = 0; b < 256; ++b)
      if (printable(b)) byte_of[n++] = b;
    for (int b = 0; b < 256; ++b)
      if (!printable(b)) byte_of[n++] = b;
    for (int i = 0; i < 256; ++i) token_of[byte_of[i]] = i;
  }
};

/// Token text: bytes for the tiny model; GPT-2's bytes, or vocab.json's strings when given.
class detokenizer {
 public:
  detokenizer(bool byte_model, const std::string& vocab_path) : bytes_(byte_model) {
    if (vocab_path.empty()) return;
    std::ifstream f(vocab_path, std::ios::binary);
    if (!f) throw value_error("gpt2: cannot open " + vocab_path);
    std::stringstream ss;
    ss << f.rdbuf();
    const auto root = tenet::detail::json::parse(ss.str());
    if (root.kind != tenet::detail::json::value::object) throw value_error("gpt2: " + vocab_path + " is not a JSON object");
    // GPT-2's strings are bytes mapped to code points: byte_of[i] for the code point of token i
    int code_to_byte[512];
    std::fill(std::begin(code_to_byte), std::end(code_to_byte), -1);
    for (int i = 0; i < 256; ++i) {
      const int b = alpha_.byte_of[i];
      code_to_byte[i < 188 ? b : 256 + (i - 188)] = b;
    }
    for (const auto& [s, id] : root.members) {
      if (id.kind != tenet::detail::json::value::integer || id.i < 0) continue;
      std::string out;
      for (std::size_t p = 0; p < s.size();) {  // UTF-8 code points of at most 2 bytes
        const auto c = static_cast<unsigned char>(s[p]);
        int cp = c;
        if (c >= 0xC0 && p + 1 < s.size()) {
          cp = ((c & 0x1F) << 6) | (static_cast<unsigned char>(s[p + 1]) & 0x3F);
          p += 2;
        } else {
          p += 1;
        }
        out += static_cast<char>(cp < 512 && code_to_byte[cp] >= 0 ? code_to_byte[cp] : '?');
      }
      if (static_cast<std::size_t>(id.i) >= text_.size()) text_.resize(static_cast<std::size_t>(id.i) + 1);
      text_[static_cast<std::size_t>(id.i)] = out;
    }
  }
  std::vector<std::int64_t> encode(const std::string& s) const {
    std::vector<std::int64_t> ids;
    for (unsigned char c : s) ids.push_back(bytes_ ? c : alpha_.token_of[c]);
    return ids;
  }
  std::string decode(std::int64_t id) const {
    if (bytes_) return std::string(1, static_cast<char>(id));
    if (id >= 0 && static_cast<std::size_t>(id) < text_.size() && !text_[static_cast<std::size_t>(id)].empty())
      return text_[static_cast<std::size_t>(id)];
    if (id >= 0 && id < 256) return std::string(1, static_cast<char>(alpha_.byte_of[id]));
    return "<" + std::to_string(id) + ">";
  }

 private:
  bool bytes_;
  byte_alphabet alpha_;
  std::vector<std::string> text_;
};

/// Printable form of bytes (others as \xNN).
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n' || (c >= 32 && c < 127)) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// the self-check

/// max |a - b| over two float tensors of the same sizes (contiguous).
template <class A, class B>
double max_abs_diff(const A& a, const B& b) {
  if (a.numel() != b.numel()) return std::numeric_limits<double>::infinity();
  double d = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    d = std::max(d, std::abs(static_cast<double>(a.data()[i]) - static_cast<double>(b.data()[i])));
  return d;
}

int self_check() {
  using C = gpt2_tiny;
  using model_t = GPT2<C>;
  const std::string weights = TENET_EXAMPLE_DATA_DIR "/gpt2_tiny.safetensors";
  const std::string expected = TENET_EXAMPLE_DATA_DIR "/gpt2_tiny_expected.safetensors";
  int failures = 0;
  auto check = [&](bool ok, const std::string& what) {
    std::printf("  %s  %s\n", ok ? "ok  " : "FAIL", what.c_str());
    if (!ok) ++failures;
  };
  const auto t_start = std::chrono::steady_clock::now();

  model_t model;
  const tensor_dict file = safetensors::load_file(weights);
  model.load(file, weights);
  const tensor_dict want = safetensors::load_file(expected);
  std::printf("gpt2 self-check: %s (vocab %d, n_ctx %d, n_embd %d, n_head %d, n_layer %d, %lld parameters)\n",
              weights.c_str(), C::vocab_size, C::n_ctx, C::n_embd, C::n_head, C::n_layer,
              static_cast<long long>(model.num_parameters()));

  // 1. the logits of two sequences against PyTorch's
  {
    const auto tokens = want.at("tokens").as<std::int64_t, shape<dyn, dyn>>();
    const auto ref = want.at("logits").as<float, shape<dyn, dyn, C::vocab_size>>();
    const model_t::logits_t got = model(tokens);
    const double diff = max_abs_diff(got, ref);
    char buf[200];
    std::snprintf(buf, sizeof buf, "logits of [%lld, %lld] tokens vs PyTorch: max |diff| %.3g (tolerance 1e-4)",
                  static_cast<long long>(tokens.size(0)), static_cast<long long>(tokens.size(1)), diff);
    check(diff <= 1e-4, buf);
  }

  // 2. greedy to the full context: with the cache, without, and PyTorch's
  {
    const auto p = want.at("prompt").as<std::int64_t, shape<dyn>>();
    const auto g = want.at("greedy").as<std::int64_t, shape<dyn>>();
    std::vector<std::int64_t> prompt(p.data(), p.data() + p.numel()), ref(g.data(), g.data() + g.numel());
    const int n = static_cast<int>(ref.size());
    const generation cached = generate(model, prompt, n, {}, true, true);
    const generation full = generate(model, prompt, n, {}, false, true);
    check(cached.tokens == ref, "greedy, " + std::to_string(n) + " tokens with the KV cache = PyTorch's");
    check(full.tokens == ref, "greedy, " + std::to_string(n) + " tokens by full recompute = PyTorch's");
    double diff = 0;
    for (std::size_t i = 0; i < cached.logits.size() && i < full.logits.size(); ++i)
      for (std::size_t j = 0; j < cached.logits[i].size(); ++j)
        diff = std::max(diff, static_cast<double>(std::abs(cached.logits[i][j] - full.logits[i][j])));
    char buf[200];
    std::snprintf(buf, sizeof buf, "logits with the cache vs full recompute at each of the %d steps: max |diff| %.3g", n,
                  diff);
    check(diff <= 1e-4, buf);
  }

  // 3. the loader's errors name the key
  {
    auto expect_error = [&](const std::string& what, const tensor_dict& d, const std::string& key, auto tag) {
      using E = decltype(tag);
      model_t m;
      try {
        m.load(d, "test");
        check(false, what + ": no error");
      } catch (const E& e) {
        const std::string msg = e.what();
        check(msg.find(key) != std::string::npos, what + ": " + msg);
      }
    };
    auto without = [&](const std::string& key) {
      tensor_dict d;
      for (const auto& [n, t] : file)
        if (n != key) d.insert(n, t);
      return d;
    };
    auto replaced = [&](const std::string& key, any_tensor v) {
      tensor_dict d;
      for (const auto& [n, t] : file) d.insert(n, n == key ? v : t);
      return d;
    };
    expect_error("missing key", without("transformer.h.1.mlp.c_fc.bias"), "transformer.h.1.mlp.c_fc.bias", value_error{""});
    expect_error("wrong shape (nn.Linear's [out, in])",
                 replaced("transformer.h.0.attn.c_attn.weight", any_tensor::zeros(dtype::float32, {3 * C::n_embd, C::n_embd})),
                 "transformer.h.0.attn.c_attn.weight", shape_error{""});
    expect_error("wrong dtype", replaced("transformer.ln_f.weight", any_tensor::zeros(dtype::float16, {C::n_embd})),
                 "transformer.ln_f.weight", dtype_error{""});
    expect_error("untied lm_head", replaced("lm_head.weight", any_tensor::zeros(dtype::float32, {C::vocab_size, C::n_embd})),
                 "lm_head.weight", value_error{""});
    tensor_dict extra = without("");
    extra.insert("transformer.h.0.attn.q_proj.weight", any_tensor::zeros(dtype::float32, {1}));
    expect_error("unexpected key", extra, "transformer.h.0.attn.q_proj.weight", value_error{""});
    tensor_dict deeper = without("");
    deeper.insert("transformer.h.2.ln_1.weight", any_tensor::zeros(dtype::float32, {C::n_embd}));
    expect_error("a file of another config (a third layer)", deeper, "the file has 3 layers", value_error{""});
    expect_error("a file of another config (GPT-2 small's wte)",
                 replaced("transformer.wte.weight", any_tensor::zeros(dtype::float32, {50257, C::n_embd})),
                 "\"transformer.wte.weight\" is [50257, 32], not [256, 32]", shape_error{""});
    // GPT2Model's names (no "transformer."), no lm_head, no buffers: loads, the same logits
    tensor_dict bare;
    for (const auto& [n, t] : file)
      if (n != "lm_head.weight" && n.find(".attn.bias") == std::string::npos && n.find("masked_bias") == std::string::npos)
        bare.insert(n.substr(std::string("transformer.").size()), t);
    model_t m;
    m.load(bare, "bare");
    const auto tokens = want.at("tokens").as<std::int64_t, shape<dyn, dyn>>();
    check(max_abs_diff(m(tokens), model(tokens)) == 0.0,
          "a file with GPT2Model's names, without lm_head and the attn buffers: the same logits");
  }

  // 4. a sampled continuation (deterministic for the seed)
  {
    const detokenizer text(true, "");
    const std::string prompt_text = "tenet ";
    const sampling s{.temperature = 0.8, .top_k = 40, .seed = 1};
    const int n = C::n_ctx - static_cast<int>(prompt_text.size());
    std::printf("sample (temperature 0.8, top-k 40, seed 1): %s", prompt_text.c_str());
    const generation a = generate(model, text.encode(prompt_text), n, s, true, false, [&](std::int64_t t) {
      std::printf("%s", printable(text.decode(t)).c_str());
      std::fflush(stdout);
    });
    std::printf("\n");
    const generation b = generate(model, text.encode(prompt_text), n, s);
    check(a.tokens == b.tokens, "the same seed samples the same tokens");
    std::printf("  %d tokens: prefill %.3f ms, then %.1f tokens/s\n", n, 1e3 * a.prefill_s, (n - 1) / a.decode_s);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::printf("gpt2 self-check: %s (%.2f s)\n", failures ? "FAILED" : "passed", secs);
  return failures ? 1 : 0;
}

// ------------------------------------------------------------------------------------------------
// real use

struct options {
  std::string weights, config = "small", prompt = "Hello, I'm a language model,", vocab;
  int tokens = 128;
  sampling s{.temperature = 0.8, .top_k = 40, .seed = 1};
};

template <class C>
int run(const options& o) {
  GPT2<C> model;
  const auto t0 = std::chrono::steady_clock::now();
  model.load(o.weights);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("GPT-2 %s: %lld parameters from %s (%.2f s)\n", C::name, static_cast<long long>(model.num_parameters()),
              o.weights.c_str(), load_s);
  const detokenizer text(C::vocab_size == 256, o.vocab);
  const std::vector<std::int64_t> prompt = text.encode(o.prompt);
  if (prompt.empty()) throw value_error("gpt2: the prompt is empty");
  const int n = std::min(o.tokens, C::n_ctx - static_cast<int>(prompt.size()));
  if (n < o.tokens) std::printf("(%d tokens: the context of %d is full after them)\n", n, C::n_ctx);
  std::printf("%s", o.prompt.c_str());
  const generation g = generate(model, prompt, n, o.s, true, false, [&](std::int64_t t) {
    std::printf("%s", text.decode(t).c_str());
    std::fflush(stdout);
  });
  std::printf("\n---\nprompt %zu tokens: prefill %.1f ms; %d tokens generated: %.2f tokens/s after the first\n",
              prompt.size(), 1e3 * g.prefill_s, n, n > 1 ? (n - 1) / g.decode_s : 0.0);
  return 0;
}

int main(int argc, char** argv) {
  try {
    if (argc == 1) return self_check();
    options o;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw value_error("gpt2: " + a + " needs a value");
        return argv[++i];
      };
      if (a == "--weights") o.weights = next();
      else if (a == "--config") o.config = next();
      else if (a == "--prompt") o.prompt = next();
      else if (a == "--vocab") o.vocab = next();
      else if (a == "--tokens") o.tokens = std::stoi(next());
      else if (a == "--temperature") o.s.temperature = std::stod(next());
      else if (a == "--top-k") o.s.top_k = std::stoi(next());
      else if (a == "--seed") o.s.seed = std::stoull(next());
      else if (a == "--self-check") return self_check();
      else throw value_error("gpt2: unknown option " + a + " (see the top of examples/gpt2.cpp)");
    }
    if (o.weights.empty()) throw value_error("gpt2: --weights file.safetensors is needed (or no arguments: the self-check)");
    if (o.tokens < 1) throw value_error("gpt2: --tokens must be positive");
    if (o.config == "small") return run<gpt2_small>(o);
    if (o.config == "tiny") return run<gpt2_tiny>(o);
    throw value_error("gpt2: unknown --config " + o.config + " (small or tiny)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
#endif  // GPT2_MODEL_ONLY
