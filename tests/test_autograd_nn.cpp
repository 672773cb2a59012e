// Gradients of losses, linear/conv/pooling, indexing and views (ATen level, through their
// decompositions) against central finite differences in float64.
#include "gradcheck.hpp"

using namespace tenet;
using tenet_test::filled;
using tenet_test::gradcheck;
using V = Tensor<double, dyn_shape<1>>;
using M = Tensor<double, dyn_shape<2>>;
using M3 = Tensor<double, dyn_shape<3>>;
using M4 = Tensor<double, dyn_shape<4>>;

TEST_CASE("autograd ops: losses", "[autograd]") {
  const M logits = filled<2>({4, 5}, -2, 2);
  Tensor<std::int64_t, dyn_shape<1>> target({4});
  const std::int64_t tv[] = {1, 0, 4, 2};
  for (int i = 0; i < 4; ++i) target.data()[i] = tv[i];
  gradcheck([&](const auto& a) { return cross_entropy(a, target); }, logits);
  gradcheck([&](const auto& a) { return cross_entropy<reduction::sum>(a, target, -100, 0.1); }, logits);
  gradcheck([&](const auto& a) { return nll_loss(log_softmax<1>(a), target); }, logits);
  const M y = filled<2>({4, 5}, -1, 1, 0.4);
  gradcheck([](const auto& a, const auto& t) { return mse_loss(a, t); }, logits, y);
  const M p = filled<2>({4, 5}, 0.1, 0.9, 0.2);
  const M q = filled<2>({4, 5}, 0.0, 1.0, 0.6);
  gradcheck([&](const auto& a) { return binary_cross_entropy(a, q); }, p);
  gradcheck([&](const auto& a) { return binary_cross_entropy_with_logits(a, q); }, logits);
}

// cross_entropy of [N, C] logits and class indices runs as one composite with its own gradient
// node (decomp/cross_entropy.hpp): ignored rows, every reduction, and logits that are a float cast
// of bfloat16 ones (the gradient node then writes bfloat16, the cast's gradient rounded once).
TEST_CASE("autograd ops: cross_entropy over rows", "[autograd]") {
  const M logits = filled<2>({5, 7}, -3, 3, 0.3);
  Tensor<std::int64_t, dyn_shape<1>> target({5});
  const std::int64_t tv[] = {3, -100, 6, 0, 2};
  for (int i = 0; i < 5; ++i) target.data()[i] = tv[i];
  gradcheck([&](const auto& a) { return cross_entropy(a, target); }, logits);
  gradcheck([&](const auto& a) { return cross_entropy<reduction::sum>(a, target); }, logits);
  gradcheck([&](const auto& a) { return cross_entropy<reduction::none>(a, target); }, logits);
  Tensor<std::int64_t, dyn_shape<1>> target2 = target.clone();
  target2.data()[1] = 2;
  gradcheck([&](const auto& a) { return cross_entropy(a, target2, 2); }, logits);  // ignore_index 2, twice
  // the values of log_softmax then nll_loss
  const Tensor<double, dyn_shape<1>> rows = cross_entropy<reduction::none>(logits, target);
  const Tensor<double, dyn_shape<1>> want = nll_loss<reduction::none>(log_softmax<1>(logits), target);
  for (int i = 0; i < 5; ++i) CHECK(rows.data()[i] == Approx(want.data()[i]).epsilon(1e-14));
  CHECK(rows.data()[1] == 0.0);
  // targets out of range: index_error naming the value, before any kernel
  Tensor<std::int64_t, dyn_shape<1>> bad = target.clone();
  bad.data()[4] = 7;
  CHECK_THROWS_WITH(cross_entropy(logits, bad), Catch::Matchers::Contains("target 7 is out of bounds for 7 classes"));
  // a float cast of bfloat16 logits: the gradient reaches the bfloat16 tensor
  Tensor<bfloat16, dyn_shape<2>> xb = cast<bfloat16>(logits);
  xb.requires_grad_();
  Tensor<float, shape<>> l = cross_entropy(cast<float>(xb), target);
  l.backward();
  Tensor<bfloat16, dyn_shape<2>> xr = xb.detach().clone();
  xr.requires_grad_();
  Tensor<float, shape<>> lr = nll_loss(log_softmax<1>(cast<float>(xr)), target);
  lr.backward();
  CHECK(l.item() == Approx(lr.item()).epsilon(1e-6));
  const Tensor<float, dyn_shape<2>> g = cast<float>(xb.grad()), gr = cast<float>(xr.grad());
  for (std::int64_t i = 0; i < 35; ++i) CHECK(g.data()[i] == Approx(gr.data()[i]).epsilon(1e-2).margin(1e-4));
  for (int c = 0; c < 7; ++c) CHECK(g.data()[7 + c] == 0.0f);  // the ignored row
}

TEST_CASE("autograd ops: linear, matmul, conv2d, pooling", "[autograd]") {
  const M x = filled<2>({3, 4}, -1, 1);
  const M w = filled<2>({5, 4}, -1, 1, 0.2);
  const V b = filled<1>({5}, -1, 1, 0.4);
  gradcheck([](const auto& a, const auto& ww, const auto& bb) { return linear(a, ww, bb); }, x, w, b);
  const M3 bx = filled<3>({2, 3, 4}, -1, 1, 0.1);
  gradcheck([](const auto& a, const auto& c) { return matmul(a, c.transpose(0, 1)); }, bx, w);
  const M4 img = filled<4>({2, 2, 5, 5}, -1, 1);
  const M4 k = filled<4>({3, 2, 3, 3}, -1, 1, 0.3);
  const V kb = filled<1>({3}, -1, 1, 0.8);
  gradcheck([](const auto& a, const auto& kk, const auto& bb) { return conv2d(a, kk, bb, {.stride = {2, 1}, .padding = {1, 1}}); },
            img, k, kb);
  gradcheck([](const auto& a) { return max_pool2d(a, {2, 2}); }, img);
  gradcheck([](const auto& a) { return avg_pool2d(a, {3, 3}, {.stride = {2, 2}, .padding = {1, 1}}); }, img);
}

TEST_CASE("autograd ops: conv2d's own VJP and JVP (groups, dilation, strides that leave a remainder)", "[autograd]") {
  // conv2d is kept whole by autograd: its VJP is two convolutions (include/tenet/conv.hpp)
  const M4 img = filled<4>({2, 4, 7, 6}, -1, 1, 0.2);
  const M4 k = filled<4>({6, 2, 3, 2}, -1, 1, 0.5);
  // stride 2 over 7 + 2 - 3 leaves a remainder (dw's convolution is sliced); groups 2; dilation
  gradcheck([](const auto& a, const auto& kk) { return conv2d(a, kk, {.stride = 2, .padding = 1, .dilation = {1, 2}, .groups = 2}); },
            img, k);
  // 'same' with an even kernel: unequal low and high padding
  const M4 k2 = filled<4>({3, 4, 2, 2}, -1, 1, 0.7);
  gradcheck([](const auto& a, const auto& kk) { return conv2d(a, kk, {.padding = conv_padding::same}); }, img, k2);
  // padding larger than the kernel's reach: the spread gradient is cropped
  gradcheck([](const auto& a, const auto& kk) { return conv2d(a, kk, {.stride = {3, 1}, .padding = {2, 1}}); }, img,
            filled<4>({2, 4, 1, 2}, -1, 1, 0.3));
  // 3x3 stride 1 through the Winograd kernel (forced: these sizes are below its crossover): the
  // forward and the input gradient (a 3x3 stride-1 convolution of the output gradient) run as
  // Winograd F(4x4, 3x3) in double; 9 channels: vectors of 4 or 8 doubles hold a channel past
  // them (the padding channels must stay zero)
  {
    const detail::cpu::conv2d_kernel_scope forced(detail::cpu::conv2d_kernel::winograd);
    const M4 k9 = filled<4>({5, 9, 3, 3}, -1, 1, 0.6);
    gradcheck([&](const auto& a) { return conv2d(a, k9, {.padding = 1}); }, filled<4>({1, 9, 5, 6}, -1, 1, 0.3));
  }
  // conv2d under an elementwise tree (a per-channel scale, a residual add, tanh): run as the
  // conv2d+epilogue kernel where nothing is recorded (gradcheck's finite differences), unfused in
  // the recorded forward (its backward reads the convolution's value)
  gradcheck([](const auto& a, const auto& kk, const auto& s) { return tanh(conv2d(a, kk, {.padding = 1}) * s + a); },
            filled<4>({2, 3, 5, 4}, -1, 1, 0.15), filled<4>({3, 3, 3, 3}, -1, 1, 0.45), filled<4>({1, 3, 1, 1}, -1, 1, 0.25));
  // conv1d and conv_transpose2d hold a conv2d node
  const M3 seq = filled<3>({2, 3, 9}, -1, 1, 0.4);
  gradcheck([](const auto& a, const auto& kk) { return conv1d(a, kk, {.stride = 2, .dilation = 2}); }, seq,
            filled<3>({4, 3, 2}, -1, 1, 0.6));
  gradcheck([](const auto& a, const auto& kk) { return conv_transpose2d(a, kk, {.stride = 2, .padding = 1, .output_padding = 1}); },
            filled<4>({1, 2, 3, 4}, -1, 1, 0.1), filled<4>({2, 3, 3, 3}, -1, 1, 0.9));
  // forward mode through the same node (its JVP is bilinear: conv(tx, w) + conv(x, tw))
  tenet_test::jvpcheck([](const auto& a, const auto& kk) { return conv2d(a, kk, {.stride = 2, .padding = 1, .dilation = {1, 2}, .groups = 2}); },
                       img, k);
}

// A large vocabulary and many positions (GPT-2's embedding at scale): the weight's gradient must
// not go through a buffer of vocabulary x positions x width values (an earlier form did: here it
// would be 50000 x 4096 x 64 floats, 52 GB, and fail to allocate), and still be the scatter-add.
TEST_CASE("autograd: embedding's gradient takes memory of the weight's and the output's sizes only", "[autograd]") {
  const std::int64_t V = 50000, B = 64, T = 64, C = 64;
  Tensor<std::int64_t, dyn_shape<2>> idx({B, T});
  for (std::int64_t i = 0; i < B * T; ++i) idx.data()[i] = (i * 7919) % V;
  Tensor<float, dyn_shape<2>> w = zeros<float, dyn_shape<2>>(V, C);
  w.requires_grad_();
  Tensor<float, shape<>> loss = sum(embedding(idx, w));
  loss.backward();
  // each position adds a row of ones into its index's row
  std::vector<float> count(static_cast<std::size_t>(V), 0.0f);
  for (std::int64_t i = 0; i < B * T; ++i) count[static_cast<std::size_t>(idx.data()[i])] += 1.0f;
  double worst = 0;
  for (std::int64_t v = 0; v < V; v += 97)
    for (std::int64_t c = 0; c < C; ++c)
      worst = std::max(worst, static_cast<double>(std::abs(w.grad()(v, c) - count[static_cast<std::size_t>(v)])));
  CHECK(worst == 0.0);
}

// torch.nn.functional.embedding(..., padding_idx): the positions holding padding_idx send no
// gradient to the weight (the padding row keeps its value under training); the value is a gather.
TEST_CASE("autograd: embedding's padding_idx positions send no gradient, as torch", "[autograd]") {
  auto max_diff = [](const auto& a, const auto& b) { return eval(amax(abs(a - b))).item(); };
  Tensor<std::int64_t, dyn_shape<2>> idx({2, 3});
  const std::int64_t iv[] = {0, 5, 2, 2, 2, 1};
  for (int i = 0; i < 6; ++i) idx.data()[i] = iv[i];
  const M3 u = filled<3>({2, 3, 4}, -1, 1, 0.3);
  // the weight gradient of sum(embedding(idx, w, pad) * u): u's row at each position added into
  // the row its index names, unless that index is the padding one
  auto expected = [&](std::int64_t pad) {
    M e = M(zeros<double, dyn_shape<2>>(6, 4));
    for (std::int64_t p = 0; p < 6; ++p)
      if (iv[p] != pad)
        for (std::int64_t j = 0; j < 4; ++j) e(iv[p], j) += u(p / 3, p % 3, j);
    return e;
  };
  for (const std::int64_t pad : {std::int64_t{2}, std::int64_t{-4}, std::int64_t{0}}) {
    M w = filled<2>({6, 4}, -1, 1);
    w.requires_grad_();
    Tensor<double, shape<>> loss = sum(embedding(idx, w, pad) * u);
    loss.backward();
    INFO("padding_idx " << pad);
    CHECK(max_diff(w.grad(), expected(pad < 0 ? pad + 6 : pad)) < 1e-12);
    // the value is unchanged by padding_idx
    CHECK(max_diff(M3(embedding(idx, w.detach(), pad)), M3(embedding(idx, w.detach()))) == 0.0);
  }
  {  // without padding_idx every position counts (row 2 gets three rows of u)
    M w = filled<2>({6, 4}, -1, 1);
    w.requires_grad_();
    Tensor<double, shape<>> loss = sum(embedding(idx, w) * u);
    loss.backward();
    CHECK(max_diff(w.grad(), expected(-1)) < 1e-12);
  }
  {  // a 0-dim index, and nn::Embedding's padding_idx
    M w = filled<2>({6, 4}, -1, 1);
    w.requires_grad_();
    Tensor<std::int64_t, shape<>> two(sizes_t<0>{});
    two.fill_(2);
    Tensor<double, shape<>> loss = sum(embedding(two, w, 2));
    loss.backward();
    CHECK(eval(sum(abs(w.grad()))).item() == 0.0);
    nn::Embedding<6, 4, double> m(2);
    Tensor<double, shape<>> l2 = sum(m(idx) * u);
    l2.backward();
    CHECK(max_diff(m.weight.grad(), expected(2)) < 1e-12);
  }
}

TEST_CASE("autograd ops: indexing and views", "[autograd]") {
  const M w = filled<2>({6, 3}, -1, 1);
  Tensor<std::int64_t, dyn_shape<2>> idx({2, 3});
  const std::int64_t iv[] = {0, 5, 2, 2, 2, 1};  // repeated rows accumulate
  for (int i = 0; i < 6; ++i) idx.data()[i] = iv[i];
  gradcheck([&](const auto& a) { return embedding(idx, a); }, w);
  gradcheck([&](const auto& a) { return index_select<0>(a, idx.reshape<dyn>(6)); }, w);
  gradcheck([&](const auto& a) { return gather<0>(a, idx); }, w);
  const M3 x = filled<3>({2, 3, 4}, -1, 1);
  gradcheck([](const auto& a) { return a.template transpose<0, 2>() * 2.0; }, x);
  gradcheck([](const auto& a) { return a.template slice<2>(1, 4, 2) + 0.0; }, x);
  gradcheck([](const auto& a) { return a.template select<1>(1) * a.template select<1>(2); }, x);
  gradcheck([](const auto& a) { return a.template permute<1, 2, 0>().template reshape<dyn, dyn>(3, 8) * 1.0; }, x);
  gradcheck([](const auto& a) { return flip<2>(a) * a; }, x);
  gradcheck([](const auto& a) { return cumsum<1>(a); }, x);
  const M3 one = filled<3>({2, 1, 4}, -1, 1, 0.9);
  gradcheck([](const auto& a, const auto& c) { return a * c + c; }, x, one);  // broadcasting
}

TEST_CASE("autograd: a random draw times a tracked tensor (the draw has no inputs: no gradient of its own)", "[autograd]") {
  manual_seed(3);
  Tensor<double, shape<dyn>> x = randn<double, shape<dyn>>(50);
  x.requires_grad_();
  manual_seed(8);
  Tensor<double, shape<>> loss = sum(rand_lazy<double, shape<dyn>>(50) * x);
  loss.backward();
  manual_seed(8);
  const Tensor<double, shape<dyn>> u = rand<double, shape<dyn>>(50);
  const auto g = x.grad();
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < 50; ++i) differ += g(i) != u(i);
  CHECK(differ == 0);
}
