#pragma once
#include <tenet/detail_check.hpp>
// Post-accumulate-grad hooks and callbacks at the end of a backward (torch's
// Tensor.register_post_accumulate_grad_hook and Variable._execution_engine.queue_callback): what
// DistributedDataParallel needs to start a bucket's all-reduce while the backward still runs.
//
//   auto h = tenet::autograd::register_post_accumulate_grad_hook(w, [&] { use(w.grad()); });
//   h.remove();
//
// @post during a backward that accumulates into w.grad (Tensor::backward, not autograd::grad),
//       the hook runs once, after the last gradient of that backward was added to w.grad, and
//       only when one was; hooks run in registration order.
// A hook that captures a copy of the tensor keeps the tensor's autograd identity alive (the
// identity holds the hook): capture a reference, or the module that owns the tensor.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <tenet/autograd/graph.hpp>
#include <tenet/error.hpp>
#include <tenet/tensor.hpp>

namespace tenet::autograd {

/// Removes its hook (remove(); nothing when the tensor is gone or the hook was removed).
class hook_handle {
 public:
  hook_handle() = default;
  hook_handle(std::weak_ptr<tenet::detail::ag::meta> m, std::uint64_t id) : meta_(std::move(m)), id_(id) {}
  void remove() {
    if (auto m = meta_.lock()) std::erase_if(m->post_accumulate_hooks, [&](const auto& h) { return h.first == id_; });
    meta_.reset();
  }

 private:
  std::weak_ptr<tenet::detail::ag::meta> meta_;
  std::uint64_t id_ = 0;
};

/// Registers `hook` on a leaf that requires grad (value_error otherwise).
template <class T, class S>
hook_handle register_post_accumulate_grad_hook(const Tensor<T, S>& leaf, std::function<void()> hook) {
  const auto& m = leaf.autograd_meta();
  if (leaf.defined() && m && m->grad_fn)
    throw value_error("tenet: register_post_accumulate_grad_hook: the tensor is not a leaf (it has grad_fn '" +
                      m->grad_fn->name() + "'); register the hook on the leaf whose .grad you want");
  if (!leaf.defined() || !m || !m->requires_grad)
    throw value_error("tenet: register_post_accumulate_grad_hook: the tensor does not require grad; call "
                      "requires_grad_() on it first");
  if (!hook) throw value_error("tenet: register_post_accumulate_grad_hook: the hook is empty");
  static std::atomic<std::uint64_t> next_id{1};
  const std::uint64_t id = next_id++;
  m->post_accumulate_hooks.emplace_back(id, std::move(hook));
  return hook_handle(m, id);
}

/// Queues `callback` to run when the running backward has run its last node (value_error outside
/// a backward, e.g. when called from outside a hook).
inline void queue_callback(std::function<void()> callback) {
  auto* ctx = tenet::detail::ag::current_backward();
  if (!ctx)
    throw value_error("tenet: autograd::queue_callback: no backward is running on this thread (call it from a hook)");
  ctx->final_callbacks.push_back(std::move(callback));
}

/// The running backward's number (1, 2, ... in this process), 0 outside a backward: a hook can
/// tell whether it runs in the same backward as before.
inline std::uint64_t current_backward_serial() {
  const auto* ctx = tenet::detail::ag::current_backward();
  return ctx ? ctx->serial : 0;
}

}  // namespace tenet::autograd
