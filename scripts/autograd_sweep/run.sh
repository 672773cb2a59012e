#!/usr/bin/env bash
# The autograd sweep (issue 26): every op of docs/ops.md applied to tracked float64 tensors (also
# lazy, non-contiguous and mixed operands where the op takes them). For each it reports whether the
# op records a gradient equal to central finite differences ("ok"), returns integers/bools (no
# gradient, as torch), refuses with an error, or records nothing / a wrong gradient ("***").
#
#   scripts/autograd_sweep/run.sh [BUILD_DIR] [PARTS]     e.g. run.sh /tmp/sweep 35
#
# Compiles the five parts one after another (TENET_AUTOGRAD=1, about 6 minutes on 2 cores) and runs
# them: 1 pointwise and activations, 2 reductions/linear algebra/losses, 3 views, cat/stack, scans,
# sorting, shape ops, 4 indexing, 5 nn.functional part 2, convolution, pooling, padding.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-/tmp/tenet_autograd_sweep}"
parts="${2:-12345}"
mkdir -p "$out"
flags=(-std=c++20 -O1 -march=native -fopenmp -I"$root/include" -I"$root/detail" -I/usr/include/eigen3 -w -DTENET_AUTOGRAD=1)
for p in main p1 p2 p3 p4 p5; do
  g++ "${flags[@]}" -c "$here/$p.cpp" -o "$out/$p.o"
done
g++ -fopenmp "$out"/main.o "$out"/p1.o "$out"/p2.o "$out"/p3.o "$out"/p4.o "$out"/p5.o -o "$out/sweep" -lopenblas -lfmt
"$out/sweep" "$parts"
