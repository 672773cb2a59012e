"""Differential fuzzer: random tenet expression programs whose expected values come from PyTorch.

Each program draws inputs (dtype, sizes, which extents are static in the C++ type, a strided view
of a larger base), builds a random expression over them (pointwise ops with broadcasting and type
promotion, C++/Python scalars, reductions with keepdim and negative dims, softmax-like rows,
matmul of strided and transposed operands, views and in-place updates of evaluated intermediates),
evaluates it with PyTorch, and writes:

  - a reference file (tests/reference.hpp's format) with every input's base and the outputs;
  - a C++ file of Catch2 cases that rebuilds the same program with tenet and compares dtype, sizes
    and values (and, in --grad mode, the gradient of every input's base).

Programs PyTorch rejects are drawn again. CI compiles and runs a committed batch
(tests/test_fuzz.cpp and tests/test_autograd_fuzz.cpp, written by tests/fuzz/regen.sh); a longer
run with fresh seeds is tests/fuzz/run.py (docs/testing.md).

    python3 gen_fuzz.py --seed 1 --count 60 --cpp out.cpp --ref out.txt --name fuzz [--grad]
"""
import argparse
import math
import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from reference_writer import ReferenceFile  # noqa: E402

CPP = {
    torch.bool: "bool",
    torch.uint8: "std::uint8_t",
    torch.int8: "std::int8_t",
    torch.int16: "std::int16_t",
    torch.int32: "std::int32_t",
    torch.int64: "std::int64_t",
    torch.float16: "tenet::float16",
    torch.bfloat16: "tenet::bfloat16",
    torch.float32: "float",
    torch.float64: "double",
}
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


class V:
    """A value of the program: its PyTorch tensor and the C++ expression that computes it.
    `smooth` is False once a value went through an op whose result jumps (comparisons, rounding):
    such values are only built from leaves, so a last-bit difference cannot flip them."""

    def __init__(self, t, cpp, leaf=False):
        self.t = t
        self.cpp = cpp
        self.leaf = leaf


class Program:
    def __init__(self, rng, grad):
        self.rng = rng
        self.grad = grad
        self.inputs = []  # (name, base tensor, cpp type, view code)
        self.lines = []  # C++ statements before the result
        self.ops = []  # names of the ops used (for the case's description)
        self.tmp = 0
        self.casts = []  # dtypes cast to (their precision bounds the program's)

    def tolerance(self):
        """Relative tolerance of the program: the coarsest float type any value passes through
        (integer and bool inputs compute in float32 when an op makes them floating)."""
        tol = {torch.bfloat16: 3e-2, torch.float16: 4e-3, torch.float32: 2e-5, torch.float64: 1e-11}
        dts = [b.dtype for _, b, _, _ in self.inputs] + self.casts
        return max(tol.get(d, 2e-5) for d in dts)

    # ---- inputs ---------------------------------------------------------------------------------
    def draw_dtype(self):
        r = self.rng
        if self.grad:
            return r.choice([torch.float32, torch.float32, torch.float64])
        return r.choice([torch.float32] * 5 + [torch.float64] * 2 + [torch.int64] * 2 + [torch.int32] * 2 +
                        [torch.bool, torch.bfloat16, torch.float16, torch.int16, torch.int8, torch.uint8])

    def draw_sizes(self, rank):
        r = self.rng
        return [r.choice([1, 2, 3, 4, 5] if r.random() > 0.04 else [0]) for _ in range(rank)]

    def values(self, sizes, dtype):
        g = torch.Generator().manual_seed(self.rng.randrange(1 << 30))
        if dtype == torch.bool:
            return torch.randint(0, 2, sizes, generator=g).bool()
        if dtype == torch.uint8:
            return torch.randint(0, 9, sizes, generator=g).to(dtype)
        if dtype in INTS:
            return torch.randint(-6, 7, sizes, generator=g).to(dtype)
        x = torch.randn(sizes, generator=g, dtype=torch.float64)
        return x.to(dtype)

    def leaf(self, sizes=None, dtype=None):
        r = self.rng
        dtype = dtype or self.draw_dtype()
        if sizes is None:
            sizes = self.draw_sizes(r.choice([0, 1, 1, 2, 2, 2, 3, 3]))
        rank = len(sizes)
        view = r.choice(["plain", "plain", "t", "narrow", "step"]) if rank else "plain"
        if view == "t" and rank < 2:
            view = "plain"
        base_sizes = list(sizes)
        code = ""
        d = r.randrange(rank) if rank else 0
        if view == "t":
            base_sizes[0], base_sizes[1] = sizes[1], sizes[0]
            code = ".t()" if rank == 2 else ".template transpose<0, 1>()"
        elif view == "narrow":
            base_sizes[d] = sizes[d] + 2
            code = f".template narrow<{d}>(1, {sizes[d]})"
        elif view == "step":
            base_sizes[d] = 2 * sizes[d] + 1
            code = f".template slice<{d}>(1, {2 * sizes[d] + 1}, 2)"
        base = self.values(base_sizes, dtype)
        # which extents of the base are static in the C++ type
        exts = [str(s) if r.random() < 0.5 else "tenet::dyn" for s in base_sizes]
        ctype = f"{CPP[dtype]}, tenet::shape<{', '.join(exts)}>"
        name = f"x{len(self.inputs)}"
        if self.grad:
            base = base.clone().requires_grad_()
        # the same view in PyTorch, of the base the gradient is taken for
        if view == "t":
            t = base.transpose(0, 1)
        elif view == "narrow":
            t = base.narrow(d, 1, sizes[d])
        elif view == "step":
            t = base[(slice(None),) * d + (slice(1, 2 * sizes[d] + 1, 2),)]
        else:
            t = base
        self.inputs.append((name, base, ctype, code))
        return V(t, f"{name}{code}", leaf=True)

    # ---- ops ------------------------------------------------------------------------------------
    def scalar_literal(self, dtype):
        r = self.rng
        if dtype.is_floating_point or (not self.grad and r.random() < 0.3):
            v = r.choice([0.5, 1.5, 2.0, -0.75, 3.0])
            return v, repr(v)
        if dtype == torch.bool:
            v = r.choice([True, False])
            return v, "true" if v else "false"
        v = r.choice([2, 3, -1])
        return v, str(v)

    def unary(self, a):
        r = self.rng
        fl = a.t.dtype.is_floating_point
        table = [
            ("neg", lambda t: -t, lambda c: f"-({c})", a.t.dtype != torch.bool),
            ("abs", torch.abs, lambda c: f"tenet::abs({c})", a.t.dtype != torch.bool),
            ("exp", torch.exp, lambda c: f"tenet::exp({c})", True),
            ("tanh", torch.tanh, lambda c: f"tenet::tanh({c})", True),
            ("sigmoid", torch.sigmoid, lambda c: f"tenet::sigmoid({c})", True),
            ("sin", torch.sin, lambda c: f"tenet::sin({c})", True),
            ("cos", torch.cos, lambda c: f"tenet::cos({c})", True),
            ("sqrt", torch.sqrt, lambda c: f"tenet::sqrt({c})", True),
            ("log1p", torch.log1p, lambda c: f"tenet::log1p({c})", True),
            ("relu", torch.relu, lambda c: f"tenet::relu({c})", a.t.dtype != torch.bool),
            ("gelu", torch.nn.functional.gelu, lambda c: f"tenet::gelu({c})", fl),
            ("silu", torch.nn.functional.silu, lambda c: f"tenet::silu({c})", fl),
            ("erf", torch.erf, lambda c: f"tenet::erf({c})", True),
            ("square", torch.square, lambda c: f"tenet::square({c})", a.t.dtype != torch.bool),
            ("softplus", torch.nn.functional.softplus, lambda c: f"tenet::softplus({c})", fl),
            ("hardtanh", torch.nn.functional.hardtanh, lambda c: f"tenet::hardtanh({c})",
             a.t.dtype not in (torch.bool, torch.uint8)),
            ("relu6", torch.nn.functional.relu6, lambda c: f"tenet::relu6({c})", a.t.dtype != torch.bool),
            ("sinc", torch.sinc, lambda c: f"tenet::sinc({c})", True),
            ("acosh", torch.acosh, lambda c: f"tenet::acosh({c})", fl),
            ("asinh", torch.asinh, lambda c: f"tenet::asinh({c})", fl),
            ("nan_to_num", torch.nan_to_num, lambda c: f"tenet::nan_to_num({c})", True),
            ("clamp", lambda t: torch.clamp(t, -0.5, 1.0), lambda c: f"tenet::clamp({c}, -0.5, 1.0)",
             a.t.dtype.is_floating_point),
            ("pow2", lambda t: torch.pow(t, 2), lambda c: f"tenet::pow({c}, 2)", a.t.dtype != torch.bool),
            ("rounding", None, None, a.leaf and a.t.dtype.is_floating_point and not self.grad),
            ("cast", None, None, True),
        ]
        name, tf, cf, ok = r.choice(table)
        if not ok:
            return None
        if name == "rounding":
            fn = r.choice(["floor", "ceil", "round", "trunc", "sign"])
            return V(getattr(torch, fn)(a.t), f"tenet::{fn}({a.cpp})"), fn
        if name == "cast":
            dt = r.choice([torch.float32, torch.float64] if self.grad else list(CPP))
            if self.grad and not a.t.dtype.is_floating_point:
                return None
            self.casts.append(dt)
            return V(a.t.to(dt), f"tenet::cast<{CPP[dt]}>({a.cpp})"), name
        return V(tf(a.t), cf(a.cpp)), name

    def binary(self, a, b):
        r = self.rng
        table = [
            ("add", lambda x, y: x + y, "({} + {})"),
            ("sub", lambda x, y: x - y, "({} - {})"),
            ("mul", lambda x, y: x * y, "({} * {})"),
            ("div", lambda x, y: x / y, "({} / {})"),
            ("maximum", torch.maximum, "tenet::maximum({}, {})"),
            ("minimum", torch.minimum, "tenet::minimum({}, {})"),
            ("atan2", torch.atan2, "tenet::atan2({}, {})"),
        ]
        name, tf, cf = r.choice(table)
        if name in ("div", "atan2") and (a.t.dtype == torch.bool and b.t.dtype == torch.bool):
            return None
        if name == "sub" and (a.t.dtype == torch.bool or b.t.dtype == torch.bool):
            return None
        if name == "div" and not (a.t.dtype.is_floating_point or b.t.dtype.is_floating_point):
            # integer true division: the divisor must be nonzero (zero is the hardening issue's)
            if (b.t == 0).any():
                return None
        return V(tf(a.t, b.t), cf.format(a.cpp, b.cpp)), name

    def with_scalar(self, a):
        r = self.rng
        v, lit = self.scalar_literal(a.t.dtype)
        op = r.choice(["+", "*", "-", "/"])
        if a.t.dtype == torch.bool and op in "-/":
            return None
        if isinstance(v, bool) and op == "-":
            return None
        left = r.random() < 0.5
        if op == "/" and left and not (a.t.dtype.is_floating_point or isinstance(v, float)):
            if (a.t == 0).any():
                return None
        if op == "/" and not left and v == 0:
            return None
        py = {"+": lambda x, y: x + y, "*": lambda x, y: x * y, "-": lambda x, y: x - y, "/": lambda x, y: x / y}[op]
        t = py(v, a.t) if left else py(a.t, v)
        c = f"({lit} {op} {a.cpp})" if left else f"({a.cpp} {op} {lit})"
        return V(t, c), "scalar" + op

    def compare_where(self, a, b, c):
        """where(cmp(leaf, leaf or scalar), b, c): the condition only from leaves."""
        r = self.rng
        if not (a.leaf and a.t.dtype != torch.bool):
            return None
        op = r.choice([">", "<", ">=", "!="])
        cond = {">": a.t > 0, "<": a.t < 0, ">=": a.t >= 0, "!=": a.t != 0}[op]
        zero = "0" if not a.t.dtype.is_floating_point else "0.0"
        ccond = f"({a.cpp} {op} {zero})"
        return V(torch.where(cond, b.t, c.t), f"tenet::where({ccond}, {b.cpp}, {c.cpp})"), "where"

    def reduction(self, a):
        r = self.rng
        rank = a.t.dim()
        name = r.choice(["sum", "sum", "mean", "amax", "amin", "prod", "var", "std", "logsumexp", "softmax",
                         "log_softmax", "cumsum", "sum_all"])
        fl = a.t.dtype.is_floating_point
        if name == "sum_all" or rank == 0:
            if name not in ("sum", "sum_all", "amax", "amin"):
                return None
            t = a.t.sum() if name in ("sum", "sum_all") else (a.t.amax() if name == "amax" else a.t.amin())
            if a.t.numel() == 0 and name in ("amax", "amin"):
                return None
            fn = "sum" if name == "sum_all" else name
            return V(t, f"tenet::{fn}({a.cpp})"), name
        d = r.randrange(rank)
        dd = d - rank if r.random() < 0.3 else d
        keep = r.random() < 0.4
        kd = ", tenet::keepdim" if keep else ""
        if name in ("mean", "var", "std", "logsumexp", "softmax", "log_softmax") and not fl:
            return None
        if name in ("amax", "amin") and a.t.shape[d] == 0:
            return None
        if name == "prod" and a.t.dtype in (torch.int8, torch.uint8, torch.int16):
            return None
        if name in ("var", "std") and self.grad and a.t.shape[d] < 2:
            return None
        try:
            if name == "sum":
                t = a.t.sum(d, keepdim=keep)
            elif name == "mean":
                t = a.t.mean(d, keepdim=keep)
            elif name == "amax":
                t = a.t.amax(d, keepdim=keep)
            elif name == "amin":
                t = a.t.amin(d, keepdim=keep)
            elif name == "prod":
                t = a.t.prod(d, keepdim=keep)
            elif name == "var":
                t = a.t.var(d, keepdim=keep)
            elif name == "std":
                t = a.t.std(d, keepdim=keep)
            elif name == "logsumexp":
                t = torch.logsumexp(a.t, d, keepdim=keep)
            elif name == "softmax":
                t, kd = torch.softmax(a.t, d), ""
            elif name == "log_softmax":
                t, kd = torch.log_softmax(a.t, d), ""
            else:
                t, kd = torch.cumsum(a.t, d), ""
        except RuntimeError:
            return None
        return V(t, f"tenet::{name}<{dd}>({a.cpp}{kd})"), name

    def matmul(self):
        r = self.rng
        dt = r.choice([torch.float32, torch.float32, torch.float64] if self.grad else
                      [torch.float32, torch.float64, torch.int64, torch.bfloat16])
        m, k, n = (r.choice([1, 1, 2, 3, 5]) for _ in range(3))
        kind = r.choice(["mm", "mv", "vm", "bmm", "dot"])
        if kind == "mm":
            a, b = self.leaf([m, k], dt), self.leaf([k, n], dt)
        elif kind == "mv":
            a, b = self.leaf([m, k], dt), self.leaf([k], dt)
        elif kind == "vm":
            a, b = self.leaf([k], dt), self.leaf([k, n], dt)
        elif kind == "bmm":
            bs = r.choice([1, 2, 3])
            a, b = self.leaf([bs, m, k], dt), self.leaf([r.choice([1, bs]), k, n], dt)
        else:
            a, b = self.leaf([k], dt), self.leaf([k], dt)
        fn = "dot" if kind == "dot" else "matmul"
        t = torch.dot(a.t, b.t) if kind == "dot" else torch.matmul(a.t, b.t)
        return V(t, f"tenet::{fn}({a.cpp}, {b.cpp})"), fn

    def attention(self):
        """scaled_dot_product_attention of strided leaves: ranks 2-4, L != S, odd head dims, GQA,
        bool and float masks broadcast from fewer dims, causal, scale, and a forced variant."""
        r = self.rng
        dt = r.choice([torch.float32, torch.float32, torch.float64] if self.grad else
                      [torch.float32, torch.float32, torch.float64, torch.bfloat16, torch.float16])
        rank = r.choice([2, 3, 4, 4])
        L, S = r.choice([1, 2, 3, 5, 9]), r.choice([1, 2, 4, 7] if r.random() > 0.05 else [0])
        E, Ev = r.choice([1, 3, 4, 8, 16]), r.choice([1, 2, 5, 8])
        batch = [r.choice([1, 2, 3]) for _ in range(rank - 2)]
        kv_batch = list(batch)
        gqa = rank >= 3 and r.random() < 0.2
        if gqa:
            kv_batch[-1] = r.choice([1, 2])
            batch[-1] = kv_batch[-1] * r.choice([1, 2, 3])
        q = self.leaf(batch + [L, E], dt)
        if r.random() < 0.3:
            out = self.unary(q)
            q = out[0] if out and out[0].t.dtype == dt else q
        k, v = self.leaf(kv_batch + [S, E], dt), self.leaf(kv_batch + [S, Ev], dt)
        mask_kind = r.choice(["none", "none", "causal", "bool", "float"])
        m = None
        if mask_kind in ("bool", "float"):
            full = batch + [L, S]
            sizes = full[r.randrange(len(full) - 1):]  # a suffix of at least (L, S)
            sizes = [1 if r.random() < 0.25 else n for n in sizes]
            m = self.leaf(sizes, torch.bool if mask_kind == "bool" else dt)
        scale = None if r.random() < 0.6 else r.choice([0.3, 1.0, 1.7])
        variants = ["", "", "math", "memory_efficient"] + (["flash"] if m is None else [])
        if self.grad and mask_kind == "float":
            variants = ["", "math"]  # the mask's gradient: only the math backward gives it
        forced = r.choice(variants)
        t = torch.nn.functional.scaled_dot_product_attention(
            q.t, k.t, v.t, attn_mask=None if m is None else m.t, is_causal=mask_kind == "causal", scale=scale,
            enable_gqa=gqa)
        opts = []
        if mask_kind == "causal":
            opts.append(".is_causal = true")
        if scale is not None:
            opts.append(f".scale = {scale!r}")
        if gqa:
            opts.append(".enable_gqa = true")
        args = f"{q.cpp}, {k.cpp}, {v.cpp}" + (f", {m.cpp}" if m is not None else "")
        if opts:
            args += ", tenet::sdpa_options{" + ", ".join(opts) + "}"
        fn = "tenet::scaled_dot_product_attention" + (f"<tenet::sdpa::{forced}>" if forced else "")
        return V(t, f"{fn}({args})"), "sdpa" + (f"<{forced}>" if forced else "") + (f".{mask_kind}" if m is not None or
                                                                                      mask_kind == "causal" else "")

    def conv(self):
        """conv2d, conv_transpose2d and the 2-D poolings of strided leaves: random geometry (stride,
        padding including "same" and "valid", dilation, groups, ceil_mode), options given at run time
        or as template arguments (static output extents), with and without bias."""
        r = self.rng
        F = torch.nn.functional
        dt = r.choice([torch.float32, torch.float32, torch.float64])
        N, H, W = r.choice([1, 2, 3]), r.randint(1, 9), r.randint(1, 9)
        kind = r.choice(["conv", "conv", "conv", "convt", "maxpool", "avgpool", "adaptive"])
        pair = lambda a, b: f"tenet::ints<2>{{{a}, {b}}}" if a != b else str(a)
        if kind in ("conv", "convt"):
            G = r.choice([1, 1, 2])
            C, O = G * r.randint(1, 3), G * r.randint(1, 3)
            kh, kw = r.randint(1, 3), r.randint(1, 3)
            sh, sw = r.choice([1, 1, 2, 3]), r.choice([1, 1, 2])
            dh, dw = r.choice([1, 1, 2]), r.choice([1, 2])
            if kind == "conv" and r.random() < 0.35:
                # 3x3 stride 1 with 16+ channels: the CPU's Winograd kernel (backend/cpu/winograd.hpp)
                G, C, O, kh, kw, sh, sw, dh, dw = 1, r.randint(16, 19), r.randint(16, 19), 3, 3, 1, 1, 1, 1
                N, H, W = 1, r.randint(1, 5), r.randint(1, 5)
            x = self.leaf([N, C, H, W], dt)
            bias = self.leaf([O], dt) if r.random() < 0.6 else None
            if kind == "conv":
                w = self.leaf([O, C // G, kh, kw], dt)
                mode = r.choice(["pad", "pad", "pad", "same", "valid"])
                if mode == "same":
                    sh = sw = 1
                ph, pw = (r.randint(0, kh // 2 + 1), r.randint(0, kw // 2 + 1)) if mode == "pad" else (0, 0)
                pad = {"same": "same", "valid": "valid"}.get(mode, (ph, pw))
                t = F.conv2d(x.t, w.t, None if bias is None else bias.t, (sh, sw), pad, (dh, dw), G)
                padc = {"same": "tenet::conv_pad<2>(tenet::conv_padding::same)",
                        "valid": "tenet::conv_pad<2>(tenet::conv_padding::valid)"}.get(
                    mode, f"tenet::conv_pad<2>{{{ph}, {pw}}}" if ph != pw else str(ph))
                opts = (f"tenet::conv2d_options{{.stride = {pair(sh, sw)}, .padding = {padc}, "
                        f".dilation = {pair(dh, dw)}, .groups = {G}}}")
                static = r.random() < 0.4
                args = f"{x.cpp}, {w.cpp}" + (f", {bias.cpp}" if bias is not None else "")
                cpp = f"tenet::conv2d<{opts}>({args})" if static else f"tenet::conv2d({args}, {opts})"
                return V(t, cpp), f"conv2d.{mode}" + (".static" if static else "")
            w = self.leaf([C, O // G, kh, kw], dt)
            ph, pw = r.randint(0, (kh - 1) * dh), r.randint(0, (kw - 1) * dw)
            oph, opw = r.randint(0, max(sh, dh) - 1), r.randint(0, max(sw, dw) - 1)
            t = F.conv_transpose2d(x.t, w.t, None if bias is None else bias.t, (sh, sw), (ph, pw), (oph, opw), G,
                                   (dh, dw))
            opts = (f"tenet::conv_transpose2d_options{{.stride = {pair(sh, sw)}, .padding = {pair(ph, pw)}, "
                    f".output_padding = {pair(oph, opw)}, .groups = {G}, .dilation = {pair(dh, dw)}}}")
            args = f"{x.cpp}, {w.cpp}" + (f", {bias.cpp}" if bias is not None else "")
            return V(t, f"tenet::conv_transpose2d({args}, {opts})"), "conv_transpose2d"
        C = r.randint(1, 3)
        x = self.leaf([N, C, H, W], dt)
        if kind == "adaptive":
            oh, ow = r.randint(1, H + 2), r.randint(1, W + 2)
            return V(F.adaptive_avg_pool2d(x.t, (oh, ow)),
                     f"tenet::adaptive_avg_pool2d({x.cpp}, {pair(oh, ow)})"), "adaptive_avg_pool2d"
        kh, kw = r.randint(1, 3), r.randint(1, 3)
        sh, sw = r.choice([0, 1, 2]), r.choice([0, 1, 2])
        ph, pw = r.randint(0, kh // 2), r.randint(0, kw // 2)
        ceil = r.random() < 0.3
        stride = (sh or kh, sw or kw)
        if kind == "maxpool":
            dh, dw = r.choice([1, 1, 2]), r.choice([1, 2])
            t = F.max_pool2d(x.t, (kh, kw), stride, (ph, pw), (dh, dw), ceil_mode=ceil)
            opts = (f"tenet::max_pool2d_options{{.stride = {pair(sh, sw)}, .padding = {pair(ph, pw)}, "
                    f".dilation = {pair(dh, dw)}, .ceil_mode = {str(ceil).lower()}}}")
            static = r.random() < 0.4
            cpp = (f"tenet::max_pool2d<{pair(kh, kw)}, {opts}>({x.cpp})" if static else
                   f"tenet::max_pool2d({x.cpp}, {pair(kh, kw)}, {opts})")
            return V(t, cpp), "max_pool2d" + (".static" if static else "")
        cip = r.random() < 0.6
        div = r.choice([None, None, None, 2, 5])
        t = F.avg_pool2d(x.t, (kh, kw), stride, (ph, pw), ceil_mode=ceil, count_include_pad=cip, divisor_override=div)
        opts = (f"tenet::avg_pool2d_options{{.stride = {pair(sh, sw)}, .padding = {pair(ph, pw)}, "
                f".ceil_mode = {str(ceil).lower()}, .count_include_pad = {str(cip).lower()}"
                + (f", .divisor_override = {div}" if div else "") + "}")
        return V(t, f"tenet::avg_pool2d({x.cpp}, {pair(kh, kw)}, {opts})"), "avg_pool2d"

    def materialize(self, a):
        """Evaluates a into a named Tensor, then maybe a view or an in-place update of it."""
        r = self.rng
        name = f"m{self.tmp}"
        self.tmp += 1
        self.lines.append(f"auto {name} = tenet::eval({a.cpp});")
        t = a.t
        rank = t.dim()
        choice = r.choice(["none", "t", "narrow", "select", "unsqueeze", "inplace"])
        if choice == "t" and rank >= 2:
            return V(t.transpose(0, 1), f"{name}.template transpose<0, 1>()"), "view.t"
        if choice == "narrow" and rank >= 1 and t.shape[0] >= 2:
            return V(t.narrow(0, 1, t.shape[0] - 1), f"{name}.template narrow<0>(1, {t.shape[0] - 1})"), "view.narrow"
        if choice == "select" and rank >= 1 and t.shape[rank - 1] >= 1:
            return V(t.select(rank - 1, 0), f"{name}.template select<{rank - 1}>(0)"), "view.select"
        if choice == "unsqueeze":
            d = r.randrange(rank + 1)
            return V(t.unsqueeze(d), f"{name}.template unsqueeze<{d}>()"), "view.unsqueeze"
        if choice == "inplace" and not self.grad and t.dtype != torch.bool:
            other = self.leaf(list(t.shape[r.randrange(rank + 1):]) if rank else [], t.dtype)
            op = r.choice(["add_", "mul_"])
            t2 = t.clone()
            getattr(t2, op)(other.t)
            self.lines.append(f"{name}.{op}({other.cpp});")
            return V(t2, name), "inplace." + op
        return V(t, name), "eval"

    def expr(self, depth):
        r = self.rng
        if depth == 0 or r.random() < 0.15:
            if r.random() < 0.12:
                return self.matmul()[0]
            return self.leaf()
        for _ in range(20):
            kind = r.choice(["unary", "unary", "binary", "binary", "binary", "scalar", "where", "reduce", "reduce",
                             "materialize", "join", "norm"])
            if kind == "unary":
                a = self.expr(depth - 1)
                out = self.unary(a)
            elif kind == "binary":
                a = self.expr(depth - 1)
                b = self.broadcast_partner(a, depth - 1)
                if r.random() < 0.5:
                    a, b = b, a
                out = self.binary(a, b)
            elif kind == "scalar":
                out = self.with_scalar(self.expr(depth - 1))
            elif kind == "where":
                a = self.leaf()
                b = self.broadcast_partner(a, depth - 1)
                c = self.broadcast_partner(a, depth - 1)
                out = self.compare_where(a, b, c)
            elif kind == "reduce":
                out = self.reduction(self.expr(depth - 1))
            elif kind == "join":
                a = self.expr(depth - 1)
                b = self.same_shape(a, depth - 1)
                out = self.join(a, b)
            elif kind == "norm":
                out = self.norm(self.expr(depth - 1))
            else:
                out = self.materialize(self.expr(depth - 1))
            if out is not None:
                v, name = out
                self.ops.append(name)
                return v
        return self.leaf()

    def same_shape(self, a, depth):
        """A value of a's sizes (and, in --grad mode, a floating dtype)."""
        b = self.leaf(list(a.t.shape))
        if depth > 0 and self.rng.random() < 0.5:
            out = self.unary(b)
            return out[0] if out else b
        return b

    def join(self, a, b):
        r = self.rng
        rank = a.t.dim()
        kind = r.choice(["cat", "stack"]) if rank else "stack"
        d = r.randrange(rank + (1 if kind == "stack" else 0))
        if kind == "cat":
            return V(torch.cat([a.t, b.t], d), f"tenet::cat<{d}>({a.cpp}, {b.cpp})"), "cat"
        return V(torch.stack([a.t, b.t], d), f"tenet::stack<{d}>({a.cpp}, {b.cpp})"), "stack"

    def norm(self, a):
        if not a.t.dtype.is_floating_point or a.t.dtype in (torch.bfloat16, torch.float16):
            return None
        return V(torch.linalg.vector_norm(a.t), f"tenet::norm({a.cpp})"), "norm"

    def broadcast_partner(self, a, depth):
        """A value whose sizes broadcast with a's: a suffix of a's sizes with some set to 1."""
        r = self.rng
        sizes = list(a.t.shape)
        keep = r.randrange(len(sizes) + 1)
        sizes = sizes[keep:]
        sizes = [1 if r.random() < 0.3 else s for s in sizes]
        if r.random() < 0.2 and len(sizes) < 3:
            sizes = [r.choice([1, 2])] + sizes if not a.t.shape or a.t.shape[0] in (1, 2) else sizes
        if depth > 0 and r.random() < 0.4:
            inner = self.leaf(sizes)
            out = self.unary(inner)
            return out[0] if out else inner
        return self.leaf(sizes)


def finite_enough(t):
    return t.dtype == torch.bool or not t.dtype.is_floating_point or t.numel() == 0 or \
        bool(torch.isfinite(t.double()).any())


def generate(seed, count, grad, name, attention=False, conv=False):
    rng = random.Random(seed)
    ref = ReferenceFile()
    cases = []
    i = 0
    while len(cases) < count:
        i += 1
        p = Program(random.Random(rng.randrange(1 << 30)), grad)
        try:
            if attention or conv:  # an attention or a convolution, maybe followed by one more op
                v, op = p.attention() if attention else p.conv()
                p.ops.append(op)
                if p.rng.random() < 0.5:
                    out = p.unary(v) if p.rng.random() < 0.5 else p.with_scalar(v)
                    if out is not None:
                        v = out[0]
                        p.ops.append(out[1])
            else:
                v = p.expr(rng.choice([2, 3, 3, 4]))
        except (RuntimeError, TypeError, ValueError):
            continue
        t = v.t
        if len(p.ops) < (1 if attention or conv else 2) or t.numel() > 400 or not finite_enough(t):
            continue
        if grad:
            if not t.dtype.is_floating_point or not t.requires_grad or t.numel() == 0:
                continue
            g = torch.Generator().manual_seed(seed * 7919 + i)
            w = torch.randn(t.shape, generator=g, dtype=torch.float64).to(t.dtype)
            loss = (t * w).sum()
            if not torch.isfinite(loss):
                continue
            leaves = [(n, b) for n, b, _, _ in p.inputs if b.requires_grad]
            try:
                grads = torch.autograd.grad(loss, [b for _, b in leaves], allow_unused=True)
            except RuntimeError:
                continue
            if any(gr is not None and not bool(torch.isfinite(gr).all()) for gr in grads):
                continue
        cname = f"{name}_{len(cases)}"
        tensors = {n: b.detach() for n, b, _, _ in p.inputs}
        tensors["out"] = t.detach()
        if grad:
            tensors["w"] = w
            for (n, _), gr in zip(leaves, grads):
                if gr is not None:
                    tensors["grad_" + n] = gr
        ref.case(cname, **tensors)
        if grad:
            cases.append((cname, p, v, [(n, gr is not None) for (n, _), gr in zip(leaves, grads)]))
        else:
            cases.append((cname, p, v, None))
    return ref, cases


def cpp_case(cname, p, v, grads, file_key):
    ops = ", ".join(p.ops) or "leaf"
    out = [f'TEST_CASE("{cname}: {ops}", "[fuzz]") {{',
           f'  const auto& c = tenet_test::get_case({file_key}, "{cname}");']
    for n, _, ctype, _ in p.inputs:
        out.append(f'  auto {n} = tenet_test::make<{ctype}>(c.at("{n}"));')
        if grads is not None:
            out.append(f"  {n}.requires_grad_();")
    for line in p.lines:
        out.append("  " + line)
    out.append(f"  const auto r = tenet::eval({v.cpp});")
    if grads is None:
        out.append(f'  fuzz::check(r, c.at("out"), "out", {p.tolerance()!r});')
    else:
        rank = v.t.dim()
        out.append(f'  const auto w = tenet_test::make<{CPP[v.t.dtype]}, tenet::dyn_shape<{rank}>>(c.at("w"));')
        out.append(f'  fuzz::check(r, c.at("out"), "out", {p.tolerance()!r});')
        out.append("  tenet::Tensor<" + CPP[v.t.dtype] + ", tenet::shape<>> loss = tenet::sum(r * w);")
        out.append("  loss.backward();")
        for n, has in grads:
            if has:
                out.append(f'  fuzz::check({n}.grad(), c.at("grad_{n}"), "grad of {n}", {p.tolerance()!r});')
    out.append("}")
    return "\n".join(out)


HEADER = """// Generated by tests/fuzz/regen.sh (tests/fuzz/gen_fuzz.py): do not edit. Random expression
// programs checked against PyTorch {torch} (reference: tests/reference/{ref}); see docs/testing.md.
#include "fuzz/fuzz_check.hpp"

namespace {{
const std::string {key} = "{ref}";
}}  // namespace

"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--grad", action="store_true")
    ap.add_argument("--name", default="fuzz")
    ap.add_argument("--cpp", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--skip", default="", help="comma-separated case numbers to leave out")
    ap.add_argument("--only", default="", help="comma-separated case numbers to keep (a finding kept as a "
                    "regression case)")
    ap.add_argument("--append", action="store_true", help="append to --cpp and --ref instead of writing them")
    ap.add_argument("--attention", action="store_true", help="programs of scaled_dot_product_attention")
    ap.add_argument("--conv", action="store_true", help="programs of conv2d, conv_transpose2d and the poolings")
    args = ap.parse_args()
    torch.set_default_dtype(torch.float32)
    ref, cases = generate(args.seed, args.count, args.grad, args.name, args.attention, args.conv)
    skip = {int(s) for s in args.skip.split(",") if s}
    only = {int(s) for s in args.only.split(",") if s}
    keep = [i for i in range(len(cases)) if i not in skip and (not only or i in only)]
    refname = os.path.basename(args.ref)
    key = "kFuzzFile"
    text = "" if args.append else HEADER.format(torch=torch.__version__.split("+")[0], ref=refname, key=key)
    text += f"// gen_fuzz.py --seed {args.seed} --count {args.count} --name {args.name}" + \
        (" --grad" if args.grad else "") + (" --attention" if args.attention else "") + (" --conv" if args.conv else "") + (f" --only {args.only}" if args.only else "") + "\n\n"
    text += "\n\n".join(cpp_case(cases[i][0], cases[i][1], cases[i][2], cases[i][3], key) for i in keep) + "\n\n"
    with open(args.cpp, "a" if args.append else "w") as f:
        f.write(text)
    lines = []
    for ln in ref.lines:  # the reference of the kept cases only
        if ln.startswith("case "):
            cur = int(ln.split("_")[-1])
        if cur in keep:
            lines.append(ln)
    with open(args.ref, "a" if args.append else "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
