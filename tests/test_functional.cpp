// linear, addmm, bmm, outer, dot, layer_norm, rms_norm and the regression losses against PyTorch
// (tests/reference/gen_functional.py -> functional.txt).
#include <catch2/catch.hpp>

#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;
using tenet_test::check_close;
using tenet_test::get_case;
using tenet_test::make;

namespace {
constexpr const char* kFile = "functional.txt";
constexpr double kRtol = 1e-5, kAtol = 1e-5;  // matmul and reductions sum in a different order than torch
}  // namespace

TEST_CASE("functional: linear, addmm, bmm, outer, dot") {
  const auto& l = get_case(kFile, "linear");
  const auto x = make<float, shape<dyn, 5>>(l.at("x"));
  const auto w = make<float, shape<3, 5>>(l.at("w"));
  const auto b = make<float, shape<3>>(l.at("b"));
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(linear(x, w))>, shape<dyn, 3>>);
  check_close(eval(linear(x, w)), l.at("out"), kRtol, kAtol);
  check_close(eval(linear(x, w, b)), l.at("out_b"), kRtol, kAtol);
  const auto& m = get_case(kFile, "addmm");
  const auto c = make<float, shape<4, 3>>(m.at("c"));
  const auto a = make<float, shape<4, 6>>(m.at("a"));
  const auto mb = make<float, shape<6, 3>>(m.at("b"));
  check_close(eval(addmm(c, a, mb)), m.at("out"), kRtol, kAtol);
  check_close(eval(addmm(c, a, mb, 0.5, -2.0)), m.at("out_ba"), kRtol, kAtol);
  const auto& o = get_case(kFile, "bmm_outer_dot");
  const auto ba = make<float, shape<dyn, 3, 4>>(o.at("a"));
  const auto bb = make<float, shape<dyn, 4, 5>>(o.at("b"));
  const auto va = make<float, shape<4>>(o.at("va"));
  const auto vb = make<float, shape<4>>(o.at("vb"));
  check_close(eval(bmm(ba, bb)), o.at("bmm"), kRtol, kAtol);
  check_close(eval(outer(va, vb)), o.at("outer"), kRtol, kAtol);
  check_close(eval(dot(va, vb)), o.at("dot"), kRtol, kAtol);
  // bmm does not broadcast a batch of 1
  auto one = zeros<float, shape<dyn, 4, 5>>(1);
  CHECK_THROWS_AS(eval(bmm(ba, one)), shape_error);
}

TEST_CASE("functional: layer_norm and rms_norm over the weight's trailing dims") {
  const auto& c = get_case(kFile, "norms");
  const auto x = make<float, shape<2, 3, 8>>(c.at("x"));
  const auto g1 = make<float, shape<8>>(c.at("g1"));
  const auto b1 = make<float, shape<8>>(c.at("b1"));
  const auto g2 = make<float, shape<3, 8>>(c.at("g2"));
  const auto b2 = make<float, shape<3, 8>>(c.at("b2"));
  check_close(eval(layer_norm(x, g1, b1)), c.at("ln1"), kRtol, kAtol);
  check_close(eval(layer_norm(x, g2, b2, 1e-3)), c.at("ln2"), kRtol, kAtol);
  check_close(eval(rms_norm(x, g1)), c.at("rms1"), kRtol, kAtol);
  check_close(eval(rms_norm(x, g2, 1e-2)), c.at("rms2"), kRtol, kAtol);
}

TEST_CASE("functional: regression losses with each reduction") {
  const auto& c = get_case(kFile, "losses");
  const auto in = make<float, shape<2, 4>>(c.at("input"));
  const auto tg = make<float, shape<2, 4>>(c.at("target"));
  STATIC_REQUIRE(rank_of<decltype(mse_loss(in, tg))> == 0);
  STATIC_REQUIRE(rank_of<decltype(mse_loss<reduction::none>(in, tg))> == 2);
  check_close(eval(mse_loss(in, tg)), c.at("mse"));
  check_close(eval(mse_loss<reduction::sum>(in, tg)), c.at("mse_sum"));
  check_close(eval(mse_loss<reduction::none>(in, tg)), c.at("mse_none"));
  check_close(eval(l1_loss(in, tg)), c.at("l1"));
  check_close(eval(l1_loss<reduction::none>(in, tg)), c.at("l1_none"));
  check_close(eval(smooth_l1_loss(in, tg)), c.at("sl1"));
  check_close(eval(smooth_l1_loss<reduction::none>(in, tg, 0.5)), c.at("sl1_b"));
  check_close(eval(smooth_l1_loss<reduction::sum>(in, tg, 0.0)), c.at("sl1_b0"));
  check_close(eval(huber_loss(in, tg)), c.at("huber"));
  check_close(eval(huber_loss<reduction::none>(in, tg, 0.3)), c.at("huber_d"));
}
