// Tensor basics: factories (values as PyTorch's), random factories, element access and its errors,
// run-time shape checks, in-place ops (incl. aliasing), sym<"T"> extents, printing.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <tenet/tenet.hpp>

using namespace tenet;
using Catch::Matchers::Contains;

TEST_CASE("zeros, ones, full with static and run-time extents", "[tensor][factories]") {
  auto z = zeros<float, shape<2, 3>>();
  auto o = ones<std::int32_t, shape<dyn, 4>>(3);
  auto f = full<double, shape<2, dyn>>(2.5, 5);
  REQUIRE(z.sizes() == sizes_t<2>{2, 3});
  REQUIRE(o.sizes() == sizes_t<2>{3, 4});
  REQUIRE(f.sizes() == sizes_t<2>{2, 5});
  CHECK(z.is_contiguous());
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(z(i, j) == 0.f);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(o(i, j) == 1);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j) CHECK(f(i, j) == 2.5);
  CHECK_THROWS_AS((zeros<float, shape<dyn>>(-1)), shape_error);
  auto e = zeros<float, shape<0, 3>>();
  CHECK(e.numel() == 0);
}

TEST_CASE("arange, linspace, eye give PyTorch's values", "[tensor][factories]") {
  auto a = arange<std::int64_t>(5);
  REQUIRE(a.numel() == 5);
  for (int i = 0; i < 5; ++i) CHECK(a(i) == i);

  // torch.arange(0, 1, 0.1): 10 values (not 11), float32
  auto b = arange<float>(0, 1, 0.1);
  REQUIRE(b.numel() == 10);
  const std::vector<float> want_b{0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f};
  for (int i = 0; i < 10; ++i) CHECK(b(i) == want_b[static_cast<std::size_t>(i)]);

  auto c = arange<std::int64_t>(10, 0, -3);  // 10, 7, 4, 1
  REQUIRE(c.numel() == 4);
  CHECK(c(3) == 1);
  CHECK_THROWS_AS(arange<float>(0, 1, 0), value_error);
  CHECK_THROWS_AS(arange<float>(0, 1, -1), value_error);

  // torch.linspace(0, 1, 5)
  auto l = linspace<float>(0, 1, 5);
  REQUIRE(l.numel() == 5);
  const std::vector<float> want_l{0.f, 0.25f, 0.5f, 0.75f, 1.f};
  for (int i = 0; i < 5; ++i) CHECK(l(i) == want_l[static_cast<std::size_t>(i)]);
  auto l1 = linspace<double>(-2, 3, 1);  // steps = 1: just start
  REQUIRE(l1.numel() == 1);
  CHECK(l1(0) == -2.0);

  // torch.eye(3, 4)
  auto e = eye<float>(3, 4);
  REQUIRE(e.sizes() == sizes_t<2>{3, 4});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(e(i, j) == (i == j ? 1.f : 0.f));
  // torch.eye(3, -5) and torch.eye(-1) raise (issue 27 item 6: eye(3, -5) gave a 3 x 3 identity)
  CHECK_THROWS_AS(eye<float>(3, -5), value_error);
  CHECK_THROWS_AS(eye<float>(-1), value_error);
  CHECK(eye<float>(2).sizes() == sizes_t<2>{2, 2});
  // torch.arange(0, nan): "unsupported range: 0 -> nan" (was a negative extent in a shape)
  CHECK_THROWS_WITH(arange<float>(0, std::nan("")), Contains("unsupported range: 0 -> nan"));
  CHECK_THROWS_AS(arange<float>(-std::numeric_limits<double>::infinity(), 0), value_error);
  auto es = eye<double, 3>();
  // shape<3L, 3L>: same extents as shape<3, 3> (a different C++ type, as the NTTPs are int64_t)
  STATIC_REQUIRE(std::is_same_v<decltype(es)::value_type, double>);
  STATIC_REQUIRE(decltype(es)::shape_type::is_static && decltype(es)::shape_type::static_extent(0) == 3 &&
                 decltype(es)::shape_type::static_extent(1) == 3);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) CHECK(es(i, j) == (i == j ? 1.0 : 0.0));
}

TEST_CASE("rand, randn, randint are reproducible after manual_seed", "[tensor][random]") {
  manual_seed(1234);
  auto r1 = rand<float, shape<1000>>();
  auto n1 = randn<double, shape<dyn, 7>>(11);
  manual_seed(1234);
  auto r2 = rand<float, shape<1000>>();
  auto n2 = randn<double, shape<dyn, 7>>(11);
  bool same_r = true, in_range = true, same_n = true;
  for (int i = 0; i < 1000; ++i) {
    same_r = same_r && r1(i) == r2(i);
    in_range = in_range && r1(i) >= 0.f && r1(i) < 1.f;
  }
  for (int i = 0; i < 11; ++i)
    for (int j = 0; j < 7; ++j) same_n = same_n && n1(i, j) == n2(i, j);
  CHECK(same_r);
  CHECK(same_n);
  CHECK(in_range);
  // the generator advances: the next draw differs
  auto r3 = rand<float, shape<1000>>();
  int equal = 0;
  for (int i = 0; i < 1000; ++i) equal += r3(i) == r1(i);
  CHECK(equal < 10);

  manual_seed(0);
  constexpr std::int64_t n = 100000;
  auto g = randn<float, shape<dyn>>(n);
  double sum = 0, sq = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += g(i);
  const double mean = sum / n;
  for (std::int64_t i = 0; i < n; ++i) sq += (g(i) - mean) * (g(i) - mean);
  const double sd = std::sqrt(sq / (n - 1));
  CHECK(std::abs(mean) < 0.02);
  CHECK(std::abs(sd - 1.0) < 0.02);

  auto u = rand<double, shape<dyn>>(n);
  double us = 0;
  for (std::int64_t i = 0; i < n; ++i) us += u(i);
  CHECK(std::abs(us / n - 0.5) < 0.01);

  auto ri = randint<std::int64_t, shape<dyn>>(-3, 5, 10000);
  std::int64_t lo = 100, hi = -100;
  for (std::int64_t i = 0; i < 10000; ++i) lo = std::min(lo, ri(i)), hi = std::max(hi, ri(i));
  CHECK(lo == -3);
  CHECK(hi == 4);
  auto ri8 = randint<std::int8_t, shape<2, 500>>(0, 2);
  bool bits = true;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 500; ++j) bits = bits && (ri8(i, j) == 0 || ri8(i, j) == 1);
  CHECK(bits);
}

TEST_CASE("element access checks indices; item() needs one element", "[tensor]") {
  auto x = arange<float>(6).reshape<2, 3>();
  CHECK(x(1, 2) == 5.f);
  CHECK(x(-1, -1) == 5.f);  // negative indices count from the end
  CHECK_THROWS_AS(x(0, 3), index_error);
  CHECK_THROWS_WITH(x(0, 3), Contains("index 3") && Contains("size 3"));
  CHECK_THROWS_WITH(x(2, 0), Contains("index 2") && Contains("size 2"));
  CHECK_THROWS_AS(x(0, -4), index_error);
  CHECK_THROWS_AS(x(0, 3), tenet::error);

  CHECK_THROWS_AS(x.item(), value_error);
  CHECK_THROWS_WITH(x.item(), Contains("6"));
  auto one = full<double, shape<1, 1>>(3.5);
  CHECK(one.item() == 3.5);
  CHECK(x.select<0>(1).select<0>(0).item() == 3.f);
}

TEST_CASE("an expression reading an undefined (default-constructed) tensor raises", "[tensor]") {
  // issue 27 item 6: it was read as an empty tensor (u + 1 gave [0], matmul(u, zeros(0, 3)) a [3])
  Tensor<float, shape<dyn>> u;
  CHECK_FALSE(u.defined());
  CHECK_THROWS_WITH(eval(u + 1.f), Contains("undefined tensor") && Contains("default-constructed"));
  CHECK_THROWS_AS(eval(matmul(u, zeros<float, shape<dyn, dyn>>(0, 3))), value_error);
  u = arange<float>(3) * 2.f;  // assigning to it still works
  CHECK(u.defined());
  CHECK(u(2) == 4.f);
  Tensor<float, shape<dyn>> e = zeros<float, shape<dyn>>(0);  // an empty tensor is defined
  CHECK(eval(e + 1.f).numel() == 0);
}

TEST_CASE("run-time extents are checked against static ones", "[tensor][shape]") {
  CHECK_THROWS_AS((Tensor<float, shape<dyn, 4>>(sizes_t<2>{3, 5})), shape_error);
  CHECK_NOTHROW((Tensor<float, shape<dyn, 4>>(sizes_t<2>{3, 4})));
  auto d = zeros<float, shape<dyn, dyn>>(3, 5);
  CHECK_THROWS_AS((Tensor<float, shape<dyn, 4>>(d)), shape_error);
  CHECK_THROWS_AS((Tensor<float, shape<3, 4>>(d)), shape_error);
  Tensor<float, shape<3, 5>> ok = d;  // a view: same storage
  CHECK(ok.shares_storage(d));
  // adding run-time shapes that cannot broadcast
  auto e = zeros<float, shape<dyn, dyn>>(4, 5);
  CHECK_THROWS_AS(([&] { Tensor<float, shape<dyn, dyn>> r = d + e; }()), shape_error);
}

TEST_CASE("in-place: fill_, zero_, copy_ with broadcasting, +=, add_ on a view", "[tensor][inplace]") {
  auto x = zeros<float, shape<2, 3>>();
  x.fill_(1.5f);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(x(i, j) == 1.5f);

  auto row = arange<float>(3);  // 0 1 2, broadcast over the rows
  x.copy_(row);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(x(i, j) == static_cast<float>(j));
  auto col = arange<float>(2).reshape<2, 1>();
  x.copy_(col * 10.f);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(x(i, j) == 10.f * i);
  x.copy_(7);
  CHECK(x(1, 2) == 7.f);
  CHECK_THROWS_AS(x.copy_(arange<float>(4)), shape_error);

  x.zero_();
  x += ones<float, shape<2, 3>>();
  x += 2.f;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(x(i, j) == 3.f);
  x *= row;  // 0 3 6
  x -= 1.f;  // -1 2 5
  x /= 2.f;  // -0.5 1 2.5
  CHECK(x(1, 0) == -0.5f);
  CHECK(x(0, 1) == 1.f);
  CHECK(x(1, 2) == 2.5f);

  // add_ through a view writes only the viewed elements of the source
  auto y = zeros<float, shape<3, 4>>();
  y.select<0>(1).add_(10.f);
  y.slice<1>(0, 4, 2).add_(arange<float>(3).reshape<3, 1>());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(y(i, j) == (i == 1 ? 10.f : 0.f) + (j % 2 == 0 ? static_cast<float>(i) : 0.f));
  y.t().select<0>(3).fill_(-1.f);  // column 3
  for (int i = 0; i < 3; ++i) CHECK(y(i, 3) == -1.f);

  // integer tensors: in-place ops keep the dtype
  auto k = full<std::int32_t, shape<4>>(5);
  k += 2;
  k *= 3;
  CHECK(k(0) == 21);
}

TEST_CASE("assignment and copy_ are alias-safe", "[tensor][inplace][alias]") {
  SECTION("static 3x3: x = x + x^T") {
    Tensor<float, shape<3, 3>> x = arange<float>(9).reshape<3, 3>();
    auto orig = x.clone();
    x = x + x.transpose<0, 1>();
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) CHECK(x(i, j) == orig(i, j) + orig(j, i));
  }
  SECTION("dyn: x = x + x^T") {
    Tensor<float, shape<dyn, dyn>> x = arange<float>(16).reshape<dyn, dyn>(4, 4);
    auto orig = x.clone();
    x = x + x.transpose<0, 1>();
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) CHECK(x(i, j) == orig(i, j) + orig(j, i));
  }
  SECTION("x.copy_(x^T) is evaluated through a temporary") {
    Tensor<float, shape<3, 3>> x = arange<float>(9).reshape<3, 3>();
    auto orig = x.clone();
    const float* p = x.data();
    x.copy_(x.transpose<0, 1>());
    CHECK(x.data() == p);  // written in place
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) CHECK(x(i, j) == orig(j, i));
  }
  SECTION("dyn x.copy_(x^T) and x += x^T") {
    Tensor<double, shape<dyn, dyn>> x = arange<double>(25).reshape<5, 5>();
    auto orig = x.clone();
    x.copy_(x.transpose<0, 1>());
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j) CHECK(x(i, j) == orig(j, i));
    x.copy_(orig + 0.0);  // reset (from a fresh expression)
    x += x.transpose<0, 1>();
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j) CHECK(x(i, j) == orig(i, j) + orig(j, i));
  }
  SECTION("overlapping slices: x[1:] = x[:-1]") {
    auto x = arange<float>(6);
    x.slice<0>(1, 6).copy_(x.slice<0>(0, 5));
    const std::vector<float> want{0, 0, 1, 2, 3, 4};
    for (int i = 0; i < 6; ++i) CHECK(x(i) == want[static_cast<std::size_t>(i)]);
  }
}

TEST_CASE("sym<\"T\"> extents: no compile-time check between equal symbols, run-time check", "[tensor][shape]") {
  using S = shape<sym<"T">, 4>;
  auto a = ones<float, S>(5);
  auto b = full<float, S>(2.f, 5);
  Tensor<float, S> c = a + b;
  REQUIRE(c.sizes() == sizes_t<2>{5, 4});
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) CHECK(c(i, j) == 3.f);

  auto bad = full<float, S>(2.f, 6);  // violates "same T everywhere": caught at run time
  CHECK_THROWS_AS(([&] { Tensor<float, S> r = a + bad; }()), shape_error);
  CHECK_THROWS_AS(a.copy_(bad), shape_error);
}

TEST_CASE("printing matches PyTorch", "[tensor][io]") {
  Tensor<float, shape<2, 2>> f = arange<float>(1, 5).reshape<2, 2>();
  CHECK(to_string(f) == "tensor([[1., 2.],\n        [3., 4.]])");
  std::ostringstream os;
  os << f;
  CHECK(os.str() == to_string(f));

  auto i = arange<std::int64_t>(1, 5).reshape<2, 2>();
  CHECK(to_string(i) == "tensor([[1, 2],\n        [3, 4]])");
  auto i2 = arange<std::int64_t>(4).reshape<2, 2>();
  i2(0, 0) = 1, i2(0, 1) = -20, i2(1, 0) = 300, i2(1, 1) = 4;
  CHECK(to_string(i2) == "tensor([[  1, -20],\n        [300,   4]])");

  auto d = Tensor<double, shape<3>>(sizes_t<1>{3});
  d(0) = 1.5, d(1) = 2.0, d(2) = -3.25;
  CHECK(to_string(d) == "tensor([ 1.5000,  2.0000, -3.2500], dtype=torch.float64)");
  d(0) = 0.1;
  CHECK(to_string(d) == "tensor([ 0.1000,  2.0000, -3.2500], dtype=torch.float64)");

  // a transposed (non-contiguous) view prints in its own index order
  CHECK(to_string(f.t()) == "tensor([[1., 3.],\n        [2., 4.]])");
}

// Data kit (issue 37, item 1): a tensor from a program's std::vector / std::span, and randperm.
TEST_CASE("tensor from a std::vector or std::span; randperm", "[tensor][random]") {
  const std::vector<float> v{1.5f, -2.0f, 3.25f};
  const auto t = tensor(v);
  REQUIRE(t.numel() == 3);
  CHECK((t(0) == 1.5f && t(1) == -2.0f && t(2) == 3.25f));
  CHECK(t.data() != v.data());  // a copy
  const std::int64_t raw[] = {7, 8, 9, 10};
  const auto s = tensor(std::span<const std::int64_t>(raw + 1, 2));
  CHECK((s.numel() == 2 && s(0) == 8 && s(1) == 9));
  CHECK(tensor(std::vector<double>{}).numel() == 0);

  // randperm: every value once, reproducible for a seed, different across draws
  manual_seed(11);
  const auto p = randperm(1000);
  std::vector<int> seen(1000, 0);
  for (std::int64_t i = 0; i < 1000; ++i) {
    REQUIRE((p(i) >= 0 && p(i) < 1000));
    ++seen[static_cast<std::size_t>(p(i))];
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  std::int64_t fixed = 0;
  for (std::int64_t i = 0; i < 1000; ++i) fixed += p(i) == i;
  CHECK(fixed < 10);  // a shuffle (about one fixed point expected), not the identity
  manual_seed(11);
  const auto q = randperm(1000);
  bool same = true;
  for (std::int64_t i = 0; i < 1000; ++i) same = same && q(i) == p(i);
  CHECK(same);
  const auto r = randperm(1000);
  bool differ = false;
  for (std::int64_t i = 0; i < 1000; ++i) differ = differ || r(i) != p(i);
  CHECK(differ);
  CHECK(randperm(0).numel() == 0);
  CHECK(randperm(1)(0) == 0);
  const auto pf = randperm<float>(5);
  float sum = 0;
  for (std::int64_t i = 0; i < 5; ++i) sum += pf(i);
  CHECK(sum == 10.0f);
  CHECK_THROWS_WITH(randperm(-1), Catch::Contains("non-negative, got -1"));
  CHECK_THROWS_WITH(randperm<std::int8_t>(300), Catch::Contains("does not fit"));
  CHECK_THROWS_WITH(randperm<bfloat16>(1000), Catch::Contains("does not fit"));
  CHECK_NOTHROW(randperm<bfloat16>(257));  // 0 .. 256 are exact in bfloat16

  // randperm(n, generator): the generator's stream, the default one untouched
  manual_seed(11);
  Generator g(11);
  const auto pg = randperm(1000, g);
  const auto after = randperm(1000);  // the default generator did not move: p again
  bool same_g = true, same_default = true;
  for (std::int64_t i = 0; i < 1000; ++i) {
    same_g = same_g && pg(i) == p(i);
    same_default = same_default && after(i) == p(i);
  }
  CHECK(same_g);
  CHECK(same_default);
  const auto pg2 = randperm(1000, g);  // the generator's stream moved on
  bool differ_g = false;
  for (std::int64_t i = 0; i < 1000; ++i) differ_g = differ_g || pg2(i) != p(i);
  CHECK(differ_g);
  CHECK_THROWS_WITH(randperm(-2, g), Catch::Contains("non-negative, got -2"));
}
