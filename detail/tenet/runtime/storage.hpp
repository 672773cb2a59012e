#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Storage: one allocation on one device, shared by every view of it.
//
// CPU blocks of 64 KiB and more go through a small caching allocator: a freed block is kept for
// the next allocation of the same rounded size instead of going back to the kernel, so that a loop
// `y = f(x);` does not pay page faults for a fresh result every iteration (glibc returns blocks
// above its mmap threshold, 32 MiB at most, to the kernel at once, and trims the top of its heap
// past its trim threshold, so blocks of a few hundred KiB are faulted in again and again).
// Sizes round up to 16 KiB below 1 MiB and to 2 MiB (huge pages) above. The cache holds at most
// `cpu_cache_limit` bytes (TENET_CPU_CACHE_BYTES, default 1 GiB; 0 disables it). Measured on
// examples/nanogpt (2 threads, activations of 256 KiB to 1 MiB, 500 steps, alternating runs):
// 6.94-7.24 s caching from 1 MiB, 6.05-6.12 s caching from 64 KiB (glibc told never to trim nor
// to mmap, through its environment tunables, gave 5.8 s in an earlier run).
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>  // madvise(MADV_HUGEPAGE)
#endif

#include <tenet/device.hpp>
#include <tenet/error.hpp>

namespace tenet::detail {

inline constexpr std::size_t storage_alignment = 64;  // one cache line, a full AVX-512 vector
inline constexpr std::size_t large_block = std::size_t{1} << 20;
inline constexpr std::size_t huge_page = std::size_t{2} << 20;
inline constexpr std::size_t cached_block = std::size_t{64} << 10;  // the smallest block the cache keeps
inline constexpr std::size_t cached_step = std::size_t{16} << 10;   // its size step below large_block

class cpu_block_cache {
 public:
  static cpu_block_cache& instance() {
    // never destroyed: tensors with static storage duration may free into it at exit
    static cpu_block_cache* c = new cpu_block_cache;
    return *c;
  }
  /// Rounded size a block of n bytes occupies.
  static std::size_t rounded(std::size_t n) {
    if (n >= large_block) return (n + huge_page - 1) / huge_page * huge_page;
    if (n >= cached_block) return (n + cached_step - 1) / cached_step * cached_step;
    const std::size_t r = (n + storage_alignment - 1) / storage_alignment * storage_alignment;
    return r == 0 ? storage_alignment : r;
  }
  void* get(std::size_t n) {
    const std::size_t r = rounded(n);
    if (r >= cached_block) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(r);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= r;
        return p;
      }
    }
    const std::size_t align = r >= large_block ? huge_page : storage_alignment;
    void* p = std::aligned_alloc(align, r);
    if (!p) {  // the cached blocks go back first, then one more try
      const std::size_t held = cached_bytes();
      release();
      p = std::aligned_alloc(align, r);
      if (!p)
        throw device_error("tenet: out of memory allocating " + std::to_string(n) + " bytes on cpu (" +
                           std::to_string(held) + " bytes of cached blocks released first)");
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (r >= large_block) madvise(p, r, MADV_HUGEPAGE);
#endif
    return p;
  }
  void put(void* p, std::size_t n) {
    const std::size_t r = rounded(n);
    if (r >= cached_block) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + r <= limit_) {
        free_[r].push_back(p);
        cached_ += r;
        return;
      }
    }
    std::free(p);
  }
  /// Frees every cached block.
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [r, v] : free_)
      for (void* p : v) std::free(p);
    free_.clear();
    cached_ = 0;
  }
  std::size_t cached_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }
 private:
  cpu_block_cache() {
    if (const char* e = std::getenv("TENET_CPU_CACHE_BYTES")) limit_ = std::strtoull(e, nullptr, 10);
  }
  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_ = 0;
  std::size_t limit_ = std::size_t{1} << 30;
};

/// What a device backend (CUDA) registers at start-up so that storage can live on its devices.
struct device_backend_hooks {
  void* (*allocate)(std::size_t bytes, device d);
  void (*deallocate)(void* p, std::size_t bytes, device d) noexcept;
  /// Copies bytes between host memory and the backend's devices (either side may be the host).
  void (*copy)(void* dst, device dst_dev, const void* src, device src_dev, std::size_t bytes);
};
/// The registered hooks of a device type (nullptr: no translation unit compiled that backend in).
inline const device_backend_hooks*& device_backend_slot(device_type t) {
  static const device_backend_hooks* slots[3] = {};
  return slots[static_cast<int>(t)];
}
inline const device_backend_hooks& backend_hooks(const device& d, const char* what) {
  const device_backend_hooks* h = device_backend_slot(d.type);
  if (!h) require_backend(d, what);  // throws device_error: the backend is not compiled in
  return *h;
}

/// The serial number the next storage gets (creation order; func::vmap tells by it which
/// allocations existed before a sample ran).
inline std::atomic<std::uint64_t>& next_storage_serial() {
  static std::atomic<std::uint64_t> n{0};
  return n;
}

struct storage {
  using release_fn = void (*)(void*, std::size_t, device) noexcept;
  void* data = nullptr;
  std::size_t bytes = 0;
  device dev = tenet::cpu;
  const device_backend_hooks* hooks = nullptr;  // device memory: the backend that frees it
  release_fn release = nullptr;                 // memory adopted with its own deleter (pinned host memory)
  std::shared_ptr<void> owner;                  // a block inside memory someone else owns (a planned arena)
  /// PyTorch's version counter: how many in-place writes this allocation has had, through any view
  /// (copy_, fill_, add_, ..., optimizer steps: bump_version). Autograd records it for the tensors
  /// a backward reads and refuses to read one whose version moved (autograd/graph.hpp). Atomic,
  /// relaxed: views of one storage may be written from several threads; it orders nothing.
  std::atomic<std::uint64_t> version{0};
  /// Creation order (next_storage_serial): a write_watch reports writes into older storages.
  const std::uint64_t serial = next_storage_serial().fetch_add(1, std::memory_order_relaxed);

  storage(std::size_t n, device d) : bytes(n), dev(d) {
    if (d.is_cpu()) {
      data = cpu_block_cache::instance().get(n);
    } else {
      hooks = &backend_hooks(d, "allocating a tensor");
      data = hooks->allocate(n, d);
    }
  }
  /// Adopts p (n bytes on d), freed by `r`.
  storage(void* p, std::size_t n, device d, release_fn r) : data(p), bytes(n), dev(d), release(r) {}
  /// A view of n bytes at p inside memory that `own` keeps alive; never freed by this storage.
  storage(void* p, std::size_t n, device d, std::shared_ptr<void> own) : data(p), bytes(n), dev(d), owner(std::move(own)) {}
  ~storage() {
    if (owner)
      return;
    else if (release)
      release(data, bytes, dev);
    else if (hooks)
      hooks->deallocate(data, bytes, dev);
    else
      cpu_block_cache::instance().put(data, bytes);
  }
  storage(const storage&) = delete;
  storage& operator=(const storage&) = delete;
};

/// Records, on this thread while it is installed, the in-place writes into storages created
/// before it (func::vmap: a sample must not write into a tensor from outside f that it does not
/// map). Watches nest (an inner vmap's sample inside an outer one's); each records for itself.
struct write_watch {
  std::uint64_t first_serial = next_storage_serial().load(std::memory_order_relaxed);
  write_watch* outer = nullptr;
  struct write {
    const storage* where;  // compared by address only: the storage may be gone when it is read
    std::size_t bytes;
    device dev;
  };
  std::vector<write> writes;
};
inline write_watch*& current_write_watch() {
  thread_local write_watch* w = nullptr;
  return w;
}

/// Counts one in-place write into s (see storage::version), and tells the write watches.
inline void bump_version(storage* s) {
  if (!s) return;
  s->version.fetch_add(1, std::memory_order_relaxed);
  for (write_watch* w = current_write_watch(); w; w = w->outer)
    if (s->serial < w->first_serial) w->writes.push_back({s, s->bytes, s->dev});
}

/// A per-thread hook that may serve CPU allocations (tenet::compile's memory plan, compile.hpp):
/// returns null to let the default allocator serve the request.
struct allocation_hook {
  virtual std::shared_ptr<storage> allocate(std::size_t bytes) = 0;
  virtual ~allocation_hook() = default;
};
inline allocation_hook*& current_allocation_hook() {
  thread_local allocation_hook* h = nullptr;
  return h;
}

/// Copies n bytes from src (on sd) to dst (on dd); host memory on both sides is a memcpy.
inline void copy_bytes(void* dst, device dd, const void* src, device sd, std::size_t n) {
  if (n == 0) return;
  if (dd.is_cpu() && sd.is_cpu()) {
    std::memcpy(dst, src, n);
    return;
  }
  const device& other = dd.is_cpu() ? sd : dd;
  backend_hooks(other, "copying a tensor").copy(dst, dd, src, sd, n);
}

inline std::shared_ptr<storage> allocate(std::size_t bytes, device d) {
  if (allocation_hook* h = current_allocation_hook(); h && d.is_cpu())
    if (auto s = h->allocate(bytes)) return s;
  return std::make_shared<storage>(bytes, d);
}

}  // namespace tenet::detail
