// CUDA autograd tests, part 4: convolution, pooling, resampling and padding on cuda(0) against
// the CPU backend, values and gradients. conv2d runs natively on CUDA (im2col + cuBLASLt; the
// 1x1 case reads x as its columns; 3x3 with stride 1 as Winograd F(2x2, 3x3)), max_pool2d as a window kernel, the rest through their
// decompositions (pad, window views, reductions, matmul). Inputs are also given transposed
// (non-contiguous); 16-bit conv2d and max_pool2d are checked against the CPU in float.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include <tenet/cuda.hpp>

#include "../../bench/resnet_stage.hpp"
#include "autograd_checks.hpp"

using namespace tenet;
using namespace tenet::test;

namespace {
using CS4 = dyn_shape<4>;
template <class T>
using T4 = Tensor<T, CS4>;

/// A leaf on d holding x's values and the input to give the op: the leaf itself, or (strided)
/// a transposed view of a leaf holding the transposed values (same values, non-contiguous).
template <class T>
struct conv_input {
  T4<T> leaf, input;
  conv_input(const T4<T>& x, device d, bool strided) {
    if (strided) {
      leaf = test::leaf(T4<T>(x.template transpose<2, 3>().contiguous()), d);
      input = leaf.template transpose<2, 3>();
      if (x.sizes()[2] > 1 && x.sizes()[3] > 1) REQUIRE(!input.is_contiguous());
    } else {
      leaf = test::leaf(x, d);
      input = leaf;
    }
  }
};

/// f(x) on both devices: the values, then the gradient of sum(f(x) * seed) with respect to x.
template <class T, class S, class F>
void conv_check(const char* what, const Tensor<T, S>& x, F f, bool strided = false) {
  INFO(what << (strided ? " (transposed input)" : ""));
  Tensor<T, S> xc, xg, ic, ig;
  if constexpr (S::rank == 4) {
    const conv_input<T> c(x, tenet::cpu, strided), g(x, gpu, strided);
    xc = c.leaf, ic = c.input, xg = g.leaf, ig = g.input;
  } else {
    xc = ic = leaf(x, tenet::cpu);
    xg = ig = leaf(x, gpu);
  }
  using Y = Tensor<T, dyn_shape<rank_of<decltype(f(ic))>>>;
  Y yc = f(ic);
  Y yg = f(ig);
  check_same(yg, yc, "value");
  Y seed = randn_like(yc);
  Tensor<T, dyn_shape<0>> lc = sum(yc * seed);
  Tensor<T, dyn_shape<0>> lg = sum(yg * seed.to(gpu));
  lc.backward();
  lg.backward();
  check_same(xg.grad(), xc.grad(), "d x");
}

TEST_CASE("cuda conv2d: values and gradients of input, weight and bias against the CPU", "[cuda][autograd][conv]") {
  manual_seed(31);
  using T = float;
  struct cfg {
    const char* what;
    std::int64_t n, c, h, w, o, k;
    conv2d_options opt;
  };
  const cfg cases[] = {
      {"3x3 stride 2 pad 1 groups 2", 2, 4, 9, 11, 6, 3, {.stride = 2, .padding = 1, .groups = 2}},
      {"3x3 dilation 2 'same'", 3, 3, 8, 7, 5, 3, {.padding = conv_padding::same, .dilation = 2}},
      {"1x1 (columns are x)", 2, 8, 5, 6, 4, 1, {}},
      {"1x1 groups 4", 2, 8, 5, 6, 8, 1, {.groups = 4}},
      {"5x3 stride (2, 1) pad (2, 0)", 1, 2, 12, 9, 3, 0, {.stride = {2, 1}, .padding = {2, 0}}},
      {"size-1 image and batch", 1, 3, 1, 1, 2, 1, {}},
      // Winograd F(2x2, 3x3) (3x3, stride 1, one group): odd output sizes cut the last tiles
      {"3x3 pad 1, 9x11 (Winograd)", 2, 16, 9, 11, 12, 3, {.padding = 1}},
      {"3x3 pad (2, 0), 7x6 (Winograd)", 1, 5, 7, 6, 3, 3, {.padding = {2, 0}}},
      {"3x3 no pad on 3x3 (Winograd, one output)", 2, 4, 3, 3, 2, 3, {}},
      {"3x3 pad 1, 46x46 (Winograd; the weight gradient sums 1058 tiles in 4 slices)", 2, 4, 46, 46, 3, 3,
       {.padding = 1}},
  };
  for (const auto& k : cases) {
    const std::int64_t kh = k.k == 0 ? 5 : k.k, kw = k.k == 0 ? 3 : k.k;
    const T4<T> x0 = randn<T, CS4>(k.n, k.c, k.h, k.w);
    const T4<T> w0 = randn<T, CS4>(k.o, k.c / k.opt.groups, kh, kw) * 0.3f;
    const Tensor<T, dyn_shape<1>> b0 = randn<T, dyn_shape<1>>(k.o);
    for (const bool strided : {false, true}) {
      INFO(k.what << (strided ? ", transposed input" : ""));
      struct result {
        T4<T> y, dx, dw;
        Tensor<T, dyn_shape<1>> db;
      };
      auto run = [&](device d) {
        const conv_input<T> x(x0, d, strided);
        auto w = leaf(w0, d);
        auto b = leaf(b0, d);
        T4<T> y = conv2d(x.input, w, b, k.opt);
        Tensor<T, dyn_shape<0>> l = sum(y * y);
        l.backward();
        return result{y.detach(), x.leaf.grad(), w.grad(), b.grad()};
      };
      const result c = run(tenet::cpu);
      const result g = run(gpu);
      check_same(g.y, c.y, "value");
      check_same(g.dx, c.dx, "d x");
      check_same(g.dw, c.dw, "d w");
      check_same(g.db, c.db, "d bias");
    }
  }
  // double takes the Winograd path too
  const T4<double> xd = randn<double, CS4>(2, 6, 8, 5), wd = randn<double, CS4>(4, 6, 3, 3);
  check_same(T4<double>(conv2d(xd.to(gpu), wd.to(gpu), {.padding = 1})), T4<double>(conv2d(xd, wd, {.padding = 1})),
             "double, 3x3 pad 1 (Winograd)");
  // an empty batch: an empty result, no launch
  T4<T> e = conv2d(T4<T>(sizes_t<4>{0, 3, 5, 5}, gpu), randn<T, CS4>(2, 3, 3, 3).to(gpu));
  CHECK(e.sizes() == sizes_t<4>{0, 2, 3, 3});
  // mismatched channels: shape_error with both sizes, before any launch
  CHECK_THROWS_AS(T4<T>(conv2d(randn<T, CS4>(1, 3, 5, 5).to(gpu), randn<T, CS4>(2, 4, 3, 3).to(gpu))), shape_error);
}

TEST_CASE("cuda conv1d, conv_transpose2d, pooling, resampling, pad, flip, roll against the CPU", "[cuda][autograd][conv]") {
  manual_seed(32);
  using T = float;
  const T4<T> x = randn<T, CS4>(2, 4, 9, 11);
  const T4<T> wt = randn<T, CS4>(4, 3, 3, 3);
  const Tensor<T, dyn_shape<3>> x1 = randn<T, dyn_shape<3>>(2, 4, 20);
  const Tensor<T, dyn_shape<3>> w1 = randn<T, dyn_shape<3>>(5, 4, 3);
  conv_check("conv1d stride 2", x1, [&](const auto& a) { return conv1d(a, w1.to(a.device()), {.stride = 2}); });
  for (const bool strided : {false, true}) {
    conv_check("conv_transpose2d", x, [&](const auto& a) {
      return conv_transpose2d(a, wt.to(a.device()), {.stride = 2, .padding = 1, .output_padding = 1});
    }, strided);
    conv_check("max_pool2d 3x3/2 pad 1", x, [](const auto& a) { return max_pool2d(a, {3, 3}, {.stride = 2, .padding = 1}); }, strided);
    conv_check("max_pool2d dilation 2 ceil", x,
               [](const auto& a) { return max_pool2d(a, {2, 3}, {.stride = {1, 2}, .dilation = 2, .ceil_mode = true}); }, strided);
    conv_check("avg_pool2d ceil", x,
               [](const auto& a) { return avg_pool2d(a, {3, 3}, {.stride = 2, .padding = 1, .ceil_mode = true}); }, strided);
    conv_check("avg_pool2d excluding pad", x, [](const auto& a) {
      return avg_pool2d(a, {2, 2}, {.padding = 1, .count_include_pad = false});
    }, strided);
    conv_check("adaptive_avg_pool2d", x, [](const auto& a) { return adaptive_avg_pool2d(a, {4, 5}); }, strided);
    conv_check("bilinear", x,
               [](const auto& a) { return interpolate(a, {.size = {13, 7}, .mode = interpolate_mode::bilinear}); }, strided);
    conv_check("bilinear align_corners", x, [](const auto& a) {
      return interpolate(a, {.scale_factor = 1.5, .mode = interpolate_mode::bilinear, .align_corners = true});
    }, strided);
    conv_check("nearest", x, [](const auto& a) { return interpolate(a, {.scale_factor = 2.0}); }, strided);
    conv_check("reflect pad", x, [](const auto& a) { return pad<pad_mode::reflect>(a, {2, 1, 1, 3}); }, strided);
    conv_check("replicate pad", x, [](const auto& a) { return pad<pad_mode::replicate>(a, {0, 2, 3, 1}); }, strided);
    conv_check("constant pad, cropping", x, [](const auto& a) { return pad(a, {-1, 2, 1, -3}, 0.5); }, strided);
    conv_check("flip + roll", x, [](const auto& a) { return roll<3>(flip<2>(a), {4}); }, strided);
  }
}

TEST_CASE("cuda max_pool2d propagates NaN; integer max_pool2d", "[cuda][conv]") {
  T4<float> x = randn<float, CS4>(1, 2, 6, 6);
  x.data()[7] = std::numeric_limits<float>::quiet_NaN();
  const T4<float> yc = max_pool2d(x, {2, 2});
  const T4<float> yg = max_pool2d(x.to(gpu), {2, 2});
  check_close(yg, yc, 0.0, 0.0);  // equal, NaN where the CPU has NaN
  CHECK(std::isnan(yg.cpu().data()[0]));
  const T4<std::int32_t> xi = randint<std::int32_t, CS4>(-50, 50, 2, 3, 7, 5);
  const T4<std::int32_t> ic = max_pool2d(xi, {3, 2}, {.stride = 2, .padding = 1});
  const T4<std::int32_t> ig = max_pool2d(xi.to(gpu), {3, 2}, {.stride = 2, .padding = 1});
  check_close(ig, ic, 0.0, 0.0);
}

template <class T>
void conv_low_precision() {
  manual_seed(33);
  const T4<float> xf = randn<float, CS4>(2, 6, 10, 9);
  const T4<float> wf = randn<float, CS4>(8, 3, 3, 3) * 0.3f;
  const T4<T> x = xf.template to<T>(), w = wf.template to<T>();
  // the CPU's float result on the same rounded inputs
  const T4<float> ref = conv2d(x.template to<float>(), w.template to<float>(), {.padding = 1, .groups = 2});
  const T4<T> y = conv2d(x.to(gpu), w.to(gpu), {.padding = 1, .groups = 2});
  check_close(y, ref, 2e-2, 5e-2);
  const T4<T> p = max_pool2d(x.to(gpu), {3, 3}, {.stride = 2});
  check_close(p, T4<float>(max_pool2d(x.template to<float>(), {3, 3}, {.stride = 2})), 0.0, 0.0);
}

TEST_CASE("cuda conv2d and max_pool2d in float16 and bfloat16", "[cuda][conv]") {
  conv_low_precision<float16>();
  conv_low_precision<bfloat16>();
}

TEST_CASE("cuda ResNet-18 stage 1 (bench/resnet_stage.hpp) equals the CPU's", "[cuda][conv]") {
  resnet::stage1 net;
  const auto x = resnet::make_param<resnet::S4>(0, 1.0, 0.0, 2, 3, 32, 32);
  const T4<float> yc = net(x);
  net.to(gpu);
  const T4<float> yg = net(x.to(gpu));
  check_same(yg, yc, "stage output");
}

}  // namespace
