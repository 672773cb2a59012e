#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Tensor parallelism on a 1-D DeviceMesh (Megatron-LM's column- and row-parallel Linear, torch's
// ColwiseParallel / RowwiseParallel): included by <tenet/dist.hpp>, needs MPI (link tenet::dist).
//
//   td::DeviceMesh mesh;
//   auto up = td::ColwiseParallelLinear<double>::from_full(fc1.weight, fc1.bias, mesh);   // Shard(0) of W
//   auto down = td::RowwiseParallelLinear<double>::from_full(fc2.weight, fc2.bias, mesh); // Shard(1) of W
//   Tensor<double, shape<dyn, dyn>> y = down(relu(up(x)));   // x and y replicated
//
// A column-parallel Linear keeps rows [r n/W, (r+1) n/W) of the [n, k] weight and of the bias: its
// output is this rank's slice of the features (Shard(-1)), so elementwise ops run on it locally.
// A row-parallel Linear keeps columns [r k/W, (r+1) k/W) of its weight and the whole bias: it takes
// such a slice, and its partial products are summed over the ranks, then the bias is added. An MLP
// block up -> activation -> down therefore costs one all_reduce in the forward (the row-parallel
// output: reduce_from_parallel_region) and one in the backward (the gradient of the replicated
// input of the column-parallel layer: copy_to_parallel_region), as Megatron's f and g operators.
//
// @post down(act(up(x))) equals fc2(act(fc1(x))) and every gradient equals the corresponding
//       slice of the unsharded one (tests/dist checks both on 2 and 4 ranks)
// Limits: the mesh spans a process group in its rank order; the sharded feature count must be a
// multiple of the mesh size (value_error with the values, from distribute_tensor); inputs are 2-D
// [batch, features]; no sequence parallelism for the norms, no 2-D (TP x FSDP) mesh yet.
#include <any>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include <tenet/autograd.hpp>
#include <tenet/dist/collectives.hpp>
#include <tenet/dist/dtensor.hpp>
#include <tenet/nn/module.hpp>
#include <tenet/nn_functional.hpp>  // linear

namespace tenet::dist {

namespace detail {
/// The autograd node of copy_to_parallel_region (backward: all_reduce of the gradient) and of
/// reduce_from_parallel_region (backward: the gradient as it is).
template <class T, std::size_t R, bool AllReduceBackward>
struct parallel_region_node final : tenet::detail::ag::grad_node {
  process_group group;
  explicit parallel_region_node(process_group g) : group(std::move(g)) {}
  void apply(const std::any& g) override {
    const auto& gy = std::any_cast<const tenet::detail::ag::grad_tensor<T, R>&>(g);
    tenet::detail::ag::grad_tensor<T, R> gx = gy.detach().clone();
    if constexpr (AllReduceBackward) {
      const no_grad off;
      Tensor<T, shape<dyn>> flat({gx.numel()});
      if (gx.numel()) std::memcpy(static_cast<void*>(flat.data()), gx.data(), static_cast<std::size_t>(gx.numel()) * sizeof(T));
      all_reduce(flat, reduce_op::sum, {.group = group});
      if (gx.numel()) std::memcpy(static_cast<void*>(gx.data()), flat.data(), static_cast<std::size_t>(gx.numel()) * sizeof(T));
    }
    for (const auto& m : inputs) tenet::detail::ag::push(m, gx);
  }
  void release() override {}
  std::string name() const override {
    return AllReduceBackward ? "copy_to_parallel_region" : "reduce_from_parallel_region";
  }
  std::any tangent(tenet::detail::ag::jvp_context&) const override {
    throw value_error("tenet::dist: " + name() + " has no forward-mode derivative (jvp) yet");
  }
};

template <bool AllReduceForward, class T, class S>
Tensor<T, dyn_shape<S::rank>> parallel_region(const Tensor<T, S>& x, const process_group& g) {
  constexpr std::size_t R = S::rank;
  const auto c = x.detach().contiguous();
  Tensor<T, dyn_shape<R>> y(c.sizes());
  if (c.numel()) std::memcpy(static_cast<void*>(y.data()), c.data(), static_cast<std::size_t>(c.numel()) * sizeof(T));
  if constexpr (AllReduceForward) {
    Tensor<T, shape<dyn>> flat({y.numel()});
    if (y.numel()) std::memcpy(static_cast<void*>(flat.data()), y.data(), static_cast<std::size_t>(y.numel()) * sizeof(T));
    all_reduce(flat, reduce_op::sum, {.group = g});
    if (y.numel()) std::memcpy(static_cast<void*>(y.data()), flat.data(), static_cast<std::size_t>(y.numel()) * sizeof(T));
  }
  if (tenet::detail::ag::grad_mode() && tenet::detail::ag::is_tracked(x)) {
    auto n = std::make_shared<parallel_region_node<T, R, !AllReduceForward>>(g);
    n->inputs.push_back(x.autograd_meta());
    auto m = std::make_shared<tenet::detail::ag::meta>();
    m->grad_fn = std::move(n);
    y.set_autograd_meta(std::move(m));
  }
  return y;
}
}  // namespace detail

/// Identity in the forward, all_reduce(sum) of the gradient in the backward (Megatron's f): the
/// replicated input of column-parallel layers, whose gradient each rank computes only in part.
template <class T, class S>
Tensor<T, dyn_shape<S::rank>> copy_to_parallel_region(const Tensor<T, S>& x, const process_group& g = {}) {
  return detail::parallel_region<false>(x, g);
}
/// all_reduce(sum) in the forward, identity in the backward (Megatron's g): the partial products
/// of a row-parallel layer.
template <class T, class S>
Tensor<T, dyn_shape<S::rank>> reduce_from_parallel_region(const Tensor<T, S>& x, const process_group& g = {}) {
  return detail::parallel_region<true>(x, g);
}

/// y = x W_r^T + b_r with W_r, b_r this rank's rows of the full weight and bias (output: this
/// rank's slice of the features).
template <class T>
class ColwiseParallelLinear : public nn::Module {
 public:
  Tensor<T, shape<dyn, dyn>> weight;  // [out / W, in]
  Tensor<T, shape<dyn>> bias;         // [out / W]
  TENET_MODULE(weight, bias);

  template <class SW, class SB>
  static ColwiseParallelLinear from_full(const Tensor<T, SW>& w, const Tensor<T, SB>& b, const DeviceMesh& mesh) {
    ColwiseParallelLinear m;
    m.mesh_ = mesh;
    m.weight = distribute_tensor(w, mesh, Shard{0}).to_local();
    m.bias = distribute_tensor(b, mesh, Shard{0}).to_local();
    m.weight.requires_grad_();
    m.bias.requires_grad_();
    return m;
  }
  template <Expression X>
  Tensor<T, shape<dyn, dyn>> operator()(const X& x) const {
    static_assert(shape_of<X>::rank == 2, "tenet::dist::ColwiseParallelLinear: the input must be [batch, in_features]");
    const Tensor<T, shape<dyn, dyn>> xt = x;
    const auto xin = copy_to_parallel_region(xt, mesh_.group());
    return Tensor<T, shape<dyn, dyn>>(linear(xin, weight, bias));
  }
  std::string type_name() const override { return "ColwiseParallelLinear"; }

 private:
  DeviceMesh mesh_;
};

/// y = sum over ranks of x_r W_r^T, plus b: W_r this rank's columns of the full weight, x_r this
/// rank's slice of the input features (a column-parallel layer's output); y replicated.
template <class T>
class RowwiseParallelLinear : public nn::Module {
 public:
  Tensor<T, shape<dyn, dyn>> weight;  // [out, in / W]
  Tensor<T, shape<dyn>> bias;         // [out], replicated
  TENET_MODULE(weight, bias);

  template <class SW, class SB>
  static RowwiseParallelLinear from_full(const Tensor<T, SW>& w, const Tensor<T, SB>& b, const DeviceMesh& mesh) {
    RowwiseParallelLinear m;
    m.mesh_ = mesh;
    m.weight = distribute_tensor(w, mesh, Shard{1}).to_local();
    m.bias = distribute_tensor(b, mesh, Replicate{}).to_local();
    m.weight.requires_grad_();
    m.bias.requires_grad_();
    return m;
  }
  template <Expression X>
  Tensor<T, shape<dyn, dyn>> operator()(const X& x) const {
    static_assert(shape_of<X>::rank == 2, "tenet::dist::RowwiseParallelLinear: the input must be [batch, in_features / W]");
    const Tensor<T, shape<dyn, dyn>> partial = linear(x, weight);
    const auto summed = reduce_from_parallel_region(partial, mesh_.group());
    return Tensor<T, shape<dyn, dyn>>(summed + bias);
  }
  std::string type_name() const override { return "RowwiseParallelLinear"; }

 private:
  DeviceMesh mesh_;
};

}  // namespace tenet::dist
