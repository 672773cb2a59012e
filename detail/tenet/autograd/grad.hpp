#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// tenet::autograd::grad: gradients of an output with respect to chosen tensors, returned instead
// of accumulated into .grad (torch.autograd.grad). With create_graph the backward is recorded, so
// the returned gradients can be differentiated again (Hessian-vector products, Hessians).
#include <any>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <tenet/autograd/graph.hpp>
#include <tenet/error.hpp>
#include <tenet/tensor.hpp>

namespace tenet::autograd {

/// Options of grad() (torch.autograd.grad's keywords).
///   retain_graph  keep the graph's saved values for another backward
///   create_graph  record the backward: the returned gradients have a graph (second order);
///                 implies retain_graph
///   allow_unused  an input the output does not depend on gets an undefined Tensor instead of
///                 a value_error
struct grad_options {
  bool retain_graph = false;
  bool create_graph = false;
  bool allow_unused = false;
};

}  // namespace tenet::autograd

namespace tenet::detail::ag {
/// The backward run of autograd::grad: from `output` (which requires grad) with `seed` (of its
/// sizes), the gradient reaching each identity of `captures` is put into its slot (a
/// grad_tensor<T, R> in a std::any; empty where none arrives). Nothing is accumulated into .grad.
template <class T, class S>
void gradients_into(const Tensor<T, S>& output, const Tensor<T, S>& seed,
                    std::unordered_map<const meta*, std::any>& captures, const tenet::autograd::grad_options& opt) {
  grad_tensor<T, S::rank> s = opt.create_graph ? seed : seed.detach().clone();
  const auto& om = output.autograd_meta();
  if (auto it = captures.find(om.get()); it != captures.end()) accumulate(it->second, s);
  if (om->grad_fn) {
    engine_options eo;
    eo.retain_graph = opt.retain_graph;
    eo.create_graph = opt.create_graph;
    eo.accumulate_leaves = false;
    eo.captures = &captures;
    const device_guard on_device(output.device());  // what the rules allocate goes to the output's device
    run_backward(om->grad_fn, std::any(s), eo);
  }
}
}  // namespace tenet::detail::ag

namespace tenet::autograd {

/// The gradients of `output` with respect to each of `inputs` (leaves or computed tensors that
/// require grad), for the seed `grad_output` (the gradient of output, of its sizes). Nothing is
/// accumulated into any .grad.
template <class T, class S, class... Ts, class... Ss>
std::tuple<Tensor<Ts, Ss>...> grad(const Tensor<T, S>& output, const std::tuple<Tensor<Ts, Ss>...>& inputs,
                                   const Tensor<T, S>& grad_output, const grad_options& opt = {}) {
  namespace ag = tenet::detail::ag;
  ag::check_create_graph(opt.create_graph, "autograd::grad");
  if (!output.defined()) throw value_error("tenet: autograd::grad: the output is an undefined tensor");
  if (!output.requires_grad())
    throw value_error("tenet: autograd::grad: the output does not require grad and has no grad_fn (nothing it was "
                      "computed from requires grad, or it was computed under no_grad)");
  if (!grad_output.defined() || grad_output.sizes() != output.sizes())
    throw shape_error("tenet: autograd::grad: grad_output has sizes " +
                      (grad_output.defined() ? detail::sizes_text(grad_output.sizes()) : std::string("(undefined)")) +
                      ", the output " + detail::sizes_text(output.sizes()));
  std::unordered_map<const ag::meta*, std::any> captures;
  std::size_t i = 0;
  detail::apply_tuple(
      [&](const auto&... in) {
        (
            [&](const auto& x) {
              if (!x.defined() || !x.requires_grad())
                throw value_error("tenet: autograd::grad: input " + std::to_string(i) +
                                  " does not require grad (call requires_grad_() on it before computing the output)");
              captures.emplace(x.autograd_meta().get(), std::any());
              ++i;
            }(in),
            ...);
      },
      inputs);
  ag::gradients_into(output, grad_output, captures, opt);
  i = 0;
  auto result = [&](const auto& x) {
    using X = std::remove_cvref_t<decltype(x)>;
    const std::any& slot = captures.at(x.autograd_meta().get());
    const std::size_t which = i++;
    if (!slot.has_value()) {
      if (opt.allow_unused) return X();
      throw value_error("tenet: autograd::grad: input " + std::to_string(which) +
                        " was not used to compute the output (pass allow_unused = true to get an undefined tensor "
                        "for it)");
    }
    return X(std::any_cast<const ag::grad_tensor<typename X::value_type, X::rank>&>(slot));
  };
  return detail::apply_tuple([&](const auto&... in) { return std::tuple<Tensor<Ts, Ss>...>{result(in)...}; }, inputs);
}

/// The same for a one-element output (seed 1).
template <class T, class S, class... Ts, class... Ss>
std::tuple<Tensor<Ts, Ss>...> grad(const Tensor<T, S>& output, const std::tuple<Tensor<Ts, Ss>...>& inputs,
                                   const grad_options& opt = {}) {
  if (output.defined() && output.numel() != 1)
    throw value_error("tenet: autograd::grad: grad can be implicitly created only for an output with one element, "
                      "this one has sizes " + detail::sizes_text(output.sizes()) + "; pass grad_output");
  Tensor<T, S> seed(output.defined() ? output.sizes() : typename Tensor<T, S>::sizes_type{}, output.device());
  seed.fill_(1);
  return grad(output, inputs, seed, opt);
}

/// One input: its gradient as a Tensor (undefined only with allow_unused).
template <class T, class S, class TI, class SI>
Tensor<TI, SI> grad(const Tensor<T, S>& output, const Tensor<TI, SI>& input, const Tensor<T, S>& grad_output,
                    const grad_options& opt = {}) {
  return std::get<0>(grad(output, std::tuple<Tensor<TI, SI>>(input), grad_output, opt));
}
template <class T, class S, class TI, class SI>
Tensor<TI, SI> grad(const Tensor<T, S>& output, const Tensor<TI, SI>& input, const grad_options& opt = {}) {
  return std::get<0>(grad(output, std::tuple<Tensor<TI, SI>>(input), opt));
}

}  // namespace tenet::autograd
