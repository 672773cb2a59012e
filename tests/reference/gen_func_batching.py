#!/usr/bin/env python3
"""Writes func_batching.txt: torch.func's Jacobians and Hessians of small functions, for
tests/test_autograd_func_jacobians.cpp and tests/test_autograd_second_func_batching.cpp
(tenet::func::jacrev / jacfwd / hessian with func::batching against torch.func).

    /work/venv/bin/python tests/reference/gen_func_batching.py [output path]

Functions (float64; the C++ tests write the same ones):
  r2(x, w) = tanh((w @ x)[:, None] * x[None, :]) + sin(w) * sum(x)     x (4), w (3, 4) -> (3, 4)
  s0(x, w) = sum(tanh(w @ x) ** 2) + sum(x ** 3) / 3                   x (4), w (3, 4) -> ()
Case `r2`: jx (3, 4, 4), jw (3, 4, 3, 4) (jacrev, argnums (0, 1)), aux = w @ x.
Case `s0`: gx (4), gw (3, 4) (jacrev, argnums (0, 1)); hxx, hxw, hwx, hww (hessian, argnums (0, 1)).
"""

import torch
from torch.func import hessian, jacrev

from reference_writer import ReferenceFile

torch.manual_seed(1)
D = torch.float64
ref = ReferenceFile()

x = torch.randn(4, dtype=D)
w = torch.randn(3, 4, dtype=D)


def r2(x, w):
    return torch.tanh((w @ x)[:, None] * x[None, :]) + torch.sin(w) * x.sum()


def s0(x, w):
    return (torch.tanh(w @ x) ** 2).sum() + (x ** 3).sum() / 3


jx, jw = jacrev(r2, argnums=(0, 1))(x, w)
ref.case("r2", x=x, w=w, jx=jx, jw=jw, aux=w @ x)
gx, gw = jacrev(s0, argnums=(0, 1))(x, w)
(hxx, hxw), (hwx, hww) = hessian(s0, argnums=(0, 1))(x, w)
ref.case("s0", gx=gx, gw=gw, hxx=hxx, hxw=hxw, hwx=hwx, hww=hww)

ref.write("func_batching.txt")
