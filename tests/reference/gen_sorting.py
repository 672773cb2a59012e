#!/usr/bin/env python3
"""Writes sorting.txt: PyTorch results for the scans (cumsum, cumprod, cummax, cummin, logcumsumexp),
sorting and selection (sort, argsort, msort, topk, kthvalue, median, mode), tril/triu and the shape
ops (repeat, tile, repeat_interleave, movedim, diagonal, diag), checked by tests/test_sorting.cpp and
tests/test_shape_ops.cpp.

    python3 tests/reference/gen_sorting.py [output path]

Ties: torch.topk, kthvalue and median pick the index of a tied value by quickselect (unspecified);
tenet picks the first in input order. Cases with ties ("*_ties") hold values only; the tests check
that the indices point at equal values. Cases without ties hold torch's indices.
"""
import torch

from reference_writer import ReferenceFile

ref = ReferenceFile()
torch.manual_seed(0)
nan, inf = float("nan"), float("inf")


def scans(name, x, dtype):
    x = x.to(dtype)
    out = {"x": x}
    for d in (0, 1):
        out[f"cumsum{d}"] = torch.cumsum(x, d)
        out[f"cumprod{d}"] = torch.cumprod(x, d)
        v, i = torch.cummax(x, d)
        out[f"cummax{d}_v"], out[f"cummax{d}_i"] = v, i
        v, i = torch.cummin(x, d)
        out[f"cummin{d}_v"], out[f"cummin{d}_i"] = v, i
        if dtype.is_floating_point:
            out[f"lcse{d}"] = torch.logcumsumexp(x, d)
    # the same on the transposed (non-contiguous) view, along dim 1 of the view
    xt = x.t()
    out["t_cumsum1"] = torch.cumsum(xt, 1)
    v, i = torch.cummax(xt, 1)
    out["t_cummax1_v"], out["t_cummax1_i"] = v, i
    ref.case(name, **out)


xf = torch.tensor([[0.5, -1.0, 2.0, 2.0, nan, 1.0],
                   [1.5, inf, -2.0, 0.25, 3.0, -inf],
                   [-inf, -inf, 1.0, 1.0, 0.0, 2.0],
                   [0.75, 0.5, -0.5, 1.25, -1.5, 1.0]])
scans("scan_f32", xf, torch.float32)
scans("scan_f64", xf, torch.float64)
xi = torch.tensor([[3, -1, 3, 2, 0, 3], [1, 1, -2, 4, 4, -3], [2, 5, 2, -1, 2, 1]])
scans("scan_i64", xi, torch.int64)
xb = torch.tensor([[True, False, True], [True, True, False]])
xh = (torch.randn(3, 40) * 4).to(torch.bfloat16)
xh[1, 7] = nan
ref.case("half_bf16", x=xh, cumsum1=torch.cumsum(xh, 1), sort1d_v=torch.sort(xh, dim=1, descending=True, stable=True).values,
         sort1d_i=torch.sort(xh, dim=1, descending=True, stable=True).indices, lcse1=torch.logcumsumexp(xh, 1))
ref.case("scan_bool", x=xb, cumsum1=torch.cumsum(xb, 1), cumprod0=torch.cumprod(xb, 0))
xr = torch.randn(5, 300, dtype=torch.float64) * 3
ref.case("lcse_wide", x=xr, lcse1=torch.logcumsumexp(xr, 1), cumsum1=torch.cumsum(xr, 1))
# a large spread: a shift by the line's maximum would lose the small prefix
xs = torch.tensor([[-1000.0, 0.0, -1000.0, 5.0]])
ref.case("lcse_spread", x=xs, lcse1=torch.logcumsumexp(xs, 1))


def sorts(name, x, dtype):
    x = x.to(dtype)
    out = {"x": x}
    for d in (0, 1):
        for desc in (False, True):
            v, i = torch.sort(x, dim=d, descending=desc, stable=True)
            out[f"sort{d}{'d' if desc else 'a'}_v"], out[f"sort{d}{'d' if desc else 'a'}_i"] = v, i
    out["argsort1d"] = torch.argsort(x, dim=1, descending=True, stable=True)
    out["msort"] = torch.sort(x, dim=0, stable=True).values
    v, i = torch.sort(x.t(), dim=1, stable=True)
    out["t_sort1_v"], out["t_sort1_i"] = v, i
    ref.case(name, **out)


xsort = torch.tensor([[2.0, nan, -1.0, 2.0, inf, -inf, 0.5, 2.0],
                      [1.0, 1.0, 1.0, nan, nan, -3.0, 7.0, 1.0],
                      [0.0, 5.0, -5.0, 2.5, -2.5, 1.0, -1.0, 3.0]])
sorts("sort_f32", xsort, torch.float32)
sorts("sort_f64", xsort, torch.float64)
sorts("sort_i64", torch.tensor([[3, 1, 3, -2, 0, 1, 3, 9], [0, 0, 0, 0, 0, 0, 0, 0], [5, -5, 4, -4, 3, -3, 2, -2]]),
      torch.int64)

# selection without ties: torch's indices are the only ones
xu = torch.tensor([[0.5, -1.0, 2.0, inf, -0.25, 1.0, 3.5],
                   [4.0, nan, -2.0, 0.25, 3.0, -inf, 1.5],
                   [-3.0, 2.5, 1.0, 0.0, -0.5, 2.0, 6.0]])
for dt, nm in ((torch.float32, "f32"), (torch.float64, "f64")):
    x = xu.to(dt)
    out = {"x": x}
    for k in (0, 1, 3, 7):
        for largest in (True, False):
            v, i = torch.topk(x, k, 1, largest=largest)
            out[f"topk{k}{'l' if largest else 's'}_v"], out[f"topk{k}{'l' if largest else 's'}_i"] = v, i
    v, i = torch.topk(x, 2, 0)
    out["topk2_dim0_v"], out["topk2_dim0_i"] = v, i
    for k in (1, 4, 7):
        v, i = torch.kthvalue(x, k, 1)
        out[f"kth{k}_v"], out[f"kth{k}_i"] = v, i
    v, i = torch.kthvalue(x, 2, 0, keepdim=True)
    out["kth2_dim0_keep_v"], out["kth2_dim0_keep_i"] = v, i
    v, i = torch.median(x, 1)
    out["median1_v"], out["median1_i"] = v, i
    v, i = torch.median(x, 0, keepdim=True)
    out["median0_keep_v"], out["median0_keep_i"] = v, i
    out["median_all"] = torch.median(x)
    out["median_all_finite"] = torch.median(x[2])
    out["median_even"] = torch.median(x[2, :6])
    ref.case(f"select_{nm}", **out)
xui = torch.tensor([[5, -1, 2, 9, 0, 3, 7], [4, 1, -2, 8, 6, -7, 2]])
out = {"x": xui}
v, i = torch.topk(xui, 3, 1)
out["topk3l_v"], out["topk3l_i"] = v, i
v, i = torch.kthvalue(xui, 2, 1)
out["kth2_v"], out["kth2_i"] = v, i
v, i = torch.median(xui, 1)
out["median1_v"], out["median1_i"] = v, i
out["median_all"] = torch.median(xui)
ref.case("select_i64", **out)

# with ties: values only
xt = torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0, 0.0, 3.0], [2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 1.0]])
ref.case("select_ties", x=xt, topk3_v=torch.topk(xt, 3, 1).values, topk2s_v=torch.topk(xt, 2, 1, largest=False).values,
         kth4_v=torch.kthvalue(xt, 4, 1).values, median1_v=torch.median(xt, 1).values)

# mode: lines of at most 16 elements (torch's CPU mode picks the last index of the run there)
xm = torch.tensor([[2, 1, 1, 0, 0, 2, 1, 5], [1, 1, 1, 0, 2, 0, 0, 3], [2, 1, 2, 2, 2, 1, 0, 2], [7, 6, 5, 4, 3, 2, 1, 0]])
out = {"x": xm}
v, i = torch.mode(xm, 1)
out["mode1_v"], out["mode1_i"] = v, i
v, i = torch.mode(xm, 0, keepdim=True)
out["mode0_keep_v"], out["mode0_keep_i"] = v, i
ref.case("mode_i64", **out)
xmf = torch.tensor([[0.5, -1.0, 0.5, inf, -1.0, inf, inf], [3.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0]])
for dt, nm in ((torch.float32, "f32"), (torch.float64, "f64")):
    x = xmf.to(dt)
    v, i = torch.mode(x, 1)
    ref.case(f"mode_{nm}", x=x, mode1_v=v, mode1_i=i)

# tril / triu
xm2 = torch.randn(3, 4)
xm3 = torch.randn(2, 4, 3)
out = {"a": xm2, "b": xm3}
for k in (-1, 0, 2):
    out[f"tril{k}"] = torch.tril(xm2, k)
    out[f"triu{k}"] = torch.triu(xm2, k)
    out[f"b_tril{k}"] = torch.tril(xm3, k)
    out[f"b_triu{k}"] = torch.triu(xm3, k)
out["t_tril0"] = torch.tril(xm2.t(), 0)
ref.case("triangle", **out)

# shape ops
a = torch.arange(6, dtype=torch.float32).reshape(2, 3) - 2.5
out = {"a": a}
out["repeat22"] = a.repeat(2, 2)
out["repeat213"] = a.repeat(2, 1, 3)
out["repeat01"] = a.repeat(0, 1)
out["tile2"] = torch.tile(a, (2,))
out["tile213"] = torch.tile(a, (2, 1, 3))
out["t_repeat21"] = a.t().repeat(2, 1)
out["ri1_2"] = torch.repeat_interleave(a, 2, 1)
out["ri0_3"] = torch.repeat_interleave(a, 3, 0)
out["ri_flat"] = torch.repeat_interleave(a, 2)
out["ri_tensor"] = torch.repeat_interleave(a, torch.tensor([0, 2, 1]), 1)
out["ri_tensor1"] = torch.repeat_interleave(a, torch.tensor([3]), 0)
out["ri_indices"] = torch.repeat_interleave(torch.tensor([2, 0, 3, 1]))
out["t_ri0"] = torch.repeat_interleave(a.t(), torch.tensor([1, 0, 2]), 0)
b = torch.arange(24, dtype=torch.float64).reshape(2, 3, 4)
out["b"] = b
out["movedim02"] = torch.movedim(b, 0, 2)
out["movedim20"] = torch.movedim(b, 2, 0)
out["movedim_m1_1"] = torch.movedim(b, -1, 1)
out["diagonal"] = torch.diagonal(a)
out["diagonal1"] = torch.diagonal(a, 1)
out["diagonal_m1"] = torch.diagonal(a, -1)
out["diagonal_far"] = torch.diagonal(a, 5)
out["diagonal12"] = torch.diagonal(b, 1, 1, 2)
out["diagonal_20"] = torch.diagonal(b, -1, 2, 0)
v = torch.tensor([1, -2, 3])
out["v"] = v
out["diag_v"] = torch.diag(v)
out["diag_v1"] = torch.diag(v, 1)
out["diag_vm2"] = torch.diag(v, -2)
out["diag_a1"] = torch.diag(a, 1)
ref.case("shape_ops", **out)

ref.write("sorting.txt")
