"""PyTorch twin of examples/nanogpt.cpp: the same model (2 pre-LayerNorm blocks of causal 4-head
attention through F.scaled_dot_product_attention(is_causal=True, dropout on its weights) and a 4x GELU MLP, n_embd 64, block 32, tied-free lm_head without bias),
the same training (AdamW lr 3e-3 betas (0.9, 0.99) weight decay 0.01, cosine to 3e-4, clip 1.0,
batch 32, 500 steps, loss estimates of 8 batches per split every 50 steps, dropout 0.1) on the same
text, timed the same way (wall clock from the first estimate to the last step). Batches and
initial values differ (other generators), so losses agree only in level. Prints JSON lines.

    python3 bench/nanogpt_torch_twin.py [--device cuda|cpu] [--steps 500] [--compile]
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

N_EMBD, N_HEAD, N_LAYER, BLOCK = 64, 4, 2, 32


class Attn(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
        self.c_proj = nn.Linear(N_EMBD, N_EMBD)
        self.p = p
        self.drop_r = nn.Dropout(p)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.p if self.training else 0.0)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.drop_r(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(N_EMBD), nn.LayerNorm(N_EMBD)
        self.attn = Attn(p)
        self.mlp = nn.Sequential(nn.Linear(N_EMBD, 4 * N_EMBD), nn.GELU(), nn.Linear(4 * N_EMBD, N_EMBD), nn.Dropout(p))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, p=0.1):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, N_EMBD), nn.Embedding(BLOCK, N_EMBD)
        self.drop = nn.Dropout(p)
        self.h = nn.ModuleList(Block(p) for _ in range(N_LAYER))
        self.ln_f = nn.LayerNorm(N_EMBD)
        self.lm_head = nn.Linear(N_EMBD, vocab, bias=False)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(T, device=idx.device)))
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        print("nanogpt_torch_twin: no CUDA device; skipped", file=sys.stderr)
        return 77
    here = os.path.dirname(os.path.abspath(__file__))
    text = open(os.path.join(here, "..", "examples", "data", "gpl-3.0.txt"), encoding="latin-1").read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    train, val = data[:n], data[n:]
    torch.manual_seed(0)
    model = GPT(len(chars)).to(dev)
    step_model = torch.compile(model) if args.compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.99), weight_decay=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.steps, 3e-4)
    g = torch.Generator().manual_seed(1234)

    def batch(split, B=32):
        ix = torch.randint(len(split) - BLOCK, (B,), generator=g)
        x = torch.stack([split[i:i + BLOCK] for i in ix])
        y = torch.stack([split[i + 1:i + 1 + BLOCK] for i in ix])
        return x.to(dev), y.to(dev)

    def loss_of(m, x, y):
        return F.cross_entropy(m(x).flatten(0, 1), y.flatten(0, 1))

    @torch.no_grad()
    def estimate(split):
        model.eval()
        ge = torch.Generator().manual_seed(4321)
        tot = 0.0
        for _ in range(8):
            ix = torch.randint(len(split) - BLOCK, (32,), generator=ge)
            x = torch.stack([split[i:i + BLOCK] for i in ix]).to(dev)
            y = torch.stack([split[i + 1:i + 1 + BLOCK] for i in ix]).to(dev)
            tot += loss_of(model, x, y).item()
        model.train()
        return tot / 8

    t0 = time.perf_counter()
    for step in range(args.steps + 1):
        if step % 50 == 0 or step == args.steps:
            tl, vl = estimate(train), estimate(val)
        if step == args.steps:
            break
        x, y = batch(train)
        loss = loss_of(step_model, x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
    if dev == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    impl = "torch.compile" if args.compile else "torch eager"
    print(json.dumps({"workload": f"nanogpt_train_{args.steps}_steps", "impl": impl, "device": dev,
                      "metric": "s", "value": round(secs, 2), "train_loss": round(tl, 4), "val_loss": round(vl, 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
