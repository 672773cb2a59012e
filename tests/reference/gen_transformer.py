#!/usr/bin/env python3
"""Writes transformer.txt: torch.nn.MultiheadAttention and the Transformer modules with random
weights, their state_dicts ("p:<name>", torch's names), inputs, masks, outputs and gradients
(tests/test_nn_modules_transformer.cpp loads each state_dict by name into the tenet module).

Gradients are those of sum(out * gy) (+ sum(weights * gw) where the weights are returned): "g:<name>"
for each parameter, "g_<input>" for each input. Dropout is 0, so train mode is deterministic.

    python3 tests/reference/gen_transformer.py [output path]
"""
import torch
import torch.nn as nn

from reference_writer import ReferenceFile

ref = ReferenceFile()
torch.manual_seed(0)


def randomize(m):
    # biases and LayerNorm parameters are zero / one at init: make every parameter non-trivial
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.5)


def run(name, m, inputs, call, extra=None):
    """inputs: dict of name -> tensor (floating ones get gradients); call(m, **inputs) -> (out, weights or None)."""
    randomize(m)
    m.train()
    sd = {f"p:{k}": v.detach().clone() for k, v in m.state_dict().items()}
    ins = {k: (v.clone().requires_grad_(True) if v.dtype.is_floating_point and not k.endswith("mask") else v)
           for k, v in inputs.items()}
    out, w = call(m, **ins)
    gy = torch.randn_like(out)
    loss = (out * gy).sum()
    res = dict(sd, **{k: v.detach() for k, v in inputs.items()}, y=out.detach(), gy=gy)
    if w is not None:
        gw = torch.randn_like(w)
        loss = loss + (w * gw).sum()
        res.update(w=w.detach(), gw=gw)
    loss.backward()
    for k, p in m.named_parameters():
        res[f"g:{k}"] = p.grad
    for k, v in ins.items():
        if v.requires_grad:
            res[f"g_{k}"] = v.grad
    if extra:
        res.update(extra)
    ref.case(name, **res)


N, L, S, E, H = 2, 3, 4, 8, 2


def mha_call(**kw):
    def call(m, q, k=None, v=None, **masks):
        k = q if k is None else k
        v = k if v is None else v
        return m(q, k, v, **kw, **masks)
    return call


# (L, N, E) inputs, no masks, averaged weights
run("mha_basic", nn.MultiheadAttention(E, H), dict(q=torch.randn(L, N, E), k=torch.randn(S, N, E), v=torch.randn(S, N, E)),
    mha_call())
# batch_first, a bool key_padding_mask, no weights (scaled_dot_product_attention)
kpm = torch.tensor([[False, False, True, False], [False, True, True, False]])
run("mha_kpm_sdpa", nn.MultiheadAttention(E, H, batch_first=True),
    dict(q=torch.randn(N, L, E), k=torch.randn(N, S, E), v=torch.randn(N, S, E), key_padding_mask=kpm),
    mha_call(need_weights=False))
# a float (N * H, L, S) attn_mask, weights per head
run("mha_mask3d_heads", nn.MultiheadAttention(E, H, batch_first=True),
    dict(q=torch.randn(N, L, E), k=torch.randn(N, S, E), v=torch.randn(N, S, E), attn_mask=torch.randn(N * H, L, S)),
    mha_call(average_attn_weights=False))
# kdim / vdim, no bias, a bool 2-D attn_mask, float key_padding_mask
am = torch.tensor([[False, True, False, False], [False, False, False, True], [True, False, False, False]])
run("mha_kdim_vdim", nn.MultiheadAttention(E, H, bias=False, kdim=5, vdim=6),
    dict(q=torch.randn(L, N, E), k=torch.randn(S, N, 5), v=torch.randn(S, N, 6), attn_mask=am,
         key_padding_mask=torch.randn(N, S)),
    mha_call())
# add_bias_kv and add_zero_attn with both masks, weights and without
for nw in (True, False):
    run(f"mha_bias_kv_zero_attn_{'w' if nw else 'sdpa'}", nn.MultiheadAttention(E, H, add_bias_kv=True, add_zero_attn=True),
        dict(q=torch.randn(L, N, E), k=torch.randn(S, N, E), v=torch.randn(S, N, E), attn_mask=am, key_padding_mask=kpm),
        mha_call(need_weights=nw))
# unbatched self-attention with the causal hint
causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
run("mha_unbatched_causal", nn.MultiheadAttention(E, H), dict(q=torch.randn(L, E), attn_mask=causal),
    mha_call(need_weights=False, is_causal=True))
run("mha_unbatched_weights", nn.MultiheadAttention(E, H), dict(q=torch.randn(L, E), k=torch.randn(S, E),
    v=torch.randn(S, E), key_padding_mask=torch.tensor([False, True, False, False])), mha_call())

FF = 16
skpm = torch.tensor([[False, False, False, True], [False, True, False, False]])


def enc_call(m, src, **kw):
    return m(src, **kw), None


run("enc_post_relu", nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, batch_first=True),
    dict(src=torch.randn(N, S, E), src_key_padding_mask=skpm), enc_call)
run("enc_pre_gelu", nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, activation="gelu", norm_first=True),
    dict(src=torch.randn(S, N, E), src_mask=nn.Transformer.generate_square_subsequent_mask(S)), enc_call)
run("enc_nobias_unbatched", nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, bias=False, norm_first=True),
    dict(src=torch.randn(S, E)), enc_call)


def dec_call(m, tgt, memory, **kw):
    return m(tgt, memory, **kw), None


run("dec_post", nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, batch_first=True),
    dict(tgt=torch.randn(N, L, E), memory=torch.randn(N, S, E), tgt_mask=causal, memory_key_padding_mask=skpm),
    dec_call)
run("dec_pre_gelu", nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, activation="gelu", norm_first=True),
    dict(tgt=torch.randn(L, N, E), memory=torch.randn(S, N, E), memory_mask=torch.randn(L, S)), dec_call)
enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, batch_first=True), 2,
                            norm=nn.LayerNorm(E), enable_nested_tensor=False)
run("encoder_stack", enc, dict(src=torch.randn(N, S, E), src_key_padding_mask=skpm),
    lambda m, src, **kw: (m(src, **kw), None))


def tr_call(m, src, tgt, **kw):
    return m(src, tgt, **kw), None


run("transformer", nn.Transformer(E, H, 2, 1, FF, dropout=0.0, batch_first=True),
    dict(src=torch.randn(N, S, E), tgt=torch.randn(N, L, E), src_key_padding_mask=skpm,
         tgt_mask=nn.Transformer.generate_square_subsequent_mask(L), memory_key_padding_mask=skpm), tr_call)

ref.write("transformer.txt")
