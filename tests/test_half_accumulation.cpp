// Means, variances and mean losses of bfloat16 / float16 tensors run in float and round once, as
// torch: in 16 bits a sum above 65504 (or a count of elements above 65504) is infinite in float16,
// which made mean, var, std, mse_loss, cross_entropy, nll_loss and kl_div of long float16 inputs
// NaN or infinite, and bfloat16's 8-bit sums lost precision before the division.
#include <tenet/tenet.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

using tenet::dyn_shape;
using tenet::shape;
using tenet::Tensor;

namespace {

/// |got - want| within `ulps` units in the last place of T at want (want computed in float).
template <class T>
void check_half(T got, float want, int ulps = 1) {
  const float eps = std::is_same_v<T, tenet::bfloat16> ? 0x1p-7f : 0x1p-10f;
  INFO("got " << float(got) << ", want " << want);
  REQUIRE(std::isfinite(float(got)));
  CHECK(std::fabs(float(got) - want) <= ulps * eps * std::max(std::fabs(want), 1e-3f));
}

template <class T>
void mean_and_var_of_long_rows() {
  const std::int64_t n = 100000;  // a count above float16's largest finite value, 65504
  // rows of 1.5 (mean 1.5, var 0) and of alternating 1, 3 (mean 2, var n / (n - 1))
  auto ones = tenet::full<T, dyn_shape<2>>(T(1.5f), 2, n);
  Tensor<T, dyn_shape<1>> m = tenet::mean<1>(ones);
  check_half(m.data()[0], 1.5f);
  check_half(m.data()[1], 1.5f);
  Tensor<float, dyn_shape<1>> pos = tenet::arange<float>(0, static_cast<double>(n));
  Tensor<T, dyn_shape<1>> alt = tenet::cast<T>(tenet::remainder(pos, 2.0f) * 2.0f + 1.0f);
  Tensor<T, shape<>> ma = tenet::mean(alt);
  check_half(ma.item(), 2.0f);
  Tensor<T, shape<>> va = tenet::var(alt);
  check_half(va.item(), static_cast<float>(n) / static_cast<float>(n - 1));
  Tensor<T, shape<>> sa = tenet::std(alt, 0.0);
  check_half(sa.item(), 1.0f);

  // random rows, every reduction against the float computation of the same values rounded once
  Tensor<T, dyn_shape<2>> x = tenet::cast<T>(tenet::randn<float, dyn_shape<2>>(3, n) * 2.0f + 0.5f);
  Tensor<float, dyn_shape<2>> xf = x.template to<float>();
  Tensor<T, dyn_shape<1>> mr = tenet::mean<1>(x);
  Tensor<T, dyn_shape<1>> vr = tenet::var<1>(x);
  Tensor<float, dyn_shape<1>> mrf = tenet::mean<1>(xf);
  Tensor<float, dyn_shape<1>> vrf = tenet::var<1>(xf);
  for (int i = 0; i < 3; ++i) {
    check_half(mr.data()[i], mrf.data()[i]);
    check_half(vr.data()[i], vrf.data()[i]);
  }
  // over the long dim of a transposed view (a non-contiguous input), keepdim
  auto xt = x.template transpose<0, 1>();
  Tensor<T, dyn_shape<2>> mc = tenet::mean<0>(xt, tenet::keepdim);
  REQUIRE(mc.sizes()[0] == 1);
  REQUIRE(mc.sizes()[1] == 3);
  for (int i = 0; i < 3; ++i) check_half(mc.data()[i], mrf.data()[i]);
  Tensor<T, shape<>> mall = tenet::mean(x);
  Tensor<float, shape<>> mallf = tenet::mean(xf);
  check_half(mall.item(), mallf.item());

  // empty: NaN, as torch
  Tensor<T, shape<>> me = tenet::mean(tenet::zeros<T, dyn_shape<1>>(0));
  CHECK(std::isnan(float(me.item())));
}

template <class T>
void mean_losses_of_many_positions() {
  const std::int64_t n = 70000, c = 5;
  Tensor<float, dyn_shape<2>> lf = tenet::randn<float, dyn_shape<2>>(n, c);
  Tensor<T, dyn_shape<2>> logits = lf.template to<T>();
  Tensor<float, dyn_shape<2>> lr = logits.template to<float>();  // the rounded values, in float
  Tensor<std::int64_t, dyn_shape<1>> target =
      tenet::remainder(tenet::arange<std::int64_t>(0, n), std::int64_t{c});
  Tensor<T, dyn_shape<1>> weight = tenet::full<T, dyn_shape<1>>(T(0.5f), c);
  Tensor<float, dyn_shape<1>> weightf = weight.template to<float>();

  Tensor<T, shape<>> ce = tenet::cross_entropy(logits, target);
  Tensor<float, shape<>> cef = tenet::cross_entropy(lr, target);
  check_half(ce.item(), cef.item());
  Tensor<T, shape<>> cew = tenet::cross_entropy(logits, target, weight, -100, 0.1);
  Tensor<float, shape<>> cewf = tenet::cross_entropy(lr, target, weightf, -100, 0.1);
  check_half(cew.item(), cewf.item());
  // class-probability targets
  Tensor<T, dyn_shape<2>> probs = tenet::cast<T>(tenet::softmax<1>(lr));
  Tensor<float, dyn_shape<2>> probsf = probs.template to<float>();
  Tensor<T, shape<>> cep = tenet::cross_entropy(logits, probs);
  Tensor<float, shape<>> cepf = tenet::cross_entropy(lr, probsf);
  check_half(cep.item(), cepf.item());
  // nll_loss of log-probabilities, with and without a weight
  Tensor<T, dyn_shape<2>> lsm = tenet::cast<T>(tenet::log_softmax<1>(lr));
  Tensor<float, dyn_shape<2>> lsmf = lsm.template to<float>();
  Tensor<T, shape<>> nll = tenet::nll_loss(lsm, target);
  Tensor<float, shape<>> nllf = tenet::nll_loss(lsmf, target);
  check_half(nll.item(), nllf.item());
  Tensor<T, shape<>> nllw = tenet::nll_loss(lsm, target, weight);
  Tensor<float, shape<>> nllwf = tenet::nll_loss(lsmf, target, weightf);
  check_half(nllw.item(), nllwf.item());
  // mse_loss (through mean) and kl_div's batchmean over 70000 rows
  Tensor<T, shape<>> mse = tenet::mse_loss(logits, probs);
  Tensor<float, shape<>> msef = tenet::mse_loss(lr, probsf);
  check_half(mse.item(), msef.item());
  auto uniform = tenet::full<T, dyn_shape<2>>(T(0.25f), n, c);  // away from p = q, where kl cancels to 0
  Tensor<T, shape<>> kl = tenet::kl_div<tenet::reduction::batchmean>(lsm, uniform);
  Tensor<float, shape<>> klf = tenet::kl_div<tenet::reduction::batchmean>(lsmf, tenet::cast<float>(uniform));
  check_half(kl.item(), klf.item(), 2);
}

}  // namespace

TEST_CASE("mean / var / std of 16-bit tensors longer than 65504: float accumulation, one rounding",
          "[reduce][half]") {
  SECTION("float16") { mean_and_var_of_long_rows<tenet::float16>(); }
  SECTION("bfloat16") { mean_and_var_of_long_rows<tenet::bfloat16>(); }
}

TEST_CASE("mean losses of 16-bit inputs over more than 65504 positions", "[loss][half]") {
  SECTION("float16") { mean_losses_of_many_positions<tenet::float16>(); }
  SECTION("bfloat16") { mean_losses_of_many_positions<tenet::bfloat16>(); }
}
