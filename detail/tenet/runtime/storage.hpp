#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Storage: one allocation on one device, shared by every view of it.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include <tenet/device.hpp>

namespace tenet::detail {

inline constexpr std::size_t storage_alignment = 64;  // one cache line, a full AVX-512 vector

struct storage {
  void* data = nullptr;
  std::size_t bytes = 0;
  device dev = cpu;

  storage(std::size_t n, device d) : bytes(n), dev(d) {
    require_backend(d, "allocating a tensor");
    const std::size_t rounded = (n + storage_alignment - 1) / storage_alignment * storage_alignment;
    data = std::aligned_alloc(storage_alignment, rounded == 0 ? storage_alignment : rounded);
    if (!data) throw std::bad_alloc();
  }
  ~storage() { std::free(data); }
  storage(const storage&) = delete;
  storage& operator=(const storage&) = delete;
};

inline std::shared_ptr<storage> allocate(std::size_t bytes, device d) { return std::make_shared<storage>(bytes, d); }

}  // namespace tenet::detail
