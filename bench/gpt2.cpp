// bench-workloads: gpt2_small_fwd_b1_t256 gpt2_small_gen128_p16
// Workload gpt2: GPT-2 small (124 M parameters, random weights N(0, 0.02), fp32) on the CPU, the
// model of examples/gpt2.cpp (HF's layout, scaled_dot_product_attention, tied lm_head):
//   gpt2_small_fwd_b1_t256  one forward of 1 x 256 tokens to the logits [1, 256, 50257]; tokens/s
//   gpt2_small_gen128_p16   greedy generation of 128 tokens after a 16-token prompt with the KV
//                           cache (the prompt's prefill included); new tokens/s. Timed over at
//                           least 3 runs (one run is seconds), as its twin in bench/torch_twin.py.
#define GPT2_MODEL_ONLY 1
#include "../examples/gpt2.cpp"

#include "harness.hpp"

int main() {
  manual_seed(0);
  GPT2<gpt2_small> model;
  model.init_weights();
  std::mt19937_64 rng(0);
  tokens_t idx({1, 256});
  for (std::int64_t t = 0; t < 256; ++t) idx(0, t) = static_cast<std::int64_t>(rng() % gpt2_small::vocab_size);
  {
    GPT2<gpt2_small>::logits_t logits;
    const double s = bench::measure([&] {
      logits = model(idx);
      bench::do_not_optimize(logits.data()[0]);
    });
    bench::report("gpt2_small_fwd_b1_t256", "tenet", "tokens/s", 256.0 / s);
  }
  {
    std::vector<std::int64_t> prompt(16);
    for (auto& t : prompt) t = static_cast<std::int64_t>(rng() % gpt2_small::vocab_size);
    const double s = bench::measure(
        [&] {
          const generation g = generate(model, prompt, 128, {});
          bench::do_not_optimize(g.tokens.back());
        },
        0.5, 3);
    bench::report("gpt2_small_gen128_p16", "tenet", "tokens/s", 128.0 / s);
  }
}
