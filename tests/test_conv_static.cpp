// Static shapes through CNNs: conv1d/conv2d, max/avg pooling and adaptive pooling with options
// given as template arguments, and the nn modules that take them, give static output extents
// where the input's are. Checked here: the extents against PyTorch's (a table made with torch
// 2.15, F.max_pool2d / F.avg_pool2d / F.conv1d on inputs of one row: stride larger than the
// kernel, padding, dilation, ceil_mode both ways with its "last window starts inside" rule), the
// result types of a small CNN stage by stage, and its values against the same CNN with run-time
// options: identical (the same kernels run; the static shape is a view), not just close.
#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>

#include <tenet/tenet.hpp>

using namespace tenet;

namespace {

// ---------------------------------------------------------------------------------------------
// output extents against torch's
struct window_row {
  int n, k, s, p, d;
  int floor_out, ceil_out;  // ceil_out: pooling with ceil_mode (conv rows: unused, -1)
};
// max_pool2d (and avg_pool2d where d = 1): torch's extents for ceil_mode False and True
constexpr window_row pool_rows[] = {
    {10, 2, 3, 0, 1, 3, 4},   // stride > kernel; ceil adds a window that starts inside
    {7, 3, 2, 1, 1, 4, 4},    {6, 3, 2, 1, 2, 2, 3},  {5, 2, 2, 1, 1, 3, 3},  // ceil's window would start in the right padding: dropped
    {6, 2, 4, 1, 1, 2, 2},    // the same, stride > kernel
    {4, 1, 2, 0, 1, 2, 2},    // ...and without padding
    {4, 3, 3, 1, 1, 2, 2},    {1, 1, 5, 0, 1, 1, 1},  {9, 4, 5, 2, 1, 2, 3},  {8, 3, 3, 0, 1, 2, 3},
    {11, 3, 4, 1, 3, 2, 3},   {13, 5, 2, 2, 1, 7, 7}, {3, 3, 1, 1, 1, 3, 3},  {2, 2, 3, 1, 2, 1, 1},
};
// conv1d: torch's extents (floor only)
constexpr window_row conv_rows[] = {
    {10, 2, 3, 0, 1, 3, -1}, {7, 3, 2, 1, 1, 4, -1}, {6, 3, 2, 1, 2, 2, -1},  {5, 3, 4, 2, 2, 2, -1},
    {1, 1, 5, 0, 1, 1, -1},  {4, 5, 1, 1, 1, 2, -1}, {9, 3, 1, 4, 3, 11, -1}, {8, 4, 7, 0, 1, 1, -1},
    {12, 3, 5, 3, 2, 3, -1}, {3, 3, 2, 0, 1, 1, -1},
};

/// The static width of max_pool2d's / avg_pool2d's result over an input (dyn, 1, 1, n), from its type.
template <window_row R, bool Ceil>
constexpr std::int64_t max_pool_width() {
  using X = Tensor<float, shape<dyn, 1, 1, R.n>>;
  using Y = decltype(max_pool2d<ints<2>{1, R.k}, max_pool2d_options{.stride = ints<2>{1, R.s},
                                                                     .padding = ints<2>{0, R.p},
                                                                     .dilation = ints<2>{1, R.d},
                                                                     .ceil_mode = Ceil}>(std::declval<const X&>()));
  return shape_of<Y>::static_extent(3);
}
template <window_row R, bool Ceil>
constexpr std::int64_t avg_pool_width() {
  using X = Tensor<float, shape<dyn, 1, 1, R.n>>;
  using Y = decltype(avg_pool2d<ints<2>{1, R.k}, avg_pool2d_options{.stride = ints<2>{1, R.s},
                                                                     .padding = ints<2>{0, R.p},
                                                                     .ceil_mode = Ceil}>(std::declval<const X&>()));
  return shape_of<Y>::static_extent(3);
}
template <window_row R>
constexpr std::int64_t conv_width() {
  using X = Tensor<float, shape<dyn, 1, R.n>>;
  using W = Tensor<float, shape<1, 1, R.k>>;
  using Y = decltype(conv1d<conv1d_options{.stride = R.s, .padding = R.p, .dilation = R.d}>(
      std::declval<const X&>(), std::declval<const W&>()));
  return shape_of<Y>::static_extent(2);
}
template <std::size_t... I>
constexpr bool pool_table_holds(std::index_sequence<I...>) {
  return ((max_pool_width<pool_rows[I], false>() == pool_rows[I].floor_out &&
           max_pool_width<pool_rows[I], true>() == pool_rows[I].ceil_out) &&
          ...) &&
         (((pool_rows[I].d != 1) || (avg_pool_width<pool_rows[I], false>() == pool_rows[I].floor_out &&
                                     avg_pool_width<pool_rows[I], true>() == pool_rows[I].ceil_out)) &&
          ...);
}
template <std::size_t... I>
constexpr bool conv_table_holds(std::index_sequence<I...>) {
  return ((conv_width<conv_rows[I]>() == conv_rows[I].floor_out) && ...);
}
static_assert(pool_table_holds(std::make_index_sequence<std::size(pool_rows)>{}),
              "static max/avg pool extents differ from torch's");
static_assert(conv_table_holds(std::make_index_sequence<std::size(conv_rows)>{}),
              "static conv extents differ from torch's");

/// Whether a and b have the same sizes and bitwise-equal values.
template <class A, class B>
bool identical(const A& a, const B& b) {
  if (a.sizes() != b.sizes()) return false;
  const auto ac = a.contiguous();
  const auto bc = b.contiguous();
  for (std::int64_t i = 0; i < ac.numel(); ++i)
    if (ac.data()[i] != bc.data()[i]) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// a small CNN, with static options and with run-time ones
struct StaticCnn : nn::Module {
  nn::Conv2d<1, 8, 3, conv2d_options{.padding = 1}> conv1;  // (N, 1, 12, 12) -> (N, 8, 12, 12)
  nn::StaticMaxPool2d<2> pool1;                                // -> (N, 8, 6, 6)
  nn::Conv2d<8, 16, 3, conv2d_options{}> conv2;                // -> (N, 16, 4, 4)
  nn::StaticAvgPool2d<3, avg_pool2d_options{.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false}>
      pool2;                                                   // -> (N, 16, 3, 3)
  nn::Flatten<> flat;                                          // -> (N, 144)
  nn::Linear<16 * 3 * 3, 10> fc;
  StaticCnn() {
    register_module("conv1", conv1);
    register_module("pool1", pool1);
    register_module("conv2", conv2);
    register_module("pool2", pool2);
    register_module("flat", flat);
    register_module("fc", fc);
  }
  template <Expression X>
  auto operator()(const X& x) const {
    return fc(flat(pool2(conv2(pool1(relu(conv1(x)))))));
  }
};
struct RuntimeCnn : nn::Module {
  nn::Conv2d<1, 8, 3> conv1{{.padding = 1}};
  nn::MaxPool2d pool1{2};
  nn::Conv2d<8, 16, 3> conv2;
  nn::AvgPool2d pool2{3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false}};
  nn::Flatten<> flat;
  nn::Linear<16 * 3 * 3, 10> fc;
  RuntimeCnn() {
    register_module("conv1", conv1);
    register_module("pool1", pool1);
    register_module("conv2", conv2);
    register_module("pool2", pool2);
    register_module("flat", flat);
    register_module("fc", fc);
  }
  template <Expression X>
  auto operator()(const X& x) const {
    return fc(flat(pool2(conv2(pool1(relu(conv1(x)))))));
  }
};

using Image = Tensor<float, shape<dyn, 1, 12, 12>>;

}  // namespace

TEST_CASE("conv static: a CNN's extents are static stage by stage, up to the Linear") {
  StaticCnn net;
  const Image x = randn<float, shape<dyn, 1, 12, 12>>(3);
  using C1 = shape_of<decltype(net.conv1(x))>;
  using P1 = shape_of<decltype(net.pool1(relu(net.conv1(x))))>;
  using C2 = shape_of<decltype(net.conv2(std::declval<const Tensor<float, P1>&>()))>;
  using P2 = shape_of<decltype(net.pool2(std::declval<const Tensor<float, C2>&>()))>;
  using F = shape_of<decltype(net.flat(std::declval<const Tensor<float, P2>&>()))>;
  STATIC_REQUIRE(std::is_same_v<C1, shape<dyn, 8, 12, 12>>);
  STATIC_REQUIRE(std::is_same_v<P1, shape<dyn, 8, 6, 6>>);
  STATIC_REQUIRE(std::is_same_v<C2, shape<dyn, 16, 4, 4>>);
  STATIC_REQUIRE(std::is_same_v<P2, shape<dyn, 16, 3, 3>>);
  STATIC_REQUIRE(std::is_same_v<F, shape<dyn, 144>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(net(x))>, shape<dyn, 10>>);
  // a static batch stays static; run-time spatial extents stay run-time (checked when it runs)
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(net.conv1(std::declval<const Tensor<float, shape<2, 1, 12, 12>>&>()))>,
                                shape<2, 8, 12, 12>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(net.conv1(std::declval<const Tensor<float, shape<dyn, 1, dyn, 9>>&>()))>,
                                shape<dyn, 8, dyn, 9>>);
  // the modules print as torch's
  CHECK(net.conv1.repr() == "Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))");
  CHECK(net.pool1.repr() == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
  CHECK(net.pool2.repr() == "AvgPool2d(kernel_size=3, stride=2, padding=1)");
  CHECK(nn::StaticAdaptiveAvgPool2d<ints<2>{2, 3}>().repr() == "AdaptiveAvgPool2d(output_size=(2, 3))");
  CHECK(nn::Conv2d<1, 8, 3, conv2d_options{.padding = 1}>::static_options);
  CHECK(!nn::Conv2d<1, 8, 3>::static_options);
}

TEST_CASE("conv static: the CNN gives the run-time-option CNN's values exactly") {
  manual_seed(37);
  StaticCnn s;
  RuntimeCnn r;
  r.conv1.weight.copy_(s.conv1.weight);
  r.conv1.bias.copy_(s.conv1.bias);
  r.conv2.weight.copy_(s.conv2.weight);
  r.conv2.bias.copy_(s.conv2.bias);
  r.fc.weight.copy_(s.fc.weight);
  r.fc.bias.copy_(s.fc.bias);
  const Image x = randn<float, shape<dyn, 1, 12, 12>>(5);
  const Tensor<float, shape<dyn, 8, 6, 6>> hs = s.pool1(relu(s.conv1(x)));
  const Tensor<float, dyn_shape<4>> hr = r.pool1(relu(r.conv1(x)));
  CHECK(identical(hs, hr));
  const Tensor<float, shape<dyn, 10>> ys = s(x);
  const Tensor<float, dyn_shape<2>> yr = r(x);
  REQUIRE(ys.sizes() == sizes_t<2>{5, 10});
  CHECK(identical(ys, yr));
  // and a wrong-sized run-time image is still a shape_error with the sizes, as with run-time options
  const Tensor<float, shape<dyn, 1, dyn, dyn>> small = randn<float, shape<dyn, 1, dyn, dyn>>(1, 2, 2);
  CHECK_THROWS_WITH(s.conv2(s.pool1(relu(s.conv1(small)))),
                    Catch::Contains("kernel of extent 3") && Catch::Contains("padded input extent 1"));
}

TEST_CASE("conv static: functional forms against their run-time twins (strides, dilation, groups, same, ceil_mode)") {
  manual_seed(3);
  const Tensor<float, shape<dyn, 4, 9, 11>> x = randn<float, shape<dyn, 4, 9, 11>>(2);
  const Tensor<float, shape<6, 2, 3, 2>> w = randn<float, shape<6, 2, 3, 2>>();
  const Tensor<float, shape<6>> b = randn<float, shape<6>>();
  {
    constexpr conv2d_options o{.stride = {2, 3}, .padding = {2, 1}, .dilation = {2, 1}, .groups = 2};
    auto ys = conv2d<o>(x, w, b);
    // (9 + 4 - 5) / 2 + 1 = 5, (11 + 2 - 2) / 3 + 1 = 4 (torch's)
    STATIC_REQUIRE(std::is_same_v<shape_of<decltype(ys)>, shape<dyn, 6, 5, 4>>);
    CHECK(identical(eval(ys), eval(conv2d(x, w, b, o))));
  }
  {
    constexpr conv2d_options o{.padding = conv_padding::same, .dilation = 2, .groups = 2};
    auto ys = conv2d<o>(x, w);
    STATIC_REQUIRE(std::is_same_v<shape_of<decltype(ys)>, shape<dyn, 6, 9, 11>>);
    CHECK(identical(eval(ys), eval(conv2d(x, w, o))));
  }
  {
    constexpr max_pool2d_options o{.stride = {2, 3}, .padding = 1, .dilation = {1, 2}, .ceil_mode = true};
    auto ys = max_pool2d<ints<2>{3, 2}, o>(x);
    // W: (11 + 2 - 3) / 3 rounded up + 1 = 5, but the 5th window would start at 12, in the right padding
    STATIC_REQUIRE(std::is_same_v<shape_of<decltype(ys)>, shape<dyn, 4, 5, 4>>);
    CHECK(identical(eval(ys), eval(max_pool2d(x, {3, 2}, o))));
  }
  {
    constexpr avg_pool2d_options o{.stride = 2, .padding = 1, .ceil_mode = true, .divisor_override = 5};
    auto ys = avg_pool2d<3, o>(x);
    STATIC_REQUIRE(std::is_same_v<shape_of<decltype(ys)>, shape<dyn, 4, 5, 6>>);
    CHECK(identical(eval(ys), eval(avg_pool2d(x, 3, o))));
  }
  {
    auto ys = adaptive_avg_pool2d<ints<2>{4, 3}>(x);
    STATIC_REQUIRE(std::is_same_v<shape_of<decltype(ys)>, shape<dyn, 4, 4, 3>>);
    CHECK(identical(eval(ys), eval(adaptive_avg_pool2d(x, {4, 3}))));
    // the adaptive pool's extents are static even for an input with run-time ones
    const Tensor<float, dyn_shape<4>> xd = x;
    const Tensor<float, shape<dyn, dyn, 1, 1>> g = adaptive_avg_pool2d<1>(xd);
    CHECK(identical(g, eval(adaptive_avg_pool2d(xd, 1))));
  }
  {
    nn::Conv1d<4, 6, 3, conv1d_options{.stride = 2, .padding = 1, .groups = 2}, false> c;
    const Tensor<float, shape<dyn, 4, 10>> x1 = randn<float, shape<dyn, 4, 10>>(3);
    auto ys = c(x1);
    STATIC_REQUIRE(std::is_same_v<shape_of<decltype(ys)>, shape<dyn, 6, 5>>);
    CHECK(c.repr() == "Conv1d(4, 6, kernel_size=(3,), stride=(2,), padding=(1,), groups=2, bias=False)");
    CHECK(identical(eval(ys), eval(conv1d(x1, c.weight, {.stride = 2, .padding = 1, .groups = 2}))));
  }
  // the same with run-time spatial extents: run-time result extents, and errors at run time
  const Tensor<float, shape<dyn, 4, dyn, dyn>> xd = randn<float, shape<dyn, 4, dyn, dyn>>(1, 2, 2);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(max_pool2d<2>(xd))>, shape<dyn, 4, dyn, dyn>>);
  CHECK_THROWS_AS((max_pool2d<3, max_pool2d_options{.padding = 0}>(xd)), shape_error);
}
