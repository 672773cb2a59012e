#!/usr/bin/env python3
"""Writes attention.txt: PyTorch's scaled_dot_product_attention (outputs, and the gradients of
sum(out * w) for float32 / float64) for tests/test_attention.cpp: bool and additive masks, causal
with L != S, grouped-query attention, lengths that are not multiples of 64 (tests/test_attention.cpp
compares the variants against each other across the CPU kernel's blocks, 128 queries and 512
keys), head dims 16, 64, 80, 128, rows with every key masked out, float32, float64, bfloat16 and
float16. Options are stored as tensors next to the data.

    python3 tests/reference/gen_attention.py [output path]
"""
import torch
import torch.nn.functional as F

from reference_writer import ReferenceFile

ref = ReferenceFile()
torch.manual_seed(0)
r = torch.randn


def case(name, qs, ks, vs, mask=None, causal=False, scale=None, gqa=False, dtypes=("f32",)):
    q0, k0, v0 = r(*qs), r(*ks), r(*vs)
    m0 = mask() if callable(mask) else mask
    for sfx in dtypes:
        dt = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16}[sfx]
        q, k, v = (t.detach().to(dt).clone().requires_grad_(True) for t in (q0, k0, v0))
        m = None
        if m0 is not None:
            m = m0 if m0.dtype == torch.bool else m0.detach().to(dt).clone().requires_grad_(sfx in ("f32", "f64"))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal, scale=scale, enable_gqa=gqa)
        t = dict(q=q.detach(), k=k.detach(), v=v.detach(), out=out.detach(),
                 causal=torch.tensor([int(causal)]), gqa=torch.tensor([int(gqa)]),
                 scale=torch.tensor([scale if scale is not None else -1.0], dtype=torch.float64))
        if m is not None:
            t["mask"] = m.detach()
        if True:  # gradients in every dtype (bf16 / f16: torch's CPU kernels, float accumulation)
            w = r(*out.shape).to(dt)
            (out * w).sum().backward()
            t.update(w=w, dq=q.grad, dk=k.grad, dv=v.grad)
            if m is not None and m.dtype != torch.bool and m.grad is not None:
                t["dmask"] = m.grad
        ref.case(f"{name}_{sfx}", **t)


case("basic", (2, 3, 5, 16), (2, 3, 7, 16), (2, 3, 7, 8), dtypes=("f32", "f64"))
case("causal_square", (1, 1, 70, 4), (1, 1, 70, 4), (1, 1, 70, 4), causal=True)
case("causal_long_q", (1, 2, 9, 16), (1, 2, 5, 16), (1, 2, 5, 8), causal=True)
case("causal_long_k", (1, 2, 5, 16), (1, 2, 9, 16), (1, 2, 9, 8), causal=True)
case("blocks", (1, 1, 70, 4), (1, 1, 260, 4), (1, 1, 260, 2))
case("blocks_causal", (1, 1, 260, 4), (1, 1, 260, 4), (1, 1, 260, 2), causal=True)


def bool_mask_rows():  # (2, 1, 6, 9): row 2 of batch 0 has every key masked out
    m = torch.rand(2, 1, 6, 9) > 0.4
    m[0, 0, 2, :] = False
    return m


case("bool_mask", (2, 2, 6, 16), (2, 2, 9, 16), (2, 2, 9, 8), mask=bool_mask_rows)
case("bool_mask_2d", (2, 2, 6, 16), (2, 2, 9, 16), (2, 2, 9, 8), mask=lambda: torch.rand(6, 9) > 0.3)
case("float_mask", (2, 3, 5, 16), (2, 3, 7, 16), (2, 3, 7, 16), mask=lambda: r(2, 3, 5, 7), dtypes=("f32", "f64"))
case("float_mask_bcast", (2, 3, 5, 16), (2, 3, 7, 16), (2, 3, 7, 16), mask=lambda: r(1, 3, 1, 7))
case("gqa", (2, 6, 5, 16), (2, 2, 7, 16), (2, 2, 7, 8), gqa=True, dtypes=("f32", "f64"))
case("gqa_mask", (1, 4, 6, 16), (1, 2, 6, 16), (1, 2, 6, 16), mask=lambda: r(6, 6), gqa=True)
case("gqa_causal", (1, 4, 6, 16), (1, 2, 6, 16), (1, 2, 6, 16), causal=True, gqa=True)
case("scale", (2, 2, 4, 16), (2, 2, 6, 16), (2, 2, 6, 8), scale=0.37)
case("e64", (1, 1, 9, 64), (1, 1, 12, 64), (1, 1, 12, 64), causal=True)
case("e80", (1, 1, 5, 80), (1, 1, 6, 80), (1, 1, 6, 80))
case("e128", (1, 1, 5, 128), (1, 1, 6, 128), (1, 1, 6, 128), mask=lambda: r(5, 6))
case("empty_keys", (1, 2, 3, 16), (1, 2, 0, 16), (1, 2, 0, 8))
case("rank3", (3, 5, 16), (3, 7, 16), (3, 7, 8))
case("rank2", (5, 16), (7, 16), (7, 8), causal=True)
case("rank5", (2, 2, 3, 4, 16), (2, 2, 3, 6, 16), (2, 2, 3, 6, 8), mask=lambda: r(2, 1, 3, 4, 6))
case("half", (1, 1, 9, 64), (1, 1, 12, 64), (1, 1, 12, 64), causal=True, dtypes=("bf16", "f16"))
case("half_mask", (1, 2, 20, 16), (1, 2, 30, 16), (1, 2, 30, 16), mask=lambda: torch.rand(20, 30) > 0.3,
     dtypes=("bf16", "f16"))

# bf16 / fp16 cases for the CUDA kernels (tests/cuda/test_cuda_attention.cu): several of their
# 64-row tiles, GQA with causal, head dims 128 and 256 (and Ev != E), an additive mask broadcast
# over the heads, two batch dims with a mask broadcast over one of them
case("cuda_gqa_causal", (1, 4, 70, 32), (1, 2, 90, 32), (1, 2, 90, 32), causal=True, gqa=True, dtypes=("f16",))
case("cuda_e128", (1, 1, 70, 128), (1, 1, 80, 128), (1, 1, 80, 128), dtypes=("bf16",))
case("cuda_e256", (1, 1, 20, 256), (1, 1, 30, 256), (1, 1, 30, 200), causal=True, dtypes=("f16",))
case("cuda_float_mask", (2, 2, 33, 16), (2, 2, 47, 16), (2, 2, 47, 16), mask=lambda: r(2, 1, 33, 47),
     dtypes=("bf16", "f16"))
case("cuda_rank5", (2, 2, 2, 10, 16), (2, 2, 2, 15, 16), (2, 2, 2, 15, 16), mask=lambda: torch.rand(2, 1, 1, 10, 15) > 0.3,
     dtypes=("bf16", "f16"))

ref.write("attention.txt")
