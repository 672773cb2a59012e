#!/usr/bin/env python3
"""Writes nn_functional.txt: PyTorch results for batch_norm, instance_norm, group_norm, softmin,
softmax/log_softmax with dtype, baddbmm, einsum, kl_div, binary_cross_entropy(_with_logits),
cosine_similarity and pairwise_distance (tests/test_nn_functional.cpp). Dropout is checked by its
statistics in the test (tenet's Philox stream is not torch's).

    python3 tests/reference/gen_nn_functional.py [output path]
"""
import torch
import torch.nn.functional as F

from reference_writer import ReferenceFile

ref = ReferenceFile()
torch.manual_seed(0)

# ---- batch_norm: a training step updates the running stats, then eval uses them
for name, dt, sizes in [("bn_f32", torch.float32, (4, 3, 5)), ("bn_f64", torch.float64, (6, 3))]:
    x = torch.randn(*sizes, dtype=dt) * 2 + 0.5
    w = torch.randn(3, dtype=dt)
    b = torch.randn(3, dtype=dt)
    rm = torch.randn(3, dtype=dt)
    rv = torch.rand(3, dtype=dt) + 0.5
    rm0, rv0 = rm.clone(), rv.clone()
    out = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)
    rm1, rv1 = rm.clone(), rv.clone()
    out_eval = F.batch_norm(x, rm, rv, w, None, training=False)
    out_plain = F.batch_norm(x, None, None, training=True)
    rm2, rv2 = rm0.clone(), rv0.clone()
    out_m = F.batch_norm(x, rm2, rv2, None, b, training=True, momentum=0.3, eps=1e-3)
    ref.case(name, x=x, w=w, b=b, rm0=rm0, rv0=rv0, out=out, rm1=rm1, rv1=rv1, out_eval=out_eval,
             out_plain=out_plain, out_m=out_m, rm2=rm2, rv2=rv2)

x1 = torch.randn(1, 3, 4)  # batch 1
rm = torch.zeros(3)
rv = torch.ones(3)
out1 = F.batch_norm(x1, rm, rv, training=True)
ref.case("bn_batch1", x=x1, out=out1, rm=rm, rv=rv)

# ---- instance_norm
x = torch.randn(2, 3, 6) * 3 - 1
w = torch.randn(3)
b = torch.randn(3)
rm = torch.randn(3)
rv = torch.rand(3) + 0.5
rm0, rv0 = rm.clone(), rv.clone()
plain = F.instance_norm(x)
stats = F.instance_norm(x, rm, rv, w, b, use_input_stats=True, momentum=0.2)
evald = F.instance_norm(x, rm, rv, w, b, use_input_stats=False)
ref.case("in_f32", x=x, w=w, b=b, rm0=rm0, rv0=rv0, plain=plain, stats=stats, rm1=rm, rv1=rv, evald=evald)
x = torch.randn(2, 3, 2, 3, dtype=torch.float64)
ref.case("in_f64", x=x, out=F.instance_norm(x, eps=1e-3))

# ---- group_norm
x = torch.randn(2, 6, 4) * 2 + 1
w = torch.randn(6)
b = torch.randn(6)
ref.case("gn_f32", x=x, w=w, b=b, g3=F.group_norm(x, 3, w, b), g1=F.group_norm(x, 1), g6=F.group_norm(x, 6, w, None, eps=1e-2))
x = torch.randn(2, 4, 2, 2, dtype=torch.float64)
ref.case("gn_f64", x=x, g2=F.group_norm(x, 2))

# ---- softmin, softmax/log_softmax with dtype
x = torch.randn(3, 5)
xi = torch.randint(-5, 5, (3, 5), dtype=torch.int32)
ref.case("softmax_dtype", x=x, xi=xi, softmin1=F.softmin(x, 1), softmin0=F.softmin(x, 0),
         sm64=F.softmax(x, -1, dtype=torch.float64), lsm64=F.log_softmax(x, 0, dtype=torch.float64),
         smi=F.softmax(xi, 1, dtype=torch.float32), smin64=F.softmin(x, 1, dtype=torch.float64))

# ---- baddbmm
c = torch.randn(2, 3, 5)
a = torch.randn(2, 3, 4)
bb = torch.randn(2, 4, 5)
cb = torch.randn(5)
cn = torch.full((2, 3, 5), float("nan"))
ref.case("baddbmm", c=c, a=a, b=bb, cb=cb, out=torch.baddbmm(c, a, bb),
         out_ba=torch.baddbmm(c, a, bb, beta=0.5, alpha=2.0), out_bc=torch.baddbmm(cb, a, bb, alpha=-1.0),
         out_b0=torch.baddbmm(cn, a, bb, beta=0.0))

# ---- einsum
a = torch.randn(2, 3, 4)
b = torch.randn(2, 4, 5)
bt = torch.randn(2, 5, 4)
m = torch.randn(4, 4)
u = torch.randn(4)
v = torch.randn(3)
w = torch.randn(4, 3)
z = torch.randn(2, 5, 5)
ref.case("einsum", a=a, b=b, bt=bt, m=m, u=u, v=v, w=w, z=z,
         bmm=torch.einsum("bij,bjk->bik", a, b),
         bmm_t=torch.einsum("bij,bkj->bik", a, bt),
         transpose=torch.einsum("ij->ji", m),
         diag=torch.einsum("ii->i", m),
         trace=torch.einsum("ii", m),
         dot=torch.einsum("i,i->", u, u),
         outer=torch.einsum("i,j->ij", u, v),
         implicit=torch.einsum("ij,j", m, u),       # -> i
         implicit2=torch.einsum("ba,b", w, u),      # -> a
         sum_all=torch.einsum("bij->", a),
         three=torch.einsum("bij,bjk,bkk->bik", a, b, z),
         three_mm=torch.einsum("ij,jk,kl->il", m, w, w.t()),
         mv=torch.einsum("ij,j->i", w.t(), u),
         bcast=torch.einsum("ij,ij->ij", m, u[:1].reshape(1, 1)))
a64 = torch.randn(3, 4, dtype=torch.float64)
b64 = torch.randn(4, 2, dtype=torch.float64)
ref.case("einsum_f64", a=a64, b=b64, mm=torch.einsum("ik,kj->ij", a64, b64), mm_t=torch.einsum("ik,kj->ji", a64, b64))

# ---- kl_div
inp = F.log_softmax(torch.randn(3, 4), -1)
tgt = F.softmax(torch.randn(3, 4), -1)
tgt[0, 1] = 0.0
ltgt = F.log_softmax(torch.randn(3, 4), -1)
ref.case("kl_div", input=inp, target=tgt, ltarget=ltgt,
         mean=F.kl_div(inp, tgt, reduction="mean"), sum=F.kl_div(inp, tgt, reduction="sum"),
         none=F.kl_div(inp, tgt, reduction="none"), batchmean=F.kl_div(inp, tgt, reduction="batchmean"),
         log_none=F.kl_div(inp, ltgt, reduction="none", log_target=True),
         log_batchmean=F.kl_div(inp, ltgt, reduction="batchmean", log_target=True))

# ---- binary_cross_entropy
p = torch.tensor([[0.0, 0.3, 1.0, 0.9], [0.5, 1e-30, 0.2, 0.999]])
t = torch.tensor([[0.0, 1.0, 1.0, 0.2], [1.0, 1.0, 0.0, 0.0]])
wt = torch.tensor([0.5, 1.0, 2.0, 1.5])
ref.case("bce", input=p, target=t, weight=wt, mean=F.binary_cross_entropy(p, t),
         sum=F.binary_cross_entropy(p, t, reduction="sum"), none=F.binary_cross_entropy(p, t, reduction="none"),
         weighted=F.binary_cross_entropy(p, t, weight=wt, reduction="none"))
p64 = torch.rand(3, 4, dtype=torch.float64)
t64 = torch.rand(3, 4, dtype=torch.float64)
ref.case("bce_f64", input=p64, target=t64, mean=F.binary_cross_entropy(p64, t64))

# ---- binary_cross_entropy_with_logits
x = torch.tensor([[0.0, 2.0, -3.0, 100.0], [-100.0, 0.5, 30.0, -0.7], [1.0, -1.0, 5.0, -5.0]])
t = torch.rand(3, 4)
pw = torch.tensor([0.5, 1.0, 2.0, 3.0])
wt = torch.tensor([[1.0], [0.5], [2.0]])
ref.case("bce_logits", input=x, target=t, pos_weight=pw, weight=wt,
         mean=F.binary_cross_entropy_with_logits(x, t),
         none=F.binary_cross_entropy_with_logits(x, t, reduction="none"),
         pw=F.binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction="none"),
         both=F.binary_cross_entropy_with_logits(x, t, weight=wt, pos_weight=pw, reduction="sum"))
x64 = torch.randn(5, dtype=torch.float64) * 10
t64 = torch.rand(5, dtype=torch.float64)
ref.case("bce_logits_f64", input=x64, target=t64, mean=F.binary_cross_entropy_with_logits(x64, t64))

# ---- cosine_similarity, pairwise_distance
a = torch.randn(3, 5)
b = torch.randn(3, 5)
b[1] = 0.0
r = torch.randn(1, 5)
ref.case("cosine", a=a, b=b, r=r, dim1=F.cosine_similarity(a, b), dim0=F.cosine_similarity(a, b, dim=0),
         bcast=F.cosine_similarity(a, r), eps=F.cosine_similarity(a, b, eps=0.5))
a64 = torch.randn(2, 4, dtype=torch.float64)
b64 = torch.randn(2, 4, dtype=torch.float64)
ref.case("cosine_f64", a=a64, b=b64, out=F.cosine_similarity(a64, b64, dim=-1))
ref.case("pairwise", a=a, b=b, p2=F.pairwise_distance(a, b), p1=F.pairwise_distance(a, b, p=1.0),
         pinf=F.pairwise_distance(a, b, p=float("inf")), keep=F.pairwise_distance(a, b, keepdim=True),
         eps=F.pairwise_distance(a, b, eps=0.1))

# ---- float64 for kl_div, baddbmm, pairwise_distance (general p)
li = F.log_softmax(torch.randn(2, 5, dtype=torch.float64), -1)
lt = F.softmax(torch.randn(2, 5, dtype=torch.float64), -1)
c = torch.randn(3, 1, 2, dtype=torch.float64)
a = torch.randn(3, 4, 3, dtype=torch.float64)
b = torch.randn(3, 3, 2, dtype=torch.float64)
pa = torch.randn(4, 6, dtype=torch.float64)
pb = torch.randn(4, 6, dtype=torch.float64)
ref.case("misc_f64", li=li, lt=lt, kl=F.kl_div(li, lt, reduction="batchmean"), c=c, a=a, b=b,
         baddbmm=torch.baddbmm(c, a, b, beta=-0.5, alpha=0.25), pa=pa, pb=pb,
         p3=F.pairwise_distance(pa, pb, p=3.0))

ref.write("nn_functional.txt")
