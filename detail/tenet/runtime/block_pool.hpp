#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// A caching pool of device memory that splits and merges blocks (the design of PyTorch's CUDA
// caching allocator), independent of any device API so that it is tested on the CPU: the
// Backing supplies the memory.
//
// - Requests are rounded up to 512 bytes. Requests of at most 1 MiB are served from 2 MiB
//   segments ("small" pool); larger ones from 20 MiB segments, or from a segment of their own
//   (rounded up to 2 MiB) when above 10 MiB ("large" pool). A segment is one Backing allocation.
// - A segment belongs to the stream of the request that made it. A free block serves only
//   requests of the same device, stream and pool: work on one stream runs in order, so memory
//   freed there (after the work that used it was enqueued) is safe to hand to later work on that
//   stream without waiting (PyTorch's rule).
// - A request takes the smallest free block that fits (best fit). When the rest is at least
//   512 bytes (small pool) or 1 MiB (large pool), the block is split and the rest stays free.
// - A freed block merges with its free neighbours in the segment, so a segment whose blocks are
//   all free is one free block again; release_cached() gives such segments back (after the
//   Backing's synchronize), as does an allocation the Backing cannot serve, once, before it fails.
//
// Backing: void* alloc(std::size_t bytes, int dev) (nullptr when out of memory, no throw);
// void free(void* p, int dev); void synchronize(int dev) (all work on dev done). Not thread-safe:
// the owner locks.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tenet::detail {

struct pool_stats {
  std::size_t allocated = 0;       ///< bytes in live blocks (requests rounded up to 512 bytes)
  std::size_t reserved = 0;        ///< bytes of the segments obtained from the Backing and kept
  std::size_t peak_allocated = 0;  ///< the largest `allocated` seen since the last reset
  std::size_t allocations = 0;     ///< allocations served
  std::size_t cache_hits = 0;      ///< allocations served from a cached free block
  std::size_t segments = 0;        ///< segments obtained from the Backing and kept
  std::size_t splits = 0;          ///< free blocks cut to serve a smaller request
};

template <class Backing, class Stream = const void*>
class block_pool {
 public:
  static constexpr std::size_t granule = 512;
  static constexpr std::size_t small_request = std::size_t{1} << 20;   ///< up to this: the small pool
  static constexpr std::size_t small_segment = std::size_t{2} << 20;
  static constexpr std::size_t large_segment = std::size_t{20} << 20;  ///< shared by requests up to 10 MiB
  static constexpr std::size_t shared_request = std::size_t{10} << 20;
  static constexpr std::size_t segment_round = std::size_t{2} << 20;
  static constexpr std::size_t large_split_min = std::size_t{1} << 20;  ///< smallest rest split off a large block

  explicit block_pool(Backing backing = {}) : backing_(std::move(backing)) {}
  block_pool(const block_pool&) = delete;
  block_pool& operator=(const block_pool&) = delete;
  /// The segments still held go back to the Backing (live blocks in them become invalid).
  ~block_pool() {
    for (auto& [b, owned] : blocks_)
      if (!b->prev) backing_.free(b->ptr, b->dev);  // a segment's first block starts it
  }

  static std::size_t rounded(std::size_t n) { return n == 0 ? granule : (n + granule - 1) / granule * granule; }
  /// The size of the segment made for a request of r bytes (rounded).
  static std::size_t segment_for(std::size_t r) {
    if (r <= small_request) return small_segment;
    if (r <= shared_request) return large_segment;
    return (r + segment_round - 1) / segment_round * segment_round;
  }

  /// A block of at least n bytes on dev for work on stream s, or nullptr when the Backing cannot
  /// give a new segment even after the cached ones went back.
  void* allocate(std::size_t n, int dev, Stream s) {
    const std::size_t r = rounded(n);
    const bool small = r <= small_request;
    block* b = take_free(dev, s, small, r);
    if (b) {
      ++stats_.cache_hits;
    } else {
      const std::size_t seg = segment_for(r);
      void* p = backing_.alloc(seg, dev);
      if (!p) {  // give the cached segments back and try once more
        release_cached();
        p = backing_.alloc(seg, dev);
        if (!p) return nullptr;
      }
      auto owned = std::make_unique<block>(block{static_cast<char*>(p), seg, dev, s, small, false, nullptr, nullptr});
      b = owned.get();
      blocks_.emplace(b, std::move(owned));
      stats_.reserved += seg;
      ++stats_.segments;
    }
    split(b, r);
    b->free = false;
    live_.emplace(b->ptr, b);
    ++stats_.allocations;
    stats_.allocated += b->size;
    if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
    return b->ptr;
  }

  /// Returns p's block to the pool (merged with its free neighbours); a pointer this pool did not
  /// hand out is ignored.
  void deallocate(void* p) noexcept {
    auto it = live_.find(p);
    if (it == live_.end()) return;
    block* b = it->second;
    live_.erase(it);
    stats_.allocated -= b->size;
    b->free = true;
    if (b->prev && b->prev->free) b = merge(b->prev, b);
    if (b->next && b->next->free) b = merge(b, b->next);
    free_.insert(b);
  }

  /// The bytes of the live block at p (0 for a pointer this pool did not hand out).
  std::size_t block_size(const void* p) const {
    auto it = live_.find(const_cast<void*>(p));
    return it == live_.end() ? 0 : it->second->size;
  }

  /// Gives every wholly free segment back to the Backing, after synchronizing each device that
  /// has one; release_stream: those of stream s alone.
  void release_cached() { release_where([](const block&) { return true; }); }
  void release_stream(Stream s) {
    release_where([s](const block& b) { return b.stream == s; });
  }

  const pool_stats& stats() const { return stats_; }
  void reset_peak() { stats_.peak_allocated = stats_.allocated; }
  Backing& backing() { return backing_; }

 private:
  struct block {
    char* ptr;
    std::size_t size;
    int dev;
    Stream stream;
    bool small;
    bool free;
    block* prev;  // the neighbours in the segment (null at its ends)
    block* next;
  };
  /// Free blocks ordered so that lower_bound finds the best fit of a (device, stream, pool).
  struct by_fit {
    bool operator()(const block* a, const block* b) const {
      return std::make_tuple(a->dev, a->stream, a->small, a->size, a->ptr) <
             std::make_tuple(b->dev, b->stream, b->small, b->size, b->ptr);
    }
  };

  block* take_free(int dev, Stream s, bool small, std::size_t r) {
    block probe{nullptr, r, dev, s, small, true, nullptr, nullptr};
    auto it = free_.lower_bound(&probe);
    if (it == free_.end()) return nullptr;
    block* b = *it;
    if (b->dev != dev || b->stream != s || b->small != small) return nullptr;
    free_.erase(it);
    return b;
  }
  /// Cuts b (free, taken out of free_) to r bytes when the rest is worth keeping; the rest goes
  /// into free_.
  void split(block* b, std::size_t r) {
    const std::size_t rest = b->size - r;
    if (rest < (b->small ? granule : large_split_min)) return;
    auto owned = std::make_unique<block>(block{b->ptr + r, rest, b->dev, b->stream, b->small, true, b, b->next});
    block* t = owned.get();
    blocks_.emplace(t, std::move(owned));
    if (b->next) b->next->prev = t;
    b->next = t;
    b->size = r;
    free_.insert(t);
    ++stats_.splits;
  }
  /// a and b adjacent (a first), b free and a free; the merged block is a (b is destroyed). The
  /// caller inserts the result into free_; a and b are taken out of it here when they are in it.
  block* merge(block* a, block* b) {
    free_.erase(a);
    free_.erase(b);
    a->size += b->size;
    a->next = b->next;
    if (b->next) b->next->prev = a;
    blocks_.erase(b);
    return a;
  }
  template <class Pred>
  void release_where(Pred&& pred) {
    std::vector<block*> whole;
    for (block* b : free_)
      if (!b->prev && !b->next && pred(*b)) whole.push_back(b);
    if (whole.empty()) return;
    std::vector<int> synced;
    for (block* b : whole) {
      bool seen = false;
      for (int d : synced) seen = seen || d == b->dev;
      if (!seen) {
        backing_.synchronize(b->dev);
        synced.push_back(b->dev);
      }
    }
    for (block* b : whole) {
      free_.erase(b);
      backing_.free(b->ptr, b->dev);
      stats_.reserved -= b->size;
      --stats_.segments;
      blocks_.erase(b);
    }
  }

  Backing backing_;
  std::set<block*, by_fit> free_;
  std::unordered_map<void*, block*> live_;
  std::unordered_map<block*, std::unique_ptr<block>> blocks_;  // owns every block, free or live
  pool_stats stats_;
};

}  // namespace tenet::detail
