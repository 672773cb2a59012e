#!/usr/bin/env bash
# Builds and runs tenet's CUDA tests and benchmarks on a GPU machine (H100/H200, sm_90).
#
#   TENET_DEPS_DIR=/abs/path/to/deps scripts/gpu/run.sh [--no-bench] [--no-torch] [--build DIR]
#
# TENET_DEPS_DIR: a folder made by scripts/gpu/make-deps.sh (xsimd/ and Catch2 v2's
# catch2/catch.hpp), needed where the system lacks them. Configures with TENET_CUDA=ON, builds
# the CUDA test programs (forward; autograd, also second order; the OpInfo table, also in bf16/fp16) and the bench/cuda_*.cu programs with ninja -j16,
# runs the tests, then the benchmarks and their PyTorch twin (bench/cuda_torch_twin.py, default python3), printing
# JSON lines. Exit status: the tests' (0 when they pass).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$here/build/gpu
bench=1
torch=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --no-bench) bench=0 ;;
    --no-torch) torch=0 ;;
    --build) build=$2; shift ;;
    *) echo "usage: $0 [--no-bench] [--no-torch] [--build DIR]" >&2; exit 2 ;;
  esac
  shift
done

deps=${TENET_DEPS_DIR:-}
if [[ -n $deps ]]; then
  deps=$(cd "$deps" && pwd) || { echo "$0: TENET_DEPS_DIR=$TENET_DEPS_DIR is not a folder" >&2; exit 2; }
  [[ -f $deps/catch2/catch.hpp ]] || echo "$0: warning: $deps/catch2/catch.hpp missing (Catch2 v2)" >&2
  [[ -d $deps/xsimd ]] || echo "$0: warning: $deps/xsimd missing" >&2
fi
nvcc=${CUDACXX:-}
[[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
[[ -z $nvcc ]] && nvcc=$(command -v nvcc || true)
[[ -n $nvcc ]] || { echo "$0: no nvcc (set CUDACXX)" >&2; exit 2; }

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "(nvidia-smi unavailable)"
"$nvcc" --version | tail -n 2

echo "== configure ($build)"
cmake -S "$here" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DTENET_CUDA=ON \
  -DTENET_CUDA_TESTS=ON \
  -DTENET_BUILD_BENCH=ON \
  -DTENET_BUILD_EXAMPLES=OFF \
  ${deps:+-DTENET_DEPS_DIR="$deps"} || exit 1

targets=(tenet_cuda_tests tenet_cuda_autograd_tests tenet_cuda_autograd2_tests tenet_cuda_opinfo_tests tenet_cuda_opinfo_half_tests)
if [[ $bench -eq 1 ]]; then
  for f in "$here"/bench/cuda_*.cu; do targets+=("bench_$(basename "${f%.cu}")"); done
fi
echo "== build: ${targets[*]}"
start=$(date +%s)
ninja -C "$build" -j16 "${targets[@]}" || exit 1
echo "(built in $(( $(date +%s) - start )) s)"

echo "== tests"
"$build/tests/tenet_cuda_tests" --durations yes
status=$?
echo "(tests exit status $status)"
echo "== autograd tests"
"$build/tests/tenet_cuda_autograd_tests" --durations yes
ag_status=$?
echo "(autograd tests exit status $ag_status)"
[[ $status -eq 0 ]] && status=$ag_status
echo "== second-order autograd tests"
"$build/tests/tenet_cuda_autograd2_tests"
ag2_status=$?
echo "(second-order autograd tests exit status $ag2_status)"
[[ $status -eq 0 ]] && status=$ag2_status
echo "== OpInfo table on the GPU"
"$build/tests/tenet_cuda_opinfo_tests"
op_status=$?
echo "(OpInfo tests exit status $op_status)"
[[ $status -eq 0 ]] && status=$op_status
echo "== OpInfo table's bfloat16 / float16 rows on the GPU"
"$build/tests/tenet_cuda_opinfo_half_tests"
oh_status=$?
echo "(OpInfo half tests exit status $oh_status)"
[[ $status -eq 0 ]] && status=$oh_status

if [[ $bench -eq 1 ]]; then
  echo "== benchmarks (tenet)"
  for f in "$here"/bench/cuda_*.cu; do
    prog=$build/bench/$(basename "${f%.cu}")
    echo "-- $prog"
    "$prog" || echo "($prog exit status $?)"
  done
  if [[ $torch -eq 1 ]]; then
    echo "== benchmarks (PyTorch twin)"
    python3 "$here/bench/cuda_torch_twin.py" || echo "(twin exit status $?)"
  fi
fi
exit $status
