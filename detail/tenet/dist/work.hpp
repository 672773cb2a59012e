#pragma once
#include <tenet/detail_check.hpp>
// What every tenet::dist operation is made of: the options, the `work` handle, and the staging of
// tensors into contiguous buffers (collectives.hpp on MPI, nccl.hpp on NCCL use them).
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <tenet/autograd/graph.hpp>  // ag::grad_mode, ag::is_tracked
#include <tenet/dist/process_group.hpp>
#include <tenet/error.hpp>
#include <tenet/runtime/storage.hpp>  // bump_version
#include <tenet/tensor.hpp>

namespace tenet::dist {

/// Where and how a collective runs: the group (the world by default) and whether the call
/// returns at once with a pending work (async_op, torch's) or waits.
struct collective_options {
  process_group group{};
  bool async_op = false;
};

/// A pending (or finished) operation (torch's Work). wait() polls against the timeout and throws
/// dist_error; it may be called again after it returned (then nothing happens). Dropping an
/// unfinished work waits for it (its buffers must outlive MPI's use of them).
class work {
 public:
  struct state {
    std::vector<MPI_Request> reqs;
    /// Instead of the MPI requests: true when the operation has finished (NCCL: its CUDA event),
    /// and what to do when a wait gives up (NCCL: abort the communicator).
    std::function<bool()> test;
    std::function<void()> abort;
    std::function<void()> finish;  // after completion: write-back of copies, avg's division
    std::string what;
    std::shared_ptr<detail::group_impl> group;
    std::vector<std::shared_ptr<void>> keep;  // buffers MPI reads or writes
    bool done = false;
    bool finished() {
      if (test) return test();
      int flag = 0;
      detail::check(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE), what.c_str());
      return flag != 0;
    }
    void wait() { detail::wait_until([this] { return finished(); }, *group, what, abort); }
    ~state() {
      if (done || !detail::st().initialized || !detail::st().broken.empty()) return;
      try {
        wait();
      } catch (...) {  // a destructor does not throw; the group is marked broken
      }
    }
  };
  work() = default;
  explicit work(std::shared_ptr<state> s) : s_(std::move(s)) {}

  /// Waits for the operation; then its results are in the tensors given to it.
  void wait() {
    if (!s_ || s_->done) return;
    s_->wait();
    complete();
  }
  /// True when the operation has finished (then its results are in place); does not block.
  bool is_completed() {
    if (!s_ || s_->done) return true;
    const bool flag = s_->finished();
    if (flag) complete();
    return flag;
  }

 private:
  void complete() {
    s_->done = true;
    if (s_->finish) s_->finish();
  }
  std::shared_ptr<state> s_;
};

namespace detail {

/// Row-major walk of a strided layout: f(flat index, element offset).
template <class F>
void walk(const std::int64_t* sizes, const std::int64_t* strides, std::size_t rank, std::int64_t offset, F&& f) {
  std::int64_t n = 1;
  for (std::size_t d = 0; d < rank; ++d) n *= sizes[d];
  if (n == 0) return;
  std::vector<std::int64_t> idx(rank, 0);
  std::int64_t off = offset;
  for (std::int64_t flat = 0; flat < n; ++flat) {
    f(flat, off);
    for (std::size_t d = rank; d-- > 0;) {
      if (++idx[d] < sizes[d]) {
        off += strides[d];
        break;
      }
      off -= (sizes[d] - 1) * strides[d];
      idx[d] = 0;
    }
  }
}

/// True when no two elements of the layout share a memory position (ordered by stride, each
/// stride is at least the extent spanned by the smaller ones).
inline bool non_overlapping(const std::int64_t* sizes, const std::int64_t* strides, std::size_t rank) {
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (|stride|, size) of dims with size > 1
  for (std::size_t d = 0; d < rank; ++d) {
    if (sizes[d] == 0) return true;
    if (sizes[d] > 1) dims.emplace_back(strides[d] < 0 ? -strides[d] : strides[d], sizes[d]);
  }
  std::sort(dims.begin(), dims.end());
  std::int64_t span = 1;
  for (const auto& [stride, size] : dims) {
    if (stride < span) return false;
    span += stride * (size - 1);
  }
  return true;
}

inline std::string sizes_str(const std::int64_t* s, std::size_t r) {
  std::string t = "[";
  for (std::size_t i = 0; i < r; ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}
template <class T, class S>
std::string sizes_str(const Tensor<T, S>& t) {
  return sizes_str(t.sizes().data(), S::rank);
}

/// Collectives write their outputs in place and autograd does not record them, so (as torch refuses
/// an in-place op on a leaf that requires grad, and as tenet's own in-place writes do:
/// ag::check_in_place) a tensor that a collective writes on any rank must not be tracked by
/// autograd while grad mode is on. Called for every tensor the operation writes on some rank (a
/// broadcast's tensor on the root too), so that every rank that passed such a tensor refuses it
/// before any communication.
template <class T, class S>
void refuse_tracked(const Tensor<T, S>& t, const char* what) {
  if (t.defined() && tenet::detail::ag::grad_mode() && tenet::detail::ag::is_tracked(t)) {
    const bool leaf = !t.autograd_meta()->grad_fn;
    throw value_error(std::string("tenet::dist::") + what + ": the tensor of sizes " + sizes_str(t) + " " +
                      (leaf ? "is an autograd leaf that requires grad" : "was computed from tensors that require grad") +
                      ", and collectives write in place without being recorded by autograd; run the collective "
                      "under tenet::no_grad (as an optimizer step does), or on t.detach() or a clone");
  }
}

/// A tensor's elements as one contiguous buffer: the tensor's own memory when it is contiguous,
/// else a copy (read in when the operation reads the tensor, written back by `store` when it
/// writes it).
template <class T, class S>
struct staged {
  Tensor<T, S> t;
  T* ptr = nullptr;
  std::shared_ptr<T[]> copy;
  std::int64_t n = 0;

  staged(const Tensor<T, S>& tensor, bool read, bool written, const char* what) : t(tensor) {
    if (!t.defined()) throw value_error(std::string("tenet::dist::") + what + ": the tensor is undefined");
    if (!t.device().is_cpu())
      throw device_error(std::string("tenet::dist::") + what + ": the tensor is on " + t.device().str() +
                         "; this build of tenet::dist runs MPI on CPU tensors (move it with .cpu())");
    n = t.numel();
    if (t.is_contiguous()) {
      ptr = n ? t.data() : nullptr;
      return;
    }
    if (written && !non_overlapping(t.sizes().data(), t.strides().data(), S::rank))
      throw value_error(std::string("tenet::dist::") + what + ": the output tensor of sizes " + sizes_str(t) +
                        " has overlapping elements (strides " + sizes_str(t.strides().data(), S::rank) +
                        ", e.g. an expand()ed view); pass a tensor whose elements are distinct (.clone())");
    copy = std::shared_ptr<T[]>(new T[static_cast<std::size_t>(n)]);
    ptr = copy.get();
    if (read) {
      const T* base = static_cast<const T*>(t.storage()->data);
      walk(t.sizes().data(), t.strides().data(), S::rank, t.offset(),
           [&](std::int64_t i, std::int64_t off) { ptr[i] = base[off]; });
    }
  }
  /// After an operation wrote the buffer: into the tensor (when it was a copy), version bumped.
  void store() const {
    if (!t.defined()) return;
    if (copy) {
      T* base = static_cast<T*>(t.storage()->data);
      const T* src = copy.get();
      walk(t.sizes().data(), t.strides().data(), S::rank, t.offset(),
           [&](std::int64_t i, std::int64_t off) { base[off] = src[i]; });
    }
    tenet::detail::bump_version(t.storage().get());
  }
  void* raw() const { return static_cast<void*>(ptr); }
  std::shared_ptr<void> keep() const { return copy ? std::shared_ptr<void>(copy) : std::shared_ptr<void>(); }
};

/// True when the element ranges [a, a + na) and [b, b + nb) share memory (staged buffers: a copy
/// never overlaps anything).
template <class T>
bool overlaps(const T* a, std::int64_t na, const T* b, std::int64_t nb) {
  if (!a || !b || na == 0 || nb == 0) return false;
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return pa < pb + static_cast<std::uintptr_t>(nb) * sizeof(T) && pb < pa + static_cast<std::uintptr_t>(na) * sizeof(T);
}

inline int count_int(std::int64_t n, const char* what) {
  if (n > 2147483647)
    throw value_error(std::string("tenet::dist::") + what + ": " + std::to_string(n) +
                      " elements exceed MPI's int count (2^31 - 1); split the tensor");
  return static_cast<int>(n);
}

/// avg: divides the summed buffer by the group size, in the element type (16-bit floats in float).
template <class T>
void divide(T* p, std::int64_t n, int by) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    for (std::int64_t i = 0; i < n; ++i) p[i] = T(static_cast<float>(p[i]) / static_cast<float>(by));
  } else if constexpr (std::is_floating_point_v<T>) {
    for (std::int64_t i = 0; i < n; ++i) p[i] = p[i] / static_cast<T>(by);
  }
}

/// The group to run on: a member, initialized, not broken.
inline std::shared_ptr<group_impl> member_group(const process_group& g, const char* what) {
  require_init(what);
  auto impl = g.shared();
  if (impl->rank < 0)
    throw dist_error(std::string("tenet::dist::") + what + ": rank " + std::to_string(st().rank) +
                     " is not a member of the process group (ranks " + g.ranks_text() + ")");
  return impl;
}

/// The cross-rank check (init_options::check_consistency): every rank of the group gets every
/// rank's (dtype, count, root) and throws the same dist_error when they differ.
inline void check_same_on_all_ranks(const group_impl& g, const std::string& what, dtype d, std::int64_t count,
                                    std::int64_t root) {
  if (!st().check_consistency) return;
  const std::int64_t mine[3] = {static_cast<std::int64_t>(d), count, root};
  std::vector<std::int64_t> all(3 * g.world_ranks.size());
  std::vector<MPI_Request> r(1);
  check(MPI_Iallgather(mine, 3, MPI_INT64_T, all.data(), 3, MPI_INT64_T, g.comm, &r[0]), "MPI_Iallgather");
  wait_all(r, g, what + " (consistency check)");
  std::string table;
  bool differ = false;
  for (std::size_t i = 0; i < g.world_ranks.size(); ++i) {
    differ = differ || all[3 * i] != all[0] || all[3 * i + 1] != all[1] || all[3 * i + 2] != all[2];
    table += "\n  rank " + std::to_string(g.world_ranks[i]) + ": " +
             tenet::name(static_cast<dtype>(all[3 * i])) + ", " + std::to_string(all[3 * i + 1]) + " elements" +
             (all[3 * i + 2] >= 0 ? ", root " + std::to_string(all[3 * i + 2]) : "");
  }
  if (differ)
    throw dist_error("tenet::dist: " + what + " on " + where() + ": the ranks disagree on the dtype, element count or root:" +
                     table);
}

/// Runs `launch` (posts MPI calls into the request list), wraps it in a work, waits unless async.
template <class Launch>
work start(std::shared_ptr<group_impl> g, std::string what, bool async_op, Launch&& launch,
           std::function<void()> finish, std::vector<std::shared_ptr<void>> keep) {
  auto s = std::make_shared<work::state>();
  s->what = std::move(what);
  s->group = std::move(g);
  s->finish = std::move(finish);
  s->keep = std::move(keep);
  launch(s->reqs);
  work w(std::move(s));
  if (!async_op) w.wait();
  return w;
}

template <class T, class S>
void check_same_sizes(const Tensor<T, S>& a, const Tensor<T, S>& b, const char* what, const char* a_name,
                      const char* b_name) {
  if (a.sizes() != b.sizes())
    throw shape_error(std::string("tenet::dist::") + what + ": " + a_name + " has sizes " + sizes_str(a) + " but " +
                      b_name + " has sizes " + sizes_str(b) + "; they must be equal");
}

}  // namespace detail

}  // namespace tenet::dist
