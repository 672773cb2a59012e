// The indexing prims (gather_, scatter_), the indexing ops built on them, and nll_loss /
// cross_entropy, against PyTorch (tests/reference/gen_indexing.py -> indexing.txt).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include <tenet/losses.hpp>
#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;
using Catch::Matchers::Contains;

namespace {
constexpr const char* kFile = "indexing.txt";
constexpr double kRtol = 1e-5, kAtol = 1e-5;  // losses sum in another order than torch
using i64 = std::int64_t;
using D1 = shape<dyn>;
using D2 = shape<dyn, dyn>;
using D3 = shape<dyn, dyn, dyn>;

/// A non-contiguous view holding the same values (a transposed copy, transposed back).
template <class T, class S>
auto noncontig(const Tensor<T, S>& t) {
  auto v = t.template transpose<0, 1>().contiguous().template transpose<0, 1>();
  REQUIRE(!v.is_contiguous());
  return v;
}
template <class T, class S>
Tensor<T, S> mk(const tenet_test::ref_case& c, const char* key) {
  return make<T, S>(c.at(key));
}
}  // namespace

TEST_CASE("indexing: gather against torch (dtypes, views, 3-D, int32 index, empty index)") {
  const auto& c = get_case(kFile, "gather");
  const auto x = mk<float, D2>(c, "x");
  const auto xT = mk<float, D2>(c, "xT").transpose<0, 1>();  // x as a non-contiguous view
  const auto i1 = mk<i64, D2>(c, "idx1");
  const auto i0 = mk<i64, D2>(c, "idx0");
  check_close(eval(gather<1>(x, i1)), c.at("out1"));
  check_close(eval(gather<-1>(xT, i1)), c.at("out1"));
  check_close(eval(gather<1>(x, noncontig(i1))), c.at("out1"));
  check_close(eval(gather<1>(x, i1.to<std::int32_t>())), c.at("out1"));
  check_close(eval(gather<0>(x, i0)), c.at("out0"));
  check_close(eval(gather<1>(mk<double, D2>(c, "x64"), i1)), c.at("out1_64"));
  check_close(eval(gather<1>(mk<i64, D2>(c, "xi"), i1)), c.at("outi"));
  check_close(eval(gather<1>(mk<float, D3>(c, "x3"), mk<i64, D3>(c, "idx3"))), c.at("out3"));
  // 16-bit floats and bool are copied as they are
  check_close(eval(gather<1>(x.to<bfloat16>(), i1)), c.at("out1"));
  const Tensor<bool, D2> gb = gather<1>(x > 0.0f, i1);
  const Tensor<bool, D2> want_b = eval(gather<1>(x, i1)) > 0.0f;
  CHECK(eval(all(gb == want_b)).item());
  // an expression as input and as index
  check_close(eval(gather<1>(x * 1.0f, i1 + i64{0})), c.at("out1"));
  // empty index: empty result
  const auto e = eval(gather<1>(x, zeros<i64, D2>(3, 0)));
  CHECK(e.sizes() == sizes_t<2>{3, 0});
  // static shapes: the result has the index's shape
  using G = decltype(gather<1>(std::declval<Tensor<float, shape<3, 5>>>(), std::declval<Tensor<i64, shape<3, 4>>>()));
  STATIC_REQUIRE(std::is_same_v<shape_of<G>, shape<3, 4>>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<G>, float>);
  STATIC_REQUIRE(detail::holds_only_prims<decompose_t<G>>());
}

TEST_CASE("indexing: gather and scatter errors name the index, the dim and the size") {
  const auto x = arange<float>(15).reshape<dyn, dyn>(3, 5);
  auto idx = zeros<i64, D2>(3, 2);
  idx(1, 1) = 5;
  CHECK_THROWS_AS(eval(gather<1>(x, idx)), index_error);
  CHECK_THROWS_WITH(eval(gather<1>(x, idx)),
                    Contains("index 5") && Contains("dim 1") && Contains("size 5") && Contains("gather"));
  idx(1, 1) = -1;
  CHECK_THROWS_WITH(eval(gather<1>(x, idx)), Contains("index -1") && Contains("dim 1"));
  CHECK_THROWS_AS(eval(scatter<1>(x, idx, 0.0f)), index_error);
  CHECK_THROWS_WITH(eval(scatter_add<1>(x, idx, ones<float, D2>(3, 2))), Contains("index -1") && Contains("size 5"));
  // the index may not be larger than the input in a dim that is not indexed
  CHECK_THROWS_AS(eval(gather<1>(x, zeros<i64, D2>(4, 2))), shape_error);
  CHECK_THROWS_WITH(eval(gather<1>(x, zeros<i64, D2>(4, 2))), Contains("dim 0"));
  // nor larger than src anywhere
  CHECK_THROWS_AS(eval(scatter<1>(x, zeros<i64, D2>(3, 3), ones<float, D2>(3, 2))), shape_error);
  // a bad index found by a worker thread: a big gather
  auto big = zeros<i64, D2>(512, 256);
  big(400, 7) = 1000;
  CHECK_THROWS_WITH(eval(gather<1>(zeros<float, D2>(512, 300), big)), Contains("index 1000") && Contains("size 300"));
}

namespace {
template <scatter_reduction R, class T, class X, class I, class S>
void check_reduce(const tenet_test::ref_case& c, const std::string& key, const X& self, const I& idx, const S& src) {
  INFO(key);
  STATIC_REQUIRE(std::is_same_v<value_type_of<X>, T>);
  check_close(eval(scatter_reduce<1, R>(self, idx, src)), c.at(key + "_1"));
  check_close(eval(scatter_reduce<1, R>(self, idx, src, false)), c.at(key + "_0"));
}
}  // namespace

TEST_CASE("indexing: scatter, scatter_add and scatter_reduce with duplicates against torch") {
  const auto& c = get_case(kFile, "scatter");
  const auto s = mk<float, D2>(c, "s");
  const auto src = mk<float, D2>(c, "src");
  const auto uniq = mk<i64, D2>(c, "uniq");
  const auto dup = mk<i64, D2>(c, "dup");
  const auto dup0 = mk<i64, D2>(c, "dup0");
  const auto src0 = mk<float, D2>(c, "src0");
  check_close(eval(scatter<1>(s, uniq, src)), c.at("scatter"));
  check_close(eval(scatter<1>(noncontig(s), noncontig(uniq), noncontig(src))), c.at("scatter"));
  check_close(eval(scatter<1>(s, uniq, 2.5)), c.at("scatter_value"));
  check_close(eval(scatter_add<1>(s, dup, src)), c.at("scatter_add"));
  check_close(eval(scatter_add<0>(s, dup0, src0)), c.at("scatter_add0"));
  // float16 adds in float and rounds after each add (as torch's CPU kernel)
  check_close(eval(scatter_add<1>(s.to<float16>(), dup, src.to<float16>())), c.at("scatter_add"), 1e-2, 1e-2);
  check_reduce<scatter_reduction::sum, float>(c, "sum", s, dup, src);
  check_reduce<scatter_reduction::prod, float>(c, "prod", s, dup, src);
  check_reduce<scatter_reduction::mean, float>(c, "mean", s, dup, src);
  check_reduce<scatter_reduction::amax, float>(c, "amax", s, dup, src);
  check_reduce<scatter_reduction::amin, float>(c, "amin", s, dup, src);
  // along dim 0, through a non-contiguous self
  check_close(eval(scatter_reduce<0, scatter_reduction::mean>(noncontig(s), dup0, src0, false)), c.at("mean0_0"));
  check_close(eval(scatter_reduce<0, scatter_reduction::amax>(s, dup0, src0)), c.at("amax0_1"));
  check_close(eval(scatter_reduce<0, scatter_reduction::prod>(s, dup0, src0, false)), c.at("prod0_0"));
  // an empty index leaves self
  check_close(eval(scatter_add<1>(s, zeros<i64, D2>(3, 0), src)), c.at("s"));

  const auto& ci = get_case(kFile, "scatter_int");
  const auto si = mk<i64, D2>(ci, "s");
  const auto srci = mk<i64, D2>(ci, "src");
  check_close(eval(scatter<1>(si, uniq, srci)), ci.at("scatter"));
  check_reduce<scatter_reduction::sum, i64>(ci, "sum", si, dup, srci);
  check_reduce<scatter_reduction::prod, i64>(ci, "prod", si, dup, srci);
  check_reduce<scatter_reduction::mean, i64>(ci, "mean", si, dup, srci);  // floor division, as torch
  check_reduce<scatter_reduction::amax, i64>(ci, "amax", si, dup, srci);
  check_reduce<scatter_reduction::amin, i64>(ci, "amin", si, dup, srci);

  const auto& cd = get_case(kFile, "scatter_f64");
  const auto sd = mk<double, D2>(cd, "s");
  const auto srcd = mk<double, D2>(cd, "src");
  check_close(eval(scatter_add<1>(sd, dup, srcd)), cd.at("add"));
  check_close(eval(scatter_reduce<1, scatter_reduction::mean>(sd, dup, srcd, false)), cd.at("mean"));

  const auto& cn = get_case(kFile, "scatter_nan");
  const auto sn = mk<float, D2>(cn, "s");
  const auto srcn = mk<float, D2>(cn, "src");
  const auto idn = mk<i64, D2>(cn, "idx");
  check_close(eval(scatter_reduce<1, scatter_reduction::amax>(sn, idn, srcn)), cn.at("amax"));
  check_close(eval(scatter_reduce<1, scatter_reduction::amin>(sn, idn, srcn)), cn.at("amin"));
}

TEST_CASE("indexing: threaded gather and scatter_add equal a plain loop") {
  manual_seed(3);
  const i64 n = 300, m = 200, k = 150;
  const auto x = randn<float, D2>(n, m);
  const auto idx = randint<i64, D2>(0, m, n, k);
  const auto src = randn<float, D2>(n, k);
  const Tensor<float, D2> g = gather<1>(x, idx);
  const Tensor<float, D2> s = scatter_add<1>(x, idx, src);
  const Tensor<float, D2> r = scatter<1>(x, idx, src);
  Tensor<float, D2> want_s = x.clone(), want_r = x.clone();
  bool ok = true;
  for (i64 i = 0; i < n; ++i)
    for (i64 j = 0; j < k; ++j) {
      ok = ok && g(i, j) == x(i, idx(i, j));
      want_s(i, idx(i, j)) += src(i, j);
      want_r(i, idx(i, j)) = src(i, j);  // the last along the dim wins
    }
  CHECK(ok);
  for (i64 i = 0; i < n; ++i)
    for (i64 j = 0; j < m; ++j) {
      ok = ok && s(i, j) == want_s(i, j) && r(i, j) == want_r(i, j);
    }
  CHECK(ok);
  // along dim 0 (not the row dim), through a transposed input
  const auto xt = noncontig(x);
  const auto idx0 = randint<i64, D2>(0, n, 250, m);
  const auto src0 = randn<float, D2>(250, m);
  const Tensor<float, D2> g0 = gather<0>(xt, idx0);
  const Tensor<float, D2> s0 = scatter_add<0>(xt, idx0, src0);
  Tensor<float, D2> want_s0 = x.clone();
  for (i64 i = 0; i < 250; ++i)
    for (i64 j = 0; j < m; ++j) {
      ok = ok && g0(i, j) == x(idx0(i, j), j);
      want_s0(idx0(i, j), j) += src0(i, j);
    }
  CHECK(ok);
  for (i64 i = 0; i < n; ++i)
    for (i64 j = 0; j < m; ++j) ok = ok && s0(i, j) == want_s0(i, j);
  CHECK(ok);
  // nonzero and masked_select of 60000 elements: the prefix sum recurses over two levels of blocks
  const auto nz = nonzero(x > 0.5f);
  const auto sel = masked_select(x, x > 0.5f);
  i64 k2 = 0;
  for (i64 i = 0; i < n; ++i)
    for (i64 j = 0; j < m; ++j)
      if (x(i, j) > 0.5f) {
        ok = ok && k2 < nz.sizes()[0] && nz(k2, 0) == i && nz(k2, 1) == j && sel(k2) == x(i, j);
        ++k2;
      }
  CHECK(ok);
  CHECK(nz.sizes()[0] == k2);
  CHECK(sel.numel() == k2);
}

TEST_CASE("indexing: index_select, index_add, index_copy, index_fill against torch") {
  const auto& c = get_case(kFile, "index_ops");
  const auto x = mk<float, D2>(c, "x");
  const auto isel = mk<i64, D1>(c, "isel");
  const auto ia = mk<i64, D1>(c, "ia");
  const auto ic = mk<i64, D1>(c, "ic");
  const auto ifl = mk<i64, D1>(c, "ifl");
  const auto srca1 = mk<float, D2>(c, "srca1");
  check_close(eval(index_select<0>(x, isel)), c.at("sel0"));
  check_close(eval(index_select<1>(noncontig(x), isel)), c.at("sel1"));
  check_close(eval(index_add<1>(x, ia, srca1)), c.at("add1"));
  check_close(eval(index_add<1>(x, ia, noncontig(srca1), -2.5)), c.at("add1_alpha"));
  check_close(eval(index_copy<1>(x, ic, srca1)), c.at("copy1"));
  check_close(eval(index_fill<1>(x, ifl, -7.0)), c.at("fill1"));
  check_close(eval(index_fill<0>(x, ifl, 3.0)), c.at("fill0"));
  // the result keeps x's static extents, the indexed dim takes the index's
  using E = decltype(index_select<1>(std::declval<Tensor<float, shape<4, 5>>>(), std::declval<Tensor<i64, shape<2>>>()));
  STATIC_REQUIRE(std::is_same_v<shape_of<E>, shape<4, 2>>);
  // a 0-dim index selects one slice (kept as a dim of 1, as torch)
  Tensor<i64, shape<>> one(sizes_t<0>{});
  one.fill_(2);
  CHECK(eval(index_select<0>(x, one)).sizes() == sizes_t<2>{1, 5});
  // an empty index
  CHECK(eval(index_select<1>(x, zeros<i64, D1>(0))).sizes() == sizes_t<2>{4, 0});

  const auto& ci = get_case(kFile, "index_ops_int");
  const auto xi = mk<i64, D2>(ci, "x");
  check_close(eval(index_select<1>(xi, isel)), ci.at("sel1"));
  check_close(eval(index_add<1>(xi, ia, mk<i64, D2>(ci, "srca1"), 3)), ci.at("add1_alpha"));
  check_close(eval(index_fill<1>(xi, ifl, 5)), ci.at("fill1"));

  auto bad = isel.clone();
  bad(2) = 5;
  CHECK_THROWS_WITH(eval(index_select<1>(x, bad)), Contains("index 5") && Contains("size 5"));
  CHECK_THROWS_AS(eval(index_add<1>(x, ia, zeros<float, D2>(4, 2))), shape_error);
  CHECK_THROWS_AS(eval(index_copy<1>(x, ia, zeros<float, D2>(3, 3))), shape_error);
  bad(2) = -6;
  // wraps once only; the message names the index given (issue 27 item 8: was "index -1")
  CHECK_THROWS_WITH(eval(index_fill<1>(x, bad, 0.0)), Contains("index_fill: index -6") && Contains("size 5"));
}

TEST_CASE("indexing: masked_fill, masked_select, nonzero, count_nonzero against torch") {
  const auto& c = get_case(kFile, "masks");
  const auto x = mk<float, D2>(c, "x");
  const auto mrow = mk<bool, D2>(c, "mrow");
  const auto mfull = mk<bool, D2>(c, "mfull");
  check_close(eval(masked_fill(x, mrow, -1.5)), c.at("fill_row"));
  check_close(masked_select(noncontig(x), mfull), c.at("select_full"));
  check_close(masked_select(x, mrow), c.at("select_row"));
  check_close(masked_select(x, x > 0.2f), c.at("select_full"));
  const auto xz = mk<float, D3>(c, "xz");
  const auto nz = nonzero(xz);
  STATIC_REQUIRE(std::is_same_v<decltype(nz), const Tensor<i64, shape<dyn, 3>>>);
  check_close(nz, c.at("nonzero"));
  check_close(eval(count_nonzero(xz)), c.at("count_all"));
  check_close(eval(count_nonzero<2>(xz)), c.at("count_2"));
  check_close(eval(count_nonzero<0, 1>(xz)), c.at("count_01"));
  // nothing selected, empty input
  CHECK(masked_select(x, x > 100.0f).numel() == 0);
  CHECK(nonzero(zeros<float, D2>(0, 3)).sizes() == sizes_t<2>{0, 2});
  CHECK(nonzero(x.to<i64>() * i64{0}).sizes() == sizes_t<2>{0, 2});
  // a mask that does not broadcast to x
  CHECK_THROWS_AS(eval(masked_fill(x, zeros<bool, D2>(2, 5), 0.0)), shape_error);
}

TEST_CASE("indexing: take_along_dim, embedding, one_hot against torch") {
  const auto& c = get_case(kFile, "take");
  const auto x = mk<float, D2>(c, "x");
  check_close(eval(take_along_dim<1>(x, mk<i64, D2>(c, "idx"))), c.at("out"));
  check_close(eval(take_along_dim(noncontig(x), mk<i64, D1>(c, "flat_idx"))), c.at("flat"));
  check_close(eval(take_along_dim<1>(x, mk<i64, D2>(c, "srt"))), c.at("sorted"));
  auto far = mk<i64, D1>(c, "flat_idx");
  far(0) = 12;
  CHECK_THROWS_AS(eval(take_along_dim(x, far)), index_error);

  const auto& e = get_case(kFile, "embedding");
  const auto w = mk<float, D2>(e, "w");
  const auto idx = mk<i64, D2>(e, "idx");
  const auto emb = eval(embedding(idx, w, 0));
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(emb)>, shape<dyn, dyn, dyn>>);
  check_close(emb, e.at("out"));
  check_close(eval(embedding(mk<i64, D1>(e, "idx1"), noncontig(w))), e.at("out1"));
  auto bad = idx.clone();
  bad(1, 1) = 10;
  CHECK_THROWS_WITH(eval(embedding(bad, w)), Contains("index 10") && Contains("size 10"));
  CHECK_THROWS_AS(eval(embedding(idx, w, 10)), index_error);
  Tensor<i64, shape<>> one(sizes_t<0>{});
  one.fill_(9);
  CHECK(eval(embedding(one, w)).sizes() == sizes_t<1>{4});

  const auto& o = get_case(kFile, "one_hot");
  const auto oh = mk<i64, D2>(o, "idx");
  check_close(eval(one_hot(oh)), o.at("auto"));
  check_close(eval(one_hot(oh, 6)), o.at("six"));
  CHECK_THROWS_AS(eval(one_hot(oh, 3)), index_error);
  CHECK_THROWS_WITH(eval(one_hot(oh, 3)), Contains("one_hot: class value") && Contains("num_classes 3"));
  auto neg = oh.clone();
  neg(0, 0) = -1;
  CHECK_THROWS_WITH(eval(one_hot(neg)), Contains("non-negative"));
  CHECK_THROWS_AS(eval(one_hot(zeros<i64, D2>(0, 2))), value_error);
  CHECK(eval(one_hot(zeros<i64, D2>(0, 2), 4)).sizes() == sizes_t<3>{0, 2, 4});
}

TEST_CASE("indexing: bincount and histc against torch") {
  const auto& c = get_case(kFile, "bincount");
  const auto x = mk<i64, D1>(c, "x");
  const auto w = mk<float, D1>(c, "w");
  check_close(eval(bincount(x)), c.at("plain"));
  check_close(eval(bincount(x.to<std::int32_t>(), 10)), c.at("min10"));
  const auto bw = eval(bincount(x, w));
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(bw)>, float>);
  check_close(bw, c.at("weighted"));
  const auto bw64 = eval(bincount(x, w.to<double>()));
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(bw64)>, double>);
  check_close(bw64, c.at("weighted64"));
  check_close(eval(bincount(zeros<i64, D1>(0), 3)), c.at("empty"));
  auto neg = x.clone();
  neg(3) = -2;
  CHECK_THROWS_WITH(eval(bincount(neg)), Contains("-2"));
  CHECK_THROWS_AS(eval(bincount(x, zeros<float, D1>(3))), shape_error);

  const auto& h = get_case(kFile, "histc");
  const auto hx = mk<float, D1>(h, "x");
  check_close(histc(hx, 10), h.at("data"));
  check_close(histc(hx, 7, -1.0, 1.0), h.at("range"));
  check_close(histc(mk<double, D1>(h, "x64"), 10), h.at("data64"));
  check_close(histc(mk<float, D1>(h, "const"), 4), h.at("const_out"));
  check_close(histc(zeros<float, D1>(0), 3), h.at("empty"));
  CHECK_THROWS_AS(histc(hx, 0), value_error);
  CHECK_THROWS_AS(histc(hx, 3, 2.0, 1.0), value_error);
}

TEST_CASE("losses: nll_loss and cross_entropy with class-index targets against torch") {
  const auto& c = get_case(kFile, "class_losses");
  const auto logits = mk<float, D2>(c, "logits");
  const auto lp = mk<float, D2>(c, "lp");
  const auto tgt = mk<i64, D1>(c, "tgt");
  const auto w = mk<float, D1>(c, "w");
  check_close(eval(nll_loss<reduction::none>(lp, tgt)), c.at("nll_none"), kRtol, kAtol);
  check_close(eval(nll_loss<reduction::sum>(noncontig(lp), tgt)), c.at("nll_sum"), kRtol, kAtol);
  check_close(eval(nll_loss(lp, tgt)), c.at("nll_mean"), kRtol, kAtol);
  check_close(eval(nll_loss<reduction::none>(lp, tgt, w)), c.at("nllw_none"), kRtol, kAtol);
  check_close(eval(nll_loss<reduction::sum>(lp, tgt, w)), c.at("nllw_sum"), kRtol, kAtol);
  check_close(eval(nll_loss(lp, tgt, w)), c.at("nllw_mean"), kRtol, kAtol);
  check_close(eval(nll_loss(lp, mk<i64, D1>(c, "tgt_c"), 1)), c.at("nll_ign1"), kRtol, kAtol);
  check_close(eval(nll_loss(lp, full<i64, D1>(-100, 5))), c.at("nll_all_ignored"));  // NaN
  STATIC_REQUIRE(detail::holds_only_prims<decompose_t<decltype(nll_loss(lp, tgt, w))>>());
  const std::string ex = explain(nll_loss(log_softmax<1>(logits), tgt));
  CHECK_THAT(ex, Contains("gather<1>") && Contains("indexing"));
  CHECK_THAT(explain(scatter_reduce<1, scatter_reduction::amax>(lp, zeros<i64, D2>(5, 1), lp, false)),
             Contains("scatter_amax<1>[exclude_self]"));

  check_close(cross_entropy<reduction::none>(logits, tgt), c.at("ce_none"), kRtol, kAtol);
  check_close(cross_entropy<reduction::sum>(noncontig(logits), tgt), c.at("ce_sum"), kRtol, kAtol);
  check_close(cross_entropy(logits, tgt), c.at("ce_mean"), kRtol, kAtol);
  check_close(cross_entropy<reduction::none>(logits, tgt, w), c.at("cew_none"), kRtol, kAtol);
  check_close(cross_entropy<reduction::sum>(logits, tgt, w), c.at("cew_sum"), kRtol, kAtol);
  check_close(cross_entropy(logits, tgt, w), c.at("cew_mean"), kRtol, kAtol);
  check_close(cross_entropy<reduction::none>(logits, tgt, -100, 0.2), c.at("ces_none"), kRtol, kAtol);
  check_close(cross_entropy<reduction::sum>(logits, tgt, -100, 0.2), c.at("ces_sum"), kRtol, kAtol);
  check_close(cross_entropy(logits, tgt, -100, 0.2), c.at("ces_mean"), kRtol, kAtol);
  check_close(cross_entropy<reduction::none>(logits, tgt, w, -100, 0.2), c.at("cews_none"), kRtol, kAtol);
  check_close(cross_entropy<reduction::sum>(logits, tgt, w, -100, 0.2), c.at("cews_sum"), kRtol, kAtol);
  check_close(cross_entropy(logits, tgt, w, -100, 0.2), c.at("cews_mean"), kRtol, kAtol);

  auto bad = tgt.clone();
  bad(0) = 4;
  // the op, the target and the class count (issue 27 item 8: was "gather: index 4 ...")
  CHECK_THROWS_WITH(eval(nll_loss(lp, bad)), Contains("nll_loss: target 4") && Contains("4 classes"));
  CHECK_THROWS_AS(cross_entropy(logits, bad), index_error);
  bad(0) = -2;
  CHECK_THROWS_WITH(cross_entropy(logits, bad), Contains("cross_entropy: target -2") && Contains("4 classes"));
  CHECK_THROWS_AS(eval(nll_loss(lp, zeros<i64, D1>(4))), shape_error);
  CHECK_THROWS_AS(eval(nll_loss(lp, tgt, zeros<float, D1>(3))), shape_error);
  CHECK_THROWS_AS(cross_entropy(logits, tgt, -100, 1.5), value_error);
}

TEST_CASE("losses: cross_entropy with probability targets, N-d inputs and unbatched input against torch") {
  const auto& c = get_case(kFile, "prob_losses");
  const auto logits = mk<float, D2>(c, "logits");
  const auto probs = mk<float, D2>(c, "probs");
  const auto w = mk<float, D1>(c, "w");
  check_close(cross_entropy<reduction::none>(logits, probs), c.at("ce_none"), kRtol, kAtol);
  check_close(cross_entropy<reduction::sum>(logits, noncontig(probs)), c.at("ce_sum"), kRtol, kAtol);
  check_close(cross_entropy(logits, probs), c.at("ce_mean"), kRtol, kAtol);
  check_close(cross_entropy<reduction::none>(logits, probs, w, -100, 0.1), c.at("cews_none"), kRtol, kAtol);
  check_close(cross_entropy<reduction::sum>(logits, probs, w, -100, 0.1), c.at("cews_sum"), kRtol, kAtol);
  check_close(cross_entropy(logits, probs, w, -100, 0.1), c.at("cews_mean"), kRtol, kAtol);
  CHECK_THROWS_AS(cross_entropy(logits, probs, 0), value_error);  // ignore_index is for class indices

  const auto& n = get_case(kFile, "nd_losses");
  const auto lnd = mk<float, D3>(n, "logits");
  const auto tnd = mk<i64, D2>(n, "tgt");
  const auto wn = mk<float, D1>(n, "w");
  check_close(eval(nll_loss<reduction::none>(log_softmax<1>(lnd), tnd)), n.at("nll_none"), kRtol, kAtol);
  check_close(eval(nll_loss(log_softmax<1>(lnd), tnd, wn)), n.at("nllw_mean"), kRtol, kAtol);
  check_close(cross_entropy(lnd, tnd), n.at("ce_mean"), kRtol, kAtol);
  check_close(cross_entropy<reduction::none>(lnd, tnd, -100, 0.3), n.at("ces_none"), kRtol, kAtol);
  const auto l1 = mk<float, D1>(n, "l1");
  const auto t1 = mk<i64, shape<>>(n, "t1");
  const auto u = cross_entropy(l1, t1);
  STATIC_REQUIRE(rank_of<decltype(u)> == 0);
  check_close(u, n.at("ce_unbatched"), kRtol, kAtol);
  check_close(cross_entropy(l1.to<double>(), t1), n.at("ce_unbatched64"));
}
