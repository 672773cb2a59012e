// Tests of runtime/block_pool.hpp, the CUDA caching allocator's pool (size classes, per-stream
// reuse, best fit with splitting, merging on free, giving segments back), over a host Backing that
// records what it was asked for: the same code the GPU runs, checked where CI runs.
#include <catch2/catch.hpp>

#define TENET_PUBLIC_HEADER_INCLUDED 1  // a test of an internal header
#include <tenet/runtime/block_pool.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <vector>

namespace {

constexpr std::size_t KiB = std::size_t{1} << 10, MiB = std::size_t{1} << 20;

/// Host memory with a budget per device (an allocation beyond it fails, as cudaMalloc's out of
/// memory), counting calls.
struct host_backing {
  struct log_t {
    std::map<int, std::size_t> held;  // bytes held per device
    std::size_t budget = std::size_t{1} << 40;
    int allocs = 0, frees = 0, failures = 0, syncs = 0;
  };
  log_t* log;
  void* alloc(std::size_t bytes, int dev) {
    if (log->held[dev] + bytes > log->budget) {
      ++log->failures;
      return nullptr;
    }
    ++log->allocs;
    log->held[dev] += bytes;
    void* p = std::malloc(bytes);
    sizes()[p] = bytes;
    return p;
  }
  void free(void* p, int dev) {
    ++log->frees;
    log->held[dev] -= sizes()[p];
    sizes().erase(p);
    std::free(p);
  }
  void synchronize(int) { ++log->syncs; }
  static std::map<void*, std::size_t>& sizes() {
    static std::map<void*, std::size_t> m;
    return m;
  }
};

using pool_t = tenet::detail::block_pool<host_backing, int>;  // streams are ints here

auto addr(void* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

TEST_CASE("block_pool: requests are rounded to 512 bytes and served from 2 MiB / 20 MiB / own segments") {
  host_backing::log_t log;
  pool_t pool(host_backing{&log});
  CHECK(pool_t::rounded(0) == 512);
  CHECK(pool_t::rounded(1) == 512);
  CHECK(pool_t::rounded(513) == 1024);
  void* a = pool.allocate(100, 0, 0);
  CHECK(pool.block_size(a) == 512);
  CHECK(pool.stats().reserved == 2 * MiB);  // the small pool's segment
  CHECK(pool.stats().allocated == 512);
  void* b = pool.allocate(4 * MiB, 0, 0);
  CHECK(pool.stats().reserved == 22 * MiB);  // a shared 20 MiB segment
  void* c = pool.allocate(33 * MiB + 1, 0, 0);
  CHECK(pool.stats().reserved == 22 * MiB + 34 * MiB);  // its own, rounded to 2 MiB
  CHECK(pool.stats().segments == 3);
  CHECK(pool.block_size(c) == 34 * MiB);  // the rest (under 1 MiB) stays with the block
  CHECK(pool.stats().allocated == 512 + 4 * MiB + 34 * MiB);
  CHECK(pool.stats().peak_allocated == pool.stats().allocated);
  CHECK(pool.stats().allocations == 3);
  CHECK(pool.stats().cache_hits == 0);
  pool.deallocate(a);
  pool.deallocate(b);
  pool.deallocate(c);
  CHECK(pool.stats().allocated == 0);
  CHECK(pool.stats().reserved == 56 * MiB);  // kept
  CHECK(pool.stats().peak_allocated == 512 + 4 * MiB + 34 * MiB);
  pool.reset_peak();
  CHECK(pool.stats().peak_allocated == 0);
  pool.release_cached();
  CHECK(pool.stats().reserved == 0);
  CHECK(pool.stats().segments == 0);
  CHECK(log.allocs == 3);
  CHECK(log.frees == 3);
  CHECK(log.syncs == 1);  // one synchronize per device before memory goes back
  CHECK(log.held[0] == 0);
}

TEST_CASE("block_pool: a segment is split among requests and merged back when they are freed") {
  host_backing::log_t log;
  pool_t pool(host_backing{&log});
  std::vector<void*> ps;
  for (int i = 0; i < 4; ++i) ps.push_back(pool.allocate(512 * KiB, 0, 7));  // 4 x 512 KiB = one 2 MiB segment
  CHECK(log.allocs == 1);
  CHECK(pool.stats().cache_hits == 3);
  CHECK(pool.stats().splits == 3);
  for (int i = 1; i < 4; ++i) CHECK(addr(ps[static_cast<std::size_t>(i)]) == addr(ps[0]) + i * 512 * KiB);
  // the blocks are distinct memory: writing one leaves the others alone
  for (int i = 0; i < 4; ++i) std::memset(ps[static_cast<std::size_t>(i)], i + 1, 512 * KiB);
  for (int i = 0; i < 4; ++i) CHECK(static_cast<unsigned char*>(ps[static_cast<std::size_t>(i)])[512 * KiB - 1] == i + 1);
  void* fifth = pool.allocate(512 * KiB, 0, 7);
  CHECK(log.allocs == 2);  // the first segment is full
  pool.deallocate(fifth);
  // free the middle two: they merge into one 1 MiB hole that serves a 1 MiB request without a new segment
  pool.deallocate(ps[1]);
  pool.deallocate(ps[2]);
  void* mib = pool.allocate(MiB, 0, 7);
  CHECK(addr(mib) == addr(ps[1]));
  CHECK(pool.block_size(mib) == MiB);
  CHECK(log.allocs == 2);
  pool.deallocate(mib);
  pool.deallocate(ps[0]);
  // a segment with a live block is not given back
  pool.release_cached();
  CHECK(pool.stats().segments == 1);
  CHECK(pool.stats().reserved == 2 * MiB);
  pool.deallocate(ps[3]);  // the last block: the segment is whole again
  void* whole = pool.allocate(MiB, 0, 7);
  CHECK(addr(whole) == addr(ps[0]));  // the merged segment, cut from its start
  pool.deallocate(whole);
  pool.release_cached();
  CHECK(pool.stats().segments == 0);
  CHECK(pool.stats().reserved == 0);
  CHECK(log.held[0] == 0);
}

TEST_CASE("block_pool: best fit takes the smallest free block that fits") {
  host_backing::log_t log;
  pool_t pool(host_backing{&log});
  // three large blocks in one 20 MiB segment: 3 MiB, 6 MiB, 2 MiB, and the rest (9 MiB) free
  void* a = pool.allocate(3 * MiB, 0, 0);
  void* b = pool.allocate(6 * MiB, 0, 0);
  void* c = pool.allocate(2 * MiB, 0, 0);
  void* d = pool.allocate(9 * MiB, 0, 0);  // takes the rest exactly
  CHECK(log.allocs == 1);
  pool.deallocate(a);
  pool.deallocate(c);
  // free: 3 MiB at a, 2 MiB at c (not adjacent to a); a 2 MiB request takes c's block, not a's
  void* e = pool.allocate(2 * MiB, 0, 0);
  CHECK(e == c);
  // 2.5 MiB: a's block, split? the rest (0.5 MiB) is under 1 MiB, so the whole 3 MiB block goes
  void* f = pool.allocate(2 * MiB + 512 * KiB, 0, 0);
  CHECK(f == a);
  CHECK(pool.block_size(f) == 3 * MiB);
  // a request larger than every free block makes a new segment
  pool.deallocate(b);
  void* g = pool.allocate(7 * MiB, 0, 0);
  CHECK(g != b);
  CHECK(log.allocs == 2);
  for (void* p : {d, e, f, g}) pool.deallocate(p);
  CHECK(pool.stats().allocated == 0);
  pool.release_cached();
  CHECK(pool.stats().reserved == 0);
}

TEST_CASE("block_pool: free blocks serve only their own device, stream and pool") {
  host_backing::log_t log;
  pool_t pool(host_backing{&log});
  void* a = pool.allocate(64 * KiB, 0, 1);
  pool.deallocate(a);
  CHECK(log.allocs == 1);
  void* other_stream = pool.allocate(64 * KiB, 0, 2);
  CHECK(log.allocs == 2);
  void* other_device = pool.allocate(64 * KiB, 1, 1);
  CHECK(log.allocs == 3);
  void* same = pool.allocate(64 * KiB, 0, 1);
  CHECK(same == a);
  CHECK(log.allocs == 3);
  // a small request never cuts a large-pool block, nor a large request a small-pool one
  void* big = pool.allocate(2 * MiB, 0, 1);
  pool.deallocate(big);
  const int before = log.allocs;
  void* small = pool.allocate(512 * KiB, 0, 1);  // the 2 MiB segment of the small pool still has room
  CHECK(log.allocs == before);
  CHECK((addr(small) < addr(big) || addr(small) >= addr(big) + 20 * MiB));
  // release_stream gives back only that stream's whole free segments
  pool.deallocate(other_stream);
  pool.deallocate(small);
  pool.deallocate(same);
  pool.deallocate(other_device);
  const std::size_t seg_before = pool.stats().segments;
  pool.release_stream(2);
  CHECK(pool.stats().segments == seg_before - 1);
  pool.release_cached();
  CHECK(pool.stats().segments == 0);
  CHECK(log.held[0] == 0);
  CHECK(log.held[1] == 0);
}

TEST_CASE("block_pool: when the backing is out of memory, cached segments go back and the request is retried") {
  host_backing::log_t log;
  log.budget = 44 * MiB;
  pool_t pool(host_backing{&log});
  void* a = pool.allocate(20 * MiB, 0, 0);  // own segment, 20 MiB
  void* b = pool.allocate(20 * MiB, 0, 3);  // own segment on another stream
  pool.deallocate(b);                        // cached on stream 3, useless for stream 0
  CHECK(pool.stats().reserved == 40 * MiB);
  void* c = pool.allocate(20 * MiB, 0, 0);  // over budget until stream 3's segment goes back
  REQUIRE(c != nullptr);
  CHECK(log.failures == 1);
  CHECK(pool.stats().reserved == 40 * MiB);
  CHECK(pool.allocate(20 * MiB, 0, 0) == nullptr);  // nothing left to give back: fails
  CHECK(pool.stats().allocated == 40 * MiB);
  pool.deallocate(a);
  pool.deallocate(c);
  pool.deallocate(nullptr);        // ignored
  pool.deallocate(&log);           // not the pool's: ignored
  CHECK(pool.block_size(&log) == 0);
  CHECK(pool.stats().allocated == 0);
}

TEST_CASE("block_pool: many mixed allocations and frees keep the blocks disjoint and the books balanced") {
  host_backing::log_t log;
  pool_t pool(host_backing{&log});
  std::uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  std::map<std::uintptr_t, std::size_t> live;  // address -> requested bytes
  std::size_t expect_allocated = 0;
  for (int step = 0; step < 4000; ++step) {
    if (live.empty() || next() % 2 == 0) {
      const std::size_t n = next() % 5 == 0 ? (next() % (24 * MiB)) : next() % (300 * KiB);
      void* p = pool.allocate(n, 0, static_cast<int>(next() % 2));
      REQUIRE(p != nullptr);
      const std::size_t got = pool.block_size(p);
      REQUIRE(got >= n);
      REQUIRE(got % 512 == 0);
      // disjoint from every live block
      auto it = live.lower_bound(addr(p));
      if (it != live.end()) REQUIRE(addr(p) + got <= it->first);
      if (it != live.begin()) {
        --it;
        REQUIRE(it->first + pool.block_size(reinterpret_cast<void*>(it->first)) <= addr(p));
      }
      live[addr(p)] = n;
      expect_allocated += got;
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(next() % live.size()));
      expect_allocated -= pool.block_size(reinterpret_cast<void*>(it->first));
      pool.deallocate(reinterpret_cast<void*>(it->first));
      live.erase(it);
    }
    REQUIRE(pool.stats().allocated == expect_allocated);
  }
  for (auto& [p, n] : live) pool.deallocate(reinterpret_cast<void*>(p));
  CHECK(pool.stats().allocated == 0);
  CHECK(pool.stats().cache_hits > 0);
  CHECK(pool.stats().splits > 0);
  pool.release_cached();  // every segment merged back to one free block and went back
  CHECK(pool.stats().segments == 0);
  CHECK(pool.stats().reserved == 0);
  CHECK(log.held[0] == 0);
  CHECK(log.allocs == log.frees);
}
