#!/usr/bin/env python3
"""The tiny GPT-2 checkpoint and PyTorch's expected results for examples/gpt2.cpp's self-check.

Writes (no `transformers` or `safetensors` package needed; the safetensors files are written by
hand: 8-byte little-endian header length, a JSON header padded with spaces to a multiple of 8,
then the raw little-endian bytes):

  examples/data/gpt2_tiny.safetensors           the weights, in Hugging Face's GPT2LMHeadModel
                                                layout (transformer.wte.weight, transformer.h.N.
                                                attn.c_attn.weight [in, out] as HF's Conv1D, ...),
                                                plus what HF files also hold: lm_head.weight (the
                                                same values as wte: tied) and the attention buffers
                                                transformer.h.N.attn.bias (BOOL causal triangle)
                                                and transformer.h.N.attn.masked_bias (old files)
  examples/data/gpt2_tiny_expected.safetensors  tokens [2, 32] (I64) and their logits [2, 32, 256]
                                                (F32); prompt [8] and the greedy continuation [56]
                                                (I64) up to the full context of 64

The tiny config: byte vocabulary 256, n_ctx 64, n_embd 32, n_head 4, n_layer 2. The weights
follow GPT-2's initialization scheme (normal, the residual projections c_proj scaled by
1 / sqrt(2 n_layer)) with std 0.3 instead of 0.02: at 0.02 this small model's greedy continuation
is one byte repeated, which would not show a KV cache that attends to the wrong positions; at 0.3
it has 22 distinct bytes. The biases are drawn as well (N(0, 0.3)) and the LayerNorm weights are
1 + N(0, 0.1), biases N(0, 0.1): GPT-2 starts those at 0 and 1, and a wrong bias layout would
then pass unseen.

The forward is GPT2LMHeadModel's, written out in torch: token + position embeddings, per block
x += attn(ln_1(x)), x += mlp(ln_2(x)) with Conv1D y = x @ W + b, the causal softmax(q kᵀ /
sqrt(head_dim)) v, gelu with the tanh approximation (HF's "gelu_new"), LayerNorm eps 1e-5, then
ln_f and logits = x @ wteᵀ. The expected values are computed in float64 from the float32 weights
(the script prints how far torch's own float32 forward is from them). The greedy continuation is
recomputed from scratch (no cache) each step; the script checks that every greedy step's top
logit leads the second by a margin that float32 rounding cannot flip.

    python3 tests/reference/gen_gpt2.py
"""
import json
import math
import os
import struct

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "examples", "data")

VOCAB, N_CTX, N_EMBD, N_HEAD, N_LAYER = 256, 64, 32, 4, 2
SEED = 20240611
STD = 0.3  # GPT-2's is 0.02; see the docstring
PROMPT = b"GPT-2 sa"  # the greedy prompt, 8 bytes
TEXT = [b"Attention is all you need, they ", b"tenet: tensors & templates (C++)"]


def make_weights(seed):
    g = torch.Generator().manual_seed(seed)

    def normal(*shape, std=STD, mean=0.0):
        return (torch.randn(*shape, generator=g) * std + mean).float()

    w = {"transformer.wte.weight": normal(VOCAB, N_EMBD), "transformer.wpe.weight": normal(N_CTX, N_EMBD)}
    proj_std = STD / math.sqrt(2 * N_LAYER)
    for i in range(N_LAYER):
        p = f"transformer.h.{i}."
        w[p + "ln_1.weight"] = normal(N_EMBD, std=0.1, mean=1.0)
        w[p + "ln_1.bias"] = normal(N_EMBD, std=0.1)
        w[p + "attn.c_attn.weight"] = normal(N_EMBD, 3 * N_EMBD)  # Conv1D: [in, out]
        w[p + "attn.c_attn.bias"] = normal(3 * N_EMBD)
        w[p + "attn.c_proj.weight"] = normal(N_EMBD, N_EMBD, std=proj_std)
        w[p + "attn.c_proj.bias"] = normal(N_EMBD)
        w[p + "ln_2.weight"] = normal(N_EMBD, std=0.1, mean=1.0)
        w[p + "ln_2.bias"] = normal(N_EMBD, std=0.1)
        w[p + "mlp.c_fc.weight"] = normal(N_EMBD, 4 * N_EMBD)
        w[p + "mlp.c_fc.bias"] = normal(4 * N_EMBD)
        w[p + "mlp.c_proj.weight"] = normal(4 * N_EMBD, N_EMBD, std=proj_std)
        w[p + "mlp.c_proj.bias"] = normal(N_EMBD)
    w["transformer.ln_f.weight"] = normal(N_EMBD, std=0.1, mean=1.0)
    w["transformer.ln_f.bias"] = normal(N_EMBD, std=0.1)
    return w


def gelu_new(x):
    """HF's NewGELUActivation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def forward(w, idx, dtype):
    """GPT2LMHeadModel's logits [B, T, V] for token ids [B, T], in `dtype`."""
    w = {k: v.to(dtype) for k, v in w.items()}
    B, T = idx.shape
    hd = N_EMBD // N_HEAD
    x = w["transformer.wte.weight"][idx] + w["transformer.wpe.weight"][torch.arange(T)]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(N_LAYER):
        p = f"transformer.h.{i}."
        h = F.layer_norm(x, (N_EMBD,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = qkv.split(N_EMBD, dim=2)
        q, k, v = (t.view(B, T, N_HEAD, hd).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        att = att.masked_fill(~causal, torch.finfo(dtype).min)
        y = torch.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).reshape(B, T, N_EMBD)
        x = x + (y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"])
        h = F.layer_norm(x, (N_EMBD,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        h = gelu_new(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + (h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (N_EMBD,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], 1e-5)
    return x @ w["transformer.wte.weight"].T


def greedy(w, prompt, n):
    """n greedy tokens after prompt (full recompute each step, float64) and the smallest top-1 lead."""
    ids = list(prompt)
    lead = math.inf
    for _ in range(n):
        logits = forward(w, torch.tensor([ids]), torch.float64)[0, -1]
        top2 = torch.topk(logits, 2).values
        lead = min(lead, float(top2[0] - top2[1]))
        ids.append(int(torch.argmax(logits)))
    return ids[len(prompt):], lead


CODES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.bool: "BOOL"}


def write_safetensors(path, tensors, metadata=None):
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    blobs, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = t.numpy().tobytes()  # little-endian on every host torch runs on here
        header[name] = {"dtype": CODES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    torch.set_num_threads(1)
    w = make_weights(SEED)
    tokens = torch.tensor([list(s) for s in TEXT], dtype=torch.int64)
    assert tokens.shape == (2, 32)
    logits64 = forward(w, tokens, torch.float64)
    logits32 = forward(w, tokens, torch.float32)
    print(f"logits: range [{logits64.min():.4f}, {logits64.max():.4f}], "
          f"torch float32 vs float64: max |diff| {(logits32.double() - logits64).abs().max():.3g}")
    cont, lead = greedy(w, PROMPT, N_CTX - len(PROMPT))
    print(f"greedy continuation ({len(cont)} tokens): {bytes(cont)!r}; smallest top-1 lead {lead:.3g}")
    assert lead > 1e-4, "a greedy step is too close to a tie for float32: pick another SEED"

    ckpt = dict(w)
    ckpt["lm_head.weight"] = w["transformer.wte.weight"].clone()  # tied, as HF's GPT2LMHeadModel saves it
    for i in range(N_LAYER):
        ckpt[f"transformer.h.{i}.attn.bias"] = torch.tril(torch.ones(N_CTX, N_CTX, dtype=torch.bool)).view(1, 1, N_CTX, N_CTX)
        ckpt[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    write_safetensors(os.path.join(OUT, "gpt2_tiny.safetensors"), ckpt, {"format": "pt"})
    write_safetensors(os.path.join(OUT, "gpt2_tiny_expected.safetensors"), {
        "tokens": tokens,
        "logits": logits64.float(),
        "prompt": torch.tensor(list(PROMPT), dtype=torch.int64),
        "greedy": torch.tensor(cont, dtype=torch.int64),
    }, {"format": "pt", "config": f"vocab {VOCAB} n_ctx {N_CTX} n_embd {N_EMBD} n_head {N_HEAD} n_layer {N_LAYER}"})
    for f in ("gpt2_tiny.safetensors", "gpt2_tiny_expected.safetensors"):
        print(f, os.path.getsize(os.path.join(OUT, f)), "bytes")


if __name__ == "__main__":
    main()
