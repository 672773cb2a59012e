#pragma once
#include <tenet/detail_check.hpp>
// Collectives and point-to-point on CPU tensors over MPI (tenet/dist.hpp has the API summary).
//
// Every operation posts MPI nonblocking calls (MPI_Iallreduce, MPI_Ibcast, ...) and returns a
// `work`; without async_op the call waits for it before returning. A tensor that is not
// contiguous travels through a contiguous copy, written back into the view when the work
// finishes; a result written into a view whose elements overlap (an expand()ed tensor) is refused
// with value_error, since the write-back could not be right.
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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
    std::function<void()> finish;  // after completion: write-back of copies, avg's division
    std::string what;
    std::shared_ptr<detail::group_impl> group;
    std::vector<std::shared_ptr<void>> keep;  // buffers MPI reads or writes
    bool done = false;
    ~state() {
      if (done || !detail::st().initialized || !detail::st().broken.empty()) return;
      try {
        detail::wait_all(reqs, *group, what);
      } catch (...) {  // a destructor does not throw; the group is marked broken
      }
    }
  };
  work() = default;
  explicit work(std::shared_ptr<state> s) : s_(std::move(s)) {}

  /// Waits for the operation; then its results are in the tensors given to it.
  void wait() {
    if (!s_ || s_->done) return;
    detail::wait_all(s_->reqs, *s_->group, s_->what);
    complete();
  }
  /// True when the operation has finished (then its results are in place); does not block.
  bool is_completed() {
    if (!s_ || s_->done) return true;
    int flag = 0;
    detail::check(MPI_Testall(static_cast<int>(s_->reqs.size()), s_->reqs.data(), &flag, MPI_STATUSES_IGNORE),
                  s_->what.c_str());
    if (flag) complete();
    return flag != 0;
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

// ---------------------------------------------------------------------------------------------
// Collectives

/// Reduces `t` over the group, in place on every rank (torch.distributed.all_reduce).
template <class T, class S>
work all_reduce(const Tensor<T, S>& t, reduce_op op = reduce_op::sum, const collective_options& o = {}) {
  auto g = detail::member_group(o.group, "all_reduce");
  const MPI_Op mop = detail::mpi_op(op, dtype_of<T>);
  auto b = std::make_shared<detail::staged<T, S>>(t, true, true, "all_reduce");
  const std::string what = std::string("all_reduce(") + name(op) + ")";
  detail::check_same_on_all_ranks(*g, what, dtype_of<T>, b->n, -1);
  const int n = detail::count_int(b->n, "all_reduce");
  const int size = static_cast<int>(g->world_ranks.size());
  return detail::start(
      g, what, o.async_op,
      [&](std::vector<MPI_Request>& r) {
        r.resize(1);
        detail::check(MPI_Iallreduce(MPI_IN_PLACE, b->raw(), n, detail::mpi_type(dtype_of<T>), mop, g->comm, &r[0]),
                      "MPI_Iallreduce");
      },
      [b, op, size] {
        if (op == reduce_op::avg) detail::divide(b->ptr, b->n, size);
        b->store();
      },
      {b->keep()});
}

/// Copies `t` of rank `src` (a world rank) into `t` on every rank of the group.
template <class T, class S>
work broadcast(const Tensor<T, S>& t, int src, const collective_options& o = {}) {
  auto g = detail::member_group(o.group, "broadcast");
  const int root = o.group.group_rank(src, "broadcast");
  const bool is_root = g->rank == root;
  auto b = std::make_shared<detail::staged<T, S>>(t, is_root, !is_root, "broadcast");
  detail::check_same_on_all_ranks(*g, "broadcast", dtype_of<T>, b->n, src);
  const int n = detail::count_int(b->n, "broadcast");
  return detail::start(
      g, "broadcast", o.async_op,
      [&](std::vector<MPI_Request>& r) {
        r.resize(1);
        detail::check(MPI_Ibcast(b->raw(), n, detail::mpi_type(dtype_of<T>), root, g->comm, &r[0]), "MPI_Ibcast");
      },
      [b, is_root] {
        if (!is_root) b->store();
      },
      {b->keep()});
}

/// Reduces `t` over the group into `t` of rank `dst` (a world rank); the others' `t` is unchanged.
template <class T, class S>
work reduce(const Tensor<T, S>& t, int dst, reduce_op op = reduce_op::sum, const collective_options& o = {}) {
  auto g = detail::member_group(o.group, "reduce");
  const int root = o.group.group_rank(dst, "reduce");
  const bool is_root = g->rank == root;
  const MPI_Op mop = detail::mpi_op(op, dtype_of<T>);
  auto b = std::make_shared<detail::staged<T, S>>(t, true, is_root, "reduce");
  const std::string what = std::string("reduce(") + name(op) + ")";
  detail::check_same_on_all_ranks(*g, what, dtype_of<T>, b->n, dst);
  const int n = detail::count_int(b->n, "reduce");
  const int size = static_cast<int>(g->world_ranks.size());
  return detail::start(
      g, what, o.async_op,
      [&](std::vector<MPI_Request>& r) {
        r.resize(1);
        detail::check(MPI_Ireduce(is_root ? MPI_IN_PLACE : b->raw(), is_root ? b->raw() : nullptr, n,
                                  detail::mpi_type(dtype_of<T>), mop, root, g->comm, &r[0]),
                      "MPI_Ireduce");
      },
      [b, op, size, is_root] {
        if (!is_root) return;
        if (op == reduce_op::avg) detail::divide(b->ptr, b->n, size);
        b->store();
      },
      {b->keep()});
}

/// Gathers `in` of every rank into `out` (one tensor of in's sizes per group rank, in rank order).
template <class T, class S, class S2>
work all_gather(const std::vector<Tensor<T, S>>& out, const Tensor<T, S2>& in, const collective_options& o = {}) {
  auto g = detail::member_group(o.group, "all_gather");
  const int size = static_cast<int>(g->world_ranks.size());
  if (static_cast<int>(out.size()) != size)
    throw value_error("tenet::dist::all_gather: the output list holds " + std::to_string(out.size()) +
                      " tensors, the group has " + std::to_string(size) + " ranks; pass one tensor per rank");
  static_assert(S::rank == S2::rank, "tenet::dist::all_gather: the output tensors must have the input's rank");
  for (std::size_t i = 0; i < out.size(); ++i)
    if (!std::equal(out[i].sizes().begin(), out[i].sizes().end(), in.sizes().begin()))
      throw shape_error("tenet::dist::all_gather: output tensor " + std::to_string(i) + " has sizes " +
                        detail::sizes_str(out[i]) + ", the input has sizes " + detail::sizes_str(in) +
                        "; every output must have the input's sizes");
  auto b = std::make_shared<detail::staged<T, S2>>(in, true, false, "all_gather");
  detail::check_same_on_all_ranks(*g, "all_gather", dtype_of<T>, b->n, -1);
  const int n = detail::count_int(b->n, "all_gather");
  (void)detail::count_int(b->n * size, "all_gather");
  std::shared_ptr<T[]> gathered(new T[static_cast<std::size_t>(b->n * size)]);
  std::vector<std::shared_ptr<detail::staged<T, S>>> outs;
  for (const auto& t : out) outs.push_back(std::make_shared<detail::staged<T, S>>(t, false, true, "all_gather"));
  return detail::start(
      g, "all_gather", o.async_op,
      [&](std::vector<MPI_Request>& r) {
        r.resize(1);
        const MPI_Datatype ty = detail::mpi_type(dtype_of<T>);
        detail::check(MPI_Iallgather(b->raw(), n, ty, gathered.get(), n, ty, g->comm, &r[0]), "MPI_Iallgather");
      },
      [b, outs, gathered] {
        const std::int64_t n = b->n;
        for (std::size_t i = 0; i < outs.size(); ++i) {
          if (n) std::memcpy(static_cast<void*>(outs[i]->ptr), gathered.get() + static_cast<std::int64_t>(i) * n,
                             static_cast<std::size_t>(n) * sizeof(T));
          outs[i]->store();
        }
      },
      {b->keep(), gathered});
}

namespace detail {
/// out holds `size` blocks of in's sizes: [size * d0, d1, ...] (concatenated) or [size, d0, ...]
/// (stacked), as torch's all_gather_into_tensor / reduce_scatter_tensor accept.
template <class T, class S, class T2, class S2>
void check_blocks(const Tensor<T, S>& big, const Tensor<T2, S2>& small, int size, const char* what,
                  const char* big_name, const char* small_name) {
  const auto& b = big.sizes();
  const auto& s = small.sizes();
  bool ok = false;
  if constexpr (S::rank == S2::rank && S::rank > 0) {
    ok = b[0] == s[0] * size && std::equal(b.begin() + 1, b.end(), s.begin() + 1);
  } else if constexpr (S::rank == S2::rank + 1) {
    ok = b[0] == size && std::equal(b.begin() + 1, b.end(), s.begin());
  }
  if (!ok)
    throw shape_error(std::string("tenet::dist::") + what + ": " + big_name + " has sizes " + sizes_str(big) + " and " +
                      small_name + " has sizes " + sizes_str(small) + "; with " + std::to_string(size) +
                      " ranks " + big_name + " must be " + small_name +
                      "'s sizes with dim 0 times the group size, or with the group size as a new leading dim");
}
}  // namespace detail

/// Gathers `in` of every rank into one tensor `out` (rank blocks along dim 0, or stacked).
template <class T, class S, class S2>
work all_gather_into_tensor(const Tensor<T, S>& out, const Tensor<T, S2>& in, const collective_options& o = {}) {
  auto g = detail::member_group(o.group, "all_gather_into_tensor");
  const int size = static_cast<int>(g->world_ranks.size());
  detail::check_blocks(out, in, size, "all_gather_into_tensor", "the output", "the input");
  auto bi = std::make_shared<detail::staged<T, S2>>(in, true, false, "all_gather_into_tensor");
  auto bo = std::make_shared<detail::staged<T, S>>(out, false, true, "all_gather_into_tensor");
  detail::check_same_on_all_ranks(*g, "all_gather_into_tensor", dtype_of<T>, bi->n, -1);
  const int n = detail::count_int(bi->n, "all_gather_into_tensor");
  (void)detail::count_int(bo->n, "all_gather_into_tensor");
  return detail::start(
      g, "all_gather_into_tensor", o.async_op,
      [&](std::vector<MPI_Request>& r) {
        r.resize(1);
        const MPI_Datatype ty = detail::mpi_type(dtype_of<T>);
        detail::check(MPI_Iallgather(bi->raw(), n, ty, bo->raw(), n, ty, g->comm, &r[0]), "MPI_Iallgather");
      },
      [bo] { bo->store(); }, {bi->keep(), bo->keep()});
}

/// Reduces `in` (the group size of blocks of out's sizes, along dim 0 or stacked) over the group;
/// rank i gets block i, reduced, in `out` (torch.distributed.reduce_scatter_tensor).
template <class T, class S, class S2>
work reduce_scatter_tensor(const Tensor<T, S>& out, const Tensor<T, S2>& in, reduce_op op = reduce_op::sum,
                           const collective_options& o = {}) {
  auto g = detail::member_group(o.group, "reduce_scatter_tensor");
  const int size = static_cast<int>(g->world_ranks.size());
  detail::check_blocks(in, out, size, "reduce_scatter_tensor", "the input", "the output");
  const MPI_Op mop = detail::mpi_op(op, dtype_of<T>);
  auto bi = std::make_shared<detail::staged<T, S2>>(in, true, false, "reduce_scatter_tensor");
  auto bo = std::make_shared<detail::staged<T, S>>(out, false, true, "reduce_scatter_tensor");
  const std::string what = std::string("reduce_scatter_tensor(") + name(op) + ")";
  detail::check_same_on_all_ranks(*g, what, dtype_of<T>, bi->n, -1);
  const int n = detail::count_int(bo->n, "reduce_scatter_tensor");
  (void)detail::count_int(bi->n, "reduce_scatter_tensor");
  return detail::start(
      g, what, o.async_op,
      [&](std::vector<MPI_Request>& r) {
        r.resize(1);
        detail::check(MPI_Ireduce_scatter_block(bi->raw(), bo->raw(), n, detail::mpi_type(dtype_of<T>), mop, g->comm, &r[0]),
                      "MPI_Ireduce_scatter_block");
      },
      [bo, op, size] {
        if (op == reduce_op::avg) detail::divide(bo->ptr, bo->n, size);
        bo->store();
      },
      {bi->keep(), bo->keep()});
}

/// reduce_scatter with a list: in[i] (one per group rank, each of out's sizes) is reduced over
/// the group into `out` of rank i (torch.distributed.reduce_scatter).
template <class T, class S, class S2>
work reduce_scatter(const Tensor<T, S>& out, const std::vector<Tensor<T, S2>>& in, reduce_op op = reduce_op::sum,
                    const collective_options& o = {}) {
  auto g = detail::member_group(o.group, "reduce_scatter");
  const int size = static_cast<int>(g->world_ranks.size());
  if (static_cast<int>(in.size()) != size)
    throw value_error("tenet::dist::reduce_scatter: the input list holds " + std::to_string(in.size()) +
                      " tensors, the group has " + std::to_string(size) + " ranks; pass one tensor per rank");
  static_assert(S::rank == S2::rank, "tenet::dist::reduce_scatter: the inputs must have the output's rank");
  for (std::size_t i = 0; i < in.size(); ++i)
    if (!std::equal(in[i].sizes().begin(), in[i].sizes().end(), out.sizes().begin()))
      throw shape_error("tenet::dist::reduce_scatter: input tensor " + std::to_string(i) + " has sizes " +
                        detail::sizes_str(in[i]) + ", the output has sizes " + detail::sizes_str(out) +
                        "; every input must have the output's sizes");
  const MPI_Op mop = detail::mpi_op(op, dtype_of<T>);
  auto bo = std::make_shared<detail::staged<T, S>>(out, false, true, "reduce_scatter");
  const std::int64_t per = bo->n;
  const int n = detail::count_int(per, "reduce_scatter");
  (void)detail::count_int(per * size, "reduce_scatter");
  std::shared_ptr<T[]> packed(new T[static_cast<std::size_t>(per * size)]);
  for (std::size_t i = 0; i < in.size(); ++i) {
    detail::staged<T, S2> bi(in[i], true, false, "reduce_scatter");
    if (per) std::memcpy(static_cast<void*>(packed.get() + static_cast<std::int64_t>(i) * per), bi.raw(),
                         static_cast<std::size_t>(per) * sizeof(T));
  }
  const std::string what = std::string("reduce_scatter(") + name(op) + ")";
  detail::check_same_on_all_ranks(*g, what, dtype_of<T>, per, -1);
  return detail::start(
      g, what, o.async_op,
      [&](std::vector<MPI_Request>& r) {
        r.resize(1);
        detail::check(MPI_Ireduce_scatter_block(packed.get(), bo->raw(), n, detail::mpi_type(dtype_of<T>), mop, g->comm,
                                                &r[0]),
                      "MPI_Ireduce_scatter_block");
      },
      [bo, op, size] {
        if (op == reduce_op::avg) detail::divide(bo->ptr, bo->n, size);
        bo->store();
      },
      {packed, bo->keep()});
}

/// Rank j's in[i] goes to rank i's out[j] (torch.distributed.all_to_all; every tensor of one size).
template <class T, class S, class S2>
work all_to_all(const std::vector<Tensor<T, S>>& out, const std::vector<Tensor<T, S2>>& in,
                const collective_options& o = {}) {
  auto g = detail::member_group(o.group, "all_to_all");
  const int size = static_cast<int>(g->world_ranks.size());
  if (static_cast<int>(in.size()) != size || static_cast<int>(out.size()) != size)
    throw value_error("tenet::dist::all_to_all: the lists hold " + std::to_string(out.size()) + " outputs and " +
                      std::to_string(in.size()) + " inputs, the group has " + std::to_string(size) +
                      " ranks; pass one tensor per rank in each");
  static_assert(S::rank == S2::rank, "tenet::dist::all_to_all: the inputs and outputs must have one rank");
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!std::equal(in[i].sizes().begin(), in[i].sizes().end(), in[0].sizes().begin()))
      throw shape_error("tenet::dist::all_to_all: input tensor " + std::to_string(i) + " has sizes " +
                        detail::sizes_str(in[i]) + ", input 0 has sizes " + detail::sizes_str(in[0]) +
                        "; this version needs tensors of one size");
    if (!std::equal(out[i].sizes().begin(), out[i].sizes().end(), in[0].sizes().begin()))
      throw shape_error("tenet::dist::all_to_all: output tensor " + std::to_string(i) + " has sizes " +
                        detail::sizes_str(out[i]) + ", the inputs have sizes " + detail::sizes_str(in[0]) +
                        "; this version needs tensors of one size");
  }
  const std::int64_t per = in[0].numel();
  const int n = detail::count_int(per, "all_to_all");
  (void)detail::count_int(per * size, "all_to_all");
  std::shared_ptr<T[]> sendbuf(new T[static_cast<std::size_t>(per * size)]);
  std::shared_ptr<T[]> recvbuf(new T[static_cast<std::size_t>(per * size)]);
  for (std::size_t i = 0; i < in.size(); ++i) {
    detail::staged<T, S2> bi(in[i], true, false, "all_to_all");
    if (per) std::memcpy(static_cast<void*>(sendbuf.get() + static_cast<std::int64_t>(i) * per), bi.raw(),
                         static_cast<std::size_t>(per) * sizeof(T));
  }
  std::vector<std::shared_ptr<detail::staged<T, S>>> outs;
  for (const auto& t : out) outs.push_back(std::make_shared<detail::staged<T, S>>(t, false, true, "all_to_all"));
  detail::check_same_on_all_ranks(*g, "all_to_all", dtype_of<T>, per, -1);
  return detail::start(
      g, "all_to_all", o.async_op,
      [&](std::vector<MPI_Request>& r) {
        r.resize(1);
        const MPI_Datatype ty = detail::mpi_type(dtype_of<T>);
        detail::check(MPI_Ialltoall(sendbuf.get(), n, ty, recvbuf.get(), n, ty, g->comm, &r[0]), "MPI_Ialltoall");
      },
      [outs, recvbuf, per] {
        for (std::size_t i = 0; i < outs.size(); ++i) {
          if (per) std::memcpy(static_cast<void*>(outs[i]->ptr), recvbuf.get() + static_cast<std::int64_t>(i) * per,
                               static_cast<std::size_t>(per) * sizeof(T));
          outs[i]->store();
        }
      },
      {sendbuf, recvbuf});
}

/// all_to_all on single tensors with equal splits along dim 0: block i of `in` goes to rank i,
/// block j of `out` comes from rank j (torch.distributed.all_to_all_single without split sizes).
template <class T, class S, class S2>
work all_to_all_single(const Tensor<T, S>& out, const Tensor<T, S2>& in, const collective_options& o = {}) {
  auto g = detail::member_group(o.group, "all_to_all_single");
  const int size = static_cast<int>(g->world_ranks.size());
  static_assert(S::rank == S2::rank && S::rank > 0, "tenet::dist::all_to_all_single: in and out must have one rank >= 1");
  if (out.sizes() != in.sizes() || in.size(0) % size != 0)
    throw shape_error("tenet::dist::all_to_all_single: the output has sizes " + detail::sizes_str(out) +
                      " and the input " + detail::sizes_str(in) + "; they must be equal with dim 0 a multiple of the " +
                      std::to_string(size) + " ranks");
  auto bi = std::make_shared<detail::staged<T, S2>>(in, true, false, "all_to_all_single");
  auto bo = std::make_shared<detail::staged<T, S>>(out, false, true, "all_to_all_single");
  detail::check_same_on_all_ranks(*g, "all_to_all_single", dtype_of<T>, bi->n, -1);
  const int n = detail::count_int(bi->n / size, "all_to_all_single");
  (void)detail::count_int(bi->n, "all_to_all_single");
  if (bi->ptr == bo->ptr && bi->n)
    throw value_error("tenet::dist::all_to_all_single: the output and the input are the same memory; pass another output");
  return detail::start(
      g, "all_to_all_single", o.async_op,
      [&](std::vector<MPI_Request>& r) {
        r.resize(1);
        const MPI_Datatype ty = detail::mpi_type(dtype_of<T>);
        detail::check(MPI_Ialltoall(bi->raw(), n, ty, bo->raw(), n, ty, g->comm, &r[0]), "MPI_Ialltoall");
      },
      [bo] { bo->store(); }, {bi->keep(), bo->keep()});
}

/// Waits until every rank of the group has called it.
inline work barrier(const collective_options& o = {}) {
  auto g = detail::member_group(o.group, "barrier");
  return detail::start(
      g, "barrier", o.async_op,
      [&](std::vector<MPI_Request>& r) {
        r.resize(1);
        detail::check(MPI_Ibarrier(g->comm, &r[0]), "MPI_Ibarrier");
      },
      {}, {});
}

// ---------------------------------------------------------------------------------------------
// Point to point (peer: a world rank in the group; tag as MPI's, >= 0)

/// Sends `t` to rank dst; isend returns at once with the work, send waits.
template <class T, class S>
work isend(const Tensor<T, S>& t, int dst, int tag = 0, const process_group& group = {}) {
  auto g = detail::member_group(group, "send");
  const int peer = group.group_rank(dst, "send");
  auto b = std::make_shared<detail::staged<T, S>>(t, true, false, "send");
  const int n = detail::count_int(b->n, "send");
  const std::string what = "send to rank " + std::to_string(dst) + " (tag " + std::to_string(tag) + ")";
  return detail::start(
      g, what, true,
      [&](std::vector<MPI_Request>& r) {
        r.resize(1);
        detail::check(MPI_Isend(b->raw(), n, detail::mpi_type(dtype_of<T>), peer, tag, g->comm, &r[0]), "MPI_Isend");
      },
      {}, {b->keep(), std::shared_ptr<void>(b)});
}
template <class T, class S>
void send(const Tensor<T, S>& t, int dst, int tag = 0, const process_group& group = {}) {
  isend(t, dst, tag, group).wait();
}

/// Receives into `t` from rank src; `t` must have the sender's element count and dtype (a longer
/// message is an MPI truncation error, thrown as dist_error).
template <class T, class S>
work irecv(const Tensor<T, S>& t, int src, int tag = 0, const process_group& group = {}) {
  auto g = detail::member_group(group, "recv");
  const int peer = group.group_rank(src, "recv");
  auto b = std::make_shared<detail::staged<T, S>>(t, false, true, "recv");
  const int n = detail::count_int(b->n, "recv");
  const std::string what = "recv from rank " + std::to_string(src) + " (tag " + std::to_string(tag) + ")";
  return detail::start(
      g, what, true,
      [&](std::vector<MPI_Request>& r) {
        r.resize(1);
        detail::check(MPI_Irecv(b->raw(), n, detail::mpi_type(dtype_of<T>), peer, tag, g->comm, &r[0]), "MPI_Irecv");
      },
      [b] { b->store(); }, {b->keep()});
}
template <class T, class S>
void recv(const Tensor<T, S>& t, int src, int tag = 0, const process_group& group = {}) {
  irecv(t, src, tag, group).wait();
}

}  // namespace tenet::dist
