#!/usr/bin/env python3
"""Writes lr_resume.txt: torch's LR schedulers stopped and resumed, for tests/test_optim_resume.cpp.

Each case runs an optimizer and a scheduler for K steps, takes both state_dicts, builds a fresh
optimizer and a scheduler constructed with other hyperparameters, loads the two state_dicts into
them and runs to N steps. Written: "lr" and "mom" (learning rate and momentum / beta1 after
construction and after each step of the uninterrupted run), "lr_resumed" and "mom_resumed"
(after each step of the resumed run, steps K+1 .. N), and the scheduler's state_dict at step K
as "sd:<key>" (lists flattened as "<key>.<i>"; OneCycleLR's phases name param_group entries,
written here as the values they name, as tenet keeps them).

    python3 tests/reference/gen_lr_resume.py [output path]
"""
import torch
import torch.optim as optim
from torch.optim import lr_scheduler as L

from reference_writer import ReferenceFile

ref = ReferenceFile()
K, N = 5, 12


def momentum(opt):
    g = opt.param_groups[0]
    return g["betas"][0] if "betas" in g else g["momentum"]


def flatten(sd, group):
    out = {}
    for k, v in sd.items():
        if k in ("_is_initial", "_get_lr_called_within_step", "verbose"):
            continue
        if k == "_schedule_phases":
            for i, ph in enumerate(v):
                for f, x in ph.items():
                    out[f"_schedule_phases.{i}.{f}"] = float(x) if f == "end_step" else float(group[x])
            continue
        if k == "_anneal_func_type":
            out[k] = 0.0 if v == "cos" else 1.0  # written as a number; tenet keeps the string
            continue
        if isinstance(v, list):
            for i, x in enumerate(v):
                out[f"{k}.{i}"] = float(x)
            continue
        out[k] = float(v)
    return out


def case(name, make_opt, make_sched, make_other_sched):
    p = [torch.zeros(2, requires_grad=True)]
    opt = make_opt(p)
    sched = make_sched(opt)
    lrs, moms = [opt.param_groups[0]["lr"]], [momentum(opt)]
    for _ in range(N):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(momentum(opt))

    opt = make_opt(p)
    sched = make_sched(opt)
    for _ in range(K):
        opt.step()
        sched.step()
    opt_sd, sched_sd = opt.state_dict(), sched.state_dict()
    flat = flatten(sched_sd, opt.param_groups[0])

    opt2 = make_opt(p)
    sched2 = make_other_sched(opt2)
    opt2.load_state_dict(opt_sd)
    sched2.load_state_dict(sched_sd)
    lrs2, moms2 = [], []
    for _ in range(K, N):
        opt2.step()
        sched2.step()
        lrs2.append(opt2.param_groups[0]["lr"])
        moms2.append(momentum(opt2))
    f64 = dict(dtype=torch.float64)
    tensors = dict(lr=torch.tensor(lrs, **f64), mom=torch.tensor(moms, **f64),
                   lr_resumed=torch.tensor(lrs2, **f64), mom_resumed=torch.tensor(moms2, **f64))
    for k, v in flat.items():
        tensors["sd:" + k] = torch.tensor([v], **f64)
    ref.case(name, **tensors)


sgd = lambda p: optim.SGD(p, lr=0.5, momentum=0.9)  # noqa: E731
adam = lambda p: optim.Adam(p, lr=0.1)  # noqa: E731
case("step_lr", sgd, lambda o: L.StepLR(o, step_size=3, gamma=0.5), lambda o: L.StepLR(o, step_size=7, gamma=0.9))
case("cosine", sgd, lambda o: L.CosineAnnealingLR(o, T_max=7, eta_min=0.01),
     lambda o: L.CosineAnnealingLR(o, T_max=3, eta_min=0.2))
case("linear", sgd, lambda o: L.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=8),
     lambda o: L.LinearLR(o, start_factor=0.5, end_factor=0.9, total_iters=2))
case("one_cycle", sgd, lambda o: L.OneCycleLR(o, max_lr=1.0, total_steps=20),
     lambda o: L.OneCycleLR(o, max_lr=0.3, total_steps=40, anneal_strategy="linear"))
case("one_cycle_adam_linear_3phase", adam,
     lambda o: L.OneCycleLR(o, max_lr=0.3, total_steps=15, pct_start=0.4, anneal_strategy="linear",
                            three_phase=True, div_factor=10.0, final_div_factor=100.0),
     lambda o: L.OneCycleLR(o, max_lr=2.0, total_steps=30))

ref.write("lr_resume.txt")
