#!/usr/bin/env python3
"""Writes func.txt: torch.func's transforms of small functions, for tests/test_autograd_second_func.cpp
(tenet::func against torch.func).

    /work/venv/bin/python tests/reference/gen_func.py [output path]

Functions (float64; the C++ test writes the same ones):
  f(x, w) = sum(tanh(w @ x) ** 2)                  x (4), w (3, 4)       scalar
  g(x)    = tanh(w @ x + b) * (w @ x)              x (4) -> (3)
  h(x)    = sum(exp(-x * x) * sin(x)) + sum(x) ** 2 / 4      x (5)       scalar
  k(x)    = sin(x) * x ** 3                         x ()                 scalar
  loss(w) = sum(tanh(w @ x) ** 2) as a function of w (3, 4)              scalar
Case `f`: grad_x, grad_w (argnums (0, 1)), value. Case `g`: jac (3, 4), ct (3), vjp (4), t (4),
jvp (3). Case `h`: hess (5, 5), v (5), hvp (5). Case `k`: x, d1, d2 (grad and grad of grad).
Case `loss`: hess (3, 4, 3, 4). Case `aux`: grad of f with aux = w @ x. Case `per_sample`:
vmap(grad(cross_entropy of an MLP 4 -> 5 -> 3)) over 6 samples, the gradients of its 4 parameters.
"""

import torch
from torch.func import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp

from reference_writer import ReferenceFile

torch.manual_seed(0)
D = torch.float64
ref = ReferenceFile()

x = torch.randn(4, dtype=D)
w = torch.randn(3, 4, dtype=D)
b = torch.randn(3, dtype=D)


def f(x, w):
    return (torch.tanh(w @ x) ** 2).sum()


gx, gw = grad(f, argnums=(0, 1))(x, w)
ref.case("f", x=x, w=w, b=b, grad_x=gx, grad_w=gw, value=f(x, w))


def g(x):
    return torch.tanh(w @ x + b) * (w @ x)


ct = torch.randn(3, dtype=D)
t = torch.randn(4, dtype=D)
_, vjp_fn = vjp(g, x)
(vx,) = vjp_fn(ct)
_, jt = jvp(g, (x,), (t,))
ref.case("g", jac=jacrev(g)(x), ct=ct, vjp=vx, t=t, jvp=jt)


def h(x):
    return (torch.exp(-x * x) * torch.sin(x)).sum() + x.sum() ** 2 / 4


xh = torch.randn(5, dtype=D)
v = torch.randn(5, dtype=D)
_, hvp = jvp(grad(h), (xh,), (v,))
ref.case("h", x=xh, hess=hessian(h)(xh), v=v, hvp=hvp)


def k(x):
    return torch.sin(x) * x ** 3


xk = torch.tensor(0.7, dtype=D)
ref.case("k", x=xk, d1=grad(k)(xk), d2=grad(grad(k))(xk))


def loss(w):
    return (torch.tanh(w @ x) ** 2).sum()


ref.case("loss", hess=hessian(loss)(w))

(ga, aux) = grad(lambda x: (f(x, w), w @ x), has_aux=True)(x)
ref.case("aux", grad=ga, aux=aux)

# per-sample gradients (torch.func.vmap(grad)): an MLP 4 -> 5 -> 3, cross_entropy, 6 samples
pw1, pb1, pw2, pb2 = (torch.randn(*s, dtype=D) for s in [(5, 4), (5,), (3, 5), (3,)])
px = torch.randn(6, 4, dtype=D)
py = torch.tensor([0, 2, 1, 1, 0, 2])


def sample_loss(w1, b1, w2, b2, x, y):
    logits = torch.nn.functional.linear(torch.tanh(torch.nn.functional.linear(x.unsqueeze(0), w1, b1)), w2, b2)
    return torch.nn.functional.cross_entropy(logits, y.unsqueeze(0))


g1, g2, g3, g4 = torch.func.vmap(grad(sample_loss, argnums=(0, 1, 2, 3)), in_dims=(None, None, None, None, 0, 0))(
    pw1, pb1, pw2, pb2, px, py)
ref.case("per_sample", w1=pw1, b1=pb1, w2=pw2, b2=pb2, x=px, y=py, gw1=g1, gb1=g2, gw2=g3, gb2=g4)

ref.write("func.txt")
