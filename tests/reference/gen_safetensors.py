#!/usr/bin/env python3
"""Writes the safetensors fixtures of tests/test_safetensors.cpp with the `safetensors` package:

  safetensors_mlp.safetensors     the state_dict of a torch MLP (Linear, BatchNorm1d with running
                                  statistics, ReLU, Linear), metadata {"format": "pt"}
  safetensors_dtypes.safetensors  one tensor of each dtype tenet reads (F64 F32 F16 BF16 I64 I32 I16
                                  I8 U8 BOOL), no metadata
  safetensors.txt                 the MLP's input "x" and eval-mode output "y"; each dtype tensor's
                                  values ("v:<name>")

    python3 tests/reference/gen_safetensors.py            # writes the fixtures
    python3 tests/reference/gen_safetensors.py --check F  # loads F, a file tenet's save_model wrote
                                                          # (the C++ test writes one to the temporary
                                                          # directory and removes it), into the torch
                                                          # MLP and checks its output
"""
import os
import sys

import torch
import torch.nn as nn
from safetensors.torch import load_file, save_file

from reference_writer import ReferenceFile

HERE = os.path.dirname(os.path.abspath(__file__))


def make_mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


if len(sys.argv) > 2 and sys.argv[1] == "--check":
    model = make_mlp().eval()
    model.load_state_dict(load_file(sys.argv[2]))  # strict
    fixture = make_mlp().eval()
    fixture.load_state_dict(load_file(os.path.join(HERE, "safetensors_mlp.safetensors")))
    x = torch.randn(16, 4)
    with torch.no_grad():
        assert torch.equal(model(x), fixture(x)), "outputs differ"
    print(f"{sys.argv[2]}: loads in PyTorch, same outputs as the fixture")
    sys.exit(0)

torch.manual_seed(0)
model = make_mlp()
model.train()
with torch.no_grad():
    for _ in range(3):
        model(torch.randn(10, 4))  # running statistics and num_batches_tracked move
model.eval()
save_file(model.state_dict(), os.path.join(HERE, "safetensors_mlp.safetensors"), metadata={"format": "pt"})
x = torch.randn(5, 4)
with torch.no_grad():
    y = model(x)

vals = [0.5, -1.25, 3.0, 0.0, 7.0, -2.0]
dtypes = {
    "f64": torch.tensor(vals, dtype=torch.float64).reshape(2, 3) / 3,
    "f32": torch.tensor(vals, dtype=torch.float32).reshape(3, 2) / 7,
    "f16": torch.tensor(vals, dtype=torch.float16),
    "bf16": torch.tensor(vals, dtype=torch.bfloat16).reshape(1, 6),
    "i64": torch.tensor([1, -2, 3 << 40], dtype=torch.int64),
    "i32": torch.tensor([[7, -8], [9, 2**31 - 1]], dtype=torch.int32),
    "i16": torch.tensor([-300, 300], dtype=torch.int16),
    "i8": torch.tensor([-128, 127, 5], dtype=torch.int8),
    "u8": torch.tensor([0, 255, 17], dtype=torch.uint8),
    "bool": torch.tensor([True, False, True], dtype=torch.bool),
    "scalar": torch.tensor(2.5, dtype=torch.float32),
    "empty": torch.zeros(0, 3, dtype=torch.float32),
}
save_file(dtypes, os.path.join(HERE, "safetensors_dtypes.safetensors"))

ref = ReferenceFile()
ref.case("mlp", x=x, y=y)
ref.case("dtypes", **{f"v:{k}": v for k, v in dtypes.items()})
ref.write("safetensors.txt")
