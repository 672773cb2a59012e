"""Writes tenet's reference files (the format tests/reference.hpp reads):

    case <name>
    tensor <key> <dtype> <ndim> <sizes...> <values...>
    end

Every generator (gen_*.py) builds its cases with ReferenceFile and writes them with write().
"""
import math
import os
import sys

import torch

DTYPE_NAMES = {
    torch.bool: "bool",
    torch.uint8: "uint8",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
}


def fmt(v):
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(float(v))


def tensor_line(key, t):
    t = t.detach().cpu()
    flat = t.reshape(-1)
    vals = flat.double().tolist() if t.dtype.is_floating_point else flat.tolist()
    parts = ["tensor", key, DTYPE_NAMES[t.dtype], str(t.dim())] + [str(s) for s in t.shape] + [fmt(v) for v in vals]
    return " ".join(parts)


class ReferenceFile:
    def __init__(self):
        self.lines = []

    def case(self, name, **tensors):
        self.lines.append(f"case {name}")
        for k, t in tensors.items():
            self.lines.append(tensor_line(k, t))
        self.lines.append("end")

    def write(self, default_name):
        """Writes to argv[1] when given, else to default_name next to this script."""
        path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                   default_name)
        with open(path, "w") as f:
            f.write("\n".join(self.lines) + "\n")
        print(f"wrote {path}: {len(self.lines)} lines")
