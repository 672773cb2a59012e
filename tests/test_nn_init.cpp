// nn::init and the modules' default initializations: bounds, means and variances of large draws
// against torch's formulas (values need not equal torch's: tenet draws from its Philox stream).
#include <cmath>

#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;

namespace {
struct stats {
  double mean = 0, var = 0, min = INFINITY, max = -INFINITY;
};
template <class T, class S>
stats stats_of(const Tensor<T, S>& t) {
  stats s;
  const auto c = t.contiguous();
  const T* p = c.data();
  const auto n = c.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(p[i]);
    s.mean += v;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
  }
  s.mean /= static_cast<double>(n);
  for (std::int64_t i = 0; i < n; ++i) s.var += (static_cast<double>(p[i]) - s.mean) * (static_cast<double>(p[i]) - s.mean);
  s.var /= static_cast<double>(n - 1);
  return s;
}
/// U(-b, b): inside the bounds, reaching close to them, mean 0 and variance b²/3, each within 4
/// standard errors of the n-sample estimate (sd of the mean b/√(3n); relative sd of the variance √(0.8/n)).
template <class T, class S>
void check_uniform(const Tensor<T, S>& t, double b) {
  const auto s = stats_of(t);
  const double n = static_cast<double>(t.numel());
  CHECK(s.min >= -b);
  CHECK(s.max <= b);
  CHECK(s.min < -0.98 * b);
  CHECK(s.max > 0.98 * b);
  CHECK(std::abs(s.mean) < 4 * b / std::sqrt(3 * n));
  CHECK(s.var == Approx(b * b / 3).epsilon(4 * std::sqrt(0.8 / n)));
}
/// N(mean, std): sample mean within 4 sd/√n, sample sd within 4 standard errors (relative 1/√(2n)).
template <class T, class S>
void check_normal(const Tensor<T, S>& t, double mean, double std) {
  const auto s = stats_of(t);
  const double n = static_cast<double>(t.numel());
  CHECK(std::abs(s.mean - mean) < 4 * std / std::sqrt(n));
  CHECK(std::sqrt(s.var) == Approx(std).epsilon(4 / std::sqrt(2 * n)));
}
}  // namespace

TEST_CASE("nn::init: gains and fans as torch") {
  using nn::init::nonlinearity;
  CHECK(nn::init::calculate_gain(nonlinearity::linear) == 1.0);
  CHECK(nn::init::calculate_gain(nonlinearity::conv2d) == 1.0);
  CHECK(nn::init::calculate_gain(nonlinearity::sigmoid) == 1.0);
  CHECK(nn::init::calculate_gain(nonlinearity::tanh) == Approx(5.0 / 3));
  CHECK(nn::init::calculate_gain(nonlinearity::relu) == Approx(std::sqrt(2.0)));
  CHECK(nn::init::calculate_gain(nonlinearity::leaky_relu) == Approx(std::sqrt(2.0 / (1 + 0.01 * 0.01))));
  CHECK(nn::init::calculate_gain(nonlinearity::leaky_relu, std::sqrt(5.0)) == Approx(std::sqrt(1.0 / 3)));
  CHECK(nn::init::calculate_gain(nonlinearity::selu) == 0.75);
  auto [fi, fo] = nn::init::calculate_fan_in_and_fan_out({8, 3, 5, 5});
  CHECK(fi == 75);
  CHECK(fo == 200);
  CHECK_THROWS_AS(nn::init::calculate_fan_in_and_fan_out({5}), value_error);
  auto v = empty<float, shape<dyn>>(10);
  CHECK_THROWS_AS(nn::init::xavier_uniform_(v), value_error);
}

TEST_CASE("nn::init: distributions and bounds") {
  manual_seed(1);
  auto w = empty<float, dyn_shape<2>>(400, 500);  // fan_in 500, fan_out 400
  nn::init::uniform_(w, -2.0, 5.0);
  auto s = stats_of(w);
  CHECK(s.min >= -2.0);
  CHECK(s.max <= 5.0);
  CHECK(s.mean == Approx(1.5).epsilon(0.01));
  CHECK(s.var == Approx(49.0 / 12).epsilon(0.03));
  nn::init::normal_(w, 3.0, 0.5);
  check_normal(w, 3.0, 0.5);
  nn::init::kaiming_uniform_(w);  // a = 0, fan_in, leaky_relu: gain sqrt(2)
  check_uniform(w, std::sqrt(2.0) * std::sqrt(3.0 / 500));
  nn::init::kaiming_uniform_(w, 0.0, nn::init::fan_mode::fan_out, nn::init::nonlinearity::relu);
  check_uniform(w, std::sqrt(2.0) * std::sqrt(3.0 / 400));
  nn::init::kaiming_normal_(w, 0.0, nn::init::fan_mode::fan_in, nn::init::nonlinearity::relu);
  check_normal(w, 0.0, std::sqrt(2.0 / 500));
  nn::init::kaiming_normal_(w, 0.0, nn::init::fan_mode::fan_out, nn::init::nonlinearity::tanh);
  check_normal(w, 0.0, 5.0 / 3 / std::sqrt(400.0));
  nn::init::xavier_uniform_(w);
  check_uniform(w, std::sqrt(6.0 / 900));
  nn::init::xavier_uniform_(w, 2.0);
  check_uniform(w, 2.0 * std::sqrt(6.0 / 900));
  nn::init::xavier_normal_(w);
  check_normal(w, 0.0, std::sqrt(2.0 / 900));
  // truncated normal: inside [a, b], with the truncated distribution's mean and variance
  const double mu = 1.0, sigma = 2.0, a = -1.0, b = 2.0;
  nn::init::trunc_normal_(w, mu, sigma, a, b);
  s = stats_of(w);
  CHECK(s.min >= a);
  CHECK(s.max <= b);
  CHECK(s.min < a + 0.01);
  CHECK(s.max > b - 0.01);
  auto pdf = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); };
  auto cdf = [](double x) { return (1 + std::erf(x / std::sqrt(2.0))) / 2; };
  const double al = (a - mu) / sigma, be = (b - mu) / sigma, z = cdf(be) - cdf(al);
  const double tmean = mu + sigma * (pdf(al) - pdf(be)) / z;
  const double tvar = sigma * sigma * (1 + (al * pdf(al) - be * pdf(be)) / z - std::pow((pdf(al) - pdf(be)) / z, 2));
  CHECK(s.mean == Approx(tmean).epsilon(0.01));
  CHECK(s.var == Approx(tvar).epsilon(0.03));
  // far tails: still inside the bounds, no nan
  auto t = empty<double, dyn_shape<1>>(10000);
  nn::init::trunc_normal_(t, 0.0, 1.0, 3.0, 5.0);
  s = stats_of(t);
  CHECK(s.min >= 3.0);
  CHECK(s.max <= 5.0);
  CHECK(!std::isnan(s.mean));
  nn::init::zeros_(w);
  CHECK(stats_of(w).max == 0.0);
  nn::init::ones_(w);
  CHECK(stats_of(w).min == 1.0);
  nn::init::constant_(w, 0.25);
  CHECK(stats_of(w).mean == 0.25);
  auto e = empty<float, dyn_shape<2>>(3, 4);
  nn::init::eye_(e);
  CHECK(e(2, 2) == 1.0f);
  CHECK(e(2, 3) == 0.0f);
  // a strided view is filled through its storage
  auto big = zeros<float, dyn_shape<2>>(200, 400);
  auto half = big.transpose<0, 1>().slice<0>(0, 400, 2);
  nn::init::uniform_(half, 1.0, 2.0);
  CHECK(big(0, 0) >= 1.0f);
  CHECK(big(0, 1) == 0.0f);
  CHECK_THROWS_AS(nn::init::uniform_(w, 1.0, 0.0), value_error);
  CHECK_THROWS_AS(nn::init::normal_(w, 0.0, -1.0), value_error);
  CHECK_THROWS_AS(nn::init::trunc_normal_(w, 0.0, 1.0, 2.0, 1.0), value_error);
}

TEST_CASE("nn: default initializations match torch's reset_parameters") {
  manual_seed(2);
  {
    nn::Linear<300, 200> m;  // kaiming_uniform_(a = sqrt 5): U(±1/sqrt(in)); bias U(±1/sqrt(in))
    check_uniform(m.weight, 1.0 / std::sqrt(300.0));
    const auto s = stats_of(m.bias);
    CHECK(s.min >= -1.0 / std::sqrt(300.0));
    CHECK(s.max <= 1.0 / std::sqrt(300.0));
    CHECK(s.max > 0.9 / std::sqrt(300.0));
  }
  {
    nn::Conv2d<16, 64, 5> m;  // fan_in = 16 * 25
    check_uniform(m.weight, 1.0 / std::sqrt(400.0));
    CHECK(stats_of(m.bias).max <= 1.0 / std::sqrt(400.0));
  }
  {
    nn::Conv1d<12, 256, 3, 4> m;  // fan_in = 12 / 4 * 3
    check_uniform(m.weight, 1.0 / 3.0);
  }
  {
    nn::ConvTranspose2d<64, 32, 4> m;  // weight [64, 32, 4, 4]: fan_in = 32 * 16
    check_uniform(m.weight, 1.0 / std::sqrt(512.0));
    CHECK(stats_of(m.bias).max <= 1.0 / std::sqrt(512.0));
  }
  {
    nn::Bilinear<20, 30, 40> m;  // U(±1/sqrt(in1)) for weight and bias
    check_uniform(m.weight, 1.0 / std::sqrt(20.0));
  }
  {
    nn::Embedding<1000, 64> m;
    check_normal(m.weight, 0.0, 1.0);
  }
  {
    nn::BatchNorm2d<5> bn;
    CHECK(stats_of(bn.weight).min == 1.0);
    CHECK(stats_of(bn.bias).max == 0.0);
    CHECK(stats_of(bn.running_var).min == 1.0);
    CHECK(stats_of(bn.running_mean).max == 0.0);
    CHECK(bn.num_batches_tracked.item() == 0);
    nn::LayerNorm<7> ln;
    CHECK(stats_of(ln.weight).min == 1.0);
    CHECK(stats_of(ln.bias).max == 0.0);
    nn::GroupNorm<2, 4> gn;
    CHECK(stats_of(gn.weight).min == 1.0);
    nn::RMSNorm<3> rn;
    CHECK(stats_of(rn.weight).max == 1.0);
  }
}
