#!/usr/bin/env bash
# Installs tenet's build and test dependencies (Debian/Ubuntu). The one place that lists them:
# .ci/run and the README both call this script.
set -euo pipefail

# As root directly, otherwise through sudo; `env` because sudo drops the caller's environment.
as_root=(env DEBIAN_FRONTEND=noninteractive)
if [ "$(id -u)" -ne 0 ]; then
  as_root=(sudo "${as_root[@]}")
fi

"${as_root[@]}" apt-get update && "${as_root[@]}" apt-get install -y --no-install-recommends cmake ninja-build g++ libeigen3-dev libxsimd-dev libboost-dev libfmt-dev catch2 libopenblas-dev
