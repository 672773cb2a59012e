// The VJP rule of every differentiable prim against central finite differences (float64), on
// prim nodes built directly (make_node), so each rule is exercised on its own.
#include "gradcheck.hpp"

using namespace tenet;
using tenet_test::filled;
using tenet_test::gradcheck;
namespace P = tenet::prim;
using V = Tensor<double, dyn_shape<1>>;
using M = Tensor<double, dyn_shape<2>>;
using M3 = Tensor<double, dyn_shape<3>>;

template <class Op, class X>
auto un(const X& x) {
  return make_node(Op{}, x);
}
template <class Op, class A, class B>
auto bin(const A& a, const B& b) {
  return make_node(Op{}, a, b);
}

TEST_CASE("autograd prims: unary (finite differences)", "[autograd]") {
  const M x = filled<2>({3, 4}, 0.2, 0.9);   // inside every domain, away from the kinks
  const M s = filled<2>({3, 4}, -2.0, 2.0);  // both signs
  gradcheck([](const auto& a) { return un<P::neg_>(a); }, s);
  gradcheck([](const auto& a) { return un<P::abs_>(a); }, s);
  gradcheck([](const auto& a) { return un<P::exp_>(a); }, s);
  gradcheck([](const auto& a) { return un<P::exp2_>(a); }, s);
  gradcheck([](const auto& a) { return un<P::expm1_>(a); }, s);
  gradcheck([](const auto& a) { return un<P::log_>(a); }, x);
  gradcheck([](const auto& a) { return un<P::log2_>(a); }, x);
  gradcheck([](const auto& a) { return un<P::log1p_>(a); }, x);
  gradcheck([](const auto& a) { return un<P::sqrt_>(a); }, x);
  gradcheck([](const auto& a) { return un<P::rsqrt_>(a); }, x);
  gradcheck([](const auto& a) { return un<P::sin_>(a); }, s);
  gradcheck([](const auto& a) { return un<P::cos_>(a); }, s);
  gradcheck([](const auto& a) { return un<P::tan_>(a); }, x);
  gradcheck([](const auto& a) { return un<P::tanh_>(a); }, s);
  gradcheck([](const auto& a) { return un<P::erf_>(a); }, s);
  gradcheck([](const auto& a) { return un<P::reciprocal_>(a); }, x);
  // piecewise constant: zero gradient (finite differences away from the steps are 0 too)
  const M steps = filled<2>({3, 4}, 0.1, 0.4);
  gradcheck([](const auto& a) { return un<P::floor_>(a); }, steps);
  gradcheck([](const auto& a) { return un<P::ceil_>(a); }, steps);
  gradcheck([](const auto& a) { return un<P::round_>(a); }, steps);
  gradcheck([](const auto& a) { return un<P::trunc_>(a); }, steps);
  gradcheck([](const auto& a) { return un<P::sign_>(a); }, s);
}

TEST_CASE("autograd prims: binary, where, cast (finite differences, broadcasting)", "[autograd]") {
  const M a = filled<2>({3, 4}, 0.5, 2.0);
  const V b = filled<1>({4}, 0.7, 1.9, 0.31);  // broadcast along dim 0
  const M c = filled<2>({3, 1}, -1.5, 1.5, 0.17);
  gradcheck([](const auto& x, const auto& y) { return bin<P::add_>(x, y); }, a, b);
  gradcheck([](const auto& x, const auto& y) { return bin<P::sub_>(x, y); }, a, c);
  gradcheck([](const auto& x, const auto& y) { return bin<P::mul_>(x, y); }, c, b);
  gradcheck([](const auto& x, const auto& y) { return bin<P::div_>(x, y); }, a, b);
  gradcheck([](const auto& x, const auto& y) { return bin<P::remainder_>(x, y); }, a, b);
  gradcheck([](const auto& x, const auto& y) { return bin<P::fmod_>(x, y); }, a, b);
  gradcheck([](const auto& x, const auto& y) { return bin<P::pow_>(x, y); }, a, b);
  gradcheck([](const auto& x, const auto& y) { return bin<P::maximum_>(x, y); }, a, b);
  gradcheck([](const auto& x, const auto& y) { return bin<P::minimum_>(x, y); }, a, b);
  gradcheck([](const auto& x, const auto& y) { return bin<P::atan2_>(x, y); }, c, b);
  gradcheck([](const auto& x, const auto& y) { return make_node(P::where_{}, bin<P::gt_>(x, y), x, y); }, a, b);
  // the same tensor used twice in one expression: x * x + x
  gradcheck([](const auto& x) { return bin<P::add_>(bin<P::mul_>(x, x), x); }, c);
  // cast: float64 -> float64 through an integer is not differentiable; float32 <-> float64 is
  const M big = filled<2>({2, 3}, 1.0, 3.0);
  M big2 = big.detach().clone();
  big2.requires_grad_();
  Tensor<float, dyn_shape<2>> f = make_node(P::convert_element_type_<float>{}, big2);
  Tensor<double, dyn_shape<2>> back = make_node(P::mul_{}, make_node(P::convert_element_type_<double>{}, f), big2);
  back.backward(tenet_test::weights_like<dyn_shape<2>>(back.sizes()));
  const auto w = tenet_test::weights_like<dyn_shape<2>>(back.sizes());
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      CHECK(big2.grad()(i, j) == Approx(2 * big(i, j) * w(i, j)).epsilon(1e-6));
}

TEST_CASE("autograd prims: ties and kinks as PyTorch", "[autograd]") {
  // abs'(0) = 0, maximum/minimum split a tie evenly, pow's exponent gets 0 at base 0, sqrt'(0) = inf
  V x = V(filled<1>({3}, 0, 0));
  x(1) = 1.0;
  x(2) = -2.0;
  x.requires_grad_();
  V y = V(filled<1>({3}, 0, 0));
  y(1) = 1.0;
  y(2) = 3.0;
  y.requires_grad_();
  Tensor<double, shape<>> l = sum(make_node(P::abs_{}, x) + make_node(P::maximum_{}, x, y));
  l.backward();
  CHECK(x.grad()(0) == 0.5);   // abs'(0) = 0, tie 0.5
  CHECK(x.grad()(1) == 1.5);   // abs' = 1, tie 0.5
  CHECK(x.grad()(2) == -1.0);  // abs' = -1, y wins
  CHECK(y.grad()(0) == 0.5);
  CHECK(y.grad()(1) == 0.5);
  CHECK(y.grad()(2) == 1.0);
  V z = V(filled<1>({2}, 0, 0));
  z(1) = 4.0;
  z.requires_grad_();
  V e = V(filled<1>({2}, 2, 2));
  e.requires_grad_();
  Tensor<double, shape<>> l2 = sum(make_node(P::sqrt_{}, z) + make_node(P::pow_{}, z, e));
  l2.backward();
  CHECK(std::isinf(z.grad()(0)));
  CHECK(z.grad()(1) == Approx(0.25 + 8.0));
  CHECK(e.grad()(0) == 0.0);  // base 0, exponent >= 0
  CHECK(e.grad()(1) == Approx(16.0 * std::log(4.0)));
}

TEST_CASE("autograd prims: movement (finite differences)", "[autograd]") {
  const M3 x = filled<3>({2, 3, 4}, -1, 1);
  gradcheck([](const auto& a) { return make_node(P::reshape_<dyn_shape<2>>{{4, 6}}, a); }, x);
  gradcheck([](const auto& a) { return make_node(P::permute_<2, 0, 1>{}, a); }, x);
  const M m = filled<2>({3, 1}, -1, 1);
  gradcheck([](const auto& a) { return make_node(P::expand_<dyn_shape<3>>{{2, 3, 5}}, a); }, m);
  P::slice_<3> sl;
  sl.start = {1, 0, 3};
  sl.stop = {2, 3, -1};
  sl.step = {1, 2, -2};
  gradcheck([&](const auto& a) { return make_node(sl, a); }, x);
  P::pad_<3> pd;
  pd.low = {1, -1, 2};
  pd.high = {0, 2, -1};
  pd.interior = {0, 1, 1};
  pd.value = 0.5;
  gradcheck([&](const auto& a) { return make_node(pd, a); }, x);
  P::unfold_<2> uf;
  uf.size = 2;
  uf.step = 1;  // overlapping windows
  gradcheck([&](const auto& a) { return make_node(uf, a); }, x);
  uf.size = 3;
  uf.step = 2;
  gradcheck([&](const auto& a) { return make_node(uf, a); }, x);
}

TEST_CASE("autograd prims: reductions (finite differences)", "[autograd]") {
  const M3 x = filled<3>({2, 3, 4}, -1, 1);
  gradcheck([](const auto& a) { return make_node(P::reduce_<P::sum_kind, false, 1>{}, a); }, x);
  gradcheck([](const auto& a) { return make_node(P::reduce_<P::sum_kind, true, 0, 2>{}, a); }, x);
  gradcheck([](const auto& a) { return make_node(P::reduce_<P::sum_kind, false>{}, a); }, x);
  gradcheck([](const auto& a) { return make_node(P::reduce_<P::prod_kind, false, 2>{}, a); }, x);
  gradcheck([](const auto& a) { return make_node(P::reduce_<P::amax_kind, true, 1>{}, a); }, x);
  gradcheck([](const auto& a) { return make_node(P::reduce_<P::amin_kind, false, 0, 2>{}, a); }, x);
  // prod with one zero and with two zeros in a row (prod is multilinear: differences are exact)
  M z = filled<2>({2, 4}, 0.5, 2);
  z(0, 1) = 0;
  z(1, 0) = 0;
  z(1, 3) = 0;
  gradcheck([](const auto& a) { return make_node(P::reduce_<P::prod_kind, false, 1>{}, a); }, z);
  // amax ties split evenly (as PyTorch)
  V t = V(filled<1>({4}, 1, 1));
  t(2) = 0;
  t.requires_grad_();
  Tensor<double, shape<>> m = make_node(P::reduce_<P::amax_kind, false>{}, t);
  m.backward();
  CHECK(t.grad()(0) == Approx(1.0 / 3));
  CHECK(t.grad()(2) == 0.0);
}

TEST_CASE("autograd prims: matmul (finite differences, vectors and batch broadcast)", "[autograd]") {
  const M a = filled<2>({3, 4}, -1, 1);
  const M b = filled<2>({4, 2}, -1, 1, 0.2);
  const V v = filled<1>({4}, -1, 1, 0.4);
  const M3 ab = filled<3>({2, 3, 4}, -1, 1, 0.1);
  gradcheck([](const auto& x, const auto& y) { return bin<P::matmul_>(x, y); }, a, b);
  gradcheck([](const auto& x, const auto& y) { return bin<P::matmul_>(x, y); }, a, v);
  gradcheck([](const auto& x, const auto& y) { return bin<P::matmul_>(x, y); }, v, b);
  gradcheck([](const auto& x, const auto& y) { return bin<P::matmul_>(x, y); }, v, v);
  gradcheck([](const auto& x, const auto& y) { return bin<P::matmul_>(x, y); }, ab, b);
}

TEST_CASE("autograd prims: gather, scatter, scans, sort (finite differences)", "[autograd]") {
  const M x = filled<2>({3, 4}, -1, 1);
  Tensor<std::int64_t, dyn_shape<2>> idx({3, 2});
  const std::int64_t iv[] = {0, 3, 2, 2, 1, 0};
  for (int i = 0; i < 6; ++i) idx.data()[i] = iv[i];
  gradcheck([&](const auto& a) { return make_node(P::gather_<1>{}, a, idx); }, x);
  const M src = filled<2>({3, 3}, -1, 1, 0.5);
  gradcheck([&](const auto& a, const auto& s) { return make_node(P::scatter_<1, P::scatter_op::sum>{}, a, idx, s); },
            x, src);
  Tensor<std::int64_t, dyn_shape<2>> uniq({3, 2});  // no duplicates: scatter (replace) is differentiable
  const std::int64_t uv[] = {0, 3, 2, 1, 1, 0};
  for (int i = 0; i < 6; ++i) uniq.data()[i] = uv[i];
  gradcheck([&](const auto& a, const auto& s) { return make_node(P::scatter_<1, P::scatter_op::replace>{}, a, uniq, s); },
            x, src);
  gradcheck([](const auto& a) { return make_node(P::scan_<P::sum_kind, 1>{}, a); }, x);
  gradcheck([](const auto& a) { return make_node(P::scan_<P::sum_kind, 0>{}, a); }, x);
  gradcheck([](const auto& a) { return make_node(P::scan_<P::prod_kind, 1>{}, a); }, x);
  gradcheck([](const auto& a) { return make_node(P::scan_<P::logaddexp_kind, 1>{}, a); }, x);
  gradcheck([](const auto& a) { return make_node(P::scan_<P::amax_kind, 1>{}, a); }, x);
  gradcheck([](const auto& a) { return make_node(P::scan_<P::amin_kind, 0>{}, a); }, x);
  P::sort_<1, P::sort_output::values> desc;
  desc.descending = true;
  gradcheck([](const auto& a) { return make_node(P::sort_<1, P::sort_output::values>{}, a); }, x);
  gradcheck([&](const auto& a) { return make_node(desc, a); }, x);
}

// The rule table (detail/tenet/prims/rule_table.hpp): every listed prim whose result can carry a
// gradient has its entry (its VJP, JVP and, if pointwise, its derivative, in one place), the prims
// of bool results and those without inputs have none, and no prim has a batching rule yet (vmap's
// slot, `batch`, is empty).
namespace {
template <class Op>
constexpr bool has_rule_entry = requires { sizeof(tenet::detail::ag::rules<Op>); };
template <class Op>
constexpr bool without_rules =
    boost::hana::unpack(boost::hana::tuple_t<P::isnan_, P::bitwise_not_, P::eq_, P::ne_, P::lt_, P::le_, P::gt_, P::ge_,
                                             P::bitwise_and_, P::bitwise_or_, P::bitwise_xor_, P::iota_<std::int64_t>,
                                             P::uniform_<float, shape<>>>,
                        [](auto... t) { return (std::is_same_v<Op, typename decltype(t)::type> || ...); });
}  // namespace

TEST_CASE("autograd prims: the rule table has one entry per differentiable prim, no batching rule yet", "[autograd]") {
  constexpr bool entries = boost::hana::unpack(P::all_prims, [](auto... t) {
    return ((has_rule_entry<typename decltype(t)::type> != without_rules<typename decltype(t)::type>) && ...);
  });
  STATIC_REQUIRE(entries);
  constexpr bool no_batch = boost::hana::unpack(P::all_prims, [](auto... t) {
    return (!tenet::detail::ag::has_batch_rule<typename decltype(t)::type> && ...);
  });
  STATIC_REQUIRE(no_batch);
  STATIC_REQUIRE(has_rule_entry<aten::softmax<1>>);
  STATIC_REQUIRE(has_rule_entry<aten::conv2d>);
  STATIC_REQUIRE(!tenet::detail::ag::has_batch_rule<aten::conv2d>);
}
