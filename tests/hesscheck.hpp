#pragma once
// hesscheck: second order (create_graph) against finite differences, in float64.
//
//   hesscheck(f, x, y, ...)   L = sum(f(...) * w) for fixed weights w; the Hessian-vector product
//                             along a fixed direction v (grad with create_graph, then grad of each
//                             gradient with seed v_j, summed) is compared with central differences
//                             of the first-order gradient: (g(x + h v) - g(x - h v)) / 2h.
// Needs a program built with TENET_AUTOGRAD=2 (tests/CMakeLists.txt: tenet_autograd2_tests).
#include <vector>

#include "gradcheck.hpp"

namespace tenet_test {

template <class T, class S>
std::vector<double> values_of(const tenet::Tensor<T, S>& t, std::int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n), 0.0);
  if (!t.defined()) return v;  // an unused input: zero
  const auto c = t.detach().contiguous();
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = c.data()[i];
  return v;
}

inline int hess_calls = 0;

/// Hessian-vector product by double backward against (g(x + h v) - g(x - h v)) / 2h.
template <class F, class... X>
void hesscheck(F f, X... inputs) {
  INFO("hesscheck call " << hess_calls++);
  auto xs = std::make_tuple(inputs.detach().clone()...);
  std::apply([](auto&... x) { (x.requires_grad_(), ...); }, xs);
  auto out = std::apply([&](const auto&... x) { return tenet::eval(f(x...)); }, xs);
  using Out = decltype(out);
  REQUIRE(out.requires_grad());
  const auto w = weights_like<typename Out::shape_type>(out.sizes());
  const auto vs = [&]<std::size_t... I>(std::index_sequence<I...>) {  // a phase per input
    return std::make_tuple(filled<X::rank>(inputs.sizes(), -1, 1, 0.37 + 0.21 * static_cast<double>(I + 1))...);
  }(std::index_sequence_for<X...>{});
  constexpr std::size_t n = sizeof...(X);
  std::vector<std::vector<double>> hv(n);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((hv[I] = std::vector<double>(static_cast<std::size_t>(std::get<I>(xs).numel()), 0.0)), ...);
  }(std::make_index_sequence<n>{});
  // the create_graph gradients, then grad(g_j, xs, v_j) summed over j
  const auto gs = tenet::autograd::grad(out, xs, w, {.create_graph = true, .allow_unused = true});
  auto add_row = [&](const auto& g, const auto& v) {
    if (!g.defined() || !g.requires_grad()) return;  // constant in x (a linear f): zero rows
    const auto hs = tenet::autograd::grad(g, xs, v, {.retain_graph = true, .allow_unused = true});
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&](std::size_t i, const auto& h) {
            const auto hvals = values_of(h, static_cast<std::int64_t>(hv[i].size()));
            for (std::size_t k = 0; k < hvals.size(); ++k) hv[i][k] += hvals[k];
          }(I, std::get<I>(hs)),
          ...);
    }(std::make_index_sequence<n>{});
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (add_row(std::get<I>(gs), std::get<I>(vs)), ...);
  }(std::make_index_sequence<n>{});
  // the first-order gradient at x + s v (plain backward, no graph)
  auto grad_at = [&](double s) {
    auto ys = [&]<std::size_t... I>(std::index_sequence<I...>) {
      tenet::no_grad off;
      return std::make_tuple(X(std::get<I>(xs).detach() + std::get<I>(vs) * s)...);
    }(std::make_index_sequence<n>{});
    std::apply([](auto&... y) { (y.requires_grad_(), ...); }, ys);
    auto o = std::apply([&](const auto&... y) { return tenet::eval(f(y...)); }, ys);
    const auto g = tenet::autograd::grad(o, ys, w, {.allow_unused = true});
    std::vector<std::vector<double>> r(n);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((r[I] = values_of(std::get<I>(g), std::get<I>(ys).numel())), ...);
    }(std::make_index_sequence<n>{});
    return r;
  };
  const double h = 1e-5;
  const auto gp = grad_at(h), gm = grad_at(-h);
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < hv[i].size(); ++k) {
      const double numeric = (gp[i][k] - gm[i][k]) / (2 * h);
      if (!(std::abs(numeric - hv[i][k]) <= 1e-5 + 1e-4 * std::abs(numeric)) && bad++ < 5)
        UNSCOPED_INFO("input " << i << " element " << k << ": double backward " << hv[i][k]
                               << ", finite differences " << numeric);
    }
  CHECK(bad == 0);
}

template <class Op, class X>
auto un(const X& x) {
  return tenet::make_node(Op{}, x);
}
template <class Op, class A, class B>
auto bin(const A& a, const B& b) {
  return tenet::make_node(Op{}, a, b);
}

}  // namespace tenet_test
