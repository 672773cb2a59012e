#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// CUDA kernels of the indexing prims (nvcc only): gather_ and scatter_ (prims/indexing.hpp), and
// with them every op decomposed into them (index_select, embedding, take_along_dim, scatter_add,
// scatter_reduce, index_add, index_copy, index_fill, one_hot ...).
//
// gather: a thread per output element (the output has the index's sizes and is contiguous).
// scatter: a thread per fiber of the index (the positions that differ only in the indexed dim d).
// A fiber writes only the matching fiber of the output, so fibers are independent, and inside one
// the positions run in order along d: the result is deterministic and the same as the CPU
// backend's (for `replace` the last duplicate along d wins; sums add in index order). The price:
// the parallelism is the number of fibers, not of index elements.
// Bounds: every index is checked on the device; a bad one is recorded in a small device buffer
// (the first thread to find one wins), its fiber (scatter) or element (gather) is not written, and
// the host reads the buffer after the kernel and throws index_error naming the value, the dim and
// its size. Reading it back synchronizes the stream once per gather / scatter.
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include <tenet/backend/cuda/pointwise.hpp>
#include <tenet/backend/cuda/runtime.hpp>
#include <tenet/prims/indexing.hpp>
#include <tenet/prims/reduce.hpp>

namespace tenet::detail::cuda {

/// The bad-index slot: flag (0: none) and the value.
struct index_fault {
  unsigned long long* slot;  // [flag, value]
  __device__ TENET_INLINE void note(std::int64_t v) const {
    if (atomicCAS(slot, 0ull, 1ull) == 0ull) slot[1] = static_cast<unsigned long long>(v);
  }
};

/// A device buffer for index_fault, zeroed on the current stream.
struct fault_buffer {
  Tensor<std::int64_t, dyn_shape<1>> buf;
  explicit fault_buffer(device dev) : buf({2}, dev) {
    TENET_CUDA_CHECK(cudaMemsetAsync(buf.data(), 0, 2 * sizeof(std::int64_t), current_stream()));
  }
  index_fault slot() const { return {reinterpret_cast<unsigned long long*>(buf.data())}; }
  /// Waits for the stream; index_error when a kernel recorded a bad index.
  void throw_if_any(const char* op, std::size_t dim, std::int64_t size) const {
    std::int64_t h[2] = {0, 0};
    TENET_CUDA_CHECK(cudaMemcpyAsync(h, buf.data(), sizeof h, cudaMemcpyDeviceToHost, current_stream()));
    TENET_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
    if (h[0] != 0)
      throw index_error(std::string("tenet: ") + op + ": index " + std::to_string(h[1]) + " is out of bounds for dim " +
                        std::to_string(dim) + " with size " + std::to_string(size) + " (indices must be in [0, " +
                        std::to_string(size) + "))");
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
  gather_kernel<T, I, R><<<grid_for(total, 256, dev.index), 256, 0, current_stream()>>>(out.data(), x.data(), idx.data(),
                                                                                       L, total, fb.slot());
  check_launch("the gather kernel launch");
  fb.throw_if_any("gather", d, L.n);
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
  scatter_kernel<Op, T, I, R><<<grid_for(fibers, 128, dev.index), 128, 0, s>>>(
      out.data(), idx.data(), src.data(), mean ? count.data() : nullptr, L, fibers, reset, static_cast<T>(ident),
      fb.slot());
  check_launch("the scatter kernel launch");
  if constexpr (mean) {
    scatter_mean_kernel<T><<<grid_for(out.numel(), 256, dev.index), 256, 0, s>>>(out.data(), count.data(), out.numel(),
                                                                                 include_self);
    check_launch("the scatter mean kernel launch");
  }
  fb.throw_if_any(prim::scatter_<0, Op>::name.data(), d, n);
}

}  // namespace tenet::detail::cuda
