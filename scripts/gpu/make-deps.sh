#!/usr/bin/env bash
# Copies the header-only dependencies the GPU machines lack into DIR (run on a build machine):
#   xsimd (missing there) and Catch2 v2's single header (they have Catch2 v3 only).
# Then carry DIR to the GPU machine and give it to scripts/gpu/run.sh as TENET_DEPS_DIR.
#
#   scripts/gpu/make-deps.sh /path/to/deps
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
dir=$1
for src in /usr/include/xsimd /usr/include/catch2/catch.hpp; do
  if [[ ! -e $src ]]; then
    echo "$0: $src is missing here (apt-get install libxsimd-dev catch2)" >&2
    exit 1
  fi
done
mkdir -p "$dir/catch2"
rm -rf "$dir/xsimd"
cp -r /usr/include/xsimd "$dir/xsimd"
cp /usr/include/catch2/catch.hpp "$dir/catch2/catch.hpp"
echo "$0: wrote $(du -sh "$dir" | cut -f1) of headers to $dir (xsimd/, catch2/catch.hpp)"
