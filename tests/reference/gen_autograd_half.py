#!/usr/bin/env python3
"""Writes autograd_half.txt: PyTorch's bfloat16 / float16 gradients for tests/test_autograd_half.cpp.

Each case computes one of that test's losses of x [4, 6], w [5, 6], b [5] in the 16-bit dtype on
the CPU (torch's own 16-bit kernels and autograd, the gradients 16-bit too) and holds the inputs
("x", "w", "b"; drawn in float32, rounded once), the loss and "grad_x", "grad_w", "grad_b". The
same x, w, b serve every case of a dtype.

    python3 tests/reference/gen_autograd_half.py [output path]
"""
import torch
import torch.nn.functional as F

from reference_writer import ReferenceFile

ref = ReferenceFile()


def linear_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b)).sum()


def pointwise_chain(x, w, b):
    h = x @ w.t()
    return (torch.tanh(h) * torch.sigmoid(h + b) + torch.exp(h * 0.25) / (b * b + 1.0)).sum()


def softmax_mean(x, w, b):
    h = F.linear(x, w, b)
    return (torch.softmax(h, 1) * torch.log_softmax(h, 0)).mean()


def layer_norm_amax_var(x, w, b):
    h = F.linear(x, w, b)
    n = F.layer_norm(h, (5,), b, b * 0.5)
    return (n * n).sum() + torch.amax(h, 1).sum() + torch.var(h)


def views(x, w, b):
    h = F.linear(x, w, b)
    r = h[:, 1:4].t().reshape(2, 6)
    return (r * r * 0.1).sum()


def cross_entropy(x, w, b):
    return F.cross_entropy(F.linear(x, w, b), torch.tensor([0, 3, 4, 1]))


CASES = dict(linear_gelu=linear_gelu, pointwise_chain=pointwise_chain, softmax_mean=softmax_mean,
             layer_norm_amax_var=layer_norm_amax_var, views=views, cross_entropy=cross_entropy)

for dt, tag in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
    g = torch.Generator().manual_seed(11)
    x0 = torch.randn(4, 6, generator=g).to(dt)
    w0 = (torch.randn(5, 6, generator=g) * 0.5).to(dt)
    b0 = torch.randn(5, generator=g).to(dt)
    for name, f in CASES.items():
        x, w, b = (t.clone().requires_grad_() for t in (x0, w0, b0))
        loss = f(x, w, b)
        assert loss.dtype == dt, (name, loss.dtype)
        loss.backward()
        ref.case(f"{name}_{tag}", x=x0, w=w0, b=b0, loss=loss.detach(), grad_x=x.grad, grad_w=w.grad, grad_b=b.grad)

ref.write("autograd_half.txt")
