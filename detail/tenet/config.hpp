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
