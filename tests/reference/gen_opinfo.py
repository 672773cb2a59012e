#!/usr/bin/env python3
"""Writes opinfo.txt: the OpInfo-style table of the pointwise ops (tests/test_opinfo_*.cpp).

For every op and every dtype it claims, PyTorch's outputs on the same sample inputs:
  edge   the edge values (0, -0.0, +-inf, nan, large and tiny magnitudes); binary ops take every
         pair (a as a column, b as a row, so the sample also broadcasts)
  nc     a non-contiguous input: tenet transposes the stored [5, 4] tensor (x.t() here)
  bc     (binary) broadcasting [3, 1] with [1, 4]
  empty  a [0, 3] input ([0, 3] with [1, 3] for binary ops)
  one    a [1, 1] input
Each case is named <op>_<dtype>; the C++ table lists the same ops and dtypes and fails when a case
is missing, so the table here and there cannot drift apart.

    python3 tests/reference/gen_opinfo.py [output path]
"""
import math

import torch
import torch.nn.functional as F

from reference_writer import ReferenceFile

FLOATS = ["float32", "float64"]
DT = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "int32": torch.int32,
      "bool": torch.bool}

FLOAT_EDGE = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.75, -0.3, 1e-30, 1e30, -1e30, 88.5, math.inf, -math.inf, math.nan,
              0.999]
INT_EDGE = [0, 1, -1, 2, -7, 100, 5, -3]
BOOL_EDGE = [False, True]

# name, torch function, float dtypes / other dtypes, domain of the random samples
# ("real" randn * 2, "pos" |randn| + 0.25, "unit" in (-1, 1), "ge1" >= 1)
UNARY = [
    ("neg", torch.neg, FLOATS + ["int32"], "real"),
    ("abs", torch.abs, FLOATS + ["int32"], "real"),
    ("exp", torch.exp, FLOATS + ["int64"], "real"),
    ("exp2", torch.exp2, FLOATS + ["int64"], "real"),
    ("expm1", torch.expm1, FLOATS, "real"),
    ("log", torch.log, FLOATS + ["int64"], "pos"),
    ("log2", torch.log2, FLOATS, "pos"),
    ("log10", torch.log10, FLOATS + ["int64"], "pos"),
    ("log1p", torch.log1p, FLOATS, "pos"),
    ("sqrt", torch.sqrt, FLOATS + ["int64"], "pos"),
    ("rsqrt", torch.rsqrt, FLOATS, "pos"),
    ("sin", torch.sin, FLOATS + ["int64"], "real"),
    ("cos", torch.cos, FLOATS, "real"),
    ("tan", torch.tan, FLOATS, "real"),
    ("tanh", torch.tanh, FLOATS, "real"),
    ("atan", torch.atan, FLOATS + ["int64"], "real"),
    ("asin", torch.asin, FLOATS, "unit"),
    ("acos", torch.acos, FLOATS, "unit"),
    ("sinh", torch.sinh, FLOATS + ["int64"], "real"),
    ("cosh", torch.cosh, FLOATS, "real"),
    ("asinh", torch.asinh, FLOATS, "real"),
    ("acosh", torch.acosh, FLOATS, "ge1"),
    ("atanh", torch.atanh, FLOATS, "unit"),
    ("erf", torch.erf, FLOATS, "real"),
    ("floor", torch.floor, FLOATS + ["int32"], "real"),
    ("ceil", torch.ceil, FLOATS + ["int32"], "real"),
    ("round", torch.round, FLOATS, "real"),
    ("trunc", torch.trunc, FLOATS, "real"),
    ("frac", torch.frac, FLOATS, "real"),
    ("reciprocal", torch.reciprocal, FLOATS, "real"),
    ("sign", torch.sign, FLOATS + ["int32"], "real"),
    ("sgn", torch.sgn, FLOATS, "real"),
    ("square", torch.square, FLOATS + ["int32"], "real"),
    ("deg2rad", torch.deg2rad, FLOATS, "real"),
    ("rad2deg", torch.rad2deg, FLOATS, "real"),
    ("sinc", torch.sinc, FLOATS, "real"),
    ("logit", torch.logit, FLOATS, "unit"),
    ("logit_eps", lambda x: torch.logit(x, eps=0.05), FLOATS, "unit"),
    ("isnan", torch.isnan, FLOATS, "real"),
    ("isinf", torch.isinf, FLOATS + ["int32"], "real"),
    ("isfinite", torch.isfinite, FLOATS, "real"),
    ("nan_to_num", torch.nan_to_num, FLOATS, "real"),
    ("logical_not", torch.logical_not, FLOATS + ["int32", "bool"], "real"),
    ("bitwise_not", torch.bitwise_not, ["int32", "int64", "bool"], "real"),
    ("positive", torch.positive, FLOATS + ["int32"], "real"),
    ("relu", torch.relu, FLOATS + ["int32"], "real"),
    ("sigmoid", torch.sigmoid, FLOATS, "real"),
    ("silu", F.silu, FLOATS, "real"),
    ("gelu", F.gelu, FLOATS, "real"),
    ("hardtanh", F.hardtanh, FLOATS, "real"),
    ("relu6", F.relu6, FLOATS, "real"),
    ("leaky_relu", F.leaky_relu, FLOATS, "real"),
    ("elu", F.elu, FLOATS, "real"),
    ("selu", F.selu, FLOATS, "real"),
    ("celu", F.celu, FLOATS, "real"),
    ("softplus", F.softplus, FLOATS, "real"),
    ("mish", F.mish, FLOATS, "real"),
    ("hardsigmoid", F.hardsigmoid, FLOATS, "real"),
    ("logsigmoid", F.logsigmoid, FLOATS, "real"),
    ("tanhshrink", F.tanhshrink, FLOATS, "real"),
    ("softshrink", F.softshrink, FLOATS, "real"),
    ("hardshrink", F.hardshrink, FLOATS, "real"),
]

BINARY = [
    ("add", torch.add, FLOATS + ["int32"], "real"),
    ("sub", torch.sub, FLOATS + ["int32"], "real"),
    ("mul", torch.mul, FLOATS + ["int32", "bool"], "real"),
    ("div", torch.div, FLOATS + ["int32"], "real"),
    ("remainder", torch.remainder, FLOATS + ["int32"], "real"),
    ("fmod", torch.fmod, FLOATS + ["int32"], "real"),
    ("floor_divide", torch.floor_divide, FLOATS + ["int32"], "real"),
    ("pow", torch.pow, FLOATS, "real"),
    ("float_power", torch.float_power, FLOATS + ["int32"], "real"),
    ("maximum", torch.maximum, FLOATS + ["int32"], "real"),
    ("minimum", torch.minimum, FLOATS + ["int32"], "real"),
    ("fmax", torch.fmax, FLOATS + ["int32"], "real"),
    ("fmin", torch.fmin, FLOATS + ["int32"], "real"),
    ("eq", torch.eq, FLOATS + ["int32"], "real"),
    ("ne", torch.ne, FLOATS + ["int32"], "real"),
    ("lt", torch.lt, FLOATS + ["int32"], "real"),
    ("le", torch.le, FLOATS + ["int32"], "real"),
    ("gt", torch.gt, FLOATS + ["int32"], "real"),
    ("ge", torch.ge, FLOATS + ["int32"], "real"),
    ("logical_and", torch.logical_and, FLOATS + ["int32", "bool"], "real"),
    ("logical_or", torch.logical_or, FLOATS + ["int32", "bool"], "real"),
    ("logical_xor", torch.logical_xor, FLOATS + ["int32", "bool"], "real"),
    ("bitwise_and", torch.bitwise_and, ["int32", "int64", "bool"], "real"),
    ("bitwise_or", torch.bitwise_or, ["int32", "int64", "bool"], "real"),
    ("bitwise_xor", torch.bitwise_xor, ["int32", "int64", "bool"], "real"),
    ("atan2", torch.atan2, FLOATS + ["int32"], "real"),
    ("hypot", torch.hypot, FLOATS, "real"),
    ("copysign", torch.copysign, FLOATS + ["int32"], "real"),
    ("logaddexp", torch.logaddexp, FLOATS, "real"),
    ("logaddexp2", torch.logaddexp2, FLOATS, "real"),
    ("xlogy", torch.xlogy, FLOATS, "real"),
    ("heaviside", torch.heaviside, FLOATS + ["int32"], "real"),
    ("rsub", lambda a, b: torch.rsub(a, b, alpha=2), FLOATS + ["int32"], "real"),
]

# Ops along dim 1 (reductions keep it: rank 2 like the samples): the same samples, the edge row
# reduced or scanned as one line.
DIM1 = [
    ("sum_dim1", lambda x: torch.sum(x, 1, keepdim=True), FLOATS + ["int32", "bool"], "real"),
    ("prod_dim1", lambda x: torch.prod(x, 1, keepdim=True), FLOATS + ["int32"], "real"),
    ("mean_dim1", lambda x: torch.mean(x, 1, keepdim=True), FLOATS, "real"),
    ("amax_dim1", lambda x: torch.amax(x, 1, keepdim=True), FLOATS + ["int32"], "real"),
    ("amin_dim1", lambda x: torch.amin(x, 1, keepdim=True), FLOATS + ["int32"], "real"),
    ("argmax_dim1", lambda x: torch.argmax(x, 1, keepdim=True), FLOATS + ["int32"], "real"),
    ("argmin_dim1", lambda x: torch.argmin(x, 1, keepdim=True), FLOATS + ["int32"], "real"),
    ("var_dim1", lambda x: torch.var(x, 1, keepdim=True), FLOATS, "real"),
    ("std_dim1", lambda x: torch.std(x, 1, keepdim=True), FLOATS, "real"),
    ("logsumexp_dim1", lambda x: torch.logsumexp(x, 1, keepdim=True), FLOATS, "real"),
    ("any_dim1", lambda x: torch.any(x, 1, keepdim=True), FLOATS + ["int32", "bool"], "real"),
    ("all_dim1", lambda x: torch.all(x, 1, keepdim=True), FLOATS + ["int32", "bool"], "real"),
    ("cumsum_dim1", lambda x: torch.cumsum(x, 1), FLOATS + ["int32", "bool"], "real"),
    ("cumprod_dim1", lambda x: torch.cumprod(x, 1), FLOATS + ["int32"], "real"),
    ("logcumsumexp_dim1", lambda x: torch.logcumsumexp(x, 1), FLOATS, "real"),
    ("softmax_dim1", lambda x: torch.softmax(x, 1), FLOATS, "real"),
    ("log_softmax_dim1", lambda x: torch.log_softmax(x, 1), FLOATS, "real"),
    ("softmin_dim1", lambda x: F.softmin(x, 1), FLOATS, "real"),
    ("argsort_dim1", lambda x: torch.argsort(x, stable=True, dim=1), FLOATS + ["int32"], "real"),
]

# integer division by zero raises in torch and in tenet (tested as an error input): keep b nonzero
NONZERO_DIVISOR = {"div", "remainder", "fmod", "floor_divide"}


def rand(shape, dtype, domain, gen):
    if dtype == "bool":
        return torch.rand(shape, generator=gen) > 0.5
    x = torch.randn(shape, generator=gen, dtype=torch.float64) * 2
    if domain == "pos":
        x = x.abs() + 0.25
    elif domain == "unit":
        x = torch.tanh(x) * 0.99
    elif domain == "ge1":
        x = x.abs() + 1
    if dtype in ("int32", "int64"):
        x = (x * 3).round()
    return x.to(DT[dtype])


def edge(dtype):
    if dtype == "bool":
        return torch.tensor(BOOL_EDGE)
    if dtype in ("int32", "int64"):
        return torch.tensor(INT_EDGE, dtype=DT[dtype])
    return torch.tensor(FLOAT_EDGE, dtype=DT[dtype])


def main():
    ref = ReferenceFile()
    gen = torch.Generator().manual_seed(0)

    for name, fn, dtypes, domain in UNARY + DIM1:
        for dt in dtypes:
            x_edge = edge(dt).reshape(1, -1)
            x_nc = rand((5, 4), dt, domain, gen)
            x_empty = rand((0, 3), dt, domain, gen)
            x_one = rand((1, 1), dt, domain, gen)
            ref.case(f"{name}_{dt}", x_edge=x_edge, out_edge=fn(x_edge), x_nc=x_nc, out_nc=fn(x_nc.t()),
                     x_empty=x_empty, out_empty=fn(x_empty), x_one=x_one, out_one=fn(x_one))

    for name, fn, dtypes, domain in BINARY:
        for dt in dtypes:
            e = edge(dt)
            a_edge = e.reshape(-1, 1)
            b_edge = e.reshape(1, -1)
            a_nc = rand((5, 4), dt, domain, gen)
            b_nc = rand((4, 5), dt, domain, gen)
            a_bc = rand((3, 1), dt, domain, gen)
            b_bc = rand((1, 4), dt, domain, gen)
            if name in NONZERO_DIVISOR and dt != "bool" and not DT[dt].is_floating_point:
                b_edge = b_edge[b_edge != 0].reshape(1, -1)
                b_nc = torch.where(b_nc == 0, torch.ones_like(b_nc), b_nc)
                b_bc = torch.where(b_bc == 0, torch.ones_like(b_bc), b_bc)
            a_empty = rand((0, 3), dt, domain, gen)
            b_empty = rand((1, 3), dt, domain, gen)
            ref.case(f"{name}_{dt}", a_edge=a_edge, b_edge=b_edge, out_edge=fn(a_edge, b_edge), a_nc=a_nc, b_nc=b_nc,
                     out_nc=fn(a_nc.t(), b_nc), a_bc=a_bc, b_bc=b_bc, out_bc=fn(a_bc, b_bc), a_empty=a_empty,
                     b_empty=b_empty, out_empty=fn(a_empty, b_empty))

    ref.write("opinfo.txt")


if __name__ == "__main__":
    main()
