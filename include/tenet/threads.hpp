#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// The CPU backend's threads (OpenMP): how many, and starting them before the first call.
//
// A program's first parallel region starts the OpenMP thread pool: about 10 µs on an idle machine,
// 8-16 ms measured on a busy 2-core VM where the new threads wait for a time slice
// (bench/first_call.cpp). warm_up() pays it at a moment the program chooses (at start-up, before
// the first request), as torch users run a first batch. The rest of a process's first call of a
// model (first use of its memory blocks and of its kernels' code, about 0.3 ms for the digits CNN
// of bench/first_call.cpp) is paid by running the model once.
#include <omp.h>

#include <string>

#include <tenet/error.hpp>

namespace tenet {

/// The number of threads the CPU kernels use for work large enough to share (torch.get_num_threads).
inline int get_num_threads() { return omp_get_max_threads(); }

/// Sets that number for kernels launched from the calling thread (torch.set_num_threads; OpenMP's
/// nthreads is per calling thread). value_error for n < 1.
inline void set_num_threads(int n) {
  if (n < 1) throw value_error("tenet: set_num_threads: the number of threads must be at least 1, got " + std::to_string(n));
  omp_set_num_threads(n);
}

/// Starts the CPU thread pool now: every thread runs once, so that the first model call does not
/// pay for their creation. Returns the number of threads that ran. Cheap when they already run.
inline int warm_up() {
  int ran = 0;
#pragma omp parallel reduction(+ : ran)
  ran += 1;
  return ran;
}

}  // namespace tenet
