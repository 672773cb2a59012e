#!/usr/bin/env python3
"""Writes optim_half.txt: torch.optim steps on bfloat16 / float16 parameters for tests/test_optim.cpp.

The case format of gen_optim.py (two parameters "p0" [3, 4] and "p1" [5], gradients "g<step>_<i>",
parameters after each step "out<step>_<i>", final state "state_<i>_<name>"), with the parameters,
gradients and state in the 16-bit dtype (torch's single-tensor implementations, foreach=False, on
the CPU).

    python3 tests/reference/gen_optim_half.py [output path]
"""
import torch
import torch.optim as optim

from reference_writer import ReferenceFile

ref = ReferenceFile()
STEPS = 4


def opt_case(name, make, dtype):
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    p0 = torch.randn(3, 4, generator=g).to(dtype)
    p1 = torch.randn(5, generator=g).to(dtype)
    params = [p0.clone().requires_grad_(), p1.clone().requires_grad_()]
    opt = make(params)
    data = dict(p0=p0, p1=p1)
    for s in range(STEPS):
        for i, p in enumerate(params):
            gr = (torch.randn(p.shape, generator=g) * (0.1 if s % 2 else 1.0)).to(dtype)
            p.grad = gr.clone()
            data[f"g{s}_{i}"] = gr
        opt.step()
        for i, p in enumerate(params):
            data[f"out{s}_{i}"] = p.detach().clone()
    for i, p in enumerate(params):
        for k, v in opt.state[p].items():
            if torch.is_tensor(v) and v.dim() > 0:
                data[f"state_{i}_{k}"] = v.clone()
            elif k == "step":
                data[f"state_{i}_step"] = torch.tensor(float(v), dtype=torch.float64)
    ref.case(name, **data)


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
