#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// tenet::compile on CUDA tensors (nvcc only; included by include/tenet/cuda.hpp, the CUDA
// backend's public header, after <tenet/tenet.hpp>: compile.hpp's compile_result_t). One object per shape class of CUDA arguments (docs/compile.md, docs/cuda.md):
//
// - Every mode runs fn's expression with the CUDA backend: the same expression type, decomposed
//   for cuda_gpu as eager evaluation does. explain() reports what ran on the GPU: the tenet
//   kernels of an eager call, and the nodes of the captured graph.
// - reduce_overhead / max_autotune: the arguments are copied into static input tensors the class
//   owns; fn is called on those. The first call of a class runs eagerly while recording every
//   device allocation (size, when it was freed). The next call captures the evaluation into a
//   CUDA graph on a private non-blocking stream (thread-local capture mode) with every allocation
//   served from one arena the class owns (cudaMalloc'd before the capture; intermediates whose
//   lifetimes do not overlap share bytes; results each have their own place). Later calls copy the
//   arguments into the static inputs, launch the graph on the caller's current stream and copy
//   the results out into fresh tensors (results the caller holds are never overwritten).
// - fn is called again on every call (on the static inputs; it only builds the expression): the
//   expression's leaves (the captured weights' pointers, sizes, strides), scalars and op
//   parameters are compared with the captured ones; a difference re-captures. A change of the
//   autocast state or of set_allow_tf32 records the class again.
// - What cannot be captured (something that synchronizes: a host copy; an allocation sequence
//   that differs from the recording; a graph break) makes the class run eagerly from then on, with
//   the reason in explain(). gather / scatter are captured: their bad-index check writes the
//   device's fault record, which the host reads at its next wait (runtime.hpp).
// - max_autotune: on the first call the pointwise kernels' launch configuration (threads per
//   block x blocks per SM of the grid-stride grid) is timed with events over the candidates; the
//   fastest is used for the capture; the GEMMs of that call are tuned (matmul_tuning_scope:
//   cuBLASLt's candidate algorithms timed, the fastest kept per problem, gemm.hpp).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <cuda_runtime.h>

#include <tenet/backend/compile_state.hpp>
#include <tenet/backend/evaluate.hpp>
#include <tenet/backend/cuda/pointwise.cuh>
#include <tenet/backend/cuda/runtime.hpp>
#include <tenet/expr/cse.hpp>

namespace tenet::detail::cuda {

/// Records the device allocations of one eager call: sizes in order, and when each was freed.
class alloc_recorder final : public alloc_interceptor {
 public:
  struct block {
    std::size_t bytes = 0;
    int first = 0, last = 0;
    bool freed = false;  // freed within the call: an intermediate (else a result)
  };
  std::vector<block> blocks;

  void* serve(std::size_t, int) override { return nullptr; }
  void allocated(void* p, std::size_t n) override {
    ids_[p] = blocks.size();
    blocks.push_back({n, ++time_, 0, false});
  }
  bool release(void* p) noexcept override {
    auto it = ids_.find(p);
    if (it != ids_.end()) {
      blocks[it->second].freed = true;
      blocks[it->second].last = ++time_;
      ids_.erase(it);
    }
    return false;  // the allocator frees it as usual
  }

 private:
  std::unordered_map<void*, std::size_t> ids_;
  int time_ = 0;
};

/// Offsets of the recorded blocks in one arena: results each get their own bytes; intermediates
/// largest first at the lowest offset free of every placed block whose lifetime overlaps.
struct arena_layout {
  std::vector<alloc_recorder::block> blocks;
  std::vector<std::size_t> offset;
  std::size_t total = 0;     // arena bytes
  std::size_t unshared = 0;  // the blocks' bytes without sharing
  std::size_t results = 0;

  static std::size_t padded(std::size_t n) { return (n + 255) / 256 * 256; }
  void assign(std::vector<alloc_recorder::block> b) {
    blocks = std::move(b);
    const int end = INT_MAX;
    for (auto& x : blocks)
      if (!x.freed) x.last = end, ++results;
    offset.assign(blocks.size(), 0);
    std::vector<std::size_t> order(blocks.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t c) { return blocks[a].bytes > blocks[c].bytes; });
    std::vector<std::size_t> placed;
    total = unshared = 0;
    for (std::size_t i : order) {
      const auto& b = blocks[i];
      const std::size_t size = padded(b.bytes);
      unshared += size;
      std::vector<std::pair<std::size_t, std::size_t>> busy;
      for (std::size_t j : placed) {
        const auto& o = blocks[j];
        if (o.first <= b.last && b.first <= o.last) busy.emplace_back(offset[j], offset[j] + padded(o.bytes));
      }
      std::sort(busy.begin(), busy.end());
      std::size_t at = 0;
      for (const auto& [lo, hi] : busy) {
        if (at + size <= lo) break;
        at = std::max(at, hi);
      }
      offset[i] = at;
      total = std::max(total, at + size);
      placed.push_back(i);
    }
  }
};

/// Serves the allocations of a capture from the arena, in the recorded order; anything else
/// (another size, a block whose bytes are still in use) aborts the capture with the reason.
class arena_server final : public alloc_interceptor {
 public:
  arena_server(const arena_layout& l, char* base) : l_(l), base_(base), live_(l.blocks.size(), 0) {}
  void* serve(std::size_t n, int) override {
    const std::size_t k = next_++;
    if (k >= l_.blocks.size() || l_.blocks[k].bytes != n)
      throw device_error("tenet::compile: allocation " + std::to_string(k) + " of the capture (" + std::to_string(n) +
                         " bytes) differs from the recorded call (" +
                         (k < l_.blocks.size() ? std::to_string(l_.blocks[k].bytes) + " bytes" : std::string("none")) +
                         "): the evaluation is not the same sequence every call");
    const std::size_t lo = l_.offset[k], hi = lo + arena_layout::padded(n);
    for (std::size_t j = 0; j < live_.size(); ++j)
      if (live_[j] && l_.offset[j] < hi && lo < l_.offset[j] + arena_layout::padded(l_.blocks[j].bytes))
        throw device_error("tenet::compile: an intermediate of the capture lives longer than in the recorded call");
    live_[k] = 1;
    char* p = base_ + lo;
    ids_[p] = k;
    return p;
  }
  void allocated(void*, std::size_t) override {}
  bool release(void* p) noexcept override {
    auto it = ids_.find(p);
    if (it == ids_.end()) return false;
    live_[it->second] = 0;
    ids_.erase(it);
    return true;
  }

 private:
  const arena_layout& l_;
  char* base_;
  std::vector<char> live_;
  std::unordered_map<void*, std::size_t> ids_;
  std::size_t next_ = 0;
};

struct interceptor_scope {
  alloc_interceptor* previous;
  explicit interceptor_scope(alloc_interceptor* i) : previous(current_alloc_interceptor()) {
    current_alloc_interceptor() = i;
  }
  ~interceptor_scope() { current_alloc_interceptor() = previous; }
  interceptor_scope(const interceptor_scope&) = delete;
  interceptor_scope& operator=(const interceptor_scope&) = delete;
};
struct launch_scope {
  pointwise_launch previous;
  explicit launch_scope(pointwise_launch c) : previous(pointwise_config()) { pointwise_config() = c; }
  ~launch_scope() { pointwise_config() = previous; }
  launch_scope(const launch_scope&) = delete;
  launch_scope& operator=(const launch_scope&) = delete;
};

/// The identity of what a captured graph baked in: every tensor leaf's data pointer, sizes and
/// strides, every scalar, every op's parameters. False: an op's parameters cannot be compared.
template <class E>
bool append_graph_key(std::string& k, const E& e) {
  if constexpr (TensorType<E>) {
    append_bytes(k, static_cast<const void*>(e.defined() ? e.data() : nullptr));
    for (auto s : e.sizes()) append_bytes(k, s);
    for (auto s : e.strides()) append_bytes(k, s);
    return true;
  } else if constexpr (SharedNode<E>) {
    return append_graph_key(k, e.expr);
  } else if constexpr (ScalarLeaf<E>) {
    append_bytes(k, e.value);
    return true;
  } else if constexpr (Node<E>) {
    using Op = typename E::op_type;
    if constexpr (requires {
                    typename Op::group;
                    requires std::is_same_v<typename Op::group, prim::random_group>;
                  }) {
      return false;  // a random draw: a replay would repeat its values (its Philox offset is baked in)
    } else if constexpr (std::is_empty_v<Op>) {
    } else if constexpr (std::is_trivially_copyable_v<Op>) {
      append_bytes(k, e.op);  // padding bytes can only make a needless re-capture, never a stale one
    } else {
      return false;
    }
    return detail::apply_tuple([&](const auto&... c) { return (append_graph_key(k, c) && ...); }, e.children);
  } else {
    return true;  // nothing else is baked in
  }
}
template <class R>
bool graph_key(std::string& k, const R& r) {
  if constexpr (is_tuple_result<R>::value)
    return detail::apply_tuple([&](const auto&... x) { return (graph_key(k, x) && ...); }, r);
  else if constexpr (is_loss_backward<R>::value)
    return false;
  else
    return append_graph_key(k, r);
}

/// A fresh tensor holding src's values (on src's device, the current stream).
template <class T, class S>
Tensor<T, S> copy_out(const Tensor<T, S>& src, cudaStream_t s) {
  Tensor<T, S> r(src.sizes(), src.device());
  if (src.numel() == 0) return r;
  if (src.is_contiguous())
    TENET_CUDA_CHECK(cudaMemcpyAsync(r.data(), src.data(), static_cast<std::size_t>(src.numel()) * sizeof(T),
                                     cudaMemcpyDeviceToDevice, s));
  else
    run_pointwise(r, src);
  return r;
}
template <class... T>
std::tuple<T...> copy_out(const std::tuple<T...>& src, cudaStream_t s) {
  return detail::apply_tuple([&](const auto&... x) { return std::tuple<T...>(copy_out(x, s)...); }, src);
}
/// dst (static, contiguous) = src on stream s.
template <class T, class S>
void copy_in(const Tensor<T, S>& dst, const Tensor<T, S>& src, cudaStream_t s) {
  if (src.numel() == 0) return;
  if (src.is_contiguous())
    TENET_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), static_cast<std::size_t>(src.numel()) * sizeof(T),
                                     cudaMemcpyDeviceToDevice, s));
  else
    run_pointwise(dst, src);
}

/// One max_autotune trial: the pointwise launch configuration and its median time.
struct pointwise_trial {
  pointwise_launch cfg;
  double median_ms = 0;
};

template <class F, class... Args>
class graph_class final : public device_class_state {
 public:
  using R = std::invoke_result_t<F&, const Args&...>;
  using Out = compile_result_t<F, Args...>;
  static constexpr bool all_tensors = (TensorType<Args> && ...);

  graph_class(device d, const compile_options& o, std::vector<std::int64_t> extents)
      : dev_(d), opt_(o), extents_(std::move(extents)) {}
  ~graph_class() override { reset(); }

  const std::vector<std::int64_t>& extents() const { return extents_; }

  Out call(F& fn, compile_stats& st, const Args&... args) {
    device_context ctx(dev_);
    ++calls_;
    const bool graphs = opt_.mode != compile_mode::default_;
    if constexpr (!all_tensors) {
      if (graphs && reason_.empty())
        reason_ = "an argument is not a Tensor (its value would be baked into the graph); the calls run eagerly";
      if (graphs) ++st.graph_fallbacks;
      return eager(fn, args...);
    } else {
      if (!graphs) return eager(fn, args...);
      if constexpr (is_loss_backward<R>::value) {
        if (reason_.empty()) reason_ = "a training step (backward_of) is not captured; the calls run eagerly";
        ++st.graph_fallbacks;
        return eager(fn, args...);
      }
      if (phase_ == phase::eager_only) {
        ++st.graph_fallbacks;
        return eager(fn, args...);
      }
      const cudaStream_t s = current_stream();
      if (done_ && s != last_stream_) TENET_CUDA_CHECK(cudaStreamWaitEvent(s, done_, 0));
      if (!statics_) statics_.emplace(Args(args.sizes(), dev_)...);
      detail::apply_tuple([&](const auto&... st_) { (copy_in(st_, args, s), ...); }, *statics_);
      if (phase_ == phase::fresh) return record(fn, s);
      // build the expression on the static inputs (no evaluation) and check what the graph baked in
      const std::int64_t ev0 = evaluations();
      std::optional<R> r;
      r.emplace(detail::apply_tuple([&](const auto&... a) { return fn(a...); }, *statics_));
      std::string key;
      const bool comparable = graph_key(key, *r);
      if (evaluations() != ev0 || !comparable) {
        fall_back(evaluations() != ev0 ? graph_break_text(evaluations() - ev0)
                                       : std::string("an op's parameters cannot be compared between calls, or it "
                                                     "draws random numbers (dropout, rand_lazy), which a replay "
                                                     "would repeat"));
        ++st.graph_fallbacks;
        return finish(evaluate_result(*r), s);
      }
      if (phase_ == phase::captured && key != key_) {
        ++recaptures_;
        drop_graph();
        phase_ = phase::recorded;
      }
      if (phase_ == phase::recorded) {
        if (!capture(std::move(r), std::move(key))) {
          ++st.graph_fallbacks;
          return finish(eager_statics(fn), s);
        }
        ++st.graph_captures;
      }
      note_graph_launch(dev_.index, s);  // a captured gather / scatter reports bad indices at the next wait
      TENET_CUDA_CHECK(cudaGraphLaunch(exec_, s));
      ++launches_;
      ++st.graph_launches;
      return finish(copy_out(*outputs_, s), s);
    }
  }

  std::string text() const override {
    std::string s = "  CUDA shape class on " + dev_.str() + ": " + std::to_string(calls_) + " call(s); an eager call launches " +
                    (eager_kernels_ >= 0 ? std::to_string(eager_kernels_) : std::string("?")) +
                    " tenet kernel(s) on the GPU (" + std::to_string(eager_pointwise_) +
                    " pointwise; the CUDA backend's cuda_gpu decomposition)\n";
    if (opt_.mode == compile_mode::default_) return s + "  mode default: every call runs eagerly (no CUDA graph)\n";
    if (phase_ == phase::captured || launches_ > 0) {
      s += "  CUDA graph: captured " + std::to_string(captures_) + " time(s) (" + std::to_string(recaptures_) +
           " re-capture(s) after a weight, scalar or parameter changed), launched " + std::to_string(launches_) +
           " time(s); " + std::to_string(nodes_) + " node(s): " + std::to_string(kernel_nodes_) + " kernel(s), " +
           std::to_string(memcpy_nodes_) + " memcpy, " + std::to_string(memset_nodes_) + " memset, " +
           std::to_string(nodes_ - kernel_nodes_ - memcpy_nodes_ - memset_nodes_) + " other\n";
      s += "  graph memory: arena " + bytes_text(static_cast<std::int64_t>(layout_.total)) + " for " +
           std::to_string(layout_.blocks.size() - layout_.results) + " intermediate(s) and " +
           std::to_string(layout_.results) + " result(s) (" + bytes_text(static_cast<std::int64_t>(layout_.unshared)) +
           " without sharing); inputs are copied into static tensors, results copied out into fresh ones\n";
    } else if (phase_ == phase::recorded) {
      s += "  CUDA graph: recorded the first call (" + std::to_string(layout_.blocks.size()) +
           " device allocation(s)); the next call captures\n";
    }
    if (!reason_.empty()) s += "  no CUDA graph, the calls run eagerly: " + reason_ + "\n";
    if (tuned_) {
      char b[96];
      std::snprintf(b, sizeof b, "  autotuned pointwise launch: %d threads per block, %d blocks per SM (%zu timed)\n",
                    tuned_cfg_.threads, tuned_cfg_.blocks_per_sm, trials_.size());
      s += b;
      for (const auto& t : trials_) {
        std::snprintf(b, sizeof b, "    %4d threads, %2d blocks/SM: %.4f ms\n", t.cfg.threads, t.cfg.blocks_per_sm,
                      t.median_ms);
        s += b;
      }
    } else if (opt_.mode == compile_mode::max_autotune && phase_ != phase::fresh && eager_pointwise_ == 0) {
      s += "  autotune: no pointwise kernel to tune\n";
    }
    return s;
  }

  bool tuned() const { return tuned_; }
  pointwise_launch tuned_launch() const { return tuned_cfg_; }
  const std::vector<pointwise_trial>& trials() const { return trials_; }
  const std::string& reason() const { return reason_; }

 private:
  enum class phase { fresh, recorded, captured, eager_only };

  /// fullgraph = true: a graph break is an error, as on the CPU.
  std::string graph_break_text(std::int64_t n) const {
    if (opt_.fullgraph)
      throw value_error("tenet::compile(fullgraph = true): the function evaluated " + std::to_string(n) +
                        " expression(s) itself (eval() or a Tensor assignment inside it), which splits the graph; "
                        "return one expression instead, or compile with fullgraph = false");
    return "graph break: the function evaluated " + std::to_string(n) +
           " expression(s) itself (its value would be baked into the graph)";
  }

  Out eager(F& fn, const Args&... args) {
    const std::int64_t ev0 = evaluations();
    auto r = fn(args...);
    if (evaluations() != ev0) (void)graph_break_text(evaluations() - ev0);  // throws under fullgraph
    const std::int64_t k0 = kernels_launched(), p0 = pointwise_launches();
    Out o = evaluate_result(r);
    eager_kernels_ = kernels_launched() - k0;
    eager_pointwise_ = pointwise_launches() - p0;
    return o;
  }
  Out eager_statics(F& fn) {
    auto r = detail::apply_tuple([&](const auto&... a) { return fn(a...); }, *statics_);
    const launch_scope ls(tuned_ ? tuned_cfg_ : pointwise_config());
    return evaluate_result(r);
  }
  /// A result that is (a view of) a static input is copied: the next call overwrites the inputs.
  template <class T, class S>
  void unalias(Tensor<T, S>& t, cudaStream_t s) {
    bool shares = false;
    detail::apply_tuple([&](const auto&... x) { ((shares = shares || t.shares_storage(x)), ...); }, *statics_);
    if (shares) t = copy_out(t, s);
  }
  template <class... T>
  void unalias(std::tuple<T...>& t, cudaStream_t s) {
    detail::apply_tuple([&](auto&... x) { (unalias(x, s), ...); }, t);
  }
  Out finish(Out o, cudaStream_t s) {
    if constexpr (all_tensors)
      if (statics_) unalias(o, s);
    if (!done_) TENET_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    TENET_CUDA_CHECK(cudaEventRecord(done_, s));
    last_stream_ = s;
    return o;
  }
  void fall_back(std::string why) {
    reason_ = std::move(why);
    phase_ = phase::eager_only;
    drop_graph();
  }

  /// The first call: eager on the static inputs, every device allocation recorded.
  Out record(F& fn, cudaStream_t s) {
    const std::int64_t ev0 = evaluations();
    auto r = detail::apply_tuple([&](const auto&... a) { return fn(a...); }, *statics_);
    if (evaluations() != ev0) {
      fall_back(graph_break_text(evaluations() - ev0));
      return finish(evaluate_result(r), s);
    }
    alloc_recorder rec;
    const std::int64_t k0 = kernels_launched(), p0 = pointwise_launches();
    std::optional<Out> o;
    {
      const interceptor_scope is(&rec);
      // max_autotune: the class's GEMMs are tuned on this call (cuBLASLt's candidates timed)
      std::optional<matmul_tuning_scope> tuning;
      if (opt_.mode == compile_mode::max_autotune) tuning.emplace();
      o.emplace(evaluate_result(r));
    }
    eager_kernels_ = kernels_launched() - k0;
    eager_pointwise_ = pointwise_launches() - p0;
    layout_.assign(std::move(rec.blocks));
    if (opt_.mode == compile_mode::max_autotune && eager_pointwise_ > 0) autotune(r, s);
    phase_ = phase::recorded;
    return finish(std::move(*o), s);
  }

  /// Times each pointwise launch configuration (one warm-up, median of three, CUDA events).
  void autotune(const R& r, cudaStream_t s) {
    const int threads[] = {128, 256, 512, 1024};
    const int per_sm[] = {4, 16, 32, 64};
    cudaEvent_t a = nullptr, b = nullptr;
    TENET_CUDA_CHECK(cudaEventCreate(&a));
    TENET_CUDA_CHECK(cudaEventCreate(&b));
    double best = -1;
    try {
      for (int t : threads)
        for (int q : per_sm) {
          const launch_scope ls(pointwise_launch{t, q});
          (void)evaluate_result(r);  // warm-up
          double ms[3];
          for (double& m : ms) {
            TENET_CUDA_CHECK(cudaEventRecord(a, s));
            (void)evaluate_result(r);
            TENET_CUDA_CHECK(cudaEventRecord(b, s));
            TENET_CUDA_CHECK(cudaEventSynchronize(b));
            float f = 0;
            TENET_CUDA_CHECK(cudaEventElapsedTime(&f, a, b));
            m = f;
          }
          std::sort(ms, ms + 3);
          trials_.push_back({pointwise_launch{t, q}, ms[1]});
          if (best < 0 || ms[1] < best) best = ms[1], tuned_cfg_ = pointwise_launch{t, q};
        }
    } catch (...) {
      (void)cudaEventDestroy(a);
      (void)cudaEventDestroy(b);
      throw;
    }
    (void)cudaEventDestroy(a);
    (void)cudaEventDestroy(b);
    tuned_ = true;
  }

  /// Captures the evaluation of r (built on the static inputs) into a graph; false: it cannot be
  /// captured (the reason is kept, the class runs eagerly from now on).
  bool capture(std::optional<R> r, std::string key) {
    if (!arena_ && layout_.total) {
      const cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&arena_), layout_.total);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fall_back(std::string("cudaMalloc of the graph's arena (") + std::to_string(layout_.total) +
                  " bytes) failed: " + cudaGetErrorString(e));
        return false;
      }
    }
    if (!cap_) TENET_CUDA_CHECK(cudaStreamCreateWithFlags(&cap_, cudaStreamNonBlocking));
    arena_server srv(layout_, arena_);
    std::string why;
    cudaGraph_t g = nullptr;
    {
      const interceptor_scope is(&srv);
      const launch_scope ls(tuned_ ? tuned_cfg_ : pointwise_config());
      cudaStream_t& slot = current_stream_slot();
      const cudaStream_t prev = slot;
      slot = cap_;
      capturing_graph() = true;
      cudaError_t eb = cudaStreamBeginCapture(cap_, cudaStreamCaptureModeThreadLocal);
      if (eb != cudaSuccess) {
        (void)cudaGetLastError();
        why = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(eb);
      } else {
        try {
          outputs_.emplace(evaluate_result(*r));
        } catch (const std::exception& e) {
          why = e.what();
        }
        const cudaError_t ec = cudaStreamEndCapture(cap_, &g);
        if (ec != cudaSuccess) {
          (void)cudaGetLastError();
          if (why.empty()) why = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ec);
        }
      }
      capturing_graph() = false;
      slot = prev;
    }
    if (why.empty()) {
      const cudaError_t ei = cudaGraphInstantiate(&exec_, g, 0);
      if (ei != cudaSuccess) {
        (void)cudaGetLastError();
        exec_ = nullptr;
        why = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(ei);
      }
    }
    graph_ = g;
    if (!why.empty()) {
      fall_back("the capture failed: " + why);
      return false;
    }
    count_nodes();
    expr_ = std::move(r);
    key_ = std::move(key);
    ++captures_;
    phase_ = phase::captured;
    return true;
  }

  void count_nodes() {
    std::size_t n = 0;
    TENET_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &n));
    std::vector<cudaGraphNode_t> v(n);
    if (n) TENET_CUDA_CHECK(cudaGraphGetNodes(graph_, v.data(), &n));
    nodes_ = static_cast<std::int64_t>(n);
    kernel_nodes_ = memcpy_nodes_ = memset_nodes_ = 0;
    for (auto node : v) {
      cudaGraphNodeType t;
      TENET_CUDA_CHECK(cudaGraphNodeGetType(node, &t));
      kernel_nodes_ += t == cudaGraphNodeTypeKernel;
      memcpy_nodes_ += t == cudaGraphNodeTypeMemcpy;
      memset_nodes_ += t == cudaGraphNodeTypeMemset;
    }
  }

  /// Destroys the graph and what it holds (its outputs point into the arena, which stays).
  void drop_graph() {
    if (exec_ || graph_) (void)cudaStreamSynchronize(last_stream_);  // a launch may still run
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    if (graph_) (void)cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
    outputs_.reset();  // arena memory: the allocator ignores it
    expr_.reset();
  }
  void reset() {
    drop_graph();
    if (arena_) {
      (void)cudaDeviceSynchronize();
      (void)cudaFree(arena_);
    }
    arena_ = nullptr;
    if (cap_) (void)cudaStreamDestroy(cap_);
    cap_ = nullptr;
    if (done_) (void)cudaEventDestroy(done_);
    done_ = nullptr;
  }

  device dev_;
  compile_options opt_;
  std::vector<std::int64_t> extents_;
  phase phase_ = phase::fresh;
  std::string reason_;
  std::optional<std::tuple<Args...>> statics_;
  arena_layout layout_;
  char* arena_ = nullptr;
  std::optional<R> expr_;     // the captured expression (keeps the weights it baked in alive)
  std::string key_;           // what it baked in
  std::optional<Out> outputs_;  // the graph's results (in the arena)
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaStream_t cap_ = nullptr;
  cudaEvent_t done_ = nullptr;
  cudaStream_t last_stream_ = nullptr;
  std::int64_t calls_ = 0, captures_ = 0, recaptures_ = 0, launches_ = 0;
  std::int64_t eager_kernels_ = -1, eager_pointwise_ = 0;
  std::int64_t nodes_ = 0, kernel_nodes_ = 0, memcpy_nodes_ = 0, memset_nodes_ = 0;
  bool tuned_ = false;
  pointwise_launch tuned_cfg_;
  std::vector<pointwise_trial> trials_;
};

/// compile's entry for a shape class of CUDA arguments (run_compiled below).
template <class F, class... Args>
compile_result_t<F, Args...> compiled_call(std::unique_ptr<device_class_state>& state, F& fn, const compile_options& opt,
                                           compile_stats& stats, const std::vector<std::int64_t>& extents,
                                           const Args&... args) {
  using G = graph_class<F, Args...>;
  bool mixed = false;
  const device dev = args_device(mixed, args...);
  // what the recording and a capture depend on besides the extents: autocast and TF32 choose other
  // kernels and allocations, so a change records again
  std::vector<std::int64_t> key = extents;
  const auto& ac = cuda_autocast_slot();
  key.push_back(ac.enabled ? 1 + static_cast<std::int64_t>(ac.low) : 0);
  key.push_back(allow_tf32_flag().load() ? 1 : 0);
  auto* g = dynamic_cast<G*>(state.get());
  // a new class, other argument types, (dynamic = true) other extents, another autocast / TF32
  // setting: a fresh recording
  if (!g || g->extents() != key) {
    if (g) ++stats.plans;
    state = std::make_unique<G>(dev, opt, std::move(key));
    g = static_cast<G*>(state.get());
  }
  return g->call(fn, stats, args...);
}

}  // namespace tenet::detail::cuda

namespace tenet::detail {
/// tenet::compile's call for a class of CUDA tensors (backend/compile_state.hpp).
template <class F, class... Args>
compile_result_t<F, Args...> run_compiled(cuda_gpu, std::unique_ptr<device_class_state>& state, F& fn,
                                          const compile_options& opt, compile_stats& stats,
                                          const std::vector<std::int64_t>& extents, const Args&... args) {
  return cuda::compiled_call(state, fn, opt, stats, extents, args...);
}
}  // namespace tenet::detail
