#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The autograd state every Tensor can see: the thread-local grad mode and the forward declarations
// of the autograd graph (graph.hpp). Tensor holds one std::shared_ptr<ag::meta>, null unless the
// tensor requires grad or was computed from one that does: nothing is allocated otherwise.
#include <memory>

// TENET_AUTOGRAD (default 1): 0 compiles the recording out of a whole program: evaluation never
// instantiates VJPs (about 2.4x less compile time for code that never differentiates), and
// requires_grad_() throws. 2 adds second (and higher) order: create_graph records the backward,
// which instantiates the VJPs of every VJP rule the program uses (about 1.3x the compile time of
// 1, docs/autograd.md); with 1, create_graph throws value_error. Every translation unit of one
// program must see the same value.
#ifndef TENET_AUTOGRAD
#define TENET_AUTOGRAD 1
#endif

namespace tenet {
template <class T, class S>
class Tensor;

/// Options of Tensor::backward (torch.Tensor.backward's keywords): `t.backward({.create_graph = true})`.
///   retain_graph  keep the saved values so the graph can be run again
///   create_graph  record the backward itself, so the gradients (.grad, or what
///                 tenet::autograd::grad returns) can be differentiated again; implies retain_graph
struct backward_options {
  bool retain_graph = false;
  bool create_graph = false;
};
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
