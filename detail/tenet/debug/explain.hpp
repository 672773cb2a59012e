#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// explain(expr) and to_dot(expr): the ATen-level graph of an expression, the prim graph decompose_t
// gives for a backend, op counts by group, and which composites the backend runs natively.
//
// Graphs print one line per node in evaluation order (children first):
//   %2 = add(%1, 0.25) : float32 shape<dyn>
// Tensor leaves are inputs `%0 = input : float32 shape<2, 3> sizes (2, 3)`; C++ numbers print inline.
// The text is a function of the expression's type and its leaves' run-time sizes only.
#include <cstdint>
#include <map>
#include <sstream>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <tenet/backend/evaluate.hpp>
#include <tenet/decomp/decompose.hpp>
#include <tenet/dtype.hpp>
#include <tenet/expr/node.hpp>
#include <tenet/expr/shared.hpp>
#include <tenet/decomp/moments.hpp>
#include <tenet/decomp/softmax.hpp>
#include <tenet/prims/indexing.hpp>  // prim::indexing_group
#include <tenet/prims/iota.hpp>
#include <tenet/prims/scan.hpp>
#include <tenet/prims/sort.hpp>
#include <tenet/prims/random.hpp>  // uniform_ labels
#include <tenet/prims/movement.hpp>  // prim::movement_group

namespace tenet::detail {

template <class Op>
struct op_label {
  static std::string text(const Op&) { return std::string(Op::name); }
};
template <class Kind, bool KeepDim, auto... Dims>
struct op_label<prim::reduce_<Kind, KeepDim, Dims...>> {
  static std::string text(const prim::reduce_<Kind, KeepDim, Dims...>&) {
    std::string s(Kind::name);
    if constexpr (sizeof...(Dims) > 0) {
      s += "<";
      bool first = true;
      ((s += (first ? "" : ", ") + std::to_string(static_cast<std::int64_t>(Dims)), first = false), ...);
      s += ">";
    }
    return KeepDim ? s + "[keepdim]" : s;
  }
};
template <class To>
struct op_label<prim::convert_element_type_<To>> {
  static std::string text(const prim::convert_element_type_<To>&) {
    return "convert_element_type<" + std::string(name(dtype_of<To>)) + ">";
  }
};
template <std::int64_t D>
struct op_label<aten::softmax<D>> {
  static std::string text(const aten::softmax<D>&) { return "softmax<" + std::to_string(D) + ">"; }
};
template <std::int64_t D>
struct op_label<aten::log_softmax<D>> {
  static std::string text(const aten::log_softmax<D>&) { return "log_softmax<" + std::to_string(D) + ">"; }
};
template <bool Keep, auto... Dims>
struct op_label<aten::var_<Keep, Dims...>> {
  static std::string text(const aten::var_<Keep, Dims...>& op) {
    std::string s = "var";
    if constexpr (sizeof...(Dims) > 0) {
      s += "<";
      bool first = true;
      ((s += (first ? "" : ", ") + std::to_string(static_cast<std::int64_t>(Dims)), first = false), ...);
      s += ">";
    }
    char c[32];
    std::snprintf(c, sizeof c, "%g", op.correction);
    return s + "[" + (Keep ? "keepdim, " : "") + "correction=" + c + "]";
  }
};
template <class T, class S>
struct op_label<prim::uniform_<T, S>> {
  static std::string text(const prim::uniform_<T, S>& op) {
    return "uniform[seed=" + std::to_string(op.seed) + ", offset=" + std::to_string(op.offset) + "]";
  }
};

template <std::int64_t D>
struct op_label<prim::gather_<D>> {
  static std::string text(const prim::gather_<D>&) { return "gather<" + std::to_string(D) + ">"; }
};
template <std::int64_t D, prim::scatter_op Op>
struct op_label<prim::scatter_<D, Op>> {
  static std::string text(const prim::scatter_<D, Op>& op) {
    std::string s = std::string(prim::scatter_<D, Op>::name) + "<" + std::to_string(D) + ">";
    return Op != prim::scatter_op::replace && !op.include_self ? s + "[exclude_self]" : s;
  }
};

/// The group an op is counted under.
template <class Op>
constexpr std::string_view op_group() {
  if constexpr (!Op::is_prim) return "composite";
  else if constexpr (std::is_same_v<typename Op::group, prim::unary_group>) return "unary";
  else if constexpr (std::is_same_v<typename Op::group, prim::binary_group>) return "binary";
  else if constexpr (std::is_same_v<typename Op::group, prim::ternary_group>) return "ternary";
  else if constexpr (std::is_same_v<typename Op::group, prim::cast_group>) return "cast";
  else if constexpr (std::is_same_v<typename Op::group, prim::reduction_group>) return "reduction";
  else if constexpr (std::is_same_v<typename Op::group, prim::contraction_group>) return "contraction";
  else if constexpr (std::is_same_v<typename Op::group, prim::indexing_group>) return "indexing";
  else if constexpr (std::is_same_v<typename Op::group, prim::random_group>) return "random";
  else if constexpr (std::is_same_v<typename Op::group, prim::scan_group>) return "scan";
  else if constexpr (std::is_same_v<typename Op::group, prim::sort_group>) return "sort";
  else if constexpr (std::is_same_v<typename Op::group, prim::generator_group>) return "generator";
  else if constexpr (std::is_same_v<typename Op::group, prim::movement_group>) return "movement";
  else return "other";
}

template <class T>
std::string scalar_text(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    std::ostringstream os;
    os << static_cast<double>(static_cast<compute_t<T>>(v));
    return os.str();
  }
}

template <class E>
std::string type_text(const E& e) {
  std::string s = std::string(name(dtype_of<value_type_of<E>>)) + " " + shape_of<E>::text();
  if constexpr (!shape_of<E>::is_static) {
    const auto sz = e.sizes();
    s += " = (";
    for (std::size_t i = 0; i < sz.size(); ++i) s += (i ? ", " : "") + std::to_string(sz[i]);
    s += ")";
  }
  return s;
}

/// One graph: lines in evaluation order, edges for to_dot, counts by group, native composites.
struct graph_listing {
  std::vector<std::string> lines;
  std::vector<std::pair<int, int>> edges;  // (child, parent) node ids
  std::vector<std::string> labels;         // per node id
  std::map<std::string, int> counts;       // group -> ops
  std::vector<std::string> native;         // composite ops left for the backend
  std::map<std::string, int> inputs;       // one node per input view and per shared value
  int next = 0;
};

template <class Backend, class E>
struct node_native : std::false_type {};
template <class Backend, class Op, class... C>
struct node_native<Backend, node<Op, C...>> : std::bool_constant<runs_natively<Backend, Op, C...>> {};

template <class Backend, class E>
std::string list_node(const E& e, graph_listing& g, std::vector<int>& ids_out) {
  if constexpr (SharedNode<E>) {
    // listed once; later uses refer to the same node
    std::ostringstream key;
    key << "shared " << e.cache.get();
    auto it = g.inputs.find(key.str());
    if (it == g.inputs.end()) {
      std::vector<int> inner;
      list_node<Backend>(e.expr, g, inner);
      it = g.inputs.emplace(key.str(), inner.back()).first;
      g.lines.back() += "   [shared: evaluated once]";
    }
    ids_out.push_back(it->second);
    return "%" + std::to_string(it->second);
  } else if constexpr (ScalarLeaf<E>) {
    return scalar_text(e.value);
  } else if constexpr (TensorType<E>) {
    std::ostringstream key;
    key << e.storage().get() << ' ' << e.offset() << ' ' << sizes_text(e.sizes()) << ' ' << sizes_text(e.strides());
    auto [it, added] = g.inputs.emplace(key.str(), g.next);
    if (added) {
      const int id = g.next++;
      g.lines.push_back("%" + std::to_string(id) + " = input : " + type_text(e));
      g.labels.push_back("input\\n" + type_text(e));
    }
    ids_out.push_back(it->second);
    return "%" + std::to_string(it->second);
  } else {
    using Op = typename E::op_type;
    std::vector<std::string> args;
    std::vector<int> child_ids;
    detail::apply_tuple([&](const auto&... c) { (args.push_back(list_node<Backend>(c, g, child_ids)), ...); }, e.children);
    const int id = g.next++;
    std::string label = op_label<Op>::text(e.op);
    std::string line = "%" + std::to_string(id) + " = " + label + "(";
    for (std::size_t i = 0; i < args.size(); ++i) line += (i ? ", " : "") + args[i];
    line += ") : " + type_text(e);
    if constexpr (!Op::is_prim && node_native<Backend, E>::value) {
      line += "   [native on " + std::string(Backend::name()) + "]";
      g.native.push_back(label);
    }
    g.lines.push_back(line);
    g.labels.push_back(label);
    ++g.counts[std::string(op_group<Op>())];
    for (int c : child_ids) g.edges.emplace_back(c, id);
    ids_out.push_back(id);
    return "%" + std::to_string(id);
  }
}

template <class Backend, class E>
graph_listing list_graph(const E& e) {
  graph_listing g;
  std::vector<int> ids;
  list_node<Backend>(e, g, ids);
  return g;
}

}  // namespace tenet::detail

namespace tenet::detail {
inline std::string counts_text(const graph_listing& g) {
  std::string s;
  for (const auto& [group, n] : g.counts) s += (s.empty() ? "" : ", ") + group + " " + std::to_string(n);
  return s.empty() ? "none" : s;
}
inline int op_count(const graph_listing& g) {
  int n = 0;
  for (const auto& [group, k] : g.counts) n += k;
  return n;
}
inline void append_graph(std::string& out, const graph_listing& g) {
  for (const auto& l : g.lines) out += "  " + l + "\n";
  out += "  ops by group: " + counts_text(g) + "\n";
}
inline void append_dot_cluster(std::string& out, const graph_listing& g, const std::string& name,
                               const std::string& title) {
  out += "  subgraph cluster_" + name + " {\n    label=\"" + title + "\";\n";
  for (std::size_t i = 0; i < g.labels.size(); ++i)
    out += "    " + name + std::to_string(i) + " [label=\"" + g.labels[i] + "\"];\n";
  for (const auto& [c, p] : g.edges)
    out += "    " + name + std::to_string(c) + " -> " + name + std::to_string(p) + ";\n";
  out += "  }\n";
}
}  // namespace tenet::detail
