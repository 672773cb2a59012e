#!/usr/bin/env python3
"""Writes indexing.txt: PyTorch results for gather, scatter (all reductions), index_select/add/copy/fill,
masked_fill/select, nonzero, count_nonzero, take_along_dim, embedding, one_hot, bincount, histc, nll_loss
and cross_entropy (tests/test_indexing.cpp).

    python3 tests/reference/gen_indexing.py [output path]
"""
import torch
import torch.nn.functional as F

from reference_writer import ReferenceFile

ref = ReferenceFile()
torch.manual_seed(0)

# ---------------------------------------------------------------------------------------------
# gather
x = torch.randn(3, 5)
gi1 = torch.randint(0, 5, (3, 4))
gi0 = torch.randint(0, 3, (2, 5))
x3 = torch.randn(2, 3, 4)
gi3 = torch.randint(0, 3, (2, 5, 3))
xi = torch.randint(-50, 50, (3, 5))
ref.case("gather", x=x, xT=x.t().contiguous(), idx1=gi1, idx0=gi0, out1=x.gather(1, gi1), out0=x.gather(0, gi0),
         x3=x3, idx3=gi3, out3=x3.gather(1, gi3), x64=x.double(), out1_64=x.double().gather(1, gi1),
         xi=xi, outi=xi.gather(1, gi1))

# ---------------------------------------------------------------------------------------------
# scatter: replace with unique indices per row; the reductions with duplicates
self_ = torch.randn(3, 5)
uniq = torch.stack([torch.randperm(5)[:3] for _ in range(3)])  # [3, 3] unique per row
src = torch.randn(3, 4)  # larger than the index in dim 1
dup = torch.tensor([[0, 1, 1, 4], [2, 2, 2, 2], [4, 0, 4, 0]])
dup0 = torch.tensor([[0, 2, 2, 1, 0], [0, 0, 2, 1, 1]])  # dim 0, [2, 5] into [3, 5]
src0 = torch.randn(2, 5)
case = dict(s=self_, uniq=uniq, src=src, dup=dup, dup0=dup0, src0=src0,
            scatter=self_.scatter(1, uniq, src), scatter_value=self_.scatter(1, uniq, 2.5),
            scatter_add=self_.scatter_add(1, dup, src), scatter_add0=self_.scatter_add(0, dup0, src0))
for red in ["sum", "prod", "mean", "amax", "amin"]:
    for inc in [True, False]:
        case[f"{red}_{int(inc)}"] = self_.scatter_reduce(1, dup, src, red, include_self=inc)
        case[f"{red}0_{int(inc)}"] = self_.scatter_reduce(0, dup0, src0, red, include_self=inc)
ref.case("scatter", **case)

selfi = torch.randint(-9, 10, (3, 5))
srci = torch.randint(-9, 10, (3, 4))
case = dict(s=selfi, src=srci, dup=dup, uniq=uniq, scatter=selfi.scatter(1, uniq, srci))
for red in ["sum", "prod", "mean", "amax", "amin"]:
    for inc in [True, False]:
        case[f"{red}_{int(inc)}"] = selfi.scatter_reduce(1, dup, srci, red, include_self=inc)
ref.case("scatter_int", **case)

s64 = self_.double()
ref.case("scatter_f64", s=s64, src=src.double(), dup=dup, add=s64.scatter_add(1, dup, src.double()),
         mean=s64.scatter_reduce(1, dup, src.double(), "mean", include_self=False))

# NaN propagates through amax/amin
sn = torch.tensor([[1.0, float("nan"), 3.0]])
srcn = torch.tensor([[float("nan"), 5.0, -1.0]])
idn = torch.tensor([[0, 2, 1]])
ref.case("scatter_nan", s=sn, src=srcn, idx=idn, amax=sn.scatter_reduce(1, idn, srcn, "amax"),
         amin=sn.scatter_reduce(1, idn, srcn, "amin"))

# ---------------------------------------------------------------------------------------------
# index_*
xs = torch.randn(4, 5)
isel = torch.tensor([3, 0, 3, 1])
srcr = torch.randn(4, 5)
ia = torch.tensor([1, 3, 1])
srca1 = torch.randn(4, 3)
ic = torch.tensor([4, 0, 2])
ifl = torch.tensor([-1, 0])
ref.case("index_ops", x=xs, isel=isel, sel0=xs.index_select(0, isel), sel1=xs.index_select(1, isel),
         ia=ia, srca1=srca1, add1=xs.index_add(1, ia, srca1), add1_alpha=xs.index_add(1, ia, srca1, alpha=-2.5),
         ic=ic, copy1=xs.index_copy(1, ic, srca1), ifl=ifl, fill1=xs.index_fill(1, ifl, -7.0),
         fill0=xs.index_fill(0, ifl, 3.0))
xsi = torch.randint(-9, 10, (4, 5))
srcai = torch.randint(-9, 10, (4, 3))
ref.case("index_ops_int", x=xsi, isel=isel, sel1=xsi.index_select(1, isel), ia=ia, srca1=srcai,
         add1_alpha=xsi.index_add(1, ia, srcai, alpha=3), fill1=xsi.index_fill(1, ifl, 5))

# ---------------------------------------------------------------------------------------------
# masks
xm = torch.randn(3, 5)
mrow = torch.tensor([[True, False, False, True, True]])
mfull = xm > 0.2
xz = torch.tensor([[[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]], [[0.0, 0.0, 3.0], [0.0, -1.0, 0.5]]])
ref.case("masks", x=xm, mrow=mrow, mfull=mfull, fill_row=xm.masked_fill(mrow, -1.5),
         select_full=xm.masked_select(mfull), select_row=xm.masked_select(mrow),
         xz=xz, nonzero=torch.nonzero(xz), count_all=torch.count_nonzero(xz),
         count_2=torch.count_nonzero(xz, dim=2), count_01=torch.count_nonzero(xz, dim=(0, 1)))

# ---------------------------------------------------------------------------------------------
# take_along_dim, embedding, one_hot
xt = torch.randn(3, 4)
tidx = torch.tensor([[2, -1]])  # broadcast over dim 0, negative wraps
tflat = torch.tensor([11, 0, 10, 5])
srt = torch.argsort(xt, dim=1)
ref.case("take", x=xt, idx=tidx, out=torch.take_along_dim(xt, tidx, 1), flat_idx=tflat,
         flat=torch.take_along_dim(xt, tflat), srt=srt, sorted=torch.take_along_dim(xt, srt, 1))
w = torch.randn(10, 4)
eidx = torch.tensor([[1, 9, 1], [0, 4, 2]])
ref.case("embedding", w=w, idx=eidx, out=F.embedding(eidx, w, padding_idx=0), idx1=eidx[0], out1=F.embedding(eidx[0], w))
oh = torch.tensor([[0, 3, 1], [2, 2, 0]])
ref.case("one_hot", idx=oh, auto=F.one_hot(oh), six=F.one_hot(oh, 6))

# ---------------------------------------------------------------------------------------------
# bincount, histc
bx = torch.randint(0, 7, (20,))
bw = torch.rand(20)
ref.case("bincount", x=bx, plain=torch.bincount(bx), min10=torch.bincount(bx, minlength=10), w=bw,
         weighted=torch.bincount(bx, bw), weighted64=torch.bincount(bx, bw.double()),
         empty=torch.bincount(torch.zeros(0, dtype=torch.long), minlength=3))
hx = torch.randn(100)
hx[3] = 1.0
hx[4] = -1.0
hconst = torch.full((5,), 2.0)
ref.case("histc", x=hx, data=torch.histc(hx, bins=10), range=torch.histc(hx, bins=7, min=-1, max=1),
         x64=hx.double(), data64=torch.histc(hx.double(), bins=10), const=hconst, const_out=torch.histc(hconst, bins=4),
         empty=torch.histc(torch.zeros(0), bins=3))

# ---------------------------------------------------------------------------------------------
# losses
logits = torch.randn(5, 4)
lp = F.log_softmax(logits, 1)
tgt = torch.tensor([1, 0, 3, -100, 2])
cw = torch.rand(4) + 0.5
case = dict(logits=logits, lp=lp, tgt=tgt, tgt_c=tgt.clamp(min=0), w=cw)
for red in ["none", "sum", "mean"]:
    case[f"nll_{red}"] = F.nll_loss(lp, tgt, reduction=red)
    case[f"nllw_{red}"] = F.nll_loss(lp, tgt, weight=cw, reduction=red)
    case[f"ce_{red}"] = F.cross_entropy(logits, tgt, reduction=red)
    case[f"cew_{red}"] = F.cross_entropy(logits, tgt, weight=cw, reduction=red)
    case[f"ces_{red}"] = F.cross_entropy(logits, tgt, reduction=red, label_smoothing=0.2)
    case[f"cews_{red}"] = F.cross_entropy(logits, tgt, weight=cw, reduction=red, label_smoothing=0.2)
case["nll_ign1"] = F.nll_loss(lp, tgt.clamp(min=0), ignore_index=1)
case["nll_all_ignored"] = F.nll_loss(lp, torch.full((5,), -100))
ref.case("class_losses", **case)

probs = torch.softmax(torch.randn(5, 4), 1)
case = dict(logits=logits, probs=probs, w=cw)
for red in ["none", "sum", "mean"]:
    case[f"ce_{red}"] = F.cross_entropy(logits, probs, reduction=red)
    case[f"cews_{red}"] = F.cross_entropy(logits, probs, weight=cw, reduction=red, label_smoothing=0.1)
ref.case("prob_losses", **case)

lnd = torch.randn(2, 4, 3)
tnd = torch.tensor([[0, 3, -100], [2, 2, 1]])
ref.case("nd_losses", logits=lnd, tgt=tnd, w=cw, nll_none=F.nll_loss(F.log_softmax(lnd, 1), tnd, reduction="none"),
         nllw_mean=F.nll_loss(F.log_softmax(lnd, 1), tnd, weight=cw),
         ce_mean=F.cross_entropy(lnd, tnd), ces_none=F.cross_entropy(lnd, tnd, reduction="none", label_smoothing=0.3),
         l1=lnd[0, :, 0], t1=tnd[0, 0], ce_unbatched=F.cross_entropy(lnd[0, :, 0], tnd[0, 0]),
         ce_unbatched64=F.cross_entropy(lnd[0, :, 0].double(), tnd[0, 0]))

ref.write("indexing.txt")
