#!/usr/bin/env python3
"""Writes optim.txt: torch.optim results for tests/test_optim.cpp.

Optimizer cases: two parameters ("p0" [3, 4], "p1" [5]) and a fixed sequence of gradients
("g<step>_<i>"), the parameters after each step ("out<step>_<i>") and the final state buffers
("state_<i>_<name>"). The C++ test builds the same optimizer from the case name (a table there).
Scheduler cases: "lr" holds the learning rate after construction and after each step ("mom" the
momentum for OneCycleLR). clip cases: gradients before/after clip_grad_norm_ and the total norm.

    python3 tests/reference/gen_optim.py [output path]
"""
import math

import torch
import torch.nn as nn
import torch.optim as optim

import optim_case
from reference_writer import ReferenceFile

ref = ReferenceFile()
STEPS = 6


def opt_case(name, make, dtype=torch.float64):
    optim_case.opt_case(ref, name, make, dtype, STEPS)


F = dict(foreach=False)
opt_case("sgd_plain", lambda p: optim.SGD(p, lr=0.1, **F))
opt_case("sgd_momentum", lambda p: optim.SGD(p, lr=0.05, momentum=0.9, **F))
opt_case("sgd_dampening_wd", lambda p: optim.SGD(p, lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01, **F))
opt_case("sgd_nesterov_maximize", lambda p: optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, maximize=True, **F))
opt_case("adam", lambda p: optim.Adam(p, lr=0.01, **F))
opt_case("adam_wd_amsgrad", lambda p: optim.Adam(p, lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1,
                                                 amsgrad=True, **F))
opt_case("adam_maximize", lambda p: optim.Adam(p, lr=0.01, maximize=True, **F))
opt_case("adamw", lambda p: optim.AdamW(p, lr=0.01, **F))
opt_case("adamw_amsgrad", lambda p: optim.AdamW(p, lr=0.03, betas=(0.85, 0.95), weight_decay=0.2, amsgrad=True, **F))
opt_case("adamw_f32", lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.05, **F), dtype=torch.float32)
opt_case("rmsprop", lambda p: optim.RMSprop(p, lr=0.01, **F))
opt_case("rmsprop_centered_momentum_wd", lambda p: optim.RMSprop(p, lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.05,
                                                                 momentum=0.7, centered=True, **F))
opt_case("rmsprop_maximize", lambda p: optim.RMSprop(p, lr=0.01, momentum=0.5, maximize=True, **F))
opt_case("adagrad", lambda p: optim.Adagrad(p, lr=0.1, **F))
opt_case("adagrad_all", lambda p: optim.Adagrad(p, lr=0.1, lr_decay=0.05, weight_decay=0.1,
                                                initial_accumulator_value=0.2, eps=1e-8, maximize=True, **F))
opt_case("sgd_f32", lambda p: optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01, **F), dtype=torch.float32)


def sched_case(name, make_opt, make_sched, steps):
    p = [torch.zeros(2, requires_grad=True)]
    opt = make_opt(p)
    sched = make_sched(opt)
    lrs = [opt.param_groups[0]["lr"]]
    key = "betas" if "betas" in opt.defaults else "momentum"
    m = lambda: opt.param_groups[0][key][0] if key == "betas" else opt.param_groups[0][key]  # noqa: E731
    moms = [m()]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(m())
    ref.case(name, lr=torch.tensor(lrs, dtype=torch.float64), mom=torch.tensor(moms, dtype=torch.float64))


sgd = lambda p: optim.SGD(p, lr=0.5, momentum=0.9)  # noqa: E731
sched_case("step_lr", sgd, lambda o: optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5), 10)
sched_case("cosine", sgd, lambda o: optim.lr_scheduler.CosineAnnealingLR(o, T_max=5, eta_min=0.01), 17)
sched_case("linear_warmup", sgd, lambda o: optim.lr_scheduler.LinearLR(o, start_factor=0.1, total_iters=4), 8)
sched_case("linear_decay", sgd, lambda o: optim.lr_scheduler.LinearLR(o, start_factor=1.0, end_factor=0.25,
                                                                      total_iters=6), 9)
sched_case("one_cycle", sgd, lambda o: optim.lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=20), 19)
sched_case("one_cycle_adam_linear_3phase",
           lambda p: optim.Adam(p, lr=0.1),
           lambda o: optim.lr_scheduler.OneCycleLR(o, max_lr=0.3, total_steps=15, pct_start=0.4,
                                                   anneal_strategy="linear", three_phase=True,
                                                   div_factor=10.0, final_div_factor=100.0), 15)

for nm, norm_type, max_norm in (("clip_l2", 2.0, 1.0), ("clip_l1", 1.0, 2.5), ("clip_inf", math.inf, 0.5),
                                ("clip_large", 2.0, 100.0)):
    g = torch.Generator().manual_seed(7)
    ps = [torch.zeros(3, 4, dtype=torch.float64, requires_grad=True), torch.zeros(5, dtype=torch.float64, requires_grad=True)]
    before = []
    for p in ps:
        p.grad = torch.randn(p.shape, generator=g, dtype=torch.float64)
        before.append(p.grad.clone())
    total = nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type, foreach=False)
    ref.case(nm, g0=before[0], g1=before[1], after0=ps[0].grad, after1=ps[1].grad,
             total=total.to(torch.float64).reshape(1))

# a training loop: an MLP, cross_entropy, loss.backward(), AdamW steps (autograd + module + optimizer)
torch.manual_seed(3)
mlp = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
init = {f"p:{k}": v.detach().clone() for k, v in mlp.state_dict().items()}
x = torch.randn(8, 4)
y = torch.tensor([0, 2, 1, 1, 0, 2, 2, 1])
opt = optim.AdamW(mlp.parameters(), lr=0.05, foreach=False)
train = {}
for s in range(4):
    loss = nn.functional.cross_entropy(mlp(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    train[f"loss{s}"] = loss.detach().reshape(1)
    train.update({f"after{s}:{k}": v.detach().clone() for k, v in mlp.state_dict().items()})
ref.case("train_mlp_adamw", **init, x=x, y=y, **train)

ref.write("optim.txt")
