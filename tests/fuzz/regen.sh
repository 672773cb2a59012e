#!/usr/bin/env bash
# Writes the fuzz batches CI runs (PyTorch from pip: torch 2.15 CPU wrote the committed files):
#   tests/test_fuzz.cpp            + tests/reference/fuzz.txt        forward programs (tenet_tests)
#   tests/test_autograd_fuzz.cpp   + tests/reference/fuzz_grad.txt   gradients (tenet_autograd_tests)
# Each is a fixed-seed batch, then the findings of longer runs (tests/fuzz/run.py) kept as
# regression cases: `seed:case,case` in FOUND / FOUND_GRAD below.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
T=..
FWD_SEED=1 FWD_COUNT=48
GRAD_SEED=1 GRAD_COUNT=24
FOUND=(4:1,32)  # softmax over an empty dim; hardtanh of int64
FOUND_GRAD=(2:1,4,10)  # gradients through stack and cat
# scaled_dot_product_attention programs (--attention): a small batch each, for their compile cost
ATT_SEED=1 ATT_COUNT=8 ATT_GRAD_COUNT=5
# conv2d / conv_transpose2d / pooling programs (--conv), likewise
CONV_SEED=1 CONV_COUNT=10 CONV_GRAD_COUNT=5

python3 gen_fuzz.py --seed $FWD_SEED --count $FWD_COUNT --name fuzz --cpp $T/test_fuzz.cpp --ref $T/reference/fuzz.txt
for f in "${FOUND[@]+"${FOUND[@]}"}"; do
  python3 gen_fuzz.py --seed "${f%%:*}" --count 60 --name "found${f%%:*}" --only "${f#*:}" --append \
    --cpp $T/test_fuzz.cpp --ref $T/reference/fuzz.txt
done
python3 gen_fuzz.py --attention --seed $ATT_SEED --count $ATT_COUNT --name fuzza --append \
  --cpp $T/test_fuzz.cpp --ref $T/reference/fuzz.txt
python3 gen_fuzz.py --conv --seed $CONV_SEED --count $CONV_COUNT --name fuzzc --append \
  --cpp $T/test_fuzz.cpp --ref $T/reference/fuzz.txt
python3 gen_fuzz.py --grad --seed $GRAD_SEED --count $GRAD_COUNT --name fuzzg --cpp $T/test_autograd_fuzz.cpp \
  --ref $T/reference/fuzz_grad.txt
for f in "${FOUND_GRAD[@]+"${FOUND_GRAD[@]}"}"; do
  python3 gen_fuzz.py --grad --seed "${f%%:*}" --count 60 --name "foundg${f%%:*}" --only "${f#*:}" --append \
    --cpp $T/test_autograd_fuzz.cpp --ref $T/reference/fuzz_grad.txt
done
python3 gen_fuzz.py --attention --grad --seed $ATT_SEED --count $ATT_GRAD_COUNT --name fuzzag --append \
  --cpp $T/test_autograd_fuzz.cpp --ref $T/reference/fuzz_grad.txt
python3 gen_fuzz.py --conv --grad --seed $CONV_SEED --count $CONV_GRAD_COUNT --name fuzzcg --append \
  --cpp $T/test_autograd_fuzz.cpp --ref $T/reference/fuzz_grad.txt
