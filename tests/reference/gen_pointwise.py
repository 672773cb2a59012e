#!/usr/bin/env python3
"""Writes pointwise.txt: PyTorch results for isinf, isfinite, nan_to_num, floor_divide, lerp, addcmul and
addcdiv (tests/test_pointwise.cpp).

    python3 tests/reference/gen_pointwise.py [output path]
"""
import torch

from reference_writer import ReferenceFile

ref = ReferenceFile()
INF, NAN = float("inf"), float("nan")

for dt, tag in [(torch.float32, "f32"), (torch.float64, "f64")]:
    x = torch.tensor([0.0, -0.0, 1.5, -2.5, NAN, INF, -INF, 3e38, -1e-30], dtype=dt)
    ref.case(f"classify_{tag}", x=x, isinf=torch.isinf(x), isfinite=torch.isfinite(x),
             n2n=torch.nan_to_num(x), n2n_args=torch.nan_to_num(x, nan=7.0, posinf=100.0, neginf=-100.0))

xi = torch.tensor([0, -3, 7, 2147483647], dtype=torch.int32)
ref.case("classify_i32", x=xi, isinf=torch.isinf(xi), isfinite=torch.isfinite(xi))

a = torch.tensor([[7.0, -7.0, 7.5, -7.5], [0.0, 1.0, -1.0, 5.0]], dtype=torch.float32)
b = torch.tensor([[2.0, 2.0, -2.0, -2.0], [3.0, 0.5, 0.25, -0.0]], dtype=torch.float32)
ai = torch.tensor([[7, -7, 7, -7], [0, 1, -1, 9]], dtype=torch.int32)
bi = torch.tensor([[2, 2, -2, -2], [3, 1, 3, -4]], dtype=torch.int32)
ref.case("floor_divide", a=a, b=b, ai=ai, bi=bi, f=torch.floor_divide(a, b), i=torch.floor_divide(ai, bi),
         i_scalar=torch.floor_divide(ai, 3), mixed=torch.floor_divide(ai, b))

torch.manual_seed(0)
la = torch.randn(3, 5)
lb = torch.randn(3, 5)
w = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0])
ref.case("lerp", a=la, b=lb, w=w, out=torch.lerp(la, lb, w), out_scalar=torch.lerp(la, lb, 0.3),
         out_one=torch.lerp(la, lb, 1.0))

x = torch.randn(2, 3)
t1 = torch.randn(2, 3)
t2 = torch.randn(1, 3).abs() + 0.5
ref.case("addc", x=x, t1=t1, t2=t2, mul=torch.addcmul(x, t1, t2), mul_v=torch.addcmul(x, t1, t2, value=-0.5),
         div=torch.addcdiv(x, t1, t2), div_v=torch.addcdiv(x, t1, t2, value=2.0))

ref.write("pointwise.txt")
