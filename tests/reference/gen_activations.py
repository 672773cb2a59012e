#!/usr/bin/env python3
"""Writes activations.txt: inputs and PyTorch outputs for tests/test_activations.cpp.

    source /tmp/torchenv.sh && python3 tests/reference/gen_activations.py [output path]

Format (see tests/reference.hpp):
    case <name>
    tensor <key> <dtype> <ndim> <sizes...> <values...>
    end
"""

import torch
import torch.nn.functional as F

from reference_writer import ReferenceFile

torch.manual_seed(0)

ref = ReferenceFile()
case = ref.case

INF, NAN = float("inf"), float("nan")
EDGE = [0.0, -0.0, 1e-3, -1e-3, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 6.0, -6.0, 20.0, -20.0,
        30.0, -30.0, 100.0, -100.0, NAN, INF, -INF,
        0.25, -0.25, 2.5, -2.5, 0.7, -0.7, 4.5, -4.5, 19.9, 21.0]

OPS = {
    "hardtanh": F.hardtanh,
    "relu6": F.relu6,
    "leaky_relu": F.leaky_relu,
    "elu": F.elu,
    "selu": F.selu,
    "celu": F.celu,
    "softplus": F.softplus,
    "softsign": F.softsign,
    "mish": F.mish,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "logsigmoid": F.logsigmoid,
    "tanhshrink": F.tanhshrink,
    "softshrink": F.softshrink,
    "hardshrink": F.hardshrink,
    # non-default parameters
    "hardtanh_p": lambda x: F.hardtanh(x, min_val=-2.5, max_val=0.75),
    "leaky_relu_p": lambda x: F.leaky_relu(x, negative_slope=0.2),
    "elu_p": lambda x: F.elu(x, alpha=0.5),
    "celu_p": lambda x: F.celu(x, alpha=2.0),
    "softplus_p": lambda x: F.softplus(x, beta=2.0, threshold=10.0),
    "softshrink_p": lambda x: F.softshrink(x, lambd=1.0),
    "hardshrink_p": lambda x: F.hardshrink(x, lambd=3.0),
}

for dt, tag in [(torch.float32, "f32"), (torch.float64, "f64")]:
    x = torch.tensor(EDGE, dtype=dt)
    for name, fn in OPS.items():
        case(f"{name}_{tag}", x=x, out=fn(x))

# int32 input: computed in float32 (torch's float ops reject ints, so the reference is the float32 op)
xi = torch.tensor([0, 1, -1, 2, -3, 7, -8, 25, 100, -100], dtype=torch.int32)
for name in ["elu", "softplus", "mish", "hardswish", "logsigmoid", "relu6"]:
    case(f"{name}_i32", x=xi, out=OPS[name](xi.float()))

# glu on [4, 6] along dim 1 and dim 0
g = torch.randn(4, 6, dtype=torch.float32)
case("glu_dim1_f32", x=g, out=F.glu(g, dim=1))
case("glu_dim0_f32", x=g, out=F.glu(g, dim=0))
case("glu_dimm1_f32", x=g, out=F.glu(g, dim=-1))
gd = g.double()
case("glu_dim1_f64", x=gd, out=F.glu(gd, dim=1))

ref.write("activations.txt")
