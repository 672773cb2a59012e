#pragma once
// An emulator of Metal's execution model on the CPU, to run the MSL kernels that tenet generates
// (through msl_shim.hpp) where there is no Apple GPU (docs/metal.md).
//
// A dispatch runs `groups` threadgroups of `threads` threads each (1-D grids), one threadgroup
// after another. The threads of a threadgroup are cooperative fibers (POSIX ucontext): a thread
// runs until it calls threadgroup_barrier or a simdgroup operation, or returns; then the next one
// runs. Semantics as on the GPU:
// - threadgroup_barrier releases the threads of a group only when every thread of the group has
//   arrived; a barrier that some thread of the group never reaches (it returned, or waits at a
//   simdgroup operation) is reported;
// - simdgroup operations (simd_sum, simd_max, simd_shuffle, ..., and the simdgroup_matrix
//   operations of msl_shim.hpp) exchange values among the lanes
//   of a simdgroup (32 lanes; the last simdgroup of a group may have fewer): each lane waits
//   until every lane of its simdgroup has called the same operation; lanes that call different
//   operations, a lane that returned, or a shuffle from a lane that does not exist are reported;
// - device buffers are bound as `buffer_ptr<T>`: every access is checked against the bound size;
//   on a buffer the kernel may write (not `const`), a write by one thread and a read or write of the
//   same element by another that no barrier of a common threadgroup orders (threads of different
//   threadgroups never synchronize within a dispatch) is reported as a device memory race, and so
//   is an element both accessed atomically (atomic_fetch_add_explicit ...) and plainly by
//   different threads; atomic accesses among themselves never race;
// - threadgroup memory is bound as `threadgroup_ptr<T>`: every access is checked against its
//   size, and a write by one thread and a read or write by another of the same element between
//   the same two barriers (a data race on the GPU) is reported, and so is a read of an element no
//   thread of the group has written (threadgroup memory starts undefined on the GPU).
// Every report is an `emulation_error` whose message names the kernel, the threadgroup, the
// thread and the values involved.
#include <ucontext.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tenet::metal_emu {

struct emulation_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr std::uint32_t simd_width = 32;

/// The built-in thread positions of one thread of a 1-D dispatch.
struct thread_ids {
  std::uint32_t grid = 0;        // [[thread_position_in_grid]]
  std::uint32_t group = 0;       // [[threadgroup_position_in_grid]]
  std::uint32_t local = 0;       // [[thread_position_in_threadgroup]]
  std::uint32_t group_size = 0;  // [[threads_per_threadgroup]]
  std::uint32_t lane = 0;        // [[thread_index_in_simdgroup]]
  std::uint32_t simdgroup = 0;   // [[simdgroup_index_in_threadgroup]]
};

enum class simd_kind : std::uint8_t {
  sum, max, min, shuffle, shuffle_down, shuffle_up, shuffle_xor, broadcast, matrix_load, matrix_store, matrix_multiply_accumulate
};
inline const char* simd_name(simd_kind k) {
  switch (k) {
    case simd_kind::sum: return "simd_sum";
    case simd_kind::max: return "simd_max";
    case simd_kind::min: return "simd_min";
    case simd_kind::shuffle: return "simd_shuffle";
    case simd_kind::shuffle_down: return "simd_shuffle_down";
    case simd_kind::shuffle_up: return "simd_shuffle_up";
    case simd_kind::shuffle_xor: return "simd_shuffle_xor";
    case simd_kind::broadcast: return "simd_broadcast";
    case simd_kind::matrix_load: return "simdgroup_load";
    case simd_kind::matrix_store: return "simdgroup_store";
    case simd_kind::matrix_multiply_accumulate: return "simdgroup_multiply_accumulate";
  }
  return "?";
}

/// Shadow state of one element of threadgroup memory for the race check: its last writer and
/// reader(s) in the current barrier epoch.
struct shadow_cell {
  std::uint64_t write_epoch = ~std::uint64_t{0};
  std::uint64_t read_epoch = ~std::uint64_t{0};
  std::int32_t writer = -1;
  std::int32_t reader = -1;  // -2: several threads read it in read_epoch
  bool written = false;      // by any thread of the threadgroup, ever
};

/// One threadgroup allocation ([[threadgroup(n)]]), fresh for every threadgroup.
struct threadgroup_block {
  std::vector<unsigned char> bytes;
  std::vector<shadow_cell> shadow;  // one per element
  std::size_t elem_size = 1;
  int slot = 0;
};

class group_run;

/// The run state of the current OS thread: the dispatch it executes, its current threadgroup and
/// fiber.
struct current_state {
  std::string_view kernel;
  group_run* group = nullptr;
  std::uint32_t fiber = 0;
  thread_ids ids;
};
inline thread_local current_state current{};

/// Shadow state of one element of a writable device buffer for the race check, per dispatch: its
/// last plain writer, its plain reader(s) and whether some thread accessed it atomically.
struct device_cell {
  std::int64_t writer = -1, write_group = -1;  // thread_position_in_grid, threadgroup
  std::uint64_t write_epoch = 0;
  std::int64_t reader = -1, read_group = -1;  // reader -2: several threads; read_group -2: several groups
  std::uint64_t read_epoch = 0;               // the latest read's
  std::int64_t atomic_user = -1;              // -2: several threads
};
/// The device race check's shadow of the dispatch in progress (cleared by dispatch()).
inline thread_local std::unordered_map<const void*, device_cell> device_shadow{};

inline std::string thread_where() {
  const auto& c = current;
  return "kernel '" + std::string(c.kernel) + "', threadgroup " + std::to_string(c.ids.group) + ", thread " +
         std::to_string(c.ids.local) + " (thread_position_in_grid " + std::to_string(c.ids.grid) + ")";
}

[[noreturn]] inline void fail(const std::string& what) { throw emulation_error("metal emulator: " + what); }

/// One threadgroup's fibers and the scheduler that runs them.
class group_run {
 public:
  enum class state : std::uint8_t { runnable, at_barrier, at_simd, done, failed };
  struct fiber {
    ucontext_t ctx{};
    std::unique_ptr<char[]> stack;
    state st = state::runnable;
    thread_ids ids;
    // simdgroup exchange
    simd_kind kind{};
    std::int64_t param = 0;
    std::size_t value_size = 0;
    std::string value_type;
    alignas(16) unsigned char in[32]{};
    alignas(16) unsigned char out[32]{};
  };

  static constexpr std::size_t stack_bytes = 128 * 1024;

  group_run(std::string_view kernel, std::uint32_t threads) : kernel_(kernel), fibers_(threads) {
    for (auto& f : fibers_) f.stack.reset(new char[stack_bytes]);
  }

  std::uint64_t epoch() const { return epoch_; }
  std::vector<threadgroup_block>& blocks() { return blocks_; }

  /// Runs threadgroup `group` of `groups`: body(ids) on every thread, to completion.
  template <class Body>
  void run(std::uint32_t group, std::uint32_t groups, const Body& body) {
    (void)groups;
    const auto n = static_cast<std::uint32_t>(fibers_.size());
    body_ = &body;
    invoke_ = [](const void* b, const thread_ids& ids) { (*static_cast<const Body*>(b))(ids); };
    epoch_ = 0;
    error_ = nullptr;
    for (auto& blk : blocks_) {
      std::memset(blk.bytes.data(), 0, blk.bytes.size());
      std::fill(blk.shadow.begin(), blk.shadow.end(), shadow_cell{});
    }
    for (std::uint32_t i = 0; i < n; ++i) {
      fiber& f = fibers_[i];
      f.st = state::runnable;
      f.ids = thread_ids{group * n + i, group, i, n, i % simd_width, i / simd_width};
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = f.stack.get();
      f.ctx.uc_stack.ss_size = stack_bytes;
      f.ctx.uc_link = &sched_;
      makecontext(&f.ctx, &group_run::entry, 0);
    }
    for (;;) {
      bool ran = false;
      for (std::uint32_t i = 0; i < n; ++i) {
        if (fibers_[i].st != state::runnable) continue;
        ran = true;
        current.group = this;
        current.fiber = i;
        current.ids = fibers_[i].ids;
        swapcontext(&sched_, &fibers_[i].ctx);
        current.group = nullptr;
        if (fibers_[i].st == state::failed) std::rethrow_exception(error_);
      }
      if (ran) continue;
      std::uint32_t done = 0, at_barrier = 0, at_simd = 0;
      for (const auto& f : fibers_) {
        done += f.st == state::done;
        at_barrier += f.st == state::at_barrier;
        at_simd += f.st == state::at_simd;
      }
      if (done == n) return;
      if (at_barrier == n) {  // every thread arrived: the next epoch
        ++epoch_;
        for (auto& f : fibers_) f.st = state::runnable;
        continue;
      }
      report_stall(group, done, at_barrier, at_simd);
    }
  }

  /// threadgroup_barrier from the current fiber.
  void barrier() {
    fiber& f = fibers_[current.fiber];
    f.st = state::at_barrier;
    suspend(f);
  }

  /// A simdgroup operation from the current fiber: stores its value, waits for the other lanes,
  /// returns its result.
  template <class T, class Compute>
  T simd_exchange(simd_kind kind, T v, std::int64_t param, const char* type_name, Compute compute) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 32);
    fiber& f = fibers_[current.fiber];
    f.kind = kind;
    f.param = param;
    f.value_size = sizeof(T);
    f.value_type = type_name;
    std::memcpy(f.in, &v, sizeof(T));
    const std::uint32_t sg = f.ids.simdgroup;
    const std::uint32_t first = sg * simd_width;
    const std::uint32_t lanes = std::min<std::uint32_t>(simd_width, static_cast<std::uint32_t>(fibers_.size()) - first);
    std::uint32_t arrived = 0;
    for (std::uint32_t l = 0; l < lanes; ++l) arrived += fibers_[first + l].st == state::at_simd || first + l == current.fiber;
    if (arrived < lanes) {
      f.st = state::at_simd;
      suspend(f);
    } else {
      // the last lane to arrive computes every lane's result
      T in[simd_width];
      for (std::uint32_t l = 0; l < lanes; ++l) {
        const fiber& o = fibers_[first + l];
        if (o.kind != kind || o.value_size != sizeof(T) || o.value_type != type_name)
          fail("simdgroup lanes diverged in kernel '" + std::string(kernel_) + "', threadgroup " +
               std::to_string(f.ids.group) + ", simdgroup " + std::to_string(sg) + ": lane " + std::to_string(f.ids.lane) +
               " calls " + simd_name(kind) + "(" + type_name + ") while lane " + std::to_string(l) + " calls " +
               simd_name(o.kind) + "(" + o.value_type + ")");
        std::memcpy(&in[l], o.in, sizeof(T));
      }
      for (std::uint32_t l = 0; l < lanes; ++l) {
        fiber& o = fibers_[first + l];
        const T r = compute(in, lanes, l, o.param, o.ids);
        std::memcpy(o.out, &r, sizeof(T));
        if (first + l != current.fiber) o.st = state::runnable;
      }
    }
    T r;
    std::memcpy(&r, f.out, sizeof(T));
    return r;
  }

 private:
  static void entry() {
    group_run* g = current.group;
    fiber& f = g->fibers_[current.fiber];
    try {
      g->invoke_(g->body_, f.ids);
      f.st = state::done;
    } catch (...) {
      g->error_ = std::current_exception();
      f.st = state::failed;
    }
    // returns to uc_link: the scheduler
  }
  void suspend(fiber& f) {
    const thread_ids ids = current.ids;
    swapcontext(&f.ctx, &sched_);
    current.ids = ids;  // the scheduler set it for other fibers meanwhile
  }

  static std::string list(const std::vector<std::uint32_t>& v) {
    std::string s;
    const std::size_t shown = std::min<std::size_t>(v.size(), 8);
    for (std::size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    if (v.size() > shown) s += ", ... (" + std::to_string(v.size()) + " threads)";
    return s;
  }

  [[noreturn]] void report_stall(std::uint32_t group, std::uint32_t done, std::uint32_t at_barrier, std::uint32_t at_simd) {
    std::vector<std::uint32_t> b, d, s;
    for (std::uint32_t i = 0; i < fibers_.size(); ++i) {
      if (fibers_[i].st == state::at_barrier) b.push_back(i);
      if (fibers_[i].st == state::done) d.push_back(i);
      if (fibers_[i].st == state::at_simd) s.push_back(i);
    }
    std::string msg = "kernel '" + std::string(kernel_) + "', threadgroup " + std::to_string(group) + " (" +
                      std::to_string(fibers_.size()) + " threads) cannot go on: ";
    if (at_barrier > 0)
      msg += "threadgroup_barrier (barrier " + std::to_string(epoch_ + 1) + " of the group) is not reached by every thread: threads " +
             list(b) + " wait at it";
    else
      msg += "a simdgroup operation is not reached by every lane of its simdgroup";
    if (at_simd > 0) {
      msg += std::string(at_barrier > 0 ? ", " : ": ") + "threads " + list(s) + " wait at " +
             simd_name(fibers_[s.front()].kind) + " (simdgroup " + std::to_string(fibers_[s.front()].ids.simdgroup) + ")";
    }
    if (done > 0) msg += ", threads " + list(d) + " have returned";
    fail(msg + " (divergent control flow around a barrier or simdgroup operation)");
  }

  std::string_view kernel_;
  std::vector<fiber> fibers_;
  std::vector<threadgroup_block> blocks_;
  ucontext_t sched_{};
  std::uint64_t epoch_ = 0;
  std::exception_ptr error_;
  const void* body_ = nullptr;
  void (*invoke_)(const void*, const thread_ids&) = nullptr;
};

inline group_run& current_group(const char* what) {
  if (!current.group) fail(std::string(what) + " called outside a kernel dispatch");
  return *current.group;
}

/// Whether an access by the current thread is ordered after one by `thread` of `group` in
/// barrier epoch `epoch`: the same thread, or the same threadgroup and a barrier between.
inline bool device_ordered(std::int64_t thread, std::int64_t group, std::uint64_t epoch) {
  return thread == static_cast<std::int64_t>(current.ids.grid) ||
         (group == static_cast<std::int64_t>(current.ids.group) && epoch < current_group("a device memory access").epoch());
}

// ---------------------------------------------------------------------------------------------
// Checked buffers.

template <class T>
class buffer_ptr;

/// A device buffer ([[buffer(n)]]) as a kernel sees it: a pointer whose every access is checked
/// against the size the host bound. Pointer arithmetic keeps the binding.
template <class T>
class buffer_ptr {
 public:
  buffer_ptr() = default;
  buffer_ptr(T* base, std::size_t count, int slot, std::ptrdiff_t offset = 0)
      : base_(base), count_(count), slot_(slot), offset_(offset) {}
  operator buffer_ptr<const T>() const
    requires(!std::is_const_v<T>)
  {
    return buffer_ptr<const T>(base_, count_, slot_, offset_);
  }

  /// A const buffer's element is a plain reference; a writable buffer's is a device_ref, which
  /// records each read and write for the race check.
  decltype(auto) operator[](std::int64_t i) const { return at(offset_ + i); }
  decltype(auto) operator*() const { return at(offset_); }
  /// The element an atomic operation works on (atomic_fetch_add_explicit ...): checked, recorded.
  T& atomic_element() const;
  buffer_ptr operator+(std::int64_t d) const { return buffer_ptr(base_, count_, slot_, offset_ + d); }
  buffer_ptr operator-(std::int64_t d) const { return buffer_ptr(base_, count_, slot_, offset_ - d); }
  buffer_ptr& operator+=(std::int64_t d) {
    offset_ += d;
    return *this;
  }
  std::size_t count() const { return count_; }

 private:
  template <class U>
  friend class buffer_ptr;
  decltype(auto) at(std::int64_t i) const;
  T* checked(std::int64_t i) const {
    if (i < 0 || static_cast<std::uint64_t>(i) >= count_)
      fail("out-of-bounds access to device buffer(" + std::to_string(slot_) + ") in " + thread_where() + ": element " +
           std::to_string(i) + " of a buffer of " + std::to_string(count_) + " elements of " + std::to_string(sizeof(T)) +
           " bytes");
    return base_ + i;
  }
  T* base_ = nullptr;
  std::size_t count_ = 0;
  int slot_ = 0;
  std::ptrdiff_t offset_ = 0;
};

[[noreturn]] inline void device_race(const std::string& what, std::int64_t other, std::int64_t other_group) {
  const std::string who = other == -2 ? std::string("several threads") : "thread_position_in_grid " + std::to_string(other) +
                          (other_group >= 0 ? " (threadgroup " + std::to_string(other_group) + ")" : std::string());
  fail("device memory race in " + thread_where() + ": " + what + " " + who +
       " with nothing ordering the two (threads of different threadgroups do not synchronize within a dispatch)");
}
/// One element of a writable device buffer: reads and writes are recorded for the race check.
template <class T>
class device_ref {
 public:
  device_ref(T* p, int slot, std::int64_t i) : p_(p), slot_(slot), i_(i) {}
  operator T() const {
    device_cell& c = device_shadow[p_];
    const auto me = static_cast<std::int64_t>(current.ids.grid), group = static_cast<std::int64_t>(current.ids.group);
    const std::uint64_t e = epoch();
    if (c.writer >= 0 && !device_ordered(c.writer, c.write_group, c.write_epoch))
      device_race("it reads " + element() + ", which was written by", c.writer, c.write_group);
    if (c.atomic_user != -1 && c.atomic_user != me) device_race("it reads " + element() + ", which was updated atomically by", c.atomic_user, -1);
    if (c.reader == -1) c.reader = me, c.read_group = group;
    else if (c.reader != me) c.reader = -2, c.read_group = c.read_group == group ? group : -2;
    c.read_epoch = e;
    return *p_;
  }
  device_ref& operator=(const T& v) {
    device_cell& c = device_shadow[p_];
    const auto me = static_cast<std::int64_t>(current.ids.grid), group = static_cast<std::int64_t>(current.ids.group);
    if (c.writer >= 0 && !device_ordered(c.writer, c.write_group, c.write_epoch))
      device_race("it writes " + element() + ", which was written by", c.writer, c.write_group);
    if (c.reader != -1 && c.reader != me && !(c.read_group == group && c.read_epoch < epoch()))
      device_race("it writes " + element() + ", which was read by", c.reader, c.read_group);
    if (c.atomic_user != -1 && c.atomic_user != me) device_race("it writes " + element() + ", which was updated atomically by", c.atomic_user, -1);
    c.writer = me, c.write_group = group, c.write_epoch = epoch();
    *p_ = v;
    return *this;
  }
  device_ref& operator=(const device_ref& o) { return *this = static_cast<T>(o); }
  device_ref& operator+=(const T& v) { return *this = static_cast<T>(*this) + v; }
  device_ref& operator-=(const T& v) { return *this = static_cast<T>(*this) - v; }
  device_ref& operator*=(const T& v) { return *this = static_cast<T>(*this) * v; }

 private:
  static std::uint64_t epoch() { return current_group("a device memory access").epoch(); }
  std::string element() const { return "element " + std::to_string(i_) + " of device buffer(" + std::to_string(slot_) + ")"; }
  T* p_;
  int slot_;
  std::int64_t i_;
};

template <class T>
decltype(auto) buffer_ptr<T>::at(std::int64_t i) const {
  if constexpr (std::is_const_v<T>) return static_cast<T&>(*checked(i));
  else return device_ref<T>(checked(i), slot_, i);
}

template <class T>
T& buffer_ptr<T>::atomic_element() const {
  T* p = checked(offset_);
  device_cell& c = device_shadow[p];
  const auto me = static_cast<std::int64_t>(current.ids.grid);
  const std::string element = "element " + std::to_string(offset_) + " of device buffer(" + std::to_string(slot_) + ")";
  if (c.writer >= 0 && c.writer != me) device_race("it updates atomically " + element + ", which was written plainly by", c.writer, c.write_group);
  if (c.reader != -1 && c.reader != me) device_race("it updates atomically " + element + ", which was read plainly by", c.reader, c.read_group);
  if (c.atomic_user == -1) c.atomic_user = me;
  else if (c.atomic_user != me) c.atomic_user = -2;
  return *p;
}

/// A reference to one element of threadgroup memory: reads and writes are recorded for the race
/// check.
template <class T>
class threadgroup_ref {
 public:
  threadgroup_ref(threadgroup_block* b, std::size_t i) : b_(b), i_(i) {}
  operator T() const { return read(); }
  threadgroup_ref& operator=(const T& v) {
    write(v);
    return *this;
  }
  threadgroup_ref& operator=(const threadgroup_ref& o) { return *this = static_cast<T>(o); }
  threadgroup_ref& operator+=(const T& v) { return *this = read() + v; }
  threadgroup_ref& operator-=(const T& v) { return *this = read() - v; }
  threadgroup_ref& operator*=(const T& v) { return *this = read() * v; }

 private:
  T* at() const { return reinterpret_cast<T*>(b_->bytes.data()) + i_; }
  std::string element() const {
    return "element " + std::to_string(i_) + " of threadgroup(" + std::to_string(b_->slot) + ") memory";
  }
  T read() const {
    group_run& g = current_group("a threadgroup memory read");
    shadow_cell& c = b_->shadow[i_];
    const auto me = static_cast<std::int32_t>(current.ids.local);
    const std::uint64_t e = g.epoch();
    if (!c.written)
      fail("read of uninitialized threadgroup memory in " + thread_where() + ": it reads " + element() +
           ", which no thread of the threadgroup has written (threadgroup memory starts undefined on the GPU)");
    if (c.write_epoch == e && c.writer != me)
      fail("threadgroup memory race in " + thread_where() + ": it reads " + element() + ", which thread " +
           std::to_string(c.writer) + " wrote with no threadgroup_barrier between (barrier epoch " + std::to_string(e) + ")");
    if (c.read_epoch != e) c.read_epoch = e, c.reader = me;
    else if (c.reader != me) c.reader = -2;
    T v;
    std::memcpy(&v, at(), sizeof(T));
    return v;
  }
  void write(const T& v) const {
    group_run& g = current_group("a threadgroup memory write");
    shadow_cell& c = b_->shadow[i_];
    const auto me = static_cast<std::int32_t>(current.ids.local);
    const std::uint64_t e = g.epoch();
    if (c.write_epoch == e && c.writer != me)
      fail("threadgroup memory race in " + thread_where() + ": it writes " + element() + ", which thread " +
           std::to_string(c.writer) + " wrote with no threadgroup_barrier between (barrier epoch " + std::to_string(e) + ")");
    if (c.read_epoch == e && c.reader != me)
      fail("threadgroup memory race in " + thread_where() + ": it writes " + element() + ", which " +
           (c.reader == -2 ? std::string("several threads") : "thread " + std::to_string(c.reader)) +
           " read with no threadgroup_barrier between (barrier epoch " + std::to_string(e) + ")");
    c.write_epoch = e, c.writer = me, c.written = true;
    std::memcpy(at(), &v, sizeof(T));
  }
  threadgroup_block* b_;
  std::size_t i_;
};

/// Threadgroup memory ([[threadgroup(n)]]) as a kernel sees it: checked, race-tracked accesses.
template <class T>
class threadgroup_ptr {
 public:
  using tg_value_type = T;
  threadgroup_ptr() = default;
  threadgroup_ptr(threadgroup_block* b, std::int64_t offset = 0) : b_(b), offset_(offset) {}
  threadgroup_ref<T> operator[](std::int64_t i) const {
    const std::int64_t k = offset_ + i;
    const std::size_t count = b_->bytes.size() / sizeof(T);
    if (k < 0 || static_cast<std::uint64_t>(k) >= count)
      fail("out-of-bounds access to threadgroup(" + std::to_string(b_->slot) + ") memory in " + thread_where() +
           ": element " + std::to_string(k) + " of " + std::to_string(count));
    return threadgroup_ref<T>(b_, static_cast<std::size_t>(k));
  }
  threadgroup_ptr operator+(std::int64_t d) const { return threadgroup_ptr(b_, offset_ + d); }

 private:
  threadgroup_block* b_ = nullptr;
  std::int64_t offset_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Dispatch.

/// Runs body(ids) for every thread of `groups` threadgroups of `threads` threads (1-D), with
/// threadgroup memory slot k of threadgroup_memory_slots[k] = (bytes, element size) (fresh and zeroed for every
/// threadgroup; body reaches them through `threadgroup_memory<T>(k)`).
template <class Body>
void dispatch(std::string_view kernel, std::uint32_t groups, std::uint32_t threads, const Body& body,
              const std::vector<std::pair<std::size_t, std::size_t>>& threadgroup_memory_slots = {}) {
  if (threads == 0 || threads > 1024)
    fail("kernel '" + std::string(kernel) + "': " + std::to_string(threads) +
         " threads per threadgroup (Metal allows 1 to 1024)");
  if (current.group) fail("kernel '" + std::string(kernel) + "' dispatched from inside another kernel");
  group_run g(kernel, threads);
  for (std::size_t k = 0; k < threadgroup_memory_slots.size(); ++k) {
    const auto [bytes, elem] = threadgroup_memory_slots[k];
    if (elem == 0 || bytes % elem != 0)
      fail("kernel '" + std::string(kernel) + "': threadgroup(" + std::to_string(k) + ") of " + std::to_string(bytes) +
           " bytes is not a whole number of " + std::to_string(elem) + "-byte elements");
    threadgroup_block b;
    b.bytes.assign(bytes, 0);
    b.elem_size = elem;
    b.shadow.resize(bytes / elem);
    b.slot = static_cast<int>(k);
    g.blocks().push_back(std::move(b));
  }
  current.kernel = kernel;
  device_shadow.clear();
  for (std::uint32_t gi = 0; gi < groups; ++gi) g.run(gi, groups, body);
  device_shadow.clear();
}

/// Threadgroup memory slot k of the current threadgroup, as T.
template <class T>
threadgroup_ptr<T> threadgroup_memory(int k) {
  group_run& g = current_group("threadgroup memory");
  if (k < 0 || static_cast<std::size_t>(k) >= g.blocks().size())
    fail("kernel '" + std::string(current.kernel) + "' reads threadgroup(" + std::to_string(k) + "), which is not bound");
  auto& b = g.blocks()[static_cast<std::size_t>(k)];
  if (b.elem_size != sizeof(T))
    fail("threadgroup(" + std::to_string(k) + ") is tracked with " + std::to_string(b.elem_size) + "-byte elements, read as " +
         std::to_string(sizeof(T)) + "-byte ones");
  return threadgroup_ptr<T>(&b);
}

/// One binding of a kernel's argument table, as a host sets it with setBuffer / setBytes /
/// setThreadgroupMemoryLength.
struct binding {
  enum class kind { buffer, threadgroup } k = kind::buffer;
  void* data = nullptr;
  std::size_t bytes = 0;
};
inline binding bind_buffer(void* p, std::size_t bytes) { return {binding::kind::buffer, p, bytes}; }
inline binding bind_buffer(const void* p, std::size_t bytes) { return {binding::kind::buffer, const_cast<void*>(p), bytes}; }
inline binding bind_threadgroup(std::size_t bytes) { return {binding::kind::threadgroup, nullptr, bytes}; }

template <class P>
struct bind_traits;
template <class T>
struct bind_traits<buffer_ptr<T>> {
  static buffer_ptr<T> make(const binding& b, int slot, int, std::string_view kernel) {
    if (b.k != binding::kind::buffer)
      fail("kernel '" + std::string(kernel) + "': argument " + std::to_string(slot) + " is a device buffer, bound as threadgroup memory");
    if (b.bytes % sizeof(T) != 0)
      fail("kernel '" + std::string(kernel) + "': buffer(" + std::to_string(slot) + ") of " + std::to_string(b.bytes) +
           " bytes is not a whole number of " + std::to_string(sizeof(T)) + "-byte elements");
    return buffer_ptr<T>(static_cast<T*>(b.data), b.bytes / sizeof(T), slot);
  }
};
template <class T>
struct bind_traits<threadgroup_ptr<T>> {
  static threadgroup_ptr<T> make(const binding& b, int slot, int tg_slot, std::string_view kernel) {
    if (b.k != binding::kind::threadgroup)
      fail("kernel '" + std::string(kernel) + "': argument " + std::to_string(slot) + " is threadgroup memory, bound as a buffer");
    return threadgroup_memory<std::remove_const_t<T>>(tg_slot);
  }
};

/// The number of trailing built-in parameters of a generated kernel (tenet's MSL generator emits
/// them in this order: thread_position_in_grid, threadgroup_position_in_grid,
/// thread_position_in_threadgroup, threads_per_threadgroup, thread_index_in_simdgroup,
/// simdgroup_index_in_threadgroup).
inline constexpr std::size_t builtin_params = 6;

/// Dispatches kernel k with the argument table `args` (one binding per leading parameter, in
/// order), `groups` threadgroups of `threads` threads.
template <class... P>
void launch(std::string_view name, void (*k)(P...), std::uint32_t groups, std::uint32_t threads, const std::vector<binding>& args) {
  static_assert(sizeof...(P) >= builtin_params, "metal emulator: a kernel ends with the six built-in position parameters");
  constexpr std::size_t nargs = sizeof...(P) - builtin_params;
  if (args.size() != nargs)
    fail("kernel '" + std::string(name) + "' takes " + std::to_string(nargs) + " bound arguments, " + std::to_string(args.size()) +
         " were bound");
  using params = std::tuple<std::remove_cvref_t<P>...>;
  // threadgroup slots in parameter order, each tracked with its parameter's element size
  std::vector<std::pair<std::size_t, std::size_t>> tg;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((void)[&] {
      using Q = std::tuple_element_t<I, params>;
      if constexpr (requires { typename Q::tg_value_type; }) tg.emplace_back(args[I].bytes, sizeof(typename Q::tg_value_type));
    }(), ...);
  }(std::make_index_sequence<nargs>{});
  dispatch(
      name, groups, threads,
      [&](const thread_ids& t) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          int tg = 0;
          auto arg = [&](auto i) {
            using Q = std::tuple_element_t<decltype(i)::value, params>;
            constexpr int slot = static_cast<int>(decltype(i)::value);
            if constexpr (requires { typename Q::tg_value_type; })
              return bind_traits<Q>::make(args[slot], slot, tg++, name);
            else
              return bind_traits<Q>::make(args[slot], slot, 0, name);
          };
          std::tuple<std::tuple_element_t<I, params>...> bound{arg(std::integral_constant<std::size_t, I>{})...};
          std::apply([&](auto&... a) { k(a..., t.grid, t.group, t.local, t.group_size, t.lane, t.simdgroup); }, bound);
        }(std::make_index_sequence<nargs>{});
      },
      tg);
}

}  // namespace tenet::metal_emu
