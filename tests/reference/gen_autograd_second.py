#!/usr/bin/env python3
"""Writes autograd_second.txt: the Hessian of a small MLP's loss w.r.t. its weights, for
tests/test_autograd_second.cpp (tenet's double backward against PyTorch's).

    source /tmp/torchenv.sh && python3 tests/reference/gen_autograd_second.py [output path]

Case `mlp`: inputs x, target, weights w1, b1, w2, b2 (float64), loss =
cross_entropy(linear(tanh(linear(x, w1, b1)), w2, b2), target), and `hessian`: the Hessian of
the loss w.r.t. the weights flattened in the order w1, b1, w2, b2 (row-major each), rows and
columns in that order (torch.autograd.functional.hessian).
"""

import torch
import torch.nn.functional as F

from reference_writer import ReferenceFile

torch.manual_seed(0)
ref = ReferenceFile()
D = torch.float64

x = torch.randn(5, 3, dtype=D)
target = torch.tensor([0, 2, 1, 1, 0])
w1, b1, w2, b2 = (torch.randn(*s, dtype=D) for s in [(4, 3), (4,), (3, 4), (3,)])
shapes = [w1.shape, b1.shape, w2.shape, b2.shape]
sizes = [w1.numel(), b1.numel(), w2.numel(), b2.numel()]


def loss_of(flat):
    parts = torch.split(flat, sizes)
    a, b, c, d = (p.reshape(s) for p, s in zip(parts, shapes))
    return F.cross_entropy(F.linear(torch.tanh(F.linear(x, a, b)), c, d), target)


flat = torch.cat([w1.reshape(-1), b1, w2.reshape(-1), b2])
loss = loss_of(flat)
hessian = torch.autograd.functional.hessian(loss_of, flat)
ref.case("mlp", x=x, target=target, w1=w1, b1=b1, w2=w2, b2=b2, loss=loss, hessian=hessian)
ref.write("autograd_second.txt")
