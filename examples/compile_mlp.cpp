// tenet::compile on a transformer-style MLP block with a pre-norm:
//   y = x + W2 · gelu(W1 · layer_norm(x) + b1) + b2
// The expression the lambda returns is the graph. The scheduler makes it three kernels: the
// layer_norm row kernel, and two GEMMs whose epilogues apply bias + gelu and bias + residual.
// compile adds the memory plan (reduce_overhead: intermediates live in one arena, no allocation
// after the first call) and checks its result against eager evaluation.
#include <cstdint>
#include <cstring>
#include <iostream>

#include <tenet/tenet.hpp>

using namespace tenet;

int main(int argc, char** argv) {
  const std::int64_t tokens = argc > 1 ? std::stoll(argv[1]) : 64;
  constexpr std::int64_t d = 256, hidden = 1024;
  manual_seed(0);

  Tensor<float, shape<dyn, d>> x = randn<float, shape<dyn, d>>(tokens);
  Tensor<float, shape<d>> g = ones<float, shape<d>>();
  Tensor<float, shape<d>> beta = zeros<float, shape<d>>();
  Tensor<float, shape<hidden, d>> w1 = randn<float, shape<hidden, d>>() * (1.0f / 16.0f);
  Tensor<float, shape<hidden>> b1 = zeros<float, shape<hidden>>();
  Tensor<float, shape<d, hidden>> w2 = randn<float, shape<d, hidden>>() * (1.0f / 32.0f);
  Tensor<float, shape<d>> b2 = zeros<float, shape<d>>();

  auto block = [&](const Tensor<float, shape<dyn, d>>& in) {
    return in + linear(gelu(linear(layer_norm(in, g, beta), w1, b1)), w2, b2);
  };
  auto compiled = compile(block, {.mode = compile_mode::reduce_overhead, .fullgraph = true});

  Tensor<float, shape<dyn, d>> eager = block(x);
  Tensor<float, shape<dyn, d>> y;
  for (int step = 0; step < 3; ++step) y = compiled(x);  // the first call records the memory plan

  std::cout << compiled.explain();
  const bool same = std::memcmp(y.data(), eager.data(), sizeof(float) * static_cast<std::size_t>(y.numel())) == 0;
  std::cout << "compiled == eager: " << (same ? "yes" : "NO") << "\n";
  const auto& s = compiled.stats();
  std::cout << "arena hits " << s.arena_hits << ", misses " << s.arena_misses << "\n";
  return same && compiled.plan().size() == 3 && s.arena_misses == 0 ? 0 : 1;
}
