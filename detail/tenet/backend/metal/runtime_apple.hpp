#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The Metal host runtime on metal-cpp (Apple's header-only C++ wrapper of Metal): the default
// device and a command queue, each generated kernel compiled from its MSL source at first use and
// its pipeline cached by name, and a synchronous dispatch of one kernel over host memory.
//
// NOT YET COMPILED OR RUN: this header builds only on Apple platforms with metal-cpp, and no such
// machine was available when it was written (docs/metal.md). It is the runtime that
// tests/metal/test_metal_kernels.cpp uses when built with TENET_METAL_ON_DEVICE (the
// tenet_metal_device_tests program, configured only on Apple with TENET_METAL=ON), so the same
// checks that pass in the emulator run on the GPU there.
//
// Scope: a test harness's runtime, not yet the `metal_gpu` backend's. Buffers are copied into
// shared-storage MTLBuffers per dispatch and the output copied back; there is no caching
// allocator, no `tenet::metal(0)` device and no asynchronous execution yet.
//
// One translation unit of a program defines NS_PRIVATE_IMPLEMENTATION and
// MTL_PRIVATE_IMPLEMENTATION before including this header (metal-cpp's rule).
#if !defined(__APPLE__)
#error "tenet: backend/metal/runtime_apple.hpp is the Metal host runtime and builds only on Apple platforms"
#endif

#include <Foundation/Foundation.hpp>
#include <Metal/Metal.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <tenet/backend/metal/msl_common.hpp>
#include <tenet/error.hpp>

namespace tenet::detail::metal {

class runtime {
 public:
  /// One entry of a kernel's argument table, in the kernel's parameter order: a buffer (host
  /// memory and its extent; `written`: copied back after the kernel) or threadgroup memory (its
  /// size). Buffers take [[buffer(0)]], [[buffer(1)]] ... and threadgroup memory [[threadgroup(0)]]
  /// ... in the order they appear.
  struct argument {
    const void* data = nullptr;
    std::size_t bytes = 0;
    bool threadgroup = false;
    bool written = false;
  };

  /// The runtime of the system's default Metal device; device_error where there is none.
  static runtime& get() {
    static runtime r;
    return r;
  }

  /// Runs kernel k over `groups` threadgroups of `threads` threads and waits for it.
  void dispatch(const kernel_source& k, std::uint32_t groups, std::uint32_t threads, const std::vector<argument>& args) {
    NS::AutoreleasePool* pool = NS::AutoreleasePool::alloc()->init();
    std::vector<MTL::Buffer*> buffers;
    try {
      MTL::ComputePipelineState* pso = pipeline(k);
      if (threads == 0 || threads > pso->maxTotalThreadsPerThreadgroup())
        throw device_error("tenet: Metal kernel " + k.name + " dispatched with " + std::to_string(threads) +
                           " threads per threadgroup; its pipeline allows 1 to " +
                           std::to_string(pso->maxTotalThreadsPerThreadgroup()));
      MTL::CommandBuffer* cb = queue_->commandBuffer();
      MTL::ComputeCommandEncoder* enc = cb->computeCommandEncoder();
      enc->setComputePipelineState(pso);
      NS::UInteger buffer_index = 0, threadgroup_index = 0;
      for (const argument& a : args) {
        if (a.threadgroup) {
          enc->setThreadgroupMemoryLength((a.bytes + 15) / 16 * 16, threadgroup_index++);  // a multiple of 16 bytes
          continue;
        }
        // a buffer cannot be empty: an empty argument gets 16 unused bytes
        MTL::Buffer* b = a.bytes ? device_->newBuffer(a.data, a.bytes, MTL::ResourceStorageModeShared)
                                 : device_->newBuffer(16, MTL::ResourceStorageModeShared);
        if (!b) throw device_error("tenet: Metal could not allocate a buffer of " + std::to_string(a.bytes) + " bytes");
        buffers.push_back(b);
        enc->setBuffer(b, 0, buffer_index++);
      }
      enc->dispatchThreadgroups(MTL::Size(groups, 1, 1), MTL::Size(threads, 1, 1));
      enc->endEncoding();
      cb->commit();
      cb->waitUntilCompleted();
      if (cb->status() == MTL::CommandBufferStatusError)
        throw device_error("tenet: Metal kernel " + k.name + " failed: " + describe(cb->error()));
      std::size_t bi = 0;
      for (const argument& a : args) {
        if (a.threadgroup) continue;
        MTL::Buffer* b = buffers[bi++];
        if (a.written && a.bytes) std::memcpy(const_cast<void*>(a.data), b->contents(), a.bytes);
      }
    } catch (...) {
      for (MTL::Buffer* b : buffers) b->release();
      pool->release();
      throw;
    }
    for (MTL::Buffer* b : buffers) b->release();
    pool->release();
  }

  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

 private:
  runtime() {
    device_ = MTL::CreateSystemDefaultDevice();
    if (!device_) throw device_error("tenet: no Metal device on this machine (MTL::CreateSystemDefaultDevice returned none)");
    queue_ = device_->newCommandQueue();
    if (!queue_) throw device_error("tenet: could not create a Metal command queue");
  }
  ~runtime() {
    for (auto& [name, p] : pipelines_) p->release();
    if (queue_) queue_->release();
    if (device_) device_->release();
  }

  static std::string describe(NS::Error* e) {
    if (!e) return "(no error description)";
    NS::String* s = e->localizedDescription();
    return s ? s->utf8String() : "(no error description)";
  }

  /// k's pipeline: its source compiled (MSL 3.1 for bfloat, IEEE math) at first use, then cached.
  MTL::ComputePipelineState* pipeline(const kernel_source& k) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = pipelines_.find(k.name); it != pipelines_.end()) return it->second;
    NS::Error* error = nullptr;
    MTL::CompileOptions* options = MTL::CompileOptions::alloc()->init();
    options->setLanguageVersion(MTL::LanguageVersion3_1);
    options->setFastMathEnabled(false);
    MTL::Library* library = device_->newLibrary(NS::String::string(k.source.c_str(), NS::UTF8StringEncoding), options, &error);
    options->release();
    if (!library)
      throw device_error("tenet: the Metal compiler rejected the generated kernel " + k.name + " (" + k.description + "): " +
                         describe(error));
    MTL::Function* fn = library->newFunction(NS::String::string(k.name.c_str(), NS::UTF8StringEncoding));
    library->release();
    if (!fn) throw device_error("tenet: the generated library has no function " + k.name);
    MTL::ComputePipelineState* pso = device_->newComputePipelineState(fn, &error);
    fn->release();
    if (!pso) throw device_error("tenet: no pipeline for the Metal kernel " + k.name + ": " + describe(error));
    pipelines_.emplace(k.name, pso);
    return pso;
  }

  MTL::Device* device_ = nullptr;
  MTL::CommandQueue* queue_ = nullptr;
  std::mutex mutex_;
  std::unordered_map<std::string, MTL::ComputePipelineState*> pipelines_;
};

}  // namespace tenet::detail::metal
