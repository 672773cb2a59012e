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

# integer and bool inputs: the result dtype and values torch gives (relu, relu6, hardtanh and clamp
# keep the integer dtype, bounds truncated and saturated to its range; softsign, tanhshrink and
# sigmoid compute in float32; nan_to_num returns its input). The activations torch has no integer
# kernel for (elu, softplus, ...) are compile errors in tenet (tests/compile_fail/activation_integer.cpp).
INT_INPUTS = {
    "i8": torch.tensor([-128, -7, -3, -2, -1, 0, 1, 2, 3, 6, 7, 127], dtype=torch.int8),
    "i16": torch.tensor([-32768, -300, -3, -2, -1, 0, 1, 2, 3, 6, 7, 300, 32767], dtype=torch.int16),
    "i32": torch.tensor([-2147483648, -300, -3, -2, -1, 0, 1, 2, 3, 6, 7, 300, 2147483647], dtype=torch.int32),
    "i64": torch.tensor([-(2 ** 53), -300, -3, -2, -1, 0, 1, 2, 3, 6, 7, 300, 2 ** 53], dtype=torch.int64),
    "u8": torch.tensor([0, 1, 2, 3, 5, 6, 7, 200, 254, 255], dtype=torch.uint8),
}
INT_OPS = {
    "relu": F.relu,
    "relu6": F.relu6,
    "hardtanh": F.hardtanh,
    "hardtanh_p": lambda x: F.hardtanh(x, -1.5, 2.5),
    "clamp": lambda x: torch.clamp(x, -1, 1),
    "clamp_wide": lambda x: torch.clamp(x, -300, 300),
    "clamp_float": lambda x: torch.clamp(x, -2.5, 4.5),
    "clamp_min": lambda x: torch.clamp_min(x, -1),
    "clamp_max": lambda x: torch.clamp_max(x, 2),
    "nan_to_num": torch.nan_to_num,
    "softsign": F.softsign,
    "tanhshrink": F.tanhshrink,
    "sigmoid": torch.sigmoid,
}
for tag, x in INT_INPUTS.items():
    for name, fn in INT_OPS.items():
        case(f"{name}_{tag}", x=x, out=fn(x))
xb = torch.tensor([False, True, True, False])
for name in ["clamp", "clamp_float", "nan_to_num", "sigmoid"]:
    case(f"{name}_b", x=xb, out=INT_OPS[name](xb))

# glu on [4, 6] along dim 1 and dim 0
g = torch.randn(4, 6, dtype=torch.float32)
case("glu_dim1_f32", x=g, out=F.glu(g, dim=1))
case("glu_dim0_f32", x=g, out=F.glu(g, dim=0))
case("glu_dimm1_f32", x=g, out=F.glu(g, dim=-1))
gd = g.double()
case("glu_dim1_f64", x=gd, out=F.glu(gd, dim=1))

ref.write("activations.txt")
