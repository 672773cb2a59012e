#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The eager autograd graph: one `meta` per tensor identity, one `node` per recorded step, and the
// engine that runs the nodes in reverse topological order.
//
//   meta      requires_grad, the accumulated .grad (leaves), grad_fn (the node that produced it)
//   node      an evaluated expression (record.hpp) or a view (view_node below); `apply` turns the
//             gradient of its output into gradients of its inputs and pushes them to their metas
//   backward  collects the nodes reachable from the root, checks none was freed (retain_graph),
//             seeds the root and runs each node once, after every node that feeds it
//
// Gradients travel type-erased as std::any holding Tensor<T, dyn_shape<R>> (T and R are fixed for
// one identity). Pending gradients of a node are summed out of place (never written in place, so a
// gradient tensor given to two inputs is never changed behind one's back).
#include <algorithm>
#include <any>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <tenet/autocast.hpp>
#include <tenet/autograd/device.hpp>
#include <tenet/runtime/grad_mode.hpp>
#include <tenet/error.hpp>
#include <tenet/expr/node.hpp>
#include <tenet/prims/elementwise.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail {
/// evaluate() without the autograd hook (backend/evaluate.hpp): the backward pass evaluates its
/// gradient expressions with it, so deriving a VJP never instantiates the VJP of the VJP.
template <Expression E>
auto evaluate_untracked(const E& e);
}

namespace tenet::detail::ag {
/// The value of an expression the backward computes (a rule's gradient, a forward value): plain
/// evaluation, or, while a create_graph backward runs (grad mode on), also recorded as a node of
/// the graph so the gradient can be differentiated again (vjp.hpp).
template <class E>
auto backward_value(const E& e);
}

namespace tenet::detail::ag {

/// RAII: sets this thread's grad mode, restores the previous one on exit.
class grad_mode_guard {
 public:
  explicit grad_mode_guard(bool on) : previous_(grad_mode()) { grad_mode() = on; }
  ~grad_mode_guard() { grad_mode() = previous_; }
  grad_mode_guard(const grad_mode_guard&) = delete;
  grad_mode_guard& operator=(const grad_mode_guard&) = delete;

 private:
  bool previous_;
};

struct jvp_context;  // forward mode over a recorded graph (jvp.hpp)

struct grad_node {
  grad_node() : autocast(cuda_autocast_slot()) {}
  virtual ~grad_node() = default;
  /// Pushes the gradients of the inputs, given the gradient of the output (pending).
  virtual void apply(const std::any& grad_output) = 0;
  /// Frees what the node saved for backward (the forward expression and its tensors).
  virtual void release() = 0;
  virtual std::string name() const = 0;
  /// The tangent of the output (an any of grad_tensor) given the tangents reaching the inputs
  /// (forward mode, jvp.hpp).
  virtual std::any tangent(jvp_context& ctx) const = 0;
  /// The identities this node pushes gradients to (unique; only those that take part in autograd).
  std::vector<std::shared_ptr<meta>> inputs;
  std::any pending;
  bool released = false;
  /// This thread's CUDA autocast state when the node was recorded; the engine runs the node's
  /// backward under it, so the products of an autocast forward's backward run in its low dtype too
  /// (torch records the forward's casts, so its backward matmuls are fp16 / bf16).
  autocast_state autocast;
};

/// Tangents of the seeded identities and of the nodes computed so far.
struct jvp_context {
  std::unordered_map<const meta*, std::any> seeds;
  std::unordered_map<const grad_node*, std::any> memo;
};

struct meta {
  bool requires_grad = false;
  std::shared_ptr<grad_node> grad_fn;  // null for a leaf
  std::any grad;                  // Tensor<T, dyn_shape<R>> of a leaf
  /// Called by run_backward once per backward that accumulates into this leaf's .grad, after the
  /// last gradient of that backward reached it (torch's post-accumulate-grad hooks); keyed by id
  /// for removal.
  std::vector<std::pair<std::uint64_t, std::function<void()>>> post_accumulate_hooks;
};

template <class T, std::size_t R>
using grad_tensor = Tensor<T, dyn_shape<R>>;

// ---------------------------------------------------------------------------------------------
// Saved tensors' versions (PyTorch's check of saved variables). Every in-place write bumps its
// storage's version counter (storage::version). A node records the versions of the storages its
// backward may read when it is recorded (saved_versions); while it runs, every read of a forward
// value checks its storage (check_version, from forward_value / saved_value in vjp.hpp) and throws
// value_error when the version moved: a gradient is never computed from a changed value. Values
// a rule does not read (mul's operand when the other one needs no gradient) are not checked
// (unread_scope), as PyTorch does not save them.

/// The versions of the storages one node's backward may read, as they were when it was recorded.
/// Raw pointers, compared and never followed: what a node reads (its expression's leaves, its
/// saved values) it keeps alive, so no other storage can take one of their addresses meanwhile.
struct saved_versions {
  std::vector<std::pair<const storage*, std::uint64_t>> at;
  void add(const storage* s) {
    if (!s) return;
    for (const auto& e : at)
      if (e.first == s) return;
    at.emplace_back(s, s->version.load(std::memory_order_relaxed));
  }
  template <class T, class S>
  void add(const Tensor<T, S>& t) {
    add(t.storage().get());
  }
};

/// This thread's running node's versions (null outside a node's backward), whether the value being
/// computed is one no rule reads, and the rule that reads (for the message).
struct version_check_state {
  const saved_versions* saved = nullptr;
  bool unread = false;
  std::string_view reader = "backward";
};
inline version_check_state& version_check() {
  thread_local version_check_state s;
  return s;
}
/// RAII: the versions the node about to run recorded (a node's apply / tangent).
class saved_versions_scope {
 public:
  explicit saved_versions_scope(const saved_versions* v) : previous_(version_check()) {
    version_check() = version_check_state{v, false, "backward"};
  }
  ~saved_versions_scope() { version_check() = previous_; }
  saved_versions_scope(const saved_versions_scope&) = delete;
  saved_versions_scope& operator=(const saved_versions_scope&) = delete;

 private:
  version_check_state previous_;
};
/// RAII: the rule of prim `name` is reading its forward values.
class reader_scope {
 public:
  explicit reader_scope(std::string_view name) : previous_(version_check().reader) { version_check().reader = name; }
  ~reader_scope() { version_check().reader = previous_; }
  reader_scope(const reader_scope&) = delete;
  reader_scope& operator=(const reader_scope&) = delete;

 private:
  std::string_view previous_;
};
/// RAII: while `on`, the values computed are not read by the rule (only their sizes are), so a
/// changed storage among them is no error (PyTorch would not have saved it).
class unread_scope {
 public:
  explicit unread_scope(bool on) : previous_(version_check().unread) { version_check().unread = previous_ || on; }
  ~unread_scope() { version_check().unread = previous_; }
  unread_scope(const unread_scope&) = delete;
  unread_scope& operator=(const unread_scope&) = delete;

 private:
  bool previous_;
};

/// Throws value_error when t's storage is one the running node recorded and was written in place
/// since (PyTorch's "modified by an inplace operation").
template <class T, class S>
void check_version(const Tensor<T, S>& t) {
  const version_check_state& st = version_check();
  if (!st.saved || st.unread || !t.storage()) return;
  const storage* s = t.storage().get();
  for (const auto& [p, v] : st.saved->at) {
    if (p != s) continue;
    const std::uint64_t now = s->version.load(std::memory_order_relaxed);
    if (now != v)
      throw value_error("tenet: backward: one of the tensors needed for gradient computation has been modified by an "
                        "inplace operation: the " + std::string(tenet::name(dtype_of<T>)) + " tensor of sizes " +
                        sizes_text(t.sizes()) + " that the backward of '" + std::string(st.reader) +
                        "' reads was saved at version " + std::to_string(v) + ", now version " + std::to_string(now) +
                        " (a tensor saved for backward must not be written in place, through any view, until the "
                        "backward has run; clone() it first, or write after backward)");
    return;
  }
}

/// What the running backward does with gradients (run_backward sets it for its thread).
///   create_graph       the backward records what it computes (grad mode is on), so the
///                      gradients have a graph of their own (second order)
///   accumulate_leaves  false for tenet::autograd::grad: leaves' .grad is left alone
///   captures           the identities whose gradients grad() returns, summed here
///   skip               nodes that lead to no captured identity (grad() does not run them)
struct backward_context {
  bool create_graph = false;
  bool accumulate_leaves = true;
  std::unordered_map<const meta*, std::any>* captures = nullptr;
  const std::unordered_set<const grad_node*>* skip = nullptr;
  /// Run after the last node, in order (autograd::queue_callback; torch's queue_callback).
  std::vector<std::function<void()>> final_callbacks;
  /// The leaves with post-accumulate hooks that received a gradient in this backward.
  mutable std::unordered_set<const meta*> hooked_received;
  /// Which backward this is (1, 2, ... per process): hooks tell one backward from the next.
  std::uint64_t serial = 0;
};
inline backward_context*& current_backward() {
  thread_local backward_context* ctx = nullptr;
  return ctx;
}
class backward_context_scope {
 public:
  explicit backward_context_scope(backward_context* c) : previous_(current_backward()) { current_backward() = c; }
  ~backward_context_scope() { current_backward() = previous_; }
  backward_context_scope(const backward_context_scope&) = delete;
  backward_context_scope& operator=(const backward_context_scope&) = delete;

 private:
  backward_context* previous_;
};

/// The dtypes autograd records: float32, float64, bfloat16 and float16 (a 16-bit gradient is
/// 16-bit, as torch's; each rule's kernels compute in float and round per prim, as the forward).
template <class T>
inline constexpr bool is_autograd_dtype =
    TENET_AUTOGRAD && (std::is_same_v<T, float> || std::is_same_v<T, double> || half_precision<T>);

/// True when gradients flow to this tensor (it requires grad, as a leaf or through its grad_fn).
template <class T, class S>
bool is_tracked(const Tensor<T, S>& t) {
  const auto& m = t.autograd_meta();
  return m && (m->requires_grad || m->grad_fn);
}

/// slot += g, out of place (slot empty: slot = g).
template <class T, class S>
void accumulate(std::any& slot, const Tensor<T, S>& gs) {
  constexpr std::size_t R = S::rank;
  const grad_tensor<T, R> g(gs);
  if (!slot.has_value()) {
    slot = g;
    return;
  }
  auto* old = std::any_cast<grad_tensor<T, R>>(&slot);
  if (old == nullptr) throw value_error("tenet: internal: autograd gradient of another dtype or rank");
  if (old->sizes() != g.sizes())
    throw shape_error("tenet: autograd: gradients of sizes " + sizes_text(old->sizes()) + " and " +
                      sizes_text(g.sizes()) + " reach one tensor");
  if constexpr (TENET_AUTOGRAD >= 2) {
    if (grad_mode()) {  // a create_graph backward: the sum is recorded (backward_value)
      slot = grad_tensor<T, R>(backward_value(make_node(prim::add_{}, *old, g)));
      return;
    }
  }
  slot = grad_tensor<T, R>(evaluate_untracked(make_node(prim::add_{}, *old, g)));
}

/// Gives gradient g to the identity m: into its grad_fn's pending sum, or into .grad of a leaf
/// that requires grad (as its own storage: a .grad is never shared with another tensor).
///
/// Inside tenet::autograd::grad (current_backward()): an identity grad() returns also gets g in
/// its capture slot; .grad of leaves is left alone; nodes that lead to no returned identity do
/// not collect gradients. Under create_graph, the clone and the sums are recorded (the .grad of
/// a leaf has a graph, as PyTorch's).
template <class T, class S>
void push(const std::shared_ptr<meta>& m, const Tensor<T, S>& g) {
  if (!m) return;
  const backward_context* ctx = current_backward();
  if (ctx && ctx->captures) {
    auto it = ctx->captures->find(m.get());
    if (it != ctx->captures->end()) accumulate(it->second, g);
  }
  if (m->grad_fn) {
    if (!ctx || !ctx->skip || !ctx->skip->contains(m->grad_fn.get())) accumulate(m->grad_fn->pending, g);
  } else if (m->requires_grad && (!ctx || ctx->accumulate_leaves)) {
    if (!m->grad.has_value())
      m->grad = grad_tensor<T, S::rank>(g.clone());
    else
      accumulate(m->grad, g);
    if (ctx && !m->post_accumulate_hooks.empty()) ctx->hooked_received.insert(m.get());
  }
}

/// create_graph needs the program built with TENET_AUTOGRAD=2 (runtime/grad_mode.hpp): with 1 the backward's
/// own expressions are never recorded (their VJPs are not compiled), so it is refused.
inline void check_create_graph(bool create_graph, const char* who) {
  if (create_graph && TENET_AUTOGRAD < 2)
    throw value_error(std::string("tenet: ") + who +
                      ": create_graph (second-order gradients) needs the program compiled with TENET_AUTOGRAD=2 in "
                      "every translation unit (this one has TENET_AUTOGRAD=1, which does not compile the VJPs of the "
                      "VJP rules: docs/autograd.md)");
}

/// How run_backward runs (Tensor::backward, tenet::autograd::grad).
struct engine_options {
  bool retain_graph = false;
  bool create_graph = false;  // implies retain_graph
  bool accumulate_leaves = true;
  std::unordered_map<const meta*, std::any>* captures = nullptr;  // grad(): the identities returned
};

/// Runs the graph from root's grad_fn with the root's gradient `seed` (an any of grad_tensor).
/// With captures, only the nodes from which a captured identity can be reached run.
inline void run_backward(const std::shared_ptr<grad_node>& root, std::any seed, const engine_options& opt) {
  check_create_graph(opt.create_graph, "backward");
  // reverse topological order: depth-first post order over the input edges, reversed
  std::vector<grad_node*> order;
  std::unordered_set<grad_node*> seen;
  std::vector<std::pair<grad_node*, std::size_t>> stack{{root.get(), 0}};
  seen.insert(root.get());
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    if (i < n->inputs.size()) {
      grad_node* next = n->inputs[i++]->grad_fn.get();
      if (next && seen.insert(next).second) stack.emplace_back(next, 0);
    } else {
      order.push_back(n);
      stack.pop_back();
    }
  }
  // post order: a node's inputs' nodes come first, so "leads to a captured identity" is known
  std::unordered_set<const grad_node*> skip;
  if (opt.captures) {
    for (grad_node* n : order) {
      bool needed = false;
      for (const auto& in : n->inputs)
        needed = needed || opt.captures->contains(in.get()) || (in->grad_fn && !skip.contains(in->grad_fn.get()));
      if (!needed) skip.insert(n);
    }
  }
  std::reverse(order.begin(), order.end());
  for (grad_node* n : order)
    if (n->released && !skip.contains(n))
      throw value_error("tenet: backward: trying to backward through the graph a second time (the saved values of "
                        "node '" + n->name() + "' were freed by the first backward); call the first backward with "
                        "retain_graph=true if you need to backward twice");
  for (grad_node* n : order) n->pending.reset();
  root->pending = std::move(seed);
  static std::atomic<std::uint64_t> backward_count{0};
  backward_context ctx{opt.create_graph, opt.accumulate_leaves, opt.captures, &skip, {}, {}, ++backward_count};
  const backward_context_scope in_backward(&ctx);
  // Post-accumulate hooks: a leaf's .grad is final after the last node (in run order) that has it
  // as an input; its hooks run then. Only leaves with hooks are looked at.
  std::unordered_map<const grad_node*, std::vector<meta*>> hooks_after;
  if (opt.accumulate_leaves) {
    std::unordered_map<meta*, const grad_node*> last_pusher;
    for (grad_node* n : order) {
      if (skip.contains(n)) continue;
      for (const auto& in : n->inputs)
        if (!in->grad_fn && in->requires_grad && !in->post_accumulate_hooks.empty()) last_pusher[in.get()] = n;
    }
    for (const auto& [m, n] : last_pusher) hooks_after[n].push_back(m);
  }
  // create_graph: grad mode stays on, so what the rules compute is recorded (backward_value)
  const grad_mode_guard mode(opt.create_graph);
  const bool retain = opt.retain_graph || opt.create_graph;
  for (grad_node* n : order) {
    if (skip.contains(n)) continue;
    if (n->pending.has_value()) {
      std::any g = std::move(n->pending);
      n->pending.reset();
      const autocast_scope recorded(n->autocast);
      n->apply(g);
    }
    if (!retain) {
      n->release();
      n->released = true;
    }
    if (!hooks_after.empty())
      if (auto it = hooks_after.find(n); it != hooks_after.end())
        for (meta* m : it->second)
          if (ctx.hooked_received.contains(m))  // a leaf that got no gradient in this backward: no call, as torch
            for (std::size_t h = 0; h < m->post_accumulate_hooks.size(); ++h) {
              auto hook = m->post_accumulate_hooks[h].second;  // a copy: the hook may remove itself
              hook();
            }
  }
  for (std::size_t i = 0; i < ctx.final_callbacks.size(); ++i) {
    auto cb = std::move(ctx.final_callbacks[i]);
    cb();
  }
}

inline void run_backward(const std::shared_ptr<grad_node>& root, std::any seed, bool retain_graph) {
  engine_options opt;
  opt.retain_graph = retain_graph;
  run_backward(root, std::move(seed), opt);
}

// ---------------------------------------------------------------------------------------------
// Views: the gradient of a strided view scattered back into its base (as_strided's backward).

/// Calls f(flat index of the row-major order, element offset under `strides`) for every index.
template <std::size_t R, class F>
void for_each_offset(const sizes_t<R>& sizes, const sizes_t<R>& strides, std::int64_t offset, F&& f) {
  std::int64_t n = 1;
  for (auto s : sizes) n *= s;
  if (n == 0) return;
  sizes_t<R> idx{};
  std::int64_t off = offset;
  for (std::int64_t flat = 0; flat < n; ++flat) {
    f(flat, off);
    for (std::size_t d = R; d-- > 0;) {
      if (++idx[d] < sizes[d]) {
        off += strides[d];
        break;
      }
      off -= (sizes[d] - 1) * strides[d];
      idx[d] = 0;
    }
  }
}

template <std::size_t R>
std::pair<std::int64_t, std::int64_t> offset_span(const sizes_t<R>& sizes, const sizes_t<R>& strides,
                                                  std::int64_t offset) {
  std::int64_t lo = offset, hi = offset;
  for (std::size_t d = 0; d < R; ++d) {
    if (sizes[d] == 0) return {offset, offset - 1};
    const std::int64_t ext = (sizes[d] - 1) * strides[d];
    (ext < 0 ? lo : hi) += ext;
  }
  return {lo, hi};
}

/// The view (vsizes, vstrides, voffset) of a base (bsizes, bstrides, boffset) expressed over a
/// contiguous tensor of the base's sizes: rstrides and roffset such that view element i is, in
/// that tensor, the base element the view reads. The gradient of an injective view of a strided
/// base is then g copied once through (rstrides, roffset) into a base-shaped tensor. True when the
/// base's dims nest (ordered by stride, each stride at least the extent of the smaller ones: one
/// index per storage position), the view's offset and strides are whole base-index steps and every
/// view element lands inside the base dim by dim (so the map has no carries); false otherwise.
template <std::size_t RV, std::size_t RB>
bool relative_layout(const sizes_t<RV>& vsizes, const sizes_t<RV>& vstrides, std::int64_t voffset,
                     const sizes_t<RB>& bsizes, const sizes_t<RB>& bstrides, std::int64_t boffset,
                     sizes_t<RV>& rstrides, std::int64_t& roffset) {
  std::array<std::size_t, RB> order{};
  std::size_t n = 0;
  for (std::size_t d = 0; d < RB; ++d) {
    if (bsizes[d] == 0) return false;
    if (bsizes[d] == 1) continue;
    if (bstrides[d] <= 0) return false;
    order[n++] = d;
  }
  if constexpr (RB > 1) {  // (GCC 12 warns of order[1] out of bounds for RB = 1 at -O3 otherwise)
    for (std::size_t i = 1; i < n; ++i)  // by stride, largest first (insertion sort: std::sort on a
      for (std::size_t k = i; k > 0 && bstrides[order[k - 1]] < bstrides[order[k]]; --k)  // small array
        std::swap(order[k - 1], order[k]);  // trips the same warning)
    for (std::size_t k = 0; k + 1 < n; ++k) {
      std::int64_t ext = 0;
      if (__builtin_mul_overflow(bstrides[order[k + 1]], bsizes[order[k + 1]], &ext) || bstrides[order[k]] < ext)
        return false;
    }
  }
  using index = std::array<std::int64_t, RB>;
  auto decode = [&](std::int64_t disp, index& at) {
    at.fill(0);
    for (std::size_t k = 0; k < n; ++k) {
      const std::int64_t st = bstrides[order[k]];
      at[order[k]] = disp / st;  // toward zero: a negative step decodes as the negative of its positive
      disp -= at[order[k]] * st;
    }
    return disp == 0;
  };
  index off{};
  if (!decode(voffset - boffset, off)) return false;
  std::array<index, RV> step{};
  for (std::size_t j = 0; j < RV; ++j) {
    if (vsizes[j] == 0) return false;
    if (vsizes[j] > 1 && !decode(vstrides[j], step[j])) return false;
  }
  for (std::size_t i = 0; i < RB; ++i) {
    std::int64_t lo = off[i], hi = off[i];
    for (std::size_t j = 0; j < RV; ++j) {
      std::int64_t e = 0;
      if (__builtin_mul_overflow(step[j][i], vsizes[j] - 1, &e)) return false;
      if (__builtin_add_overflow(e < 0 ? lo : hi, e, e < 0 ? &lo : &hi)) return false;
    }
    if (lo < 0 || hi >= bsizes[i]) return false;
  }
  const auto cs = contiguous_strides(bsizes);
  roffset = 0;
  for (std::size_t i = 0; i < RB; ++i) roffset += off[i] * cs[i];
  for (std::size_t j = 0; j < RV; ++j) {
    rstrides[j] = 0;
    for (std::size_t i = 0; i < RB; ++i) rstrides[j] += step[j][i] * cs[i];
  }
  return true;
}

/// True when the view's elements are distinct storage positions (sufficient test: the dims of
/// size > 1, ordered by stride, each step over the whole extent of the previous ones).
template <std::size_t R>
bool view_is_injective(const sizes_t<R>& sizes, const sizes_t<R>& strides) {
  std::array<std::pair<std::int64_t, std::int64_t>, R> dims{};
  std::size_t n = 0;
  for (std::size_t d = 0; d < R; ++d) {
    if (sizes[d] == 0) return true;
    if (sizes[d] == 1) continue;
    if (strides[d] <= 0) return false;
    dims[n++] = {strides[d], sizes[d]};
  }
  if constexpr (R > 1)  // sorted (insertion sort: see relative_layout)
    for (std::size_t i = 1; i < n; ++i)
      for (std::size_t k = i; k > 0 && dims[k] < dims[k - 1]; --k) std::swap(dims[k - 1], dims[k]);
  std::int64_t extent = 1;  // elements spanned by the dims so far
  for (std::size_t i = 0; i < n; ++i) {
    if (dims[i].first < extent) return false;
    extent = dims[i].first * (dims[i].second - 1) + extent;
  }
  return true;
}

/// dst[i0*ds[R-2] + i1*ds[R-1] + ...] = src (contiguous, sizes `sizes`) for every index, the last
/// two dims in 32 x 32 tiles so that a transposed destination is written a cache line at a time.
template <class T, std::size_t R>
void copy_into_strided(const T* src, const sizes_t<R>& sizes, T* dst, const sizes_t<R>& ds) {
  if constexpr (R == 0) {
    *dst = *src;
  } else if constexpr (R == 1) {
    for (std::int64_t i = 0; i < sizes[0]; ++i) dst[i * ds[0]] = src[i];
  } else {
    const std::int64_t rows = sizes[R - 2], cols = sizes[R - 1], s0 = ds[R - 2], s1 = ds[R - 1];
    sizes_t<R - 2> outer{}, ostr{};
    for (std::size_t d = 0; d + 2 < R; ++d) outer[d] = sizes[d], ostr[d] = ds[d];
    constexpr std::int64_t B = 32;
    for_each_offset(outer, ostr, 0, [&](std::int64_t flat, std::int64_t off) {
      const T* s = src + flat * rows * cols;
      T* o = dst + off;
      for (std::int64_t i0 = 0; i0 < rows; i0 += B)
        for (std::int64_t j0 = 0; j0 < cols; j0 += B) {
          const std::int64_t i1 = std::min(rows, i0 + B), j1 = std::min(cols, j0 + B);
          for (std::int64_t i = i0; i < i1; ++i)
            for (std::int64_t j = j0; j < j1; ++j) o[i * s0 + j * s1] = s[i * cols + j];
        }
    });
  }
}

template <class T, std::size_t RI, std::size_t RO>
struct relayout_node;

/// Under create_graph (grad mode on, g tracked): out, view_backward's result for g, gets a
/// relayout_node (its backward: view_backward with the layouts swapped).
template <class T, std::size_t RB, std::size_t RV>
void record_relayout(grad_tensor<T, RB>& out, const grad_tensor<T, RV>& g, const sizes_t<RV>& vsizes,
                     const sizes_t<RV>& vstrides, std::int64_t voffset, const sizes_t<RB>& bsizes,
                     const sizes_t<RB>& bstrides, std::int64_t boffset) {
  if constexpr (TENET_AUTOGRAD >= 2) {
    if (grad_mode() && is_tracked(g)) {
      auto n = std::make_shared<relayout_node<T, RV, RB>>();
      n->isizes = vsizes, n->istrides = vstrides, n->ioffset = voffset;
      n->osizes = bsizes, n->ostrides = bstrides, n->ooffset = boffset;
      n->inputs.push_back(g.autograd_meta());
      auto m = std::make_shared<meta>();
      m->grad_fn = std::move(n);
      out.set_autograd_meta(std::move(m));
    }
  }
}

/// g's storage as the base's gradient when the view covers a (strided) base one to one and g is
/// laid out as the view's layout relative to the base (relative_layout): a reshape of a narrow,
/// whose gradient arrives contiguous. Empty otherwise (and under create_graph, which records).
template <class T, std::size_t RB, std::size_t RV>
std::optional<grad_tensor<T, RB>> same_relative_layout(const grad_tensor<T, RV>& g, const sizes_t<RV>& vsizes,
                                                       const sizes_t<RV>& vstrides, std::int64_t voffset,
                                                       const sizes_t<RB>& bsizes, const sizes_t<RB>& bstrides,
                                                       std::int64_t boffset, bool recording) {
  std::int64_t bn = 1, vn = 1;
  for (auto s : bsizes) bn *= s;
  for (auto s : vsizes) vn *= s;
  if (recording || bn == 0 || vn != bn || !view_is_injective(vsizes, vstrides)) return std::nullopt;
  sizes_t<RV> rstrides{};
  std::int64_t roffset = 0;
  if (!relative_layout(vsizes, vstrides, voffset, bsizes, bstrides, boffset, rstrides, roffset)) return std::nullopt;
  for (std::size_t d = 0; d < RV; ++d)
    if (vsizes[d] != 1 && g.strides()[d] != rstrides[d]) return std::nullopt;
  if (g.offset() < roffset) return std::nullopt;
  return g.template with_layout<dyn_shape<RB>>(bsizes, contiguous_strides(bsizes), g.offset() - roffset);
}

/// view_backward of a gradient on a device (autograd/device.hpp): g's storage when it is laid out
/// as the view reads a contiguous base one to one (not under create_graph), else a scatter-add and
/// a gather kernel.
template <class T, std::size_t RB, std::size_t RV>
grad_tensor<T, RB> view_backward_device(const grad_tensor<T, RV>& g, const sizes_t<RV>& vsizes, const sizes_t<RV>& vstrides,
                                        std::int64_t voffset, const sizes_t<RB>& bsizes, const sizes_t<RB>& bstrides,
                                        std::int64_t boffset) {
  bool recording = false;
  if constexpr (TENET_AUTOGRAD >= 2) recording = grad_mode() && is_tracked(g);
  const auto [blo, bhi] = offset_span(bsizes, bstrides, boffset);
  const auto [vlo, vhi] = offset_span(vsizes, vstrides, voffset);
  std::int64_t bn = 1, vn = 1;
  for (auto s : bsizes) bn *= s;
  for (auto s : vsizes) vn *= s;
  if (!recording && bn > 0 && vn == bn && bstrides == contiguous_strides(bsizes) &&
      view_is_injective(vsizes, vstrides) && vlo >= boffset && vhi < boffset + bn) {
    bool same = true;
    for (std::size_t d = 0; d < RV; ++d) same = same && (vsizes[d] == 1 || g.strides()[d] == vstrides[d]);
    if (same)
      return g.template with_layout<dyn_shape<RB>>(bsizes, contiguous_strides(bsizes), g.offset() + (boffset - voffset));
  }
  if (const auto same = same_relative_layout<T, RB, RV>(g, vsizes, vstrides, voffset, bsizes, bstrides, boffset, recording))
    return *same;
  grad_tensor<T, RB> out(bsizes, g.device());
  view_backward_on_device<T, RV, RB>(g, vstrides, voffset, out, bstrides, boffset, std::min(blo, vlo), std::max(bhi, vhi));
  record_relayout<T, RB, RV>(out, g, vsizes, vstrides, voffset, bsizes, bstrides, boffset);
  return out;
}

/// The gradient of the base of a view: g (the view's gradient) added at the storage positions the
/// view reads, read back at the positions the base reads. @post exact for a base whose elements
/// are distinct storage positions (every tensor but an expanded one; custom_function copies an
/// expanded output for this reason). A linear map whose adjoint
/// is itself with the two layouts swapped: under create_graph (grad mode on, g tracked) the
/// result gets a relayout_node doing that, so the set of node types stays closed.
template <class T, std::size_t RB, std::size_t RV>
grad_tensor<T, RB> view_backward(const grad_tensor<T, RV>& g, const sizes_t<RV>& vsizes, const sizes_t<RV>& vstrides,
                                 std::int64_t voffset, const sizes_t<RB>& bsizes, const sizes_t<RB>& bstrides,
                                 std::int64_t boffset) {
  if (!g.device().is_cpu()) return view_backward_device<T, RB, RV>(g, vsizes, vstrides, voffset, bsizes, bstrides, boffset);
  std::int64_t bn = 1, vn = 1;
  for (auto s : bsizes) bn *= s;
  for (auto s : vsizes) vn *= s;
  const bool injective = view_is_injective(vsizes, vstrides);
  // Fast path: a contiguous base and a view reading distinct positions inside it (transpose,
  // permute, slice, select, narrow): the base's gradient is g written through the view's strides
  // into a zeroed base-shaped tensor. Not under create_graph (the general path records).
  bool recording = false;
  if constexpr (TENET_AUTOGRAD >= 2) recording = grad_mode() && is_tracked(g);
  if (!recording && bstrides == contiguous_strides(bsizes) && injective) {
    const auto [vlo, vhi] = offset_span(vsizes, vstrides, voffset);
    if (vlo > vhi) {  // empty view
      grad_tensor<T, RB> out(bsizes);
      out.fill_(T(0));
      return out;
    }
    if (vlo >= boffset && vhi < boffset + bn) {
      if (vn == bn) {
        // the view covers the base one to one; when g is laid out as the view reads the base (a
        // weight's gradient computed in the weight's layout), g's storage is the answer
        bool same = true;
        for (std::size_t d = 0; d < RV; ++d) same = same && (vsizes[d] == 1 || g.strides()[d] == vstrides[d]);
        if (same)
          return g.template with_layout<dyn_shape<RB>>(bsizes, contiguous_strides(bsizes),
                                                       g.offset() + (boffset - voffset));
      }
      grad_tensor<T, RB> out(bsizes);
      if (vn != bn) out.fill_(T(0));
      const auto gc = g.detach().contiguous();
      copy_into_strided<T, RV>(gc.data(), vsizes, out.data() + (voffset - boffset), vstrides);
      return out;
    }
  }
  const auto [blo, bhi] = offset_span(bsizes, bstrides, boffset);
  const auto [vlo, vhi] = offset_span(vsizes, vstrides, voffset);
  const std::int64_t lo = std::min(blo, vlo), hi = std::max(bhi, vhi);
  if (!recording && bn > 0 && injective) {
    // An injective view of a strided base whose layout it steps through by whole indices (a
    // transpose of a narrowed tensor: attention's heads split from one qkv projection): g copied
    // once, through the view's layout relative to the base, into a base-shaped tensor.
    if (const auto same = same_relative_layout<T, RB, RV>(g, vsizes, vstrides, voffset, bsizes, bstrides, boffset, false))
      return *same;
    sizes_t<RV> rstrides{};
    std::int64_t roffset = 0;
    if (relative_layout(vsizes, vstrides, voffset, bsizes, bstrides, boffset, rstrides, roffset)) {
      grad_tensor<T, RB> out(bsizes);
      if (vn != bn) out.fill_(T(0));
      out.template with_layout<dyn_shape<RV>>(vsizes, rstrides, roffset).copy_(g.detach());
      return out;
    }
    // Other injective views of a strided base (a transpose or reshape of a narrowed tensor, as
    // attention's heads split from one qkv projection): each storage position gets at most one
    // element of g, so g is copied (not summed) through the view's strides into a buffer over
    // both spans, which is then read through the base's strides: two strided copies by the
    // pointwise kernel (vectorized, threaded) where the loops below run element by element.
    // The view reads a subset of the base's positions, so when it has as many elements as the
    // base it covers all of them and the buffer needs no zeroing.
    grad_tensor<T, 1> buf(sizes_t<1>{hi - lo + 1});
    if (vn != bn) buf.fill_(T(0));
    buf.template with_layout<dyn_shape<RV>>(vsizes, vstrides, voffset - lo).copy_(g.detach());
    grad_tensor<T, RB> out(bsizes);
    out.copy_(buf.template with_layout<dyn_shape<RB>>(bsizes, bstrides, boffset - lo));
    return out;
  }
  grad_tensor<T, RB> out(bsizes);
  std::vector<T> buf(static_cast<std::size_t>(std::max<std::int64_t>(hi - lo + 1, 0)), T(0));
  const auto gc = g.detach().contiguous();
  const T* gp = gc.data();
  for_each_offset(vsizes, vstrides, voffset, [&](std::int64_t flat, std::int64_t off) {
    buf[static_cast<std::size_t>(off - lo)] += gp[flat];
  });
  T* op = out.data();
  for_each_offset(bsizes, bstrides, boffset, [&](std::int64_t flat, std::int64_t off) {
    op[flat] = buf[static_cast<std::size_t>(off - lo)];
  });
  record_relayout<T, RB, RV>(out, g, vsizes, vstrides, voffset, bsizes, bstrides, boffset);
  return out;
}

/// The node of a view_backward computed under create_graph: input layout I (the view's), output
/// layout O (the base's); its backward is view_backward with the layouts swapped.
template <class T, std::size_t RI, std::size_t RO>
struct relayout_node final : grad_node {
  sizes_t<RI> isizes, istrides;
  std::int64_t ioffset = 0;
  sizes_t<RO> osizes, ostrides;
  std::int64_t ooffset = 0;
  void apply(const std::any& g) override {
    const auto& go = std::any_cast<const grad_tensor<T, RO>&>(g);
    push(inputs[0], view_backward<T, RI, RO>(go, osizes, ostrides, ooffset, isizes, istrides, ioffset));
  }
  void release() override {}
  std::string name() const override { return "view_backward"; }
  std::any tangent(jvp_context& ctx) const override;
};

template <class T, std::size_t RB, std::size_t RV>
struct view_node final : grad_node {
  sizes_t<RB> bsizes, bstrides;
  std::int64_t boffset;
  sizes_t<RV> vsizes, vstrides;
  std::int64_t voffset;
  void apply(const std::any& g) override {
    const auto& gv = std::any_cast<const grad_tensor<T, RV>&>(g);
    push(inputs[0], view_backward<T, RB, RV>(gv, vsizes, vstrides, voffset, bsizes, bstrides, boffset));
  }
  void release() override {}
  std::string name() const override { return "view"; }
  std::any tangent(jvp_context& ctx) const override;
};

/// Makes out the output of node n (its inputs set): a non-leaf that requires grad.
template <class T, class S>
void set_grad_fn(Tensor<T, S>& out, std::shared_ptr<grad_node> n) {
  auto m = std::make_shared<meta>();
  m->requires_grad = true;
  m->grad_fn = std::move(n);
  out.set_autograd_meta(std::move(m));
}

/// The node of `t.to(device)` for a tracked t (PyTorch's .to is differentiable): the copy's
/// gradient goes back to t's device, its tangent forward to the copy's (jvp.hpp). Under
/// create_graph the copy back records a node of the same type, so any order works.
template <class T, std::size_t R>
struct to_device_node final : grad_node {
  device from = tenet::cpu, to = tenet::cpu;
  sizes_t<R> sizes{};
  void apply(const std::any& g) override {
    push(inputs[0], std::any_cast<const grad_tensor<T, R>&>(g).to(from));
  }
  void release() override {}
  std::string name() const override { return "to(" + to.str() + ")"; }
  std::any tangent(jvp_context& ctx) const override;
};

template <class T, class S>
void on_to_device(const Tensor<T, S>& src, Tensor<T, S>& copy) {
  if constexpr (is_autograd_dtype<T>) {
    if (!grad_mode() || !is_tracked(src)) return;
    auto n = std::make_shared<to_device_node<T, S::rank>>();
    n->from = src.device();
    n->to = copy.device();
    n->sizes = src.sizes();
    n->inputs.push_back(src.autograd_meta());
    set_grad_fn(copy, std::move(n));
  } else {
    (void)src;
    (void)copy;
  }
}

/// Records view as a view of the tracked base (view_node). The view node's gradient goes through
/// storage positions (view_backward), exact when the base's elements are distinct positions, so:
/// a view that makes elements share memory (expand, broadcast_to, a stride-0 dim) of a tracked
/// tensor is materialized (a recorded clone): a later view of it, as expand then unsqueeze,
/// transpose or select, would otherwise get the gradient of every row sharing a position (stop
/// 52: 4x too large over 4 rows, silently); and a view of a tracked base whose elements already
/// share memory (a leaf made from an expanded tensor) is refused.
template <class T, class S, class S2>
void on_view(const Tensor<T, S>& base, Tensor<T, S2>& view) {
  if constexpr (is_autograd_dtype<T>) {  // else: nothing to record (and no view_node<T> to compile)
    if (!grad_mode() || !is_tracked(base)) return;
    if (!view_is_injective(base.sizes(), base.strides()))
      throw value_error("tenet: autograd: a view of a tensor of sizes " + sizes_text(base.sizes()) + " and strides " +
                        sizes_text(base.strides()) +
                        " whose elements share memory (an expanded tensor that requires grad) cannot be "
                        "differentiated; make it contiguous first (.contiguous())");
    auto n = std::make_shared<view_node<T, S::rank, S2::rank>>();
    n->bsizes = base.sizes();
    n->bstrides = base.strides();
    n->boffset = base.offset();
    n->vsizes = view.sizes();
    n->vstrides = view.strides();
    n->voffset = view.offset();
    n->inputs.push_back(base.autograd_meta());
    set_grad_fn(view, std::move(n));
    if (!view_is_injective(view.sizes(), view.strides())) view = view.clone();
  } else {
    (void)base;
    (void)view;
  }
}

}  // namespace tenet::detail::ag
