// conv1d, conv2d, conv_transpose2d, pooling, interpolate, pad, flip, roll and the movement prims
// against PyTorch (tests/reference/gen_conv.py -> conv.txt). Options are read from the reference
// file, so each op instantiates one expression type per dtype; every case also runs on a
// non-contiguous (transposed) copy of its input, and conv2d's native CPU path is checked against
// its decomposition evaluated on detail::reference_backend.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;
using tenet_test::ref_case;

namespace {
constexpr const char* kFile = "conv.txt";
using S4 = dyn_shape<4>;

template <class T>
constexpr double rtol() {
  return std::is_same_v<T, float> ? 1e-4 : 1e-10;
}
template <class T>
constexpr double atol() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-10;
}

std::int64_t at(const ref_case& c, const char* key, std::size_t i = 0) {
  return static_cast<std::int64_t>(c.at(key).values.at(i));
}
ints<2> pair(const ref_case& c, const char* key) { return {at(c, key, 0), at(c, key, 1)}; }

/// The same values as x in a non-contiguous layout (a transposed view of a transposed copy).
template <class T>
Tensor<T, S4> non_contiguous(const Tensor<T, S4>& x) {
  Tensor<T, S4> t = x.template transpose<2, 3>().contiguous();
  Tensor<T, S4> v = t.template transpose<2, 3>();
  REQUIRE(!v.is_contiguous());
  return v;
}
template <class T>
std::vector<Tensor<T, S4>> layouts(const Tensor<T, S4>& x) {
  return {x, non_contiguous(x)};
}

template <class T>
void conv2d_cases(const std::string& sfx) {
  for (const char* name : {"basic", "stride_pad_dil", "groups", "depthwise", "same_even", "valid", "odd_batch1",
                           "pointwise", "kernel_fills_input"}) {
    INFO("conv2d " << name << " " << sfx);
    const auto& c = get_case(kFile, std::string("conv2d_") + name + "_" + sfx);
    const auto x = make<T, S4>(c.at("x"));
    const auto w = make<T, S4>(c.at("w"));
    conv2d_options o{.stride = pair(c, "stride"), .dilation = pair(c, "dilation"), .groups = at(c, "groups")};
    const auto mode = at(c, "mode");
    o.padding = mode == 1 ? conv_pad<2>(conv_padding::same)
                          : mode == 2 ? conv_pad<2>(conv_padding::valid) : conv_pad<2>(at(c, "padding"), at(c, "padding", 1));
    for (const auto& in : layouts(x)) {
      if (c.count("b")) {
        const auto b = make<T, shape<dyn>>(c.at("b"));
        check_close(eval(conv2d(in, w, b, o)), c.at("out"), rtol<T>(), atol<T>());
      } else {
        check_close(eval(conv2d(in, w, o)), c.at("out"), rtol<T>(), atol<T>());
        // the native path (im2col + GEMM) against the decomposition into prims
        const Tensor<T, S4> reference = detail::decompose<detail::reference_backend>(conv2d(in, w, o));
        check_close(reference, c.at("out"), rtol<T>(), atol<T>());
      }
    }
  }
}

template <class T>
void conv1d_cases(const std::string& sfx) {
  using S3 = dyn_shape<3>;
  for (const char* name : {"basic", "same", "strided"}) {
    INFO("conv1d " << name << " " << sfx);
    const auto& c = get_case(kFile, std::string("conv1d_") + name + "_" + sfx);
    const auto x = make<T, S3>(c.at("x"));
    const auto w = make<T, S3>(c.at("w"));
    conv1d_options o{.stride = at(c, "stride"), .dilation = at(c, "dilation"), .groups = at(c, "groups")};
    if (at(c, "mode") == 1) o.padding = conv_padding::same;
    else o.padding = at(c, "padding");
    const Tensor<T, S3> xt = x.template transpose<1, 2>().contiguous().template transpose<1, 2>();
    for (const auto& in : {x, xt}) {
      if (c.count("b"))
        check_close(eval(conv1d(in, w, make<T, shape<dyn>>(c.at("b")), o)), c.at("out"), rtol<T>(), atol<T>());
      else
        check_close(eval(conv1d(in, w, o)), c.at("out"), rtol<T>(), atol<T>());
    }
  }
}

template <class T>
void conv_transpose2d_cases(const std::string& sfx) {
  for (const char* name : {"basic", "stride_outpad", "groups_dil", "crop"}) {
    INFO("conv_transpose2d " << name << " " << sfx);
    const auto& c = get_case(kFile, std::string("convt_") + name + "_" + sfx);
    const auto x = make<T, S4>(c.at("x"));
    const auto w = make<T, S4>(c.at("w"));
    const conv_transpose2d_options o{.stride = pair(c, "stride"), .padding = pair(c, "padding"),
                                     .output_padding = pair(c, "output_padding"), .groups = at(c, "groups"),
                                     .dilation = pair(c, "dilation")};
    for (const auto& in : layouts(x)) {
      if (c.count("b"))
        check_close(eval(conv_transpose2d(in, w, make<T, shape<dyn>>(c.at("b")), o)), c.at("out"), rtol<T>(), atol<T>());
      else
        check_close(eval(conv_transpose2d(in, w, o)), c.at("out"), rtol<T>(), atol<T>());
    }
  }
}

template <class T>
void pool_cases(const std::string& sfx) {
  for (const char* name : {"k3s2p1", "ceil", "dilation", "rect_default_stride"}) {
    INFO("max_pool2d " << name << " " << sfx);
    const auto& c = get_case(kFile, std::string("maxpool_") + name + "_" + sfx);
    const auto x = make<T, S4>(c.at("x"));
    const max_pool2d_options o{.stride = pair(c, "stride"), .padding = pair(c, "padding"),
                               .dilation = pair(c, "dilation"), .ceil_mode = at(c, "ceil") != 0};
    for (const auto& in : layouts(x)) {
      check_close(eval(max_pool2d(in, pair(c, "kernel"), o)), c.at("out"));
      // the native loop against the decomposition (pad, window view, amax)
      const Tensor<T, S4> reference = detail::decompose<detail::reference_backend>(max_pool2d(in, pair(c, "kernel"), o));
      check_close(reference, c.at("out"));
    }
  }
  if constexpr (is_floating_v<T>) {
    for (const char* name : {"k3s2p1", "exclude_pad", "ceil", "ceil_exclude", "divisor"}) {
      INFO("avg_pool2d " << name << " " << sfx);
      const auto& c = get_case(kFile, std::string("avgpool_") + name + "_" + sfx);
      const auto x = make<T, S4>(c.at("x"));
      avg_pool2d_options o{.stride = pair(c, "stride"), .padding = pair(c, "padding"), .ceil_mode = at(c, "ceil") != 0,
                           .count_include_pad = at(c, "cip") != 0};
      if (at(c, "div") > 0) o.divisor_override = at(c, "div");
      for (const auto& in : layouts(x))
        check_close(eval(avg_pool2d(in, pair(c, "kernel"), o)), c.at("out"), rtol<T>(), atol<T>());
    }
    for (const char* name : {"nondiv", "global", "same", "up"}) {
      INFO("adaptive_avg_pool2d " << name << " " << sfx);
      const auto& c = get_case(kFile, std::string("adaptive_") + name + "_" + sfx);
      const auto x = make<T, S4>(c.at("x"));
      for (const auto& in : layouts(x))
        check_close(eval(adaptive_avg_pool2d(in, pair(c, "size"))), c.at("out"), rtol<T>(), atol<T>());
    }
  }
}

template <class T>
void interpolate_cases(const std::string& sfx) {
  for (const char* name : {"nearest_size", "nearest_down", "nearest_scale", "bilinear", "bilinear_align",
                           "bilinear_down", "bilinear_scale", "bilinear_align_one"}) {
    INFO("interpolate " << name << " " << sfx);
    const auto& c = get_case(kFile, std::string("interp_") + name + "_" + sfx);
    const auto x = make<T, S4>(c.at("x"));
    interpolate_options o{.size = pair(c, "size"),
                          .scale_factor = scales2(c.at("scale").values[0], c.at("scale").values[1]),
                          .mode = at(c, "mode") == 0 ? interpolate_mode::nearest : interpolate_mode::bilinear};
    if (at(c, "align") >= 0) o.align_corners = at(c, "align") == 1;
    for (const auto& in : layouts(x)) check_close(eval(interpolate(in, o)), c.at("out"), rtol<T>(), atol<T>());
  }
}

template <class T>
void pad_flip_roll_cases(const std::string& sfx) {
  INFO("pad/flip/roll " << sfx);
  const auto& c = get_case(kFile, "pad_" + sfx);
  const auto x = make<T, S4>(c.at("x"));
  for (const auto& in : layouts(x)) {
    check_close(eval(pad(in, {1, -2, 3, 1}, 2)), c.at("constant"));
    check_close(eval(pad(in, {0, 1, 1, 0, -1, 2, 1, 0}, -1)), c.at("constant4"));
    check_close(eval(pad<pad_mode::reflect>(in, {1, 3, 4, 2})), c.at("reflect"));
    check_close(eval(pad<pad_mode::replicate>(in, {2, 0, 1, 3})), c.at("replicate"));
    check_close(eval(flip<2, 3>(in)), c.at("flip23"));
    check_close(eval(flip<1>(in)), c.at("flip1"));
    check_close(eval(roll<2, -1>(in, {1, -2})), c.at("roll"));
    check_close(eval(roll(in, 7)), c.at("roll_flat"));
    prim::unfold_<2> u;
    u.size = 3, u.step = 2;
    check_close(eval(make_node(u, in)), c.at("unfold"));
  }
  const Tensor<T, dyn_shape<3>> r3 = x.template reshape<dyn, dyn, dyn>(6, 5, 4);
  check_close(eval(pad<pad_mode::reflect>(r3, {3, 2})), c.at("reflect1"));
}
}  // namespace

TEST_CASE("conv: conv2d against PyTorch (every option; native path against the decomposition)") {
  conv2d_cases<float>("f32");
  conv2d_cases<double>("f64");
}

TEST_CASE("conv: conv1d and conv_transpose2d against PyTorch") {
  conv1d_cases<float>("f32");
  conv1d_cases<double>("f64");
  conv_transpose2d_cases<float>("f32");
  conv_transpose2d_cases<double>("f64");
}

TEST_CASE("conv: max_pool2d, avg_pool2d, adaptive_avg_pool2d against PyTorch") {
  pool_cases<float>("f32");
  pool_cases<double>("f64");
  pool_cases<std::int64_t>("i64");
}

TEST_CASE("conv: ceil_mode pooling keeps a window longer than the input, as torch") {
  // torch: max_pool2d(arange(10.).reshape(1, 1, 2, 5), 3, ceil_mode=True) is [[7, 9]] (one window
  // row starting inside the 2 input rows); without ceil_mode the output would be empty, an error.
  // Found by the differential fuzzer's conv programs (tests/fuzz/gen_fuzz.py --conv).
  const Tensor<float, shape<1, 1, 2, 5>> x = arange<float>(0, 10).reshape<1, 1, 2, 5>();
  const Tensor<float, shape<1, 1, dyn, dyn>> xd = x;
  const auto check = [](const auto& y, std::vector<float> want) {
    REQUIRE(y.sizes()[2] == 1);
    REQUIRE(y.sizes()[3] == 2);
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(y.data()[i] == Approx(want[i]));
  };
  check(eval(max_pool2d(xd, 3, {.ceil_mode = true})), {7, 9});
  check(eval(avg_pool2d(xd, 3, {.ceil_mode = true})), {3.5f, 6});
  check(eval(avg_pool2d(xd, 3, {.padding = 1, .ceil_mode = true})), {4.f / 3, 11.f / 3});
  const auto ys = eval(max_pool2d<3, max_pool2d_options{.ceil_mode = true}>(x));
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(ys)>, shape<1, 1, 1, 2>>);
  check(ys, {7, 9});
  check(eval(avg_pool2d<3, avg_pool2d_options{.ceil_mode = true}>(x)), {3.5f, 6});
  CHECK_THROWS_WITH(max_pool2d(xd, 3), Catch::Contains("larger than the padded input extent 2"));
}

TEST_CASE("conv: interpolate nearest and bilinear against PyTorch") {
  interpolate_cases<float>("f32");
  interpolate_cases<double>("f64");
}

TEST_CASE("conv: pad (constant, reflect, replicate), flip, roll, unfold against PyTorch") {
  pad_flip_roll_cases<float>("f32");
  pad_flip_roll_cases<double>("f64");
  pad_flip_roll_cases<std::int64_t>("i64");
}

TEST_CASE("conv: static batch and channel extents carry over; an empty batch gives an empty result") {
  using X = Tensor<float, shape<2, 3, 7, 6>>;
  using W = Tensor<float, shape<4, 3, 3, 3>>;
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(conv2d(std::declval<X>(), std::declval<W>()))>, shape<2, 4, dyn, dyn>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(max_pool2d(std::declval<X>(), 2))>, shape<2, 3, dyn, dyn>>);
  const auto x = zeros<float, S4>(0, 3, 7, 6);
  const auto w = ones<float, S4>(4, 3, 3, 3);
  const Tensor<float, S4> y = conv2d(x, w);
  CHECK(y.sizes() == sizes_t<4>{0, 4, 5, 4});
  const Tensor<float, S4> m = max_pool2d(x, 2);
  CHECK(m.sizes() == sizes_t<4>{0, 3, 3, 3});
}

TEST_CASE("conv: errors carry the sizes") {
  const auto x = zeros<float, S4>(2, 3, 7, 6);
  const auto w = zeros<float, S4>(4, 2, 3, 3);
  CHECK_THROWS_AS(conv2d(x, w), shape_error);
  CHECK_THROWS_WITH(conv2d(x, w), Catch::Contains("3 channels") && Catch::Contains("shape<2, 3, 7, 6>"));
  CHECK_THROWS_WITH(conv2d(x, w, {.groups = 2}), Catch::Contains("groups = 2 must divide"));
  CHECK_THROWS_AS(conv2d(x, w, {.groups = 2}), shape_error);
  const auto w3 = zeros<float, S4>(4, 3, 9, 3);
  CHECK_THROWS_AS(conv2d(x, w3), shape_error);
  CHECK_THROWS_WITH(conv2d(x, w3), Catch::Contains("larger than the padded input extent 7") &&
                                       Catch::Contains("shape<4, 3, 9, 3>"));
  CHECK_NOTHROW(conv2d(x, w3, {.padding = {1, 0}}));
  CHECK_THROWS_AS(conv2d(x, w3, {.stride = 2, .padding = conv_padding::same}), value_error);
  CHECK_THROWS_AS(conv2d(x, zeros<float, S4>(4, 3, 3, 3), zeros<float, shape<dyn>>(5)), shape_error);
  CHECK_THROWS_AS(conv_transpose2d(x, w), shape_error);
  CHECK_THROWS_AS(conv_transpose2d(x, zeros<float, S4>(3, 2, 3, 3), {.output_padding = 1}), value_error);
  CHECK_THROWS_AS(max_pool2d(x, 3, {.padding = 2}), value_error);
  CHECK_THROWS_WITH(max_pool2d(x, {9, 2}), Catch::Contains("larger than the padded input extent 7"));
  CHECK_THROWS_AS(avg_pool2d(x, 2, {.divisor_override = 0}), value_error);
  CHECK_THROWS_AS(interpolate(x, {}), value_error);
  CHECK_THROWS_AS(interpolate(x, {.size = 4, .align_corners = true}), value_error);
  CHECK_THROWS_AS(pad<pad_mode::reflect>(x, {6, 0}), value_error);
  CHECK_THROWS_AS(pad(x, {-4, -3}), shape_error);
  prim::unfold_<3> u;
  u.size = 7, u.step = 1;
  CHECK_THROWS_WITH(make_node(u, x).sizes(), Catch::Contains("window size 7") && Catch::Contains("size 6"));
  CHECK_THROWS_AS(make_node(prim::slice_<4>{{0, 0, 0, 0}, {2, 3, 8, 6}, {1, 1, 1, 1}}, x).sizes(), index_error);
}

TEST_CASE("conv: movement prims are views on the CPU, with static shapes where their parameters are") {
  Tensor<float, shape<2, 3, 5>> x = arange<float>(30).reshape<2, 3, 5>();
  // permute_ and a static unfold_ compute their shapes at compile time
  auto p = make_node(prim::permute_<2, 0, 1>{}, x);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(p)>, shape<5, 2, 3>>);
  auto u = make_node(prim::unfold_<2, 2, 3>{}, x);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(u)>, shape<2, 3, 2, 2>>);
  // to_tensor() gives views of x (no kernel), evaluation gives fresh storage
  CHECK(detail::to_tensor(p).shares_storage(x));
  CHECK(detail::to_tensor(u).shares_storage(x));
  Tensor<float, shape<5, 2, 3>> pe = p;
  CHECK(!pe.shares_storage(x));
  CHECK(pe(4, 1, 2) == x(1, 2, 4));
  pe(4, 1, 2) = -1;
  CHECK(x(1, 2, 4) == 29);
  Tensor<float, shape<2, 3, 2, 2>> ue = u;
  CHECK(ue(1, 2, 1, 1) == x(1, 2, 4));
  // slice_ with negative steps, expand_, reshape_ of a non-viewable input
  auto s = make_node(prim::slice_<3>{{1, 2, 4}, {-1, 0, 0}, {-1, -2, -3}}, x);
  const Tensor<float, dyn_shape<3>> se = s;
  CHECK(se.sizes() == sizes_t<3>{2, 1, 2});
  CHECK(se(0, 0, 0) == x(1, 2, 4));
  CHECK(se(1, 0, 1) == x(0, 2, 1));
  auto ex = make_node(prim::expand_<shape<4, 2, 3, 5>>{{4, 2, 3, 5}}, x);
  CHECK(detail::to_tensor(ex).strides()[0] == 0);
  const Tensor<float, shape<4, 2, 3, 5>> exe = ex;
  CHECK(exe(3, 1, 2, 4) == 29);
  auto r = make_node(prim::reshape_<shape<6, 5>>{{6, 5}}, x);
  CHECK(detail::to_tensor(r).shares_storage(x));
  auto rt = make_node(prim::reshape_<shape<15, 2>>{{15, 2}}, x.transpose<0, 2>());
  CHECK(!detail::to_tensor(rt).shares_storage(x));
  const Tensor<float, shape<15, 2>> rte = rt;
  CHECK(rte(0, 1) == x(1, 0, 0));  // the transposed order (5, 3, 2) flattened
  CHECK_THROWS_AS(make_node(prim::reshape_<dyn_shape<2>>{{7, 5}}, x).sizes(), shape_error);
  // a view inside a pointwise expression, and written into a destination (assign's root path)
  const Tensor<float, dyn_shape<3>> sum = flip<2>(x) + x;
  CHECK(sum(1, 1, 0) == x(1, 1, 4) + x(1, 1, 0));
  Tensor<float, shape<5, 2, 3>> dst = zeros<float, shape<5, 2, 3>>();
  dst.copy_(p);
  CHECK(dst(3, 1, 0) == x(1, 0, 3));
  // writing a tensor's own flip into it reads it at other indices: evaluated into a temporary first
  Tensor<float, shape<2, 3, 5>> y = x.clone();
  y.copy_(flip<2>(y));
  CHECK(y(1, 2, 0) == x(1, 2, 4));
  CHECK(y(1, 2, 4) == x(1, 2, 0));
}

TEST_CASE("conv: pad_ with interior padding and negative low/high (XLA's pad)") {
  const auto& c = get_case(kFile, "pad_prim");
  const auto x = make<std::int64_t, dyn_shape<2>>(c.at("x"));
  prim::pad_<2> op{{1, -1}, {-1, 2}, {1, 2}, 9.0};
  check_close(eval(make_node(op, x)), c.at("out"));
  check_close(eval(make_node(op, x.transpose<0, 1>().contiguous().transpose<0, 1>())), c.at("out"));
  prim::pad_<2> bad{{0, 0}, {0, 0}, {-1, 0}, 0.0};
  CHECK_THROWS_AS(make_node(bad, x).sizes(), value_error);
}

#include "../bench/resnet_stage.hpp"

TEST_CASE("conv: ResNet-18's first stage (the benchmark's workload) against PyTorch") {
  const resnet::stage1 model;
  const auto x = resnet::make_param<resnet::S4>(0, 1.0, 0.0, 1, 3, 32, 32);
  check_close(model(x), get_case(kFile, "resnet_stage1").at("out"), 1e-4, 1e-4);
}

// ---------------------------------------------------------------------------------------------
// The CPU's conv2d kernels against each other and a direct convolution in double: Winograd
// (F(2x2, 3x3) in float, F(4x4, 3x3) in double: backend/cpu/winograd.hpp) and im2col + GEMM
// (backend/cpu/conv.hpp), over channel counts that are not multiples of the vector width, odd
// and tiny images (a tile cut by the edge, one tile), batch 1, padding 0, 1, 2 and unequal
// low/high padding.
namespace {
struct direct_result {
  std::vector<double> y, scale;  // the exact sums, and sum |w| |x| per output (the rounding's scale)
};
template <class T>
direct_result direct_conv(const std::vector<T>& x, const std::vector<T>& w, const detail::conv2d_geometry& g) {
  direct_result r;
  const auto n_out = static_cast<std::size_t>(g.N * g.O * g.oh * g.ow);
  r.y.assign(n_out, 0.0);
  r.scale.assign(n_out, 0.0);
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t o = 0; o < g.O; ++o)
      for (std::int64_t oy = 0; oy < g.oh; ++oy)
        for (std::int64_t ox = 0; ox < g.ow; ++ox) {
          double s = 0, a = 0;
          for (std::int64_t c = 0; c < g.C; ++c)
            for (std::int64_t i = 0; i < g.kh; ++i)
              for (std::int64_t j = 0; j < g.kw; ++j) {
                const std::int64_t iy = oy * g.stride_h - g.pad_top + i, ix = ox * g.stride_w - g.pad_left + j;
                if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W) continue;
                const double p = static_cast<double>(w[static_cast<std::size_t>(((o * g.C + c) * g.kh + i) * g.kw + j)]) *
                                 static_cast<double>(x[static_cast<std::size_t>(((n * g.C + c) * g.H + iy) * g.W + ix)]);
                s += p;
                a += std::abs(p);
              }
          const auto at = static_cast<std::size_t>(((n * g.O + o) * g.oh + oy) * g.ow + ox);
          r.y[at] = s;
          r.scale[at] = a;
        }
  return r;
}

/// The largest error of y against the exact sums, in units of the lane type's epsilon times each
/// output's sum |w| |x|.
template <class T>
double error_units(const std::vector<T>& y, const direct_result& exact) {
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(y[i]) - exact.y[i]) /
                                (std::numeric_limits<T>::epsilon() * std::max(exact.scale[i], 1e-30)));
  return worst;
}

template <class T>
void check_winograd(std::int64_t N, std::int64_t C, std::int64_t O, std::int64_t H, std::int64_t W,
                    std::array<std::int64_t, 4> pad) {
  INFO("N C O H W " << N << " " << C << " " << O << " " << H << " " << W << " pad (t l b r) " << pad[0] << " "
                    << pad[1] << " " << pad[2] << " " << pad[3] << " " << (sizeof(T) == 4 ? "float" : "double"));
  aten::conv2d op;
  op.pad_low = {pad[0], pad[1]};
  op.pad_high = {pad[2], pad[3]};
  const auto g = op.geometry({N, C, H, W}, {O, C, 3, 3});
  REQUIRE(detail::cpu::winograd_applies(g));
  std::vector<T> x(static_cast<std::size_t>(N * C * H * W)), w(static_cast<std::size_t>(O * C * 9));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(std::sin(0.37 * static_cast<double>(i) + 0.1));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<T>(0.3 * std::cos(1.3 * static_cast<double>(i)));
  const auto exact = direct_conv(x, w, g);
  // NaN-filled outputs: every element must be written
  std::vector<T> yw(exact.y.size(), std::numeric_limits<T>::quiet_NaN()), yi = yw;
  detail::cpu::run_conv2d_winograd(x.data(), w.data(), yw.data(), g);
  detail::cpu::run_conv2d_im2col(x.data(), w.data(), yi.data(), g);
  const double ew = error_units(yw, exact), ei = error_units(yi, exact);
  INFO("error in eps * sum|w||x|: winograd " << ew << ", im2col " << ei);
  CHECK(ei < 4);
  // float runs F(2x2, 3x3), whose transforms add and halve only: about im2col's error (under 1
  // unit measured here); double runs F(4x4, 3x3), whose transforms scale by up to 8 and 5 with
  // sixths and 24ths in the weights': at most 4.1 units measured
  CHECK(ew < (std::is_same_v<T, float> ? 2 : 16));
}
}  // namespace

TEST_CASE("conv: Winograd against im2col and a double direct convolution") {
  for (const bool dbl : {false, true}) {
    auto run = [&](std::int64_t N, std::int64_t C, std::int64_t O, std::int64_t H, std::int64_t W,
                   std::array<std::int64_t, 4> pad) {
      if (dbl)
        check_winograd<double>(N, C, O, H, W, pad);
      else
        check_winograd<float>(N, C, O, H, W, pad);
    };
    run(2, 16, 16, 8, 8, {1, 1, 1, 1});    // whole tiles
    run(1, 17, 19, 9, 7, {1, 1, 1, 1});    // channels past the vector width, tiles cut by the edge
    run(3, 37, 40, 13, 11, {0, 0, 0, 0});  // no padding: output 11 x 9
    run(1, 16, 33, 3, 3, {2, 2, 2, 2});    // padding 2: output 5 x 5 from a 3 x 3 image
    run(2, 20, 16, 6, 10, {0, 1, 2, 1});   // unequal low and high padding
    run(1, 64, 64, 4, 17, {1, 1, 1, 1});   // one row of tiles, a long row
    run(1, 16, 16, 1, 1, {1, 1, 1, 1});    // a 1 x 1 image: one tile, one output
  }
}

TEST_CASE("conv: conv2d takes the Winograd kernel for 3x3 stride 1 with enough channels, on any layout") {
  // through the public API: a transposed (non-contiguous) input and a bias, against the
  // decomposition on the reference backend; 2 x 15 x 20 outputs of 18 -> 21 channels are eligible
  const auto x = resnet::make_param<S4>(3, 1.0, 0.0, 2, 18, 15, 20);
  const auto w = resnet::make_param<S4>(4, 0.2, 0.0, 21, 18, 3, 3);
  const auto b = resnet::make_param<shape<dyn>>(5, 1.0, 0.0, 21);
  aten::conv2d op;
  op.pad_low = op.pad_high = {1, 1};
  REQUIRE(detail::cpu::winograd_eligible(op.geometry(x.sizes(), w.sizes())));
  for (const auto& in : layouts(x)) {
    const Tensor<float, S4> y = conv2d(in, w, b, {.padding = 1});
    const Tensor<float, S4> reference =
        detail::decompose<detail::reference_backend>(conv2d(in, w, {.padding = 1}) + b.reshape<dyn, 1, 1>(21));
    // sum |w| |x| is about 20 per output here: 1e-4 is about 40 float epsilons of it
    CHECK(eval(amax(abs(y - reference))).item() < 1e-4f);
  }
  // below the crossovers (4 channels; 9 x 9 positions) the automatic choice is im2col, and the
  // forced kernel computes the same values
  aten::conv2d same_op;
  same_op.pad_low = same_op.pad_high = {1, 1};
  CHECK(!detail::cpu::winograd_eligible(same_op.geometry({1, 4, 30, 30}, {8, 4, 3, 3})));
  CHECK(!detail::cpu::winograd_eligible(same_op.geometry({1, 32, 9, 9}, {32, 32, 3, 3})));
  const auto small = resnet::make_param<S4>(6, 1.0, 0.0, 1, 4, 9, 9);
  const auto ws = resnet::make_param<S4>(8, 0.3, 0.0, 8, 4, 3, 3);
  const Tensor<float, S4> automatic = conv2d(small, ws, {.padding = 1});
  const detail::cpu::conv2d_kernel_scope forced(detail::cpu::conv2d_kernel::winograd);
  CHECK(eval(amax(abs(Tensor<float, S4>(conv2d(small, ws, {.padding = 1})) - automatic))).item() < 1e-5f);
}

// ---------------------------------------------------------------------------------------------
// conv2d with an elementwise tree over it (batch norm in eval as scale and shift, residual add,
// relu; a bias) runs as one kernel, the tree applied to each output image by the convolution
// (conv_epilogue_pattern): the same values as the convolution followed by the pointwise kernel,
// on Winograd, im2col per image and im2col over several small images, for batches that split
// over the threads by image and by tile.
namespace {
using C3 = shape<dyn, 1, 1>;
template <class T>
double max_diff(const Tensor<T, S4>& a, const Tensor<T, S4>& b) {
  REQUIRE(a.sizes() == b.sizes());
  return static_cast<double>(eval(amax(abs(a - b))).item());
}
template <class T>
void check_conv_epilogue(std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, bool winograd) {
  INFO("N C H W " << N << " " << C << " " << H << " " << W << (sizeof(T) == 4 ? " float" : " double"));
  const Tensor<T, S4> x = resnet::make_param<S4>(7, 1.0, 0.0, N, C, H, W).template to<T>();
  const Tensor<T, S4> w = resnet::make_param<S4>(8, 0.3, 0.0, C, C, 3, 3).template to<T>();
  const Tensor<T, C3> scale = resnet::make_param<C3>(9, 0.25, 1.0, C).template to<T>();
  const Tensor<T, C3> shift = resnet::make_param<C3>(10, 0.5, 0.0, C).template to<T>();
  aten::conv2d op;
  op.pad_low = op.pad_high = {1, 1};
  REQUIRE(detail::cpu::winograd_eligible(op.geometry(x.sizes(), w.sizes())) == winograd);
  for (const auto& in : layouts(x)) {
    INFO("contiguous " << in.is_contiguous());
    auto fused = relu(conv2d(in, w, {.padding = 1}) * scale + shift + in);
    const auto p = plan(fused);
    REQUIRE(p.size() == 1);
    CHECK(p.kernels[0].kind == "conv2d+epilogue");
    CHECK(p.kernels[0].fused == std::vector<std::string>{"conv2d", "mul", "add", "add", "maximum"});
    const std::int64_t k0 = detail::kernels_launched();
    const Tensor<T, S4> y = fused;
    if (in.is_contiguous()) CHECK(detail::kernels_launched() - k0 == 1);
    const Tensor<T, S4> c = conv2d(in, w, {.padding = 1});
    const Tensor<T, S4> unfused = relu(c * scale + shift + in);
    CHECK(max_diff(y, unfused) == 0);  // the same kernels' values: exactly
    // the decomposition on the reference backend: the same function
    const Tensor<T, S4> reference =
        detail::decompose<detail::reference_backend>(relu(conv2d(in, w, {.padding = 1}) * scale + shift + in));
    CHECK(max_diff(y, reference) < (sizeof(T) == 4 ? 2e-4 : 1e-11));
  }
}
}  // namespace

TEST_CASE("conv: conv2d's elementwise consumers run as its epilogue, with the unfused values") {
  for (const bool dbl : {false, true}) {
    auto run = [&](std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, bool winograd) {
      if (dbl)
        check_conv_epilogue<double>(N, C, H, W, winograd);
      else
        check_conv_epilogue<float>(N, C, H, W, winograd);
    };
    run(2, 17, 15, 20, true);   // Winograd, whole images per thread; channels past the vector width
    run(3, 16, 13, 17, true);   // Winograd, tiles split over the threads (3 images); odd sizes
    run(3, 8, 9, 11, false);    // im2col, several small images per GEMM
    run(2, 5, 19, 23, false);   // im2col per image
  }
  const auto x = resnet::make_param<S4>(11, 1.0, 0.0, 1, 16, 24, 24);
  const auto w = resnet::make_param<S4>(12, 0.2, 0.0, 16, 16, 3, 3);
  const auto b = resnet::make_param<shape<dyn>>(13, 1.0, 0.0, 16);
  const Tensor<float, S4> c = conv2d(x, w, {.padding = 1});
  // the stem's 7x7/2 on im2col in bands of output rows (16 * 49 columns of 512 KiB: 5 of the 32
  // rows per band, the last band 2), the epilogue per band: against the unfused expression and the
  // reference decomposition
  {
    const auto xs = resnet::make_param<S4>(15, 1.0, 0.0, 2, 16, 64, 64);
    const auto w7 = resnet::make_param<S4>(16, 0.05, 0.0, 24, 16, 7, 7);
    const auto sc = resnet::make_param<C3>(17, 0.25, 1.0, 24);
    const auto sh = resnet::make_param<C3>(18, 0.5, 0.0, 24);
    auto stem = relu(conv2d(xs, w7, {.stride = 2, .padding = 3}) * sc + sh);
    CHECK(plan(stem).kernels[0].kind == "conv2d+epilogue");
    const Tensor<float, S4> ys = stem;
    const Tensor<float, S4> cs = conv2d(xs, w7, {.stride = 2, .padding = 3});
    CHECK(max_diff(ys, Tensor<float, S4>(relu(cs * sc + sh))) == 0);
    const Tensor<float, S4> rs = detail::decompose<detail::reference_backend>(stem);
    CHECK(max_diff(ys, rs) < 2e-4);
  }
  // a bias alone is an epilogue
  auto biased = conv2d(x, w, b, {.padding = 1});
  CHECK(plan(biased).kernels[0].kind == "conv2d+epilogue");
  CHECK(max_diff(Tensor<float, S4>(biased), Tensor<float, S4>(c + b.reshape<dyn, 1, 1>(16))) == 0);
  // a tree that broadcasts the convolution's value (batch 1 against 2) is not: a pointwise kernel
  const auto wide = resnet::make_param<S4>(14, 1.0, 0.0, 2, 16, 24, 24);
  auto broadcast = conv2d(x, w, {.padding = 1}) + wide;
  const auto pb = plan(broadcast);
  REQUIRE(pb.size() == 2);
  CHECK(pb.kernels[1].kind == "pointwise");
  CHECK(max_diff(Tensor<float, S4>(broadcast), Tensor<float, S4>(c + wide)) == 0);
  // nor while a forward is recorded for a backward (a CSE session: autograd's recording, compiled
  // training steps), which reads the convolution's own value
  {
    const detail::cse_session session;
    const auto pr = plan(relu(conv2d(x, w, {.padding = 1})));
    REQUIRE(pr.size() == 2);
    CHECK(pr.kernels[0].kind == "conv2d");
  }
}

// ---------------------------------------------------------------------------------------------
// Winograd's transformed weights are kept per thread (winograd::weight_cache) and used only while
// the weights are bitwise unchanged: after in-place updates through tenet's ops (an optimizer's
// step is such an update: p.sub_(lr * grad)), raw writes through data(), and a new tensor at a
// freed weight's address, the result is always the convolution of the current weights.
namespace {
template <class T>
void check_winograd_weight_cache() {
  INFO((sizeof(T) == 4 ? "float" : "double"));
  auto& cache = detail::cpu::winograd::weight_cache<T>::instance();
  cache.clear();
  const detail::cpu::conv2d_kernel_scope forced(detail::cpu::conv2d_kernel::winograd);
  const Tensor<T, S4> x = resnet::make_param<S4>(19, 1.0, 0.0, 2, 17, 9, 11).template to<T>();
  Tensor<T, S4> w = resnet::make_param<S4>(20, 0.3, 0.0, 18, 17, 3, 3).template to<T>();
  const double tol = sizeof(T) == 4 ? 1e-4 : 1e-11;
  // the convolution of w's current values on im2col, which keeps nothing
  auto expected = [&](const Tensor<T, S4>& wt) {
    const detail::cpu::conv2d_kernel_scope im2col(detail::cpu::conv2d_kernel::im2col);
    return Tensor<T, S4>(conv2d(x, wt, {.padding = 1}));
  };
  auto run = [&] { return Tensor<T, S4>(conv2d(x, w, {.padding = 1})); };
  const Tensor<T, S4> y1 = run();
  CHECK(cache.size() == 1);
  CHECK(max_diff(y1, expected(w)) < tol);
  CHECK(max_diff(run(), y1) == 0);  // from the kept transform
  CHECK(cache.size() == 1);
  // in place through tenet's ops: an optimizer-like step, then a scale
  const Tensor<T, S4> grad = resnet::make_param<S4>(21, 1.0, 0.0, 18, 17, 3, 3).template to<T>();
  w.sub_(grad * T(0.1));
  const Tensor<T, S4> y2 = run();
  CHECK(max_diff(y2, y1) > 0.01);
  CHECK(max_diff(y2, expected(w)) < tol);
  w.mul_(T(-2));
  CHECK(max_diff(run(), expected(w)) < tol);
  // a raw write of one value through data(), which no version counter sees
  w.data()[100] += T(1);
  CHECK(max_diff(run(), expected(w)) < tol);
  CHECK(cache.size() == 1);
  // through a view of the weights (a slice written in place)
  w.template select<0>(3).fill_(T(0.25));
  CHECK(max_diff(run(), expected(w)) < tol);
  // another weight tensor at the address of a freed one (the block cache hands it out again)
  const T* old = w.data();
  w = Tensor<T, S4>();
  Tensor<T, S4> w2 = resnet::make_param<S4>(22, 0.3, 0.0, 18, 17, 3, 3).template to<T>();
  INFO("same address " << (w2.data() == old));
  w = w2;
  CHECK(max_diff(run(), expected(w)) < tol);
  // other weights of other sizes at once: separate entries
  const Tensor<T, S4> w3 = resnet::make_param<S4>(23, 0.3, 0.0, 16, 17, 3, 3).template to<T>();
  const Tensor<T, S4> y3 = conv2d(x, w3, {.padding = 1});
  CHECK(max_diff(y3, expected(w3)) < tol);
  CHECK(max_diff(run(), expected(w)) < tol);
  CHECK(cache.size() >= 2);
  cache.clear();
}
}  // namespace

TEST_CASE("conv: Winograd keeps transformed weights while they are unchanged, never a stale result") {
  check_winograd_weight_cache<float>();
  check_winograd_weight_cache<double>();
}

TEST_CASE("conv: max_pool2d's vector rows agree with its scalar loop (NaN, -inf, padding, dilation, ceil_mode)") {
  // contiguous float/double planes take the separable vector form (rows a vector at a time), a
  // transposed view the scalar loop; rows of 37 hold whole vectors and a tail on every arch
  auto check = [](auto zero) {
    using T = decltype(zero);
    Tensor<T, S4> x = resnet::make_param<S4>(7, 1.0, 0.0, 2, 3, 11, 37).to<T>();
    T* p = x.data();
    p[5 * 37 + 20] = std::numeric_limits<T>::quiet_NaN();  // one NaN
    for (std::int64_t i = 0; i < 11 * 37; ++i) p[2 * 11 * 37 + i] = -std::numeric_limits<T>::infinity();  // an all -inf plane
    p[4 * 11 * 37 + 3 * 37 + 36] = std::numeric_limits<T>::quiet_NaN();  // a NaN in the last column
    const auto xt = non_contiguous(x);
    auto same = [](const Tensor<T, S4>& a, const Tensor<T, S4>& b) {
      REQUIRE(a.sizes() == b.sizes());
      std::int64_t bad = 0;
      for (std::int64_t i = 0; i < a.numel(); ++i) {
        const T u = a.data()[i], v = b.data()[i];
        if (!(u == v || (u != u && v != v))) ++bad;
      }
      return bad;
    };
    CHECK(same(max_pool2d(x, 3, {.stride = 2, .padding = 1}), max_pool2d(xt, 3, {.stride = 2, .padding = 1})) == 0);
    CHECK(same(max_pool2d(x, {2, 3}, {.stride = {1, 2}, .padding = {1, 1}, .dilation = {2, 2}}),
               max_pool2d(xt, {2, 3}, {.stride = {1, 2}, .padding = {1, 1}, .dilation = {2, 2}})) == 0);
    CHECK(same(max_pool2d(x, 3, {.stride = 2, .ceil_mode = true}), max_pool2d(xt, 3, {.stride = 2, .ceil_mode = true})) == 0);
    const Tensor<T, S4> y = max_pool2d(x, 3, {.stride = 2, .padding = 1});
    CHECK(std::isnan(static_cast<double>(y(0, 0, 2, 10))));  // windows over the NaN (row 5, column 20)
    CHECK(std::isnan(static_cast<double>(y(0, 0, 3, 10))));
    CHECK(y(0, 2, 0, 0) == -std::numeric_limits<T>::infinity());  // the all -inf plane
  };
  check(0.0f);
  check(0.0);
}
