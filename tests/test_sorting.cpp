// Scans (cumsum, cumprod, cummax, cummin, logcumsumexp), sorting and selection (sort, argsort,
// msort, topk, kthvalue, median, mode), tril/triu and iota against PyTorch
// (tests/reference/gen_sorting.py -> sorting.txt). Inputs are shape<dyn, dyn> so that the three
// dtypes share few expression types.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;
using tenet_test::ref_case;

namespace {
constexpr const char* kFile = "sorting.txt";
template <class T>
using M = Tensor<T, shape<dyn, dyn>>;
constexpr double kRtol = 1e-5, kAtol = 1e-5;  // running sums/products round in another order than torch

template <class T>
void check_scans(const std::string& name) {
  INFO("case " << name);
  const auto& c = get_case(kFile, name);
  const auto x = make<T, shape<dyn, dyn>>(c.at("x"));
  using I = std::int64_t;
  using Sum = std::conditional_t<std::is_integral_v<T>, I, T>;
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(cumsum<0>(x))>, Sum>);
  check_close(M<Sum>(cumsum<0>(x)), c.at("cumsum0"), kRtol, kAtol);
  check_close(M<Sum>(cumsum<1>(x)), c.at("cumsum1"), kRtol, kAtol);
  check_close(M<Sum>(cumprod<0>(x)), c.at("cumprod0"), kRtol, kAtol);
  check_close(M<Sum>(cumprod<-1>(x)), c.at("cumprod1"), kRtol, kAtol);
  const auto m0 = cummax<0>(x), m1 = cummax<1>(x), n0 = cummin<0>(x), n1 = cummin<-1>(x);
  check_close(m0.values, c.at("cummax0_v"));
  check_close(m0.indices, c.at("cummax0_i"));
  check_close(m1.values, c.at("cummax1_v"));
  check_close(m1.indices, c.at("cummax1_i"));
  check_close(n0.values, c.at("cummin0_v"));
  check_close(n0.indices, c.at("cummin0_i"));
  check_close(n1.values, c.at("cummin1_v"));
  check_close(n1.indices, c.at("cummin1_i"));
  if constexpr (is_floating_v<T>) {
    check_close(M<T>(logcumsumexp<0>(x)), c.at("lcse0"), kRtol, kAtol);
    check_close(M<T>(logcumsumexp<1>(x)), c.at("lcse1"), kRtol, kAtol);
  }
  // a transposed view is read in place
  const auto xt = x.template transpose<0, 1>();
  check_close(M<Sum>(cumsum<1>(xt)), c.at("t_cumsum1"), kRtol, kAtol);
  const auto mt = cummax<1>(xt);
  check_close(mt.values, c.at("t_cummax1_v"));
  check_close(mt.indices, c.at("t_cummax1_i"));
}

template <class T>
void check_sorts(const std::string& name) {
  INFO("case " << name);
  const auto& c = get_case(kFile, name);
  const auto x = make<T, shape<dyn, dyn>>(c.at("x"));
  for (int desc = 0; desc < 2; ++desc) {
    const std::string s = desc ? "d" : "a";
    const auto s0 = sort<0>(x, desc != 0);
    const auto s1 = sort<1>(x, desc != 0);
    check_close(s0.values, c.at("sort0" + s + "_v"));
    check_close(s0.indices, c.at("sort0" + s + "_i"));
    check_close(s1.values, c.at("sort1" + s + "_v"));
    check_close(s1.indices, c.at("sort1" + s + "_i"));
  }
  check_close(M<std::int64_t>(argsort<1>(x, true)), c.at("argsort1d"));
  check_close(M<T>(msort(x)), c.at("msort"));
  const auto st = sort(x.template transpose<0, 1>());  // dim -1 by default
  check_close(st.values, c.at("t_sort1_v"));
  check_close(st.indices, c.at("t_sort1_i"));
}

/// x[i, indices[i, j]] == values[i, j] along dim 1 (NaN matches NaN).
template <class T, class SV>
void check_points_at(const M<T>& x, const Tensor<T, SV>& values, const M<std::int64_t>& indices) {
  for (std::int64_t i = 0; i < indices.sizes()[0]; ++i)
    for (std::int64_t j = 0; j < indices.sizes()[1]; ++j) {
      const double want = static_cast<double>(values(i, j));
      const double got = static_cast<double>(x(i, indices(i, j)));
      CHECK((got == want || (std::isnan(got) && std::isnan(want))));
    }
}

template <class T>
void check_selection(const std::string& name, bool all_ks) {
  INFO("case " << name);
  const auto& c = get_case(kFile, name);
  const auto x = make<T, shape<dyn, dyn>>(c.at("x"));
  if (all_ks) {
    for (std::int64_t k : {0, 1, 3, 7})
      for (int largest = 1; largest >= 0; --largest) {
        const std::string key = "topk" + std::to_string(k) + (largest ? "l" : "s");
        const auto t = topk(x, k, largest != 0);
        check_close(t.values, c.at(key + "_v"));
        check_close(t.indices, c.at(key + "_i"));
      }
    const auto t0 = topk<0>(x, 2);
    check_close(t0.values, c.at("topk2_dim0_v"));
    check_close(t0.indices, c.at("topk2_dim0_i"));
    for (std::int64_t k : {1, 4, 7}) {
      const auto kv = kthvalue<1>(x, k);
      check_close(kv.values, c.at("kth" + std::to_string(k) + "_v"));
      check_close(kv.indices, c.at("kth" + std::to_string(k) + "_i"));
    }
    const auto kk = kthvalue<0>(x, 2, keepdim);
    STATIC_REQUIRE(rank_of<decltype(kk.values)> == 2);
    check_close(kk.values, c.at("kth2_dim0_keep_v"));
    check_close(kk.indices, c.at("kth2_dim0_keep_i"));
    const auto mk = median<0>(x, keepdim);
    check_close(mk.values, c.at("median0_keep_v"));
    check_close(mk.indices, c.at("median0_keep_i"));
    check_close(median(x.template select<0>(2)), c.at("median_all_finite"));
    check_close(median(x.template select<0>(2).template narrow<0>(0, 6)), c.at("median_even"));
  } else {
    const auto t = topk(x, 3);
    check_close(t.values, c.at("topk3l_v"));
    check_close(t.indices, c.at("topk3l_i"));
    const auto kv = kthvalue(x, 2);
    check_close(kv.values, c.at("kth2_v"));
    check_close(kv.indices, c.at("kth2_i"));
  }
  const auto m = median<1>(x);
  check_close(m.values, c.at("median1_v"));
  check_close(m.indices, c.at("median1_i"));
  check_close(median(x), c.at("median_all"));
}
}  // namespace

TEST_CASE("sorting: cumsum, cumprod, cummax, cummin, logcumsumexp against PyTorch") {
  check_scans<float>("scan_f32");
  check_scans<double>("scan_f64");
  check_scans<std::int64_t>("scan_i64");
  const auto& b = get_case(kFile, "scan_bool");
  const auto xb = make<bool, shape<dyn, dyn>>(b.at("x"));
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(cumsum<1>(xb))>, std::int64_t>);
  check_close(M<std::int64_t>(cumsum<1>(xb)), b.at("cumsum1"));
  check_close(M<std::int64_t>(cumprod<0>(xb)), b.at("cumprod0"));
  const auto& w = get_case(kFile, "lcse_wide");
  const auto xw = make<double, shape<dyn, dyn>>(w.at("x"));
  check_close(M<double>(logcumsumexp<1>(xw)), w.at("lcse1"));
  check_close(M<double>(cumsum<1>(xw)), w.at("cumsum1"));
  const auto& s = get_case(kFile, "lcse_spread");
  check_close(M<float>(logcumsumexp<1>(make<float, shape<dyn, dyn>>(s.at("x")))), s.at("lcse1"));
}

TEST_CASE("sorting: scan dtypes, int32 and the dtype argument") {
  const auto x = make<std::int32_t, shape<dyn, dyn>>(get_case(kFile, "scan_i64").at("x"));
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(cumsum<1>(x))>, std::int64_t>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(cumsum<1, std::int32_t>(x))>, std::int32_t>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(cumsum<1, double>(x))>, double>);
  check_close(M<std::int64_t>(cumsum<1>(x)), get_case(kFile, "scan_i64").at("cumsum1"));
  check_close(M<double>(cumsum<1, double>(x)), get_case(kFile, "scan_i64").at("cumsum1"));
  check_close(M<std::int32_t>(cumprod<0, std::int32_t>(x)), get_case(kFile, "scan_i64").at("cumprod0"));
}

TEST_CASE("sorting: scans of empty, size-1 and 0-dim inputs") {
  const auto e = zeros<float, shape<dyn, dyn>>(0, 3);
  CHECK(M<float>(cumsum<0>(e)).numel() == 0);
  CHECK(cummax<1>(e).indices.numel() == 0);
  const auto one = full<float, shape<dyn, dyn>>(2.5f, 3, 1);
  const auto c = cummin<1>(one);
  CHECK(c.values(2, 0) == 2.5f);
  CHECK(c.indices(2, 0) == 0);
  CHECK(M<float>(cumprod<0>(one))(2, 0) == 2.5f * 2.5f * 2.5f);
  const Tensor<float, shape<>> s = full<float, shape<>>(4.0f);
  CHECK(eval(cumsum<0>(s)).item() == 4.0f);
  CHECK(eval(cumsum<-1>(s)).item() == 4.0f);
}

TEST_CASE("sorting: sort, argsort, msort against PyTorch (stable, NaN last)") {
  check_sorts<float>("sort_f32");
  check_sorts<double>("sort_f64");
  check_sorts<std::int64_t>("sort_i64");
}

TEST_CASE("sorting: topk, kthvalue, median against PyTorch") {
  check_selection<float>("select_f32", true);
  check_selection<double>("select_f64", true);
  check_selection<std::int64_t>("select_i64", false);
}

TEST_CASE("sorting: ties in topk, kthvalue, median pick the first index, at an equal value") {
  const auto& c = get_case(kFile, "select_ties");
  const auto x = make<float, shape<dyn, dyn>>(c.at("x"));
  const auto t = topk(x, 3);
  check_close(t.values, c.at("topk3_v"));
  check_points_at(x, t.values, M<std::int64_t>(t.indices));
  CHECK(t.indices(0, 0) == 1);  // the first 3 in input order (torch's quickselect gives 1, 6, 4)
  CHECK(t.indices(0, 1) == 2);
  const auto s = topk(x, 2, false);
  check_close(s.values, c.at("topk2s_v"));
  check_points_at(x, s.values, M<std::int64_t>(s.indices));
  const auto k = kthvalue(x, 4, keepdim);
  check_close(k.values.template select<1>(0), c.at("kth4_v"));
  check_points_at(x, M<float>(k.values), M<std::int64_t>(k.indices));
  const auto m = median<1>(x, keepdim);
  check_close(m.values.template select<1>(0), c.at("median1_v"));
  check_points_at(x, M<float>(m.values), M<std::int64_t>(m.indices));
  CHECK(m.indices(1, 0) == 6);  // [2 1 2 1 2 1 1] sorted stably: position 3 is the fourth 1 (torch: 5)
}

TEST_CASE("sorting: mode against PyTorch (smallest of the most frequent, its last index)") {
  const auto& c = get_case(kFile, "mode_i64");
  const auto x = make<std::int64_t, shape<dyn, dyn>>(c.at("x"));
  const auto m = mode<1>(x);
  check_close(m.values, c.at("mode1_v"));
  check_close(m.indices, c.at("mode1_i"));
  const auto mk = mode<0>(x, keepdim);
  check_close(mk.values, c.at("mode0_keep_v"));
  check_close(mk.indices, c.at("mode0_keep_i"));
  // a transposed view: the same as dim 0 of x
  const auto mt = mode<1>(x.transpose<0, 1>());
  check_close(eval(mt.values.reshape<1, dyn>(mt.values.numel())), c.at("mode0_keep_v"));
  const auto& f = get_case(kFile, "mode_f32");
  const auto xf = make<float, shape<dyn, dyn>>(f.at("x"));
  const auto mf = mode(xf);
  check_close(mf.values, f.at("mode1_v"));
  check_close(mf.indices, f.at("mode1_i"));
  const auto& d = get_case(kFile, "mode_f64");
  const auto md = mode(make<double, shape<dyn, dyn>>(d.at("x")));
  check_close(md.values, d.at("mode1_v"));
  check_close(md.indices, d.at("mode1_i"));
}

TEST_CASE("sorting: empty and size-1 dims; k = 0 and k = size") {
  const auto e = zeros<float, shape<dyn, dyn>>(2, 0);
  const auto se = sort<1>(e);
  CHECK(se.values.numel() == 0);
  CHECK(se.indices.sizes() == sizes_t<2>{2, 0});
  CHECK(topk(e, 0).values.sizes() == sizes_t<2>{2, 0});
  CHECK(M<std::int64_t>(argsort<0>(e)).numel() == 0);
  const auto one = full<double, shape<dyn, dyn>>(-1.0, 3, 1);
  CHECK(median<1>(one).values(2) == -1.0);
  CHECK(kthvalue<1>(one, 1).indices(1) == 0);
  CHECK(mode<1>(one).values(0) == -1.0);
  CHECK(topk<1>(one, 1).indices(2, 0) == 0);
  // the global median of an empty tensor is NaN, as torch
  CHECK(std::isnan(median(e).item()));
}

TEST_CASE("sorting: out-of-range k and empty dims throw with the values") {
  const auto x = zeros<float, shape<dyn, dyn>>(2, 5);
  CHECK_THROWS_AS(topk(x, 6), index_error);
  CHECK_THROWS_WITH(topk(x, 6), Catch::Contains("k = 6") && Catch::Contains("size 5"));
  CHECK_THROWS_AS(topk<0>(x, -1), index_error);
  CHECK_THROWS_WITH(topk<0>(x, 3), Catch::Contains("k = 3") && Catch::Contains("dim 0 of size 2"));
  CHECK_THROWS_AS(kthvalue(x, 0), index_error);
  CHECK_THROWS_WITH(kthvalue(x, 6), Catch::Contains("k = 6") && Catch::Contains("size 5"));
  const auto e = zeros<float, shape<dyn, dyn>>(2, 0);
  CHECK_THROWS_AS(median<1>(e), index_error);
  CHECK_THROWS_WITH(mode<1>(e), Catch::Contains("dim 1 has size 0"));
  CHECK_THROWS_AS(kthvalue<1>(e, 1), index_error);
  CHECK_THROWS_AS(iota(-2), value_error);
  CHECK_THROWS_AS(median(zeros<std::int64_t, shape<dyn>>(0)), value_error);
}

TEST_CASE("sorting: tril and triu against PyTorch") {
  const auto& c = get_case(kFile, "triangle");
  const auto a = make<float, shape<dyn, dyn>>(c.at("a"));
  const auto b = make<float, shape<dyn, dyn, dyn>>(c.at("b"));
  for (std::int64_t k : {-1, 0, 2}) {
    const std::string s = std::to_string(k);
    check_close(M<float>(tril(a, k)), c.at("tril" + s));
    check_close(M<float>(triu(a, k)), c.at("triu" + s));
    check_close(eval(tril(b, k)), c.at("b_tril" + s));
    check_close(eval(triu(b, k)), c.at("b_triu" + s));
  }
  check_close(M<float>(tril(a.transpose<0, 1>())), c.at("t_tril0"));
  // tril of an expression stays lazy
  STATIC_REQUIRE(!TensorType<decltype(tril(a * 2.0f))>);
}

TEST_CASE("sorting: iota is lazy and matches arange") {
  const Tensor<std::int64_t, shape<dyn>> a = iota(5, 3, -2);
  CHECK(a(0) == 3);
  CHECK(a(4) == -5);
  const Tensor<double, shape<dyn>> f = iota<double>(4, 0.5, 0.25);
  const auto r = arange<double>(0.5, 1.5, 0.25);
  for (std::int64_t i = 0; i < 4; ++i) CHECK(f(i) == r(i));
  const Tensor<float, shape<dyn>> g = iota<float>(3) * 2.0f;  // fused with the elementwise tail
  CHECK(g(2) == 4.0f);
  CHECK(eval(iota(0)).numel() == 0);
}

TEST_CASE("sorting: the scan/sort prims decompose closed, the ATen ops are decompositions") {
  using X = M<float>;
  using E = decltype(cumsum<1>(std::declval<X>()) + tril(std::declval<X>()) +
                     cast<float>(argsort<0>(std::declval<X>())) + msort(std::declval<X>()));
  STATIC_REQUIRE(detail::holds_only_prims<decompose_t<E>>());
  STATIC_REQUIRE(detail::is_closed<decompose_t<E, detail::cpu_simd>, detail::cpu_simd>());
}

TEST_CASE("sorting: outer-dim scans (blocked by columns, threaded) agree with the line path") {
  manual_seed(3);
  M<double> x = randn<double, shape<dyn, dyn>>(300, 700);
  x(5, 600) = NAN;
  x(7, 3) = INFINITY;
  const auto xt = x.transpose<0, 1>();
  // dim 0 of x runs the column-blocked kernel (700 columns: 3 blocks); dim 1 of the transposed
  // view runs one line at a time; both must give the same numbers
  const M<double> a = cumsum<0>(x);
  const M<double> b = cumsum<1>(xt);
  const auto ma = cummax<0>(x);
  const auto mb = cummin<1>(xt);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < 300; ++i)
    for (std::int64_t j = 0; j < 700; ++j) {
      const double u = a(i, j), v = b(j, i);
      if (!(u == v || (std::isnan(u) && std::isnan(v)))) ++bad;
    }
  CHECK(bad == 0);
  CHECK(std::isnan(ma.values(299, 600)));
  CHECK(ma.indices(299, 600) == 5);
  CHECK(ma.values(299, 3) == INFINITY);
  CHECK(ma.indices(299, 3) == 7);
  // cummin of the view against a direct check of one line
  double lo = xt(11, 0);
  std::int64_t at = 0;
  for (std::int64_t i = 0; i < 300; ++i) {
    if (xt(11, i) <= lo) lo = xt(11, i), at = i;
    CHECK(mb.indices(11, i) == at);
  }
  // sort along the outer dim equals sort of the transposed lines
  const auto s0 = sort<0>(x, true);
  const auto s1 = sort<1>(xt, true);
  CHECK(s0.indices(0, 600) == 5);  // NaN first when descending
  bad = 0;
  for (std::int64_t i = 0; i < 300; ++i)
    for (std::int64_t j = 0; j < 700; ++j) bad += s0.indices(i, j) != s1.indices(j, i);
  CHECK(bad == 0);
}

TEST_CASE("sorting: bfloat16 scans and sort against PyTorch (accumulated in float)") {
  const auto& c = get_case(kFile, "half_bf16");
  const auto x = make<bfloat16, shape<dyn, dyn>>(c.at("x"));
  check_close(M<bfloat16>(cumsum<1>(x)), c.at("cumsum1"));
  check_close(M<bfloat16>(logcumsumexp<1>(x)), c.at("lcse1"));
  const auto s = sort<1>(x, true);
  check_close(s.values, c.at("sort1d_v"));
  check_close(s.indices, c.at("sort1d_i"));
}

TEST_CASE("sorting: scan and sort nodes write through copy_ into contiguous tensors and views") {
  const auto& c = get_case(kFile, "scan_f32");
  const auto x = make<float, shape<dyn, dyn>>(c.at("x"));
  auto direct = zeros<float, shape<dyn, dyn>>(4, 6);
  direct.copy_(cumsum<1>(x));  // the kernel writes straight into a contiguous destination
  check_close(direct, c.at("cumsum1"), kRtol, kAtol);
  auto storage = zeros<float, shape<dyn, dyn>>(6, 4);
  storage.transpose<0, 1>().copy_(cumsum<1>(x));  // a strided destination: through a temporary
  check_close(eval(storage.transpose<0, 1>()), c.at("cumsum1"), kRtol, kAtol);
  storage.transpose<0, 1>().copy_(cumsum<1>(where(isnan(storage.transpose<0, 1>()), x, x)));  // reads its destination
  check_close(eval(storage.transpose<0, 1>()), c.at("cumsum1"), kRtol, kAtol);
  const auto& s = get_case(kFile, "sort_f32");
  const auto xs = make<float, shape<dyn, dyn>>(s.at("x"));
  auto idx = zeros<std::int64_t, shape<dyn, dyn>>(3, 8);
  idx.copy_(argsort<1>(xs, true));
  check_close(idx, s.at("argsort1d"));
}
