#!/usr/bin/env python3
"""Writes functional.txt: PyTorch results for linear, addmm, bmm, outer, dot, layer_norm, rms_norm and
the regression losses (tests/test_functional.cpp).

    python3 tests/reference/gen_functional.py [output path]
"""
import torch
import torch.nn.functional as F

from reference_writer import ReferenceFile

ref = ReferenceFile()
torch.manual_seed(0)

x = torch.randn(4, 5)
w = torch.randn(3, 5)
b = torch.randn(3)
ref.case("linear", x=x, w=w, b=b, out=F.linear(x, w), out_b=F.linear(x, w, b))

c = torch.randn(4, 3)
m1 = torch.randn(4, 6)
m2 = torch.randn(6, 3)
ref.case("addmm", c=c, a=m1, b=m2, out=torch.addmm(c, m1, m2), out_ba=torch.addmm(c, m1, m2, beta=0.5, alpha=-2.0))

ba = torch.randn(2, 3, 4)
bb = torch.randn(2, 4, 5)
va = torch.randn(4)
vb = torch.randn(4)
ref.case("bmm_outer_dot", a=ba, b=bb, va=va, vb=vb, bmm=torch.bmm(ba, bb), outer=torch.outer(va, vb),
         dot=torch.dot(va, vb))

xn = torch.randn(2, 3, 8) * 3 + 1
g1 = torch.randn(8)
b1 = torch.randn(8)
g2 = torch.randn(3, 8)
b2 = torch.randn(3, 8)
ref.case("norms", x=xn, g1=g1, b1=b1, g2=g2, b2=b2,
         ln1=F.layer_norm(xn, (8,), g1, b1), ln2=F.layer_norm(xn, (3, 8), g2, b2, eps=1e-3),
         rms1=F.rms_norm(xn, (8,), g1), rms2=F.rms_norm(xn, (3, 8), g2, eps=1e-2))

inp = torch.tensor([[0.0, 0.5, -2.0, 3.0], [1.0, -0.2, 0.9, -1.5]])
tgt = torch.tensor([[0.1, -0.4, 0.0, 1.0], [1.0, 0.7, -1.2, -1.0]])
ref.case("losses", input=inp, target=tgt,
         mse=F.mse_loss(inp, tgt), mse_sum=F.mse_loss(inp, tgt, reduction="sum"),
         mse_none=F.mse_loss(inp, tgt, reduction="none"),
         l1=F.l1_loss(inp, tgt), l1_none=F.l1_loss(inp, tgt, reduction="none"),
         sl1=F.smooth_l1_loss(inp, tgt), sl1_b=F.smooth_l1_loss(inp, tgt, beta=0.5, reduction="none"),
         sl1_b0=F.smooth_l1_loss(inp, tgt, beta=0.0, reduction="sum"),
         huber=F.huber_loss(inp, tgt), huber_d=F.huber_loss(inp, tgt, delta=0.3, reduction="none"))

ref.write("functional.txt")
