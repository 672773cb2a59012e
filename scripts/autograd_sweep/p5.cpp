#include "harness.hpp"
using namespace sw;
void part5() {
  std::printf("== nn.functional part 2\n");
  const M4 x = filled<4>({2, 3, 4, 5}, -1.3, 1.7, 0.07);
  const V c3 = filled<1>({3}, 0.5, 1.5, 0.2), d3 = filled<1>({3}, -0.5, 0.5, 0.3);
  PROBE("dropout(p=0)", [](const auto& t) { return dropout(t, 0.0); }, x);
  PROBE("dropout(p=1)", [](const auto& t) { return dropout(t, 1.0); }, x);
  PROBE("dropout(p=.5,seeded)", [](const auto& t) { manual_seed(7); return dropout(t * 1.0, 0.5); }, x);
  PROBE("batch_norm(train)", [](const auto& t, const auto& w, const auto& b) { return batch_norm(t, none, none, w, b, true); }, x, c3, d3);
  PROBE("batch_norm(eval)", [](const auto& t, const auto& w, const auto& b) {
    Tensor<double, shape<dyn>> rm = filled<1>({3}, 0, 1), rv = filled<1>({3}, 1, 2);
    return batch_norm(t, rm, rv, w, b, false); }, x, c3, d3);
  PROBE("batch_norm(train,stats)", [](const auto& t) {
    Tensor<double, shape<dyn>> rm = filled<1>({3}, 0, 1), rv = filled<1>({3}, 1, 2);
    return batch_norm(t, rm, rv, none, none, true); }, x);
  PROBE("instance_norm", [](const auto& t, const auto& w, const auto& b) { return instance_norm(t, none, none, w, b); }, x, c3, d3);
  PROBE("group_norm", [](const auto& t, const auto& w, const auto& b) { return group_norm(t, 3, w, b); }, x, c3, d3);
  PROBE("softmin<1>", [](const auto& t) { return softmin<1>(t); }, x);
  fd_h = 1e-3;  // float32 inside
  PROBE("softmax<1,float>", [](const auto& t) { return softmax<1, double>(cast<float>(t)); }, x);
  fd_h = 1e-6;
  PROBE("log_softmax<3,double>", [](const auto& t) { return log_softmax<3, double>(t); }, x);
  const M3 ba = filled<3>({2, 3, 4}, -1, 1, 0.8), bb = filled<3>({2, 4, 2}, -1, 1, 0.9), bc = filled<3>({2, 3, 2}, -1, 1, 0.1);
  PROBE("baddbmm", [](const auto& c, const auto& a, const auto& b) { return baddbmm(c, a, b, 0.5, 2.0); }, bc, ba, bb);
  PROBE("einsum bmm", [](const auto& a, const auto& b) { return einsum<"bij,bjk->bik">(a, b); }, ba, bb);
  PROBE("einsum diag", [](const auto& a) { return einsum<"ii->i">(a); }, M(filled<2>({3, 3}, -1, 1)));
  PROBE("einsum trace+3op", [](const auto& a, const auto& b) { return einsum<"ij,jk,kl->il">(a, b, a); }, M(filled<2>({3, 3}, -1, 1)), M(filled<2>({3, 3}, -1, 1, 0.3)));
  const M lp = filled<2>({3, 4}, -2, -0.1, 0.2), tp = filled<2>({3, 4}, 0.1, 0.9, 0.4);
  PROBE("kl_div", [](const auto& a, const auto& b) { return kl_div<reduction::batchmean>(a, b); }, lp, tp);
  PROBE("kl_div(log_target)", [](const auto& a, const auto& b) { return kl_div<reduction::sum>(a, b, true); }, lp, M(filled<2>({3, 4}, -2, -0.1, 0.5)));
  PROBE("binary_cross_entropy", [](const auto& a, const auto& b) { return binary_cross_entropy(a, b); }, tp, M(filled<2>({3, 4}, 0.1, 0.9, 0.7)));
  PROBE("bce_with_logits", [](const auto& a, const auto& b, const auto& pw) { return binary_cross_entropy_with_logits(a, b, none, pw); }, lp, tp, V(filled<1>({4}, 0.5, 2)));
  PROBE("cosine_similarity", [](const auto& a, const auto& b) { return cosine_similarity<1>(a, b); }, lp, tp);
  PROBE("pairwise_distance", [](const auto& a, const auto& b) { return pairwise_distance(a, b); }, lp, tp);
  PROBE("pairwise_distance(p=1)", [](const auto& a, const auto& b) { return pairwise_distance(a, b, 1.0); }, lp, tp);
  std::printf("== convolution, pooling, padding, movement\n");
  const M4 w = filled<4>({2, 3, 3, 3}, -1, 1, 0.11);
  const V b2 = filled<1>({2}, -1, 1, 0.12);
  PROBE("conv2d", [](const auto& a, const auto& k, const auto& b) { return conv2d(a, k, b, {.stride = 2, .padding = 1}); }, x, w, b2);
  PROBE("conv1d", [](const auto& a, const auto& k) { return conv1d(a, k, {.padding = 1}); }, M3(filled<3>({2, 3, 6}, -1, 1)), M3(filled<3>({2, 3, 3}, -1, 1, 0.2)));
  PROBE("conv_transpose2d", [](const auto& a, const auto& k) { return conv_transpose2d(a, k, {.stride = 2}); }, x, M4(filled<4>({3, 2, 2, 2}, -1, 1, 0.3)));
  PROBE("max_pool2d", [](const auto& a) { return max_pool2d(a, {2, 2}, {.stride = 2, .padding = 1}); }, x);
  PROBE("avg_pool2d", [](const auto& a) { return avg_pool2d(a, {3, 2}, {.stride = 1}); }, x);
  PROBE("adaptive_avg_pool2d", [](const auto& a) { return adaptive_avg_pool2d(a, {3, 2}); }, x);
  PROBE("interpolate(bilinear)", [](const auto& a) { return interpolate(a, {.size = {7, 3}, .mode = interpolate_mode::bilinear}); }, x);
  PROBE("interpolate(nearest)", [](const auto& a) { return interpolate(a, {.size = {7, 3}}); }, x);
  PROBE("pad(constant)", [](const auto& a) { return pad(a, {1, -1, 2, 0}, 0.5); }, x);
  PROBE("pad(reflect)", [](const auto& a) { return pad<pad_mode::reflect>(a, {1, 2, 2, 1}); }, x);
  PROBE("pad(replicate)", [](const auto& a) { return pad<pad_mode::replicate>(a, {1, 2, 2, 1}); }, x);
  PROBE("flip", [](const auto& a) { return flip<1, 3>(a); }, x);
  PROBE("roll", [](const auto& a) { return roll<2, -1>(a, {1, -2}); }, x);
  PROBE("roll(flat)", [](const auto& a) { return roll(a, 3); }, x);
}
