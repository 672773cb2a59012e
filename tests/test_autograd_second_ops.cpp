// Second order (create_graph) of reductions (sum, prod, amax, amin, mean), matmul (vectors,
// batch broadcasting) and the movement prims and views (reshape, permute, expand, slice, pad,
// unfold, strided views): Hessian-vector products against finite differences (hesscheck.hpp).
#include "hesscheck.hpp"

using namespace tenet;
using tenet_test::bin;
using tenet_test::filled;
using tenet_test::hesscheck;
using tenet_test::un;
namespace P = tenet::prim;
using V = Tensor<double, dyn_shape<1>>;
using M = Tensor<double, dyn_shape<2>>;
using M3 = Tensor<double, dyn_shape<3>>;
using S0 = Tensor<double, shape<>>;

TEST_CASE("autograd second order: reductions and matmul", "[autograd]") {
  const M3 x = filled<3>({2, 3, 4}, 0.5, 1.5);
  hesscheck([](const auto& a) { return make_node(P::reduce_<P::sum_kind, false, 1>{}, bin<P::mul_>(a, un<P::sin_>(a))); }, x);
  hesscheck([](const auto& a) {
    auto s = make_node(P::reduce_<P::sum_kind, true, 0, 2>{}, a);
    return bin<P::mul_>(s, s);
  }, x);
  hesscheck([](const auto& a) { return make_node(P::reduce_<P::prod_kind, false, 2>{}, a); }, x);
  hesscheck([](const auto& a) {
    auto m = make_node(P::reduce_<P::amax_kind, true, 1>{}, a);
    return bin<P::mul_>(m, bin<P::mul_>(m, a));
  }, x);
  hesscheck([](const auto& a) {
    auto m = make_node(P::reduce_<P::amin_kind, false, 0, 2>{}, a);
    return bin<P::mul_>(m, m);
  }, x);
  hesscheck([](const auto& a) { return mean<1>(a * a * a); }, x);
  const M ma = filled<2>({3, 4}, -1, 1);
  const M mb = filled<2>({4, 2}, -1, 1, 0.2);
  const V v = filled<1>({4}, -1, 1, 0.4);
  hesscheck([](const auto& p, const auto& q) { return bin<P::matmul_>(p, q); }, ma, mb);  // cross terms only
  hesscheck([](const auto& p, const auto& q) {
    auto y = bin<P::matmul_>(p, q);
    return bin<P::mul_>(y, y);
  }, ma, mb);
  hesscheck([](const auto& p, const auto& q) {
    auto y = bin<P::matmul_>(p, q);
    return bin<P::mul_>(y, y);
  }, ma, v);
  hesscheck([](const auto& p, const auto& q) {
    auto y = bin<P::matmul_>(p, q);
    return bin<P::mul_>(y, y);
  }, v, mb);
  const M3 ab = filled<3>({2, 3, 4}, -1, 1, 0.1);
  hesscheck([](const auto& p, const auto& q) { return un<P::tanh_>(bin<P::matmul_>(p, q)); }, ab, mb);
}


TEST_CASE("autograd second order: movement prims and views", "[autograd]") {
  const M3 x = filled<3>({2, 3, 4}, -1, 1);
  auto sq = [](const auto& e) { return bin<P::mul_>(e, un<P::sin_>(e)); };
  hesscheck([&](const auto& a) { return sq(make_node(P::reshape_<dyn_shape<2>>{{4, 6}}, a)); }, x);
  hesscheck([&](const auto& a) { return sq(make_node(P::permute_<2, 0, 1>{}, a)); }, x);
  const M m = filled<2>({3, 1}, -1, 1);
  hesscheck([&](const auto& a) { return sq(make_node(P::expand_<dyn_shape<3>>{{2, 3, 5}}, a)); }, m);
  P::slice_<3> sl;
  sl.start = {1, 0, 3};
  sl.stop = {2, 3, -1};
  sl.step = {1, 2, -2};
  hesscheck([&](const auto& a) { return sq(make_node(sl, a)); }, x);
  P::pad_<3> pd;
  pd.low = {1, -1, 2};
  pd.high = {0, 2, -1};
  pd.interior = {0, 1, 1};
  pd.value = 0.5;
  hesscheck([&](const auto& a) { return sq(make_node(pd, a)); }, x);
  P::unfold_<2> uf;
  uf.size = 2;
  uf.step = 1;  // overlapping windows: view_backward under create_graph
  hesscheck([&](const auto& a) { return sq(make_node(uf, a)); }, x);
  // strided views of a tracked tensor (view nodes), a view of a view, and an expand
  hesscheck([](const auto& a) { return a.template transpose<0, 2>() * a.template transpose<0, 2>(); }, x);
  hesscheck([](const auto& a) { return a.template select<1>(1) * a.template select<1>(2).template slice<1>(0, 4, 1); }, x);
  hesscheck([](const auto& a, const auto& c) { return a * c * c; }, x, M3(filled<3>({2, 1, 4}, -1, 1, 0.9)));
}

