// tenet::func on CUDA tensors (include/tenet/func.hpp): grad, vjp, jvp, jacrev and jacfwd of a
// small function of a matrix and a vector give the CPU's values (first order: this program is
// built with TENET_AUTOGRAD=1).
#include <catch2/catch.hpp>

#include <tenet/cuda.hpp>
#include <tenet/func.hpp>

#include "check_close.hpp"

namespace {
using namespace tenet;
using tenet::test::gpu;

template <class A, class B>
double func_max_diff(const A& a, const B& b) {
  const auto ca = a.detach().cpu().contiguous();
  const auto cb = b.detach().cpu().contiguous();
  REQUIRE(ca.numel() == cb.numel());
  double m = 0;
  for (std::int64_t i = 0; i < ca.numel(); ++i)
    m = std::max(m, std::abs(static_cast<double>(ca.data()[i]) - static_cast<double>(cb.data()[i])));
  return m;
}
}  // namespace

TEST_CASE("cuda func: grad, vjp, jvp, jacrev, jacfwd give the CPU's values", "[func]") {
  manual_seed(7);
  using M = Tensor<double, shape<3, 4>>;
  using V = Tensor<double, shape<4>>;
  const M w = randn<double, shape<3, 4>>();
  const V x = randn<double, shape<4>>(), t = randn<double, shape<4>>();
  const Tensor<double, shape<3>> ct = randn<double, shape<3>>();
  auto g = [](const auto& xx, const auto& ww) { return tanh(matmul(ww, xx)) * matmul(ww, xx); };
  auto f = [&](const auto& xx, const auto& ww) { return sum(g(xx, ww)); };
  const M wg = w.to(gpu);
  const V xg = x.to(gpu), tg = t.to(gpu);

  auto [gx, gw] = func::grad(f, func::argnums<0, 1>)(x, w);
  auto [gxg, gwg] = func::grad(f, func::argnums<0, 1>)(xg, wg);
  CHECK(gxg.device() == wg.device());
  CHECK(func_max_diff(gx, gxg) < 1e-12);
  CHECK(func_max_diff(gw, gwg) < 1e-12);

  auto gx_only = [&](const auto& xx) { return g(xx, w); };
  auto gx_only_gpu = [&](const auto& xx) { return g(xx, wg); };
  auto [y, vjp_fn] = func::vjp(gx_only, x);
  auto [yg, vjp_fn_g] = func::vjp(gx_only_gpu, xg);
  CHECK(func_max_diff(y, yg) < 1e-12);
  CHECK(func_max_diff(std::get<0>(vjp_fn(ct)), std::get<0>(vjp_fn_g(ct.to(gpu)))) < 1e-12);
  CHECK(func_max_diff(func::jvp(gx_only, std::make_tuple(x), std::make_tuple(t)).second,
                      func::jvp(gx_only_gpu, std::make_tuple(xg), std::make_tuple(tg)).second) < 1e-12);
  const Tensor<double, shape<3, 4>> jr = func::jacrev(gx_only)(x);
  CHECK(func_max_diff(jr, func::jacrev(gx_only_gpu)(xg)) < 1e-12);
  CHECK(func_max_diff(jr, func::jacfwd(gx_only_gpu)(xg)) < 1e-12);
  // a tangent on the other device
  CHECK_THROWS_AS(func::jvp(gx_only_gpu, std::make_tuple(xg), std::make_tuple(t)), device_error);
}
