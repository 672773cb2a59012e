#!/usr/bin/env python3
"""PyTorch's twin of examples/gpt2_train.cpp's training step (issue 32): nanoGPT's GPT (written out
here: the same modules and names), the same batches (the splitmix64 rule over the same token file),
AdamW in two groups (fused), nanoGPT's learning-rate schedule, gradient clipping, bf16 autocast.
Times iterations eager and under torch.compile and prints one JSON line per mode:

  {"bench": "gpt2_train", "impl": "torch_eager", "B": 16, "T": 1024, "ms_per_iter": ..., "tokens_per_s": ...,
   "peak_gib": ..., "loss_first": ..., "loss_last": ...}

ms_per_iter is the median of the iterations after --warmup (each timed to the host's return of
loss.item(), as gpt2_train prints them); peak_gib is torch.cuda.max_memory_allocated.

  python3 bench/gpt2_train_torch.py [--data examples/data/gpl-bytes] [--batch-size 16] [--iters 30]
          [--warmup 5] [--modes eager,compile] [--dtype bfloat16|float32] [--n-layer 12 ...]
          [--save-init FILE]

--save-init writes the initial weights (nanoGPT's names, lm_head.weight left out: it is tied to
transformer.wte.weight) as safetensors, for gpt2_train --init-from FILE: the two programs then
train from the same weights on the same batches, and the JSON's "losses" (every iteration's) can
be compared.
"""
import argparse
import json
import math
import os
import statistics
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MASK = (1 << 64) - 1


def splitmix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def get_batch(tokens, B, T, seed, m, device):
    span = len(tokens) - T
    starts = [splitmix64((seed + (m * B + w) * 0x9E3779B97F4A7C15) & MASK) % span for w in range(B)]
    x = torch.from_numpy(np.stack([tokens[s:s + T] for s in starts]).astype(np.int64))
    y = torch.from_numpy(np.stack([tokens[s + 1:s + T + 1] for s in starts]).astype(np.int64))
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True)


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head, self.n_embd = c.n_head, c.n_embd
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in self.c_attn(x).split(self.n_embd, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd)
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(c.n_embd), CausalSelfAttention(c)
        self.ln_2, self.mlp = nn.LayerNorm(c.n_embd), MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c.vocab_size, c.n_embd), wpe=nn.Embedding(c.block_size, c.n_embd),
            h=nn.ModuleList([Block(c) for _ in range(c.n_layer)]), ln_f=nn.LayerNorm(c.n_embd)))
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c.n_layer))
            elif p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias") and "ln" not in name:
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for b in self.transformer.h:
            x = b(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def lr_at(a, it):
    if it < a.warmup_iters:
        return a.lr * (it + 1) / (a.warmup_iters + 1)
    if it > a.lr_decay_iters:
        return a.min_lr
    ratio = (it - a.warmup_iters) / max(1, a.lr_decay_iters - a.warmup_iters)
    return a.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (a.lr - a.min_lr)


def run(a, mode, tokens):
    torch.manual_seed(a.seed)
    model = GPT(a).to(a.device)
    if a.save_init:
        import sys
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
        from gen_gpt2 import write_safetensors  # the repo's writer (no safetensors package needed)
        write_safetensors(a.save_init, {n: t.detach().float().cpu() for n, t in model.state_dict().items()
                                        if n != "lm_head.weight"})
    params = [p for p in model.parameters()]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=a.device == "cuda")
    step_model = torch.compile(model) if mode == "compile" else model
    cuda = a.device == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    t_last = time.perf_counter()
    for it in range(a.iters):
        for g in opt.param_groups:
            g["lr"] = lr_at(a, it)
        total = 0.0
        loss_sum = None
        for k in range(a.grad_accum):
            x, y = get_batch(tokens, a.batch_size, a.block_size, a.seed, it * a.grad_accum + k, a.device)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.dtype == "bfloat16"):
                loss = step_model(x, y) / a.grad_accum
            loss.backward()
            loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        total = loss_sum.item()
        now = time.perf_counter()
        times.append((now - t_last) * 1e3)
        t_last = now
        losses.append(total)
    ms = statistics.median(times[a.warmup:])
    tokens_per_iter = a.batch_size * a.block_size * a.grad_accum
    return {"bench": "gpt2_train", "impl": "torch_" + mode, "dtype": a.dtype, "B": a.batch_size, "T": a.block_size,
            "accum": a.grad_accum, "ms_per_iter": round(ms, 2), "tokens_per_s": round(tokens_per_iter / ms * 1e3),
            "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None, "loss_first": round(losses[0], 4),
            "loss_last": round(losses[-1], 4), "losses": [round(v, 5) for v in losses], "device": torch.cuda.get_device_name() if cuda else "cpu"}


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data", default=os.path.join(here, "..", "examples", "data", "gpl-bytes"))
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--block-size", type=int, default=1024)
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--vocab-size", type=int, default=50304)
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-head", type=int, default=12)
    ap.add_argument("--n-embd", type=int, default=768)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--min-lr", type=float, default=6e-5)
    ap.add_argument("--warmup-iters", type=int, default=20)
    ap.add_argument("--lr-decay-iters", type=int, default=200)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--save-init", default="", help="write the initial weights here (safetensors)")
    a = ap.parse_args()
    if a.device == "cpu" and a.dtype != "float32":
        ap.error("--device cpu runs float32 (autocast's bfloat16 is the CUDA twin's)")
    tokens = np.fromfile(os.path.join(a.data, "train.bin"), dtype="<u2")
    for mode in a.modes.split(","):
        print(json.dumps(run(a, mode, tokens)), flush=True)


if __name__ == "__main__":
    main()
