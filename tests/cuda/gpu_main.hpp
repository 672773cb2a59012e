// main() of the CUDA test programs: Catch2's session where there is a GPU; elsewhere (CI) a line
// saying why and exit code 77, which CTest reports as skipped (SKIP_RETURN_CODE), never passed.
#pragma once
#include <catch2/catch.hpp>

#include <cstdio>

#include <tenet/cuda.hpp>

namespace tenet::test {

inline int run_or_skip(const char* program, int argc, char** argv) {
  if (!tenet::cuda::is_available()) {
    std::printf("%s: no CUDA device here; skipped (exit code 77)\n", program);
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

}  // namespace tenet::test
