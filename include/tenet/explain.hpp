#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// tenet::explain(expr): what an expression is and what runs for it, without running it.
//   - the ATen-level graph (as the user wrote it),
//   - the prim graph the backend of the expression's device runs (decompose_t<E, cpu_simd> for CPU
//     tensors, cuda_gpu's for CUDA tensors), with the composites it runs natively marked,
//   - the fully decomposed prim graph (decompose_t<E>, the reference every native composite is
//     tested against), and op counts by group for each;
//   - the kernel plan (debug/plan.hpp): the kernels that backend runs (the lowering of
//     schedule/lower.hpp, recorded), what each fused, bytes read and written, FLOPs, and the
//     planned peak memory of intermediates.
// tenet::plan(expr): that kernel plan as data (detail::kernel_plan).
// tenet::to_dot(expr): the first two graphs for Graphviz (`dot -Tsvg`).
#include <string>

#include <tenet/debug/explain.hpp>
#include <tenet/debug/plan.hpp>

namespace tenet {

template <Expression E>
std::string explain(const E& e) {
  using namespace detail;
  return on_backend<std::string>(expr_device(e), "tenet::explain", [&](auto b) {
    using B = decltype(b);
    const std::string name(B::name());
    const auto aten = list_graph<reference_backend>(e);
    const auto mine = list_graph<B>(decompose<B>(e));
    const auto prims = list_graph<reference_backend>(decompose<reference_backend>(e));
    std::string out = "ATen graph (" + std::to_string(op_count(aten)) + " ops):\n";
    append_graph(out, aten);
    out += "prim graph for " + name + " (" + std::to_string(op_count(mine)) + " ops):\n";
    append_graph(out, mine);
    out += "fully decomposed prim graph (" + std::to_string(op_count(prims)) + " ops):\n";
    append_graph(out, prims);
    out += "run natively by " + name + ": ";
    if (mine.native.empty()) out += "nothing";
    for (std::size_t i = 0; i < mine.native.size(); ++i) out += (i ? ", " : "") + mine.native[i];
    out += "\nkernel plan for " + name + ":\n";
    return out + plan_on<B>(e).text();
  });
}

/// The kernel plan the backend of e's device runs for e (the CPU's for CPU tensors, CUDA's for
/// CUDA tensors in a unit nvcc compiles), as data: .kernels (kind, fused prims, bytes, FLOPs),
/// .peak_bytes, .text().
template <Expression E>
detail::kernel_plan plan(const E& e) {
  return detail::plan_for_device(e);
}

template <Expression E>
std::string to_dot(const E& e) {
  using namespace detail;
  std::string out = "digraph tenet {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];\n";
  append_dot_cluster(out, list_graph<reference_backend>(e), "aten", "ATen graph");
  append_dot_cluster(out, list_graph<cpu_simd>(decompose<cpu_simd>(e)), "cpu", "prim graph for cpu_simd");
  return out + "}\n";
}

}  // namespace tenet
