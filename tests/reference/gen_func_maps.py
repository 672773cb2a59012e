#!/usr/bin/env python3
"""Writes func_maps.txt: torch.func's transforms over a dict of tensors and hessian over several
argnums, for tests/test_autograd_func_maps.cpp and tests/test_autograd_second_func.cpp.

    /work/venv/bin/python tests/reference/gen_func_maps.py [output path]

Functions (float64; the C++ tests write the same ones), p = {"w": (3, 4), "b": (3)}, x (4):
  g(p)    = tanh(w @ x + b) * (w @ x)                          -> (3)
  m(p)    = stack([tanh(w @ x + b), (w @ x) ** 2])             -> (2, 3)
  f(x, w) = sum(tanh(w @ x) ** 2)                              scalar
  v(x, w) = tanh(w @ x) * x[:3]                                -> (3)
Case `g`: jacrev(g)(p) as jac_w (3, 3, 4), jac_b (3, 3); ct (3) and vjp_w, vjp_b; tangents t_w, t_b
and jvp (3). Case `m`: jacrev(m)(p) as jac_w (2, 3, 3, 4), jac_b (2, 3, 3). Case `mixed`:
jacrev(lambda p, x: g with x as an argument, argnums=(0, 1))(p, x): jac_w, jac_b, jac_x (3, 4).
Case `hess_f`: hessian(f, argnums=(0, 1))(x, w): h00 (4, 4), h01 (4, 3, 4), h10 (3, 4, 4), h11
(3, 4, 3, 4). Case `hess_v`: the same for v: h00 (3, 4, 4), h01 (3, 4, 3, 4), h10 (3, 3, 4, 4),
h11 (3, 3, 4, 3, 4).
"""

import torch
from torch.func import hessian, jacfwd, jacrev, jvp, vjp

from reference_writer import ReferenceFile

torch.manual_seed(7)
D = torch.float64
ref = ReferenceFile()

x = torch.randn(4, dtype=D)
p = {"w": torch.randn(3, 4, dtype=D), "b": torch.randn(3, dtype=D)}


def g_of(p, x):
    return torch.tanh(p["w"] @ x + p["b"]) * (p["w"] @ x)


def g(p):
    return g_of(p, x)


def m(p):
    return torch.stack([torch.tanh(p["w"] @ x + p["b"]), (p["w"] @ x) ** 2])


jg = jacrev(g)(p)
jg_fwd = jacfwd(g)(p)
for k in p:
    torch.testing.assert_close(jg[k], jg_fwd[k])
ct = torch.randn(3, dtype=D)
_, vjp_fn = vjp(g, p)
(vp,) = vjp_fn(ct)
tp = {"w": torch.randn(3, 4, dtype=D), "b": torch.randn(3, dtype=D)}
_, jt = jvp(g, (p,), (tp,))
ref.case("g", x=x, w=p["w"], b=p["b"], jac_w=jg["w"], jac_b=jg["b"], ct=ct, vjp_w=vp["w"], vjp_b=vp["b"],
         t_w=tp["w"], t_b=tp["b"], jvp=jt)

jm = jacrev(m)(p)
ref.case("m", jac_w=jm["w"], jac_b=jm["b"])

jmp, jx = jacrev(g_of, argnums=(0, 1))(p, x)
ref.case("mixed", jac_w=jmp["w"], jac_b=jmp["b"], jac_x=jx)


def f(x, w):
    return (torch.tanh(w @ x) ** 2).sum()


def v(x, w):
    return torch.tanh(w @ x) * x[:3]


for name, fn in (("hess_f", f), ("hess_v", v)):
    (h00, h01), (h10, h11) = hessian(fn, argnums=(0, 1))(x, p["w"])
    ref.case(name, h00=h00, h01=h01, h10=h10, h11=h11)

ref.write("func_maps.txt")
