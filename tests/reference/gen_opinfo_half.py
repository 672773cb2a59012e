#!/usr/bin/env python3
"""Writes opinfo_half.txt: the OpInfo table's unary, binary and along-a-dim rows (gen_opinfo.py's
lists, every op with a float32 row) in bfloat16 and float16, for the CUDA program
tenet_cuda_opinfo_half_tests.

Same samples as gen_opinfo.py (edge values rounded to the dtype: 1e30 is inf in float16, 1e-30
is 0), drawn in float64 and rounded. PyTorch computes on CUDA when a GPU is present (the GPU
machine: its kernels compute 16-bit pointwise ops in float and round once, as tenet's CUDA
kernels), else on the CPU. Ops PyTorch lacks for a dtype are printed and left out; the C++ table
names the same exclusions.

    python3 tests/reference/gen_opinfo_half.py [output path]
"""
import sys

import torch

from gen_opinfo import BINARY, DIM1, FLOAT_EDGE, UNARY, rand
from reference_writer import ReferenceFile

HALF = {"bfloat16": torch.bfloat16, "float16": torch.float16}
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def sample(shape, dt, domain, gen):
    return rand(shape, "float64", domain, gen).to(HALF[dt])


def on_device(fn):
    def run(*xs):
        return fn(*[x.to(DEVICE) for x in xs]).cpu()
    return run


def on_device_t(fn):
    """fn of the first argument transposed on the device (the non-contiguous sample)."""
    def run(x, *rest):
        return fn(x.to(DEVICE).t(), *[r.to(DEVICE) for r in rest]).cpu()
    return run


def unary_case(ref, gen, name, fn, dt, domain):
    x_edge = torch.tensor(FLOAT_EDGE, dtype=HALF[dt]).reshape(1, -1)
    x_nc = sample((5, 4), dt, domain, gen)
    x_empty = sample((0, 3), dt, domain, gen)
    x_one = sample((1, 1), dt, domain, gen)
    f = on_device(fn)
    ref.case(f"{name}_{dt}", x_edge=x_edge, out_edge=f(x_edge), x_nc=x_nc, out_nc=on_device_t(fn)(x_nc),
             x_empty=x_empty, out_empty=f(x_empty), x_one=x_one, out_one=f(x_one))


def binary_case(ref, gen, name, fn, dt, domain):
    e = torch.tensor(FLOAT_EDGE, dtype=HALF[dt])
    a_edge, b_edge = e.reshape(-1, 1), e.reshape(1, -1)
    a_nc, b_nc = sample((5, 4), dt, domain, gen), sample((4, 5), dt, domain, gen)
    a_bc, b_bc = sample((3, 1), dt, domain, gen), sample((1, 4), dt, domain, gen)
    a_empty, b_empty = sample((0, 3), dt, domain, gen), sample((1, 3), dt, domain, gen)
    f = on_device(fn)
    ref.case(f"{name}_{dt}", a_edge=a_edge, b_edge=b_edge, out_edge=f(a_edge, b_edge), a_nc=a_nc, b_nc=b_nc,
             out_nc=on_device_t(fn)(a_nc, b_nc), a_bc=a_bc, b_bc=b_bc, out_bc=f(a_bc, b_bc), a_empty=a_empty,
             b_empty=b_empty, out_empty=f(a_empty, b_empty))


def main():
    ref = ReferenceFile()
    gen = torch.Generator().manual_seed(0)
    missing = []

    def rows(table, make):
        for name, fn, dtypes, domain in table:
            if "float32" not in dtypes:
                continue
            for dt in HALF:
                try:
                    make(ref, gen, name, fn, dt, domain)
                except (RuntimeError, NotImplementedError) as e:
                    missing.append(f"{name}_{dt}: {str(e).splitlines()[0]}")

    rows(UNARY, unary_case)
    rows(BINARY, binary_case)
    rows(DIM1, unary_case)  # after the others: their samples stay as they were
    for m in missing:
        print("not in PyTorch:", m, file=sys.stderr)
    print(f"device {DEVICE}, torch {torch.__version__}", file=sys.stderr)
    ref.write("opinfo_half.txt")


if __name__ == "__main__":
    main()
