#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CUDA runtime layer: errors, the current device and stream, RAII streams and events, the
// caching device allocator and the copies. Only for translation units compiled by nvcc
// (include <tenet/cuda.hpp>, which says so otherwise).
//
// Allocator: runtime/block_pool.hpp over cudaMalloc: requests rounded to 512 B, served from
// 2 MiB segments (up to 1 MiB) or 20 MiB ones (up to 10 MiB; larger requests get their own),
// best fit with splitting, merging on free; a free block is reused only by work on the stream
// that freed it, which is safe without a synchronization because work on one stream runs in order
// (PyTorch's rule); empty_cache() returns every wholly free segment to the driver.
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <cuda_runtime.h>

#include <tenet/device.hpp>
#include <tenet/error.hpp>
#include <tenet/runtime/block_pool.hpp>
#include <tenet/runtime/storage.hpp>

namespace tenet::detail::cuda {

/// Throws device_error with CUDA's message unless `e` is cudaSuccess.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error state
    throw device_error(std::string("tenet: CUDA error in ") + what + ": " + cudaGetErrorName(e) + ": " +
                       cudaGetErrorString(e));
  }
}
#define TENET_CUDA_CHECK(call) ::tenet::detail::cuda::check((call), #call)

inline int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

inline void check_index(const device& d) {
  const int n = device_count();
  if (d.index < 0 || d.index >= n)
    throw device_error("tenet: " + d.str() + " does not exist: this machine has " + std::to_string(n) +
                       " CUDA device(s)");
}

/// Makes device `d` current for the guard's lifetime.
class device_context {
 public:
  explicit device_context(const device& d) {
    TENET_CUDA_CHECK(cudaGetDevice(&previous_));
    if (d.index != previous_) {
      check_index(d);
      TENET_CUDA_CHECK(cudaSetDevice(d.index));
      changed_ = true;
    }
  }
  ~device_context() {
    if (changed_) (void)cudaSetDevice(previous_);
  }
  device_context(const device_context&) = delete;
  device_context& operator=(const device_context&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

/// The stream kernels and copies of this thread go to (nullptr: the legacy default stream).
inline cudaStream_t& current_stream_slot() {
  thread_local cudaStream_t s = nullptr;
  return s;
}
inline cudaStream_t current_stream() { return current_stream_slot(); }

inline int sm_count(int dev) {
  static std::mutex m;
  static std::unordered_map<int, int> cache;
  std::lock_guard<std::mutex> lock(m);
  auto it = cache.find(dev);
  if (it != cache.end()) return it->second;
  int n = 0;
  TENET_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  cache[dev] = n;
  return n;
}

/// A per-thread hook into the caching allocator (tenet::compile's CUDA graphs, graph.hpp): serve()
/// may hand out a block itself (non-null), allocated() sees every block the allocator serves, and
/// release() returns true for a block that was the interceptor's (the allocator then ignores it).
struct alloc_interceptor {
  virtual void* serve(std::size_t bytes, int dev) = 0;
  virtual void allocated(void* p, std::size_t bytes) = 0;
  virtual bool release(void* p) noexcept = 0;
  virtual ~alloc_interceptor() = default;
};
inline alloc_interceptor*& current_alloc_interceptor() {
  thread_local alloc_interceptor* i = nullptr;
  return i;
}
/// True while this thread captures a CUDA graph (graph.hpp): what synchronizes must refuse.
inline bool& capturing_graph() {
  thread_local bool b = false;
  return b;
}

// --- device faults ----------------------------------------------------------------------------
/// What a kernel found wrong without stopping the stream (a gather / scatter index out of range,
/// an integer division by zero): the first fault on a device, written by the kernel thread that
/// found it. The host reads the record at its next wait on the device (raise_device_faults: every
/// copy between host and device, tenet::cuda::synchronize(), a tenet::cuda::stream's or event's
/// synchronize()) and throws index_error (value_error for a zero divisor) there, so the checks
/// cost no synchronization of their own and can be captured in a CUDA graph. (PyTorch's CUDA kernels stop at a device-side assert, after which the process's CUDA
/// context is unusable; here the device stays usable.)
struct fault_record {
  unsigned long long flag;  // 0: none; fault_index or fault_zero_divisor
  unsigned long long value, dim, size;
  const char* op;  // a host string with static storage, passed through the kernel's arguments
};
/// The kinds of fault_record::flag: an index out of range (gather / scatter), an integer
/// division by zero (div, remainder, fmod of integer tensors in a pointwise tree).
inline constexpr unsigned long long fault_index = 1, fault_zero_divisor = 2;
struct fault_log {
  fault_record* rec = nullptr;  // device memory, zero when no fault is recorded
  bool pending = false;         // a launch may have written rec since a read found it clear
  cudaStream_t stream = nullptr;  // the stream of the launches since then (when `mixed` is false)
  bool mixed = false;             // launches on more than one stream since then
};
inline std::mutex& fault_mutex() {
  static std::mutex m;
  return m;
}
inline fault_log& fault_log_of(int dev) {  // (under fault_mutex)
  static auto* logs = new std::unordered_map<int, fault_log>;
  return (*logs)[dev];
}
/// Notes that a launch on stream s may write f's record (under fault_mutex).
inline void note_fault_launch_locked(fault_log& f, cudaStream_t s) {
  if (f.pending && f.stream != s) f.mixed = true;
  if (!f.pending) f.stream = s, f.mixed = false;
  f.pending = true;
}
/// The record kernels launched on the current device and stream report faults to.
inline fault_record* fault_record_for_launch(int dev) {
  std::lock_guard<std::mutex> lock(fault_mutex());
  fault_log& f = fault_log_of(dev);
  if (!f.rec) {
    if (capturing_graph())
      throw device_error("tenet: the first gather / scatter or integer division on cuda:" + std::to_string(dev) +
                         " allocates the device's fault record, which a CUDA graph capture cannot contain");
    void* p = nullptr;
    TENET_CUDA_CHECK(cudaMalloc(&p, sizeof(fault_record)));
    TENET_CUDA_CHECK(cudaMemset(p, 0, sizeof(fault_record)));
    f.rec = static_cast<fault_record*>(p);
  }
  note_fault_launch_locked(f, current_stream());
  return f.rec;
}
/// A CUDA graph launched on stream s may hold kernels that report faults (graph.hpp): the next
/// wait reads the record (when the device has one).
inline void note_graph_launch(int dev, cudaStream_t s) {
  std::lock_guard<std::mutex> lock(fault_mutex());
  fault_log& f = fault_log_of(dev);
  if (f.rec) note_fault_launch_locked(f, s);
}
/// Called after a wait for stream s of device dev (the device current), or for all its streams:
/// throws the index_error (or value_error, for a zero divisor) a kernel recorded since the last read, and clears the record. Free when
/// no launch could have recorded one.
inline void raise_device_faults(int dev, cudaStream_t s, bool all_streams) {
  fault_record h{};
  {
    std::lock_guard<std::mutex> lock(fault_mutex());
    fault_log& f = fault_log_of(dev);
    if (!f.pending) return;
    TENET_CUDA_CHECK(cudaMemcpyAsync(&h, f.rec, sizeof h, cudaMemcpyDeviceToHost, s));
    TENET_CUDA_CHECK(cudaStreamSynchronize(s));
    // the launches since the last clear read have all finished: after a device-wide wait, or a
    // wait for the one stream they ran on
    const bool all_done = all_streams || (!f.mixed && f.stream == s);
    if (h.flag != 0) {
      TENET_CUDA_CHECK(cudaMemsetAsync(f.rec, 0, sizeof h, s));
      TENET_CUDA_CHECK(cudaStreamSynchronize(s));
    }
    if (all_done) f.pending = false;
    if (h.flag == 0) return;
  }
  if (h.flag == fault_zero_divisor)
    throw value_error(std::string("tenet: integer division by zero in ") + (h.op ? h.op : "a division") +
                      " (remainder, fmod or division of integer tensors; PyTorch raises ZeroDivisionError on "
                      "the CPU); reported at the first wait for cuda:" + std::to_string(dev) +
                      " after that kernel (CUDA kernels run asynchronously)");
  const std::string size = std::to_string(h.size);
  throw index_error(std::string("tenet: ") + (h.op ? h.op : "an indexing kernel") + ": index " +
                    std::to_string(static_cast<long long>(h.value)) + " is out of bounds for dim " +
                    std::to_string(h.dim) + " with size " + size + " (indices must be in [0, " + size +
                    ")); reported at the first wait for cuda:" + std::to_string(dev) +
                    " after that kernel (CUDA kernels run asynchronously)");
}

using memory_stats_t = tenet::detail::pool_stats;

/// The caching allocator's memory: cudaMalloc / cudaFree on the block's device (made current for
/// the call), cudaDeviceSynchronize before memory goes back.
struct cuda_backing {
  cudaError_t last_error = cudaSuccess;  // of the last failed cudaMalloc (for the error message)
  struct on_device {  // makes dev current for the scope, without throwing
    int previous = -1;
    explicit on_device(int dev) {
      if (cudaGetDevice(&previous) != cudaSuccess || previous == dev || cudaSetDevice(dev) != cudaSuccess)
        previous = -1;
    }
    ~on_device() {
      if (previous >= 0) (void)cudaSetDevice(previous);
    }
  };
  void* alloc(std::size_t bytes, int dev) {
    on_device g(dev);
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess) return p;
    (void)cudaGetLastError();  // clear the error state
    last_error = e;
    return nullptr;
  }
  void free(void* p, int dev) noexcept {
    on_device g(dev);
    (void)cudaFree(p);
  }
  void synchronize(int dev) noexcept {
    on_device g(dev);
    (void)cudaDeviceSynchronize();
  }
};

/// Device memory for tensors: runtime/block_pool.hpp's pool (size classes, per-stream reuse,
/// block splitting and merging) over cudaMalloc, behind a mutex, with the CUDA graph capture's
/// interceptor in front.
class caching_allocator {
 public:
  static caching_allocator& instance() {
    static caching_allocator* a = new caching_allocator;  // never destroyed: frees at exit go into it
    return *a;
  }
  void* allocate(std::size_t n, int dev, cudaStream_t s) {
    alloc_interceptor* ic = current_alloc_interceptor();
    if (ic)
      if (void* q = ic->serve(n, dev)) return q;
    std::lock_guard<std::mutex> lock(mutex_);
    void* p = pool_.allocate(n, dev, s);
    if (!p) {
      const auto& st = pool_.stats();
      throw device_error("tenet: CUDA out of memory allocating " + std::to_string(n) + " bytes on cuda:" +
                         std::to_string(dev) + " (" + std::to_string(st.allocated) + " bytes allocated, " +
                         std::to_string(st.reserved) + " reserved by tenet): " +
                         cudaGetErrorString(pool_.backing().last_error));
    }
    if (ic) ic->allocated(p, n);
    return p;
  }
  void deallocate(void* p) noexcept {
    if (alloc_interceptor* ic = current_alloc_interceptor(); ic && ic->release(p)) return;
    std::lock_guard<std::mutex> lock(mutex_);
    pool_.deallocate(p);
  }
  /// Gives every wholly free segment back to the driver.
  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    pool_.release_cached();
  }
  memory_stats_t stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return pool_.stats();
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    pool_.reset_peak();
  }
  /// Called when a tenet stream is destroyed: the wholly free segments of its pools go back to
  /// the driver once the device's work is done (the rest stay, tagged with the stream, and
  /// are given back by empty_cache() once free).
  void drop_stream(cudaStream_t s) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    pool_.release_stream(s);
  }

 private:
  mutable std::mutex mutex_;
  block_pool<cuda_backing, cudaStream_t> pool_;
};

// --- the hooks storage.hpp calls --------------------------------------------------------------
inline void* hook_allocate(std::size_t n, device d) {
  device_context ctx(d);
  return caching_allocator::instance().allocate(n, d.index, current_stream());
}
inline void hook_deallocate(void* p, std::size_t, device) noexcept { caching_allocator::instance().deallocate(p); }
/// Copies n bytes between any two of host and CUDA devices; returns when the data is at dst
/// (pageable host memory) or, for pinned host memory, after the stream finished the copy.
inline void hook_copy(void* dst, device dd, const void* src, device sd, std::size_t n) {
  if (n == 0) return;
  if (capturing_graph())
    throw device_error("tenet: a copy between host and device (t.to(...), t.cpu(), a host mask or value) waits for "
                       "the stream, which a CUDA graph capture cannot contain");
  const device& on = dd.is_cpu() ? sd : dd;
  device_context ctx(on);
  const cudaStream_t s = current_stream();
  TENET_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s));
  TENET_CUDA_CHECK(cudaStreamSynchronize(s));
  raise_device_faults(on.index, s, false);
}
inline void pinned_release(void* p, std::size_t, device) noexcept { (void)cudaFreeHost(p); }

inline const device_backend_hooks& hooks() {
  static const device_backend_hooks h{&hook_allocate, &hook_deallocate, &hook_copy};
  return h;
}
/// Registered at start-up by every CUDA translation unit (one slot; all register the same table).
inline const bool hooks_registered = (device_backend_slot(device_type::cuda) = &hooks(), true);

}  // namespace tenet::detail::cuda
