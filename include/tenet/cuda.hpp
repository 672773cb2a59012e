#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// tenet's CUDA backend: the public API (tenet::cuda::...). Translation units compiled by nvcc
// only; the same tensors and expressions as on the CPU run on tensors that live on cuda(n).
//
//   #include <tenet/cuda.hpp>
//   tenet::Tensor<float, tenet::dyn_shape<2>> x = tenet::randn<float, tenet::dyn_shape<2>>(m, n);
//   auto xd = x.to(tenet::cuda(0));                  // host -> device
//   tenet::Tensor<float, tenet::dyn_shape<2>> y = tenet::gelu(xd * 2.0f + 1.0f);  // one kernel
//   auto back = y.cpu();                             // device -> host
//
// See docs/cuda.md.
#if !defined(__CUDACC__)
#error "tenet/cuda.hpp needs nvcc: compile this file as CUDA (a .cu file, or set_source_files_properties(<file> PROPERTIES LANGUAGE CUDA)) and configure tenet with -DTENET_CUDA=ON"
#else

#include <array>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include <tenet/tenet.hpp>

#include <tenet/backend/cuda/autograd.cuh>  // backward and optimizer kernels (backend/training.hpp)
#include <tenet/backend/evaluate.hpp>
#include <tenet/backend/cuda/gemm.hpp>
#include <tenet/backend/cuda/runtime.hpp>
#include <tenet/backend/cuda/graph.hpp>  // tenet::compile on CUDA tensors: CUDA graphs (its run_compiled)

namespace tenet {

struct cuda::memory_stats_t : detail::cuda::memory_stats_t {};

inline bool cuda::is_available() { return detail::cuda::device_count() > 0; }
inline int cuda::device_count() { return detail::cuda::device_count(); }
inline void cuda::synchronize() {
  TENET_CUDA_CHECK(cudaDeviceSynchronize());
  int dev = 0;
  TENET_CUDA_CHECK(cudaGetDevice(&dev));
  detail::cuda::raise_device_faults(dev, nullptr, true);  // a bad index found by a kernel since the last wait
}
inline cuda::memory_stats_t cuda::memory_stats() { return {detail::cuda::caching_allocator::instance().stats()}; }
inline void cuda::reset_peak_memory_stats() { detail::cuda::caching_allocator::instance().reset_peak(); }
inline void cuda::empty_cache() { detail::cuda::caching_allocator::instance().empty_cache(); }
inline void cuda::set_allow_tf32(bool on) { detail::cuda::allow_tf32_flag().store(on); }
inline bool cuda::allow_tf32() { return detail::cuda::allow_tf32_flag().load(); }
inline void cuda::set_matmul_tuning(bool on) { detail::cuda::matmul_tuning_flag().store(on); }
inline bool cuda::matmul_tuning() { return detail::cuda::matmul_tuning_flag().load(); }

/// A CUDA stream (non-blocking with respect to the legacy default stream), destroyed with the
/// object after its work is done.
class cuda::stream {
 public:
  explicit stream(tenet::device d = tenet::cuda(0)) : dev_(d) {
    detail::cuda::device_context ctx(d);
    TENET_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
  }
  ~stream() {
    if (!s_) return;
    (void)cudaStreamSynchronize(s_);
    detail::cuda::caching_allocator::instance().drop_stream(s_);
    (void)cudaStreamDestroy(s_);
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  void synchronize() const {
    detail::cuda::device_context ctx(dev_);
    TENET_CUDA_CHECK(cudaStreamSynchronize(s_));
    detail::cuda::raise_device_faults(dev_.index, s_, false);
  }
  /// True when all work queued on the stream is done.
  bool query() const {
    const cudaError_t e = cudaStreamQuery(s_);
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    TENET_CUDA_CHECK(e);
    return true;
  }
  cudaStream_t native() const { return s_; }
  tenet::device device() const { return dev_; }

 private:
  cudaStream_t s_ = nullptr;
  tenet::device dev_;
};

/// Makes `s` this thread's current stream (kernels, copies and allocations go there) for the
/// guard's lifetime. Memory allocated on one stream is reused only by work on the same stream.
class cuda::stream_guard {
 public:
  explicit stream_guard(const stream& s) : previous_(detail::cuda::current_stream_slot()) {
    detail::cuda::current_stream_slot() = s.native();
  }
  ~stream_guard() { detail::cuda::current_stream_slot() = previous_; }
  stream_guard(const stream_guard&) = delete;
  stream_guard& operator=(const stream_guard&) = delete;

 private:
  cudaStream_t previous_;
};

/// A CUDA event: record it on a stream, wait for it on another, time between two.
class cuda::event {
 public:
  explicit event(bool timing = true) {
    TENET_CUDA_CHECK(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~event() {
    if (e_) (void)cudaEventDestroy(e_);
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  /// Records on the current stream (or on s).
  void record() { record_on(detail::cuda::current_stream()); }
  void record(const stream& s) { record_on(s.native()); }
  /// Waits for the work recorded before the event; then, as the other waits do, throws the error
  /// a kernel recorded in the device's fault record (a bad gather / scatter index, an integer
  /// division by zero). The record is read (only when a kernel that can record a fault ran since
  /// the last wait) through the legacy default stream: that waits for its own work too, but not
  /// for a tenet::cuda::stream's (which may be gone by now); the kernels before the event have
  /// finished either way.
  void synchronize() const {
    TENET_CUDA_CHECK(cudaEventSynchronize(e_));
    if (recorded_) {
      detail::cuda::device_context ctx(tenet::cuda(dev_));
      detail::cuda::raise_device_faults(dev_, nullptr, false);
    }
  }
  /// Makes later work on s (or the current stream) wait for this event.
  void wait(const stream& s) const { TENET_CUDA_CHECK(cudaStreamWaitEvent(s.native(), e_, 0)); }
  void wait() const { TENET_CUDA_CHECK(cudaStreamWaitEvent(detail::cuda::current_stream(), e_, 0)); }
  bool query() const {
    const cudaError_t e = cudaEventQuery(e_);
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    TENET_CUDA_CHECK(e);
    return true;
  }
  /// Milliseconds from `start` to this event (both recorded and complete).
  float elapsed_ms(const event& start) const {
    float ms = 0;
    TENET_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
    return ms;
  }

 private:
  void record_on(cudaStream_t s) {
    TENET_CUDA_CHECK(cudaEventRecord(e_, s));
    TENET_CUDA_CHECK(cudaGetDevice(&dev_));
    recorded_ = true;
  }
  cudaEvent_t e_ = nullptr;
  int dev_ = 0;  // the device current when it was last recorded
  bool recorded_ = false;
};

template <class T, class S>
auto cuda::pinned_empty(const std::array<std::int64_t, S::rank>& sizes) {
  std::int64_t n = 1;
  for (auto s : sizes) n *= s;
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
  void* p = nullptr;
  TENET_CUDA_CHECK(cudaMallocHost(&p, bytes == 0 ? 1 : bytes));
  auto st = std::make_shared<detail::storage>(p, bytes, tenet::cpu, &detail::cuda::pinned_release);
  detail::check_sizes_match<S>(sizes, "cuda::pinned_empty");
  return Tensor<T, S>::from_storage(std::move(st), sizes, detail::contiguous_strides(sizes), 0);
}

template <class Dst, class Src>
void cuda::copy_async(const Dst& dst, const Src& src) {
  static_assert(TensorType<Dst> && TensorType<Src> && std::is_same_v<typename Dst::value_type, typename Src::value_type> &&
                    Dst::rank == Src::rank,
                "tenet::cuda::copy_async: two tensors of one dtype and rank");
  using T = typename Dst::value_type;
  if (dst.sizes() != src.sizes())
    throw shape_error("tenet: cuda::copy_async: sizes differ: " + detail::sizes_text(dst.sizes()) + " and " +
                      detail::sizes_text(src.sizes()));
  if (!dst.is_contiguous() || !src.is_contiguous())
    throw value_error("tenet: cuda::copy_async needs contiguous tensors (call .contiguous() first)");
  const tenet::device on = dst.device().is_cpu() ? src.device() : dst.device();
  if (on.is_cpu()) throw device_error("tenet: cuda::copy_async: neither tensor is on a CUDA device");
  detail::cuda::device_context ctx(on);
  detail::bump_version(dst.storage().get());
  TENET_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), static_cast<std::size_t>(dst.numel()) * sizeof(T),
                                   cudaMemcpyDefault, detail::cuda::current_stream()));
}

template <class X, class W, class B>
auto cuda::linear(const X& x, const W& w, const B& bias, activation act) {
  static_assert(TensorType<X> && TensorType<W> && TensorType<B>, "tenet::cuda::linear takes tensors");
  using T = typename X::value_type;
  static_assert(std::is_same_v<T, typename W::value_type> && std::is_same_v<T, typename B::value_type>,
                "tenet::cuda::linear: x, w and bias of one dtype");
  static_assert(X::rank == 2 && W::rank == 2 && B::rank == 1, "tenet::cuda::linear: x [M, K], w [N, K], bias [N]");
  static_assert(detail::cuda::lt_supported<T>, "tenet::cuda::linear: float, double, float16 or bfloat16");
  const tenet::device d = x.device();
  if (d.type != device_type::cuda || w.device() != d || bias.device() != d)
    throw device_error("tenet: cuda::linear needs x, w and bias on one CUDA device (they are on " + d.str() + ", " +
                       w.device().str() + ", " + bias.device().str() + ")");
  const std::int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  if (w.size(1) != K || bias.size(0) != N)
    throw shape_error("tenet: cuda::linear: x " + detail::sizes_text(x.sizes()) + ", w " +
                      detail::sizes_text(w.sizes()) + ", bias " + detail::sizes_text(bias.sizes()) +
                      " do not fit x [M, K], w [N, K], bias [N]");
  Tensor<T, dyn_shape<2>> out({M, N}, d);
  if (M == 0 || N == 0) return out;
  detail::cuda::device_context ctx(d);
  auto xc = x, wc = w;
  auto bc = bias.contiguous();
  // C' (N x M) = op(w') (N x K) * op(x') (K x M): w row-major [N, K] is K x N column-major (transposed)
  auto wv = detail::cuda::column_major_view(K, N, wc.stride(1), wc.stride(0));  // w.T as [K, N]
  if (!wv.ok) wc = wc.contiguous(), wv = detail::cuda::column_major_view(K, N, wc.stride(1), wc.stride(0));
  auto xv = detail::cuda::column_major_view(M, K, xc.stride(0), xc.stride(1));
  if (!xv.ok) xc = xc.contiguous(), xv = detail::cuda::column_major_view(M, K, xc.stride(0), xc.stride(1));
  if (K == 0) {
    // no products: act(bias) broadcast over the rows
    throw value_error("tenet: cuda::linear with K = 0 is not supported");
  }
  const auto ep = act == activation::relu        ? detail::cuda::epilogue::bias_relu
                  : act == activation::gelu_tanh ? detail::cuda::epilogue::bias_gelu_tanh
                                                 : detail::cuda::epilogue::bias;
  detail::cuda::lt_matmul<T>(d.index, N, M, K, detail::cuda::lt_operand{wc.data(), wv.trans, wv.ld, 0},
                             detail::cuda::lt_operand{xc.data(), xv.trans, xv.ld, 0}, out.data(), N, M * N, 1,
                             bc.data(), ep);
  return out;
}

}  // namespace tenet

#endif  // __CUDACC__
