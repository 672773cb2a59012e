#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Storage: one allocation on one device, shared by every view of it.
//
// Large CPU blocks (>= 1 MiB) go through a small caching allocator: a freed block is kept for the
// next allocation of the same rounded size instead of going back to the kernel, so that a loop
// `y = f(x);` does not pay page faults for a fresh 64 MiB result every iteration (glibc returns
// blocks above its mmap threshold, 32 MiB at most, to the kernel at once). The cache holds at most
// `cpu_cache_limit` bytes (TENET_CPU_CACHE_BYTES, default 1 GiB; 0 disables it).
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>  // madvise(MADV_HUGEPAGE)
#endif

#include <tenet/device.hpp>

namespace tenet::detail {

inline constexpr std::size_t storage_alignment = 64;  // one cache line, a full AVX-512 vector
inline constexpr std::size_t large_block = std::size_t{1} << 20;
inline constexpr std::size_t huge_page = std::size_t{2} << 20;

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
    const std::size_t r = (n + storage_alignment - 1) / storage_alignment * storage_alignment;
    return r == 0 ? storage_alignment : r;
  }
  void* get(std::size_t n) {
    const std::size_t r = rounded(n);
    if (r >= large_block) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(r);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= r;
        return p;
      }
    }
    void* p = std::aligned_alloc(r >= large_block ? huge_page : storage_alignment, r);
    if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (r >= large_block) madvise(p, r, MADV_HUGEPAGE);
#endif
    return p;
  }
  void put(void* p, std::size_t n) {
    const std::size_t r = rounded(n);
    if (r >= large_block) {
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

struct storage {
  void* data = nullptr;
  std::size_t bytes = 0;
  device dev = cpu;
  std::shared_ptr<void> owner;  // set for a block inside memory someone else owns (a planned arena)

  storage(std::size_t n, device d) : bytes(n), dev(d) {
    require_backend(d, "allocating a tensor");
    data = cpu_block_cache::instance().get(n);
  }
  /// A view of n bytes at p inside memory that `own` keeps alive; never freed by this storage.
  storage(void* p, std::size_t n, device d, std::shared_ptr<void> own) : data(p), bytes(n), dev(d), owner(std::move(own)) {}
  ~storage() {
    if (!owner) cpu_block_cache::instance().put(data, bytes);
  }
  storage(const storage&) = delete;
  storage& operator=(const storage&) = delete;
};

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

inline std::shared_ptr<storage> allocate(std::size_t bytes, device d) {
  if (allocation_hook* h = current_allocation_hook(); h && d.is_cpu())
    if (auto s = h->allocate(bytes)) return s;
  return std::make_shared<storage>(bytes, d);
}

}  // namespace tenet::detail
