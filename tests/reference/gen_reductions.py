#!/usr/bin/env python3
"""Writes reductions.txt: inputs and PyTorch results of reductions, softmax, matmul and cat/stack.

tests/test_reductions.cpp and tests/test_matmul_join.cpp read it. Run:
    source /tmp/torchenv.sh && python3 tests/reference/gen_reductions.py [output path]
Format: see tests/reference.hpp.
"""
import math

import torch

from reference_writer import ReferenceFile

ref = ReferenceFile()
case = ref.case


# dim specs: key suffix -> (dims or None, keepdim)
SPECS = {
    "all": (None, False),
    "all_k": ((0, 1, 2), True),
    "d0": ((0,), False),
    "d2": ((2,), False),
    "dm1": ((-1,), False),
    "d1_k": ((1,), True),
    "d02": ((0, 2), False),
    "d02_k": ((0, 2), True),
}


def red(fn, x, spec, **kw):
    dims, keep = SPECS[spec]
    if dims is None:
        return fn(x, **kw) if not kw.get("_dims_required") else None
    return fn(x, dim=dims, keepdim=keep, **kw)


def reductions_for(x, ops):
    out = {"x": x}
    for op in ops:
        for spec, (dims, keep) in SPECS.items():
            if op == "sum":
                r = x.sum() if dims is None else x.sum(dim=dims, keepdim=keep)
            elif op == "prod":
                # torch.prod takes one dim: reduce the dims one after another
                if dims is None:
                    r = x.prod()
                else:
                    r = x
                    for d in sorted([d % x.dim() for d in dims], reverse=True):
                        r = r.prod(dim=d, keepdim=keep)
            elif op == "amax":
                r = x.amax() if dims is None else x.amax(dim=dims, keepdim=keep)
            elif op == "amin":
                r = x.amin() if dims is None else x.amin(dim=dims, keepdim=keep)
            elif op == "mean":
                r = x.mean() if dims is None else x.mean(dim=dims, keepdim=keep)
            elif op.startswith("var") or op.startswith("std"):
                c = int(op[-1])
                f = torch.var if op.startswith("var") else torch.std
                r = f(x, correction=c) if dims is None else f(x, dim=dims, keepdim=keep, correction=c)
            elif op == "logsumexp":
                r = torch.logsumexp(x, dim=tuple(range(x.dim())) if dims is None else dims, keepdim=keep)
            elif op == "any":
                r = x.any() if dims is None else torch.any(x, dim=dims, keepdim=keep)
            elif op == "all":
                r = x.all() if dims is None else torch.all(x, dim=dims, keepdim=keep)
            elif op.startswith("norm"):
                p = {"norm2": 2, "norm1": 1, "norminf": math.inf, "norm0": 0, "norm3": 3}[op]
                if keep:
                    continue
                r = torch.linalg.vector_norm(x, ord=p, dim=dims)
            elif op in ("argmax", "argmin"):
                if dims is not None and len(dims) != 1:
                    continue
                if dims is None and keep:
                    continue
                f = torch.argmax if op == "argmax" else torch.argmin
                r = f(x) if dims is None else f(x, dim=dims[0], keepdim=keep)
            out[op + "_" + spec] = r
    return out


def main():
    torch.manual_seed(0)
    FOPS = ["sum", "prod", "amax", "amin", "mean", "var0", "var1", "var2", "std1", "std0", "logsumexp",
            "any", "all", "argmax", "argmin", "norm2", "norm1", "norminf", "norm0", "norm3"]
    xf = torch.randn(3, 4, 5)
    xf[0, 1, 2] = 0.0  # a zero for norm0 / all
    case("red_f32", **reductions_for(xf, FOPS))
    xd = torch.randn(3, 4, 5, dtype=torch.float64)
    xd[2, 0, 0] = 0.0
    case("red_f64", **reductions_for(xd, FOPS))
    xi = torch.randint(-4, 5, (3, 4, 5), dtype=torch.int32)
    case("red_i32", **reductions_for(xi, ["sum", "prod", "amax", "argmax"]))
    xb = torch.rand(3, 4, 5) > 0.3
    case("red_bool", **reductions_for(xb, ["any", "all", "sum"]))

    # edge cases
    a = torch.tensor([[1.0, 5.0, float("nan"), 2.0, float("nan")], [3.0, 7.0, 7.0, -1.0, 0.0]])
    case("nan_ties", x=a, amax_d1=a.amax(dim=1), argmax_d1=a.argmax(dim=1), amax_all=a.amax(),
         argmax_all=a.argmax(), amin_d1=a.amin(dim=1), argmin_d1=a.argmin(dim=1))
    t = torch.tensor([[2.0, 9.0, 9.0, 1.0], [4.0, 4.0, 4.0, 4.0], [-3.0, -5.0, -5.0, 0.0]])
    case("ties", x=t, argmax_d1=t.argmax(dim=1), argmin_d1=t.argmin(dim=1), argmax_d0=t.argmax(dim=0),
         argmax_all=t.argmax(), argmin_all=t.argmin())
    s1 = torch.randn(1, 4, 1)
    case("size1", x=s1, sum_d0=s1.sum(0), sum_d2_k=s1.sum(2, keepdim=True), amax_d1=s1.amax(1),
         argmax_d0=s1.argmax(0), var1_d0=s1.var(0, correction=1), var0_d0=s1.var(0, correction=0),
         mean_d2=s1.mean(2), prod_all=s1.prod())
    nt = torch.randn(6, 7)
    ntt = nt.t()
    case("noncontig", x=nt, sum_d1_of_t=ntt.sum(1), amax_d0_of_t=ntt.amax(0), argmax_d1_of_t=ntt.argmax(1),
         var1_d1_of_t=ntt.var(1), mean_all_of_t=ntt.mean(), prod_d0_of_t=ntt.prod(0))
    col = torch.randn(257, 33)
    case("column", x=col, sum_d0=col.sum(0), amax_d0=col.amax(0), mean_d0=col.mean(0))
    fp = torch.randn(9, 13)
    case("fused", x=fp, sumsq_d1=(fp * fp).sum(1), sumexp_d0_k=fp.exp().sum(0, keepdim=True))

    # softmax / log_softmax
    sm = torch.randn(4, 6)
    sm[1, 2] = -math.inf
    sm[2, :] = 1e4
    sm[3, 0] = -math.inf
    sm[3, 4] = -math.inf
    smt = sm.t().contiguous()
    smt0 = torch.randn(5, 3)
    smt0[0, 1] = -math.inf
    smt0[:, 2] = 1e4
    case("softmax", x=sm, softmax_m1=torch.softmax(sm, -1), log_softmax_m1=torch.log_softmax(sm, -1),
         xt=smt, softmax_0_of_xt=torch.softmax(smt, 0), log_softmax_0_of_xt=torch.log_softmax(smt, 0),
         y=smt0, softmax_0=torch.softmax(smt0, 0), log_softmax_0=torch.log_softmax(smt0, 0))

    # matmul
    def mm(name, a, b):
        case(name, a=a, b=b, out=torch.matmul(a, b))
    mm("mm_1d1d", torch.randn(7), torch.randn(7))
    mm("mm_1d2d", torch.randn(4), torch.randn(4, 3))
    mm("mm_2d1d", torch.randn(3, 4), torch.randn(4))
    mm("mm_2d2d", torch.randn(5, 6), torch.randn(6, 3))
    mm("mm_3d3d", torch.randn(2, 3, 4), torch.randn(2, 4, 5))
    mm("mm_bcast", torch.randn(2, 1, 3, 4), torch.randn(5, 4, 2))
    at = torch.randn(6, 5)
    case("mm_trans", a=at, b=(bt := torch.randn(6, 4)), out=at.t() @ bt)
    mm("mm_i32", torch.randint(-5, 6, (3, 4), dtype=torch.int32), torch.randint(-5, 6, (4, 2), dtype=torch.int32))
    ab = torch.randn(8, 16).bfloat16()
    bb = torch.randn(16, 5).bfloat16()
    case("mm_bf16", a=ab, b=bb, out=ab @ bb, out_f64=ab.double() @ bb.double())
    mm("mm_f64", torch.randn(4, 9, dtype=torch.float64), torch.randn(9, 3, dtype=torch.float64))

    # cat / stack
    c1 = torch.randn(2, 3)
    c2 = torch.randn(4, 3)
    c3 = torch.randn(1, 3)
    d1 = torch.randn(2, 5)
    ci = torch.randint(-9, 10, (2, 2), dtype=torch.int32)
    case("cat", a=c1, b=c2, c=c3, d=d1, i=ci, cat0_ab=torch.cat([c1, c2]), cat0_abc=torch.cat([c1, c2, c3]),
         cat1_ad=torch.cat([c1, d1], 1), cat_m1_adi=torch.cat([c1, d1, ci], -1), cat1_ia=torch.cat([ci, c1], 1),
         stack0=torch.stack([c1, c1 * 2]), stack1=torch.stack([c1, c1 * 2, c1 * 3], 1))

    ref.write("reductions.txt")


if __name__ == "__main__":
    main()
