#!/usr/bin/env python3
"""Writes conv.txt: PyTorch results for conv1d, conv2d, conv_transpose2d, max_pool2d, avg_pool2d,
adaptive_avg_pool2d, interpolate, pad, flip, roll and unfold (tests/test_conv.cpp). Options are
stored as int64/float64 tensors next to the data, so one C++ loop runs every case of an op.

    python3 tests/reference/gen_conv.py [output path]
"""
import os
import sys

import torch
import torch.nn.functional as F

from reference_writer import ReferenceFile

ref = ReferenceFile()
torch.manual_seed(0)
L = lambda *v: torch.tensor(v, dtype=torch.int64)  # noqa: E731


def conv2d_case(name, x, w, b, stride, padding, dilation, groups):
    # padding: (ph, pw), or "same" / "valid" (mode 1 / 2)
    mode = {"same": 1, "valid": 2}.get(padding, 0) if isinstance(padding, str) else 0
    pads = (0, 0) if isinstance(padding, str) else padding
    for dt, sfx in ((torch.float32, "f32"), (torch.float64, "f64")):
        xd, wd = x.to(dt), w.to(dt)
        bd = None if b is None else b.to(dt)
        out = F.conv2d(xd, wd, bd, stride=stride, padding=padding if mode else pads, dilation=dilation, groups=groups)
        t = dict(x=xd, w=wd, stride=L(*stride), padding=L(*pads), mode=L(mode), dilation=L(*dilation),
                 groups=L(groups), out=out)
        if bd is not None:
            t["b"] = bd
        ref.case(f"conv2d_{name}_{sfx}", **t)


r = torch.randn
conv2d_case("basic", r(2, 3, 7, 6), r(4, 3, 3, 3), None, (1, 1), (0, 0), (1, 1), 1)
conv2d_case("stride_pad_dil", r(2, 3, 9, 8), r(5, 3, 3, 2), r(5), (2, 1), (1, 2), (1, 2), 1)
conv2d_case("groups", r(2, 4, 8, 7), r(6, 2, 3, 3), r(6), (2, 2), (1, 1), (1, 1), 2)
conv2d_case("depthwise", r(1, 4, 6, 6), r(8, 1, 3, 3), None, (1, 1), (1, 1), (1, 1), 4)
conv2d_case("same_even", r(2, 3, 7, 8), r(4, 3, 4, 2), r(4), (1, 1), "same", (2, 1), 1)
conv2d_case("valid", r(1, 2, 5, 9), r(3, 2, 5, 1), None, (1, 1), "valid", (1, 1), 1)
conv2d_case("odd_batch1", r(1, 3, 5, 9), r(2, 3, 5, 1), r(2), (3, 2), (2, 0), (1, 1), 1)
conv2d_case("pointwise", r(3, 4, 5, 5), r(6, 4, 1, 1), r(6), (1, 1), (0, 0), (1, 1), 1)
conv2d_case("kernel_fills_input", r(2, 2, 4, 3), r(3, 2, 6, 5), None, (1, 1), (1, 1), (1, 1), 1)

# conv1d
for name, (x, w, b, stride, padding, dilation, groups) in {
    "basic": (r(2, 3, 10), r(4, 3, 3), None, 1, 0, 1, 1),
    "same": (r(2, 4, 9), r(4, 2, 4), r(4), 1, "same", 2, 2),
    "strided": (r(1, 2, 11), r(3, 2, 3), r(3), 2, 1, 2, 1),
}.items():
    mode = {"same": 1, "valid": 2}.get(padding, 0) if isinstance(padding, str) else 0
    pads = 0 if isinstance(padding, str) else padding
    for dt, sfx in ((torch.float32, "f32"), (torch.float64, "f64")):
        xd, wd = x.to(dt), w.to(dt)
        bd = None if b is None else b.to(dt)
        t = dict(x=xd, w=wd, stride=L(stride), padding=L(pads), mode=L(mode), dilation=L(dilation), groups=L(groups),
                 out=F.conv1d(xd, wd, bd, stride=stride, padding=padding, dilation=dilation, groups=groups))
        if bd is not None:
            t["b"] = bd
        ref.case(f"conv1d_{name}_{sfx}", **t)

# conv_transpose2d: w is (C_in, C_out/groups, kh, kw)
for name, (x, w, b, stride, padding, opad, groups, dilation) in {
    "basic": (r(2, 3, 4, 5), r(3, 2, 3, 3), None, (1, 1), (0, 0), (0, 0), 1, (1, 1)),
    "stride_outpad": (r(2, 3, 4, 5), r(3, 4, 3, 2), r(4), (2, 3), (1, 0), (1, 2), 1, (1, 1)),
    "groups_dil": (r(1, 4, 5, 3), r(4, 3, 2, 3), r(6), (2, 1), (0, 1), (0, 0), 2, (2, 2)),
    "crop": (r(2, 2, 5, 5), r(2, 3, 3, 3), None, (1, 2), (3, 3), (0, 1), 1, (1, 1)),
}.items():
    for dt, sfx in ((torch.float32, "f32"), (torch.float64, "f64")):
        xd, wd = x.to(dt), w.to(dt)
        bd = None if b is None else b.to(dt)
        t = dict(x=xd, w=wd, stride=L(*stride), padding=L(*padding), output_padding=L(*opad), groups=L(groups),
                 dilation=L(*dilation),
                 out=F.conv_transpose2d(xd, wd, bd, stride=stride, padding=padding, output_padding=opad,
                                        groups=groups, dilation=dilation))
        if bd is not None:
            t["b"] = bd
        ref.case(f"convt_{name}_{sfx}", **t)

# max_pool2d
xp = r(2, 3, 9, 8)
xp[0, 1, 2, 3] = float("nan")
for name, (x, k, s, p, d, ceil) in {
    "k3s2p1": (xp, (3, 3), (2, 2), (1, 1), (1, 1), False),
    "ceil": (r(1, 2, 8, 7), (3, 2), (2, 2), (1, 0), (1, 1), True),
    "dilation": (r(2, 2, 9, 9), (3, 3), (1, 2), (1, 1), (2, 2), False),
    "rect_default_stride": (r(1, 3, 7, 9), (2, 3), (0, 0), (0, 1), (1, 1), True),
}.items():
    for dt, sfx in ((torch.float32, "f32"), (torch.float64, "f64"), (torch.int64, "i64")):
        xd = (x * 10).to(dt) if dt == torch.int64 else x.to(dt)
        if dt == torch.int64 and torch.isnan(x).any():
            xd = torch.nan_to_num(x * 10).to(dt)
        out = F.max_pool2d(xd, k, stride=s if s != (0, 0) else None, padding=p, dilation=d, ceil_mode=ceil)
        ref.case(f"maxpool_{name}_{sfx}", x=xd, kernel=L(*k), stride=L(*s), padding=L(*p), dilation=L(*d),
                 ceil=L(int(ceil)), out=out)

# avg_pool2d
for name, (x, k, s, p, ceil, cip, div) in {
    "k3s2p1": (r(2, 3, 9, 8), (3, 3), (2, 2), (1, 1), False, True, None),
    "exclude_pad": (r(2, 3, 9, 8), (3, 3), (2, 2), (1, 1), False, False, None),
    "ceil": (r(1, 2, 8, 7), (3, 2), (2, 2), (1, 1), True, True, None),
    "ceil_exclude": (r(1, 2, 8, 7), (3, 2), (2, 2), (1, 1), True, False, None),
    "divisor": (r(1, 2, 6, 7), (2, 3), (0, 0), (1, 0), False, True, 5),
}.items():
    for dt, sfx in ((torch.float32, "f32"), (torch.float64, "f64")):
        xd = x.to(dt)
        out = F.avg_pool2d(xd, k, stride=s if s != (0, 0) else None, padding=p, ceil_mode=ceil,
                           count_include_pad=cip, divisor_override=div)
        ref.case(f"avgpool_{name}_{sfx}", x=xd, kernel=L(*k), stride=L(*s), padding=L(*p), ceil=L(int(ceil)),
                 cip=L(int(cip)), div=L(-1 if div is None else div), out=out)

# adaptive_avg_pool2d
for name, (x, o) in {"nondiv": (r(2, 3, 7, 6), (3, 4)), "global": (r(2, 3, 5, 4), (1, 1)),
                     "same": (r(1, 2, 4, 5), (4, 5)), "up": (r(1, 2, 3, 5), (5, 2))}.items():
    for dt, sfx in ((torch.float32, "f32"), (torch.float64, "f64")):
        xd = x.to(dt)
        ref.case(f"adaptive_{name}_{sfx}", x=xd, size=L(*o), out=F.adaptive_avg_pool2d(xd, o))

# interpolate: mode 0 nearest, 1 bilinear; align -1 None, 0, 1; size or scale (0 = unset)
for name, (x, size, scale, mode, align) in {
    "nearest_size": (r(2, 3, 5, 4), (9, 11), None, "nearest", None),
    "nearest_down": (r(1, 2, 9, 7), (4, 3), None, "nearest", None),
    "nearest_scale": (r(1, 2, 3, 4), None, (2.0, 1.5), "nearest", None),
    "bilinear": (r(2, 3, 5, 4), (9, 11), None, "bilinear", False),
    "bilinear_align": (r(2, 3, 5, 4), (9, 11), None, "bilinear", True),
    "bilinear_down": (r(1, 2, 9, 7), (4, 3), None, "bilinear", False),
    "bilinear_scale": (r(1, 2, 4, 6), None, (1.5, 0.5), "bilinear", False),
    "bilinear_align_one": (r(1, 2, 4, 6), (1, 3), None, "bilinear", True),
}.items():
    for dt, sfx in ((torch.float32, "f32"), (torch.float64, "f64")):
        xd = x.to(dt)
        kw = dict(mode=mode)
        if align is not None:
            kw["align_corners"] = align
        out = F.interpolate(xd, size=size, scale_factor=scale, **kw)
        ref.case(f"interp_{name}_{sfx}", x=xd, size=L(*(size or (0, 0))),
                 scale=torch.tensor(scale or (0.0, 0.0), dtype=torch.float64),
                 mode=L(0 if mode == "nearest" else 1), align=L(-1 if align is None else int(align)), out=out)

# pad, flip, roll (float32, float64, int64)
xr = r(2, 3, 5, 4)
for dt, sfx in ((torch.float32, "f32"), (torch.float64, "f64"), (torch.int64, "i64")):
    xd = (xr * 10).to(dt) if dt == torch.int64 else xr.to(dt)
    ref.case(f"pad_{sfx}", x=xd,
             constant=F.pad(xd, (1, -2, 3, 1), value=2),
             constant4=F.pad(xd, (0, 1, 1, 0, -1, 2, 1, 0), value=-1),
             reflect=F.pad(xd, (1, 3, 4, 2), mode="reflect"),
             replicate=F.pad(xd, (2, 0, 1, 3), mode="replicate"),
             reflect1=F.pad(xd.reshape(6, 5, 4), (3, 2), mode="reflect"),
             flip23=torch.flip(xd, (2, 3)), flip1=torch.flip(xd, (1,)),
             roll=torch.roll(xd, (1, -2), (2, -1)), roll_flat=torch.roll(xd, 7),
             unfold=xd.unfold(2, 3, 2))

# pad_ (XLA pad with interior padding and negative low/high), built by hand
x2 = torch.arange(1, 13, dtype=torch.int64).reshape(3, 4)
low, high, interior = (1, -1), (-1, 2), (1, 2)
full = torch.full((1 + 3 + 2 * 1 - 1 + 1, 1 + 4 + 3 * 2 + 2 + 1), 9, dtype=torch.int64)  # before cropping
for i in range(3):
    for j in range(4):
        full[1 + i * 2, 1 + j * 3] = x2[i, j]
# low (1, -1): rows from 0 (low 1 is already the leading row), columns from 2 (crop 1 of the 1 placed + 1)
rows = full[0: 1 + 3 + 2 * 1 - 1]            # high -1 drops the last row
cols = rows[:, 2: 2 + (-1) + 4 + 3 * 2 + 2]   # low -1 drops the first column
ref.case("pad_prim", x=x2, out=cols)

# ResNet-18's first stage (bench/resnet_stage.hpp) on one 3x32x32 image: parameters and input are
# the deterministic formula of bench/torch_twin.py, so only the output is stored
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from torch_twin import resnet_param, resnet_stage1, resnet_stage1_params  # noqa: E402

with torch.no_grad():
    ref.case("resnet_stage1", out=resnet_stage1(resnet_param(0, 1.0, 0.0, 1, 3, 32, 32), resnet_stage1_params()))

ref.write("conv.txt")
