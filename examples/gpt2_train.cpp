// GPT-2 training after nanoGPT's train.py: a GPT of run-time sizes (GPT-2 124M is --config gpt2:
// vocabulary padded to 50304, context 1024, 12 layers, 12 heads, width 768, tied embeddings, GELU
// tanh), trained on a token file, with AdamW (weight decay on the matrices only), a cosine learning
// rate after a linear warmup, gradient accumulation, gradient clipping, bfloat16 on CUDA, and
// checkpoints one can resume from.
//
// --dtype bfloat16 (CUDA) runs the activations in bfloat16: the model's modules are generic over
// the activation dtype, the float32 weights are cast for each GEMM (their gradients come back in
// float32), the residual stream, the LayerNorm statistics and the loss stay float32. The types say
// where each tensor is bfloat16, so no tensor pays a float32 round trip between two bf16 kernels.
// --dtype autocast keeps float32 activations under autocast's bf16 matmuls (the earlier path,
// kept for comparison: about 1.26x slower on an H200, docs/gpt2.md).
//
//   gpt2_train                      the self-check (CTest's example.gpt2_train), see below
//   gpt2_train --config gpt2|tiny [--data DIR] [--device cpu|cuda] [--dtype float32|bfloat16|autocast]
//              [--batch-size B] [--block-size T] [--grad-accum K] [--max-iters N] [--lr X]
//              [--min-lr X] [--warmup-iters N] [--lr-decay-iters N] [--weight-decay X] [--beta1 X]
//              [--beta2 X] [--grad-clip X] [--dropout X] [--eval-interval N] [--eval-iters N]
//              [--log-interval N] [--out-dir DIR] [--resume] [--init-from FILE] [--seed N]
//              [--n-layer N] [--n-head N] [--n-embd N] [--vocab-size N]
//
// Data: DIR/train.bin and DIR/val.bin, nanoGPT's format: token ids as little-endian uint16, one
// after another (scripts/prepare_tokens.py writes them from a text file: bytes, or GPT-2's BPE with
// tiktoken). The default DIR is examples/data/gpl-bytes (the bytes of the GPL's text). A batch is B
// windows of T + 1 tokens (inputs and the next tokens); window w of micro-batch m starts at
// splitmix64(seed + (m B + w) 0x9E3779B97F4A7C15) mod (n - T), so a run's batches depend on the seed
// and the step only: a resumed run and bench/gpt2_train_torch.py see the same ones.
//
// Each iteration: lr from the schedule (warmup: lr (it + 1) / (warmup + 1); then cosine from lr to
// min_lr until lr_decay_iters; min_lr after), K micro-batches each adding the gradient of loss / K,
// the gradients clipped to a total norm, one AdamW step. Every eval_interval iterations (and at the
// end) the mean loss of eval_iters fixed batches of each split; with --out-dir a checkpoint
// (OUT/ckpt.safetensors: "model.*" the parameters, "optim.decay.*" / "optim.no_decay.*" the AdamW
// states, the iteration and the sizes in its metadata) is written there, and every iteration's
// figures go to OUT/log.csv (iter, loss, val_loss, lr, ms, tokens_per_s). --resume continues from
// OUT/ckpt.safetensors; --init-from loads the parameters only (a "model.*" checkpoint or a plain
// state_dict file, as PyTorch's safetensors.torch.save_file writes one).
//
// The self-check (no arguments; --device cuda for the CUDA build's):
//   1. parity with PyTorch: from the same initial weights (examples/data/gpt2_train_tiny_init
//      .safetensors, written by tests/reference/gen_gpt2_train.py) and the same batches, the first 10
//      iterations' losses match PyTorch's (float32, 1e-4 relative; gpt2_train_tiny_expected.safetensors
//      holds them and the run's settings);
//   2. resume: 8 iterations straight, and 4 iterations, a checkpoint, and a fresh model resumed
//      from it for the other 4, give the same losses;
//   3. bad input: a token outside the vocabulary, a checkpoint of other sizes, a too-short token
//      file are errors naming the value.
// Exit code 1 on any mismatch.
//
// --device cuda needs this program compiled by nvcc: examples/gpt2_train_cuda.cu. Without a GPU the
// CUDA build prints a message and exits with 77.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <numbers>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <tenet/tenet.hpp>

using namespace tenet;

#ifndef TENET_EXAMPLE_DATA_DIR
#define TENET_EXAMPLE_DATA_DIR "examples/data"
#endif

// ------------------------------------------------------------------------------------------------
// the model: sizes known at run time (one compiled program serves every configuration)

using tokens_t = Tensor<std::int64_t, shape<dyn, dyn>>;      // [B, T] token ids
using act_t = Tensor<float, shape<dyn, dyn, dyn>>;            // [B, T, C], the residual stream
template <class A>
using act_of = Tensor<A, shape<dyn, dyn, dyn>>;               // [B, T, C] in the activation dtype A
template <class A>
using heads_of = Tensor<A, shape<dyn, dyn, dyn, dyn>>;        // [B, H, T, hd]
using mat_t = Tensor<float, shape<dyn, dyn>>;
using vec_t = Tensor<float, shape<dyn>>;

struct gpt_config {
  std::int64_t vocab_size = 50304, block_size = 1024, n_layer = 12, n_head = 12, n_embd = 768;
  double dropout = 0.0;

  static gpt_config preset(const std::string& name) {
    if (name == "gpt2") return {};
    if (name == "tiny") return {256, 32, 2, 4, 32, 0.0};  // byte tokens: the self-check's model
    throw value_error("gpt2_train: unknown --config '" + name + "' (gpt2 or tiny)");
  }
  void check() const {
    for (auto [what, v] : {std::pair<const char*, std::int64_t>{"vocab_size", vocab_size}, {"block_size", block_size},
                           {"n_layer", n_layer}, {"n_head", n_head}, {"n_embd", n_embd}})
      if (v <= 0) throw value_error(std::string("gpt2_train: ") + what + " must be positive, got " + std::to_string(v));
    if (n_embd % n_head != 0)
      throw value_error("gpt2_train: n_embd " + std::to_string(n_embd) + " is not a multiple of n_head " +
                        std::to_string(n_head));
    if (vocab_size > 65536)
      throw value_error("gpt2_train: vocab_size " + std::to_string(vocab_size) +
                        " does not fit uint16 token files (at most 65536)");
    if (!(dropout >= 0 && dropout < 1)) throw value_error("gpt2_train: dropout must be in [0, 1)");
  }
  /// The sizes as "vocab_size=50304,block_size=1024,..." (a checkpoint's metadata).
  std::string text() const {
    return "vocab_size=" + std::to_string(vocab_size) + ",block_size=" + std::to_string(block_size) +
           ",n_layer=" + std::to_string(n_layer) + ",n_head=" + std::to_string(n_head) +
           ",n_embd=" + std::to_string(n_embd);
  }
};

/// y = x Wᵀ + b, W [out, in] (torch.nn.Linear's layout), N(0, std) weights and zero biases.
struct Linear : nn::Module {
  mat_t weight;
  vec_t bias;
  Linear(std::int64_t in, std::int64_t out, double std) : weight({out, in}), bias({out}) {
    register_parameter("weight", weight);
    register_parameter("bias", bias);
    nn::init::normal_(weight, 0.0, std);
    nn::init::zeros_(bias);
  }
  /// In x's dtype: with bfloat16 activations the float32 weights are cast to bfloat16 for the
  /// GEMM (the cast's backward brings the gradient back to float32), as autocast does.
  template <Expression X>
  auto operator()(const X& x) const {
    using A = value_type_of<X>;
    if constexpr (std::is_same_v<A, float>) {
      return linear(x, weight, bias);
    } else {
      const Tensor<A, shape<dyn>> b = cast<A>(bias);  // a tensor, so that the GEMM adds it (epilogue)
      return linear(x, cast<A>(weight), b);
    }
  }
};

struct LayerNorm : nn::Module {
  vec_t weight, bias;
  explicit LayerNorm(std::int64_t n) : weight({n}), bias({n}) {
    register_parameter("weight", weight);
    register_parameter("bias", bias);
    nn::init::ones_(weight);
    nn::init::zeros_(bias);
  }
  /// Statistics in float32 from the float32 residual stream; the result in the activation dtype A.
  template <class A = float, Expression X>
  auto operator()(const X& x) const {
    return cast<A>(layer_norm(x, weight, bias, 1e-5));
  }
};

struct Embedding : nn::Module {
  mat_t weight;
  Embedding(std::int64_t n, std::int64_t dim) : weight({n, dim}) {
    register_parameter("weight", weight);
    nn::init::normal_(weight, 0.0, 0.02);
  }
};

struct CausalSelfAttention : nn::Module {
  std::int64_t n_head, n_embd;
  double attn_dropout;
  Linear c_attn, c_proj;
  nn::Dropout resid_dropout;
  explicit CausalSelfAttention(const gpt_config& c)
      : n_head(c.n_head), n_embd(c.n_embd), attn_dropout(c.dropout), c_attn(c.n_embd, 3 * c.n_embd, 0.02),
        c_proj(c.n_embd, c.n_embd, 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer))), resid_dropout(c.dropout) {
    register_module("c_attn", c_attn);
    register_module("c_proj", c_proj);
  }
  template <class A>
  act_of<A> operator()(const act_of<A>& x) const {
    const std::int64_t B = x.size(0), T = x.size(1), C = n_embd, hd = C / n_head;
    const act_of<A> qkv = c_attn(x);  // q, k, v of every head from one GEMM
    auto heads = [&](std::int64_t i) -> heads_of<A> {  // [B, T, C] as [B, T, H, hd], heads moved forward
      return qkv.template narrow<2>(i * C, C).template reshape<dyn, dyn, dyn, dyn>(B, T, n_head, hd).template transpose<1, 2>();
    };
    const heads_of<A> y = scaled_dot_product_attention(
        heads(0), heads(1), heads(2), {.is_causal = true, .dropout_p = training() ? attn_dropout : 0.0});
    return resid_dropout(c_proj(y.template transpose<1, 2>().template reshape<dyn, dyn, dyn>(B, T, C)));
  }
};

struct MLP : nn::Module {
  Linear c_fc, c_proj;
  nn::Dropout dropout;
  explicit MLP(const gpt_config& c)
      : c_fc(c.n_embd, 4 * c.n_embd, 0.02),
        c_proj(4 * c.n_embd, c.n_embd, 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer))), dropout(c.dropout) {
    register_module("c_fc", c_fc);
    register_module("c_proj", c_proj);
  }
  template <class A>
  act_of<A> operator()(const act_of<A>& x) const {
    const act_of<A> h = gelu(c_fc(x), approximate_tanh);
    return dropout(c_proj(h));
  }
};

struct Block : nn::Module {
  LayerNorm ln_1, ln_2;
  CausalSelfAttention attn;
  MLP mlp;
  explicit Block(const gpt_config& c) : ln_1(c.n_embd), ln_2(c.n_embd), attn(c), mlp(c) {
    register_module("ln_1", ln_1);
    register_module("attn", attn);
    register_module("ln_2", ln_2);
    register_module("mlp", mlp);
  }
  /// The residual stream stays float32 (as under autocast, where a bf16 branch added to it
  /// promotes); the branches run in A.
  template <class A = float>
  act_t operator()(const act_t& x) const {
    const act_t a = x + attn.template operator()<A>(ln_1.template operator()<A>(x));
    return a + mlp.template operator()<A>(ln_2.template operator()<A>(a));
  }
};

struct Transformer : nn::Module {
  Embedding wte, wpe;
  nn::Dropout drop;
  nn::ModuleList<Block> h;
  LayerNorm ln_f;
  explicit Transformer(const gpt_config& c) : wte(c.vocab_size, c.n_embd), wpe(c.block_size, c.n_embd), drop(c.dropout),
                                              ln_f(c.n_embd) {
    register_module("wte", wte);
    register_module("wpe", wpe);
    register_module("drop", drop);
    for (std::int64_t i = 0; i < c.n_layer; ++i) h.append(c);
    register_module("h", h);
    register_module("ln_f", ln_f);
  }
};

/// nanoGPT's GPT: the parameter names are its state_dict's, less "lm_head.weight" (tied to
/// transformer.wte.weight: the same tensor, so not a second parameter).
struct GPT : nn::Module {
  gpt_config config;
  Transformer transformer;
  explicit GPT(const gpt_config& c) : config(c), transformer(c) { register_module("transformer", transformer); }

  /// Logits [B, T, V] of token ids [B, T] (T <= block_size), in the activation dtype A.
  template <class A = float>
  act_of<A> operator()(const tokens_t& idx) const {
    const std::int64_t T = idx.size(1);
    if (T > config.block_size)
      throw value_error("gpt2_train: a sequence of " + std::to_string(T) + " tokens is longer than the block size " +
                        std::to_string(config.block_size));
    act_t x = transformer.drop(embedding(idx, transformer.wte.weight) + transformer.wpe.weight.narrow<0>(0, T));
    for (const Block& b : transformer.h) x = b.template operator()<A>(x);
    return linear(transformer.ln_f.template operator()<A>(x), cast<A>(transformer.wte.weight));
  }
  /// The mean cross-entropy of the next tokens (in float32 from logits in A).
  template <class A = float>
  Tensor<float, shape<>> loss(const tokens_t& x, const tokens_t& y) const {
    const act_of<A> logits = this->template operator()<A>(x);
    return cross_entropy(cast<float>(logits.template flatten<0, 1>()), y.flatten<0, 1>());
  }
};

// ------------------------------------------------------------------------------------------------
// data

/// A token file (nanoGPT's .bin: little-endian uint16) held in memory.
struct token_file {
  std::string path;
  std::vector<std::uint16_t> tokens;

  static token_file load(const std::string& path, std::int64_t vocab_size, std::int64_t block_size) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw value_error("gpt2_train: cannot open the token file " + path);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (bytes.size() % 2 != 0)
      throw value_error("gpt2_train: " + path + " has " + std::to_string(bytes.size()) +
                        " bytes, not a whole number of uint16 tokens");
    token_file t{path, std::vector<std::uint16_t>(bytes.size() / 2)};
    for (std::size_t i = 0; i < t.tokens.size(); ++i)
      t.tokens[i] = static_cast<std::uint16_t>(static_cast<unsigned char>(bytes[2 * i]) |
                                               (static_cast<unsigned char>(bytes[2 * i + 1]) << 8));
    if (static_cast<std::int64_t>(t.tokens.size()) < block_size + 2)
      throw value_error("gpt2_train: " + path + " holds " + std::to_string(t.tokens.size()) +
                        " tokens, too few for windows of " + std::to_string(block_size + 1));
    for (std::size_t i = 0; i < t.tokens.size(); ++i)
      if (t.tokens[i] >= vocab_size)
        throw value_error("gpt2_train: " + path + ": token " + std::to_string(t.tokens[i]) + " at position " +
                          std::to_string(i) + " is outside the vocabulary of " + std::to_string(vocab_size));
    return t;
  }
};

inline std::uint64_t splitmix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Micro-batch m of a split: B windows (see the top of the file), inputs and targets on dev.
std::pair<tokens_t, tokens_t> get_batch(const token_file& data, std::int64_t B, std::int64_t T, std::uint64_t seed,
                                        std::uint64_t m, device dev) {
  tokens_t x({B, T}, tenet::cpu), y({B, T}, tenet::cpu);
  const auto span = static_cast<std::uint64_t>(data.tokens.size()) - static_cast<std::uint64_t>(T);
  std::int64_t* px = x.data();
  std::int64_t* py = y.data();
  for (std::int64_t w = 0; w < B; ++w) {
    const std::uint64_t k = m * static_cast<std::uint64_t>(B) + static_cast<std::uint64_t>(w);
    const std::size_t s = splitmix64(seed + k * 0x9E3779B97F4A7C15ull) % span;
    for (std::int64_t t = 0; t < T; ++t) {
      px[w * T + t] = data.tokens[s + static_cast<std::size_t>(t)];
      py[w * T + t] = data.tokens[s + static_cast<std::size_t>(t) + 1];
    }
  }
  return {x.to(dev), y.to(dev)};
}

// ------------------------------------------------------------------------------------------------
// training

struct train_options {
  std::string data_dir = TENET_EXAMPLE_DATA_DIR "/gpl-bytes";
  device dev = tenet::cpu;
  // --dtype: float32; bfloat16, the activations in bfloat16 (float32 parameters, residual stream,
  // normalization statistics and loss); autocast, float32 activations and autocast's bf16 matmuls
  enum class precision { float32, bfloat16, autocast } prec = precision::float32;
  std::int64_t batch_size = 12, grad_accum = 1;
  int max_iters = 200, warmup_iters = 20, lr_decay_iters = 200;
  double lr = 6e-4, min_lr = 6e-5, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, grad_clip = 1.0;
  int eval_interval = 50, eval_iters = 20, log_interval = 10;
  std::string out_dir;  // empty: no checkpoint, no log.csv
  bool resume = false;
  std::string init_from;
  std::uint64_t seed = 1337;
  bool quiet = false;
};

/// nanoGPT's schedule: linear warmup, cosine decay to min_lr at lr_decay_iters, min_lr after.
double lr_at(const train_options& o, int it) {
  if (it < o.warmup_iters) return o.lr * (it + 1) / (o.warmup_iters + 1);
  if (it > o.lr_decay_iters) return o.min_lr;
  const double ratio = static_cast<double>(it - o.warmup_iters) / std::max(1, o.lr_decay_iters - o.warmup_iters);
  return o.min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (o.lr - o.min_lr);
}

/// The parameters AdamW decays (matrices and embeddings) and the others (biases, LayerNorms).
std::pair<std::vector<nn::tensor_ref>, std::vector<nn::tensor_ref>> param_groups(const GPT& model) {
  std::vector<nn::tensor_ref> decay, no_decay;
  for (auto& p : model.parameters()) (p.sizes().size() >= 2 ? decay : no_decay).push_back(p);
  return {decay, no_decay};
}

/// A tensor_dict's entries whose names start with prefix, the prefix taken off.
tensor_dict with_prefix(const tensor_dict& d, const std::string& prefix) {
  tensor_dict out;
  for (const auto& [n, t] : d)
    if (n.rfind(prefix, 0) == 0) out.insert(n.substr(prefix.size()), t);
  return out;
}

void synchronize(device dev) {
#if defined(__CUDACC__)
  if (dev.type == device_type::cuda) tenet::cuda::synchronize();
#else
  (void)dev;
#endif
}

struct train_result {
  std::vector<double> losses;  // per iteration, from the resumed one on
  double val_loss = NAN;
  int start_iter = 0;
};

/// Trains `model` as `o` says (the checkpoint, when resuming, sets the iteration to start from).
train_result train(GPT& model, const train_options& o) {
  const gpt_config& c = model.config;
  const std::int64_t B = o.batch_size, T = c.block_size, K = o.grad_accum;
  if (B <= 0 || K <= 0) throw value_error("gpt2_train: --batch-size and --grad-accum must be positive");
  if (o.prec != train_options::precision::float32 && o.dev.is_cpu())
    throw value_error("gpt2_train: --dtype bfloat16 and autocast run on CUDA (use --device cuda)");
  const token_file train_data = token_file::load(o.data_dir + "/train.bin", c.vocab_size, T);
  const token_file val_data = token_file::load(o.data_dir + "/val.bin", c.vocab_size, T);

  auto [decay, no_decay] = param_groups(model);
  optim::AdamW opt_decay(decay, {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .weight_decay = o.weight_decay});
  optim::AdamW opt_no_decay(no_decay, {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .weight_decay = 0.0});

  namespace fs = std::filesystem;
  const std::string ckpt = o.out_dir.empty() ? "" : o.out_dir + "/ckpt.safetensors";
  train_result r;
  if (o.resume) {
    if (ckpt.empty()) throw value_error("gpt2_train: --resume needs --out-dir (where ckpt.safetensors is)");
    safetensors::metadata meta;
    const tensor_dict d = safetensors::load_file(ckpt, &meta);
    if (meta["config"] != c.text())
      throw value_error("gpt2_train: " + ckpt + " holds a model of " + meta["config"] + ", this run's is " + c.text());
    model.load_state_dict(with_prefix(d, "model."));
    opt_decay.load_state_dict(with_prefix(d, "optim.decay."));
    opt_no_decay.load_state_dict(with_prefix(d, "optim.no_decay."));
    r.start_iter = std::stoi(meta["iter_num"]);
    if (!o.quiet) std::printf("resumed from %s at iteration %d\n", ckpt.c_str(), r.start_iter);
  }
  std::ofstream csv;
  if (!o.out_dir.empty()) {
    fs::create_directories(o.out_dir);
    const bool append = o.resume && fs::exists(o.out_dir + "/log.csv");
    csv.open(o.out_dir + "/log.csv", append ? std::ios::app : std::ios::trunc);
    if (!csv) throw value_error("gpt2_train: cannot write " + o.out_dir + "/log.csv");
    if (!append) csv << "iter,loss,val_loss,lr,ms,tokens_per_s\n";
  }
  auto save = [&](int iter) {
    tensor_dict d;
    for (const auto& [n, t] : model.state_dict()) d.insert("model." + n, t);
    for (const auto& [n, t] : opt_decay.state_dict()) d.insert("optim.decay." + n, t);
    for (const auto& [n, t] : opt_no_decay.state_dict()) d.insert("optim.no_decay." + n, t);
    safetensors::save_file(d, ckpt, {{"format", "tenet-gpt2-train"}, {"config", c.text()},
                                     {"iter_num", std::to_string(iter)}});
  };
  // the loss in the training step's precision (as nanoGPT evaluates under its autocast context):
  // with float32 activations the evaluation of a bfloat16 run took the float32 attention (the
  // math variant's [B, H, T, T] scores) and gave another model's numbers
  auto loss_in_precision = [&](const tokens_t& x, const tokens_t& y) -> Tensor<float, shape<>> {
    std::optional<autocast> ac;
    if (o.prec == train_options::precision::autocast) ac.emplace(o.dev, dtype::bfloat16);
#if defined(__CUDACC__)  // bfloat16 activations: the CUDA build's (the CPU build does not compile them)
    if (o.prec == train_options::precision::bfloat16) return model.loss<bfloat16>(x, y);
#endif
    return model.loss(x, y);
  };
  auto estimate = [&](const token_file& data, std::uint64_t seed) {
    no_grad guard;
    model.eval();
    double total = 0;
    for (int i = 0; i < o.eval_iters; ++i) {
      const auto [x, y] = get_batch(data, B, T, seed, static_cast<std::uint64_t>(i), o.dev);
      total += static_cast<double>(loss_in_precision(x, y).cpu().item());
    }
    model.train();
    return total / o.eval_iters;
  };
  const std::vector<nn::tensor_ref> params = model.parameters();
  const double tokens_per_iter = static_cast<double>(B * T * K);
  // training time since the last read-back of a loss (evaluation excluded), and its iterations
  auto t_last = std::chrono::steady_clock::now();
  double train_ms = 0;
  int iters_timed = 0;
  model.train();
  for (int it = r.start_iter; it <= o.max_iters; ++it) {
    const double lr = lr_at(o, it);
    opt_decay.set_lr(lr);
    opt_no_decay.set_lr(lr);
    std::string val_text;
    if (o.eval_interval > 0 && o.eval_iters > 0 && (it % o.eval_interval == 0 || it == o.max_iters)) {
      synchronize(o.dev);
      train_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_last).count();
      const double tl = estimate(train_data, o.seed + 1), vl = estimate(val_data, o.seed + 2);
      r.val_loss = vl;
      val_text = std::to_string(vl);
      if (!o.quiet) std::printf("step %d: train loss %.4f, val loss %.4f\n", it, tl, vl);
      if (!ckpt.empty() && it > r.start_iter) save(it);
      t_last = std::chrono::steady_clock::now();  // evaluation is not training time
    }
    if (it == o.max_iters) break;
    Tensor<float, shape<>> loss_sum;
    for (std::int64_t k = 0; k < K; ++k) {
      const auto [x, y] = get_batch(train_data, B, T, o.seed, static_cast<std::uint64_t>(it * K + k), o.dev);
      const Tensor<float, shape<>> loss = loss_in_precision(x, y) / static_cast<double>(K);
      loss.backward();
      loss_sum = k == 0 ? loss.detach() : Tensor<float, shape<>>(loss_sum + loss.detach());
    }
    if (o.grad_clip > 0) nn::utils::clip_grad_norm_(params, o.grad_clip);
    opt_decay.step();
    opt_no_decay.step();
    opt_decay.zero_grad();
    opt_no_decay.zero_grad();
    ++iters_timed;
    const bool log = o.log_interval > 0 && (it % o.log_interval == 0 || it + 1 == o.max_iters);
    if (log || csv.is_open()) {
      const double loss = static_cast<double>(loss_sum.cpu().item());  // waits for the device
      r.losses.push_back(loss);
      synchronize(o.dev);
      const auto now = std::chrono::steady_clock::now();
      // the mean over the iterations since the last read-back (one, when every iteration is read)
      const double ms = (train_ms + std::chrono::duration<double, std::milli>(now - t_last).count()) / iters_timed;
      t_last = now;
      train_ms = 0;
      iters_timed = 0;
      if (log && !o.quiet)
        std::printf("iter %d: loss %.4f, lr %.3e, time %.2f ms, %.0f tokens/s\n", it, loss, lr, ms,
                    tokens_per_iter / ms * 1e3);
      if (csv.is_open())
        csv << it << ',' << loss << ',' << val_text << ',' << lr << ',' << ms << ',' << tokens_per_iter / ms * 1e3
            << '\n';
    } else {
      r.losses.push_back(NAN);  // not read back (that would wait for the device every iteration)
    }
    std::fflush(stdout);
  }
  return r;
}

// ------------------------------------------------------------------------------------------------
// the self-check

/// Largest |a - b| / max(|b|, 1e-12) over the first n values.
double max_rel(const std::vector<double>& a, const std::vector<double>& b, std::size_t n) {
  double m = 0;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-12));
  return m;
}

std::string sci(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2e", x);
  return b;
}

/// Runs f and returns the message of the tenet error it throws ("" when none).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const error& e) {
    return e.what();
  }
  return "";
}

int self_check(device dev) {
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
    failures += ok ? 0 : 1;
  };
  const std::string data_dir = TENET_EXAMPLE_DATA_DIR;

  // 1. parity with PyTorch
  {
    safetensors::metadata meta;
    const tensor_dict ref = safetensors::load_file(data_dir + "/gpt2_train_tiny_expected.safetensors", &meta);
    auto num = [&](const char* k) { return std::stod(meta.at(k)); };
    gpt_config c = gpt_config::preset("tiny");
    train_options o;
    o.data_dir = data_dir + "/gpl-bytes";
    o.dev = dev;
    o.batch_size = static_cast<std::int64_t>(num("batch_size"));
    o.grad_accum = static_cast<std::int64_t>(num("grad_accum"));
    o.max_iters = static_cast<int>(num("max_iters"));
    o.warmup_iters = static_cast<int>(num("warmup_iters"));
    o.lr_decay_iters = static_cast<int>(num("lr_decay_iters"));
    o.lr = num("lr");
    o.min_lr = num("min_lr");
    o.weight_decay = num("weight_decay");
    o.beta1 = num("beta1");
    o.beta2 = num("beta2");
    o.grad_clip = num("grad_clip");
    o.seed = static_cast<std::uint64_t>(num("seed"));
    o.eval_interval = 0;
    o.log_interval = 1;
    o.quiet = true;
    GPT model(c);
    model.load_state_dict(safetensors::load_file(data_dir + "/gpt2_train_tiny_init.safetensors"));
    model.to(dev);
    const train_result r = train(model, o);
    const Tensor<double, shape<dyn>> want_t = ref.at("losses").as<double, shape<dyn>>();
    std::vector<double> want(static_cast<std::size_t>(want_t.numel()));
    for (std::int64_t i = 0; i < want_t.numel(); ++i) want[static_cast<std::size_t>(i)] = want_t(i);
    const bool same_count = r.losses.size() == want.size();
    const double rel = same_count ? max_rel(r.losses, want, want.size()) : INFINITY;
    std::printf("losses (tenet / torch):");
    for (std::size_t i = 0; i < r.losses.size() && i < want.size(); ++i)
      std::printf(" %.5f/%.5f", r.losses[i], want[i]);
    std::printf("\n");
    expect(same_count && rel < 1e-4, "the first " + std::to_string(want.size()) +
                                         " losses match PyTorch's from the same weights and batches (largest "
                                         "relative difference " + sci(rel) + ")");
    expect(same_count && want.back() < want.front() - 0.1, "the loss falls over those iterations");
  }

  // 2. resume: straight vs. checkpoint + fresh model
  {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("tenet_gpt2_train_" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::remove_all(dir);
    gpt_config c = gpt_config::preset("tiny");
    train_options o;
    o.data_dir = data_dir + "/gpl-bytes";
    o.dev = dev;
    o.batch_size = 4;
    o.grad_accum = 2;
    o.max_iters = 8;
    o.warmup_iters = 2;
    o.lr_decay_iters = 8;
    o.lr = 3e-3;
    o.min_lr = 3e-4;
    o.eval_interval = 4;
    o.eval_iters = 2;
    o.log_interval = 1;
    o.quiet = true;
    manual_seed(7);
    GPT a(c);
    a.to(dev);
    const train_result straight = train(a, o);

    manual_seed(7);
    GPT b(c);
    b.to(dev);
    o.out_dir = dir.string();
    o.max_iters = 4;
    (void)train(b, o);  // writes the checkpoint at iteration 4
    manual_seed(99);    // other weights: the checkpoint must bring the trained ones back
    GPT b2(c);
    b2.to(dev);
    o.max_iters = 8;
    o.resume = true;
    const train_result resumed = train(b2, o);
    const bool ok = straight.losses.size() == 8 && resumed.losses.size() == 4 && resumed.start_iter == 4;
    double rel = INFINITY;
    if (ok) rel = max_rel(std::vector<double>(straight.losses.begin() + 4, straight.losses.end()), resumed.losses, 4);
    expect(ok && rel < 1e-6, "a run resumed from its checkpoint continues as the straight run (largest relative "
                             "difference " + sci(rel) + ")");
    std::ifstream csv(dir / "log.csv");
    int rows = -1;
    for (std::string line; std::getline(csv, line);) ++rows;
    expect(rows == 8, "log.csv has a row per iteration (" + std::to_string(rows) + ")");

    // 3. bad input
    gpt_config other = c;
    other.n_embd = 64;
    GPT wrong(other);
    o.max_iters = 9;
    const std::string e1 = error_of([&] { (void)train(wrong, o); });
    expect(e1.find("n_embd=32") != std::string::npos && e1.find("n_embd=64") != std::string::npos,
           "a checkpoint of other sizes is refused naming both: " + e1);
    const fs::path bad = dir / "bad";
    fs::create_directories(bad);
    {
      std::ofstream f(bad / "train.bin", std::ios::binary);
      for (int i = 0; i < 100; ++i) f.put(static_cast<char>(i == 50 ? 0x2C : 'a')).put(static_cast<char>(i == 50 ? 1 : 0));
      std::ofstream g(bad / "val.bin", std::ios::binary);
      g << "abc";
    }
    const std::string e2 = error_of([&] { (void)token_file::load((bad / "train.bin").string(), 256, 32); });
    expect(e2.find("token 300 at position 50") != std::string::npos, "a token outside the vocabulary: " + e2);
    const std::string e3 = error_of([&] { (void)token_file::load((bad / "val.bin").string(), 256, 32); });
    expect(e3.find("3 bytes") != std::string::npos, "a file of an odd byte count: " + e3);
    const std::string e4 = error_of([&] { (void)token_file::load((bad / "train.bin").string(), 512, 128); });
    expect(e4.find("100 tokens") != std::string::npos, "a file too short for a window: " + e4);
    fs::remove_all(dir);
  }
  std::printf("%s\n", failures ? "self-check FAILED" : "self-check passed");
  return failures ? 1 : 0;
}

// ------------------------------------------------------------------------------------------------

int main(int argc, char** argv) {
  device dev = tenet::cpu;
  std::optional<gpt_config> config;
  train_options o;
  std::map<std::string, std::string> overrides;
  bool any = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw value_error("gpt2_train: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--device") {
      const std::string d = value();
      if (d == "cuda") dev = tenet::cuda(0);
      else if (d != "cpu") throw value_error("gpt2_train: unknown device '" + d + "' (cpu or cuda)");
      continue;
    }
    any = true;
    if (a == "--config") config = gpt_config::preset(value());
    else if (a == "--resume") o.resume = true;
    else if (a == "--dtype") {
      const std::string d = value();
      if (d == "bfloat16") o.prec = train_options::precision::bfloat16;
      else if (d == "autocast") o.prec = train_options::precision::autocast;
      else if (d != "float32")
        throw value_error("gpt2_train: --dtype float32, bfloat16 or autocast, not '" + d + "'");
    } else if (a.rfind("--", 0) == 0) overrides[a.substr(2)] = value();
    else throw value_error("gpt2_train: unexpected argument '" + a + "' (see the top of examples/gpt2_train.cpp)");
  }
#if defined(__CUDACC__)
  if (dev.type == device_type::cuda && !tenet::cuda::is_available()) {
    std::cout << "gpt2_train: no CUDA device here; skipped (exit code 77)\n";
    return 77;
  }
#else
  if (!dev.is_cpu()) {
    std::cerr << "gpt2_train: --device cuda needs the CUDA build of this program (gpt2_train_cuda, built by nvcc "
                 "with -DTENET_CUDA=ON)\n";
    return 2;
  }
#endif
  if (!any) return self_check(dev);

  gpt_config c = config.value_or(gpt_config::preset("tiny"));
  o.dev = dev;
  for (const auto& [k, v] : overrides) {
    auto integer = [&] { return std::stoll(v); };
    if (k == "data") o.data_dir = v;
    else if (k == "out-dir") o.out_dir = v;
    else if (k == "init-from") o.init_from = v;
    else if (k == "batch-size") o.batch_size = integer();
    else if (k == "grad-accum") o.grad_accum = integer();
    else if (k == "max-iters") o.max_iters = static_cast<int>(integer());
    else if (k == "warmup-iters") o.warmup_iters = static_cast<int>(integer());
    else if (k == "lr-decay-iters") o.lr_decay_iters = static_cast<int>(integer());
    else if (k == "eval-interval") o.eval_interval = static_cast<int>(integer());
    else if (k == "eval-iters") o.eval_iters = static_cast<int>(integer());
    else if (k == "log-interval") o.log_interval = static_cast<int>(integer());
    else if (k == "seed") o.seed = static_cast<std::uint64_t>(integer());
    else if (k == "lr") o.lr = std::stod(v);
    else if (k == "min-lr") o.min_lr = std::stod(v);
    else if (k == "weight-decay") o.weight_decay = std::stod(v);
    else if (k == "beta1") o.beta1 = std::stod(v);
    else if (k == "beta2") o.beta2 = std::stod(v);
    else if (k == "grad-clip") o.grad_clip = std::stod(v);
    else if (k == "dropout") c.dropout = std::stod(v);
    else if (k == "block-size") c.block_size = integer();
    else if (k == "n-layer") c.n_layer = integer();
    else if (k == "n-head") c.n_head = integer();
    else if (k == "n-embd") c.n_embd = integer();
    else if (k == "vocab-size") c.vocab_size = integer();
    else throw value_error("gpt2_train: unknown option --" + k + " (see the top of examples/gpt2_train.cpp)");
  }
  c.check();
  manual_seed(o.seed);
  GPT model(c);
  if (!o.init_from.empty()) {
    const tensor_dict d = safetensors::load_file(o.init_from);
    const tensor_dict m = with_prefix(d, "model.");
    model.load_state_dict(m.size() ? m : d);
  }
  model.to(dev);
  std::printf("GPT: %s, %lld parameters; batch %lld x %lld tokens x %lld accumulation steps on %s%s\n",
              c.text().c_str(), static_cast<long long>(model.num_parameters()), static_cast<long long>(o.batch_size),
              static_cast<long long>(c.block_size), static_cast<long long>(o.grad_accum), dev.str().c_str(),
              o.prec == train_options::precision::bfloat16 ? " (bfloat16 activations)"
              : o.prec == train_options::precision::autocast ? " (bf16 autocast)" : "");
  const train_result r = train(model, o);
#if defined(__CUDACC__)
  if (dev.type == device_type::cuda)
    std::printf("peak CUDA memory: %.2f GiB\n",
                static_cast<double>(tenet::cuda::memory_stats().peak_allocated) / (1024.0 * 1024 * 1024));
#endif
  if (std::isfinite(r.val_loss)) std::printf("final val loss %.4f\n", r.val_loss);
  return 0;
}
