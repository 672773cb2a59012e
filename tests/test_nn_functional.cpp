// The uniform_ prim, dropout (by its statistics), batch/instance/group norm with running stats,
// softmin and softmax with a dtype, baddbmm, einsum and the losses of nn_functional.hpp against
// PyTorch (tests/reference/gen_nn_functional.py -> nn_functional.txt).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;
using tenet_test::ref_tensor;

namespace {
constexpr const char* kFile = "nn_functional.txt";
constexpr double kRtol = 1e-5, kAtol = 1e-5;  // reductions sum in another order than torch

/// The reference values in a non-contiguous tensor: a transposed view (last two dims) of a buffer.
template <class T, std::size_t R>
Tensor<T, dyn_shape<R>> noncontiguous(const ref_tensor& r) {
  static_assert(R >= 2);
  const auto c = make<T, dyn_shape<R>>(r);
  auto s = c.sizes();
  std::swap(s[R - 1], s[R - 2]);
  Tensor<T, dyn_shape<R>> buffer(s);
  auto view = buffer.transpose(static_cast<std::int64_t>(R) - 2, static_cast<std::int64_t>(R) - 1);
  view.copy_(c);
  REQUIRE(!view.is_contiguous());
  return view;
}
template <class T>
Tensor<T, shape<dyn>> vec(const ref_tensor& r) {
  return make<T, shape<dyn>>(r);
}
}  // namespace

// ---------------------------------------------------------------------------------------------
TEST_CASE("nn_functional: the uniform_ prim draws rand's stream") {
  STATIC_REQUIRE(detail::holds_only_prims<decltype(rand_lazy<float, shape<dyn>>(1))>());
  manual_seed(5);
  const auto eager = rand<float, shape<dyn, dyn>>(37, 129);
  const auto after_eager = detail::default_generator().offset();
  manual_seed(5);
  const auto lazy = rand_lazy<float, shape<dyn, dyn>>(37, 129);
  CHECK(detail::default_generator().offset() == after_eager);  // the same blocks reserved
  const Tensor<float, shape<dyn, dyn>> drawn = lazy;
  const Tensor<float, shape<dyn, dyn>> again = lazy;  // a lazy draw reads the same blocks every time
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < 37; ++i)
    for (std::int64_t j = 0; j < 129; ++j) differ += drawn(i, j) != eager(i, j) || again(i, j) != eager(i, j);
  CHECK(differ == 0);
  // double, large enough for several threads' chunks
  manual_seed(9);
  const auto eager64 = rand<double, shape<dyn>>(100003);
  manual_seed(9);
  const Tensor<double, shape<dyn>> lazy64 = rand_lazy<double, shape<dyn>>(100003);
  differ = 0;
  double total = 0, lo = 1, hi = 0;
  for (std::int64_t i = 0; i < 100003; ++i) {
    differ += lazy64(i) != eager64(i);
    total += lazy64(i);
    lo = std::min(lo, lazy64(i));
    hi = std::max(hi, lazy64(i));
  }
  CHECK(differ == 0);
  CHECK(total / 100003 == Approx(0.5).margin(0.005));
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  // inside a fused expression
  manual_seed(5);
  const Tensor<float, shape<dyn, dyn>> shifted = rand_lazy<float, shape<dyn, dyn>>(37, 129) * 2.0f - 1.0f;
  CHECK(shifted(3, 4) == eager(3, 4) * 2.0f - 1.0f);
  // explain names the prim and where it reads the stream
  manual_seed(5);
  const std::string text = explain(rand_lazy<float, shape<dyn, dyn>>(2, 3) < 0.5f);
  CHECK_THAT(text, Catch::Contains("uniform[seed=5, offset=0]") && Catch::Contains("random"));
}

TEST_CASE("nn_functional: a uniform_ draw lives on the device it was made for") {
  // rand_lazy takes the default device (as rand); an expression mixing it with tensors of another
  // device is a device_error naming both, and a CUDA draw in a translation unit without the CUDA
  // backend says how to get it
  const auto x = randn<float, shape<dyn>>(6);
  const device_guard on(tenet::cuda(0));
  const auto u = rand_lazy<float, shape<dyn>>(6);
  CHECK(detail::expr_device(u) == tenet::device(tenet::cuda(0)));
  using F1 = Tensor<float, shape<dyn>>;
  CHECK_THROWS_AS(F1(x * u), device_error);
  CHECK_THROWS_WITH(F1(x * u), Catch::Contains("mixes tensors on cpu and cuda:0"));
  CHECK_THROWS_WITH(F1(u), Catch::Contains("the CUDA backend is not compiled in"));
  F1 host({6}, tenet::cpu);
  CHECK_THROWS_AS(host.copy_(u), device_error);
}

TEST_CASE("nn_functional: dropout statistics, scale and edge cases") {
  manual_seed(21);
  constexpr std::int64_t n = 200000;
  const auto x = randn<float, shape<dyn>>(n);
  const double p = 0.3;
  const auto y = dropout(x, p);
  STATIC_REQUIRE(std::is_same_v<decltype(y), const Tensor<float, shape<dyn>>>);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  std::int64_t zeros = 0, wrong = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (y(i) == 0.0f && x(i) != 0.0f)
      ++zeros;
    else if (y(i) != x(i) * scale)
      ++wrong;
  }
  CHECK(wrong == 0);
  CHECK(static_cast<double>(zeros) / n == Approx(p).margin(0.005));  // 0.005 is ~5 standard deviations
  // E[dropout(1)] = 1; two calls draw different masks
  const auto ones_in = ones<double, shape<dyn, dyn>>(400, 500);
  const Tensor<double, shape<dyn, dyn>> a = dropout(ones_in, 0.5);
  const Tensor<double, shape<dyn, dyn>> b = dropout(ones_in.transpose<0, 1>().transpose<0, 1>(), 0.5);
  CHECK(eval(mean(a)).item() == Approx(1.0).margin(0.01));
  CHECK(eval(sum(ne(a, b))).item() > 1000);
  // eval mode and p = 0 return the input itself; p = 1 gives zeros (NaN stays NaN, as torch)
  auto small = make<float, shape<dyn>>(ref_tensor{"float32", {3}, {NAN, 1.0, -2.0}});
  const auto kept = dropout(small, 0.5, false);
  CHECK(kept.shares_storage(small));
  const auto none_dropped = dropout(small, 0.0);
  CHECK(none_dropped(1) == 1.0f);
  CHECK(none_dropped(2) == -2.0f);
  const auto all_dropped = dropout(small, 1.0);
  CHECK(std::isnan(all_dropped(0)));
  CHECK(all_dropped(1) == 0.0f);
  CHECK(all_dropped(2) == 0.0f);
  // p outside [0, 1]
  CHECK_THROWS_AS(dropout(small, -0.1), value_error);
  CHECK_THROWS_WITH(dropout(small, 1.5), Catch::Contains("between 0 and 1") && Catch::Contains("1.5"));
  CHECK_THROWS_AS(dropout(small, NAN), value_error);
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("nn_functional: batch_norm, training step then eval with the running stats") {
  {
    INFO("float32, [4, 3, 5], non-contiguous");
    const auto& c = get_case(kFile, "bn_f32");
    const auto x = noncontiguous<float, 3>(c.at("x"));
    const auto w = vec<float>(c.at("w"));
    const auto b = vec<float>(c.at("b"));
    const auto rm = vec<float>(c.at("rm0"));
    const auto rv = vec<float>(c.at("rv0"));
    const Tensor<float, dyn_shape<3>> out = batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
    check_close(out, c.at("out"), kRtol, kAtol);
    check_close(rm, c.at("rm1"), kRtol, kAtol);
    check_close(rv, c.at("rv1"), kRtol, kAtol);
    const Tensor<float, dyn_shape<3>> out_eval = batch_norm(x, rm, rv, w, none, false);
    check_close(out_eval, c.at("out_eval"), kRtol, kAtol);
    const Tensor<float, dyn_shape<3>> out_plain = batch_norm(x, none, none, none, none, true);
    check_close(out_plain, c.at("out_plain"), kRtol, kAtol);
    const auto rm2 = vec<float>(c.at("rm0"));
    const auto rv2 = vec<float>(c.at("rv0"));
    const Tensor<float, dyn_shape<3>> out_m = batch_norm(x, rm2, rv2, none, b, true, 0.3, 1e-3);
    check_close(out_m, c.at("out_m"), kRtol, kAtol);
    check_close(rm2, c.at("rm2"), kRtol, kAtol);
    check_close(rv2, c.at("rv2"), kRtol, kAtol);
    // errors: wrong channel count, eval without running stats, momentum
    const auto w4 = zeros<float, shape<dyn>>(4);
    CHECK_THROWS_WITH(batch_norm(x, rm, rv, w4, b, true), Catch::Contains("weight has 4 elements") &&
                                                             Catch::Contains("3 channels"));
    CHECK_THROWS_AS(batch_norm(x, none, none, w, b, false), value_error);
    CHECK_THROWS_AS(batch_norm(x, rm, rv, w, b, true, 1.5), value_error);
  }
  {
    INFO("float64, [6, 3], static channels");
    const auto& c = get_case(kFile, "bn_f64");
    const auto x = make<double, shape<dyn, 3>>(c.at("x"));
    const auto rm = make<double, shape<3>>(c.at("rm0"));
    const auto rv = make<double, shape<3>>(c.at("rv0"));
    const auto w = make<double, shape<3>>(c.at("w"));
    const auto b = make<double, shape<3>>(c.at("b"));
    auto out = batch_norm(x, rm, rv, w, b, true);
    STATIC_REQUIRE(std::is_same_v<shape_of<decltype(out)>, shape<dyn, 3>>);
    check_close(eval(out), c.at("out"));
    check_close(rm, c.at("rm1"));
    check_close(rv, c.at("rv1"));
    check_close(eval(batch_norm(x, rm, rv, w, none, false)), c.at("out_eval"));
  }
  {
    INFO("batch of 1");
    const auto& c = get_case(kFile, "bn_batch1");
    const auto x = make<float, dyn_shape<3>>(c.at("x"));
    const auto rm = zeros<float, shape<dyn>>(3);
    const auto rv = ones<float, shape<dyn>>(3);
    check_close(eval(batch_norm(x, rm, rv, none, none, true)), c.at("out"), kRtol, kAtol);
    check_close(rm, c.at("rm"), kRtol, kAtol);
    check_close(rv, c.at("rv"), kRtol, kAtol);
    const auto one_value = zeros<float, dyn_shape<3>>(1, 3, 1);
    CHECK_THROWS_WITH(batch_norm(one_value, rm, rv, none, none, true),
                      Catch::Contains("more than 1 value per channel"));
  }
}

TEST_CASE("nn_functional: instance_norm with and without running stats") {
  const auto& c = get_case(kFile, "in_f32");
  const auto x = noncontiguous<float, 3>(c.at("x"));
  const auto w = vec<float>(c.at("w"));
  const auto b = vec<float>(c.at("b"));
  const auto rm = vec<float>(c.at("rm0"));
  const auto rv = vec<float>(c.at("rv0"));
  check_close(eval(instance_norm(x)), c.at("plain"), kRtol, kAtol);
  check_close(eval(instance_norm(x, rm, rv, w, b, true, 0.2)), c.at("stats"), kRtol, kAtol);
  check_close(rm, c.at("rm1"), kRtol, kAtol);
  check_close(rv, c.at("rv1"), kRtol, kAtol);
  check_close(eval(instance_norm(x, rm, rv, w, b, false)), c.at("evald"), kRtol, kAtol);
  CHECK_THROWS_AS(instance_norm(x, none, none, w, b, false), value_error);
  const auto one_spatial = zeros<float, dyn_shape<3>>(2, 3, 1);
  CHECK_THROWS_WITH(instance_norm(one_spatial), Catch::Contains("more than 1 spatial element"));

  const auto& c64 = get_case(kFile, "in_f64");
  const auto x64 = make<double, dyn_shape<4>>(c64.at("x"));
  check_close(eval(instance_norm(x64, none, none, none, none, true, 0.1, 1e-3)), c64.at("out"));
}

TEST_CASE("nn_functional: group_norm") {
  const auto& c = get_case(kFile, "gn_f32");
  const auto x = noncontiguous<float, 3>(c.at("x"));
  const auto w = vec<float>(c.at("w"));
  const auto b = vec<float>(c.at("b"));
  check_close(eval(group_norm(x, 3, w, b)), c.at("g3"), kRtol, kAtol);
  check_close(eval(group_norm(x, 1)), c.at("g1"), kRtol, kAtol);
  check_close(eval(group_norm(x, 6, w, none, 1e-2)), c.at("g6"), kRtol, kAtol);
  CHECK_THROWS_WITH(group_norm(x, 4), Catch::Contains("divisible by num_groups") && Catch::Contains("num_groups=4"));
  CHECK_THROWS_AS(group_norm(x, 0), value_error);
  CHECK_THROWS_AS(group_norm(x, 3, zeros<float, shape<dyn>>(5)), shape_error);

  const auto& c64 = get_case(kFile, "gn_f64");
  const auto x64 = make<double, dyn_shape<4>>(c64.at("x"));
  check_close(eval(group_norm(x64, 2)), c64.at("g2"));
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("nn_functional: softmin, softmax and log_softmax with a dtype") {
  const auto& c = get_case(kFile, "softmax_dtype");
  const auto x = make<float, shape<dyn, dyn>>(c.at("x"));
  const auto xi = make<std::int32_t, shape<dyn, dyn>>(c.at("xi"));
  check_close(eval(softmin<1>(x)), c.at("softmin1"));
  check_close(eval(softmin<0>(x.transpose<0, 1>().transpose<0, 1>())), c.at("softmin0"));
  auto s64 = softmax<-1, double>(x);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(s64)>, double>);
  check_close(eval(s64), c.at("sm64"));
  check_close(eval(log_softmax<0, double>(x)), c.at("lsm64"));
  auto si = softmax<1, float>(xi);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(si)>, float>);
  check_close(eval(si), c.at("smi"));
  check_close(eval(softmin<1, double>(x)), c.at("smin64"));
}

TEST_CASE("nn_functional: baddbmm") {
  const auto& c = get_case(kFile, "baddbmm");
  const auto ct = make<float, dyn_shape<3>>(c.at("c"));
  const auto a = make<float, shape<dyn, 3, 4>>(c.at("a"));
  const auto b = noncontiguous<float, 3>(c.at("b"));
  const auto cb = vec<float>(c.at("cb"));
  check_close(eval(baddbmm(ct, a, b)), c.at("out"), kRtol, kAtol);
  check_close(eval(baddbmm(ct, a, b, 0.5, 2.0)), c.at("out_ba"), kRtol, kAtol);
  check_close(eval(baddbmm(cb, a, b, 1.0, -1.0)), c.at("out_bc"), kRtol, kAtol);
  const auto nan_c = full<float, dyn_shape<3>>(NAN, 2, 3, 5);
  check_close(eval(baddbmm(nan_c, a, b, 0.0)), c.at("out_b0"), kRtol, kAtol);  // beta = 0 ignores c
  CHECK_THROWS_WITH(baddbmm(zeros<float, dyn_shape<3>>(3, 3, 5), a, b), Catch::Contains("cannot broadcast"));
  CHECK_THROWS_AS(baddbmm(ct, a, zeros<float, dyn_shape<3>>(1, 4, 5)), shape_error);  // bmm: batch 2 vs 1
  // c larger than the [2, 3, 1] product
  CHECK_THROWS_WITH(baddbmm(ct, a, zeros<float, dyn_shape<3>>(2, 4, 1)), Catch::Contains("does not broadcast"));
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("nn_functional: einsum") {
  const auto& c = get_case(kFile, "einsum");
  const auto a = make<float, shape<dyn, 3, 4>>(c.at("a"));
  const auto b = make<float, dyn_shape<3>>(c.at("b"));
  const auto bt = noncontiguous<float, 3>(c.at("bt"));
  const auto m = make<float, shape<4, 4>>(c.at("m"));
  const auto u = vec<float>(c.at("u"));
  const auto v = vec<float>(c.at("v"));
  const auto w = make<float, shape<dyn, dyn>>(c.at("w"));
  const auto z = make<float, dyn_shape<3>>(c.at("z"));
  auto bmm_e = einsum<"bij,bjk->bik">(a, b);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(bmm_e)>, shape<dyn, 3, dyn>>);
  check_close(eval(bmm_e), c.at("bmm"), kRtol, kAtol);
  check_close(eval(einsum<"bij,bkj->bik">(a, bt)), c.at("bmm_t"), kRtol, kAtol);
  auto t = einsum<"ij->ji">(m);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(t)>, shape<4, 4>>);
  check_close(eval(t), c.at("transpose"));
  check_close(eval(einsum<"ii->i">(m)), c.at("diag"));
  auto trace = einsum<"ii">(m);
  STATIC_REQUIRE(rank_of<decltype(trace)> == 0);
  check_close(eval(trace), c.at("trace"), kRtol, kAtol);
  check_close(eval(einsum<"i,i->">(u, u)), c.at("dot"), kRtol, kAtol);
  check_close(eval(einsum<"i,j->ij">(u, v)), c.at("outer"));
  check_close(eval(einsum<"ij,j">(m, u)), c.at("implicit"), kRtol, kAtol);
  check_close(eval(einsum<"ba,b">(w, u)), c.at("implicit2"), kRtol, kAtol);
  check_close(eval(einsum<"bij->">(a)), c.at("sum_all"), kRtol, kAtol);
  check_close(eval(einsum<"bij,bjk,bkk->bik">(a, b, z)), c.at("three"), kRtol, kAtol);
  check_close(eval(einsum<"ij,jk,kl->il">(m, w, w.transpose<0, 1>())), c.at("three_mm"), kRtol, kAtol);
  check_close(eval(einsum<"ij,j->i">(w.transpose<0, 1>(), u)), c.at("mv"), kRtol, kAtol);
  check_close(eval(einsum<"ij,ij->ij">(m, u.narrow<0>(0, 1).reshape<1, 1>())), c.at("bcast"));
  // errors: contracted sizes differ; a diagonal of a non-square operand
  CHECK_THROWS_WITH(einsum<"bij,bjk->bik">(a, zeros<float, dyn_shape<3>>(2, 5, 5)),
                    Catch::Contains("subscript 'j'") && Catch::Contains("4 and 5"));
  CHECK_THROWS_WITH(einsum<"ii->i">(w), Catch::Contains("repeated") && Catch::Contains("4 != 3"));

  // integers (the broadcast product path; exact)
  const auto i1 = arange<std::int64_t>(4);
  const auto i2 = arange<std::int64_t>(1, 4);
  const Tensor<std::int64_t, shape<dyn, dyn>> io = einsum<"i,j->ji">(i1, i2);
  const Tensor<std::int64_t, shape<>> isum = einsum<"i,i">(i1, i1);
  CHECK(io(2, 3) == 9);
  CHECK(io(0, 1) == 1);
  CHECK(isum.item() == 14);

  const auto& c64 = get_case(kFile, "einsum_f64");
  const auto a64 = make<double, shape<dyn, dyn>>(c64.at("a"));
  const auto b64 = noncontiguous<double, 2>(c64.at("b"));
  check_close(eval(einsum<"ik,kj->ij">(a64, b64)), c64.at("mm"));
  check_close(eval(einsum<"ik,kj->ji">(a64, b64)), c64.at("mm_t"));
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("nn_functional: kl_div with every reduction and log_target") {
  const auto& c = get_case(kFile, "kl_div");
  const auto in = make<float, shape<dyn, dyn>>(c.at("input"));
  const auto tg = make<float, shape<dyn, dyn>>(c.at("target"));
  const auto lt = make<float, shape<dyn, dyn>>(c.at("ltarget"));
  check_close(eval(kl_div(in, tg)), c.at("mean"), kRtol, kAtol);
  check_close(eval(kl_div<reduction::sum>(in, tg)), c.at("sum"), kRtol, kAtol);
  check_close(eval(kl_div<reduction::none>(in, tg)), c.at("none"), kRtol, kAtol);
  check_close(eval(kl_div<reduction::batchmean>(in, tg)), c.at("batchmean"), kRtol, kAtol);
  check_close(eval(kl_div<reduction::none>(in, lt, true)), c.at("log_none"), kRtol, kAtol);
  check_close(eval(kl_div<reduction::batchmean>(in, lt, true)), c.at("log_batchmean"), kRtol, kAtol);
}

TEST_CASE("nn_functional: binary_cross_entropy and binary_cross_entropy_with_logits") {
  const auto& c = get_case(kFile, "bce");
  const auto in = make<float, shape<dyn, dyn>>(c.at("input"));
  const auto tg = make<float, shape<dyn, dyn>>(c.at("target"));
  const auto wt = vec<float>(c.at("weight"));
  check_close(eval(binary_cross_entropy(in, tg)), c.at("mean"), kRtol, kAtol);
  check_close(eval(binary_cross_entropy<reduction::sum>(in, tg)), c.at("sum"), kRtol, kAtol);
  check_close(eval(binary_cross_entropy<reduction::none>(in, tg)), c.at("none"), kRtol, kAtol);
  check_close(eval(binary_cross_entropy<reduction::none>(in, tg, wt)), c.at("weighted"), kRtol, kAtol);
  auto bad = in.clone();
  bad(0, 0) = 1.5f;
  CHECK_THROWS_WITH(binary_cross_entropy(bad, tg), Catch::Contains("between 0 and 1"));
  CHECK_THROWS_WITH(binary_cross_entropy(in, zeros<float, shape<dyn, dyn>>(2, 3)),
                    Catch::Contains("target's sizes") && Catch::Contains("shape<2, 3>"));
  const auto& c64 = get_case(kFile, "bce_f64");
  check_close(eval(binary_cross_entropy(noncontiguous<double, 2>(c64.at("input")),
                                        noncontiguous<double, 2>(c64.at("target")))),
              c64.at("mean"));

  const auto& l = get_case(kFile, "bce_logits");
  const auto x = make<float, shape<dyn, dyn>>(l.at("input"));
  const auto t = make<float, shape<dyn, dyn>>(l.at("target"));
  const auto pw = vec<float>(l.at("pos_weight"));
  const auto w2 = make<float, shape<dyn, dyn>>(l.at("weight"));
  check_close(eval(binary_cross_entropy_with_logits(x, t)), l.at("mean"), kRtol, kAtol);
  check_close(eval(binary_cross_entropy_with_logits<reduction::none>(x, t)), l.at("none"), kRtol, kAtol);
  check_close(eval(binary_cross_entropy_with_logits<reduction::none>(x, t, none, pw)), l.at("pw"), kRtol, kAtol);
  check_close(eval(binary_cross_entropy_with_logits<reduction::sum>(x, t, w2, pw)), l.at("both"), kRtol, kAtol);
  CHECK_THROWS_AS(binary_cross_entropy_with_logits(x, zeros<float, shape<dyn, dyn>>(3, 1)), shape_error);
  const auto& l64 = get_case(kFile, "bce_logits_f64");
  check_close(eval(binary_cross_entropy_with_logits(vec<double>(l64.at("input")), vec<double>(l64.at("target")))),
              l64.at("mean"));
}

TEST_CASE("nn_functional: cosine_similarity and pairwise_distance") {
  const auto& c = get_case(kFile, "cosine");
  const auto a = make<float, shape<dyn, dyn>>(c.at("a"));
  const auto b = noncontiguous<float, 2>(c.at("b"));
  const auto r = make<float, shape<1, dyn>>(c.at("r"));
  check_close(eval(cosine_similarity(a, b)), c.at("dim1"), kRtol, kAtol);
  check_close(eval(cosine_similarity<0>(a, b)), c.at("dim0"), kRtol, kAtol);
  check_close(eval(cosine_similarity(a, r)), c.at("bcast"), kRtol, kAtol);
  check_close(eval(cosine_similarity(a, b, 0.5)), c.at("eps"), kRtol, kAtol);
  CHECK_THROWS_AS(cosine_similarity(a, zeros<float, shape<dyn, dyn>>(2, 5)), shape_error);
  const auto& c64 = get_case(kFile, "cosine_f64");
  check_close(eval(cosine_similarity<-1>(make<double, shape<dyn, dyn>>(c64.at("a")),
                                         make<double, shape<dyn, dyn>>(c64.at("b")))),
              c64.at("out"));

  const auto& p = get_case(kFile, "pairwise");
  const auto pa = make<float, shape<dyn, dyn>>(p.at("a"));
  const auto pb = make<float, shape<dyn, dyn>>(p.at("b"));
  check_close(pairwise_distance(pa, pb), p.at("p2"), kRtol, kAtol);
  check_close(pairwise_distance(pa, pb, 1.0), p.at("p1"), kRtol, kAtol);
  check_close(pairwise_distance(pa, pb, INFINITY), p.at("pinf"), kRtol, kAtol);
  check_close(pairwise_distance(pa, pb, keepdim), p.at("keep"), kRtol, kAtol);
  check_close(pairwise_distance(pa, pb, 2.0, 0.1), p.at("eps"), kRtol, kAtol);
}

TEST_CASE("nn_functional: float64 kl_div, baddbmm and pairwise_distance with p = 3") {
  const auto& c = get_case(kFile, "misc_f64");
  using M = Tensor<double, shape<dyn, dyn>>;
  check_close(eval(kl_div<reduction::batchmean>(make<double, shape<dyn, dyn>>(c.at("li")),
                                                make<double, shape<dyn, dyn>>(c.at("lt")))),
              c.at("kl"));
  check_close(eval(baddbmm(make<double, dyn_shape<3>>(c.at("c")), make<double, dyn_shape<3>>(c.at("a")),
                           noncontiguous<double, 3>(c.at("b")), -0.5, 0.25)),
              c.at("baddbmm"));
  const M pa = make<double, shape<dyn, dyn>>(c.at("pa"));
  const M pb = make<double, shape<dyn, dyn>>(c.at("pb"));
  check_close(pairwise_distance(pa, pb, 3.0), c.at("p3"));
}

TEST_CASE("nn_functional: empty inputs") {
  const auto rows0 = zeros<float, shape<dyn, dyn>>(0, 3);
  const auto m = ones<float, shape<dyn, dyn>>(3, 4);
  const Tensor<float, shape<dyn, dyn>> product = einsum<"ij,jk->ik">(rows0, m);
  CHECK(product.sizes() == sizes_t<2>{0, 4});
  const Tensor<float, shape<dyn, dyn>> zero_k = einsum<"ij,jk->ik">(m.transpose<0, 1>().narrow<1>(0, 0),
                                                                    rows0);  // an empty contraction sums to 0
  CHECK(zero_k.sizes() == sizes_t<2>{4, 3});
  CHECK(zero_k(3, 2) == 0.0f);
  const auto x = zeros<float, dyn_shape<3>>(0, 3, 2);
  const auto rm = zeros<float, shape<dyn>>(3);
  const auto rv = ones<float, shape<dyn>>(3);
  CHECK(eval(batch_norm(x, rm, rv)).numel() == 0);
  CHECK_THROWS_AS(batch_norm(x, rm, rv, none, none, true), value_error);  // no values per channel
  CHECK(dropout(x, 0.5).numel() == 0);
  CHECK(eval(group_norm(x, 3)).numel() == 0);
}

TEST_CASE("nn modules run in a program built without autograd (TENET_AUTOGRAD=0)") {
  // registering a parameter once called requires_grad_(true), which throws without autograd
  nn::Linear<4, 3> fc;
  CHECK(!fc.weight.requires_grad());
  const Tensor<float, shape<2, 4>> x = ones<float, shape<2, 4>>();
  const Tensor<float, shape<2, 3>> y = fc(x);
  const Tensor<float, shape<3>> want = sum<1>(fc.weight) + fc.bias;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(y(i, j) == Approx(want(j)).epsilon(1e-5));
}
