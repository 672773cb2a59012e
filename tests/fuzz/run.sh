#!/usr/bin/env bash
# Builds tenet's libFuzzer targets (tests/fuzz/fuzz_*.cpp) with clang and runs each for a bounded
# time on the committed seed corpus (tests/fuzz/corpus/<target>), under AddressSanitizer and
# UndefinedBehaviorSanitizer. The CTest test `fuzz` calls it (tests/CMakeLists.txt); docs/security.md
# says what it holds and how to run it longer.
#
#   tests/fuzz/run.sh <source dir> <work dir> <seconds per target> [target ...]
#
# Exits 77 (CTest: skipped) when no clang with libFuzzer is found: TENET_FUZZ_CXX names the compiler,
# else clang++-14, then clang++ (Debian: apt-get install clang-14 libclang-rt-14-dev libomp-14-dev).
# Found inputs go to <work dir>/found/<target> (a scratch copy; the committed corpus is only read);
# a failing input is written to <work dir>/crash-*, and the end of the target's log is printed.
set -euo pipefail

src=${1:?source dir}
work=${2:?work dir}
seconds=${3:?seconds per target}
shift 3
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(json safetensors)

cxx=${TENET_FUZZ_CXX:-}
if [ -z "$cxx" ]; then
  for c in clang++-14 clang++; do
    if command -v "$c" >/dev/null 2>&1; then cxx=$c; break; fi
  done
fi
mkdir -p "$work"
probe="$work/probe.cpp"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe"
if [ -z "$cxx" ] || ! "$cxx" -fsanitize=fuzzer,address,undefined -fopenmp "$probe" -o "$work/probe" >/dev/null 2>&1; then
  echo "fuzz: skipped, no clang with libFuzzer (set TENET_FUZZ_CXX, or apt-get install clang-14 libclang-rt-14-dev libomp-14-dev)"
  exit 77
fi

flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -fopenmp -DTENET_AUTOGRAD=0 -I"$src/include" -I"$src/detail")  # -fopenmp: clang's libomp (libomp-14-dev)
[ -d /usr/include/eigen3 ] && flags+=(-I/usr/include/eigen3)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export OMP_NUM_THREADS=1  # one input at a time; the tensors of a fuzzed file are small

status=0
for t in "${targets[@]}"; do
  exe="$work/fuzz_$t"
  # rebuilt when a header or the target is newer than the binary (or the compiler changed)
  if [ ! -x "$exe" ] || [ "$(cat "$exe.cxx" 2>/dev/null)" != "$cxx" ] ||
     [ -n "$(find "$src/include" "$src/detail" "$src/tests/fuzz/fuzz_$t.cpp" -newer "$exe" -print -quit)" ]; then
    echo "fuzz: building fuzz_$t with $cxx"
    start=$SECONDS
    "$cxx" "${flags[@]}" "$src/tests/fuzz/fuzz_$t.cpp" -o "$exe"
    echo "$cxx" >"$exe.cxx"
    echo "fuzz: built fuzz_$t in $((SECONDS - start)) s"
  fi
  mkdir -p "$work/found/$t"
  echo "fuzz: running fuzz_$t for $seconds s on tests/fuzz/corpus/$t"
  if ! "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
       -artifact_prefix="$work/" "$work/found/$t" "$src/tests/fuzz/corpus/$t" >"$work/fuzz_$t.log" 2>&1; then
    status=1
    echo "fuzz: fuzz_$t FAILED; the end of its log ($work/fuzz_$t.log):"
    tail -n 60 "$work/fuzz_$t.log"
  else
    grep -E '^Done|stat::number_of_executed_units' "$work/fuzz_$t.log" || true
  fi
done
exit $status
