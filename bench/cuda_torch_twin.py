#!/usr/bin/env python3
"""The bench/cuda_*.cu workloads in PyTorch on the GPU, eager and torch.compile.

Same sizes, metrics and timing as bench/cuda_harness.hpp: one warm-up call, one timed call, then
CUDA events around runs of k back-to-back calls (k: about 1 ms of GPU per run, 1 to 100) until
>= 0.5 s of GPU time and >= 5 runs; the median time per call. Prints one JSON
line per result (device "cuda"); a workload that fails (e.g. torch.compile) prints "value": null
and "error" instead of stopping.

Usage: python3 bench/cuda_torch_twin.py [--filter REGEX] [--no-compile]
"""
import argparse
import json
import math
import re
import statistics
import sys

import torch
import torch.nn.functional as F


def measure(f, min_seconds=0.5, min_runs=5):
    f()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    f()
    stop.record()
    stop.synchronize()
    one = start.elapsed_time(stop) * 1e-3
    k = 1 if one <= 0 else int(min(max(math.ceil(1e-3 / one), 1), 100))
    times = []
    while sum(times) * k < min_seconds or len(times) < min_runs:
        start.record()
        for _ in range(k):
            f()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3 / k)
    return statistics.median(times)


def us_per_call(f):
    """bench/cuda_compile.cu's timing: wall time per call, 200 calls then one synchronize, median of 7."""
    import time
    for _ in range(20):
        f()
    torch.cuda.synchronize()
    t = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(200):
            f()
        torch.cuda.synchronize()
        t.append((time.perf_counter() - t0) / 200 * 1e6)
    return statistics.median(t)


def mlp_block(x, w1, b1, w2, b2):
    return x + F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)


def report(workload, impl, metric, value, **extra):
    line = {"workload": workload, "impl": impl, "device": "cuda", "metric": metric,
            "value": None if value is None else float(f"{value:.4g}")}
    line.update(extra)
    print(json.dumps(line), flush=True)


def gelu_affine(x, a: float, b: float, c: float):
    return F.gelu(x * a + b) * c


def linear_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b), approximate="tanh")


def resnet_stage1():
    """bench/resnet_stage.hpp in torch (random parameters: only the time is compared)."""
    import torch.nn as nn

    def conv_bn(cin, cout, k, stride, pad):
        return nn.Sequential(nn.Conv2d(cin, cout, k, stride, pad, bias=False), nn.BatchNorm2d(cout))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = conv_bn(64, 64, 3, 1, 1), conv_bn(64, 64, 3, 1, 1)

        def forward(self, x):
            return F.relu(self.b(F.relu(self.a(x))) + x)

    return nn.Sequential(conv_bn(3, 64, 7, 2, 3), nn.ReLU(), nn.MaxPool2d(3, 2, 1), Block(), Block())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--filter", default="")
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("cuda_torch_twin: no CUDA device; skipped", file=sys.stderr)
        return 77
    dev = "cuda"
    print(json.dumps({"workload": "device_info", "impl": "torch " + torch.__version__, "device": "cuda",
                      "metric": "name", "value": torch.cuda.get_device_name(0)}), flush=True)
    torch.manual_seed(0)
    want = re.compile(args.filter)

    def run(workload, metric, scale, impls):
        if not want.search(workload):
            return
        for impl, f in impls:
            if impl == "torch.compile" and args.no_compile:
                continue
            try:
                s = measure(f)
                report(workload, impl, metric, scale / s)
            except Exception as e:  # noqa: BLE001 - report and go on
                report(workload, impl, metric, None, error=f"{type(e).__name__}: {e}"[:300])

    # bench/cuda_compile.cu: an MLP block where launch overhead matters (wall us per call)
    torch.backends.cuda.matmul.allow_tf32 = False
    for hidden in (1024, 4096):
        wl = f"mlp_block_8x1024_h{hidden}_fp32"
        if not want.search(wl):
            continue
        xm = torch.randn(8, 1024, device=dev)
        w1 = torch.randn(hidden, 1024, device=dev) * 0.03
        w2 = torch.randn(1024, hidden, device=dev) * 0.03
        b1 = torch.randn(hidden, device=dev) * 0.1
        b2 = torch.randn(1024, device=dev) * 0.1
        impls = [("torch eager", lambda: mlp_block(xm, w1, b1, w2, b2))]
        if not args.no_compile:
            ro = torch.compile(mlp_block, mode="reduce-overhead")
            impls.append(("torch.compile(reduce-overhead)", lambda: ro(xm, w1, b1, w2, b2)))
            co = torch.compile(mlp_block)
            impls.append(("torch.compile", lambda: co(xm, w1, b1, w2, b2)))
        for impl, f in impls:
            try:
                with torch.no_grad():
                    report(wl, impl, "us/call", us_per_call(f))
            except Exception as e:  # noqa: BLE001 - report and go on
                report(wl, impl, "us/call", None, error=f"{type(e).__name__}: {e}"[:300])

    n = 64 << 20
    x = torch.randn(n, device=dev)
    y = torch.empty_like(x)
    for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        xd = x.to(dtype)
        yd = torch.empty_like(xd)
        run(f"copy_64Mi_{name}", "GB/s", 2 * n * xd.element_size() / 1e9, [("torch copy_", lambda: yd.copy_(xd))])
        comp = torch.compile(gelu_affine)
        size = xd.element_size()
        run(f"gelu_affine_64Mi_{name}", "GB/s", 2 * n * size / 1e9,
            [("torch eager", lambda: gelu_affine(xd, 1.25, 0.5, 0.75)),
             ("torch.compile", lambda: comp(xd, 1.25, 0.5, 0.75))])
    drop = torch.compile(lambda t: F.dropout(t, 0.1))
    run("dropout_64Mi_fp32", "GB/s", 2 * n * 4 / 1e9,
        [("torch eager", lambda: F.dropout(x, 0.1)), ("torch.compile", lambda: drop(x))])
    del x, y
    r, c = 8192, 4096
    xb = torch.randn(r, c, device=dev, dtype=torch.bfloat16)
    w = torch.randn(c, device=dev, dtype=torch.bfloat16)
    b = torch.randn(c, device=dev, dtype=torch.bfloat16)
    sm = torch.compile(lambda t: torch.softmax(t, -1))
    run("softmax_8192x4096_bf16", "GB/s", 2 * r * c * 2 / 1e9,
        [("torch eager", lambda: torch.softmax(xb, -1)), ("torch.compile", lambda: sm(xb))])
    ln = torch.compile(lambda t: F.layer_norm(t, (c,), w, b))
    run("layer_norm_8192x4096_bf16", "GB/s", 2 * r * c * 2 / 1e9,
        [("torch eager", lambda: F.layer_norm(xb, (c,), w, b)), ("torch.compile", lambda: ln(xb))])
    del xb

    # bench/cuda_ops.cu: common fp32 ops on 8192x4096
    xf = torch.randn(r, c, device=dev)
    wf = torch.randn(c, device=dev)
    bf = torch.randn(c, device=dev)
    colf = torch.randn(r, 1, device=dev)
    x4 = torch.randn(32, 64, 56, 56, device=dev)
    inb = 4 * r * c
    smf = torch.compile(lambda t: torch.softmax(t, -1))
    sm0 = torch.compile(lambda t: torch.softmax(t, 0))
    lnf = torch.compile(lambda t: F.layer_norm(t, (c,), wf, bf))
    for wl, byts, eager, comp in (
            ("sum_dim1_8192x4096_fp32", inb + 4 * r, lambda: xf.sum(1), None),
            ("sum_dim0_8192x4096_fp32", inb + 4 * c, lambda: xf.sum(0), None),
            ("sum_all_8192x4096_fp32", inb, lambda: xf.sum(), None),
            ("amax_dim1_8192x4096_fp32", inb + 4 * r, lambda: xf.amax(1), None),
            ("sum_dims023_32x64x56x56_fp32", 4 * 32 * 64 * 56 * 56 + 4 * 64, lambda: x4.sum((0, 2, 3)), None),
            ("var_dim1_8192x4096_fp32", inb + 4 * r, lambda: xf.var(1), None),
            ("softmax_8192x4096_fp32", 2 * inb, lambda: torch.softmax(xf, -1), lambda: smf(xf)),
            ("softmax_dim0_8192x4096_fp32", 2 * inb, lambda: torch.softmax(xf, 0), lambda: sm0(xf)),
            ("layer_norm_8192x4096_fp32", 2 * inb, lambda: F.layer_norm(xf, (c,), wf, bf), lambda: lnf(xf)),
            ("add_row_bias_8192x4096_fp32", 2 * inb, lambda: xf + bf, None),
            ("mul_col_scale_8192x4096_fp32", 2 * inb, lambda: xf * colf, None),
            ("transpose_copy_8192x4096_fp32", 2 * inb, lambda: xf.t().contiguous(), None)):
        impls = [("torch eager", eager)] + ([("torch.compile", comp)] if comp else [])
        run(wl, "GB/s", byts / 1e9, impls)
    del xf, x4

    # bench/cuda_ops.cu: line and indexing ops (eager only: single ATen kernels)
    for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        xo = torch.randn(r, c, device=dev, dtype=dtype)
        size = xo.element_size()
        run(f"cumsum_8192x4096_{name}", "GB/s", 2 * r * c * size / 1e9,
            [("torch eager", lambda: torch.cumsum(xo, 1))])
        run(f"argmax_8192x4096_{name}", "GB/s", r * c * size / 1e9,
            [("torch eager", lambda: torch.argmax(xo, 1))])
        del xo
    ne, d, bt, t = 50000, 1024, 64, 128
    we = torch.randn(ne, d, device=dev, dtype=torch.bfloat16)
    ids = torch.randint(0, ne, (bt, t), device=dev)
    run("embedding_64x128_50000x1024_bf16", "GB/s", (2 * bt * t * d * 2 + bt * t * 8) / 1e9,
        [("torch eager", lambda: F.embedding(ids, we))])
    del we
    xg = torch.randn(r, c, device=dev)
    ig = torch.randint(0, c, (r, c), device=dev)
    run("gather_dim1_8192x4096_fp32", "GB/s", r * c * (4 + 8 + 4) / 1e9,
        [("torch eager", lambda: torch.gather(xg, 1, ig))])
    run("scatter_add_dim1_8192x4096_fp32", "GB/s", r * c * (4 + 8 + 4 + 4 + 4) / 1e9,
        [("torch eager", lambda: torch.scatter_add(xg, 1, ig, xg))])
    del xg, ig

    m = 8192
    a = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
    bm = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
    bias = torch.randn(m, device=dev, dtype=torch.bfloat16)
    flops = 2 * m ** 3 / 1e12
    run("gemm_8192_bf16", "TFLOP/s", flops, [("torch.mm", lambda: torch.mm(a, bm))])
    lg = torch.compile(linear_gelu)
    run("linear_bias_gelu_8192_bf16", "TFLOP/s", flops,
        [("torch eager", lambda: linear_gelu(a, bm, bias)), ("torch.compile", lambda: lg(a, bm, bias))])
    # PyTorch's own GEMM tuning (TunableOp), the peer of tenet's set_matmul_tuning
    try:
        torch.cuda.tunable.enable(True)
        torch.cuda.tunable.tuning_enable(True)
        run("gemm_8192_bf16", "TFLOP/s", flops, [("torch.mm (TunableOp)", lambda: torch.mm(a, bm))])
        run("linear_bias_gelu_8192_bf16", "TFLOP/s", flops,
            [("torch eager (TunableOp)", lambda: linear_gelu(a, bm, bias))])
    finally:
        torch.cuda.tunable.enable(False)
    del a, bm
    k = 4096
    xf = torch.randn(k, k, device=dev)
    yf = torch.randn(k, k, device=dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    run("gemm_4096_fp32", "TFLOP/s", 2 * k ** 3 / 1e12, [("torch.mm", lambda: torch.mm(xf, yf))])
    torch.backends.cuda.matmul.allow_tf32 = True
    run("gemm_4096_fp32_tf32", "TFLOP/s", 2 * k ** 3 / 1e12, [("torch.mm", lambda: torch.mm(xf, yf))])
    torch.backends.cuda.matmul.allow_tf32 = False
    del xf, yf
    # bench/cuda_gemm.cu's last row: a linear layer's forward + backward, fp32 with TF32
    torch.backends.cuda.matmul.allow_tf32 = True
    lm, lk, lo = 8192, 4096, 4096
    xl = torch.randn(lm, lk, device=dev, requires_grad=True)
    wl = (torch.randn(lo, lk, device=dev) * 0.02).requires_grad_()
    bl = torch.randn(lo, device=dev, requires_grad=True)
    gl = torch.randn(lm, lo, device=dev)

    def linear_step(fn):
        xl.grad = wl.grad = bl.grad = None
        fn(xl, wl, bl).backward(gl)

    clin = torch.compile(F.linear)
    run("linear_fwd_bwd_8192x4096x4096_fp32_tf32", "TFLOP/s", 6 * lm * lk * lo / 1e12,
        [("torch eager", lambda: linear_step(F.linear)), ("torch.compile", lambda: linear_step(clin))])
    torch.backends.cuda.matmul.allow_tf32 = False
    del xl, wl, bl, gl

    # bench/cuda_conv.cu: convolutions in fp32 without TF32 (cuDNN's default allows it)
    torch.backends.cudnn.allow_tf32 = False
    nc, cc, hc = 32, 64, 56
    xc = torch.randn(nc, cc, hc, hc, device=dev)
    wc = torch.randn(cc, cc, 3, 3, device=dev) * 0.05
    cflops = 2 * nc * cc * hc * hc * cc * 9 / 1e12
    conv = torch.compile(lambda t, k: F.conv2d(t, k, padding=1))
    with torch.no_grad():
        run("conv2d_3x3_64_56x56_b32_fp32", "TFLOP/s", cflops,
            [("torch eager", lambda: F.conv2d(xc, wc, padding=1)), ("torch.compile", lambda: conv(xc, wc))])
    xg, wg = xc.clone().requires_grad_(), wc.clone().requires_grad_()
    run("conv2d_3x3_64_56x56_b32_fp32_fwd_bwd", "TFLOP/s", 3 * cflops,
        [("torch eager", lambda: F.conv2d(xg, wg, padding=1).sum().backward())])
    del xc, wc, xg, wg
    stage = resnet_stage1().to(dev).eval()
    xr = torch.randn(32, 3, 224, 224, device=dev)
    cstage = torch.compile(stage)
    with torch.no_grad():
        run("resnet18_stage1_b32_fp32", "img/s", 32, [("torch eager", lambda: stage(xr)), ("torch.compile", lambda: cstage(xr))])
    torch.backends.cudnn.allow_tf32 = True
    return 0


if __name__ == "__main__":
    sys.exit(main())
