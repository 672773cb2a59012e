// bench-workloads: sdpa_b4h12_l1024_e64 sdpa_b4h12_l1024_e64_causal sdpa_b4h12_l1024_e64_math sdpa_b4h12_l1024_e64_fwdbwd sdpa_b4h12_l1024_e64_causal_fwdbwd
// Workload sdpa: scaled_dot_product_attention of fp32 q, k, v (4, 12, 1024, 64) on the CPU, as
// torch.nn.functional.scaled_dot_product_attention: the automatic choice (flash for these
// arguments), causal and not; the math variant alone (torch under sdpa_kernel(MATH)); forward +
// backward (the gradient of sum(out * g) for q, k and v). Metric GFLOP/s over nominal FLOPs: the
// forward 4 B H L S E (halved when causal), forward + backward 3.5 times that (the backward's
// five products over the forward's two), the same count on both sides.
#include <tenet/tenet.hpp>

#include "harness.hpp"

int main() {
  using namespace tenet;
  constexpr std::int64_t B = 4, H = 12, L = 1024, E = 64;
  using S = shape<dyn, dyn, dyn, dyn>;
  manual_seed(0);
  Tensor<float, S> q = randn<float, S>(B, H, L, E), k = randn<float, S>(B, H, L, E), v = randn<float, S>(B, H, L, E);
  Tensor<float, S> y(sizes_t<4>{B, H, L, E});
  const double fwd = 4.0 * B * H * L * L * E / 1e9;
  auto forward = [&](const char* name, bool causal, double flops, auto variant) {
    using V = decltype(variant);
    const double t = bench::measure([&] {
      y = scaled_dot_product_attention<V>(q, k, v, {.is_causal = causal});
      bench::do_not_optimize(y.data()[0]);
    });
    bench::report(name, "tenet", "GFLOP/s", flops / t);
  };
  forward("sdpa_b4h12_l1024_e64", false, fwd, sdpa::automatic{});
  forward("sdpa_b4h12_l1024_e64_causal", true, fwd / 2, sdpa::automatic{});
  forward("sdpa_b4h12_l1024_e64_math", false, fwd, sdpa::math{});
#if TENET_AUTOGRAD
  const Tensor<float, S> g = randn<float, S>(B, H, L, E);
  auto train = [&](const char* name, bool causal, double flops) {
    Tensor<float, S> qa = q.clone(), ka = k.clone(), va = v.clone();
    qa.requires_grad_(), ka.requires_grad_(), va.requires_grad_();
    const double t = bench::measure([&] {
      Tensor<float, shape<>> loss = sum(scaled_dot_product_attention(qa, ka, va, {.is_causal = causal}) * g);
      loss.backward();
      bench::do_not_optimize(qa.grad().data()[0]);
    });
    bench::report(name, "tenet", "GFLOP/s", flops / t);
  };
  train("sdpa_b4h12_l1024_e64_fwdbwd", false, 3.5 * fwd);
  train("sdpa_b4h12_l1024_e64_causal_fwdbwd", true, 3.5 * fwd / 2);
#endif
}
