// The Metal execution-model emulator's own tests (emulator.hpp, msl_shim.hpp): kernels written in
// MSL as tenet's generator writes them (buffers through tenet_buffer / tenet_threadgroup, the six
// built-in positions last). Correct reductions give the right sums; a divergent barrier, an
// out-of-bounds write, threadgroup races and a diverged simdgroup operation are each reported,
// with the kernel, threadgroup, thread and index in the message; so is a read of threadgroup memory
// that no thread wrote.
#include "msl_shim.hpp"

#include <catch2/catch.hpp>

#include <numeric>
#include <string>
#include <vector>

using namespace metal;
namespace emu = tenet::metal_emu;

#define TENET_BUILTINS                                                                          \
  uint gid [[thread_position_in_grid]], uint tgid [[threadgroup_position_in_grid]],             \
      uint lid [[thread_position_in_threadgroup]], uint tgsize [[threads_per_threadgroup]],     \
      uint lane [[thread_index_in_simdgroup]], uint sg [[simdgroup_index_in_threadgroup]]

namespace {

// A tree reduction over threadgroup memory: each group sums tgsize elements.
[[kernel]] void tree_sum(tenet_buffer<float> out [[buffer(0)]], tenet_buffer<const float> in [[buffer(1)]],
                         tenet_threadgroup<float> part [[threadgroup(0)]], TENET_BUILTINS) {
  (void)lane, (void)sg;
  part[lid] = in[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s = tgsize / 2; s > 0; s /= 2) {
    if (lid < s) part[lid] = part[lid] + part[lid + s];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (lid == 0) out[tgid] = part[0];
}

// The same without the barrier inside the loop: thread s reads part[lid + s] that another thread
// wrote in the same epoch.
[[kernel]] void tree_sum_racy(tenet_buffer<float> out [[buffer(0)]], tenet_buffer<const float> in [[buffer(1)]],
                              tenet_threadgroup<float> part [[threadgroup(0)]], TENET_BUILTINS) {
  (void)lane, (void)sg;
  part[lid] = in[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s = tgsize / 2; s > 0; s /= 2)
    if (lid < s) part[lid] = part[lid] + part[lid + s];
  if (lid == 0) out[tgid] = part[0];
}

// Two threads write the same element with no barrier between.
[[kernel]] void write_write_race(tenet_buffer<float> out [[buffer(0)]], tenet_threadgroup<float> part [[threadgroup(0)]],
                                 TENET_BUILTINS) {
  (void)gid, (void)tgsize, (void)lane, (void)sg;
  part[lid / 2] = float(lid);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid == 0) out[tgid] = part[0];
}

// simdgroup reduction: simd_sum within each simdgroup, the partial sums through threadgroup
// memory, the first simdgroup sums them.
[[kernel]] void simd_reduce(tenet_buffer<float> out [[buffer(0)]], tenet_buffer<const float> in [[buffer(1)]],
                            tenet_threadgroup<float> part [[threadgroup(0)]], TENET_BUILTINS) {
  (void)lid;
  float v = simd_sum(in[gid]);
  if (lane == 0) part[sg] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    const uint groups = (tgsize + 31) / 32;
    float w = lane < groups ? float(part[lane]) : 0.0f;
    w = simd_sum(w);
    if (lane == 0) out[tgid] = w;
  }
}

// A max by shuffles down a tree.
[[kernel]] void shuffle_max(tenet_buffer<float> out [[buffer(0)]], tenet_buffer<const float> in [[buffer(1)]],
                            TENET_BUILTINS) {
  (void)lid, (void)tgsize, (void)sg;
  float v = in[gid];
  for (ushort d = 16; d > 0; d /= 2) v = max(v, simd_shuffle_down(v, d));
  if (lane == 0) out[tgid] = v;
}

// Thread i reads slot i + 1; no thread writes the last slot, which thread tgsize - 2 reads.
[[kernel]] void uninitialized_read(tenet_buffer<float> out [[buffer(0)]], tenet_threadgroup<float> part [[threadgroup(0)]],
                                   TENET_BUILTINS) {
  (void)tgid, (void)lane, (void)sg;
  if (lid + 1 < tgsize) part[lid] = float(lid);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[gid] = part[(lid + 1) % tgsize];
}

// Threads with lid >= 40 return before the barrier.
[[kernel]] void divergent_barrier(tenet_buffer<float> out [[buffer(0)]], tenet_threadgroup<float> part [[threadgroup(0)]],
                                  TENET_BUILTINS) {
  (void)tgid, (void)tgsize, (void)lane, (void)sg;
  if (lid >= 40) return;
  part[lid] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[gid] = part[0];
}

// Writes one element past the end: the grid has more threads than the buffer elements.
[[kernel]] void unguarded_copy(tenet_buffer<float> out [[buffer(0)]], tenet_buffer<const float> in [[buffer(1)]],
                               TENET_BUILTINS) {
  (void)tgid, (void)lid, (void)tgsize, (void)lane, (void)sg;
  out[gid] = in[gid % 10] * 2.0f;
}

// Lanes 0..15 call simd_sum, lanes 16..31 simd_max.
[[kernel]] void diverged_simd(tenet_buffer<float> out [[buffer(0)]], TENET_BUILTINS) {
  (void)tgid, (void)lid, (void)tgsize, (void)sg;
  const float v = lane < 16 ? simd_sum(1.0f) : simd_max(1.0f);
  out[gid] = v;
}

// Every thread adds into out[0]: with a plain += (a device memory race between threads, within
// and across threadgroups), and with an atomic add (no race).
[[kernel]] void plain_count(tenet_buffer<float> out [[buffer(0)]], TENET_BUILTINS) {
  (void)gid, (void)tgid, (void)lid, (void)tgsize, (void)lane, (void)sg;
  out[0] += 1.0f;
}
[[kernel]] void atomic_count(tenet_buffer<atomic_float> out [[buffer(0)]], tenet_buffer<atomic_int> n [[buffer(1)]],
                             TENET_BUILTINS) {
  (void)tgid, (void)lid, (void)tgsize, (void)lane, (void)sg;
  atomic_fetch_add_explicit(out, 1.0f, memory_order_relaxed);
  atomic_fetch_add_explicit(n + (gid % 2), 1, memory_order_relaxed);
}
// Thread 0 of each group writes out[tgid]; after a barrier thread 1 of the group reads it (ordered);
// thread 2 of group 1 reads group 0's element (another threadgroup: a race).
[[kernel]] void cross_group_read(tenet_buffer<float> out [[buffer(0)]], tenet_buffer<float> seen [[buffer(1)]],
                                 TENET_BUILTINS) {
  (void)gid, (void)tgsize, (void)lane, (void)sg;
  if (lid == 0) out[tgid] = float(tgid) + 1.0f;
  threadgroup_barrier(mem_flags::mem_device);
  if (lid == 1) seen[tgid] = out[tgid];
  if (lid == 2 && tgid == 1) seen[3] = out[0];
}

// One 8 x 8 product on simdgroup matrices: out = a b + c, through threadgroup memory. `lanes`
// below 32 (threads per threadgroup) or a load that only half the lanes call are errors.
[[kernel]] void matrix_mad(tenet_buffer<float> out [[buffer(0)]], tenet_buffer<const float> in [[buffer(1)]],
                           tenet_threadgroup<float> t [[threadgroup(0)]], TENET_BUILTINS) {
  (void)gid, (void)tgid, (void)lane, (void)sg;
  for (uint e = lid; e < 3 * 64; e += tgsize) t[e] = in[e];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_float8x8 a, b, c;
  simdgroup_load(a, t, 8);
  simdgroup_load(b, t + 64, 8);
  simdgroup_load(c, t + 128, 8);
  simdgroup_multiply_accumulate(c, a, b, c);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(c, t, 8);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint e = lid; e < 64; e += tgsize) out[e] = t[e];
}
[[kernel]] void matrix_half_load(tenet_buffer<float> out [[buffer(0)]], tenet_threadgroup<float> t [[threadgroup(0)]],
                                 TENET_BUILTINS) {
  (void)gid, (void)tgid, (void)tgsize, (void)sg;
  t[lid] = 1.0f;
  t[lid + 32] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_float8x8 a = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  if (lane < 16) simdgroup_load(a, t, 8);
  out[lid] = a.thread_elements()[0];
}

template <class T>
emu::binding buf(std::vector<T>& v) {
  return emu::bind_buffer(v.data(), v.size() * sizeof(T));
}

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const emu::emulation_error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("emulator: a tree reduction with barriers and a simd_sum reduction give the right sums", "[metal]") {
  const uint groups = 3, threads = 64;
  std::vector<float> in(groups * threads);
  std::iota(in.begin(), in.end(), 1.0f);
  std::vector<float> want(groups);
  for (uint g = 0; g < groups; ++g)
    for (uint i = 0; i < threads; ++i) want[g] += in[g * threads + i];

  std::vector<float> out(groups, -1.0f);
  emu::launch("tree_sum", &tree_sum, groups, threads, {buf(out), buf(in), emu::bind_threadgroup(threads * sizeof(float))});
  CHECK(out == want);

  std::vector<float> out2(groups, -1.0f);
  emu::launch("simd_reduce", &simd_reduce, groups, threads, {buf(out2), buf(in), emu::bind_threadgroup(2 * sizeof(float))});
  CHECK(out2 == want);

  // a partial last simdgroup (48 threads: lanes 0..15 in simdgroup 1)
  std::vector<float> in48(48);
  std::iota(in48.begin(), in48.end(), 0.0f);
  std::vector<float> out48(1, -1.0f);
  emu::launch("simd_reduce", &simd_reduce, 1, 48, {buf(out48), buf(in48), emu::bind_threadgroup(2 * sizeof(float))});
  CHECK(out48[0] == 47.0f * 48.0f / 2.0f);

  std::vector<float> in32(64);
  for (std::size_t i = 0; i < in32.size(); ++i) in32[i] = static_cast<float>((i * 37) % 64);
  std::vector<float> outm(2, -1.0f);
  emu::launch("shuffle_max", &shuffle_max, 2, 32, {buf(outm), buf(in32)});
  CHECK(outm[0] == *std::max_element(in32.begin(), in32.begin() + 32));
  CHECK(outm[1] == *std::max_element(in32.begin() + 32, in32.end()));
}

TEST_CASE("emulator: a threadgroup race is reported", "[metal]") {
  std::vector<float> in(64, 1.0f), out(1);
  const std::string m = message_of(
      [&] { emu::launch("tree_sum_racy", &tree_sum_racy, 1, 64, {buf(out), buf(in), emu::bind_threadgroup(64 * sizeof(float))}); });
  INFO(m);
  CHECK(m.find("threadgroup memory race") != std::string::npos);
  CHECK(m.find("kernel 'tree_sum_racy'") != std::string::npos);
  CHECK(m.find("no threadgroup_barrier between") != std::string::npos);

  const std::string w = message_of(
      [&] { emu::launch("write_write_race", &write_write_race, 1, 8, {buf(out), emu::bind_threadgroup(4 * sizeof(float))}); });
  INFO(w);
  CHECK(w.find("threadgroup memory race in kernel 'write_write_race', threadgroup 0, thread 1") != std::string::npos);
  CHECK(w.find("writes element 0 of threadgroup(0) memory, which thread 0 wrote") != std::string::npos);
}

TEST_CASE("emulator: a read of threadgroup memory that no thread wrote is reported", "[metal]") {
  std::vector<float> out(8);
  const std::string m = message_of(
      [&] { emu::launch("uninitialized_read", &uninitialized_read, 1, 8, {buf(out), emu::bind_threadgroup(8 * sizeof(float))}); });
  INFO(m);
  CHECK(m.find("read of uninitialized threadgroup memory in kernel 'uninitialized_read', threadgroup 0, thread 6") !=
        std::string::npos);
  CHECK(m.find("element 7 of threadgroup(0) memory") != std::string::npos);
}

TEST_CASE("emulator: a barrier not reached by every thread is reported", "[metal]") {
  std::vector<float> out(64);
  const std::string m = message_of(
      [&] { emu::launch("divergent_barrier", &divergent_barrier, 1, 64, {buf(out), emu::bind_threadgroup(64 * sizeof(float))}); });
  INFO(m);
  CHECK(m.find("kernel 'divergent_barrier', threadgroup 0 (64 threads)") != std::string::npos);
  CHECK(m.find("threadgroup_barrier (barrier 1 of the group) is not reached by every thread") != std::string::npos);
  CHECK(m.find("threads 40, 41") != std::string::npos);
  CHECK(m.find("have returned") != std::string::npos);
}

TEST_CASE("emulator: an out-of-bounds device write is reported", "[metal]") {
  std::vector<float> in(10, 1.0f), out(10);
  const std::string m = message_of([&] { emu::launch("unguarded_copy", &unguarded_copy, 1, 32, {buf(out), buf(in)}); });
  INFO(m);
  CHECK(m.find("out-of-bounds access to device buffer(0) in kernel 'unguarded_copy', threadgroup 0, thread 10") !=
        std::string::npos);
  CHECK(m.find("element 10 of a buffer of 10 elements") != std::string::npos);
  // in bounds it runs
  std::vector<float> out32(32);
  emu::launch("unguarded_copy", &unguarded_copy, 1, 32, {buf(out32), buf(in)});
  CHECK(out32[31] == 2.0f);
}

TEST_CASE("emulator: diverged simdgroup operations and bad bindings are reported", "[metal]") {
  std::vector<float> out(32);
  const std::string m = message_of([&] { emu::launch("diverged_simd", &diverged_simd, 1, 32, {buf(out)}); });
  INFO(m);
  CHECK(m.find("simdgroup lanes diverged in kernel 'diverged_simd'") != std::string::npos);

  std::vector<float> in(64);
  const std::string b = message_of([&] { emu::launch("simd_reduce", &simd_reduce, 1, 64, {buf(out), buf(in)}); });
  CHECK(b.find("takes 3 bound arguments, 2 were bound") != std::string::npos);
  const std::string t = message_of([&] { emu::launch("unguarded_copy", &unguarded_copy, 1, 2048, {buf(out), buf(in)}); });
  CHECK(t.find("2048 threads per threadgroup") != std::string::npos);
}

TEST_CASE("emulator: device memory races between threads are reported, atomics and ordered accesses are not", "[metal]") {
  std::vector<float> out(1, 0.0f);
  const std::string m = message_of([&] { emu::launch("plain_count", &plain_count, 2, 32, {buf(out)}); });
  INFO(m);
  CHECK(m.find("device memory race in kernel 'plain_count', threadgroup 0, thread 1") != std::string::npos);
  CHECK(m.find("element 0 of device buffer(0), which was written by thread_position_in_grid 0") != std::string::npos);

  std::vector<float> total(1, 0.0f);
  std::vector<int> n(2, 0);
  emu::launch("atomic_count", &atomic_count, 3, 64, {buf(total), buf(n)});
  CHECK(total[0] == 192.0f);
  CHECK(n == std::vector<int>{96, 96});

  // within a threadgroup a barrier orders a write and a read; across threadgroups nothing does
  std::vector<float> o(2, 0.0f), seen(4, 0.0f);
  const std::string c = message_of([&] { emu::launch("cross_group_read", &cross_group_read, 2, 32, {buf(o), buf(seen)}); });
  INFO(c);
  CHECK(seen[0] == 1.0f);
  CHECK(c.find("device memory race in kernel 'cross_group_read', threadgroup 1, thread 2") != std::string::npos);
  CHECK(c.find("it reads element 0 of device buffer(0), which was written by thread_position_in_grid 0 (threadgroup 0)") !=
        std::string::npos);
}

TEST_CASE("emulator: simdgroup matrices multiply as 8 x 8 matrices held across the lanes", "[metal]") {
  std::vector<float> in(3 * 64);
  for (int i = 0; i < 64; ++i) {
    in[static_cast<std::size_t>(i)] = static_cast<float>(i % 7 - 3);          // a
    in[static_cast<std::size_t>(64 + i)] = static_cast<float>((i * 5) % 9 - 4);  // b
    in[static_cast<std::size_t>(128 + i)] = static_cast<float>(i);               // c
  }
  std::vector<float> want(64);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) {
      float s = in[static_cast<std::size_t>(128 + r * 8 + c)];
      for (int k = 0; k < 8; ++k) s += in[static_cast<std::size_t>(r * 8 + k)] * in[static_cast<std::size_t>(64 + k * 8 + c)];
      want[static_cast<std::size_t>(r * 8 + c)] = s;
    }
  std::vector<float> out(64, -1.0f);
  emu::launch("matrix_mad", &matrix_mad, 1, 32, {buf(out), buf(in), emu::bind_threadgroup(3 * 64 * sizeof(float))});
  CHECK(out == want);  // small integers: exact

  const std::string p = message_of(
      [&] { emu::launch("matrix_mad", &matrix_mad, 1, 16, {buf(out), buf(in), emu::bind_threadgroup(3 * 64 * sizeof(float))}); });
  INFO(p);
  CHECK(p.find("on a simdgroup of 16 lanes: it needs all 32") != std::string::npos);

  std::vector<float> o(32);
  const std::string d = message_of(
      [&] { emu::launch("matrix_half_load", &matrix_half_load, 1, 32, {buf(o), emu::bind_threadgroup(64 * sizeof(float))}); });
  INFO(d);
  CHECK(d.find("kernel 'matrix_half_load', threadgroup 0 (32 threads) cannot go on: a simdgroup operation is not reached by every "
               "lane") != std::string::npos);
  CHECK(d.find("wait at simdgroup_load") != std::string::npos);
}
