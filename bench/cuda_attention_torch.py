#!/usr/bin/env python3
"""PyTorch's twin of bench/cuda_attention.cu: F.scaled_dot_product_attention on the GPU, bf16,
with each of torch's backends (flash, efficient, cudnn) forced, forward and forward + backward.

Same shapes and metric as the tenet program: TFLOP/s of the forward (4 B H L S D, half when causal)
and of the backward alone (2.5 times the forward's FLOPs over the backward's time, the time of
forward + backward less the forward's), median over timed runs after a warm-up. Prints one JSON
line per row; a backend that refuses a shape prints "error".

Usage: python3 bench/cuda_attention_torch.py
"""
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [(16, 12, 1024, 64), (16, 16, 1024, 64), (8, 16, 4096, 128), (2, 16, 8192, 128), (1, 16, 16384, 128)]
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION}


def median_ms(f, reps=10):
    f()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        f()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    torch.manual_seed(0)
    for (B, H, S, D) in SHAPES:
        for causal in (False, True):
            q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            g = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
            flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
            for name, backend in BACKENDS.items():
                row = {"bench": "sdpa_cuda", "impl": "torch_" + name, "B": B, "H": H, "S": S, "D": D, "causal": int(causal)}
                try:
                    with sdpa_kernel(backend):
                        with torch.no_grad():
                            fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))

                        def step():
                            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            y.backward(g)
                        both = median_ms(step)
                    row.update(fwd_ms=round(fwd, 3), fwd_tflops=round(flops / fwd / 1e9, 1), fwdbwd_ms=round(both, 3),
                               bwd_tflops=round(2.5 * flops / max(both - fwd, 1e-6) / 1e9, 1))
                except RuntimeError as e:
                    row["error"] = str(e).splitlines()[0][:120]
                print(json.dumps(row), flush=True)
                q.grad = k.grad = v.grad = None


if __name__ == "__main__":
    main()
