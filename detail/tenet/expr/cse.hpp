#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Common subexpression elimination for one evaluation. Expression trees hold their children by
// value, so `auto m = matmul(a, b); auto y = m + relu(m);` holds two copies of the matmul node.
// Every kernel the evaluator would run is keyed by its subtree's structure: the node types, the op
// parameters, the scalars and the identity of every input view (storage, offset, sizes, strides).
// Within one evaluation a second kernel with the same key reuses the first one's value, so the same
// `auto` used twice is computed once. Ops whose parameters cannot be compared byte for byte (a
// double member, padding) are never merged: the key is only built where equality is exact.
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <tenet/expr/concepts.hpp>
#include <tenet/expr/node.hpp>
#include <tenet/expr/shared.hpp>

namespace tenet::detail {

template <class E>
const void* type_tag() {
  static const char tag = 0;
  return &tag;
}

/// The values computed so far in the current evaluation (null outside one).
using cse_table = std::map<std::string, std::shared_ptr<void>>;
inline cse_table*& current_cse_table() {
  thread_local cse_table* t = nullptr;
  return t;
}

/// A session spanning several evaluations (a compiled training step: the forward, then every
/// evaluation its backward makes) that share one table, so a forward value the backward needs
/// (a GEMM's operand, a reduction) is computed once. Keys name inputs by their storage address,
/// so the session keeps every storage it keyed alive until it ends: an address cannot be reused
/// by another tensor while a key names it.
struct cse_session {
  cse_table table;
  std::vector<std::shared_ptr<const void>> retained;
  cse_session* previous;
  cse_table* previous_table;
  cse_session() : previous(current()), previous_table(current_cse_table()) {
    current() = this;
    current_cse_table() = &table;
  }
  ~cse_session() {
    current() = previous;
    current_cse_table() = previous_table;
  }
  cse_session(const cse_session&) = delete;
  cse_session& operator=(const cse_session&) = delete;
  static cse_session*& current() {
    thread_local cse_session* s = nullptr;
    return s;
  }
};

/// One evaluation's CSE table (nested evaluations get their own), or the session's table inside
/// a session.
struct cse_scope {
  cse_table table;
  cse_table* previous;
  bool in_session;
  cse_scope() : previous(current_cse_table()), in_session(cse_session::current() != nullptr) {
    if (!in_session) current_cse_table() = &table;
  }
  ~cse_scope() {
    if (!in_session) current_cse_table() = previous;
  }
  cse_scope(const cse_scope&) = delete;
  cse_scope& operator=(const cse_scope&) = delete;
};

/// E with every marker node of no value of its own (an op with `cse_transparent`: the fused
/// backward's regions, schedule/backward_fusion.hpp) replaced by its child: keys are tagged with
/// it, so a tree with markers keys as the same tree without them.
template <class E>
struct strip_transparent {
  using type = E;
};
template <class E>
using strip_transparent_t = typename strip_transparent<E>::type;
template <class Op, class... C>
struct strip_transparent<node<Op, C...>> {
  using type = node<Op, strip_transparent_t<C>...>;
};
template <class Op, class C>
  requires requires { Op::cse_transparent; }
struct strip_transparent<node<Op, C>> {
  using type = strip_transparent_t<C>;
};
template <class E, class S>
struct strip_transparent<shared_node<E, S>> {
  using type = shared_node<strip_transparent_t<E>, S>;
};

template <class V>
void append_bytes(std::string& k, const V& v) {
  k.append(reinterpret_cast<const char*>(&v), sizeof(V));
}

/// Appends e's structural key to k; false when e holds something that cannot be compared exactly.
template <class E>
bool append_cse_key(std::string& k, const E& e) {
  if constexpr (Node<E>) {
    // a marker node with no value of its own (the fused backward's regions) keys as its child
    if constexpr (requires { E::op_type::cse_transparent; }) return append_cse_key(k, std::get<0>(e.children));
  }
  append_bytes(k, type_tag<strip_transparent_t<E>>());
  if constexpr (SharedNode<E>) {
    append_bytes(k, static_cast<const void*>(e.cache.get()));
    return true;
  } else if constexpr (ScalarLeaf<E>) {
    if constexpr (std::has_unique_object_representations_v<decltype(e.value)>) {
      append_bytes(k, e.value);
      return true;
    } else {
      // floating scalars: equal bits are equal values for our purpose (0.0 and -0.0 differ, NaNs
      // with equal bits merge, which is exact)
      append_bytes(k, e.value);
      return sizeof(e.value) == 4 || sizeof(e.value) == 8 || sizeof(e.value) == 2;
    }
  } else if constexpr (TensorType<E>) {
    if (cse_session* s = cse_session::current(); s && e.storage()) s->retained.push_back(e.storage());
    append_bytes(k, static_cast<const void*>(e.storage().get()));
    append_bytes(k, e.offset());
    for (auto s : e.sizes()) append_bytes(k, s);
    for (auto s : e.strides()) append_bytes(k, s);
    return true;
  } else if constexpr (Node<E>) {
    using Op = typename E::op_type;
    if constexpr (std::is_empty_v<Op>) {
    } else if constexpr (requires(std::string& t) { e.op.append_key(t); }) {
      e.op.append_key(k);  // an op with floating parameters says which bytes identify it
    } else if constexpr (std::has_unique_object_representations_v<Op>) {
      append_bytes(k, e.op);
    } else {
      return false;
    }
    return detail::apply_tuple([&](const auto&... c) { return (append_cse_key(k, c) && ...); }, e.children);
  } else {
    return false;
  }
}

template <class E>
std::optional<std::string> cse_key(const E& e) {
  std::string k;
  if (!append_cse_key(k, e)) return std::nullopt;
  return k;
}

/// How often one evaluation's lowering reads each shared value and visits each node type, counted
/// on the decomposed tree before it is lowered (backend/evaluate.hpp: an evaluation outside a
/// session, whose values nothing reads afterwards). With it the executor keeps a value only while a
/// later reader is left, as the kernel plan's memory plan has it: a kernel whose node type occurs
/// once cannot be a common subexpression and is not kept at all; a shared value, and the values of
/// a node type, are released after their last read. Without counts (a session, the autograd
/// forward whose values the backward reads) every value is kept to the end of the evaluation.
/// A count can exceed the visits (a node inside a fused tree or under a CSE hit is counted, never
/// visited): its values are then kept to the end.
struct use_counts {
  struct shared_uses {
    int left = 0;       // reads left, the first (which stores) included
    bool done = false;  // released after its last read
  };
  struct type_uses {
    int total = 0, left = 0;        // occurrences; visits left
    std::vector<std::string> keys;  // the CSE keys stored for this type
  };
  std::unordered_map<const void*, shared_uses> shared;  // by the shared value's cache
  std::unordered_map<const void*, type_uses> types;     // by type_tag<strip_transparent_t<E>>

  // The map operations, out of line: every node type's walk and sink calls them, and inlined
  // they would be compiled again for each (the compile cost of a tree is per node type).
  /// Counts an occurrence of shared value `cache`; true for its first (walk its subtree then).
  [[gnu::noinline]] bool add_shared(const void* cache) { return shared[cache].left++ == 0; }
  [[gnu::noinline]] void add_type(const void* tag) {
    auto& t = types[tag];
    ++t.total, ++t.left;
  }
  /// The counts of shared value `cache` / node type `tag` (null: not counted).
  [[gnu::noinline]] shared_uses* find_shared(const void* cache) {
    const auto it = shared.find(cache);
    return it == shared.end() ? nullptr : &it->second;
  }
  [[gnu::noinline]] type_uses* find_type(const void* tag) {
    const auto it = types.find(tag);
    return it == types.end() ? nullptr : &it->second;
  }
};
inline use_counts*& current_use_counts() {
  thread_local use_counts* u = nullptr;
  return u;
}
/// Installs u (null: none) as the current evaluation's counts for the scope.
struct use_counts_scope {
  use_counts* previous;
  explicit use_counts_scope(use_counts* u) : previous(current_use_counts()) { current_use_counts() = u; }
  ~use_counts_scope() { current_use_counts() = previous; }
  use_counts_scope(const use_counts_scope&) = delete;
  use_counts_scope& operator=(const use_counts_scope&) = delete;
};

template <class E>
void count_uses(const E& e, use_counts& u);
template <class Tup, std::size_t... I>
void count_child_uses(const Tup& t, use_counts& u, std::index_sequence<I...>) {
  (count_uses(std::get<I>(t), u), ...);
}
/// Adds e's occurrences to u: every node's type, every shared value (its subtree once, as the
/// lowering walks it once).
template <class E>
void count_uses(const E& e, use_counts& u) {
  if constexpr (SharedNode<E>) {
    if (u.add_shared(e.cache.get())) count_uses(e.expr, u);
  } else if constexpr (Node<E>) {
    u.add_type(type_tag<strip_transparent_t<E>>());
    count_child_uses(e.children, u, std::make_index_sequence<std::tuple_size_v<decltype(e.children)>>{});
  }
}

/// The value a kernel with this key computed in this evaluation (null: none).
template <class R>
const R* cse_find(const std::string& key) {
  cse_table* t = current_cse_table();
  if (!t) return nullptr;
  auto it = t->find(key);
  return it == t->end() ? nullptr : static_cast<const R*>(it->second.get());
}
/// Records a kernel's value under its key (no-op outside an evaluation).
template <class R>
void cse_store(const std::string& key, const R& r) {
  if (cse_table* t = current_cse_table()) t->emplace(key, std::make_shared<R>(r));
}

/// compute() unless a kernel with e's key already ran in this evaluation; R is its Tensor type.
template <class R, class E, class F>
R cse_or(const E& e, F&& compute) {
  cse_table* t = current_cse_table();
  if (!t) return compute();
  auto key = cse_key(e);
  if (!key) return compute();
  if (auto it = t->find(*key); it != t->end()) return *static_cast<const R*>(it->second.get());
  R r = compute();
  t->emplace(std::move(*key), std::make_shared<R>(r));
  return r;
}

}  // namespace tenet::detail
