// Views: reshape, view, permute, transpose, t, slice, narrow, select, expand, squeeze, unsqueeze,
// flatten, contiguous. Each view is checked element by element against its index map, and for
// storage sharing (writing through the view changes the source).
#include <catch2/catch.hpp>

#include <cstdint>
#include <type_traits>

#include <tenet/tenet.hpp>

using namespace tenet;

namespace {

/// A contiguous tensor of shape S holding 0, 1, 2, ... in row-major order.
template <class S>
Tensor<float, S> iota() {
  sizes_t<S::rank> s{};
  for (std::size_t i = 0; i < S::rank; ++i) s[i] = S::info[i].value;
  Tensor<float, S> t(s);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(i);
  return t;
}

/// True when X is Tensor<T, S2> with S2 having the same extents as S (compared by value: shape<6L, 4>
/// and shape<6, 4> are distinct C++ types but the same tenet shape).
template <class X, class T, class S>
constexpr bool is_tensor = [] {
  if constexpr (!std::is_same_v<typename X::value_type, T> || X::shape_type::rank != S::rank) {
    return false;
  } else {
    for (std::size_t i = 0; i < S::rank; ++i) {
      const auto &a = X::shape_type::info[i], &b = S::info[i];
      if (a.kind != b.kind || a.value != b.value || a.name != b.name) return false;
    }
    return true;
  }
}();

// x(i, j, k) == 12 i + 4 j + k for x = iota<shape<2, 3, 4>>()
float at3(std::int64_t i, std::int64_t j, std::int64_t k) { return static_cast<float>(12 * i + 4 * j + k); }

}  // namespace

TEST_CASE("reshape: static, -1 and dyn targets share storage of a contiguous source", "[views]") {
  auto x = iota<shape<2, 3, 4>>();

  auto a = x.reshape<6, 4>();
  STATIC_REQUIRE(is_tensor<decltype(a), float, shape<6, 4>>);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) CHECK(a(i, j) == static_cast<float>(4 * i + j));
  CHECK(a.shares_storage(x));
  CHECK(a.data() == x.data());

  auto b = x.reshape<-1, 4>();  // -1 inferred statically: 6
  STATIC_REQUIRE(is_tensor<decltype(b), float, shape<6, 4>>);
  CHECK(b.sizes() == sizes_t<2>{6, 4});

  auto c = x.reshape<dyn, -1>(3);  // -1 next to a run-time extent is run-time: 8
  STATIC_REQUIRE(is_tensor<decltype(c), float, shape<dyn, dyn>>);
  REQUIRE(c.sizes() == sizes_t<2>{3, 8});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 8; ++j) CHECK(c(i, j) == static_cast<float>(8 * i + j));

  auto d = x.reshape<24>();
  for (int i = 0; i < 24; ++i) CHECK(d(i) == static_cast<float>(i));

  // writing through the view writes the source
  a(5, 3) = -1.f;
  CHECK(x(1, 2, 3) == -1.f);
  c(1, 0) = -2.f;  // flat 8 = (0, 2, 0)
  CHECK(x(0, 2, 0) == -2.f);

  // a dyn source: run-time mismatch is a shape_error
  auto r = arange<float>(12);
  auto r34 = r.reshape<3, 4>();
  CHECK(r34(2, 1) == 9.f);
  CHECK(r34.shares_storage(r));
  CHECK_THROWS_AS((r.reshape<5, dyn>(2)), shape_error);
  CHECK_THROWS_AS((r.reshape<5, -1>()), shape_error);
}

TEST_CASE("reshape of a non-contiguous source copies; view() throws value_error", "[views]") {
  auto x = iota<shape<6, 4>>();
  auto xt = x.t();  // shape<4, 6>, strides {1, 4}
  REQUIRE_FALSE(xt.is_contiguous());

  auto r = xt.reshape<24>();
  CHECK_FALSE(r.shares_storage(x));
  CHECK(r.is_contiguous());
  for (int k = 0; k < 24; ++k) CHECK(r(k) == xt(k / 6, k % 6));
  // the copy is independent of the source
  r(0) = 100.f;
  CHECK(x(0, 0) == 0.f);

  auto r2 = xt.reshape<2, -1>();
  REQUIRE(r2.sizes() == sizes_t<2>{2, 12});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 12; ++j) CHECK(r2(i, j) == xt((12 * i + j) / 6, (12 * i + j) % 6));

  CHECK_THROWS_AS(xt.view<24>(), value_error);

  // view() of a contiguous tensor shares
  auto v = x.view<3, 8>();
  CHECK(v.shares_storage(x));
  v(2, 7) = 7.f;
  CHECK(x(5, 3) == 7.f);
}

TEST_CASE("permute", "[views]") {
  auto x = iota<shape<2, 3, 4>>();
  auto p = x.permute<2, 0, 1>();
  STATIC_REQUIRE(is_tensor<decltype(p), float, shape<4, 2, 3>>);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c) CHECK(p(a, b, c) == at3(b, c, a));
  CHECK(p.strides() == sizes_t<3>{1, 12, 4});
  CHECK(p.shares_storage(x));
  p(3, 1, 2) = -5.f;
  CHECK(x(1, 2, 3) == -5.f);

  auto q = x.permute<-1, 1, 0>();  // negative dims count from the end
  STATIC_REQUIRE(is_tensor<decltype(q), float, shape<4, 3, 2>>);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) CHECK(q(a, b, c) == x(c, b, a));
}

TEST_CASE("transpose with static and run-time dims, t(), mT()", "[views]") {
  auto x = iota<shape<2, 3, 4>>();

  auto s = x.transpose<0, 2>();
  STATIC_REQUIRE(is_tensor<decltype(s), float, shape<4, 3, 2>>);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) CHECK(s(a, b, c) == at3(c, b, a));
  CHECK(s.shares_storage(x));

  auto r = x.transpose(0, -1);  // run-time dims: the extents could move, so the shape becomes dyn
  STATIC_REQUIRE(is_tensor<decltype(r), float, dyn_shape<3>>);
  REQUIRE(r.sizes() == sizes_t<3>{4, 3, 2});
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) CHECK(r(a, b, c) == at3(c, b, a));
  r(3, 2, 1) = 42.f;
  CHECK(x(1, 2, 3) == 42.f);
  CHECK_THROWS_AS(x.transpose(0, 3), index_error);

  auto sq = iota<shape<3, 3>>();
  auto rs = sq.transpose(0, 1);  // all extents equal: the static shape is kept
  STATIC_REQUIRE(is_tensor<decltype(rs), float, shape<3, 3>>);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) CHECK(rs(i, j) == sq(j, i));

  auto m = iota<shape<2, 5>>();
  auto mt = m.t();
  STATIC_REQUIRE(is_tensor<decltype(mt), float, shape<5, 2>>);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 2; ++j) CHECK(mt(i, j) == static_cast<float>(5 * j + i));
  CHECK(mt.shares_storage(m));

  auto v = iota<shape<5>>();
  auto vt = v.t();  // rank 1: unchanged
  STATIC_REQUIRE(is_tensor<decltype(vt), float, shape<5>>);
  CHECK(vt.data() == v.data());

  auto b = x.mT();
  STATIC_REQUIRE(is_tensor<decltype(b), float, shape<2, 4, 3>>);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) CHECK(b(i, j, k) == x(i, k, j));
}

TEST_CASE("slice with step and negative start, narrow", "[views]") {
  auto x = iota<shape<2, 3, 4>>();

  auto s = x.slice<2>(0, 4, 2);  // k = 0, 2
  REQUIRE(s.sizes() == sizes_t<3>{2, 3, 2});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) CHECK(s(i, j, k) == at3(i, j, 2 * k));
  CHECK(s.stride(2) == 2);
  CHECK(s.shares_storage(x));
  s(1, 2, 1) = -3.f;
  CHECK(x(1, 2, 2) == -3.f);

  auto n = x.slice<2>(-3, 4);  // k = 1, 2, 3
  REQUIRE(n.sizes() == sizes_t<3>{2, 3, 3});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) CHECK(n(i, j, k) == x(i, j, k + 1));

  auto e = x.slice<1>(1, 100, 2);  // end clamped: j = 1 only
  REQUIRE(e.sizes() == sizes_t<3>{2, 1, 4});
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) CHECK(e(i, 0, k) == x(i, 1, k));

  auto st = x.slice<-1>(1, 4, 3);  // k = 1 only
  REQUIRE(st.sizes() == sizes_t<3>{2, 3, 1});
  CHECK(st(1, 1, 0) == at3(1, 1, 1));

  auto empty = x.slice<0>(2, 2);
  CHECK(empty.numel() == 0);

  auto nr = x.narrow<1>(1, 2);  // j = 1, 2
  REQUIRE(nr.sizes() == sizes_t<3>{2, 2, 4});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 4; ++k) CHECK(nr(i, j, k) == x(i, j + 1, k));
  nr(0, 0, 0) = 99.f;
  CHECK(x(0, 1, 0) == 99.f);

  auto nn = x.narrow<2>(-2, 2);  // k = 2, 3
  CHECK(nn(0, 0, 0) == x(0, 0, 2));
  CHECK(nn(1, 2, 1) == x(1, 2, 3));

  CHECK_THROWS_AS(x.narrow<1>(2, 2), index_error);
  CHECK_THROWS_AS(x.narrow<1>(0, 4), index_error);
  CHECK_THROWS_AS(x.narrow<1>(-4, 1), index_error);
  CHECK_THROWS_AS(x.slice<1>(0, 3, 0), value_error);
}

TEST_CASE("select", "[views]") {
  auto x = iota<shape<2, 3, 4>>();
  auto s = x.select<1>(2);
  STATIC_REQUIRE(is_tensor<decltype(s), float, shape<2, 4>>);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) CHECK(s(i, k) == at3(i, 2, k));
  s(1, 3) = -7.f;
  CHECK(x(1, 2, 3) == -7.f);

  auto neg = x.select<0>(-1);
  STATIC_REQUIRE(is_tensor<decltype(neg), float, shape<3, 4>>);
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 4; ++k) CHECK(neg(j, k) == x(1, j, k));
  CHECK(neg.shares_storage(x));

  auto scalar = x.select<0>(1).select<0>(2).select<0>(3);
  STATIC_REQUIRE(decltype(scalar)::rank == 0);
  CHECK(scalar.item() == -7.f);

  CHECK_THROWS_AS(x.select<1>(3), index_error);
  CHECK_THROWS_AS(x.select<1>(-4), index_error);
}

TEST_CASE("expand has stride 0 and shares storage", "[views]") {
  auto col = iota<shape<3, 1>>();  // 0, 1, 2
  auto e = col.expand<-1, 4>();
  STATIC_REQUIRE(is_tensor<decltype(e), float, shape<3, 4>>);
  CHECK(e.strides()[1] == 0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(e(i, j) == static_cast<float>(i));
  CHECK(e.shares_storage(col));
  col(1, 0) = 10.f;  // every element of row 1 of the expanded view reads it
  for (int j = 0; j < 4; ++j) CHECK(e(1, j) == 10.f);

  auto lead = col.expand<2, -1, 5>();  // a new leading dim, stride 0
  STATIC_REQUIRE(is_tensor<decltype(lead), float, shape<2, 3, 5>>);
  CHECK(lead.strides() == sizes_t<3>{0, 1, 0});
  for (int a = 0; a < 2; ++a)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j) CHECK(lead(a, i, j) == col(i, 0));

  auto d = col.expand<dyn, -1, dyn>(2, 6);
  REQUIRE(d.sizes() == sizes_t<3>{2, 3, 6});
  CHECK(d(1, 2, 5) == col(2, 0));

  auto row = iota<shape<4>>();
  auto m = iota<shape<3, 4>>();
  auto ea = row.expand_as(m);
  REQUIRE(ea.sizes() == sizes_t<2>{3, 4});
  CHECK(ea.strides() == sizes_t<2>{0, 1});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(ea(i, j) == static_cast<float>(j));

  auto dcol = Tensor<float, shape<dyn, dyn>>(col);
  CHECK_NOTHROW((dcol.expand<dyn, dyn>(3, 4)));
  CHECK_THROWS_AS((dcol.expand<dyn, dyn>(2, 4)), shape_error);
}

TEST_CASE("squeeze and unsqueeze", "[views]") {
  auto x = iota<shape<3, 4>>();

  auto u0 = x.unsqueeze<0>();
  STATIC_REQUIRE(is_tensor<decltype(u0), float, shape<1, 3, 4>>);
  auto u1 = x.unsqueeze<1>();
  STATIC_REQUIRE(is_tensor<decltype(u1), float, shape<3, 1, 4>>);
  auto ul = x.unsqueeze<-1>();
  STATIC_REQUIRE(is_tensor<decltype(ul), float, shape<3, 4, 1>>);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      CHECK(u0(0, i, j) == x(i, j));
      CHECK(u1(i, 0, j) == x(i, j));
      CHECK(ul(i, j, 0) == x(i, j));
    }
  CHECK(u1.shares_storage(x));
  CHECK(u1.is_contiguous());
  u1(2, 0, 3) = -1.f;
  CHECK(x(2, 3) == -1.f);

  auto s0 = u0.squeeze<0>();
  STATIC_REQUIRE(is_tensor<decltype(s0), float, shape<3, 4>>);
  auto keep = x.squeeze<0>();  // extent 3: left alone, as torch
  STATIC_REQUIRE(is_tensor<decltype(keep), float, shape<3, 4>>);
  CHECK(keep.data() == x.data());

  auto y = iota<shape<1, 3, 1, 4, 1>>();
  auto all = y.squeeze();
  STATIC_REQUIRE(is_tensor<decltype(all), float, shape<3, 4>>);
  auto mid = y.squeeze<2>();
  STATIC_REQUIRE(is_tensor<decltype(mid), float, shape<1, 3, 4, 1>>);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      CHECK(s0(i, j) == x(i, j));
      CHECK(all(i, j) == static_cast<float>(4 * i + j));
      CHECK(mid(0, i, j, 0) == static_cast<float>(4 * i + j));
    }
  all(1, 1) = 55.f;
  CHECK(y(0, 1, 0, 1, 0) == 55.f);
}

TEST_CASE("flatten", "[views]") {
  auto x = iota<shape<2, 3, 4>>();

  auto f = x.flatten();
  STATIC_REQUIRE(is_tensor<decltype(f), float, shape<24>>);
  for (int i = 0; i < 24; ++i) CHECK(f(i) == static_cast<float>(i));
  CHECK(f.shares_storage(x));

  auto f12 = x.flatten<1, 2>();
  STATIC_REQUIRE(is_tensor<decltype(f12), float, shape<2, 12>>);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 12; ++j) CHECK(f12(i, j) == at3(i, j / 4, j % 4));
  f12(1, 11) = -9.f;
  CHECK(x(1, 2, 3) == -9.f);

  auto f01 = x.flatten<0, 1>();
  STATIC_REQUIRE(is_tensor<decltype(f01), float, shape<6, 4>>);
  CHECK(f01(5, 2) == x(1, 2, 2));

  // flattening a permuted tensor copies
  auto p = x.transpose<0, 2>();  // shape<4, 3, 2>
  auto pf = p.flatten();
  CHECK_FALSE(pf.shares_storage(x));
  for (int k = 0; k < 24; ++k) CHECK(pf(k) == p(k / 6, (k / 2) % 3, k % 2));

  auto d = Tensor<float, dyn_shape<3>>(x).flatten<1>();
  STATIC_REQUIRE(is_tensor<decltype(d), float, shape<dyn, dyn>>);
  REQUIRE(d.sizes() == sizes_t<2>{2, 12});
}

TEST_CASE("contiguous copies a transposed view and returns a contiguous tensor itself", "[views]") {
  auto x = iota<shape<3, 4>>();
  auto same = x.contiguous();
  CHECK(same.data() == x.data());
  CHECK(same.shares_storage(x));

  auto xt = x.t();
  auto c = xt.contiguous();
  STATIC_REQUIRE(is_tensor<decltype(c), float, shape<4, 3>>);
  CHECK(c.is_contiguous());
  CHECK_FALSE(c.shares_storage(x));
  CHECK(c.strides() == sizes_t<2>{3, 1});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(c(i, j) == x(j, i));
  c(0, 1) = 77.f;
  CHECK(x(1, 0) == 4.f);

  // a sliced (offset, strided) view: contiguous copies just the viewed elements
  auto s = x.slice<1>(1, 4, 2);  // columns 1, 3
  auto sc = s.contiguous();
  REQUIRE(sc.sizes() == sizes_t<2>{3, 2});
  CHECK(sc.is_contiguous());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) CHECK(sc(i, j) == x(i, 1 + 2 * j));

  auto cl = x.clone();
  CHECK_FALSE(cl.shares_storage(x));
  CHECK(cl(2, 3) == x(2, 3));
}

TEST_CASE("views: free-function forms view tensors and evaluate expressions first", "[views]") {
  using namespace tenet;
  auto a = arange<float>(6).reshape<2, 3>();
  auto t = transpose<0, 1>(a + a);  // an expression: evaluated, then viewed
  STATIC_REQUIRE(std::is_same_v<decltype(t), Tensor<float, shape<3, 2>>>);
  CHECK(t(2, 1) == 10.0f);
  CHECK_FALSE(t.shares_storage(a));
  auto v = transpose<0, 1>(a);  // a tensor: a view, no copy
  CHECK(v.shares_storage(a));
  CHECK(v(2, 1) == 5.0f);
  CHECK(reshape<3, 2>(a * 2.0f)(2, 1) == 10.0f);
  CHECK(flatten(a + 1.0f)(5) == 6.0f);
  CHECK(unsqueeze<0>(a)(0, 1, 2) == 5.0f);
  CHECK(slice<1>(a + 0.0f, 0, 3, 2)(1, 1) == 5.0f);
  CHECK(permute<1, 0>(a)(2, 1) == 5.0f);
  CHECK(narrow<0>(a, 1, 1)(0, 0) == 3.0f);
  CHECK(squeeze<0>(unsqueeze<0>(a))(1, 1) == 4.0f);
  CHECK(expand<2, 2, 3>(a)(1, 1, 2) == 5.0f);
  CHECK(transpose(a, 0, 1)(2, 1) == 5.0f);
  CHECK(select<1>(a * 3.0f, 2)(1) == 15.0f);
}

TEST_CASE("views: unsqueeze of a 0-dim tensor gives [1]") {
  Tensor<float, shape<>> s(sizes_t<0>{});
  s.fill_(2.5f);
  const auto u = s.unsqueeze<0>();
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(u)>, shape<1>>);
  CHECK(u.sizes()[0] == 1);
  CHECK(u(0) == 2.5f);
  CHECK(u.shares_storage(s));
  const auto v = s.unsqueeze<-1>();
  CHECK(v.sizes()[0] == 1);
}

// Issue 27 item 1: a size whose element count or byte count overflows is a tenet error naming the
// sizes, never an allocation of the wrapped size (the product 2^62 x 4 bytes wraps to 0 in 64 bits).
TEST_CASE("sizes that overflow: factories and views raise, never allocate a wrapped size") {
  constexpr std::int64_t big = std::int64_t{1} << 62, max = INT64_MAX;
  auto message_of = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const tenet::error& e) {
      return e.what();
    }
    return "";
  };
  // elements x item size beyond 2^63 - 1 bytes (torch: "Storage size calculation overflowed")
  CHECK_THROWS_AS((zeros<float, shape<dyn>>(big)), shape_error);
  CHECK(message_of([&] { (void)zeros<float, shape<dyn>>(big); }).find("4611686018427387904") != std::string::npos);
  CHECK_THROWS_AS((zeros<double, shape<dyn>>(std::int64_t{1} << 61)), shape_error);
  CHECK_THROWS_AS((empty<float, shape<dyn>>(std::int64_t{1} << 61)), shape_error);  // exactly 2^63 bytes
  CHECK_THROWS_AS((randn<float, shape<dyn>>(big)), shape_error);
  CHECK_THROWS_AS((rand<double, shape<dyn, dyn>>(big, 2)), shape_error);
  CHECK_THROWS_AS((randint<std::int64_t, shape<dyn>>(0, 5, big)), shape_error);
  CHECK_THROWS_AS(arange<float>(0, static_cast<double>(big)), shape_error);
  CHECK_THROWS_AS(linspace<float>(0, 1, big), shape_error);
  CHECK_THROWS_AS(eval(tenet::iota<float>(big)), shape_error);
  // the element count itself overflows int64 (signed overflow before)
  CHECK_THROWS_AS((zeros<float, shape<dyn, dyn>>(std::int64_t{1} << 32, std::int64_t{1} << 32)), shape_error);
  CHECK_THROWS_AS((zeros<float, shape<dyn, dyn, dyn>>(0, big, 4)), shape_error);  // as torch: the strides overflow
  CHECK_THROWS_AS(eye<float>(big, big), shape_error);
  // arange's count beyond int64, or a range that is not finite (torch: "unsupported range")
  CHECK_THROWS_AS(arange<float>(0, 1e300), value_error);
  CHECK_THROWS_AS(arange<float>(0, std::nan("")), value_error);
  CHECK_THROWS_AS(arange<float>(0, INFINITY), value_error);
  // a huge but representable size: the allocation fails cleanly, a tenet error naming the bytes
  CHECK_THROWS_WITH((empty<float, shape<dyn>>(std::int64_t{1} << 60)),
                    Catch::Contains("out of memory allocating 4611686018427387904 bytes on cpu"));
  CHECK_THROWS_AS((empty<float, shape<dyn>>(std::int64_t{1} << 60)), device_error);

  auto x = zeros<float, shape<dyn>>(10);
  auto e = zeros<float, shape<dyn>>(0);
  CHECK_THROWS_AS((e.reshape<dyn, dyn>(big, 4)), shape_error);
  CHECK_THROWS_AS((e.reshape<dyn, dyn, dyn>(0, big, 4)), shape_error);
  CHECK_THROWS_AS((x.reshape<dyn, dyn, -1>(big, 4)), shape_error);
  CHECK_THROWS_AS(x.narrow<0>(1, max), index_error);
  CHECK_THROWS_AS(x.narrow<0>(max, 1), index_error);
  CHECK(x.slice<0>(0, 10, max).sizes()[0] == 1);  // torch's x[0:10:2**63-1] has 1 element
  CHECK(x.slice<0>(3, max, max).sizes()[0] == 1);
  CHECK(x.slice<0>(5, 5, max).sizes()[0] == 0);
  CHECK(x.slice<0>(0, 10, 3).sizes()[0] == 4);
  auto parts = chunk<0>(x, max);  // ceil(10 / (2^63 - 1)) = 1 element per chunk
  REQUIRE(parts.size() == 10);
  CHECK(parts[9].sizes()[0] == 1);
  auto halves = split<0>(x, max);
  REQUIRE(halves.size() == 1);
  CHECK(halves[0].sizes()[0] == 10);
  CHECK(split<0>(x, 3).back().sizes()[0] == 1);
  CHECK_THROWS_AS((zeros<float, shape<1>>().expand<dyn, dyn>(big, big)), shape_error);
  const auto one = zeros<float, shape<1>>();
  CHECK_THROWS_AS(cat<0>(std::vector{one.expand<dyn>(max), one.expand<dyn>(2)}), shape_error);
  CHECK_THROWS_AS(cat<0>(one.expand<dyn>(max), one.expand<dyn>(2)), shape_error);
  // repeated extents and repeat counts that add up past int64 (the positions were written past a wrapped size)
  CHECK_THROWS_AS(repeat(x, max), shape_error);
  CHECK_THROWS_AS(tile(x, big, 4), shape_error);
  CHECK_THROWS_AS(repeat_interleave<0>(x, max), shape_error);
  CHECK_THROWS_AS(repeat_interleave(tensor<std::int64_t>({max, max})), shape_error);
  // torch: "maximum value of input overflowed"
  CHECK_THROWS_AS(bincount(tensor<std::int64_t>({max})), value_error);
  CHECK_THROWS_AS(histc(x, max), value_error);
}
