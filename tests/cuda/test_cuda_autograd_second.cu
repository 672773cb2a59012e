// Second order (create_graph) on CUDA tensors, TENET_AUTOGRAD=2: each case runs the same function
// on the CPU and on cuda(0) and compares every gradient (first, second and third order) in float64.
// It covers the paths that had a CPU-only guard: a broadcast operand's gradient summed under
// create_graph (reduce_to's sum_to_node, its backward an expand on the device) and a view's
// gradient under create_graph (view_backward's relayout_node, its backward a view_backward on the
// device); plus a Hessian-vector product through matmul + bias + tanh, grad() with a seed that
// requires grad, and backward({.create_graph = true}) leaving a tracked .grad.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "gpu_main.hpp"

#include <string>
#include <vector>

#include <tenet/cuda.hpp>

#include "autograd_checks.hpp"

using namespace tenet;
using namespace tenet::test;

namespace {
void check_all(const std::vector<M<double>>& g, const std::vector<M<double>>& c) {
  REQUIRE(c.size() == g.size());
  for (std::size_t i = 0; i < c.size(); ++i) check_same(g[i], c[i], ("gradient " + std::to_string(i)).c_str());
}
}  // namespace

TEST_CASE("cuda autograd second order: third order of x^4, a broadcast row, backward(create_graph)") {
  manual_seed(21);
  M<double> x0 = randn<double, dyn_shape<2>>(3, 4), b0 = randn<double, dyn_shape<2>>(1, 4);
  auto run = [&](device d, std::vector<M<double>>& out) {
    auto x = leaf(x0, d);
    auto b = leaf(b0, d);  // broadcast over x's rows: its gradient is a sum_to_size
    S0<double> f = sum(x * x * x * x * b);
    auto [gx, gb] = autograd::grad(f, std::make_tuple(x, b), {.create_graph = true});
    CHECK(gx.requires_grad());
    CHECK(gb.requires_grad());
    out.push_back(gx);
    out.push_back(gb);
    // d/dx of sum(gb * gb): through the broadcast's sum_to_node, gb = sum over rows of x^4
    const M<double> gbb = autograd::grad(S0<double>(sum(gb * gb)), x, {.retain_graph = true});
    out.push_back(gbb);
    const M<double> g2 = autograd::grad(S0<double>(sum(gx)), x, {.create_graph = true});  // 12 x^2 b
    out.push_back(g2);
    const M<double> g3 = autograd::grad(S0<double>(sum(g2)), x);  // 24 x b
    CHECK_FALSE(g3.requires_grad());
    out.push_back(g3);
    // backward with create_graph leaves a tracked .grad; its own backward gives the second order
    S0<double> h = sum(x * x * x);
    h.backward({.create_graph = true});
    const M<double> gx1 = x.grad();
    CHECK(gx1.requires_grad());
    out.push_back(gx1);
    x.set_grad({});
    S0<double>(sum(gx1 * gx1)).backward();
    out.push_back(x.grad());  // d/dx sum(9 x^4) = 36 x^3
  };
  std::vector<M<double>> c, g;
  run(tenet::cpu, c);
  run(gpu, g);
  check_all(g, c);
  // the closed forms, on the GPU's values
  const auto xh = x0, bh = b0;
  const M<double> g3 = g[4].cpu();
  for (std::int64_t j = 0; j < 4; ++j) CHECK(g3(2, j) == Approx(24.0 * xh(2, j) * bh(0, j)));
}

TEST_CASE("cuda autograd second order: through views (transpose, strided slice) and a non-contiguous leaf") {
  manual_seed(22);
  M<double> x0 = randn<double, dyn_shape<2>>(6, 5), w0 = randn<double, dyn_shape<2>>(5, 3);
  auto run = [&](device d, std::vector<M<double>>& out) {
    auto x = leaf(x0, d);
    auto w = leaf(w0, d);
    // a transpose and a strided slice of x: view_backward under create_graph
    auto xt = x.transpose<0, 1>();  // [5, 6]
    auto xs = x.slice<0>(0, 6, 2);  // rows 0, 2, 4: [3, 5]
    const M<double> r = sum<1>(xt * xt, keepdim);  // [5, 1]
    S0<double> f = sum(tanh(matmul(xs, w)) * r.transpose<0, 1>().slice<1>(0, 3));
    const M<double> gx = autograd::grad(f, x, {.create_graph = true});
    out.push_back(gx);
    const M<double> v0 = x0 * 0.5 - 0.25;
    const M<double> v = d.is_cpu() ? v0 : M<double>(v0.to(d));
    auto [hx, hw] = autograd::grad(S0<double>(sum(gx * v)), std::make_tuple(x, w));  // H v
    out.push_back(hx);
    out.push_back(hw);
    // a leaf that is itself a transposed view of a device tensor
    M<double> base = d.is_cpu() ? M<double>(x0.detach().clone()) : M<double>(x0.detach().to(d));
    M<double> nc = base.transpose<0, 1>();
    nc.requires_grad_();
    S0<double> q = sum(nc * nc * nc);
    const M<double> gq = autograd::grad(q, nc, {.create_graph = true});
    out.push_back(autograd::grad(S0<double>(sum(gq)), nc));  // 6 x
  };
  std::vector<M<double>> c, g;
  run(tenet::cpu, c);
  run(gpu, g);
  check_all(g, c);
}

TEST_CASE("cuda autograd second order: MLP Hessian-vector product, a seed that requires grad") {
  manual_seed(23);
  M<double> x0 = randn<double, dyn_shape<2>>(8, 6), w0 = randn<double, dyn_shape<2>>(4, 6);
  M<double> v0 = randn<double, dyn_shape<2>>(4, 6);
  V1<double> b0 = randn<double, dyn_shape<1>>(4);
  auto run = [&](device d, std::vector<M<double>>& out) {
    auto x = leaf(x0, d);
    auto w = leaf(w0, d);
    auto b = leaf(b0, d);
    auto v = d.is_cpu() ? v0 : M<double>(v0.to(d));
    S0<double> f = sum(tanh(linear(x, w, b)) * tanh(linear(x, w, b)));
    auto [gw, gb] = autograd::grad(f, std::make_tuple(w, b), {.create_graph = true});
    auto [hw, hx] = autograd::grad(S0<double>(sum(gw * v) + sum(gb)), std::make_tuple(w, x));
    out.push_back(gw);
    out.push_back(hw);
    out.push_back(hx);
    // a seed that requires grad: d/dseed <grad(x*x, x, seed), u> = 2 x u
    const M<double> s0 = x0 * 0.3;
    M<double> seed = d.is_cpu() ? M<double>(s0.clone()) : M<double>(s0.to(d));
    seed.requires_grad_();
    M<double> z = x * x;
    const M<double> gz = autograd::grad(z, x, seed, {.create_graph = true});
    out.push_back(autograd::grad(S0<double>(sum(gz * x)), seed));
  };
  std::vector<M<double>> c, g;
  run(tenet::cpu, c);
  run(gpu, g);
  check_all(g, c);
}

int main(int argc, char** argv) { return tenet::test::run_or_skip("tenet CUDA second-order autograd tests", argc, argv); }
