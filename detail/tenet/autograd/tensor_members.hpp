#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The autograd members of Tensor (declared in include/tenet/tensor.hpp).
#include <any>
#include <memory>
#include <string>

#include <tenet/autograd/graph.hpp>
#include <tenet/dtype.hpp>
#include <tenet/error.hpp>
#include <tenet/tensor.hpp>

namespace tenet {

template <class T, class S>
Tensor<T, S>& Tensor<T, S>::requires_grad_(bool on) {
  if (on && !TENET_AUTOGRAD)
    throw value_error("tenet: requires_grad_: autograd is compiled out of this program (TENET_AUTOGRAD=0); build "
                      "every file without that definition to record gradients");
  if (on && !is_floating_v<T>)
    throw dtype_error(std::string("tenet: requires_grad_: only tensors of floating point dtype can require "
                                  "gradients, this one is ") +
                      std::string(tenet::name(dtype_of<T>)) + "; convert it with .to<float>() first");
  if (ag_ && ag_->grad_fn) {
    if (!on)
      throw value_error("tenet: requires_grad_(false) on a tensor computed with autograd (not a leaf); use "
                        "detach() to get a tensor without history");
    return *this;
  }
  if (!ag_) {
    if (!on) return *this;
    ag_ = std::make_shared<detail::ag::meta>();
  }
  ag_->requires_grad = on;
  return *this;
}

template <class T, class S>
bool Tensor<T, S>::requires_grad() const {
  return ag_ && (ag_->requires_grad || ag_->grad_fn);
}

template <class T, class S>
bool Tensor<T, S>::is_leaf() const {
  return !ag_ || !ag_->grad_fn;
}

template <class T, class S>
Tensor<T, S> Tensor<T, S>::grad() const {
  if (!ag_ || !ag_->grad.has_value()) return Tensor();
  return Tensor(std::any_cast<const detail::ag::grad_tensor<T, rank>&>(ag_->grad));
}

template <class T, class S>
void Tensor<T, S>::set_grad(const Tensor& g) const {
  if (!g.defined()) {
    if (ag_) ag_->grad.reset();
    return;
  }
  if (g.sizes() != sizes_)
    throw shape_error("tenet: set_grad: the gradient has sizes " + detail::sizes_text(g.sizes()) +
                      ", the tensor " + detail::sizes_text(sizes_));
  if (!ag_)
    throw value_error("tenet: set_grad on a tensor that does not require grad; call requires_grad_() first");
  ag_->grad = detail::ag::grad_tensor<T, rank>(g);
}

template <class T, class S>
Tensor<T, S> Tensor<T, S>::detach() const {
  Tensor r = *this;
  r.ag_.reset();
  return r;
}

template <class T, class S>
void Tensor<T, S>::backward(bool retain_graph) const {
  backward(backward_options{.retain_graph = retain_graph});
}

template <class T, class S>
void Tensor<T, S>::backward(const Tensor& seed, bool retain_graph) const {
  backward(seed, backward_options{.retain_graph = retain_graph});
}

template <class T, class S>
void Tensor<T, S>::backward(const backward_options& options) const {
  require_defined("backward");
  if (numel() != 1)
    throw value_error("tenet: backward: grad can be implicitly created only for a tensor with one element, this "
                      "one has sizes " + detail::sizes_text(sizes_) + "; pass a seed gradient: backward(seed)");
  Tensor seed(sizes_, device());
  seed.fill_(1);
  backward(seed, options);
}

template <class T, class S>
void Tensor<T, S>::backward(const Tensor& seed, const backward_options& options) const {
  require_defined("backward");
  detail::ag::check_create_graph(options.create_graph, "backward");
  if (!requires_grad())
    throw value_error("tenet: backward: this tensor does not require grad and has no grad_fn (nothing it was "
                      "computed from requires grad, or it was computed under no_grad)");
  if (!seed.defined() || seed.sizes() != sizes_)
    throw shape_error("tenet: backward: the seed gradient has sizes " +
                      (seed.defined() ? detail::sizes_text(seed.sizes()) : std::string("(undefined)")) +
                      ", the tensor " + detail::sizes_text(sizes_));
  // create_graph keeps the seed's own history (a seed that requires grad is differentiated too)
  detail::ag::grad_tensor<T, rank> g = options.create_graph ? seed : seed.detach().clone();
  if (!ag_->grad_fn) {
    const detail::ag::grad_mode_guard mode(options.create_graph);
    detail::ag::push(ag_, g);
    return;
  }
  detail::ag::engine_options opt;
  opt.retain_graph = options.retain_graph;
  opt.create_graph = options.create_graph;
  const device_guard on_device(device());  // what the rules allocate (zeros) goes to this tensor's device
  detail::ag::run_backward(ag_->grad_fn, std::any(g), opt);
}

}  // namespace tenet

namespace tenet {
/// RAII: turns recording off in this thread (torch.no_grad).
class no_grad {
 public:
  no_grad() : guard_(false) {}

 private:
  detail::ag::grad_mode_guard guard_;
};
/// RAII: turns recording on in this thread (torch.enable_grad), e.g. inside a no_grad scope.
class enable_grad {
 public:
  enable_grad() : guard_(true) {}

 private:
  detail::ag::grad_mode_guard guard_;
};
/// True when this thread records operations on tensors that require grad.
inline bool is_grad_enabled() { return detail::ag::grad_mode(); }
}  // namespace tenet
