// Reductions (sum prod amax amin mean var std logsumexp any all argmax argmin norm) and
// softmax / log_softmax, against PyTorch (tests/reference/gen_reductions.py -> reductions.txt).
#include "reference.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace {

using tenet::dyn;
using tenet::keepdim;
using tenet::shape;
using tenet::Tensor;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;

constexpr const char* kFile = "reductions.txt";


struct tol {
  double rtol = -1, atol = -1;
};

template <class E>
void chk(const E& e, const tenet_test::ref_case& c, const std::string& key, tol t = {}) {
  INFO("reference key " << key);
  REQUIRE(c.count(key) == 1);
  auto r = tenet::eval(e);
  if (t.rtol < 0)
    check_close(r, c.at(key));
  else
    check_close(r, c.at(key), t.rtol, t.atol);
}

// All dim specs of gen_reductions.py (SPECS) for a reduction F (a template name); extra args after x.
#define RED_SPECS(KEY, F, TOL, ...)                                                      \
  do {                                                                                   \
    chk(F(x __VA_OPT__(, ) __VA_ARGS__), c, KEY "_all", TOL);                            \
    chk(F(x, keepdim __VA_OPT__(, ) __VA_ARGS__), c, KEY "_all_k", TOL);                 \
    chk(F<0>(x __VA_OPT__(, ) __VA_ARGS__), c, KEY "_d0", TOL);                          \
    chk(F<2>(x __VA_OPT__(, ) __VA_ARGS__), c, KEY "_d2", TOL);                          \
    chk(F<-1>(x __VA_OPT__(, ) __VA_ARGS__), c, KEY "_dm1", TOL);                        \
    chk(F<1>(x, keepdim __VA_OPT__(, ) __VA_ARGS__), c, KEY "_d1_k", TOL);               \
    chk(F<0, 2>(x __VA_OPT__(, ) __VA_ARGS__), c, KEY "_d02", TOL);                      \
    chk(F<0, 2>(x, keepdim __VA_OPT__(, ) __VA_ARGS__), c, KEY "_d02_k", TOL);           \
  } while (0)

#define ARG_SPECS(KEY, F)                                  \
  do {                                                     \
    chk(F(x), c, KEY "_all");                              \
    chk(F<0>(x), c, KEY "_d0");                            \
    chk(F<2>(x), c, KEY "_d2");                            \
    chk(F<-1>(x), c, KEY "_dm1");                          \
    chk(F<1>(x, keepdim), c, KEY "_d1_k");                 \
  } while (0)

#define NORM_SPECS(KEY, P, TOL)                            \
  do {                                                     \
    chk(tenet::norm(x, P), c, KEY "_all", TOL);            \
    chk(tenet::norm<0>(x, P), c, KEY "_d0", TOL);          \
    chk(tenet::norm<2>(x, P), c, KEY "_d2", TOL);          \
    chk(tenet::norm<-1>(x, P), c, KEY "_dm1", TOL);        \
    chk(tenet::norm<0, 2>(x, P), c, KEY "_d02", TOL);      \
  } while (0)

template <class T>
void float_reductions(const char* case_name) {
  const auto& c = get_case(kFile, case_name);
  const auto x = make<T, shape<3, 4, 5>>(c.at("x"));
  const tol t = std::is_same_v<T, float> ? tol{1e-5, 1e-5} : tol{1e-7, 1e-7};
  SECTION("sum") { RED_SPECS("sum", tenet::sum, t); }
  SECTION("prod") { RED_SPECS("prod", tenet::prod, t); }
  SECTION("amax") { RED_SPECS("amax", tenet::amax, t); }
  SECTION("amin") { RED_SPECS("amin", tenet::amin, t); }
  SECTION("mean") { RED_SPECS("mean", tenet::mean, t); }
  SECTION("var correction 0") { RED_SPECS("var0", tenet::var, t, 0.0); }
  SECTION("var correction 1") { RED_SPECS("var1", tenet::var, t); }
  SECTION("var correction 2") { RED_SPECS("var2", tenet::var, t, 2.0); }
  SECTION("std correction 1") { RED_SPECS("std1", tenet::std, t); }
  SECTION("std correction 0") { RED_SPECS("std0", tenet::std, t, 0.0); }
  SECTION("logsumexp") { RED_SPECS("logsumexp", tenet::logsumexp, t); }
  SECTION("any") { RED_SPECS("any", tenet::any, t); }
  SECTION("all") { RED_SPECS("all", tenet::all, t); }
  SECTION("argmax") { ARG_SPECS("argmax", tenet::argmax); }
  SECTION("argmin") { ARG_SPECS("argmin", tenet::argmin); }
  SECTION("norm") {
    NORM_SPECS("norm2", 2.0, t);
    NORM_SPECS("norm1", 1.0, t);
    NORM_SPECS("norminf", INFINITY, t);
    NORM_SPECS("norm0", 0.0, t);
    NORM_SPECS("norm3", 3.0, t);
  }
  SECTION("result dtypes") {
    static_assert(std::is_same_v<tenet::value_type_of<decltype(tenet::sum<0>(x))>, T>);
    static_assert(std::is_same_v<tenet::value_type_of<decltype(tenet::mean(x))>, T>);
    static_assert(std::is_same_v<tenet::value_type_of<decltype(tenet::argmax<1>(x))>, std::int64_t>);
    static_assert(std::is_same_v<tenet::value_type_of<decltype(tenet::any<1>(x))>, bool>);
    static_assert(std::is_same_v<tenet::shape_of<decltype(tenet::sum<1>(x, keepdim))>, shape<3, 1, 5>>);
    static_assert(std::is_same_v<tenet::shape_of<decltype(tenet::sum<0, -1>(x))>, shape<4>>);
  }
}

}  // namespace

TEST_CASE("reductions float32 vs torch", "[reductions]") { float_reductions<float>("red_f32"); }
TEST_CASE("reductions float64 vs torch", "[reductions]") { float_reductions<double>("red_f64"); }

TEST_CASE("reductions int32 vs torch", "[reductions]") {
  const auto& c = get_case(kFile, "red_i32");
  const auto x = make<std::int32_t, shape<3, 4, 5>>(c.at("x"));
  static_assert(std::is_same_v<tenet::value_type_of<decltype(tenet::sum(x))>, std::int64_t>,
                "sum of int32 is int64 (torch)");
  static_assert(std::is_same_v<tenet::value_type_of<decltype(tenet::sum<1>(x, keepdim))>, std::int64_t>);
  static_assert(std::is_same_v<tenet::value_type_of<decltype(tenet::amax<1>(x))>, std::int32_t>);
  static_assert(std::is_same_v<tenet::value_type_of<decltype(tenet::argmax<1>(x))>, std::int64_t>);
  // torch.prod of an int32 tensor gives int64 as well
  CHECK(std::is_same_v<tenet::value_type_of<decltype(tenet::prod(x))>, std::int64_t>);
  const tol t{};
  SECTION("sum") { RED_SPECS("sum", tenet::sum, t); }
  SECTION("prod") { RED_SPECS("prod", tenet::prod, t); }
  SECTION("amax") { RED_SPECS("amax", tenet::amax, t); }
  SECTION("argmax") { ARG_SPECS("argmax", tenet::argmax); }
}

TEST_CASE("reductions bool vs torch", "[reductions]") {
  const auto& c = get_case(kFile, "red_bool");
  const auto x = make<bool, shape<3, 4, 5>>(c.at("x"));
  static_assert(std::is_same_v<tenet::value_type_of<decltype(tenet::sum(x))>, std::int64_t>,
                "sum of bool is int64 (torch)");
  static_assert(std::is_same_v<tenet::value_type_of<decltype(tenet::any<0>(x))>, bool>);
  const tol t{};
  SECTION("any") { RED_SPECS("any", tenet::any, t); }
  SECTION("all") { RED_SPECS("all", tenet::all, t); }
  SECTION("sum") { RED_SPECS("sum", tenet::sum, t); }
}

TEST_CASE("amax/argmax propagate NaN; argmax ties take the first index", "[reductions]") {
  {
    const auto& c = get_case(kFile, "nan_ties");
    const auto x = make<float, shape<2, 5>>(c.at("x"));
    chk(tenet::amax<1>(x), c, "amax_d1");
    chk(tenet::argmax<1>(x), c, "argmax_d1");
    chk(tenet::amax(x), c, "amax_all");
    chk(tenet::argmax(x), c, "argmax_all");
    chk(tenet::amin<1>(x), c, "amin_d1");
    chk(tenet::argmin<1>(x), c, "argmin_d1");
  }
  {
    const auto& c = get_case(kFile, "ties");
    const auto x = make<float, shape<3, 4>>(c.at("x"));
    chk(tenet::argmax<1>(x), c, "argmax_d1");
    chk(tenet::argmin<1>(x), c, "argmin_d1");
    chk(tenet::argmax<0>(x), c, "argmax_d0");
    chk(tenet::argmax(x), c, "argmax_all");
    chk(tenet::argmin(x), c, "argmin_all");
  }
}

TEST_CASE("reductions of empty tensors", "[reductions]") {
  const auto e = tenet::zeros<float, shape<dyn, dyn>>(0, 3);
  REQUIRE(e.numel() == 0);
  CHECK(tenet::eval(tenet::sum(e)).item() == 0.0f);
  CHECK(tenet::eval(tenet::prod(e)).item() == 1.0f);
  const auto s0 = tenet::eval(tenet::sum<0>(e));
  REQUIRE(s0.sizes()[0] == 3);
  for (std::int64_t i = 0; i < 3; ++i) CHECK(s0(i) == 0.0f);
  const auto p0 = tenet::eval(tenet::prod<0>(e));
  REQUIRE(p0.sizes()[0] == 3);
  for (std::int64_t i = 0; i < 3; ++i) CHECK(p0(i) == 1.0f);
  CHECK(tenet::eval(tenet::sum<1>(e)).numel() == 0);
  CHECK_THROWS_AS(tenet::eval(tenet::amax<0>(e)), tenet::value_error);
  CHECK_THROWS_AS(tenet::eval(tenet::amax(e)), tenet::value_error);
  CHECK_THROWS_AS(tenet::eval(tenet::argmax<0>(e)), tenet::value_error);
  const auto ei = tenet::zeros<std::int32_t, shape<dyn>>(0);
  CHECK(tenet::eval(tenet::sum(ei)).item() == 0);
  CHECK(tenet::eval(tenet::prod(ei)).item() == 1);
}

TEST_CASE("reductions over size-1 dims", "[reductions]") {
  const auto& c = get_case(kFile, "size1");
  const auto x = make<float, shape<1, 4, 1>>(c.at("x"));
  chk(tenet::sum<0>(x), c, "sum_d0");
  chk(tenet::sum<2>(x, keepdim), c, "sum_d2_k");
  chk(tenet::amax<1>(x), c, "amax_d1");
  chk(tenet::argmax<0>(x), c, "argmax_d0");
  chk(tenet::var<0>(x), c, "var1_d0");  // 0 / 0: NaN, as torch
  chk(tenet::var<0>(x, 0.0), c, "var0_d0");
  chk(tenet::mean<2>(x), c, "mean_d2");
  chk(tenet::prod(x), c, "prod_all");
}

TEST_CASE("reductions of a transposed (non-contiguous) view", "[reductions]") {
  const auto& c = get_case(kFile, "noncontig");
  const auto x = make<float, shape<6, 7>>(c.at("x"));
  const auto xt = x.t();
  REQUIRE_FALSE(xt.is_contiguous());
  const tol t{1e-5, 1e-5};
  chk(tenet::sum<1>(xt), c, "sum_d1_of_t", t);
  chk(tenet::amax<0>(xt), c, "amax_d0_of_t", t);
  chk(tenet::argmax<1>(xt), c, "argmax_d1_of_t");
  chk(tenet::var<1>(xt), c, "var1_d1_of_t", t);
  chk(tenet::mean(xt), c, "mean_all_of_t", t);
  chk(tenet::prod<0>(xt), c, "prod_d0_of_t", t);
}

TEST_CASE("column reduction of a [257, 33] tensor", "[reductions]") {
  const auto& c = get_case(kFile, "column");
  const auto x = make<float, shape<257, 33>>(c.at("x"));
  const tol t{1e-5, 1e-5};
  chk(tenet::sum<0>(x), c, "sum_d0", t);
  chk(tenet::amax<0>(x), c, "amax_d0", t);
  chk(tenet::mean<0>(x), c, "mean_d0", t);
}

TEST_CASE("fused prologue: sum<1>(x * x), sum<0>(exp(x))", "[reductions]") {
  const auto& c = get_case(kFile, "fused");
  const auto x = make<float, shape<9, 13>>(c.at("x"));
  const tol t{1e-5, 1e-5};
  chk(tenet::sum<1>(x * x), c, "sumsq_d1", t);
  chk(tenet::sum<0>(tenet::exp(x), keepdim), c, "sumexp_d0_k", t);
}

TEST_CASE("large full sums keep float64-like accuracy", "[reductions]") {
  constexpr std::int64_t n = (std::int64_t{1} << 20) + 7;
  tenet::manual_seed(1234);
  SECTION("randn") {
    const auto x = tenet::randn<float, shape<dyn>>(n);
    double want = 0, abs_sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      want += static_cast<double>(x.data()[i]);
      abs_sum += std::abs(static_cast<double>(x.data()[i]));
    }
    const double got = tenet::eval(tenet::sum(x)).item();
    INFO("got " << got << " want " << want);
    CHECK(std::abs(got - want) <= 1e-5 * std::abs(want) + 1e-7 * abs_sum);
  }
  SECTION("rand (positive)") {
    const auto x = tenet::rand<float, shape<dyn>>(n);
    double want = 0;
    for (std::int64_t i = 0; i < n; ++i) want += static_cast<double>(x.data()[i]);
    const double got = tenet::eval(tenet::sum(x)).item();
    INFO("got " << got << " want " << want);
    CHECK(std::abs(got - want) <= 1e-5 * std::abs(want));
    const double m = tenet::eval(tenet::mean(x)).item();
    CHECK(std::abs(m - want / n) <= 1e-5 * std::abs(want / n));
  }
  SECTION("ones") {
    const auto x = tenet::full<float, shape<dyn>>(0.1f, n);
    const double want = static_cast<double>(0.1f) * static_cast<double>(n);
    const double got = tenet::eval(tenet::sum(x)).item();
    INFO("got " << got << " want " << want);
    CHECK(std::abs(got - want) <= 1e-5 * want);
    CHECK(tenet::eval(tenet::sum(tenet::ones<float, shape<dyn>>(n))).item() == static_cast<float>(n));
  }
}

TEST_CASE("softmax / log_softmax vs torch", "[softmax]") {
  const auto& c = get_case(kFile, "softmax");
  const tol t{1e-5, 1e-6};
  SECTION("last dim (native kernel), with -inf and a row of 1e4") {
    const auto x = make<float, shape<4, 6>>(c.at("x"));
    chk(tenet::softmax<-1>(x), c, "softmax_m1", t);
    chk(tenet::log_softmax<-1>(x), c, "log_softmax_m1", t);
    chk(tenet::softmax<1>(x), c, "softmax_m1", t);
  }
  SECTION("dim 0 (decomposition), with -inf and a column of 1e4") {
    const auto xt = make<float, shape<6, 4>>(c.at("xt"));
    chk(tenet::softmax<0>(xt), c, "softmax_0_of_xt", t);
    chk(tenet::log_softmax<0>(xt), c, "log_softmax_0_of_xt", t);
    const auto y = make<float, shape<5, 3>>(c.at("y"));
    chk(tenet::softmax<0>(y), c, "softmax_0", t);
    chk(tenet::log_softmax<0>(y), c, "log_softmax_0", t);
  }
  SECTION("native and decomposition agree") {
    const auto x = make<float, shape<4, 6>>(c.at("x"));
    const Tensor<float, shape<4, 6>> a = tenet::softmax<-1>(x);
    const Tensor<float, shape<6, 4>> bt = tenet::softmax<0>(x.t());
    const auto b = bt.t();
    const Tensor<float, shape<4, 6>> la = tenet::log_softmax<-1>(x);
    const Tensor<float, shape<6, 4>> lbt = tenet::log_softmax<0>(x.t());
    const auto lb = lbt.t();
    for (std::int64_t i = 0; i < 4; ++i)
      for (std::int64_t j = 0; j < 6; ++j) {
        INFO("(" << i << ", " << j << ")");
        CHECK(std::abs(a(i, j) - b(i, j)) <= 1e-6f);
        if (std::isinf(la(i, j)))
          CHECK(la(i, j) == lb(i, j));
        else
          CHECK(std::abs(la(i, j) - lb(i, j)) <= 1e-5f);
      }
  }
}

TEST_CASE("reductions over empty dims as torch: identities, and errors only where torch raises (issue 27)",
          "[reductions]") {
  using M = Tensor<float, shape<dyn, dyn>>;
  const M e03 = tenet::zeros<float, shape<dyn, dyn>>(0, 3);
  const M e30 = tenet::zeros<float, shape<dyn, dyn>>(3, 0);
  // softmax-like ops shift by a maximum, which has no identity: they raised "amax(): cannot reduce
  // over a dim of size 0"; torch returns an empty tensor or -inf
  const M s0 = tenet::softmax<0>(e03);
  CHECK(s0.sizes()[0] == 0);
  CHECK(s0.sizes()[1] == 3);
  const M ls = tenet::log_softmax<1>(e30.t());
  CHECK(ls.sizes()[0] == 0);
  const Tensor<float, shape<dyn>> lse = tenet::logsumexp<1>(e30);
  REQUIRE(lse.sizes()[0] == 3);
  for (std::int64_t i = 0; i < 3; ++i) CHECK(lse(i) == -std::numeric_limits<float>::infinity());
  CHECK(tenet::eval(tenet::logsumexp<0>(tenet::zeros<float, shape<dyn>>(0))).item() ==
        -std::numeric_limits<float>::infinity());
  // any / all of nothing: false / true
  const auto none = tenet::zeros<bool, shape<dyn>>(0);
  CHECK_FALSE(tenet::eval(tenet::any(none)).item());
  CHECK(tenet::eval(tenet::all(none)).item());
  const Tensor<bool, shape<dyn>> any0 = tenet::any<0>(e03);
  REQUIRE(any0.sizes()[0] == 3);
  CHECK_FALSE(any0(2));
  const Tensor<bool, shape<dyn>> all0 = tenet::all<0>(e03);
  CHECK(all0(1));
  // amax / amin over an empty dim are errors (torch: "Expected reduction dim 0 to have non-zero
  // size"), also when the result is empty; over a non-empty dim of an empty tensor they are empty
  CHECK_THROWS_WITH(tenet::amax<0>(e03), Catch::Contains("amax(): cannot reduce over dim 0 of size 0"));
  CHECK_THROWS_AS(tenet::amin<0>(tenet::zeros<float, shape<dyn, dyn>>(0, 0)), tenet::value_error);
  CHECK_THROWS_AS(tenet::amax(tenet::zeros<float, shape<dyn>>(0)), tenet::value_error);
  const Tensor<float, shape<dyn>> a1 = tenet::amax<1>(e03);
  CHECK(a1.sizes()[0] == 0);
  // the inf-norm of nothing has no identity either; the 2-norm is 0
  CHECK_THROWS_WITH(tenet::norm(tenet::zeros<float, shape<dyn>>(0), std::numeric_limits<double>::infinity()),
                    Catch::Contains("inf norm"));
  CHECK(tenet::norm(tenet::zeros<float, shape<dyn>>(0)).item() == 0.0f);
}
