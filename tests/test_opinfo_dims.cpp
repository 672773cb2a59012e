// The OpInfo-style table, ops along a dim: reductions (keepdim), scans, softmax-like and argsort
// along dim 1 of the same samples as the pointwise rows (tests/opinfo.hpp), against PyTorch
// (gen_opinfo.py's DIM1 list).
#include <catch2/catch.hpp>

#include <tenet/tenet.hpp>

#include "opinfo.hpp"

using namespace tenet_test::opinfo;

#define DIM1_FN(...) [](const auto& x) { return __VA_ARGS__; }
// every float row also names bfloat16 and float16 (run by the CUDA half program only: opinfo.hpp)
#define ROW_F(NAME, FN) \
  unary<float>(NAME, FN), unary<double>(NAME, FN), unary<tenet::bfloat16>(NAME, FN), unary<tenet::float16>(NAME, FN)
#define ROW_FI(NAME, I, FN) ROW_F(NAME, FN), unary<I>(NAME, FN)

TEST_CASE("opinfo: reductions along dim 1", "[opinfo]") {
  using tenet::keepdim;
  ROW_FI("sum_dim1", std::int32_t, DIM1_FN(tenet::sum<1>(x, keepdim)));
  unary<bool>("sum_dim1", DIM1_FN(tenet::sum<1>(x, keepdim)));
  ROW_FI("prod_dim1", std::int32_t, DIM1_FN(tenet::prod<1>(x, keepdim)));
  ROW_F("mean_dim1", DIM1_FN(tenet::mean<1>(x, keepdim)));
  ROW_FI("amax_dim1", std::int32_t, DIM1_FN(tenet::amax<1>(x, keepdim)));
  ROW_FI("amin_dim1", std::int32_t, DIM1_FN(tenet::amin<1>(x, keepdim)));
  ROW_FI("argmax_dim1", std::int32_t, DIM1_FN(tenet::argmax<1>(x, keepdim)));
  ROW_FI("argmin_dim1", std::int32_t, DIM1_FN(tenet::argmin<1>(x, keepdim)));
  ROW_F("var_dim1", DIM1_FN(tenet::var<1>(x, keepdim)));
  ROW_F("std_dim1", DIM1_FN(tenet::std<1>(x, keepdim)));
  ROW_F("logsumexp_dim1", DIM1_FN(tenet::logsumexp<1>(x, keepdim)));
  ROW_FI("any_dim1", std::int32_t, DIM1_FN(tenet::any<1>(x, keepdim)));
  unary<bool>("any_dim1", DIM1_FN(tenet::any<1>(x, keepdim)));
  ROW_FI("all_dim1", std::int32_t, DIM1_FN(tenet::all<1>(x, keepdim)));
  unary<bool>("all_dim1", DIM1_FN(tenet::all<1>(x, keepdim)));
}

TEST_CASE("opinfo: scans, softmax and argsort along dim 1", "[opinfo]") {
  ROW_FI("cumsum_dim1", std::int32_t, DIM1_FN(tenet::cumsum<1>(x)));
  unary<bool>("cumsum_dim1", DIM1_FN(tenet::cumsum<1>(x)));
  ROW_FI("cumprod_dim1", std::int32_t, DIM1_FN(tenet::cumprod<1>(x)));
  ROW_F("logcumsumexp_dim1", DIM1_FN(tenet::logcumsumexp<1>(x)));
  ROW_F("softmax_dim1", DIM1_FN(tenet::softmax<1>(x)));
  ROW_F("log_softmax_dim1", DIM1_FN(tenet::log_softmax<1>(x)));
  ROW_F("softmin_dim1", DIM1_FN(tenet::softmin<1>(x)));
  ROW_FI("argsort_dim1", std::int32_t, DIM1_FN(tenet::argsort<1>(x)));
}
