#!/usr/bin/env python3
"""Writes autograd.txt: inputs, seed gradients and PyTorch's gradients for tests/test_autograd_reference.cpp.

    source /tmp/torchenv.sh && python3 tests/reference/gen_autograd.py [output path]

Each case holds the inputs, the seed `seed` (the gradient of the output; absent for a scalar loss)
and `grad_<input>` for every input, all float64 except integer targets.
"""

import torch
import torch.nn.functional as F

from reference_writer import ReferenceFile

torch.manual_seed(0)
ref = ReferenceFile()
D = torch.float64


def leaf(t):
    return t.to(D).clone().requires_grad_(True)


def grads(**inputs):
    return {f"grad_{k}": v.grad for k, v in inputs.items()}


# a small MLP classifier: cross_entropy(linear(relu(linear(x))))
x, w1, b1, w2, b2 = (leaf(torch.randn(*s)) for s in [(6, 4), (5, 4), (5,), (3, 5), (3,)])
target = torch.tensor([0, 2, 1, 1, 0, 2])
loss = F.cross_entropy(F.linear(F.relu(F.linear(x, w1, b1)), w2, b2), target)
loss.backward()
ref.case("mlp", x=x, w1=w1, b1=b1, w2=w2, b2=b2, target=target, loss=loss, **grads(x=x, w1=w1, b1=b1, w2=w2, b2=b2))

# kinks and ties: relu'(0) = 0, abs'(0) = 0, amax ties split evenly, maximum ties split, sqrt'(0) = inf,
# clamp (hardtanh) at its bounds, pow with base 0
v = leaf(torch.tensor([0.0, 2.0, -1.0, 2.0, 0.5, 1.0, -1.0]))
u = leaf(torch.tensor([0.0, 1.0, 1.5, 3.0, 0.5, 0.0, 2.0]))
out = (F.relu(v) + v.abs() + torch.maximum(v, u) + torch.minimum(u, v) + F.hardtanh(v) + F.relu6(v * 3)).sum() + \
    v.amax() + torch.pow(u, v).sum()
out.backward()
ref.case("kinks", v=v, u=u, loss=out, **grads(v=v, u=u))
s = leaf(torch.tensor([0.0, 4.0]))
torch.sqrt(s).sum().backward()
ref.case("sqrt_zero", s=s, **grads(s=s))

# layer_norm and softmax with a seed
x = leaf(torch.randn(3, 4))
g, b = leaf(torch.randn(4)), leaf(torch.randn(4))
seed = torch.randn(3, 4, dtype=D)
F.layer_norm(x, (4,), g, b).backward(seed)
ref.case("layer_norm", x=x, g=g, b=b, seed=seed, **grads(x=x, g=g, b=b))
x = leaf(torch.randn(3, 5))
seed = torch.randn(3, 5, dtype=D)
(F.softmax(x, 1) * 2 + F.log_softmax(x, 0)).backward(seed)
ref.case("softmax", x=x, seed=seed, **grads(x=x))

# conv2d with stride and padding, then a pooling
x, w, b = leaf(torch.randn(2, 2, 5, 5)), leaf(torch.randn(3, 2, 3, 3)), leaf(torch.randn(3))
y = F.avg_pool2d(F.conv2d(x, w, b, stride=(2, 1), padding=1), 2)
seed = torch.randn(*y.shape, dtype=D)
y.backward(seed)
ref.case("conv2d", x=x, w=w, b=b, seed=seed, **grads(x=x, w=w, b=b))

# prod with zeros, cumsum, sort
x = leaf(torch.tensor([[1.5, 0.0, 2.0, -1.0], [0.0, 3.0, 0.0, 2.0], [1.0, 2.0, 3.0, 4.0]]))
seed = torch.randn(3, dtype=D)
x.prod(1).backward(seed)
ref.case("prod_zeros", x=x, seed=seed, **grads(x=x))
x = leaf(torch.randn(3, 4))
seed = torch.randn(3, 4, dtype=D)
(torch.cumsum(x, 1) + torch.sort(x, 1, descending=True).values).backward(seed)
ref.case("cumsum_sort", x=x, seed=seed, **grads(x=x))

# embedding with repeated indices, mse_loss, a broadcast bias
w = leaf(torch.randn(5, 3))
idx = torch.tensor([[0, 4, 4], [2, 0, 4]])
bias = leaf(torch.randn(3))
t = torch.randn(2, 3, 3, dtype=D)
l = F.mse_loss(F.embedding(idx, w) + bias, t)
l.backward()
ref.case("embedding_mse", w=w, idx=idx, bias=bias, t=t, **grads(w=w, bias=bias))

# ---- gradients at special points: 0, +-1, +-inf, NaN, arguments where an intermediate of the
# decomposition overflows, constant rows, size-1 dims, zero vectors. Differentiating a decomposition
# gives 0 * inf = NaN there unless tenet uses PyTorch's own derivative (or masks as torch does).
# Each unary case holds x, grad_x of sum(f(x)) and, where torch's forward mode agrees with its
# reverse mode elementwise, jvp (the tangent of f(x) along ones).
INF, NAN = float("inf"), float("nan")
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 20.0, -20.0, 100.0, -100.0, 1000.0, -1000.0,
           INF, -INF, NAN, 1e-30, 0.1, 0.9]
UNARY_SPECIAL = {
    "acosh": torch.acosh, "asinh": torch.asinh, "asin": torch.asin, "acos": torch.acos, "atanh": torch.atanh,
    "sinh": torch.sinh, "cosh": torch.cosh, "sinc": torch.sinc, "logit": torch.logit,
    "logit_eps": lambda x: torch.logit(x, 0.1), "sigmoid": torch.sigmoid, "silu": F.silu, "elu": F.elu,
    "selu": F.selu, "celu": lambda x: F.celu(x, 2.0), "softplus": F.softplus, "mish": F.mish,
    "hardswish": F.hardswish, "logsigmoid": F.logsigmoid, "xlogy_x0": lambda x: torch.xlogy(x, torch.zeros_like(x)),
    "atan2_x0": lambda x: torch.atan2(x, torch.zeros_like(x)), "hypot_x0": lambda x: torch.hypot(x, torch.zeros_like(x)),
    "scaled": lambda x: x * 2.0 + 1.0,
}
FLOAT32_SPECIAL = ["sinh", "softplus", "hypot_x0"]
# tenet's forward mode through hypot's decomposition gives 0 at 0 and +-inf, where torch's formula
# x_t x / hypot is 0 / 0 (reverse mode agrees with torch's NaN there)
NO_JVP = {"hypot_x0"}


def same_values(a, b):
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def special_case(name, fn, dtype, jvp=True):
    x = torch.tensor(SPECIAL, dtype=dtype).requires_grad_(True)
    fn(x).sum().backward()
    extra = {}
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(x.detach(), torch.ones_like(x))
        t = torch.autograd.forward_ad.unpack_dual(fn(dual)).tangent
    if jvp and same_values(t, x.grad):
        extra["jvp"] = t
    ref.case(name, x=x, **grads(x=x), **extra)


for name, fn in UNARY_SPECIAL.items():
    special_case(f"special_{name}", fn, D, name not in NO_JVP)
for name in FLOAT32_SPECIAL:
    special_case(f"special_{name}_f32", UNARY_SPECIAL[name], torch.float32, name not in NO_JVP)

# std of a constant row and over a size-1 dim (NaN with correction 1, as the forward), vector norms
# of zero vectors (p = 2, 3, 0.5: torch's gradient is 0 there, and at the zero elements for p < 1),
# cosine_similarity of a zero vector
x = leaf(torch.tensor([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]))
x.std(1).sum().backward()
ref.case("std_constant_row", x=x, **grads(x=x))
x = leaf(torch.tensor([[2.0], [3.0]]))
y = x.std(1)
y.sum().backward()
ref.case("std_size1", x=x, y=y, **grads(x=x))
x = leaf(torch.tensor([[2.0], [3.0]]))
x.std(1, correction=0).sum().backward()
ref.case("std_size1_c0", x=x, **grads(x=x))
x = leaf(torch.tensor([[2.0, 2.0, 2.0]]))
x.std().backward()
ref.case("std_all", x=x, **grads(x=x))
for tag, p in [("2", 2.0), ("3", 3.0), ("half", 0.5), ("1", 1.0), ("inf", INF)]:
    x = leaf(torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, -2.0]]))
    y = torch.linalg.vector_norm(x, p, dim=1)
    y.sum().backward()
    ref.case(f"norm_{tag}", x=x, y=y, **grads(x=x))
x = leaf(torch.tensor([[0.0, 0.0], [1.0, 1.0]]))
other = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=D)
F.cosine_similarity(x, other).sum().backward()
ref.case("cosine_zero", x=x, other=other, **grads(x=x))

# pooling and interpolation with a NaN or inf: torch's kernels keep it in the outputs whose window
# (or stencil) holds it, and their backward sends a NaN seed only to the inputs of that output;
# max_pool2d's gradient goes to one index (first max, last NaN, first element inside the input of
# an all -inf window)
def pool_case(name, fn, x, seed=None):
    x = leaf(x)
    y = fn(x)
    if seed is None:
        seed = torch.ones_like(y)
    y.backward(seed)
    ref.case(name, x=x, y=y, seed=seed, **grads(x=x))


def ones_with(h, w, at, value):
    t = torch.ones(1, 1, h, w, dtype=D)
    for i, j in at:
        t[0, 0, i, j] = value
    return t


nan00 = ones_with(4, 4, [(0, 0)], NAN)
nan11 = ones_with(4, 4, [(1, 1)], NAN)
inf12 = ones_with(4, 4, [(1, 2)], INF)
pool_case("adaptive_nan", lambda x: F.adaptive_avg_pool2d(x, 2), nan00)
pool_case("adaptive_3_nan", lambda x: F.adaptive_avg_pool2d(x, 3), nan11)
pool_case("adaptive_inf", lambda x: F.adaptive_avg_pool2d(x, (3, 2)), inf12)
pool_case("adaptive_nan_seed", lambda x: F.adaptive_avg_pool2d(x, 3), torch.randn(1, 1, 5, 4, dtype=D),
          ones_with(3, 3, [(1, 1)], NAN))
pool_case("avg_pool_nan", lambda x: F.avg_pool2d(x, 3, 1, 1), nan00)
pool_case("nearest_nan", lambda x: F.interpolate(x, size=(8, 3)), nan11)
pool_case("nearest_nan_seed", lambda x: F.interpolate(x, size=(3, 3)), torch.randn(1, 1, 4, 4, dtype=D),
          ones_with(3, 3, [(1, 1)], NAN))
pool_case("bilinear_nan", lambda x: F.interpolate(x, size=(8, 8), mode="bilinear"), nan00)
pool_case("bilinear_inf", lambda x: F.interpolate(x, size=(3, 5), mode="bilinear"), inf12)
pool_case("bilinear_same_rows", lambda x: F.interpolate(x, size=(4, 5), mode="bilinear"), nan11)
pool_case("bilinear_corners_inf", lambda x: F.interpolate(x, size=(6, 6), mode="bilinear", align_corners=True), inf12)
pool_case("bilinear_nan_seed", lambda x: F.interpolate(x, size=(3, 3), mode="bilinear"), torch.randn(1, 1, 4, 4, dtype=D),
          ones_with(3, 3, [(1, 1)], NAN))
pool_case("max_pool_nan", lambda x: F.max_pool2d(x, 2), ones_with(4, 4, [(0, 0), (1, 1), (2, 3)], NAN))
pool_case("max_pool_tie", lambda x: F.max_pool2d(x, 2), ones_with(4, 4, [(3, 3)], 2.0))
pool_case("max_pool_inf", lambda x: F.max_pool2d(x, 2), inf12)
pool_case("max_pool_all_ninf", lambda x: F.max_pool2d(x, 3, 2, 1), torch.full((1, 1, 4, 4), -INF, dtype=D))
pool_case("max_pool_overlap", lambda x: F.max_pool2d(x, 3, 1, 1, dilation=1), ones_with(4, 4, [(0, 0), (1, 1)], NAN))
pool_case("max_pool_nan_seed", lambda x: F.max_pool2d(x, 2), torch.arange(16.0, dtype=D).reshape(1, 1, 4, 4),
          ones_with(2, 2, [(0, 1)], NAN))
x = nan11.clone()
t = torch.full((1, 1, 4, 4), 0.5, dtype=D)
t[0, 0, 1, 1] = 2.0
with torch.autograd.forward_ad.dual_level():
    out = F.max_pool2d(torch.autograd.forward_ad.make_dual(ones_with(4, 4, [(0, 0), (1, 1)], NAN), t), 2)
    jvp = torch.autograd.forward_ad.unpack_dual(out).tangent
ref.case("max_pool_jvp", x=ones_with(4, 4, [(0, 0), (1, 1)], NAN), tangent=t, jvp=jvp)

ref.write("autograd.txt")
