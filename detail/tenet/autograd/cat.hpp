#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The graph node of cat (and so stack, which cats unsqueezed views): cat copies its operands into
// slices of a fresh tensor, so it is no expression node and records this node instead. Its
// backward gives each tracked operand its slice of the gradient (a view of it: under create_graph
// that view is recorded, so cat has every order); its tangent is the cat of the operands'
// tangents. It saves no tensors, only the operands' identities and sizes.
#include <any>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <tenet/autograd/graph.hpp>
#include <tenet/autograd/jvp.hpp>

namespace tenet::detail::ag {

template <class T, std::size_t R>
struct cat_node final : grad_node {
  std::size_t dim = 0;
  device dev = tenet::cpu;                  // the result's
  std::vector<std::shared_ptr<meta>> parts;  // one per operand, in order: its identity, or null (untracked)
  std::vector<sizes_t<R>> part_sizes;        // one per operand

  /// The operand's slice [at, at + n) along dim of t (a view; recorded when t is tracked).
  grad_tensor<T, R> slice_of(const grad_tensor<T, R>& t, std::int64_t at, std::int64_t n) const {
    auto sizes = t.sizes();
    sizes[dim] = n;
    return t.template with_layout<dyn_shape<R>>(sizes, t.strides(), n == 0 ? t.offset() : t.offset() + at * t.strides()[dim]);
  }
  void apply(const std::any& g) override {
    const auto& go = std::any_cast<const grad_tensor<T, R>&>(g);
    std::int64_t at = 0;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const std::int64_t n = part_sizes[i][dim];
      if (parts[i]) push(parts[i], slice_of(go, at, n));  // the same identity twice: push sums
      at += n;
    }
  }
  void release() override {}
  std::string name() const override { return "cat"; }
  std::any tangent(jvp_context& ctx) const override {
    sizes_t<R> sizes = part_sizes.front();
    sizes[dim] = 0;
    for (const auto& s : part_sizes) sizes[dim] += s[dim];
    grad_tensor<T, R> out(sizes, dev);
    std::int64_t at = 0;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const std::int64_t n = part_sizes[i][dim];
      if (n > 0) slice_of(out, at, n).copy_(meta_tangent<T, R>(parts[i], part_sizes[i], ctx));
      at += n;
    }
    return std::any(out);
  }

  /// Adds an operand (m null when it is not tracked).
  void add(const std::shared_ptr<meta>& m, const sizes_t<R>& sizes) {
    parts.push_back(m);
    part_sizes.push_back(sizes);
    if (!m) return;
    for (const auto& in : inputs)
      if (in == m) return;
    inputs.push_back(m);
  }
};

}  // namespace tenet::detail::ag
