// repeat, tile, repeat_interleave, unbind, movedim, diagonal, diag against PyTorch
// (tests/reference/gen_sorting.py -> sorting.txt, case "shape_ops").
#include <catch2/catch.hpp>

#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;

namespace {
constexpr const char* kFile = "sorting.txt";
}

TEST_CASE("shape ops: repeat and tile against PyTorch") {
  const auto& c = get_case(kFile, "shape_ops");
  const auto a = make<float, shape<dyn, dyn>>(c.at("a"));
  STATIC_REQUIRE(rank_of<decltype(repeat(a, 2, 1, 3))> == 3);
  check_close(repeat(a, 2, 2), c.at("repeat22"));
  check_close(repeat(a, 2, 1, 3), c.at("repeat213"));
  check_close(repeat(a, 0, 1), c.at("repeat01"));
  check_close(tile(a, 2), c.at("tile2"));
  check_close(tile(a, 2, 1, 3), c.at("tile213"));
  check_close(repeat(a.transpose<0, 1>(), 2, 1), c.at("t_repeat21"));
  // an expression is evaluated first
  check_close(repeat(a * 1.0f, 2, 2), c.at("repeat22"));
  CHECK_THROWS_AS(repeat(a, 2, -1), value_error);
  CHECK_THROWS_WITH(tile(a, -3), Catch::Contains("got -3"));
}

TEST_CASE("shape ops: repeat_interleave with a count and with a tensor of counts") {
  const auto& c = get_case(kFile, "shape_ops");
  const auto a = make<float, shape<dyn, dyn>>(c.at("a"));
  check_close(repeat_interleave<1>(a, 2), c.at("ri1_2"));
  check_close(repeat_interleave<0>(a, 3), c.at("ri0_3"));
  check_close(repeat_interleave(a, 2), c.at("ri_flat"));
  const Tensor<std::int64_t, shape<dyn>> r{sizes_t<1>{3}};
  r(0) = 0, r(1) = 2, r(2) = 1;
  check_close(repeat_interleave<1>(a, r), c.at("ri_tensor"));
  const auto r1 = full<std::int64_t, shape<1>>(3);
  check_close(repeat_interleave<0>(a, r1), c.at("ri_tensor1"));
  const auto rt = iota(3, 1, 0);  // 1, 1, 1
  Tensor<std::int64_t, shape<dyn>> r2 = rt;
  r2(1) = 0, r2(2) = 2;
  check_close(repeat_interleave<0>(a.transpose<0, 1>(), r2), c.at("t_ri0"));
  CHECK(repeat_interleave<1>(a, 0).numel() == 0);
  Tensor<std::int64_t, shape<dyn>> counts = iota(4, 2, -1);  // 2, 1, 0, -1
  counts(1) = 0, counts(2) = 3, counts(3) = 1;
  check_close(repeat_interleave(counts), c.at("ri_indices"));
  CHECK_THROWS_AS(repeat_interleave<0>(a, r), shape_error);  // 3 counts for 2 rows
  CHECK_THROWS_WITH(repeat_interleave<0>(a, r), Catch::Contains("3 elements") && Catch::Contains("size 2"));
  r(1) = -1;
  CHECK_THROWS_AS(repeat_interleave<1>(a, r), value_error);
}

TEST_CASE("shape ops: unbind, movedim, diagonal and diag") {
  const auto& c = get_case(kFile, "shape_ops");
  const auto a = make<float, shape<dyn, dyn>>(c.at("a"));
  const auto b = make<double, shape<2, 3, 4>>(c.at("b"));
  const auto parts = unbind<1>(a);
  REQUIRE(parts.size() == 3);
  CHECK(parts[2](1) == a(1, 2));
  CHECK(parts[0].shares_storage(a));
  CHECK(unbind(b).size() == 2);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(movedim<0, 2>(b))>, shape<3, 4, 2>>);
  check_close(movedim<0, 2>(b), c.at("movedim02"));
  check_close(movedim<2, 0>(b), c.at("movedim20"));
  check_close(movedim<-1, 1>(b), c.at("movedim_m1_1"));
  CHECK(movedim<0, 2>(b).shares_storage(b));
  check_close(diagonal(a), c.at("diagonal"));
  check_close(diagonal(a, 1), c.at("diagonal1"));
  check_close(diagonal(a, -1), c.at("diagonal_m1"));
  check_close(diagonal(a, 5), c.at("diagonal_far"));
  check_close(diagonal<1, 2>(b, 1), c.at("diagonal12"));
  check_close(diagonal<2, 0>(b, -1), c.at("diagonal_20"));
  CHECK(diagonal(a).shares_storage(a));
  // writing through the diagonal view
  auto z = zeros<float, shape<3, 3>>();
  diagonal(z).fill_(1.0f);
  CHECK(z(2, 2) == 1.0f);
  CHECK(z(0, 1) == 0.0f);
  const auto v = make<std::int64_t, shape<dyn>>(c.at("v"));
  check_close(diag(v), c.at("diag_v"));
  check_close(diag(v, 1), c.at("diag_v1"));
  check_close(diag(v, -2), c.at("diag_vm2"));
  check_close(diag(a, 1), c.at("diag_a1"));
}
