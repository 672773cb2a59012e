#!/usr/bin/env python3
"""PyTorch's side of examples/gpt2_train.cpp's parity check (issue 32, item 4).

Writes
  examples/data/gpt2_train_tiny_init.safetensors      the initial weights of the tiny GPT (F32, the
                                                      names of nanoGPT's state_dict less the tied
                                                      lm_head.weight)
  examples/data/gpt2_train_tiny_expected.safetensors  "losses" (F64 [10]): each iteration's training
                                                      loss (the sum over the accumulation steps of
                                                      loss / K); the run's settings in __metadata__

The model is nanoGPT's GPT (token + learned position embeddings, pre-LayerNorm blocks of causal
self-attention and a 4x GELU-tanh MLP, biases, a final LayerNorm, the head tied to the token
embedding), written out here: vocabulary 256 (bytes), block 32, 2 layers, 4 heads, width 32, no
dropout. The weights follow GPT-2's scheme (N(0, 0.02), the residual projections 0.02 / sqrt(2
n_layer)); the biases and LayerNorm parameters are perturbed (N(0, 0.02) and 1 + N(0, 0.02)) so that
a bias or LayerNorm parameter loaded into the wrong place changes the losses.

Training as gpt2_train.cpp does it: micro-batches from examples/data/gpl-bytes/train.bin by the
splitmix64 rule (the offsets are the same integers in both programs), AdamW in two groups (weight
decay on the 2-D parameters only), nanoGPT's warmup + cosine learning rate, gradient accumulation,
clip_grad_norm_ to 1.0; float32 on the CPU.

    python3 tests/reference/gen_gpt2_train.py
"""
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

from gen_gpt2 import write_safetensors  # the hand-written safetensors writer (no safetensors package)

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "examples", "data")

V, T, L, H, C = 256, 32, 2, 4, 32
RUN = dict(batch_size=4, grad_accum=2, max_iters=10, warmup_iters=3, lr_decay_iters=10, lr=3e-3, min_lr=3e-4,
           weight_decay=0.1, beta1=0.9, beta2=0.95, grad_clip=1.0, seed=1337)
MASK = (1 << 64) - 1


def splitmix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def get_batch(tokens, B, seed, m):
    span = len(tokens) - T
    xs, ys = [], []
    for w in range(B):
        k = m * B + w
        s = splitmix64((seed + k * 0x9E3779B97F4A7C15) & MASK) % span
        xs.append(tokens[s:s + T].astype(np.int64))
        ys.append(tokens[s + 1:s + T + 1].astype(np.int64))
    return torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))


def lr_at(it):
    r = RUN
    if it < r["warmup_iters"]:
        return r["lr"] * (it + 1) / (r["warmup_iters"] + 1)
    if it > r["lr_decay_iters"]:
        return r["min_lr"]
    ratio = (it - r["warmup_iters"]) / max(1, r["lr_decay_iters"] - r["warmup_iters"])
    return r["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (r["lr"] - r["min_lr"])


def init_params(gen):
    def normal(shape, std):
        return torch.randn(shape, generator=gen) * std

    proj = 0.02 / math.sqrt(2 * L)
    p = {"transformer.wte.weight": normal((V, C), 0.02), "transformer.wpe.weight": normal((T, C), 0.02)}
    for i in range(L):
        h = f"transformer.h.{i}."
        p[h + "ln_1.weight"] = 1 + normal((C,), 0.02)
        p[h + "ln_1.bias"] = normal((C,), 0.02)
        p[h + "attn.c_attn.weight"] = normal((3 * C, C), 0.02)
        p[h + "attn.c_attn.bias"] = normal((3 * C,), 0.02)
        p[h + "attn.c_proj.weight"] = normal((C, C), proj)
        p[h + "attn.c_proj.bias"] = normal((C,), 0.02)
        p[h + "ln_2.weight"] = 1 + normal((C,), 0.02)
        p[h + "ln_2.bias"] = normal((C,), 0.02)
        p[h + "mlp.c_fc.weight"] = normal((4 * C, C), 0.02)
        p[h + "mlp.c_fc.bias"] = normal((4 * C,), 0.02)
        p[h + "mlp.c_proj.weight"] = normal((C, 4 * C), proj)
        p[h + "mlp.c_proj.bias"] = normal((C,), 0.02)
    p["transformer.ln_f.weight"] = 1 + normal((C,), 0.02)
    p["transformer.ln_f.bias"] = normal((C,), 0.02)
    return {k: v.float().contiguous() for k, v in p.items()}


def forward_loss(p, x, y):
    B = x.shape[0]
    h = p["transformer.wte.weight"][x] + p["transformer.wpe.weight"][:T]
    for i in range(L):
        q = f"transformer.h.{i}."
        a = F.layer_norm(h, (C,), p[q + "ln_1.weight"], p[q + "ln_1.bias"], 1e-5)
        qkv = F.linear(a, p[q + "attn.c_attn.weight"], p[q + "attn.c_attn.bias"])
        qh, kh, vh = (t.view(B, T, H, C // H).transpose(1, 2) for t in qkv.split(C, dim=2))
        att = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)
        h = h + F.linear(att.transpose(1, 2).reshape(B, T, C), p[q + "attn.c_proj.weight"], p[q + "attn.c_proj.bias"])
        m = F.layer_norm(h, (C,), p[q + "ln_2.weight"], p[q + "ln_2.bias"], 1e-5)
        m = F.gelu(F.linear(m, p[q + "mlp.c_fc.weight"], p[q + "mlp.c_fc.bias"]), approximate="tanh")
        h = h + F.linear(m, p[q + "mlp.c_proj.weight"], p[q + "mlp.c_proj.bias"])
    h = F.layer_norm(h, (C,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], 1e-5)
    logits = F.linear(h, p["transformer.wte.weight"])
    return F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))


def main():
    torch.manual_seed(0)
    tokens = np.fromfile(os.path.join(DATA, "gpl-bytes", "train.bin"), dtype="<u2")
    init = init_params(torch.Generator().manual_seed(2024))
    write_safetensors(os.path.join(DATA, "gpt2_train_tiny_init.safetensors"), init)

    p = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    decay = [t for t in p.values() if t.dim() >= 2]
    no_decay = [t for t in p.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": RUN["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=RUN["lr"], betas=(RUN["beta1"], RUN["beta2"]), eps=1e-8)
    K, B = RUN["grad_accum"], RUN["batch_size"]
    losses = []
    for it in range(RUN["max_iters"]):
        for g in opt.param_groups:
            g["lr"] = lr_at(it)
        total = 0.0
        for k in range(K):
            x, y = get_batch(tokens, B, RUN["seed"], it * K + k)
            loss = forward_loss(p, x, y) / K
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(list(p.values()), RUN["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total)
        print(f"iter {it}: loss {total:.6f}, lr {lr_at(it):.3e}")
    write_safetensors(os.path.join(DATA, "gpt2_train_tiny_expected.safetensors"),
                     {"losses": torch.tensor(losses, dtype=torch.float64)},
                     {k: str(v) for k, v in dict(RUN, torch=torch.__version__,
                                                 generator="tests/reference/gen_gpt2_train.py").items()})


if __name__ == "__main__":
    main()
