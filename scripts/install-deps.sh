#!/usr/bin/env bash
# Installs tenet's build and test dependencies (Debian/Ubuntu). The one place that lists them:
# .ci/run and the README both call this script.
set -euo pipefail

# As root directly, otherwise through sudo; `env` because sudo drops the caller's environment.
as_root=(env DEBIAN_FRONTEND=noninteractive)
if [ "$(id -u)" -ne 0 ]; then
  as_root=(sudo "${as_root[@]}")
fi

# libopenmpi-dev and openmpi-bin: MPI for tenet::dist (include/tenet/dist.hpp) and its tests, which
# CTest runs under mpirun with 2 and 4 ranks; without them CMake leaves tenet::dist out.
# clang-14, libclang-rt-14-dev (libFuzzer), libomp-14-dev and nlohmann-json3-dev (the differential
# oracle) serve only the CTest test `fuzz` (tests/fuzz/run.sh): about 45 MB to download, 270 MB installed.
"${as_root[@]}" apt-get update && "${as_root[@]}" apt-get install -y --no-install-recommends cmake ninja-build g++ libeigen3-dev libxsimd-dev libboost-dev libfmt-dev catch2 libopenblas-dev \
  libopenmpi-dev openmpi-bin \
  clang-14 libclang-rt-14-dev libomp-14-dev nlohmann-json3-dev
