#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The autograd state every Tensor can see: the thread-local grad mode and the forward declarations
// of the autograd graph (graph.hpp). Tensor holds one std::shared_ptr<ag::meta>, null unless the
// tensor requires grad or was computed from one that does: nothing is allocated otherwise.
#include <memory>

namespace tenet {
template <class T, class S>
class Tensor;
}

namespace tenet::detail::ag {

/// Grad mode of this thread (torch.is_grad_enabled): recording happens only while it is on.
inline bool& grad_mode() {
  thread_local bool on = true;
  return on;
}

struct meta;  // the autograd identity of a tensor: requires_grad, grad, grad_fn (graph.hpp)
struct grad_node;  // one recorded step of the graph (graph.hpp)

/// Gives `view` (a strided view of `base`'s storage) a view node when base is tracked (graph.hpp).
template <class T, class S, class S2>
void on_view(const Tensor<T, S>& base, Tensor<T, S2>& view);

}  // namespace tenet::detail::ag
