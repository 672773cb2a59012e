// A small character-level GPT (after Karpathy's nanoGPT) trained from scratch on the text of the GNU
// GPL version 3 (examples/data/gpl-3.0.txt, 35 KB of English; see examples/data/README.md):
// token and learned position embeddings, pre-LayerNorm transformer blocks (causal multi-head
// self-attention through scaled_dot_product_attention, then a 4x GELU MLP, each added to the
// residual stream), a final LayerNorm and a linear head to the vocabulary (the text's
// distinct characters). Eager autograd, AdamW with a cosine learning rate and gradient clipping.
//
//   nanogpt [--device cpu|cuda] [--steps N] [path/to/text.txt]
//
// The first 90% of the text trains, the last 10% validates. The program prints the train and
// validation losses every 50 steps, the loss of a unigram model (the train split's character
// frequencies, add-one smoothed) on the validation split, and a sampled continuation of a prompt.
// It exits with 1 unless the final validation loss is below 75% of the unigram model's (a model
// that learned nothing beyond character frequencies cannot get there), and also when changing the
// last token of a window changes the logits of an earlier position (the attention must be causal).
// Deterministic for a seed (tenet::manual_seed for the parameters and dropout, a fixed std::mt19937
// for the batches and the sampling).
//
// --device cuda trains on cuda(0). CUDA code must be compiled by nvcc: examples/nanogpt_cuda.cu is
// this program built as CUDA (TENET_CUDA=ON); the C++ build refuses --device cuda. Without a GPU
// the CUDA build prints a message and exits with 77 (CTest's skip code for example.nanogpt_cuda).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <tenet/tenet.hpp>

using namespace tenet;

#ifndef TENET_EXAMPLE_DATA_DIR
#define TENET_EXAMPLE_DATA_DIR "examples/data"
#endif

// The model's sizes. The vocabulary is a run-time size (the characters of the text); the widths
// are static, the batch and the sequence length are `dyn`, so one set of kernels serves training
// (T = block_size) and generation (T = 1 .. block_size).
constexpr int n_embd = 64, n_head = 4, head_dim = n_embd / n_head, n_layer = 2, block_size = 32;
static_assert(n_embd % n_head == 0);

using tokens_t = Tensor<std::int64_t, shape<dyn, dyn>>;  // [B, T] token ids
using act_t = Tensor<float, shape<dyn, dyn, n_embd>>;     // [B, T, C] the residual stream

/// nanoGPT's initialization: weights N(0, 0.02) (residual projections 0.02 / sqrt(2 n_layer)), biases 0.
template <int In, int Out>
void init_linear(nn::Linear<In, Out>& l, double std = 0.02) {
  nn::init::normal_(l.weight, 0.0, std);
  nn::init::zeros_(l.bias);
}

struct CausalSelfAttention : nn::Module {
  nn::Linear<n_embd, 3 * n_embd> c_attn;  // q, k, v for all heads in one GEMM
  nn::Linear<n_embd, n_embd> c_proj;
  nn::Dropout resid_dropout;
  double attn_dropout;  // on the attention weights, inside scaled_dot_product_attention
  TENET_MODULE(c_attn, c_proj, resid_dropout);  // registered by name, as torch's attributes
  explicit CausalSelfAttention(double p) : resid_dropout(p), attn_dropout(p) {
    init_linear(c_attn);
    init_linear(c_proj, 0.02 / std::sqrt(2.0 * n_layer));
  }
  act_t operator()(const act_t& x) const {
    const std::int64_t B = x.size(0), T = x.size(1);
    const Tensor<float, shape<dyn, dyn, 3 * n_embd>> qkv = c_attn(x);
    // one third of qkv, [B, T, C] viewed as [B, T, nh, hs] and the heads moved forward: [B, nh, T, hs]
    auto heads = [&](int i) {
      return qkv.narrow<2>(i * n_embd, n_embd).reshape<dyn, dyn, n_head, head_dim>(B, T).transpose<1, 2>();
    };
    // softmax(q kᵀ / sqrt(hs)) v over the earlier positions only: the flash kernel (tiled, the
    // causal triangle never materialized), dropout on its weights in training
    const Tensor<float, shape<dyn, n_head, dyn, head_dim>> y = scaled_dot_product_attention(
        heads(0), heads(1), heads(2), {.is_causal = true, .dropout_p = training() ? attn_dropout : 0.0});
    // heads side by side again: [B, T, C]
    return resid_dropout(c_proj(y.transpose<1, 2>().reshape<dyn, dyn, n_embd>(B, T)));
  }
};

struct MLP : nn::Module {
  nn::Linear<n_embd, 4 * n_embd> c_fc;
  nn::Linear<4 * n_embd, n_embd> c_proj;
  nn::Dropout dropout;
  TENET_MODULE(c_fc, c_proj, dropout);
  explicit MLP(double p) : dropout(p) {
    init_linear(c_fc);
    init_linear(c_proj, 0.02 / std::sqrt(2.0 * n_layer));
  }
  act_t operator()(const act_t& x) const {
    const Tensor<float, shape<dyn, dyn, 4 * n_embd>> h = gelu(c_fc(x));
    return dropout(c_proj(h));
  }
};

struct Block : nn::Module {
  nn::LayerNorm<n_embd> ln_1, ln_2;
  CausalSelfAttention attn;
  MLP mlp;
  TENET_MODULE(ln_1, attn, ln_2, mlp);
  explicit Block(double p) : attn(p), mlp(p) {}
  act_t operator()(const act_t& x) const {
    const act_t a = x + attn(ln_1(x));
    return a + mlp(ln_2(a));
  }
};

struct GPT : nn::Module {
  std::int64_t vocab_size;
  Tensor<float, shape<dyn, n_embd>> wte;  // token embedding [V, C]
  nn::Embedding<block_size, n_embd> wpe;  // position embedding [block_size, C]
  nn::Dropout drop;
  nn::ModuleList<Block> h;
  nn::LayerNorm<n_embd> ln_f;
  Tensor<float, shape<dyn, n_embd>> lm_head;  // [V, C], no bias
  TENET_MODULE(wte, wpe, drop, h, ln_f, lm_head);

  GPT(std::int64_t vocab, double p) : vocab_size(vocab), wte({vocab, n_embd}), drop(p), lm_head({vocab, n_embd}) {
    for (int i = 0; i < n_layer; ++i) h.append(p);
    nn::init::normal_(wte, 0.0, 0.02);
    nn::init::normal_(wpe.weight, 0.0, 0.02);
    nn::init::normal_(lm_head, 0.0, 0.02);
  }
  /// Logits [B, T, V] for token ids [B, T] (T <= block_size).
  Tensor<float, shape<dyn, dyn, dyn>> operator()(const tokens_t& idx) const {
    const std::int64_t T = idx.size(1);
    if (T > block_size)
      throw value_error("nanogpt: a sequence of " + std::to_string(T) + " tokens is longer than the block size " +
                        std::to_string(block_size));
    const Tensor<std::int64_t, shape<dyn>> pos = arange<std::int64_t>(static_cast<double>(T)).to(idx.device());
    act_t x = drop(embedding(idx, wte) + wpe(pos));  // [B, T, C] + [T, C]
    for (const Block& b : h) x = b(x);
    return linear(ln_f(x), lm_head);
  }
};

/// A batch of B random windows of the split: inputs [B, T] and targets (the next characters).
std::pair<tokens_t, tokens_t> get_batch(const std::vector<std::int64_t>& data, std::int64_t B, std::mt19937& rng,
                                        device dev) {
  tokens_t x({B, block_size}), y({B, block_size});
  const auto starts = static_cast<std::uint32_t>(data.size() - block_size);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::size_t s = rng() % starts;
    for (std::int64_t t = 0; t < block_size; ++t) {
      x(b, t) = data[s + static_cast<std::size_t>(t)];
      y(b, t) = data[s + static_cast<std::size_t>(t) + 1];
    }
  }
  return {x.to(dev), y.to(dev)};
}

Tensor<float, shape<>> loss_of(const GPT& model, const tokens_t& x, const tokens_t& y) {
  const auto logits = model(x);
  return cross_entropy(logits.flatten<0, 1>(), y.flatten<0, 1>());  // over the B*T positions
}

/// The mean loss over `iters` batches of the split (the same batches every call: a fixed seed).
double estimate_loss(GPT& model, const std::vector<std::int64_t>& data, std::int64_t B, int iters, device dev) {
  no_grad guard;
  model.eval();
  std::mt19937 rng(4321);
  double total = 0;
  for (int i = 0; i < iters; ++i) {
    const auto [x, y] = get_batch(data, B, rng, dev);
    total += static_cast<double>(loss_of(model, x, y).cpu().item());
  }
  model.train();
  return total / iters;
}

/// Continues the prompt by `n` characters sampled from the model at the given temperature.
std::string generate(GPT& model, const std::string& prompt, int n, double temperature, const std::array<int, 256>& stoi,
                     const std::string& itos, device dev) {
  no_grad guard;
  model.eval();
  std::vector<std::int64_t> ids;
  for (unsigned char c : prompt)
    if (stoi[c] >= 0) ids.push_back(stoi[c]);
  if (ids.empty()) ids.push_back(0);
  std::mt19937 rng(2024);
  std::string out = prompt;
  for (int i = 0; i < n; ++i) {
    const auto T = std::min<std::int64_t>(static_cast<std::int64_t>(ids.size()), block_size);
    tokens_t ctx({1, T});
    for (std::int64_t t = 0; t < T; ++t) ctx(0, t) = ids[ids.size() - static_cast<std::size_t>(T - t)];
    const auto logits = model(ctx.to(dev));
    const Tensor<float, shape<dyn>> last = logits.select<0>(0).select<0>(T - 1).cpu();  // [V]
    std::vector<double> w(static_cast<std::size_t>(last.numel()));
    double mx = -std::numeric_limits<double>::infinity();
    for (std::int64_t v = 0; v < last.numel(); ++v) mx = std::max(mx, static_cast<double>(last(v)));
    for (std::int64_t v = 0; v < last.numel(); ++v)
      w[static_cast<std::size_t>(v)] = std::exp((static_cast<double>(last(v)) - mx) / temperature);
    std::discrete_distribution<std::int64_t> pick(w.begin(), w.end());
    const std::int64_t next = pick(rng);
    ids.push_back(next);
    out += itos[static_cast<std::size_t>(next)];
  }
  model.train();
  return out;
}

/// The largest change of the logits at positions 0 .. T-2 when the last token of a validation window
/// changes: 0 when no position attends to a later one (the causal mask works).
double causality_leak(GPT& model, const std::vector<std::int64_t>& data, std::int64_t V, device dev) {
  no_grad guard;
  model.eval();
  tokens_t x({1, block_size});
  for (std::int64_t t = 0; t < block_size; ++t) x(0, t) = data[static_cast<std::size_t>(t)];
  tokens_t x2 = x.clone();
  x2(0, block_size - 1) = (x(0, block_size - 1) + 1) % V;
  const Tensor<float, shape<dyn, dyn, dyn>> a = model(x.to(dev)).cpu(), b = model(x2.to(dev)).cpu();
  double leak = 0;
  for (std::int64_t t = 0; t + 1 < block_size; ++t)
    for (std::int64_t v = 0; v < V; ++v) leak = std::max(leak, static_cast<double>(std::abs(a(0, t, v) - b(0, t, v))));
  model.train();
  return leak;
}

int main(int argc, char** argv) {
  std::string path = TENET_EXAMPLE_DATA_DIR "/gpl-3.0.txt";
  device dev = tenet::cpu;
  int steps = 500;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) {
      const std::string d = argv[++i];
      if (d == "cuda") dev = tenet::cuda(0);
      else if (d != "cpu") throw value_error("nanogpt: unknown device '" + d + "' (cpu or cuda)");
    } else if (a == "--steps" && i + 1 < argc) {
      steps = std::stoi(argv[++i]);
      if (steps <= 0) throw value_error("nanogpt: --steps needs a positive number");
    } else {
      path = a;
    }
  }
#if defined(__CUDACC__)
  if (dev.type == device_type::cuda && !tenet::cuda::is_available()) {
    std::cout << "nanogpt: no CUDA device here; skipped (exit code 77)\n";
    return 77;
  }
#else
  if (!dev.is_cpu()) {
    std::cerr << "nanogpt: --device cuda needs the CUDA build of this program (nanogpt_cuda, built by nvcc "
                 "with -DTENET_CUDA=ON)\n";
    return 2;
  }
#endif

  // --- data: the characters of the text are the vocabulary ---
  std::ifstream in(path, std::ios::binary);
  if (!in) throw value_error("nanogpt: cannot open " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  std::array<int, 256> stoi;
  stoi.fill(-1);
  for (unsigned char c : text) stoi[c] = 0;
  std::string itos;
  for (int c = 0; c < 256; ++c)
    if (stoi[static_cast<std::size_t>(c)] == 0) {
      stoi[static_cast<std::size_t>(c)] = static_cast<int>(itos.size());
      itos += static_cast<char>(c);
    }
  const auto V = static_cast<std::int64_t>(itos.size());
  std::vector<std::int64_t> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) ids[i] = stoi[static_cast<unsigned char>(text[i])];
  const std::size_t n_train = text.size() * 9 / 10;
  const std::vector<std::int64_t> train(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n_train));
  const std::vector<std::int64_t> val(ids.begin() + static_cast<std::ptrdiff_t>(n_train), ids.end());
  if (train.size() <= block_size + 1 || val.size() <= block_size + 1)
    throw value_error("nanogpt: " + path + " is too short (" + std::to_string(text.size()) +
                      " characters) for windows of " + std::to_string(block_size + 1));
  std::printf("text: %s, %zu characters, vocabulary %lld, %zu train / %zu val\n", path.c_str(), text.size(),
              static_cast<long long>(V), train.size(), val.size());

  // --- the baseline: a unigram model of the train split (add-one smoothed), scored on val ---
  std::vector<double> counts(static_cast<std::size_t>(V), 1.0);
  for (auto t : train) counts[static_cast<std::size_t>(t)] += 1.0;
  const double total = static_cast<double>(train.size()) + static_cast<double>(V);
  double unigram = 0;
  for (auto t : val) unigram -= std::log(counts[static_cast<std::size_t>(t)] / total);
  unigram /= static_cast<double>(val.size());
  std::printf("unigram baseline (train character frequencies): val loss %.4f; uniform over the vocabulary: %.4f\n",
              unigram, std::log(static_cast<double>(V)));

  // --- the model ---
  manual_seed(1337);
  const double dropout_p = 0.1;
  GPT model(V, dropout_p);
  model.to(dev);
  std::printf("GPT: %d layers, %d heads, n_embd %d, block %d, dropout %.2f: %lld parameters; training on %s\n", n_layer,
              n_head, n_embd, block_size, dropout_p, static_cast<long long>(model.num_parameters()), dev.str().c_str());

  const std::int64_t batch = 32;
  const double lr = 3e-3;
  optim::AdamW opt(model.parameters(), {.lr = lr, .beta2 = 0.99, .weight_decay = 0.01});
  optim::CosineAnnealingLR sched(opt, steps, lr / 10);
  std::mt19937 rng(1234);
  const int eval_every = 50, eval_iters = 8;

  const auto t0 = std::chrono::steady_clock::now();
  double train_loss = 0, val_loss = 0;
  for (int step = 0; step <= steps; ++step) {
    if (step % eval_every == 0 || step == steps) {
      train_loss = estimate_loss(model, train, batch, eval_iters, dev);
      val_loss = estimate_loss(model, val, batch, eval_iters, dev);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("step %4d  train loss %.4f  val loss %.4f  (%.1f s)\n", step, train_loss, val_loss, secs);
      std::fflush(stdout);
    }
    if (step == steps) break;
    const auto [x, y] = get_batch(train, batch, rng, dev);
    const Tensor<float, shape<>> loss = loss_of(model, x, y);
    loss.backward();
    nn::utils::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    opt.zero_grad();
    sched.step();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("trained %d steps of %lld x %d tokens in %.2f s on %s\n", steps, static_cast<long long>(batch),
              block_size, secs, dev.str().c_str());

  const std::string sample = generate(model, "This License", 240, 0.8, stoi, itos, dev);
  std::printf("--- sample (temperature 0.8) ---\n%s\n---\n", sample.c_str());

  const double leak = causality_leak(model, val, V, dev);
  std::printf("causality: changing the last token of a window changes the earlier positions' logits by %.3g\n", leak);
  if (leak > 1e-5) {
    std::cerr << "nanogpt: the attention sees future positions (the causal mask does not work)\n";
    return 1;
  }
  std::printf("final: train loss %.4f, val loss %.4f, unigram baseline %.4f (val / unigram = %.3f)\n", train_loss,
              val_loss, unigram, val_loss / unigram);
  if (!std::isfinite(val_loss) || val_loss >= 0.75 * unigram) {
    std::cerr << "nanogpt: the validation loss is not below 75% of the unigram baseline: the model did not learn\n";
    return 1;
  }
  return 0;
}
