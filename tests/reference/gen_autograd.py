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

ref.write("autograd.txt")
