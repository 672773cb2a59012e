#!/usr/bin/env python3
"""Writes optim_half.txt: torch.optim steps on bfloat16 / float16 parameters for tests/test_optim.cpp.

The cases of gen_optim.py (optim_case.py) with the parameters, gradients and state in the 16-bit
dtype (torch's single-tensor implementations, foreach=False, on the CPU).

    python3 tests/reference/gen_optim_half.py [output path]
"""
import torch
import torch.optim as optim

import optim_case
from reference_writer import ReferenceFile

ref = ReferenceFile()
STEPS = 4


def opt_case(name, make, dtype):
    optim_case.opt_case(ref, name, make, dtype, STEPS)


F = dict(foreach=False)
for dt, tag in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
    opt_case(f"sgd_momentum_wd_{tag}", lambda p: optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01, **F), dt)
    opt_case(f"sgd_nesterov_{tag}", lambda p: optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True, **F), dt)
    opt_case(f"adam_{tag}", lambda p: optim.Adam(p, lr=0.02, **F), dt)
    opt_case(f"adamw_amsgrad_{tag}", lambda p: optim.AdamW(p, lr=0.03, betas=(0.85, 0.95), weight_decay=0.1,
                                                           amsgrad=True, **F), dt)
    opt_case(f"rmsprop_centered_momentum_{tag}", lambda p: optim.RMSprop(p, lr=0.01, alpha=0.9, eps=1e-6, momentum=0.5,
                                                                         centered=True, **F), dt)
    opt_case(f"adagrad_{tag}", lambda p: optim.Adagrad(p, lr=0.1, lr_decay=0.05, weight_decay=0.1, **F), dt)

ref.write("optim_half.txt")
