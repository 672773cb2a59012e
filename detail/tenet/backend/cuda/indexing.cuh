#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// CUDA kernels of the indexing prims (nvcc only): gather_ and scatter_ (prims/indexing.hpp), and
// with them every op decomposed into them (index_select, embedding, take_along_dim, scatter_add,
// scatter_reduce, index_add, index_copy, index_fill, one_hot ...).
//
// gather: a thread per output element (the output has the index's sizes and is contiguous).
// gather rows: when the index is constant along the last dim and x is contiguous there
// (embedding, index_select of an outer dim), a warp per output row copies it (16-byte vectors).
// scatter: a thread per fiber of the index (the positions that differ only in the indexed dim d).
// A fiber writes only the matching fiber of the output, so fibers are independent, and inside one
// the positions run in order along d: the result is deterministic and the same as the CPU
// backend's (for `replace` the last duplicate along d wins; sums add in index order). The price:
// the parallelism is the number of fibers, not of index elements. So scatter_add (sum, include_self)
// of fp32 / fp64 / int32 / int64 with fewer fibers than 256 per SM and fibers of >= 64 positions
// uses atomicAdd over every index element instead (the order of float additions is not fixed
// there, as in torch's CUDA scatter_add).
// Bounds: every index is checked on the device; a bad one is recorded in the device's fault record
// (runtime.hpp; the first thread to find one wins) and its fiber (scatter) or element (gather) is
// not written. The host reads the record at its next wait for the device (a copy to or from the
// host, cuda::synchronize(), a stream's synchronize()) and throws index_error there, naming the
// op, the value, the dim and its size: no synchronization per gather / scatter, and a CUDA graph
// may hold them.
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include <tenet/backend/cuda/pointwise.cuh>
#include <tenet/backend/cuda/row_kernels.cuh>  // aligned16
#include <tenet/backend/cuda/runtime.hpp>
#include <tenet/prims/indexing.hpp>
#include <tenet/prims/reduce.hpp>

namespace tenet::detail::cuda {

/// Where a kernel reports a bad index: the device's fault record (runtime.hpp), with what the
/// host needs for the message.
struct index_fault {
  fault_record* rec;
  unsigned long long dim, size;
  const char* op;
  __device__ TENET_INLINE void note(std::int64_t v) const {
    if (atomicCAS(&rec->flag, 0ull, fault_index) == 0ull) {
      rec->value = static_cast<unsigned long long>(v);
      rec->dim = dim;
      rec->size = size;
      rec->op = op;
    }
  }
};

/// The fault record for one gather / scatter launch (no synchronization: the host raises the
/// index_error at its next wait for the device).
struct fault_buffer {
  fault_record* rec;
  explicit fault_buffer(device dev) : rec(fault_record_for_launch(dev.index)) {}
  index_fault slot(const char* op, std::size_t dim, std::int64_t size) const {
    return {rec, static_cast<unsigned long long>(dim), static_cast<unsigned long long>(size), op};
  }
};

template <std::size_t R>
struct gather_layout {
  std::int64_t sz[R];  // the index's (and output's) sizes
  std::int64_t xs[R];  // x's strides (xs[d] used for the index value)
  std::int64_t is[R];  // the index's strides
  int d;
  std::int64_t n;  // x.size(d)
};

template <class T, class I, std::size_t R>
__global__ void gather_kernel(T* __restrict__ out, const T* __restrict__ x, const I* __restrict__ idx,
                              gather_layout<R> L, std::int64_t total, index_fault fault) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < total; p += step) {
    std::int64_t rem = p, xo = 0, io = 0;
    for (int k = static_cast<int>(R) - 1; k >= 0; --k) {
      const std::int64_t q = rem / L.sz[k];
      const std::int64_t c = rem - q * L.sz[k];
      rem = q;
      io += c * L.is[k];
      if (k != L.d) xo += c * L.xs[k];
    }
    const std::int64_t v = static_cast<std::int64_t>(idx[io]);
    if (v < 0 || v >= L.n) {
      fault.note(v);
      continue;
    }
    out[p] = x[xo + v * L.xs[L.d]];
  }
}

/// Rows: the index is constant along the last dim (stride 0) and x is contiguous there (embedding,
/// index_select along an outer dim): a warp per output row reads its index once and copies the
/// row, with 16-byte vectors when `vec`.
template <class T, class I, std::size_t R>
__global__ void gather_rows_kernel(T* __restrict__ out, const T* __restrict__ x, const I* __restrict__ idx,
                                   gather_layout<R> L, std::int64_t rows, std::int64_t len, bool vec,
                                   index_fault fault) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows;
       r += warps) {
    std::int64_t rem = r, xo = 0, io = 0;
    for (int k = static_cast<int>(R) - 2; k >= 0; --k) {
      const std::int64_t q = rem / L.sz[k];
      const std::int64_t c = rem - q * L.sz[k];
      rem = q;
      io += c * L.is[k];
      if (k != L.d) xo += c * L.xs[k];
    }
    const std::int64_t v = static_cast<std::int64_t>(idx[io]);
    if (v < 0 || v >= L.n) {
      if (lane == 0) fault.note(v);
      continue;
    }
    const T* src = x + xo + v * L.xs[L.d];
    T* dst = out + r * len;
    if (vec) {
      constexpr int N = 16 / sizeof(T);
      const uint4* s4 = reinterpret_cast<const uint4*>(src);
      uint4* d4 = reinterpret_cast<uint4*>(dst);
      for (std::int64_t j = lane; j < len / N; j += 32) d4[j] = s4[j];
    } else {
      for (std::int64_t j = lane; j < len; j += 32) dst[j] = src[j];
    }
  }
}

/// out (contiguous, idx's sizes) = gather(x, d, idx); x and idx any strides, rank >= 1.
template <class T, class SO, class SX, class I, class SI>
void run_gather(const Tensor<T, SO>& out, const Tensor<T, SX>& x, const Tensor<I, SI>& idx, std::size_t d) {
  constexpr std::size_t R = SI::rank;
  const std::int64_t total = out.numel();
  if (total == 0) return;
  const device dev = out.device();
  device_context ctx(dev);
  gather_layout<R> L{};
  for (std::size_t k = 0; k < R; ++k) L.sz[k] = idx.sizes()[k], L.xs[k] = x.strides()[k], L.is[k] = idx.strides()[k];
  L.d = static_cast<int>(d);
  L.n = x.sizes()[d];
  const fault_buffer fb(dev);
  if constexpr (R >= 2) {
    const std::int64_t len = L.sz[R - 1];
    if (d != R - 1 && L.is[R - 1] == 0 && L.xs[R - 1] == 1 && len >= 32) {
      bool vec = sizeof(T) <= 16 && (len * sizeof(T)) % 16 == 0 && aligned16(x.data()) && aligned16(out.data());
      for (std::size_t k = 0; k + 1 < R; ++k)
        if ((L.xs[k] * static_cast<std::int64_t>(sizeof(T))) % 16 != 0) vec = false;
      const std::int64_t rows = total / len;
      gather_rows_kernel<T, I, R><<<grid_for(rows * 32, 256, dev.index), 256, 0, current_stream()>>>(
          out.data(), x.data(), idx.data(), L, rows, len, vec, fb.slot("gather", d, L.n));
      check_launch("the gather kernel launch");
      return;
    }
  }
  gather_kernel<T, I, R><<<grid_for(total, 256, dev.index), 256, 0, current_stream()>>>(out.data(), x.data(), idx.data(),
                                                                                       L, total,
                                                                                       fb.slot("gather", d, L.n));
  check_launch("the gather kernel launch");
}

/// The combination of scatter Op on the device (as backend/cpu/indexing.hpp's scatter_combine).
template <prim::scatter_op Op, class T>
__device__ TENET_INLINE T scatter_combine_dev(T a, T b) {
  using C = compute_t<T>;
  const C x = static_cast<C>(a), y = static_cast<C>(b);
  if constexpr (Op == prim::scatter_op::replace) return b;
  else if constexpr (Op == prim::scatter_op::sum || Op == prim::scatter_op::mean) return static_cast<T>(x + y);
  else if constexpr (Op == prim::scatter_op::prod) return static_cast<T>(x * y);
  else if constexpr (Op == prim::scatter_op::amax) return static_cast<T>(prim::amax_kind::combine<C>(x, y));
  else return static_cast<T>(prim::amin_kind::combine<C>(x, y));
}

template <std::size_t R>
struct scatter_layout {
  std::int64_t sz[R];  // the index's sizes with sz[d] = 1 (the fibers)
  std::int64_t os[R], is[R], ss[R];
  int d;
  std::int64_t len;  // idx.size(d)
  std::int64_t n;    // out.size(d)
};

template <prim::scatter_op Op, class T, class I, std::size_t R>
__global__ void scatter_kernel(T* __restrict__ out, const I* __restrict__ idx, const T* __restrict__ src,
                               std::int64_t* __restrict__ count, scatter_layout<R> L, std::int64_t fibers,
                               bool reset, T identity, index_fault fault) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t f = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; f < fibers; f += step) {
    std::int64_t rem = f, oo = 0, io = 0, so = 0;
    for (int k = static_cast<int>(R) - 1; k >= 0; --k) {
      const std::int64_t q = rem / L.sz[k];
      const std::int64_t c = rem - q * L.sz[k];
      rem = q;
      oo += c * L.os[k];
      io += c * L.is[k];
      so += c * L.ss[k];
    }
    const std::int64_t osd = L.os[L.d], isd = L.is[L.d], ssd = L.ss[L.d];
    bool ok = true;
    for (std::int64_t j = 0; j < L.len; ++j) {  // check first: a bad fiber is not written at all
      const std::int64_t v = static_cast<std::int64_t>(idx[io + j * isd]);
      if (v < 0 || v >= L.n) {
        fault.note(v);
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    if (reset)
      for (std::int64_t j = 0; j < L.len; ++j) out[oo + static_cast<std::int64_t>(idx[io + j * isd]) * osd] = identity;
    for (std::int64_t j = 0; j < L.len; ++j) {
      const std::int64_t v = static_cast<std::int64_t>(idx[io + j * isd]);
      T& dst = out[oo + v * osd];
      dst = scatter_combine_dev<Op>(dst, src[so + j * ssd]);
      if constexpr (Op == prim::scatter_op::mean) ++count[oo + v * osd];  // count is laid out as out
    }
  }
}

/// scatter_add with atomics (few fibers): a thread per index element adds its value at its
/// position; the order of the additions is not fixed (as torch's CUDA scatter_add).
template <class T, class I, std::size_t R>
__global__ void scatter_add_atomic_kernel(T* __restrict__ out, const I* __restrict__ idx, const T* __restrict__ src,
                                          scatter_layout<R> L, const std::int64_t* __restrict__ isz,
                                          std::int64_t total, index_fault fault) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < total; p += step) {
    std::int64_t rem = p, oo = 0, io = 0, so = 0;
    for (int k = static_cast<int>(R) - 1; k >= 0; --k) {
      const std::int64_t n = k == L.d ? L.len : L.sz[k];
      const std::int64_t q = rem / n;
      const std::int64_t c = rem - q * n;
      rem = q;
      if (k != L.d) oo += c * L.os[k];
      io += c * L.is[k];
      so += c * L.ss[k];
    }
    const std::int64_t v = static_cast<std::int64_t>(idx[io]);
    if (v < 0 || v >= L.n) {
      fault.note(v);
      continue;
    }
    T* dst = out + oo + v * L.os[L.d];
    if constexpr (std::is_same_v<T, std::int64_t>)
      atomicAdd(reinterpret_cast<unsigned long long*>(dst), static_cast<unsigned long long>(src[so]));
    else
      atomicAdd(dst, src[so]);
  }
  (void)isz;
}

/// scatter_reduce's mean: the positions that received values divided by their number (+1 with
/// include_self); floor division for integers.
template <class T>
__global__ void scatter_mean_kernel(T* __restrict__ out, const std::int64_t* __restrict__ count, std::int64_t total,
                                    bool include_self) {
  using C = compute_t<T>;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < total; p += step) {
    const std::int64_t k = count[p];
    if (k == 0) continue;
    const C div = static_cast<C>(k + (include_self ? 1 : 0));
    if constexpr (std::is_integral_v<C>)
      out[p] = static_cast<T>(prim::int_floor_div<C>(static_cast<C>(out[p]), div));
    else
      out[p] = static_cast<T>(static_cast<C>(out[p]) / div);
  }
}

/// out (contiguous, self's sizes, already holding self) = scatter(out, d, idx, src, Op); src of
/// out's rank (any strides) or one value (rank 0).
template <prim::scatter_op Op, class T, class SO, class I, class SI, class SS>
void run_scatter(const Tensor<T, SO>& out, const Tensor<I, SI>& idx, const Tensor<T, SS>& src, std::size_t d,
                 bool include_self) {
  constexpr std::size_t R = SI::rank;
  const std::int64_t n = out.sizes()[d];
  std::int64_t fibers = 1;
  for (std::size_t k = 0; k < R; ++k)
    if (k != d) fibers *= idx.sizes()[k];
  const std::int64_t len = idx.sizes()[d];
  if (fibers == 0 || len == 0) return;
  const device dev = out.device();
  device_context ctx(dev);
  const cudaStream_t s = current_stream();
  scatter_layout<R> L{};
  for (std::size_t k = 0; k < R; ++k) {
    L.sz[k] = k == d ? 1 : idx.sizes()[k];
    L.os[k] = out.strides()[k];
    L.is[k] = idx.strides()[k];
    if constexpr (SS::rank == R) L.ss[k] = src.strides()[k];
  }
  L.d = static_cast<int>(d);
  L.len = len;
  L.n = n;
  constexpr bool mean = Op == prim::scatter_op::mean;
  Tensor<std::int64_t, dyn_shape<1>> count;
  if constexpr (mean) {
    count = Tensor<std::int64_t, dyn_shape<1>>({out.numel()}, dev);
    TENET_CUDA_CHECK(cudaMemsetAsync(count.data(), 0, static_cast<std::size_t>(out.numel()) * sizeof(std::int64_t), s));
  }
  using C = compute_t<T>;
  C ident{};
  if constexpr (Op == prim::scatter_op::prod) ident = C(1);
  else if constexpr (Op == prim::scatter_op::amax) ident = prim::amax_kind::identity<C>();
  else if constexpr (Op == prim::scatter_op::amin) ident = prim::amin_kind::identity<C>();
  const bool reset = Op != prim::scatter_op::replace && !include_self;
  const fault_buffer fb(dev);
  const char* op_name = prim::scatter_<0, Op>::name.data();
  constexpr bool atomic_ok = Op == prim::scatter_op::sum &&
                             (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                              std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>);
  if constexpr (atomic_ok) {
    // few fibers for the card and long ones: atomics over every index element instead
    if (!reset && fibers < static_cast<std::int64_t>(sm_count(dev.index)) * 256 && len >= 64) {
      scatter_add_atomic_kernel<T, I, R><<<grid_for(fibers * len, 256, dev.index), 256, 0, s>>>(
          out.data(), idx.data(), src.data(), L, nullptr, fibers * len, fb.slot(op_name, d, n));
      check_launch("the scatter_add kernel launch");
      return;
    }
  }
  scatter_kernel<Op, T, I, R><<<grid_for(fibers, 128, dev.index), 128, 0, s>>>(
      out.data(), idx.data(), src.data(), mean ? count.data() : nullptr, L, fibers, reset, static_cast<T>(ident),
      fb.slot(op_name, d, n));
  check_launch("the scatter kernel launch");
  if constexpr (mean) {
    scatter_mean_kernel<T><<<grid_for(out.numel(), 256, dev.index), 256, 0, s>>>(out.data(), count.data(), out.numel(),
                                                                                 include_self);
    check_launch("the scatter mean kernel launch");
  }
}

}  // namespace tenet::detail::cuda
