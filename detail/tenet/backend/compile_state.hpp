#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// What tenet::compile (include/tenet/compile.hpp) and a backend's compiled path share: the
// options and statistics, and the state compile keeps per shape class for a device backend.
// compile sends a class of device tensors to its backend as
// `run_compiled(backend, state, fn, options, stats, extents, args...)` (CUDA: graphs,
// backend/cuda/graph.hpp); a backend without one gets compile.hpp's fallback, a device_error.
#include <cstdint>
#include <memory>
#include <string>


namespace tenet {

enum class compile_mode { default_, reduce_overhead, max_autotune };

struct compile_options {
  compile_mode mode = compile_mode::default_;
  bool dynamic = false;
  bool fullgraph = false;
  int cache_size_limit = 8;  // shape classes planned separately when dynamic = false
};

/// What a compiled function has done so far.
struct compile_stats {
  std::int64_t calls = 0;
  std::int64_t plans = 0;           // shape classes planned (the first one included)
  std::int64_t guard_failures = 0;  // calls whose extents matched no planned class
  std::int64_t arena_hits = 0;      // intermediates served by a memory plan
  std::int64_t arena_misses = 0;
  // CUDA tensors (backend/cuda/graph.hpp): reduce_overhead / max_autotune capture CUDA graphs
  std::int64_t graph_captures = 0;   // CUDA graphs captured (a re-capture included)
  std::int64_t graph_launches = 0;   // calls served by cudaGraphLaunch
  std::int64_t graph_fallbacks = 0;  // calls run eagerly because their graph could not be captured
};

namespace detail {
/// What compile keeps per shape class for a device backend (CUDA: backend/cuda/graph.hpp).
struct device_class_state {
  virtual ~device_class_state() = default;
  virtual std::string text() const = 0;
};
}  // namespace detail

}  // namespace tenet
