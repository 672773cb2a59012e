#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// tenet::jvp (forward mode over a recorded function) and tenet::custom_function (a user's forward
// with its own VJP and, optionally, JVP: torch.autograd.Function).
#include <any>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <tenet/autograd/graph.hpp>
#include <tenet/autograd/jvp.hpp>
#include <tenet/autograd/record.hpp>
#include <tenet/tensor.hpp>

namespace tenet {

/// (f(primals...), the directional derivative of f at primals along tangents), as
/// torch.func.jvp. f takes the primals as tensors and returns an expression or a tensor; the
/// tangents must have the primals' dtypes and sizes. Runs f once (recorded) and one tangent
/// evaluation per recorded step.
template <class F, class... T, class... S>
auto jvp(F&& f, const std::tuple<Tensor<T, S>...>& primals, const std::tuple<Tensor<T, S>...>& tangents) {
  static_assert((is_floating_v<T> && ...), "tenet: jvp: primals must have floating dtypes");
  detail::ag::jvp_context ctx;
  auto fresh = [&](const auto& p, const auto& t) {
    if (t.sizes() != p.sizes())
      throw shape_error("tenet: jvp: a tangent has sizes " + detail::sizes_text(t.sizes()) + ", its primal " +
                        detail::sizes_text(p.sizes()));
    auto q = p.detach();
    q.requires_grad_();
    using P = std::remove_cvref_t<decltype(p)>;
    ctx.seeds[q.autograd_meta().get()] =
        detail::ag::grad_tensor<typename P::value_type, P::rank>(t.detach().contiguous());
    return q;
  };
  auto args = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::make_tuple(fresh(std::get<I>(primals), std::get<I>(tangents))...);
  }(std::index_sequence_for<T...>{});
  auto y = [&] {
    const detail::ag::grad_mode_guard on(true);
    return detail::apply_tuple([&](const auto&... a) { return eval(f(a...)); }, args);
  }();
  using Y = decltype(y);
  const detail::ag::grad_mode_guard off(false);
  const device_guard on_device(y.device());  // zero tangents on the output's device
  auto dy = detail::ag::meta_tangent<typename Y::value_type, Y::rank>(y.autograd_meta(), y.sizes(), ctx);
  return std::pair<Y, Y>(y.detach(), Y(dy));
}

/// custom_function<F>::apply(inputs...): y = F::forward(inputs...) (run without recording), and,
/// when an input requires grad, one graph node whose backward is F::backward(grad_y, inputs...),
/// returning a std::tuple with one gradient per input (an undefined Tensor for none), and whose
/// tangent (tenet::jvp) is F::jvp(inputs..., tangents...) when F has one.
template <class F>
struct custom_function {
  template <class... T, class... S>
  static auto apply(const Tensor<T, S>&... inputs) {
    using Y = decltype(eval(F::forward(inputs.detach()...)));
    Y y;
    {
      const detail::ag::grad_mode_guard off(false);
      y = Y(eval(F::forward(inputs.detach()...)));
    }
    if (detail::ag::grad_mode() && (detail::ag::is_tracked(inputs) || ...)) {
      // an output whose elements share storage (an expanded view F returned) is copied: the
      // gradient of a view taken of it later is computed through storage positions
      // (graph.hpp view_backward), exact only for a base whose elements are distinct positions
      if (!detail::ag::view_is_injective(y.sizes(), y.strides())) y = Y(y.contiguous());
      auto n = std::make_shared<node<Y, Tensor<T, S>...>>(inputs...);
      (
          [&](const auto& in) {
            if (!detail::ag::is_tracked(in)) return;
            for (const auto& m : n->inputs)
              if (m == in.autograd_meta()) return;
            n->inputs.push_back(in.autograd_meta());
          }(inputs),
          ...);
      auto m = std::make_shared<detail::ag::meta>();
      m->grad_fn = std::move(n);
      y.set_autograd_meta(std::move(m));
    }
    return y;
  }

 private:
  template <class Y, class... In>
  struct node final : detail::ag::grad_node {
    std::optional<std::tuple<In...>> saved;
    detail::ag::saved_versions versions;  // of the inputs, which backward receives
    explicit node(const In&... in) : saved(std::make_tuple(in...)) { (versions.add(in), ...); }
    /// value_error when an input was written in place since apply (backward would see the change).
    void check_inputs() const {
      const detail::ag::saved_versions_scope checked(&versions);
      const detail::ag::reader_scope reading("custom_function");
      detail::apply_tuple([](const auto&... in) { (detail::ag::check_version(in), ...); }, *saved);
    }
    void apply(const std::any& g) override {
      check_inputs();
      const auto& gy = std::any_cast<const detail::ag::grad_tensor<typename Y::value_type, Y::rank>&>(g);
      // under create_graph (grad mode on in the backward) the inputs keep their history, so what
      // F::backward computes is recorded and can be differentiated again
      const bool keep = detail::ag::grad_mode();
      auto grads = detail::apply_tuple([&](const auto&... in) { return F::backward(Y(gy), (keep ? in : in.detach())...); },
                              *saved);
      static_assert(std::tuple_size_v<decltype(grads)> == sizeof...(In),
                    "tenet: custom_function: backward must return one gradient per input (a std::tuple)");
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (push_one(std::get<I>(*saved), std::get<I>(grads)), ...);
      }(std::index_sequence_for<In...>{});
    }
    template <class X, class G>
    static void push_one(const X& in, const G& grad) {
      if (!detail::ag::is_tracked(in)) return;
      const auto gt = eval(grad);
      if (!gt.defined()) return;
      if (gt.sizes() != in.sizes())
        throw shape_error("tenet: custom_function: backward returned a gradient of sizes " +
                          detail::sizes_text(gt.sizes()) + " for an input of sizes " + detail::sizes_text(in.sizes()));
      detail::ag::push(in.autograd_meta(), gt);
    }
    void release() override {
      saved.reset();
      versions.at.clear();
    }
    std::string name() const override { return "custom_function"; }
    std::any tangent(detail::ag::jvp_context& ctx) const override {
      if constexpr (requires { &F::jvp; }) {
        check_inputs();
        return detail::apply_tuple(
            [&](const auto&... in) {
              return std::any(detail::ag::grad_tensor<typename Y::value_type, Y::rank>(eval(F::jvp(
                  in.detach()...,
                  Tensor<value_type_of<decltype(in)>, shape_of<decltype(in)>>(
                      detail::ag::meta_tangent<value_type_of<decltype(in)>, rank_of<decltype(in)>>(
                          in.autograd_meta(), in.sizes(), ctx))...))));
            },
            *saved);
      } else {
        (void)ctx;
        throw value_error("tenet: jvp through a custom_function without a jvp (define static jvp(inputs..., "
                          "tangents...))");
      }
    }
  };
};

}  // namespace tenet
