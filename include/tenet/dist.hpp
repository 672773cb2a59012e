#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// tenet::dist — distributed training on MPI for CPU tensors (docs/distributed.md).
//
// Not part of <tenet/tenet.hpp>: it needs <mpi.h> and an MPI library, so programs that use it
// include this header and link the CMake target tenet::dist (tenet::tenet plus MPI::MPI_CXX).
//
//   tenet::dist::init_process_group();                       // from mpirun's environment
//   tenet::dist::all_reduce(t, tenet::dist::reduce_op::avg); // in place on every rank
//   auto w = tenet::dist::all_reduce(t, tenet::dist::reduce_op::sum, {.async_op = true});
//   w.wait();
//   tenet::dist::DistributedDataParallel ddp(model);         // broadcast, bucketed gradient averaging
//   tenet::dist::FullyShardedDataParallel fsdp(model);       // parameters sharded, gathered per forward
//   tenet::dist::destroy_process_group();
//
// The contract is torch.distributed's: the same collectives (all_reduce, broadcast, reduce,
// all_gather, all_gather_into_tensor, reduce_scatter, reduce_scatter_tensor, all_to_all,
// all_to_all_single, barrier, send/recv, isend/irecv), world ranks for src/dst, in place where
// torch is. Every wait polls against a timeout and throws tenet::dist_error instead of hanging;
// a rank that leaves makes the others' waits throw a dist_error naming it.
#include <tenet/dist/process_group.hpp>
#include <tenet/dist/collectives.hpp>
#include <tenet/dist/dtensor.hpp>  // DeviceMesh, DTensor, distribute_tensor
#include <tenet/nn/parallel.hpp>  // DistributedDataParallel
#include <tenet/nn/fully_sharded.hpp>  // FullyShardedDataParallel
#include <tenet/nn/tensor_parallel.hpp>  // ColwiseParallelLinear, RowwiseParallelLinear
