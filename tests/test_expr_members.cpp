// The members of an unevaluated expression (expr/node.hpp, expr_members; issue 37 item 2): the
// Tensor members a PyTorch user writes on a value work on `a + b` too. to<U>() is a lazy cast;
// each view gives what the same member gives on the evaluated tensor (those are tested against
// PyTorch in test_views.cpp), with the same static shape.
#include <catch2/catch.hpp>

#include <cstdint>
#include <type_traits>

#include <tenet/tenet.hpp>

namespace {
using namespace tenet;

template <class A, class B>
void require_same(const A& got, const B& want) {
  STATIC_REQUIRE(std::is_same_v<value_type_of<A>, value_type_of<B>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<A>, shape_of<B>>);
  const auto g = eval(got);
  const auto w = eval(want);
  REQUIRE(g.sizes() == w.sizes());
  const auto gc = g.contiguous();
  const auto wc = w.contiguous();
  for (std::int64_t i = 0; i < gc.numel(); ++i) REQUIRE(gc.data()[i] == wc.data()[i]);
}
}  // namespace

TEST_CASE("expression members: to<U>() is a lazy cast, as cast<U>", "[expr][members]") {
  const auto pred = tensor<std::int64_t>({1, 2, 3, 4});
  const auto y = tensor<std::int64_t>({1, 0, 3, 0});
  auto hits = (pred == y).to<float>();  // the accuracy idiom of a training loop
  STATIC_REQUIRE(!TensorType<decltype(hits)>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(hits)>, float>);
  const Tensor<float, shape<dyn>> h = hits;
  REQUIRE(h.sizes()[0] == 4);
  CHECK(h(0) == 1.0f);
  CHECK(h(1) == 0.0f);
  CHECK(h(2) == 1.0f);
  CHECK(h(3) == 0.0f);
  const Tensor<float, shape<>> acc = mean((pred == y).to<float>());
  CHECK(acc.item() == 0.5f);
  require_same((pred + y).to<double>(), cast<double>(pred + y));
}

TEST_CASE("expression members: views give what the same member gives on the value", "[expr][members]") {
  manual_seed(3);
  const auto a = randn<float, shape<2, 3, 4>>();
  const auto b = randn<float, shape<dyn, 4>>(3);
  auto e = a * 2.0f + 1.0f;  // shape<2, 3, 4>, unevaluated
  const Tensor<float, shape<2, 3, 4>> v = e;

  require_same(e.transpose<0, 2>(), v.transpose<0, 2>());
  require_same(e.transpose(1, 2), v.transpose(1, 2));
  require_same(e.permute<2, 0, 1>(), v.permute<2, 0, 1>());
  require_same(e.mT(), v.mT());
  require_same(e.slice<2>(1, 4, 2), v.slice<2>(1, 4, 2));
  require_same(e.narrow<1>(1, 2), v.narrow<1>(1, 2));
  require_same(e.select<0>(1), v.select<0>(1));
  require_same(e.select<-1>(-1), v.select<-1>(-1));
  require_same(e.unsqueeze<1>(), v.unsqueeze<1>());
  require_same(e.flatten(), v.flatten());
  require_same(e.flatten<1, 2>(), v.flatten<1, 2>());
  require_same(e.reshape<6, -1>(), v.reshape<6, -1>());
  require_same(e.view<4, 6>(), v.view<4, 6>());
  require_same(e.contiguous(), v);
  require_same(e.clone(), v);

  // dyn extents, rank 2: t(), expand, squeeze
  auto f = b - 0.5f;  // shape<dyn, 4>
  const Tensor<float, shape<dyn, 4>> fv = f;
  require_same(f.t(), fv.t());
  require_same(f.unsqueeze<0>().expand<5, -1, -1>(), fv.unsqueeze<0>().expand<5, -1, -1>());
  require_same(f.unsqueeze<0>().squeeze<0>(), fv);
  const Tensor<float, shape<1, 3, 4>> u = a.select<0>(0).unsqueeze<0>() + 1.0f;
  require_same((a.select<0>(0).unsqueeze<0>() + 1.0f).squeeze(), u.squeeze());
  require_same(f.narrow<0>(1, 2).expand_as(zeros<float, shape<3, 2, 4>>()),
               fv.narrow<0>(1, 2).expand_as(zeros<float, shape<3, 2, 4>>()));
  // a member of a member's result: a view of a view, and a cast of a view's expression
  require_same((e.select<0>(0) * 3.0f).t(), Tensor<float, shape<3, 4>>(v.select<0>(0) * 3.0f).t());
  require_same((e > 1.0f).to<std::int32_t>(), cast<std::int32_t>(e > 1.0f));
}

TEST_CASE("expression members: errors are the value's", "[expr][members]") {
  const auto x = tensor<float>({1.0f, 2.0f, 3.0f});
  auto e = x + 1.0f;  // shape<dyn>
  CHECK_THROWS_AS(e.narrow<0>(2, 5), index_error);
  CHECK_THROWS_AS(e.select<0>(3), index_error);
}
