#pragma once
// The one configuration header: host/device annotation and inlining macros (as CuTe's CUTE_HOST_DEVICE).
// Every detail header includes it after detail_check.hpp.

#if defined(__CUDACC__) || defined(__HIPCC__)
#define TENET_HOST_DEVICE __host__ __device__
#else
#define TENET_HOST_DEVICE
#endif

#if defined(_MSC_VER)
#define TENET_INLINE __forceinline
#else
#define TENET_INLINE inline __attribute__((always_inline))
#endif
// the same for a lambda (after its parameter list): a kernel's per-segment body that keeps SIMD
// accumulators of its caller must be inlined into the loop that calls it, or they live in memory
#if defined(_MSC_VER) || defined(__CUDACC__)
#define TENET_INLINE_LAMBDA
#else
#define TENET_INLINE_LAMBDA __attribute__((always_inline))
#endif

#define TENET_STRINGIFY_(x) #x
#define TENET_STRINGIFY(x) TENET_STRINGIFY_(x)

// TENET_CPU_KERNELS=0 (a CUDA translation unit only; every unit of the program alike, since it
// changes the definitions of inline templates): the unit compiles no CPU kernels for expressions
// except copies (a tree of casts over tensor and scalar leaves: to(), contiguous(), clone(),
// copy_, fill_), and evaluating any other expression on the CPU throws device_error. For programs
// that evaluate on the GPU only: the CPU kernels were about a third of the compile time of the CUDA
// OpInfo test units (tests/CMakeLists.txt), which check the GPU against reference files.
#ifndef TENET_CPU_KERNELS
#define TENET_CPU_KERNELS 1
#endif
#if !TENET_CPU_KERNELS && !defined(__CUDACC__)
#error "tenet: TENET_CPU_KERNELS=0 leaves a translation unit no kernels for the CPU; it is for units nvcc compiles (the CUDA backend)"
#endif
