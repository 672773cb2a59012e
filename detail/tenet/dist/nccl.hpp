#pragma once
#include <tenet/detail_check.hpp>
// tenet::dist on CUDA tensors: the same calls, run by NCCL (compiled only by nvcc; collectives.hpp
// sends a CUDA tensor here). NOT RUN YET: written and compile-checked on a machine without a GPU.
//
// - One NCCL communicator per process group, created at the group's first CUDA operation: the
//   group's first rank makes the ncclUniqueId and broadcasts it over the group's MPI communicator;
//   every rank then joins with ncclCommInitRankConfig, non-blocking (config.blocking = 0), so the
//   join and every later call are polled against the timeout like the MPI path.
//   All CUDA tensors of one rank in one group must be on one device (the communicator's).
// - Operations are enqueued on tenet's current CUDA stream (so they follow the kernels that made
//   their inputs), followed by a CUDA event; work::wait polls the event and the communicator's
//   asynchronous error; on a timeout or a departed rank the communicator is aborted
//   (ncclCommAbort) and the process group is marked broken. Without async_op the call waits on
//   the host for the event (torch only orders the current stream after it; this is stricter).
// - Tensors must be contiguous (value_error otherwise). Dtypes: NCCL has no int16 (dtype_error);
//   bool travels as uint8 (sum and max: or; min and prod: and). avg is NCCL's ncclAvg (floating
//   dtypes only, as the MPI path).
// - CUDA operations here: all_reduce, broadcast, reduce, all_gather_into_tensor,
//   reduce_scatter_tensor, all_to_all_single, isend/irecv (send/recv). The list forms
//   (all_gather, reduce_scatter, all_to_all with lists) throw device_error for CUDA tensors: use
//   the single-tensor forms.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <memory>
#include <string>

#include <tenet/backend/cuda/runtime.hpp>  // current_stream
#include <tenet/dist/process_group.hpp>
#include <tenet/dist/work.hpp>
#include <tenet/error.hpp>
#include <tenet/tensor.hpp>

namespace tenet::dist::detail::nccl {

inline void check(ncclResult_t r, const std::string& what) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  throw dist_error("tenet::dist: " + what + " failed on " + where() + ": NCCL error " + std::to_string(static_cast<int>(r)) +
                   " (" + ncclGetErrorString(r) + ")");
}
inline void check_cuda(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  throw dist_error("tenet::dist: " + what + " failed on " + where() + ": CUDA error " + cudaGetErrorString(e));
}

/// Restores the current CUDA device on scope exit.
class device_scope {
 public:
  explicit device_scope(int d) {
    cudaGetDevice(&previous_);
    if (d != previous_) check_cuda(cudaSetDevice(d), "cudaSetDevice");
  }
  ~device_scope() { cudaSetDevice(previous_); }
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;

 private:
  int previous_ = 0;
};

/// Polls the communicator until its last call is no longer in progress (non-blocking NCCL).
inline void settle(ncclComm_t c, const group_impl& g, const std::string& what) {
  wait_until(
      [&] {
        ncclResult_t state = ncclSuccess;
        check(ncclCommGetAsyncError(c, &state), what);
        if (state == ncclInProgress) return false;
        check(state, what);
        return true;
      },
      g, what, [c] { ncclCommAbort(c); });
}

/// The group's communicator on `device`, created collectively at first use.
inline ncclComm_t communicator(group_impl& g, int device, const std::string& what) {
  if (g.nccl_comm) {
    if (g.nccl_device != device)
      throw device_error("tenet::dist::" + what + ": a tensor on cuda:" + std::to_string(device) + ", but rank " +
                         std::to_string(st().rank) + "'s NCCL communicator for this group is on cuda:" +
                         std::to_string(g.nccl_device) + " (one device per rank and group)");
    return static_cast<ncclComm_t>(g.nccl_comm.get());
  }
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (g.rank == 0) check(ncclGetUniqueId(&id), what + ": ncclGetUniqueId");
  std::vector<MPI_Request> r(1);
  tenet::dist::detail::check(MPI_Ibcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, g.comm, &r[0]), "MPI_Ibcast");
  wait_all(r, g, what + " (NCCL id exchange)");
  const device_scope on(device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t c = nullptr;
  check(ncclCommInitRankConfig(&c, static_cast<int>(g.world_ranks.size()), id, g.rank, &config),
        what + ": ncclCommInitRankConfig");
  settle(c, g, what + " (NCCL communicator set-up)");
  g.nccl_comm = std::shared_ptr<void>(static_cast<void*>(c), [](void* p) {
    auto comm = static_cast<ncclComm_t>(p);
    if (st().broken.empty()) ncclCommDestroy(comm);
    else ncclCommAbort(comm);
  });
  g.nccl_device = device;
  return c;
}

template <class T>
ncclDataType_t type_of(const std::string& what) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::uint8_t>) return ncclUint8;
  else if constexpr (std::is_same_v<T, std::int8_t>) return ncclInt8;
  else if constexpr (std::is_same_v<T, std::int32_t>) return ncclInt32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return ncclInt64;
  else if constexpr (std::is_same_v<T, float16>) return ncclFloat16;
  else if constexpr (std::is_same_v<T, bfloat16>) return ncclBfloat16;
  else if constexpr (std::is_same_v<T, float>) return ncclFloat32;
  else if constexpr (std::is_same_v<T, double>) return ncclFloat64;
  else
    throw dtype_error("tenet::dist::" + what + ": NCCL has no " + std::string(tenet::name(dtype_of<T>)) +
                      "; convert the CUDA tensor to int32 (or move it to the CPU, where MPI has it)");
}

inline ncclRedOp_t op_of(reduce_op op, dtype d) {
  if (op == reduce_op::avg && !is_floating(d))
    throw dtype_error(std::string("tenet::dist: reduce_op::avg needs a floating dtype, the tensor is ") + tenet::name(d) +
                      "; reduce with sum and divide, or convert the tensor first");
  if (d == dtype::bool_)
    return op == reduce_op::sum || op == reduce_op::max ? ncclMax : ncclMin;
  switch (op) {
    case reduce_op::sum: return ncclSum;
    case reduce_op::avg: return ncclAvg;
    case reduce_op::max: return ncclMax;
    case reduce_op::min: return ncclMin;
    case reduce_op::prod: return ncclProd;
  }
  return ncclSum;
}

template <class T, class S>
void require_contiguous(const Tensor<T, S>& t, const std::string& what) {
  if (!t.is_contiguous())
    throw value_error("tenet::dist::" + what + ": NCCL needs a contiguous CUDA tensor, this one has sizes " +
                      sizes_str(t) + " and strides " + sizes_str(t.strides().data(), S::rank) + "; call .contiguous()");
}

/// Everything an enqueued NCCL operation needs: the group, its communicator, the device.
struct launch_site {
  std::shared_ptr<group_impl> group;
  ncclComm_t comm;
  int device;
  cudaStream_t stream;
};

template <class T, class S>
launch_site prepare(const process_group& pg, const Tensor<T, S>& t, const std::string& what) {
  auto g = member_group(pg, what.c_str());
  require_contiguous(t, what);
  const int device = t.device().index;
  ncclComm_t c = communicator(*g, device, what);
  return {g, c, device, tenet::detail::cuda::current_stream()};
}

/// After the enqueue: settles the call, records an event on the stream and returns the work,
/// waited for unless async. `written` are the tensors whose version the operation bumps.
inline work finish(const launch_site& at, const std::string& what, bool async_op,
                   std::vector<std::shared_ptr<tenet::detail::storage>> written) {
  settle(at.comm, *at.group, what);
  cudaEvent_t ev = nullptr;
  check_cuda(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), what + ": cudaEventCreate");
  std::shared_ptr<void> event(static_cast<void*>(ev), [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
  check_cuda(cudaEventRecord(ev, at.stream), what + ": cudaEventRecord");
  auto s = std::make_shared<work::state>();
  s->what = what;
  s->group = at.group;
  const ncclComm_t c = at.comm;
  s->test = [ev, c, what] {
    ncclResult_t state = ncclSuccess;
    check(ncclCommGetAsyncError(c, &state), what);
    if (state != ncclSuccess && state != ncclInProgress) check(state, what);
    const cudaError_t q = cudaEventQuery(ev);
    if (q == cudaSuccess) return true;
    if (q == cudaErrorNotReady) return false;
    check_cuda(q, what);
    return false;
  };
  s->abort = [c] { ncclCommAbort(c); };
  s->finish = [written] {
    for (const auto& st : written) tenet::detail::bump_version(st.get());
  };
  s->keep.push_back(event);
  for (const auto& st : written) s->keep.push_back(st);
  work w(std::move(s));
  if (!async_op) w.wait();
  return w;
}

inline std::size_t count_of(std::int64_t n) { return static_cast<std::size_t>(n); }

template <class T, class S>
work all_reduce(const Tensor<T, S>& t, reduce_op op, const collective_options& o) {
  const std::string what = std::string("all_reduce(") + name(op) + ")";
  const auto ty = type_of<T>(what);
  const auto rop = op_of(op, dtype_of<T>);
  auto at = prepare(o.group, t, what);
  check_same_on_all_ranks(*at.group, what, dtype_of<T>, t.numel(), -1);
  const device_scope on(at.device);
  check(ncclAllReduce(t.data(), t.data(), count_of(t.numel()), ty, rop, at.comm, at.stream), what);
  return finish(at, what, o.async_op, {t.storage()});
}

template <class T, class S>
work broadcast(const Tensor<T, S>& t, int src, const collective_options& o) {
  const auto ty = type_of<T>("broadcast");
  auto at = prepare(o.group, t, "broadcast");
  const int root = o.group.group_rank(src, "broadcast");
  check_same_on_all_ranks(*at.group, "broadcast", dtype_of<T>, t.numel(), src);
  const device_scope on(at.device);
  check(ncclBroadcast(t.data(), t.data(), count_of(t.numel()), ty, root, at.comm, at.stream), "broadcast");
  return finish(at, "broadcast", o.async_op, {t.storage()});
}

template <class T, class S>
work reduce(const Tensor<T, S>& t, int dst, reduce_op op, const collective_options& o) {
  const std::string what = std::string("reduce(") + name(op) + ")";
  const auto ty = type_of<T>(what);
  const auto rop = op_of(op, dtype_of<T>);
  auto at = prepare(o.group, t, what);
  const int root = o.group.group_rank(dst, "reduce");
  check_same_on_all_ranks(*at.group, what, dtype_of<T>, t.numel(), dst);
  const device_scope on(at.device);
  check(ncclReduce(t.data(), t.data(), count_of(t.numel()), ty, rop, root, at.comm, at.stream), what);
  std::vector<std::shared_ptr<tenet::detail::storage>> written;
  if (at.group->rank == root) written.push_back(t.storage());
  return finish(at, what, o.async_op, written);
}

template <class T, class S, class S2>
work all_gather_into_tensor(const Tensor<T, S>& out, const Tensor<T, S2>& in, const collective_options& o) {
  const auto ty = type_of<T>("all_gather_into_tensor");
  require_contiguous(out, "all_gather_into_tensor");
  auto at = prepare(o.group, in, "all_gather_into_tensor");
  if (out.device() != in.device())
    throw device_error("tenet::dist::all_gather_into_tensor: the output is on " + out.device().str() + ", the input on " +
                       in.device().str());
  check_same_on_all_ranks(*at.group, "all_gather_into_tensor", dtype_of<T>, in.numel(), -1);
  const device_scope on(at.device);
  check(ncclAllGather(in.data(), out.data(), count_of(in.numel()), ty, at.comm, at.stream), "all_gather_into_tensor");
  return finish(at, "all_gather_into_tensor", o.async_op, {out.storage()});
}

template <class T, class S, class S2>
work reduce_scatter_tensor(const Tensor<T, S>& out, const Tensor<T, S2>& in, reduce_op op, const collective_options& o) {
  const std::string what = std::string("reduce_scatter_tensor(") + name(op) + ")";
  const auto ty = type_of<T>(what);
  const auto rop = op_of(op, dtype_of<T>);
  require_contiguous(in, what);
  auto at = prepare(o.group, out, what);
  if (out.device() != in.device())
    throw device_error("tenet::dist::reduce_scatter_tensor: the output is on " + out.device().str() + ", the input on " +
                       in.device().str());
  check_same_on_all_ranks(*at.group, what, dtype_of<T>, in.numel(), -1);
  const device_scope on(at.device);
  check(ncclReduceScatter(in.data(), out.data(), count_of(out.numel()), ty, rop, at.comm, at.stream), what);
  return finish(at, what, o.async_op, {out.storage()});
}

template <class T, class S, class S2>
work all_to_all_single(const Tensor<T, S>& out, const Tensor<T, S2>& in, const collective_options& o) {
  const auto ty = type_of<T>("all_to_all_single");
  require_contiguous(in, "all_to_all_single");
  auto at = prepare(o.group, out, "all_to_all_single");
  check_same_on_all_ranks(*at.group, "all_to_all_single", dtype_of<T>, in.numel(), -1);
  const int size = static_cast<int>(at.group->world_ranks.size());
  const std::size_t per = count_of(in.numel() / size);
  const device_scope on(at.device);
  check(ncclGroupStart(), "all_to_all_single");
  for (int peer = 0; peer < size; ++peer) {
    check(ncclSend(in.data() + per * peer, per, ty, peer, at.comm, at.stream), "all_to_all_single");
    check(ncclRecv(out.data() + per * peer, per, ty, peer, at.comm, at.stream), "all_to_all_single");
  }
  check(ncclGroupEnd(), "all_to_all_single");
  return finish(at, "all_to_all_single", o.async_op, {out.storage()});
}

template <class T, class S>
work isend(const Tensor<T, S>& t, int dst, const process_group& group) {
  const std::string what = "send to rank " + std::to_string(dst);
  const auto ty = type_of<T>(what);
  auto at = prepare(group, t, what);
  const int peer = group.group_rank(dst, "send");
  const device_scope on(at.device);
  check(ncclSend(t.data(), count_of(t.numel()), ty, peer, at.comm, at.stream), what);
  return finish(at, what, true, {});
}

template <class T, class S>
work irecv(const Tensor<T, S>& t, int src, const process_group& group) {
  const std::string what = "recv from rank " + std::to_string(src);
  const auto ty = type_of<T>(what);
  auto at = prepare(group, t, what);
  const int peer = group.group_rank(src, "recv");
  const device_scope on(at.device);
  check(ncclRecv(t.data(), count_of(t.numel()), ty, peer, at.comm, at.stream), what);
  return finish(at, what, true, {t.storage()});
}

[[noreturn]] inline void list_form_unsupported(const char* what) {
  throw device_error(std::string("tenet::dist::") + what +
                     " with lists of CUDA tensors is not in the NCCL path yet; use the single-tensor form "
                     "(all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single)");
}

}  // namespace tenet::dist::detail::nccl
