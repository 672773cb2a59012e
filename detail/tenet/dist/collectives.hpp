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

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <tenet/dist/process_group.hpp>
#include <tenet/dist/work.hpp>
#include <tenet/error.hpp>
#include <tenet/tensor.hpp>
#if defined(__CUDACC__)
#include <tenet/dist/nccl.hpp>  // CUDA tensors: the same operations on NCCL
#endif

// A CUDA tensor goes to NCCL (nccl.hpp) in translation units compiled by nvcc; elsewhere it
// reaches the MPI path, which refuses it with a device_error.
#if defined(__CUDACC__)
#define TENET_DIST_ON_CUDA(tensor, call) \
  if ((tensor).defined() && (tensor).device().type == device_type::cuda) return detail::nccl::call
#define TENET_DIST_NO_CUDA_LIST(list, what) \
  for (const auto& x_ : (list))              \
    if (x_.defined() && x_.device().type == device_type::cuda) detail::nccl::list_form_unsupported(what)
#else
#define TENET_DIST_ON_CUDA(tensor, call) (void)0
#define TENET_DIST_NO_CUDA_LIST(list, what) (void)0
#endif

namespace tenet::dist {

// ---------------------------------------------------------------------------------------------
// Collectives

/// Reduces `t` over the group, in place on every rank (torch.distributed.all_reduce).
template <class T, class S>
work all_reduce(const Tensor<T, S>& t, reduce_op op = reduce_op::sum, const collective_options& o = {}) {
  detail::refuse_tracked(t, "all_reduce");
  TENET_DIST_ON_CUDA(t, all_reduce(t, op, o));
  auto g = detail::member_group(o.group, "all_reduce");
  const MPI_Op mop = detail::mpi_op(op, dtype_of<T>);
  auto b = std::make_shared<detail::staged<T, S>>(t, true, true, "all_reduce");
  const std::string what = std::string("all_reduce(") + name(op) + ")";
  detail::check_same_on_all_ranks(*g, what, dtype_of<T>, b->n, -1);
  const int size = static_cast<int>(g->world_ranks.size());
  // Segments of 4 MiB, all posted at once: MPI counts are ints, so this lifts the 2^31 - 1
  // element limit; reductions are element-wise, so the result is the same. (Measured on 64 MiB:
  // no faster than one request; tenet's all-reduce stays about 1.8x Open MPI's blocking
  // MPI_Allreduce at that size, docs/distributed.md.)
  const std::int64_t segment = std::max<std::int64_t>(1, (std::int64_t{4} << 20) / static_cast<std::int64_t>(sizeof(T)));
  return detail::start(
      g, what, o.async_op,
      [&](std::vector<MPI_Request>& r) {
        for (std::int64_t off = 0; off < b->n; off += segment) {
          r.emplace_back();
          detail::check(MPI_Iallreduce(MPI_IN_PLACE, b->ptr + off, static_cast<int>(std::min(segment, b->n - off)),
                                       detail::mpi_type(dtype_of<T>), mop, g->comm, &r.back()),
                        "MPI_Iallreduce");
        }
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
  detail::refuse_tracked(t, "broadcast");  // written on every rank but src: refused on all alike
  TENET_DIST_ON_CUDA(t, broadcast(t, src, o));
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
  detail::refuse_tracked(t, "reduce");  // written on dst: refused on every rank alike
  TENET_DIST_ON_CUDA(t, reduce(t, dst, op, o));
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
  for (const auto& t : out) detail::refuse_tracked(t, "all_gather");
  TENET_DIST_NO_CUDA_LIST(out, "all_gather");
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
  detail::refuse_tracked(out, "all_gather_into_tensor");
  auto g = detail::member_group(o.group, "all_gather_into_tensor");
  const int size = static_cast<int>(g->world_ranks.size());
  detail::check_blocks(out, in, size, "all_gather_into_tensor", "the output", "the input");
  TENET_DIST_ON_CUDA(in, all_gather_into_tensor(out, in, o));
  auto bi = std::make_shared<detail::staged<T, S2>>(in, true, false, "all_gather_into_tensor");
  auto bo = std::make_shared<detail::staged<T, S>>(out, false, true, "all_gather_into_tensor");
  detail::check_same_on_all_ranks(*g, "all_gather_into_tensor", dtype_of<T>, bi->n, -1);
  const int n = detail::count_int(bi->n, "all_gather_into_tensor");
  (void)detail::count_int(bo->n, "all_gather_into_tensor");
  // in place: `in` is this rank's block of `out` (as torch allows); any other overlap is refused
  const bool in_place = bi->n && bi->ptr == bo->ptr + static_cast<std::int64_t>(g->rank) * bi->n;
  if (!in_place && detail::overlaps(bi->ptr, bi->n, bo->ptr, bo->n))
    throw value_error("tenet::dist::all_gather_into_tensor: the input overlaps the output but is not this rank's block "
                      "of it; pass separate tensors, or out's block " + std::to_string(g->rank) + " as the input");
  return detail::start(
      g, "all_gather_into_tensor", o.async_op,
      [&](std::vector<MPI_Request>& r) {
        r.resize(1);
        const MPI_Datatype ty = detail::mpi_type(dtype_of<T>);
        detail::check(MPI_Iallgather(in_place ? MPI_IN_PLACE : bi->raw(), n, ty, bo->raw(), n, ty, g->comm, &r[0]),
                      "MPI_Iallgather");
      },
      [bo] { bo->store(); }, {bi->keep(), bo->keep()});
}

/// Reduces `in` (the group size of blocks of out's sizes, along dim 0 or stacked) over the group;
/// rank i gets block i, reduced, in `out` (torch.distributed.reduce_scatter_tensor).
template <class T, class S, class S2>
work reduce_scatter_tensor(const Tensor<T, S>& out, const Tensor<T, S2>& in, reduce_op op = reduce_op::sum,
                           const collective_options& o = {}) {
  detail::refuse_tracked(out, "reduce_scatter_tensor");
  auto g = detail::member_group(o.group, "reduce_scatter_tensor");
  const int size = static_cast<int>(g->world_ranks.size());
  detail::check_blocks(in, out, size, "reduce_scatter_tensor", "the input", "the output");
  TENET_DIST_ON_CUDA(in, reduce_scatter_tensor(out, in, op, o));
  const MPI_Op mop = detail::mpi_op(op, dtype_of<T>);
  auto bi = std::make_shared<detail::staged<T, S2>>(in, true, false, "reduce_scatter_tensor");
  auto bo = std::make_shared<detail::staged<T, S>>(out, false, true, "reduce_scatter_tensor");
  const std::string what = std::string("reduce_scatter_tensor(") + name(op) + ")";
  detail::check_same_on_all_ranks(*g, what, dtype_of<T>, bi->n, -1);
  const int n = detail::count_int(bo->n, "reduce_scatter_tensor");
  (void)detail::count_int(bi->n, "reduce_scatter_tensor");
  if (detail::overlaps(bi->ptr, bi->n, bo->ptr, bo->n))
    throw value_error("tenet::dist::reduce_scatter_tensor: the output overlaps the input; pass a separate output tensor");
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
  detail::refuse_tracked(out, "reduce_scatter");
  TENET_DIST_NO_CUDA_LIST(in, "reduce_scatter");
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
  for (const auto& t : out) detail::refuse_tracked(t, "all_to_all");
  TENET_DIST_NO_CUDA_LIST(in, "all_to_all");
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
  detail::refuse_tracked(out, "all_to_all_single");
  auto g = detail::member_group(o.group, "all_to_all_single");
  const int size = static_cast<int>(g->world_ranks.size());
  static_assert(S::rank == S2::rank && S::rank > 0, "tenet::dist::all_to_all_single: in and out must have one rank >= 1");
  if (out.sizes() != in.sizes() || in.size(0) % size != 0)
    throw shape_error("tenet::dist::all_to_all_single: the output has sizes " + detail::sizes_str(out) +
                      " and the input " + detail::sizes_str(in) + "; they must be equal with dim 0 a multiple of the " +
                      std::to_string(size) + " ranks");
  TENET_DIST_ON_CUDA(in, all_to_all_single(out, in, o));
  auto bi = std::make_shared<detail::staged<T, S2>>(in, true, false, "all_to_all_single");
  auto bo = std::make_shared<detail::staged<T, S>>(out, false, true, "all_to_all_single");
  detail::check_same_on_all_ranks(*g, "all_to_all_single", dtype_of<T>, bi->n, -1);
  const int n = detail::count_int(bi->n / size, "all_to_all_single");
  (void)detail::count_int(bi->n, "all_to_all_single");
  if (detail::overlaps(bi->ptr, bi->n, bo->ptr, bo->n))
    throw value_error("tenet::dist::all_to_all_single: the output overlaps the input; pass a separate output tensor");
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
  TENET_DIST_ON_CUDA(t, isend(t, dst, group));
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
  detail::refuse_tracked(t, "recv");
  TENET_DIST_ON_CUDA(t, irecv(t, src, group));
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

#undef TENET_DIST_ON_CUDA
#undef TENET_DIST_NO_CUDA_LIST
