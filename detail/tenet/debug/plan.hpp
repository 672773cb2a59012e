#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The kernel plan of an expression for the CPU backend: which kernels run, in which order, what
// each one fused, the bytes it reads and writes, its FLOPs, and the memory plan of the
// intermediates (each buffer lives from the kernel that writes it to the last kernel that reads
// it; buffers whose lifetimes do not overlap share memory, and the plan reports the peak).
//
// The plan is the lowering of schedule/lower.hpp recorded by plan_sink instead of run: the one
// walk the evaluator runs (backend/evaluate.hpp's run_sink), so the plan's kernels are the kernels
// the evaluator launches (tests hold one against the other with detail::kernels_launched()). It
// reads only the expression's type and its leaves' sizes.
//
// FLOPs count 2·M·N·K per GEMM, one per element for every elementwise prim of a kernel, one per
// input element for a reduction (4 for var), and 4 per element for row kernels (plus their fused producer's
// prims, one each; no FLOPs are counted for conv2d or max_pool2d); bytes count
// every distinct input of a kernel once at its own size (a broadcast operand is read at its size).
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <tenet/backend/evaluate.hpp>
#include <tenet/debug/explain.hpp>
#include <tenet/expr/cse.hpp>
#include <tenet/schedule/fusion.hpp>
#include <tenet/schedule/lower.hpp>
#include <optional>

namespace tenet::detail {

template <class Op>
inline constexpr bool is_reduce_op = false;
template <class Kind, bool KeepDim, auto... Dims>
inline constexpr bool is_reduce_op<prim::reduce_<Kind, KeepDim, Dims...>> = true;
template <class Op>
inline constexpr bool is_reshape_op = false;
template <class S>
inline constexpr bool is_reshape_op<prim::reshape_<S>> = true;

struct planned_kernel {
  std::string kind;                 // pointwise, reduction, gemm, gemm+epilogue, row, copy, or the prim's name
  std::vector<std::string> fused;   // the prims (and native composites) the kernel computes
  std::int64_t bytes_read = 0;
  std::int64_t bytes_written = 0;
  double flops = 0;
  std::string output;               // dtype, shape and sizes of what it writes
  std::vector<int> reads;           // buffers (intermediates) it reads
  int writes = -1;                  // the buffer it writes
  std::string note;                 // why this kernel (scaled_dot_product_attention: the variant chosen)
};

struct kernel_plan {
  std::vector<planned_kernel> kernels;
  std::vector<std::int64_t> buffer_bytes;  // per buffer written by a kernel
  std::int64_t input_bytes = 0;            // distinct inputs (leaf tensors)
  std::int64_t peak_bytes = 0;             // intermediates and result live at once, at the worst kernel
  std::int64_t unplanned_bytes = 0;        // all buffers if none were reused
  std::int64_t views = 0;                  // movement prims that cost no kernel
  std::int64_t cse_hits = 0;               // kernels not run again: a common subexpression's value reused

  int size() const { return static_cast<int>(kernels.size()); }
  double flops() const {
    double f = 0;
    for (const auto& k : kernels) f += k.flops;
    return f;
  }
  std::int64_t bytes() const {
    std::int64_t b = 0;
    for (const auto& k : kernels) b += k.bytes_read + k.bytes_written;
    return b;
  }
  std::string text() const;
};

/// A value in the plan: an input (buffer -1) or an intermediate buffer, with the bytes a reader
/// reads of it.
struct plan_value {
  int buffer = -1;
  std::int64_t bytes = 0;
  const void* input = nullptr;  // the storage an input reads (to count each input once)
};

/// An operand of a kernel: a value, or an elementwise tree of ops over values (fused into the reader).
struct plan_mat {
  bool tree = false;
  plan_value value;
  std::vector<std::string> ops;
  std::vector<plan_value> leaves;
};

struct plan_builder {
  kernel_plan plan;
  std::map<const void*, plan_value> shared;  // shared values already planned
  std::map<std::string, bool> inputs_seen;
  std::map<std::string, plan_value> cse;  // kernels already planned, by their CSE key (expr/cse.hpp)

  int add_kernel(planned_kernel k, const std::vector<plan_value>& reads, std::int64_t out_bytes) {
    std::map<std::string, bool> seen;
    for (const auto& v : reads) {
      const std::string key = v.buffer >= 0 ? "b" + std::to_string(v.buffer) : "i" + std::to_string(reinterpret_cast<std::uintptr_t>(v.input));
      const bool first = seen.emplace(key, true).second;
      if (first) k.bytes_read += v.bytes;
      if (first && v.buffer >= 0) k.reads.push_back(v.buffer);
      if (v.buffer < 0 && inputs_seen.emplace(key, true).second) plan.input_bytes += v.bytes;
    }
    k.bytes_written = out_bytes;
    k.writes = static_cast<int>(plan.buffer_bytes.size());
    plan.buffer_bytes.push_back(out_bytes);
    plan.kernels.push_back(std::move(k));
    return plan.kernels.back().writes;
  }
};

template <class E>
std::int64_t numel_of(const E& e) {
  std::int64_t n = 1;
  for (auto s : e.sizes()) n *= s;
  return n;
}
template <class E>
std::int64_t value_bytes(const E& e) {
  return numel_of(e) * static_cast<std::int64_t>(sizeof(value_type_of<E>));
}

/// The ops of a reduction's elementwise epilogue tree (the reduction left out).
template <class E>
void plan_reduction_epilogue_ops(const E& e, std::vector<std::string>& ops) {
  if constexpr (Node<E>) {
    using Op = typename E::op_type;
    if constexpr (!is_reduction_kernel<Op>) {
      detail::apply_tuple([&](const auto&... c) { (plan_reduction_epilogue_ops(c, ops), ...); }, e.children);
      ops.push_back(op_label<Op>::text(e.op));
    }
  }
}

/// The planner's sink for schedule/lower.hpp: every kernel the lowering emits is recorded (what it
/// fuses, reads and writes, its FLOPs); values are buffers, operands are plan_mat.
struct plan_sink {
  plan_builder b;
  struct pattern_output {};

  template <class T, class S>
  plan_mat input(const Tensor<T, S>& t) {
    return {false, {-1, value_bytes(t), t.numel() ? static_cast<const void*>(t.data()) : nullptr}, {}, {}};
  }
  template <class C>
  plan_mat constant(const C&) {
    return {true, {}, {}, {}};
  }
  plan_mat operand(plan_value v) { return {false, v, {}, {}}; }
  static void append(plan_mat& m, const plan_mat& k) {
    if (k.tree) {
      m.ops.insert(m.ops.end(), k.ops.begin(), k.ops.end());
      m.leaves.insert(m.leaves.end(), k.leaves.begin(), k.leaves.end());
    } else {
      m.leaves.push_back(k.value);
    }
  }
  template <class E, class... O>
  plan_mat tree(const E& e, const O&... o) {
    plan_mat m{true, {}, {}, {}};
    (append(m, o), ...);
    m.ops.push_back(op_label<typename E::op_type>::text(e.op));
    return m;
  }
  template <class E>
  plan_mat view(const E& e, plan_value v) {  // a view of the operand's value: no kernel, the same buffer
    ++b.plan.views;
    v.bytes = value_bytes(e);
    return {false, v, {}, {}};
  }
  template <class E>
  const plan_value* find_shared(const E& e) {
    auto it = b.shared.find(e.cache.get());
    return it == b.shared.end() ? nullptr : &it->second;
  }
  template <class E>
  plan_value store_shared(const E& e, plan_value v) {
    b.shared.emplace(e.cache.get(), v);
    return v;
  }
  template <class E>
  bool cse_enabled(const E&) const {
    return true;
  }
  template <class E>
  const plan_value* find_cached(const E&, const std::string& key) {
    auto it = b.cse.find(key);
    if (it == b.cse.end()) return nullptr;
    ++b.plan.cse_hits;
    return &it->second;
  }
  template <class E>
  plan_value store_cached(const E&, const std::string* key, plan_value v) {
    if (key) b.cse.emplace(*key, v);
    return v;
  }
  template <class E>
  plan_value add(planned_kernel k, const std::vector<plan_value>& reads, const E& e) {
    k.output = type_text(e);
    return {b.add_kernel(std::move(k), reads, value_bytes(e)), value_bytes(e), nullptr};
  }
  /// A reduction-like kernel's input (its fused prologue) and FLOPs; then its own label.
  template <class R>
  void reduction(const R& r, const plan_mat& x, planned_kernel& k, std::vector<plan_value>& reads) {
    using Op = typename R::op_type;
    if (x.tree) {
      k.fused.insert(k.fused.end(), x.ops.begin(), x.ops.end());
      reads.insert(reads.end(), x.leaves.begin(), x.leaves.end());
    } else {
      reads.push_back(x.value);
    }
    const std::int64_t in = numel_of(std::get<0>(r.children));
    const double per = (is_reduce_op<Op> ? 1.0 : 4.0) + static_cast<double>(x.tree ? x.ops.size() : 0);  // var: 2 passes
    k.flops += static_cast<double>(in) * per;
    k.fused.push_back(op_label<Op>::text(r.op));
  }
  template <class B, class E, class... O>
  plan_value node(B, const E& e, const O&... o) {
    using Op = typename E::op_type;
    planned_kernel k;
    std::vector<plan_value> reads;
    const std::string label = op_label<Op>::text(e.op);
    if constexpr (is_reduce_op<Op> || is_reduction_kernel<Op>) {
      k.kind = "reduction";
      reduction(e, o..., k, reads);
      return add(std::move(k), reads, e);
    } else if constexpr (fuses_prologue<Op>) {
      // a row kernel: the elementwise producer of its first operand runs inside it
      [&](const plan_mat& x, const auto&... rest) {
        if (x.tree) {
          k.fused = x.ops;
          reads = x.leaves;
        } else {
          reads.push_back(x.value);
        }
        (reads.push_back(rest.value), ...);
      }(o...);
      k.kind = "row";
      k.flops = 4.0 * static_cast<double>(numel_of(e)) + static_cast<double>(k.fused.size() * numel_of(e));
    } else {
      (reads.push_back(o.value), ...);
      if constexpr (std::is_same_v<Op, prim::matmul_>) {
        k.kind = "gemm";
        const auto& a = std::get<0>(e.children);
        const auto as = a.sizes();
        const std::int64_t K = as[rank_of<decltype(a)> - 1];
        k.flops = 2.0 * static_cast<double>(numel_of(e)) * static_cast<double>(K);
      } else {
        k.kind = std::string(Op::name);  // a prim's own kernel, or a native composite (conv2d, max_pool2d)
      }
    }
    if constexpr (requires { Op::kernel_flops(e); }) k.flops = Op::kernel_flops(e);
    if constexpr (requires { Op::template kernel_note<B>(e); }) k.note = Op::template kernel_note<B>(e);
    k.fused.push_back(label);
    return add(std::move(k), reads, e);
  }
  template <class E>
  plan_value pointwise(const E& e, const plan_mat& m) {
    planned_kernel k;
    k.kind = "pointwise";
    k.fused = m.ops;
    k.flops = static_cast<double>(m.ops.size()) * static_cast<double>(numel_of(e));
    return add(std::move(k), m.leaves, e);
  }
  template <class E>
  plan_value value(const E& e, const plan_mat& m) {
    return m.tree ? pointwise(e, m) : m.value;
  }
  template <class E>
  pattern_output output(const E&) {
    return {};
  }
  template <class M>
  plan_mat product(const M&, pattern_output) {  // the epilogue reads the GEMM's own tile
    return {true, {}, {}, {}};
  }
  template <class P, class B, class E>
  plan_value pattern(B, const E& e, pattern_output, const plan_mat& a, const plan_mat& bm, const plan_mat& tree)
    requires std::is_same_v<P, gemm_epilogue_pattern>
  {
    planned_kernel k;
    k.kind = P::kind;
    std::vector<plan_value> reads{a.value, bm.value};
    double mmflops = 0;
    visit_epilogue_matmul(e, [&](const auto& mm) {
      const auto as = std::get<0>(mm.children).sizes();
      mmflops = 2.0 * static_cast<double>(numel_of(mm)) * static_cast<double>(as[as.size() - 1]);
    });
    k.fused.push_back("matmul");
    k.fused.insert(k.fused.end(), tree.ops.begin(), tree.ops.end());
    reads.insert(reads.end(), tree.leaves.begin(), tree.leaves.end());
    k.flops = mmflops + static_cast<double>(tree.ops.size()) * static_cast<double>(numel_of(e));
    return add(std::move(k), reads, e);
  }
  template <class P, class B, class E>
  plan_value pattern(B, const E& e, pattern_output, const plan_mat& x)
    requires std::is_same_v<P, reduce_epilogue_pattern>
  {
    // one reduction kernel with the tree as its epilogue (mean, std, sqrt(sum(x * x) / n))
    planned_kernel k;
    k.kind = P::kind;
    std::vector<plan_value> reads;
    visit_epilogue_reduction(e, [&](const auto& r) { reduction(r, x, k, reads); });
    std::vector<std::string> ops;
    plan_reduction_epilogue_ops(e, ops);
    k.fused.insert(k.fused.end(), ops.begin(), ops.end());
    k.flops += static_cast<double>(ops.size()) * static_cast<double>(numel_of(e));
    return add(std::move(k), reads, e);
  }
  /// Any other pattern (a backend's own, as CUDA's gemm+bias_act): its kind, the reads of its
  /// operands (a fused tree's leaves and ops), and what the pattern says of itself
  /// (`describe(e, fused, flops)`, optional).
  template <class P, class B, class E, class... O>
  plan_value pattern(B, const E& e, pattern_output, const O&... o) {
    planned_kernel k;
    k.kind = P::kind;
    std::vector<plan_value> reads;
    auto take = [&](const plan_mat& x) {
      if (x.tree) {
        k.fused.insert(k.fused.end(), x.ops.begin(), x.ops.end());
        reads.insert(reads.end(), x.leaves.begin(), x.leaves.end());
      } else {
        reads.push_back(x.value);
      }
    };
    (take(o), ...);
    if constexpr (requires { P::describe(e, k.fused, k.flops); }) P::describe(e, k.fused, k.flops);
    return add(std::move(k), reads, e);
  }
};

/// Buffers live from the kernel that writes them to the last kernel that reads them (the result
/// to the end); peak = the largest sum of live buffers over the kernels.
inline void plan_memory(kernel_plan& p, int result_buffer) {
  const int nb = static_cast<int>(p.buffer_bytes.size());
  std::vector<int> first(nb, 0), last(nb, 0);
  for (int k = 0; k < p.size(); ++k) {
    const auto& ker = p.kernels[k];
    if (ker.writes >= 0) first[ker.writes] = last[ker.writes] = k;
    for (int r : ker.reads) last[r] = std::max(last[r], k);
  }
  if (result_buffer >= 0) last[result_buffer] = p.size();
  p.peak_bytes = 0;
  p.unplanned_bytes = 0;
  for (int i = 0; i < nb; ++i) p.unplanned_bytes += p.buffer_bytes[i];
  for (int k = 0; k < p.size(); ++k) {
    std::int64_t live = 0;
    for (int i = 0; i < nb; ++i)
      if (first[i] <= k && last[i] >= k) live += p.buffer_bytes[i];
    p.peak_bytes = std::max(p.peak_bytes, live);
  }
}

/// The kernel plan backend B runs for e (what evaluate(e) / `Tensor t = e;` does on B's device):
/// the lowering of schedule/lower.hpp, recorded instead of run.
template <class B, Expression E>
kernel_plan plan_on(const E& e) {
  auto d = decompose<B>(e);
  using D = decltype(d);
  plan_sink s;
  plan_value r = lower_value<B>(d, s);
  if constexpr (Node<D>) {
    if constexpr (prim::is_view_prim<typename D::op_type>) {
      // a root view: copied when it views an input (or is not contiguous; counted here when the
      // view reorders: permute, expand, slice and unfold)
      const bool reorders = !is_reshape_op<typename D::op_type>;
      if (r.buffer < 0 || reorders) {
        planned_kernel k;
        k.kind = "copy";
        k.fused.push_back(op_label<typename D::op_type>::text(d.op));
        k.output = type_text(d);
        r = {s.b.add_kernel(std::move(k), {r}, value_bytes(d)), value_bytes(d), nullptr};
      }
    }
  }
  plan_memory(s.b.plan, r.buffer);
  return s.b.plan;
}
/// The CPU backend's plan (tenet::compile plans the CPU's classes with it).
template <Expression E>
kernel_plan plan_cpu(const E& e) {
  return plan_on<cpu_simd>(e);
}
/// The plan of the backend of e's device (the device of its tensors; the CPU for none).
template <Expression E>
kernel_plan plan_for_device(const E& e) {
  return on_backend<kernel_plan>(expr_device(e), "tenet::plan",
                                 [&](auto b) { return plan_on<decltype(b)>(e); });
}

inline std::string bytes_text(std::int64_t n) {
  char buf[64];
  if (n >= (std::int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(n) / (1024.0 * 1024.0));
  else if (n >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(n) / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(n));
  return buf;
}

inline std::string flops_text(double f) {
  char buf[64];
  if (f >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GFLOP", f / 1e9);
  else if (f >= 1e6) std::snprintf(buf, sizeof buf, "%.2f MFLOP", f / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f FLOP", f);
  return buf;
}

inline std::string kernel_plan::text() const {
  std::string s;
  for (int i = 0; i < size(); ++i) {
    const auto& k = kernels[i];
    s += "  kernel " + std::to_string(i) + ": " + k.kind + " [";
    for (std::size_t j = 0; j < k.fused.size(); ++j) s += (j ? ", " : "") + k.fused[j];
    s += "] -> buf" + std::to_string(k.writes) + " " + k.output + "\n";
    s += "    reads " + bytes_text(k.bytes_read);
    if (!k.reads.empty()) {
      s += " (";
      for (std::size_t j = 0; j < k.reads.size(); ++j) s += (j ? ", " : "") + std::string("buf") + std::to_string(k.reads[j]);
      s += ")";
    }
    s += ", writes " + bytes_text(k.bytes_written) + ", " + flops_text(k.flops) + "\n";
    if (!k.note.empty()) s += "    " + k.note + "\n";
  }
  s += "  total: " + std::to_string(size()) + (size() == 1 ? " kernel, " : " kernels, ") + std::to_string(views) +
       (views == 1 ? " view" : " views") + " (no copy), " + std::to_string(cse_hits) + " reused (CSE), " + bytes_text(bytes()) + " moved, " + flops_text(flops()) + "\n";
  s += "  memory plan: inputs " + bytes_text(input_bytes) + "; intermediates and result peak " + bytes_text(peak_bytes) +
       " (" + bytes_text(unplanned_bytes) + " without reuse)\n";
  return s;
}

}  // namespace tenet::detail
