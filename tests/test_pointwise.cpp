// isinf, isfinite, nan_to_num, floor_divide, lerp, addcmul, addcdiv against PyTorch
// (tests/reference/gen_pointwise.py -> pointwise.txt).
#include <catch2/catch.hpp>

#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;

namespace {
constexpr const char* kFile = "pointwise.txt";
}

TEST_CASE("pointwise: isinf, isfinite, nan_to_num") {
  auto check = [](auto tag, const char* name) {
    using T = typename decltype(tag)::type;
    const auto& c = get_case(kFile, name);
    const auto x = make<T, shape<9>>(c.at("x"));
    STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(tenet::isinf(x))>, bool>);
    check_close(eval(tenet::isinf(x)), c.at("isinf"));
    check_close(eval(tenet::isfinite(x)), c.at("isfinite"));
    check_close(eval(nan_to_num(x)), c.at("n2n"));
    check_close(eval(nan_to_num(x, 7.0, 100.0, -100.0)), c.at("n2n_args"));
  };
  check(std::type_identity<float>{}, "classify_f32");
  check(std::type_identity<double>{}, "classify_f64");
  const auto& c = get_case(kFile, "classify_i32");
  const auto xi = make<std::int32_t, shape<4>>(c.at("x"));
  check_close(eval(tenet::isinf(xi)), c.at("isinf"));
  check_close(eval(tenet::isfinite(xi)), c.at("isfinite"));
}

TEST_CASE("pointwise: floor_divide rounds toward -inf, integers exactly") {
  const auto& c = get_case(kFile, "floor_divide");
  const auto a = make<float, shape<2, 4>>(c.at("a"));
  const auto b = make<float, shape<2, 4>>(c.at("b"));
  const auto ai = make<std::int32_t, shape<2, 4>>(c.at("ai"));
  const auto bi = make<std::int32_t, shape<2, 4>>(c.at("bi"));
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(floor_divide(ai, bi))>, std::int32_t>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(floor_divide(ai, b))>, float>);
  check_close(eval(floor_divide(a, b)), c.at("f"));
  check_close(eval(floor_divide(ai, bi)), c.at("i"));
  check_close(eval(floor_divide(ai, 3)), c.at("i_scalar"));
  check_close(eval(floor_divide(ai, b)), c.at("mixed"));
  auto by_zero = [&] { return eval(floor_divide(ai, 0)); };
  CHECK_THROWS_AS(by_zero(), value_error);
}

TEST_CASE("pointwise: lerp, addcmul, addcdiv") {
  const auto& l = get_case(kFile, "lerp");
  const auto la = make<float, shape<3, 5>>(l.at("a"));
  const auto lb = make<float, shape<3, 5>>(l.at("b"));
  const auto w = make<float, shape<5>>(l.at("w"));
  check_close(eval(lerp(la, lb, w)), l.at("out"));
  check_close(eval(lerp(la, lb, 0.3f)), l.at("out_scalar"));
  check_close(eval(lerp(la, lb, 1.0f)), l.at("out_one"), 0.0, 0.0);  // exactly b
  const auto& c = get_case(kFile, "addc");
  const auto x = make<float, shape<2, 3>>(c.at("x"));
  const auto t1 = make<float, shape<2, 3>>(c.at("t1"));
  const auto t2 = make<float, shape<1, 3>>(c.at("t2"));
  check_close(eval(addcmul(x, t1, t2)), c.at("mul"));
  check_close(eval(addcmul(x, t1, t2, -0.5)), c.at("mul_v"));
  check_close(eval(addcdiv(x, t1, t2)), c.at("div"));
  check_close(eval(addcdiv(x, t1, t2, 2.0)), c.at("div_v"));
}

TEST_CASE("pointwise: nested composites cost linear compile time (issue 26: hypot of hypot)") {
  // hypot names each input six times; nested d deep, its tree held 6^d copies of the innermost
  // input, and every node's sizes() called its operands' twice per pair: hypot(hypot(a, a), c) on
  // shape<> took cc1plus past 18 GB. Now an elementwise input larger than max_recomputed_tree is
  // evaluated once (share), so each level adds one bounded kernel; this file compiling is the test
  // of the cost, the values are PyTorch's.
  const Tensor<float, shape<>> a = full<float, shape<>>(3.0f);
  const Tensor<float, shape<>> c = full<float, shape<>>(4.0f);
  const auto e = hypot(hypot(hypot(hypot(a, a), c), a), c);
  static_assert(detail::tree_size<std::remove_cvref_t<decltype(e)>>() <= 6 * (detail::max_recomputed_tree + 4),
                "each level of nesting must see the level below as a bounded leaf");
  CHECK(Tensor<float, shape<>>(hypot(hypot(a, a), c)).item() == Approx(5.830951894845301).epsilon(1e-6));
  CHECK(Tensor<float, shape<>>(e).item() == Approx(7.681145747868608).epsilon(1e-6));
  const Tensor<float, shape<dyn>> v = full<float, shape<dyn>>(3.0f, 5);
  const Tensor<float, shape<dyn>> w = hypot(hypot(hypot(v, v), c), v);
  CHECK(w(4) == Approx(6.557438524302).epsilon(1e-6));
}
