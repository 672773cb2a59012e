#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// tenet::compile(fn, options): torch.compile for a C++ function that returns a tenet expression.
//
//   auto f = tenet::compile([&](const auto& x) { return x + linear(gelu(linear(x, w1, b1)), w2, b2); },
//                           {.mode = tenet::compile_mode::max_autotune});
//   Tensor<float, shape<dyn, 1024>> y = f(x);
//
// What each part means here (docs/compile.md):
//   - The graph is the type of the expression fn returns (captured by the C++ compiler, so there is
//     no tracing cost and no graph break inside one expression). The scheduler's fusion, CSE of
//     shared values and the kernel plan (schedule/) apply to it; the compiled call returns exactly
//     what eager evaluation of the same expression returns.
//   - Guards: a shape class is the run-time extents of fn's tensor arguments. dynamic = false: the
//     plan specializes on the first extents seen (its memory plan and tuned settings are exact for
//     them); other extents fail the guard and get a plan of their own (a re-plan, never a C++
//     re-compile), up to cache_size_limit classes, after which the function runs as with
//     dynamic = true. dynamic = true: one plan for all extents; its memory arena grows to the
//     largest call.
//   - mode = default_: the plan runs on the default allocator.
//     reduce_overhead: the memory plan becomes real: the first call of a shape class records the
//     intermediates' sizes and lifetimes, assigns them offsets in one arena (buffers whose
//     lifetimes do not overlap share bytes) and later calls take every intermediate from the arena,
//     with no allocation (what CUDA graphs' static memory pool does for torch on a GPU). Results
//     are never in the arena: they are fresh tensors the caller owns.
//     max_autotune: reduce_overhead, plus on the first call of a shape class the expression is run
//     with each candidate thread count (1, 2, 4, ... up to OpenMP's maximum), then, when its plan
//     has a GEMM, with each candidate GEMM cache blocking (detail::cpu::gemm_blocking_candidates:
//     kc, mc, nc) at the fastest thread count; the fastest median of each is kept and used for
//     that class from then on. A blocking with another kc than the default changes the GEMM's
//     summation order: values then equal eager ones to rounding, not bit for bit.
//   - A training step: fn returns backward_of(loss); the call evaluates the loss and its backward
//     as one graph (gradients into .grad, shared forward values computed once) and returns the loss.
//   - CUDA tensors (CUDA translation units; backend/cuda/graph.hpp, docs/cuda.md): the device is
//     part of the shape class; the CUDA backend runs the expression; reduce_overhead and
//     max_autotune record the first call, capture a CUDA graph on the second and replay it after
//     (inputs copied into static tensors, results copied out); max_autotune tunes the pointwise
//     launch configuration instead of threads and GEMM blocking.
//   - fullgraph = true: fn must not evaluate anything itself (an `eval()` or a Tensor assignment
//     inside fn splits the graph in two, like a graph break in torch.compile); if it does, the call
//     throws tenet::value_error naming the count.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <omp.h>

#include <tenet/autograd.hpp>
#include <tenet/backend/compile_state.hpp>
#include <tenet/backend/evaluate.hpp>
#include <tenet/error.hpp>
#include <tenet/explain.hpp>
#include <tenet/backend/cpu/fused_backward.hpp>
#include <tenet/schedule/backward_fusion.hpp>
#include <tenet/debug/plan.hpp>
#include <tenet/tensor.hpp>

namespace tenet {


namespace detail {

/// The memory plan of one shape class: recorded on its first call, replayed from an arena after.
/// Storages it hands out keep the state they report to alive (a result may outlive the plan).
class arena_plan : public allocation_hook {
 public:
  struct block {
    std::size_t bytes = 0;
    std::size_t offset = 0;
    bool planned = false;     // freed within the call (an intermediate): it lives in the arena
    int first = 0, last = 0;  // event times
  };
  struct state {
    std::vector<block> blocks;
    std::vector<char> live;
    int time = 0;
    bool recording = false;
  };

  // --- recording ----------------------------------------------------------------------------
  void begin_record() {
    st_ = std::make_shared<state>();
    st_->recording = true;
    valid_ = false;
  }
  void end_record() {
    auto& s = *st_;
    s.recording = false;
    for (auto& b : s.blocks)
      if (!b.planned) b.last = s.time + 1;  // still alive after the call: a result, never in the arena
    assign_offsets();
    arena_.reset();
    if (arena_bytes_)
      arena_ = std::shared_ptr<void>(::operator new(arena_bytes_, std::align_val_t{64}),
                                     [](void* p) { ::operator delete(p, std::align_val_t{64}); });
    s.live.assign(s.blocks.size(), 0);
    valid_ = true;
  }
  // --- replay ---------------------------------------------------------------------------------
  void begin_replay() {
    next_ = 0;
    // a block still live from an earlier call (kept by the caller) keeps its bytes: reuse is
    // checked per allocation below
  }
  bool valid() const { return valid_; }
  std::size_t arena_bytes() const { return arena_bytes_; }
  std::size_t unplanned_bytes() const {
    std::size_t n = 0;
    if (st_)
      for (const auto& b : st_->blocks)
        if (b.planned) n += b.bytes;
    return n;
  }
  std::size_t intermediates() const {
    std::size_t n = 0;
    if (st_)
      for (const auto& b : st_->blocks) n += b.planned;
    return n;
  }
  std::int64_t arena_hits() const { return hits_; }
  std::int64_t arena_misses() const { return misses_; }

  std::shared_ptr<storage> allocate(std::size_t bytes) override {
    auto st = st_;
    if (!st) return nullptr;
    if (st->recording) {
      const int id = static_cast<int>(st->blocks.size());
      st->blocks.push_back({bytes, 0, false, ++st->time, 0});
      return std::shared_ptr<storage>(new storage(bytes, tenet::cpu), [st, id](storage* p) {
        if (st->recording) {
          st->blocks[static_cast<std::size_t>(id)].planned = true;
          st->blocks[static_cast<std::size_t>(id)].last = ++st->time;
        }
        delete p;
      });
    }
    // replay: the k-th allocation of the call gets its planned place when it matches the recording
    const std::size_t k = next_++;
    auto& bl = st->blocks;
    if (valid_ && k < bl.size() && bl[k].bytes == bytes && !bl[k].planned) return nullptr;  // a result
    if (!valid_ || k >= bl.size() || bl[k].bytes != bytes) {
      valid_ = false;  // the call differs from the recording: record again next time
      ++misses_;
      return nullptr;
    }
    // never hand out bytes a live block still uses (lifetimes that differ from the recording)
    for (std::size_t j = 0; j < bl.size(); ++j) {
      if (!st->live[j]) continue;
      if (bl[j].offset < bl[k].offset + bytes && bl[k].offset < bl[j].offset + bl[j].bytes) {
        ++misses_;
        return nullptr;
      }
    }
    st->live[k] = 1;
    ++hits_;
    return std::shared_ptr<storage>(new storage(static_cast<char*>(arena_.get()) + bl[k].offset, bytes, tenet::cpu, arena_),
                                    [st, k](storage* p) {
                                      st->live[k] = 0;
                                      delete p;
                                    });
  }

 private:
  /// Offsets by lifetime: largest blocks first, each at the lowest offset free of every placed
  /// block whose lifetime overlaps its own.
  void assign_offsets() {
    auto& bl = st_->blocks;
    std::vector<int> order;
    for (int i = 0; i < static_cast<int>(bl.size()); ++i)
      if (bl[static_cast<std::size_t>(i)].planned) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return bl[static_cast<std::size_t>(a)].bytes > bl[static_cast<std::size_t>(b)].bytes;
    });
    std::vector<int> placed;
    arena_bytes_ = 0;
    auto padded = [](std::size_t n) { return (n + 63) / 64 * 64; };
    for (int i : order) {
      auto& b = bl[static_cast<std::size_t>(i)];
      const std::size_t size = padded(b.bytes);
      std::vector<std::pair<std::size_t, std::size_t>> busy;
      for (int j : placed) {
        const auto& o = bl[static_cast<std::size_t>(j)];
        if (o.first <= b.last && b.first <= o.last) busy.emplace_back(o.offset, o.offset + padded(o.bytes));
      }
      std::sort(busy.begin(), busy.end());
      std::size_t at = 0;
      for (const auto& [lo, hi] : busy) {
        if (at + size <= lo) break;
        at = std::max(at, hi);
      }
      b.offset = at;
      arena_bytes_ = std::max(arena_bytes_, at + size);
      placed.push_back(i);
    }
  }

  std::shared_ptr<state> st_;
  std::shared_ptr<void> arena_;
  std::size_t arena_bytes_ = 0;
  std::size_t next_ = 0;
  bool valid_ = false;
  std::int64_t hits_ = 0, misses_ = 0;
};

/// Installs an allocation hook for a scope.
struct hook_scope {
  allocation_hook* previous;
  explicit hook_scope(allocation_hook* h) : previous(current_allocation_hook()) { current_allocation_hook() = h; }
  ~hook_scope() { current_allocation_hook() = previous; }
  hook_scope(const hook_scope&) = delete;
  hook_scope& operator=(const hook_scope&) = delete;
};

template <class A>
void append_extents(std::vector<std::int64_t>& key, const A& a) {
  if constexpr (TensorType<A>) {
    key.push_back(static_cast<std::int64_t>(A::rank));
    for (auto s : a.sizes()) key.push_back(s);
  } else if constexpr (Expression<A>) {
    key.push_back(-1 - static_cast<std::int64_t>(rank_of<A>));
    for (auto s : a.sizes()) key.push_back(s);
  }
}

/// A training step's loss, to be evaluated and backpropagated as one graph (backward_of).
template <class L>
struct loss_backward {
  L loss;
};
template <class R>
struct is_loss_backward : std::false_type {};
template <class L>
struct is_loss_backward<loss_backward<L>> : std::true_type {};

/// Forward and backward of a scalar loss as one planned graph (AOTAutograd's idea): the loss is
/// decomposed for autograd once; its value and every evaluation its backward makes share one CSE
/// session, so a forward value the backward needs (a GEMM's operand, a reduction, a softmax) is
/// the value the forward computed: those are the saved activations. Pointwise values are not
/// saved: the backward's fused loops recompute them (rematerialization). Gradients accumulate
/// into .grad of the tracked tensors, as loss.backward() does.
template <class L>
auto run_loss_backward(const L& loss) {
  using T = value_type_of<L>;
  if constexpr (TensorType<L>) {
    // already evaluated (a graph break inside fn): the eager tape does the backward
    Tensor<T, shape_of<L>> value = loss;
    if (value.requires_grad()) value.backward();
    return value.detach();
  } else {
    const cse_session session;
    auto d = decompose<ag::autograd_backend>(loss);
    Tensor<T, shape_of<L>> value;
    {
      const ag::grad_mode_guard off(false);
      value = evaluate_untracked(d);
    }
    if constexpr (TENET_AUTOGRAD) {
      if (ag::grad_mode() && ag::needs_grad(d)) {
        if (ag::fused_backward_enabled())
          ag::attach(ag::wrap_regions(d), value);  // pointwise regions fused (schedule/backward_fusion.hpp)
        else
          ag::attach(d, value);
        value.backward();
      }
    }
    return value.detach();
  }
}

template <class R>
struct is_tuple_result : std::false_type {};
template <class... T>
struct is_tuple_result<std::tuple<T...>> : std::true_type {};
template <class A, class B>
struct is_tuple_result<std::pair<A, B>> : std::true_type {};

/// The value of what fn returned: an expression evaluates, a Tensor is itself, a tuple or pair
/// evaluates each element.
template <class R>
auto evaluate_result(const R& r) {
  if constexpr (is_loss_backward<R>::value) {
    return run_loss_backward(r.loss);
  } else if constexpr (is_tuple_result<R>::value) {
    return detail::apply_tuple([](const auto&... x) { return std::make_tuple(evaluate_result(x)...); }, r);
  } else if constexpr (TensorType<R>) {
    return r;
  } else {
    static_assert(Expression<R>, "tenet::compile: the function must return a tenet expression, a Tensor, or a "
                                 "std::tuple / std::pair of them");
    return detail::evaluate(r);
  }
}

/// The kernel plan backend B runs for fn's result r (a tuple's plans one after the other).
template <class B, class R>
kernel_plan plan_result(const R& r) {
  if constexpr (is_loss_backward<R>::value) {
    return plan_result<B>(r.loss);  // the forward's plan (the backward's kernels are planned as it runs)
  } else if constexpr (is_tuple_result<R>::value) {
    kernel_plan all;
    detail::apply_tuple(
        [&](const auto&... x) {
          (
              [&](kernel_plan p) {
                all.kernels.insert(all.kernels.end(), p.kernels.begin(), p.kernels.end());
                all.views += p.views;
                all.input_bytes += p.input_bytes;
                all.peak_bytes = std::max(all.peak_bytes, p.peak_bytes);
                all.unplanned_bytes += p.unplanned_bytes;
              }(plan_result<B>(x)),
              ...);
        },
        r);
    return all;
  } else if constexpr (TensorType<R>) {
    return {};
  } else {
    return plan_on<B>(r);
  }
}

}  // namespace detail

/// One configuration max_autotune timed: thread count, GEMM blocking, median seconds of 3 runs.
struct autotune_trial {
  int threads = 0;
  detail::cpu::gemm_blocking blocking;
  double median_s = 0;
};

namespace detail {
/// The lane type whose GEMM blockings max_autotune tries: double for a double result, else float.
template <class R>
struct autotune_lane {
  using type = float;
};
template <class R>
  requires(Expression<R> && std::is_same_v<value_type_of<R>, double>)
struct autotune_lane<R> {
  using type = double;
};
inline bool plan_has_gemm(const kernel_plan& p) {
  for (const auto& k : p.kernels)
    if (k.kind.find("gemm") != std::string::npos || k.kind == "conv2d") return true;
  return false;
}
inline std::string blocking_text(const cpu::gemm_blocking& b) {
  return "mc " + std::to_string(b.mc) + ", kc " + std::to_string(b.kc) + ", nc " + std::to_string(b.nc);
}
}  // namespace detail


namespace detail {
/// The value type a compiled call of F on Args returns.
template <class F, class... Args>
using compile_result_t =
    decltype(evaluate_result(std::declval<const std::invoke_result_t<F&, const Args&...>&>()));
/// The device of the first tensor among args (the CPU when none); `mixed` when another differs.
template <class... Args>
device args_device(bool& mixed, const Args&... args) {
  bool found = false;
  device dev = tenet::cpu;
  mixed = false;
  auto one = [&](const auto& a) {
    using A = std::remove_cvref_t<decltype(a)>;
    if constexpr (TensorType<A> || Expression<A>)
      visit_leaves(a, [&](const auto& t) {
        if (!t.defined()) return;
        if (!found) dev = t.device(), found = true;
        else if (t.device() != dev) mixed = true;
      });
  };
  (one(args), ...);
  return dev;
}

/// A backend without a compiled path for its tensors.
template <class B, class F, class... Args>
compile_result_t<F, Args...> run_compiled(B, std::unique_ptr<device_class_state>&, F&, const compile_options&,
                                          compile_stats&, const std::vector<std::int64_t>&, const Args&... args) {
  bool mixed = false;
  const device dev = args_device(mixed, args...);
  if (has_backend(dev))  // the backend is compiled in, its compiled path is not included
    throw device_error("tenet::compile: no compiled path for tensors on " + dev.str() +
                       " in this translation unit; include <tenet/tenet.hpp> (or the backend's header, "
                       "e.g. <tenet/cuda.hpp>), which brings it");
  throw device_error("tenet::compile: no compiled path for tensors on " + dev.str());
}
}  // namespace detail

template <class F>
class compiled_function {
 public:
  compiled_function(F fn, compile_options opt) : fn_(std::move(fn)), opt_(opt) {}

  template <class... Args>
  auto operator()(const Args&... args) {
    ++stats_.calls;
    std::vector<std::int64_t> key;
    (detail::append_extents(key, args), ...);
    const std::vector<std::int64_t> extents = key;
    if (opt_.dynamic || static_cast<int>(classes_.size()) >= opt_.cache_size_limit) key.clear();
    bool mixed = false;
    const device dev = detail::args_device(mixed, args...);
    if (!dev.is_cpu()) key.insert(key.begin(), {-1000 - static_cast<std::int64_t>(dev.type), dev.index});  // a device change re-plans
    auto it = classes_.find(key);
    const bool fresh = it == classes_.end();
    if (fresh) {
      if (!classes_.empty() && !key.empty()) ++stats_.guard_failures;
      it = classes_.emplace(key, std::make_unique<shape_class>()).first;
      ++stats_.plans;
    }
    shape_class& c = *it->second;
    last_ = &c;
    if (!dev.is_cpu()) {  // the device's backend runs the class (CUDA: graphs, backend/cuda/graph.hpp)
      if (mixed)
        throw device_error("tenet::compile: the arguments are on more than one device (the first tensor is on " +
                           dev.str() + "); move them to one device first");
      return detail::on_backend<detail::compile_result_t<F, Args...>>(dev, "tenet::compile", [&](auto b) {
        // fn, traced by the backend on its own inputs: the class's first trace also plans it
        auto traced = [&](const auto&... a) {
          auto r = fn_(a...);
          if (!c.planned) {
            c.plan = detail::plan_result<decltype(b)>(r);
            c.planned = true;
          }
          return r;
        };
        return run_compiled(b, c.device_state, traced, opt_, stats_, extents, args...);
      });
    }

    // trace: run fn to get the expression (the graph is its type)
    const std::int64_t before = detail::evaluations();
    auto r = fn_(args...);
    const std::int64_t breaks = detail::evaluations() - before;
    if (opt_.fullgraph && breaks > 0)
      throw value_error("tenet::compile(fullgraph = true): the function evaluated " + std::to_string(breaks) +
                        " expression(s) itself (eval() or a Tensor assignment inside it), which splits the graph; "
                        "return one expression instead, or compile with fullgraph = false");
    if (fresh || (opt_.dynamic && !c.planned)) {
      c.plan = detail::plan_result<detail::cpu_simd>(r);
      c.planned = true;
    }
    c.graph_breaks = breaks;

    const int threads_before = omp_get_max_threads();
    if (opt_.mode == compile_mode::max_autotune && !c.tuned) autotune(c, r);
    struct threads_scope {
      int before, now;
      threads_scope(int b, int n) : before(b), now(n) {
        if (now > 0 && now != before) omp_set_num_threads(now);
      }
      ~threads_scope() {
        if (now > 0 && now != before) omp_set_num_threads(before);
      }
    } ts(threads_before, c.threads);
    std::optional<detail::cpu::gemm_blocking_scope> blocking;  // the tuned GEMM blocking for this call
    if (c.tuned_blocking) blocking.emplace(c.blocking);

    if (opt_.mode == compile_mode::default_) return detail::evaluate_result(r);
    // reduce_overhead / max_autotune: the memory plan
    if (!c.arena.valid()) {
      c.arena.begin_record();
      auto out = [&] {
        const detail::hook_scope hs(&c.arena);
        return detail::evaluate_result(r);
      }();
      c.arena.end_record();
      return out;
    }
    const std::int64_t h0 = c.arena.arena_hits(), m0 = c.arena.arena_misses();
    c.arena.begin_replay();
    auto out = [&] {
      const detail::hook_scope hs(&c.arena);
      return detail::evaluate_result(r);
    }();
    stats_.arena_hits += c.arena.arena_hits() - h0;
    stats_.arena_misses += c.arena.arena_misses() - m0;
    return out;
  }

  const compile_stats& stats() const { return stats_; }
  const compile_options& options() const { return opt_; }
  /// The kernel plan of the shape class of the last call, for the backend of its tensors' device
  /// (empty before the first call; for CUDA tensors, explain() also says what the graph ran).
  detail::kernel_plan plan() const { return last_ ? last_->plan : detail::kernel_plan{}; }
  /// Planned bytes of the memory arena of the last call's class (reduce_overhead, max_autotune).
  std::size_t arena_bytes() const { return last_ ? last_->arena.arena_bytes() : 0; }
  /// The thread count max_autotune chose for the last call's class (0: not tuned).
  int tuned_threads() const { return last_ ? last_->threads : 0; }
  /// The GEMM cache blocking max_autotune chose for the last call's class (all zero: not tuned, or
  /// its plan has no GEMM: the defaults apply).
  detail::cpu::gemm_blocking tuned_blocking() const {
    return last_ && last_->tuned_blocking ? last_->blocking : detail::cpu::gemm_blocking{};
  }
  /// Every configuration max_autotune timed for the last call's class, in order.
  std::vector<autotune_trial> autotune_trials() const { return last_ ? last_->trials : std::vector<autotune_trial>{}; }

  /// The last call's class: its kernel plan, memory plan and tuned settings.
  std::string explain() const {
    if (!last_) return "tenet::compile: not called yet\n";
    const char* modes[] = {"default", "reduce_overhead", "max_autotune"};
    std::string s = "compiled function: mode " + std::string(modes[static_cast<int>(opt_.mode)]) +
                    ", dynamic " + (opt_.dynamic ? "true" : "false") + ", fullgraph " + (opt_.fullgraph ? "true" : "false") +
                    "; " + std::to_string(stats_.calls) + " calls, " + std::to_string(stats_.plans) +
                    " shape class(es) planned, " + std::to_string(stats_.guard_failures) + " guard failure(s)\n";
    if (last_->device_state) return s + last_->device_state->text();  // what ran on the device (no CPU plan)
    s += last_->plan.text();
    if (opt_.mode != compile_mode::default_ && last_->arena.valid())
      s += "  memory arena: " + detail::bytes_text(static_cast<std::int64_t>(last_->arena.arena_bytes())) + " for " +
           std::to_string(last_->arena.intermediates()) + " intermediates of " +
           detail::bytes_text(static_cast<std::int64_t>(last_->arena.unplanned_bytes())) + "\n";
    if (last_->threads > 0) {
      s += "  autotuned: " + std::to_string(last_->threads) + " thread(s)";
      if (last_->tuned_blocking) s += ", GEMM blocking " + detail::blocking_text(last_->blocking);
      s += " (" + std::to_string(last_->trials.size()) + " configurations timed)\n";
      for (const auto& t : last_->trials) {
        char ms[32];
        std::snprintf(ms, sizeof ms, "%.3f ms", t.median_s * 1e3);
        s += "    " + std::to_string(t.threads) + " thread(s), " +
             (t.blocking.is_default() ? std::string("default blocking") : detail::blocking_text(t.blocking)) + ": " +
             ms + "\n";
      }
    }
    if (last_->graph_breaks > 0) s += "  graph breaks: " + std::to_string(last_->graph_breaks) + "\n";
    return s;
  }

 private:
  struct shape_class {
    detail::kernel_plan plan;
    bool planned = false;
    detail::arena_plan arena;
    int threads = 0;
    bool tuned = false;
    bool tuned_blocking = false;
    detail::cpu::gemm_blocking blocking;
    std::vector<autotune_trial> trials;
    std::int64_t graph_breaks = 0;
    std::unique_ptr<detail::device_class_state> device_state;  // a class of device tensors (CUDA)
  };

  /// Times the candidates on this call's inputs: thread counts at the default blocking, then (a
  /// plan with a GEMM) each candidate blocking at the fastest thread count. Each configuration:
  /// one warm-up run, then the median of three.
  template <class R>
  void autotune(shape_class& c, const R& r) {
    using L = typename detail::autotune_lane<R>::type;
    const int maxt = omp_get_max_threads();
    auto time = [&](int threads, detail::cpu::gemm_blocking blk, bool is_default) {
      omp_set_num_threads(threads);
      const detail::cpu::gemm_blocking_scope scope(blk);
      std::array<double, 3> times{};
      (void)detail::evaluate_result(r);  // warm-up
      for (auto& tm : times) {
        const auto t0 = std::chrono::steady_clock::now();
        (void)detail::evaluate_result(r);
        tm = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      std::sort(times.begin(), times.end());
      c.trials.push_back({threads, is_default ? detail::cpu::gemm_blocking{} : blk, times[1]});
      return times[1];
    };
    std::vector<int> candidates;
    for (int t = 1; t < maxt; t *= 2) candidates.push_back(t);
    candidates.push_back(maxt);
    double best = -1;
    int best_t = maxt;
    for (int t : candidates) {
      const double m = time(t, {}, true);
      if (best < 0 || m < best) best = m, best_t = t;
    }
    c.threads = best_t;
    if (detail::plan_has_gemm(c.plan)) {
      const auto blockings = detail::cpu::gemm_blocking_candidates<L>();
      detail::cpu::gemm_blocking best_b = blockings[0];  // the default, timed above
      for (std::size_t i = 1; i < blockings.size(); ++i) {
        const double m = time(best_t, blockings[i], false);
        if (m < best) best = m, best_b = blockings[i];
      }
      c.blocking = best_b;
      c.tuned_blocking = true;
    }
    omp_set_num_threads(maxt);
    c.tuned = true;
  }

  F fn_;
  compile_options opt_;
  std::map<std::vector<std::int64_t>, std::unique_ptr<shape_class>> classes_;
  shape_class* last_ = nullptr;
  compile_stats stats_;
};

/// A training step's result: compile(fn) where fn returns backward_of(loss) evaluates the scalar
/// loss and backpropagates it into .grad of the tensors that require grad, forward and backward
/// planned as one graph (detail::run_loss_backward); the call returns the loss value.
template <Expression L>
detail::loss_backward<L> backward_of(const L& loss) {
  static_assert(rank_of<L> == 0, "tenet::backward_of: the loss must be a scalar (0-dim) expression");
  static_assert(is_floating_v<value_type_of<L>>, "tenet::backward_of: the loss must have a floating dtype");
  return {loss};
}

/// torch.compile for tenet: see the top of this header and docs/compile.md.
template <class F>
compiled_function<F> compile(F fn, compile_options options = {}) {
  return compiled_function<F>(std::move(fn), options);
}

}  // namespace tenet

