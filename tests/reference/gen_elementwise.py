#!/usr/bin/env python3
"""Writes elementwise.txt: inputs and PyTorch outputs for tests/test_elementwise.cpp.

    source /tmp/torchenv.sh && python3 tests/reference/gen_elementwise.py [output path]

Format (see tests/reference.hpp):
    case <name>
    tensor <key> <dtype> <ndim> <sizes...> <values...>
    end
"""

import torch
import torch.nn.functional as F

from reference_writer import ReferenceFile

torch.manual_seed(0)

ref = ReferenceFile()
case = ref.case


# ------------------------------------------------------------------------------------------------
# unary ops
INF, NAN = float("inf"), float("nan")
EDGE = [0.0, -0.0, INF, -INF, NAN, 1e30, -1e30, 3e38, -3e38, 1e-30, -1e-30, 1e-7,
        0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -3.5, 1.0, -1.0, 2.0, -2.0, 0.1, -0.1,
        0.7, -0.7, 3.7, -3.7, 10.0, -10.0, 20.0, -20.0, 88.5, -88.5, 100.0, -100.0, 1000.0, -1000.0,
        0.49999997, 8388609.0, -8388609.0, 1.0e10, -1.0e10, 5.0, 0.25, -0.25]
SMALL = [0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1.0, -1.0, 0.1, -0.1, 0.7, 3.7, -3.7, 5.0, -6.0, 0.3]

UNARY = {
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "exp2": torch.exp2,
    "expm1": torch.expm1,
    "log": torch.log,
    "log2": torch.log2,
    "log1p": torch.log1p,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "tanh": torch.tanh,
    "erf": torch.erf,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
    "trunc": torch.trunc,
    "sign": torch.sign,
    "reciprocal": torch.reciprocal,
    "square": torch.square,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    # torch's float32/bfloat16 gelu gives nan at +inf and inf at 3e38 (its evaluation order
    # overflows); tenet follows the mathematical value there, so the reference for gelu is torch's
    # float64 gelu rounded to the input dtype (within tolerance of torch's own everywhere else).
    "gelu": lambda x: F.gelu(x.double()).to(x.dtype) if x.is_floating_point() else F.gelu(x),
    "gelu_tanh": lambda x: F.gelu(x.double(), approximate="tanh").to(x.dtype) if x.is_floating_point()
                 else F.gelu(x, approximate="tanh"),
}

for dt, tag in [(torch.float32, "f32"), (torch.float64, "f64")]:
    x = torch.tensor(EDGE, dtype=dt)
    for name, fn in UNARY.items():
        case(f"unary_{name}_{tag}", x=x, out=fn(x))

# half types: a representative subset on values exactly representable in each type
HALF_OPS = ["neg", "abs", "exp", "log", "sqrt", "sin", "tanh", "erf", "round", "floor", "reciprocal",
            "relu", "sigmoid", "silu", "gelu", "gelu_tanh", "square", "rsqrt"]
for dt, tag in [(torch.bfloat16, "bf16"), (torch.float16, "f16")]:
    x = torch.tensor(SMALL + [INF, -INF, NAN], dtype=dt)
    for name in HALF_OPS:
        case(f"unary_{name}_{tag}", x=x, out=UNARY[name](x))

# int32: floating ops promote to float32, the rest stay int32
xi = torch.tensor([0, 1, -1, 2, -3, 7, -8, 15, 100, -100], dtype=torch.int32)
for name in ["neg", "abs", "exp", "log", "sqrt", "sin", "sigmoid", "reciprocal", "square", "sign", "relu",
             "floor", "round", "erf", "tanh"]:
    case(f"unary_{name}_i32", x=xi, out=UNARY[name](xi))

# isnan / logical_not
xf = torch.tensor([0.0, -0.0, 1.0, NAN, INF, -2.5], dtype=torch.float32)
case("isnan_f32", x=xf, out=torch.isnan(xf))
case("logical_not_f32", x=xf, out=torch.logical_not(xf))

# ------------------------------------------------------------------------------------------------
# binary ops, float32 (same shape) with edge values
a = torch.tensor([[5.5, -5.5, 5.5, -5.5, 0.0, -0.0],
                  [3.0, -3.0, 7.0, 2.0, INF, NAN],
                  [1.0, -2.0, 0.5, 10.0, -1e30, 4.0],
                  [0.0, 1.0, -1.0, 0.0, 2.5, -7.25]], dtype=torch.float32)
b = torch.tensor([[2.0, 2.0, -2.0, -2.0, 3.0, 3.0],
                  [0.0, 0.0, 2.5, -0.0, 1.0, 1.0],
                  [NAN, INF, -INF, 3.0, 2.0, 0.5],
                  [0.0, -0.5, 3.0, -1.0, 2.0, 1.5]], dtype=torch.float32)
binf = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "remainder": torch.remainder, "fmod": torch.fmod,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
}
for name, fn in binf.items():
    case(f"binary_{name}_f32", a=a, b=b, out=fn(a, b))

# integers: remainder / fmod / div with negative operands, int32 with int64
ai = torch.tensor([7, -7, 7, -7, 0, 5, -9, 9, 100, -1], dtype=torch.int32)
bi = torch.tensor([3, 3, -3, -3, 4, 5, 2, -2, 7, 10], dtype=torch.int64)
pi = torch.tensor([0, 1, 2, 3, 4, 2, 3, 1, 2, 5], dtype=torch.int64)
for name in ["add", "sub", "mul", "div", "maximum", "minimum", "remainder", "fmod", "lt", "eq", "ge"]:
    case(f"binary_{name}_i32i64", a=ai, b=bi, out=binf[name](ai, bi))
case("binary_pow_i32i64", a=ai, b=pi, out=torch.pow(ai, pi))
case("binary_floordiv_i32i64", a=ai, b=bi, out=torch.div(ai, bi, rounding_mode="floor"))
ai32b = bi.to(torch.int32)
case("binary_remainder_i32i32", a=ai, b=ai32b, out=torch.remainder(ai, ai32b))
case("binary_div_i32i32", a=ai, b=ai32b, out=ai / ai32b)

# float32 with int32
af = torch.tensor([7.5, -7.5, 7.5, -7.5, 0.25, 5.0, -9.0, 9.0, 100.0, -1.0], dtype=torch.float32)
for name in ["add", "mul", "div", "remainder", "fmod", "pow", "maximum", "gt"]:
    case(f"binary_{name}_f32i32", a=af, b=ai32b, out=binf[name](af, ai32b))

# float64 binary
a64, b64 = a.double().reshape(-1), b.double().reshape(-1)
for name in ["add", "div", "pow", "remainder", "fmod", "maximum"]:
    case(f"binary_{name}_f64", a=a64, b=b64, out=binf[name](a64, b64))

# broadcasting
x31 = torch.randn(3, 1)
x14 = torch.randn(1, 4)
case("bcast_31_14", a=x31, b=x14, add=x31 + x14, mul=x31 * x14, max=torch.maximum(x31, x14), lt=x31 < x14)
x4 = torch.randn(4)
x234 = torch.randn(2, 3, 4)
case("bcast_4_234", a=x4, b=x234, sub=x4 - x234, div=x234 / x4, pow=torch.pow(x234.abs(), x4))

# scalars
s = torch.tensor([[-2.0, -0.5, 0.0], [1.0, 2.5, 4.0]], dtype=torch.float32)
si = torch.tensor([[-7, -2, 0], [1, 3, 8]], dtype=torch.int32)
sd = torch.tensor([[2, 2, 3], [-2, 2, 3]], dtype=torch.int32)
case("scalar_ops", x=s, xi=si, d=sd,
     mul25=s * 2.5, rsub2=2 - s, div_int=si / sd, int_mul25=si * 2.5, int_add2=si + 2,
     int_rem3=si % 3, int_rem_neg3=torch.remainder(si, -3), pow2=s ** 2, rpow2=torch.pow(2.0, s),
     int_lt15=si < 1.5, fdiv2=s / 2)

# non-contiguous inputs
nc = torch.randn(4, 6)
nc2 = torch.randn(6, 4)
case("noncontig", x=nc, y=nc2, tadd=nc.t() + nc2, sl=nc[:, 0:6:2] * 3.0, slexp=torch.exp(nc[0:4:2, 1:6:2]))

# dyn-shaped
d = torch.randn(3, 4)
d2 = torch.randn(3, 4)
case("dyn", x=d, y=d2, out=torch.relu(d) * d2 - 1.0, bc=d + d2[0:1, :])

# size-1 dims
u = torch.randn(1, 1, 4)
v = torch.randn(1, 3, 1)
w = torch.randn(3, 1, 1)
case("size1", u=u, v=v, w=w, uv=u * v, uvw=u + v + w, expw=torch.exp(w))

# fused chain gelu(x * a + b) * c
fx = torch.randn(5, 7)
fa = torch.randn(7)
fb = torch.randn(5, 1)
fc = torch.randn(5, 7)
case("fused_chain", x=fx, a=fa, b=fb, c=fc, out=F.gelu(fx * fa + fb) * fc,
     out_tanh=F.gelu(fx * fa + fb, approximate="tanh") * fc)

# where / clamp
wc = torch.tensor([[True, False, True], [False, True, False]])
wa = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
wb = torch.tensor([[-1, -2, -3], [-4, -5, -6]], dtype=torch.int32)
wrow = torch.tensor([10.0, 20.0, 30.0])
case("where", c=wc, a=wa, b=wb, row=wrow, out=torch.where(wc, wa, wb), out_scalar=torch.where(wc, wa, 0.5),
     out_bcast=torch.where(wc, wrow, wa), out_cmp=torch.where(wa > 2.5, wa, -wa))
cx = torch.tensor([-5.0, -1.0, -0.5, 0.0, 0.5, 1.0, 5.0, NAN, INF, -INF], dtype=torch.float32)
clo = torch.tensor([-1.0, -2.0, 0.0, 0.5, -1.0, 0.0, 2.0, 0.0, 0.0, 0.0], dtype=torch.float32)
chi = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 2.0, 3.0, 1.0, 1.0, 1.0], dtype=torch.float32)
cxi = torch.tensor([-5, -1, 0, 1, 2, 3, 5, 7, 9, -9], dtype=torch.int32)
case("clamp", x=cx, lo=clo, hi=chi, xi=cxi,
     scal=torch.clamp(cx, -1.0, 1.0), tens=torch.clamp(cx, clo, chi),
     cmin=torch.clamp_min(cx, 0.25), cmax=torch.clamp_max(cx, 0.25),
     int_scal=torch.clamp(cxi, -2, 4), int_float=torch.clamp(cxi, -2.5, 4.5))

# empty tensor
e = torch.empty(0, 3)
case("empty", x=e, out=torch.exp(e) + e)

# mixed dtype promotion
i8 = torch.tensor([-128, -1, 0, 1, 127, 100], dtype=torch.int8)
u8 = torch.tensor([255, 255, 0, 200, 255, 100], dtype=torch.uint8)
h16 = torch.tensor([1.5, -2.25, 1000.0, 0.1, 65504.0, -3.0], dtype=torch.float16)
b16 = torch.tensor([0.5, 3.0, 1.0e30, 0.1, 256.0, -1.0], dtype=torch.bfloat16)
bl1 = torch.tensor([True, True, False, False, True, False])
bl2 = torch.tensor([True, False, True, False, True, True])
ii = torch.tensor([1, -2, 3, 0, 5, 7], dtype=torch.int32)
z64 = torch.tensor(0.1, dtype=torch.float64)
case("promote", i8=i8, u8=u8, h16=h16, b16=b16, bl1=bl1, bl2=bl2, ii=ii, z64=z64,
     i8u8=i8 + u8, h16b16=h16 + b16, blbl=bl1 + bl2, blmul=bl1 * bl2, ii_z64=ii + z64, ii_z64_mul=ii * z64,
     h16_f32_zero=h16 * torch.tensor(2.0), bl_i8=bl1 + i8)

# casts
cf = torch.tensor([-2.7, -2.5, -1.0, -0.9, -0.5, -0.0, 0.0, 0.5, 0.9, 1.0, 2.5, 2.9, 1000.7, -1000.7],
                  dtype=torch.float32)
cb = torch.tensor([0.0, -0.0, 0.1, -3.0, NAN, INF, -INF, 1e-40], dtype=torch.float32)
# bfloat16 rounding: ties to even, carries, overflow to inf, subnormals
one = 1.0
cbf = torch.tensor([one + 2 ** -8, one + 3 * 2 ** -8, one + 2 ** -8 + 2 ** -20, one - 2 ** -9, 3.3895314e38,
                    3.4028235e38, -3.4028235e38, 1e-40, 0.1, -0.1, 3.14159265, 65504.0, NAN, INF, -INF,
                    255.5, 257.0, 259.0], dtype=torch.float32)
c64 = torch.tensor([-2.7, -0.5, 0.5, 2.9, 1e9, -1e9], dtype=torch.float64)
case("cast", f=cf, bsrc=cb, bfsrc=cbf, d=c64,
     to_i32=cf.to(torch.int32), to_i64=cf.to(torch.int64), to_bool=cb.to(torch.bool),
     to_bf16=cbf.to(torch.bfloat16), to_f16=cbf.to(torch.float16), d_to_i32=c64.to(torch.int32),
     bool_to_f=bl1.to(torch.float32), i8_to_f=i8.to(torch.float32))

ref.write("elementwise.txt")
