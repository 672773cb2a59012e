#include "harness.hpp"
using namespace sw;
void part4() {
  std::printf("== indexing, classification losses\n");
  const M x = filled<2>({3, 4}, -1.3, 1.7, 0.07);
  const M s = filled<2>({2, 4}, -1, 1, 0.3);
  const I2 gi = tensor<std::int64_t>({{0, 2, 1, 0}, {2, 2, 0, 1}});
  const I2 si = tensor<std::int64_t>({{0, 2, 1, 0}, {1, 0, 2, 2}});  // no duplicates within a column
  const I1 iv = tensor<std::int64_t>({2, 0});
  PROBE("gather", [gi](const auto& t) { return gather<0>(t, gi); }, x);
  PROBE("gather(lazy)", [gi](const auto& t) { return gather<0>(t * t, gi); }, x);
  PROBE("scatter", [si](const auto& t, const auto& u) { return scatter<0>(t, si, u); }, x, s);
  PROBE("scatter(value)", [si](const auto& t) { return scatter<0>(t, si, 2.0); }, x);
  PROBE("scatter_add", [gi](const auto& t, const auto& u) { return scatter_add<0>(t, gi, u); }, x, s);
  PROBE("scatter_reduce(sum)", [gi](const auto& t, const auto& u) { return scatter_reduce<0, scatter_reduction::sum>(t, gi, u); }, x, s);
  PROBE("scatter_reduce(mean)", [gi](const auto& t, const auto& u) { return scatter_reduce<0, scatter_reduction::mean>(t, gi, u); }, x, s);
  PROBE("scatter_reduce(prod)", [gi](const auto& t, const auto& u) { return scatter_reduce<0, scatter_reduction::prod>(t, gi, u); }, x, s);
  PROBE("scatter_reduce(amax)", [gi](const auto& t, const auto& u) { return scatter_reduce<0, scatter_reduction::amax>(t, gi, u); }, x, s);
  PROBE("scatter_reduce(amin)", [gi](const auto& t, const auto& u) { return scatter_reduce<0, scatter_reduction::amin>(t, gi, u); }, x, s);
  PROBE("index_select", [iv](const auto& t) { return index_select<1>(t, iv); }, x);
  PROBE("index_add", [iv](const auto& t, const auto& u) { return index_add<0>(t, iv, u, 2.0); }, x, s);
  PROBE("index_copy", [iv](const auto& t, const auto& u) { return index_copy<0>(t, iv, u); }, x, s);
  PROBE("index_fill", [iv](const auto& t) { return index_fill<1>(t, iv, 3.0); }, x);
  PROBE("masked_fill", [](const auto& t) { return masked_fill(t, t > 0.5, -1.0); }, x);
  PROBE("masked_select", [](const auto& t) { return masked_select(t, t > 0.2); }, x);
  PROBE("masked_select(lazy)", [](const auto& t) { return masked_select(t * 2.0, t > 0.2); }, x);
  PROBE("nonzero", [](const auto& t) { return nonzero(t > 0.2); }, x);
  PROBE("count_nonzero", [](const auto& t) { return count_nonzero<1>(t); }, x);
  PROBE("take_along_dim<0>", [gi](const auto& t) { return take_along_dim<0>(t, gi); }, x);
  PROBE("take_along_dim(flat)", [iv](const auto& t) { return take_along_dim(t, iv); }, x);
  PROBE("embedding", [gi](const auto& w) { return embedding(gi, w); }, x);
  expected_difference = "padding_idx rows get no gradient, as torch";
  PROBE("embedding(pad)", [gi](const auto& w) { return embedding(gi, w, 2); }, x);
  PROBE("one_hot", [gi](const auto& t) { return one_hot(gi, 3); }, x);
  PROBE("bincount(weights)", [](const auto& w) { return bincount(I1(tensor<std::int64_t>({0, 2, 2, 1})), w); }, V(filled<1>({4}, -1, 1)));
  PROBE("histc", [](const auto& t) { return histc(t, 4, -2.0, 2.0); }, x);
  const I1 tg = tensor<std::int64_t>({1, 3, 0});
  PROBE("nll_loss", [tg](const auto& t) { return nll_loss(t, tg); }, x);
  PROBE("nll_loss(weight)", [tg](const auto& t, const auto& w) { return nll_loss(t, tg, w); }, x, V(filled<1>({4}, 0.5, 1.5)));
  PROBE("cross_entropy", [tg](const auto& t) { return cross_entropy(t, tg); }, x);
  PROBE("cross_entropy(smooth)", [tg](const auto& t) { return cross_entropy(t, tg, -100, 0.2); }, x);
  PROBE("cross_entropy(prob)", [](const auto& t, const auto& p) { return cross_entropy(t, softmax<1>(p)); }, x, M(filled<2>({3, 4}, -1, 1, 0.5)));
}
