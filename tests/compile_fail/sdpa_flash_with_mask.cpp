// scaled_dot_product_attention<sdpa::flash> with an attn_mask: flash takes is_causal only.
#include <tenet/tenet.hpp>

using namespace tenet;

int main() {
  auto q = zeros<float, shape<2, 4, 5, 16>>();
  auto k = zeros<float, shape<2, 4, 7, 16>>();
  auto v = zeros<float, shape<2, 4, 7, 8>>();
  auto mask = ones<bool, shape<5, 7>>();
#ifndef TENET_COMPILE_FAIL_CONTROL
  auto y = scaled_dot_product_attention<sdpa::flash>(q, k, v, mask);
#else
  auto y = scaled_dot_product_attention<sdpa::memory_efficient>(q, k, v, mask);
#endif
  // The error is the expression's own; the control stops at its shape (evaluating it would only
  // cost compile time: the attention kernels for one more set of operand types).
  static_assert(std::is_same_v<shape_of<decltype(y)>, shape<2, 4, 5, 8>>);
  return static_cast<int>(y.sizes()[0] == 0);
}
// EXPECT: sdpa_variant_ineligible
// EXPECT: flash_takes_no_attn_mask
