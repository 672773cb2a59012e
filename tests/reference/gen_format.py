#!/usr/bin/env python3
"""Writes format_cases.txt: tensors and the text PyTorch's str() gives for each.

tests/test_philox_format.cpp reads the file and checks tenet's format_tensor against every case.
Run with PyTorch 2.x (CUDA optional: the device cases are skipped without it):

    python3 tests/reference/gen_format.py [output path]   # default: format_cases.txt beside this file

File format, one case after another:
    case <name>
    dtype <torch dtype name>
    sizes <ndim> d0 d1 ...
    [options <precision> <threshold> <edgeitems> <linewidth> <sci_mode: -1 auto, 0 off, 1 on>]
    [device <torch device name>]
    values v0 v1 ...          (row-major; floats as float.hex(), integers in decimal, bools 0/1)
    | <expected line>         (one per line of str(tensor))
    end
"""
import math
import os
import sys

import torch

FLOAT_DTYPES = {torch.float32, torch.float64, torch.bfloat16, torch.float16}


def values_line(t):
    flat = t.detach().cpu().reshape(-1)
    if t.dtype in FLOAT_DTYPES:
        return " ".join(float.hex(v) for v in flat.double().tolist())
    if t.dtype == torch.bool:
        return " ".join("1" if v else "0" for v in flat.tolist())
    return " ".join(str(int(v)) for v in flat.tolist())


def options_tuple(opts):
    sci = opts.get("sci_mode")
    return (
        opts.get("precision", 4),
        opts.get("threshold", 1000),
        opts.get("edgeitems", 3),
        opts.get("linewidth", 80),
        -1 if sci is None else int(sci),
    )


def main():
    torch.manual_seed(0)
    cases = []  # (name, tensor, print options)

    def add(name, t, **opts):
        cases.append((name, t, opts))

    f32 = torch.float32
    nan, inf = math.nan, math.inf

    # floating point notation
    add("f32_fixed", torch.tensor([1.5, -2.25, 3.0, 0.125]))
    add("f32_int_mode", torch.tensor([1.0, 2.0, 3.0]))
    add("f32_int_mode_wide", torch.tensor([-1.0, 20.0, 300.0, 4000.0]))
    add("f32_sci_ratio", torch.tensor([0.001, 2.0, 3.5]))
    add("f32_sci_large", torch.tensor([1.0e9, 1.5]))
    add("f32_sci_small", torch.tensor([1.0e-5, 0.5]))
    add("f32_int_sci", torch.tensor([1.0e10, 1.0, -3.0]))
    add("f32_no_sci_ratio_1000", torch.tensor([0.5, 500.0, 1.25]))
    add("f32_nan_inf", torch.tensor([nan, inf, -inf, 1.5]))
    add("f32_nan_int_mode", torch.tensor([nan, 1.0, 2.0, -inf]))
    add("f32_neg_zero", torch.tensor([-0.0, 0.0, 1.0]))
    add("f32_neg_zero_fixed", torch.tensor([-0.0, 0.5]))
    add("f32_all_zero", torch.zeros(4))
    add("f32_all_nan", torch.tensor([nan, nan]))
    add("f32_rounding", torch.tensor([0.00005, 1.00005, 0.03125, 9.99995, 2.5]))
    add("f32_large_fixed", torch.tensor([123456.789, 2.0]))
    add("f64_rounding_fixed", torch.tensor([0.03125, 1.00005, 9.99995, 2.00015, 0.12345], dtype=torch.float64))
    add("f32_large_fixed_wide", torch.tensor([123456.789, 1000.0, -250.5]))
    add("f32_int_mode_fixed_wide", torch.tensor([-1.0, 20.0, 300.0]))
    add("f32_sci_nonfinite", torch.tensor([1.0e-5, nan, -inf, -1.0]))
    add("f32_randn", torch.randn(6))
    add("f32_sci_randn", torch.randn(5) * 1.0e5)
    add("f32_single", torch.tensor([5.0]))

    # 0-dim
    add("scalar_f32", torch.tensor(3.5))
    add("scalar_f32_int", torch.tensor(-2.0))
    add("scalar_f32_nan", torch.tensor(nan))
    add("scalar_f32_sci", torch.tensor(1.0e-7))
    add("scalar_i64", torch.tensor(7))
    add("scalar_f64", torch.tensor(2.0, dtype=torch.float64))
    add("scalar_bool", torch.tensor(True))
    add("scalar_i32", torch.tensor(-12, dtype=torch.int32))

    # integer and bool dtypes
    add("i64_vec", torch.tensor([1, -20, 300]))
    add("i32_vec", torch.tensor([1, -20, 300], dtype=torch.int32))
    add("i16_vec", torch.tensor([-32768, 0, 32767], dtype=torch.int16))
    add("i8_vec", torch.tensor([-128, 5, 127], dtype=torch.int8))
    add("u8_vec", torch.tensor([0, 17, 255], dtype=torch.uint8))
    add("i64_extreme", torch.tensor([-(2**63), 2**63 - 1]))
    add("bool_vec", torch.tensor([True, False, True]))
    add("bool_2d", torch.tensor([[True, False], [False, False]]))
    add("i64_2d", torch.arange(12).reshape(3, 4) - 5)

    # empty tensors
    add("empty_1d", torch.tensor([]))
    add("empty_2d", torch.zeros(0, 3))
    add("empty_i64", torch.tensor([], dtype=torch.int64))
    add("empty_bool", torch.zeros(2, 0, dtype=torch.bool))
    add("empty_f64_3d", torch.zeros(2, 0, 4, dtype=torch.float64))

    # wrapping at linewidth 80
    add("wrap_f32", torch.arange(40, dtype=f32) * 1.5)
    add("wrap_i64", torch.arange(100))
    add("wrap_sci", torch.randn(30) * 1.0e5)
    add("wrap_2d", torch.randn(2, 30))
    add("wrap_bool", torch.arange(40) % 3 == 0)

    # more dimensions
    add("f32_2d", torch.randn(3, 4))
    add("f32_3d", torch.randn(2, 3, 4))
    add("f32_4d", torch.randn(2, 2, 2, 3))
    add("f32_ones_3d", torch.ones(1, 1, 1))
    add("i64_3d", torch.arange(24).reshape(2, 3, 4))

    # summarization (numel > 1000)
    add("summarize_1d", torch.arange(2000, dtype=f32))
    add("summarize_1d_i64", torch.arange(2000) * 7 - 3000)
    add("summarize_2d", torch.randn(50, 40))
    add("summarize_2d_short_rows", torch.randn(2, 1000))
    add("summarize_3d", torch.randn(10, 10, 20))
    add("summarize_3d_mid", torch.randn(3, 400, 3))
    add("summarize_4d", torch.randn(8, 2, 9, 10))
    add("summarize_int_mode_fixed", torch.arange(1500, dtype=f32) % 17 - 8.0)
    add("summarize_int_mode", torch.arange(2000, dtype=f32).reshape(40, 50) * 1000.0)
    # the formatter sees only the shown elements: the hidden 1e-9 must not force sci mode
    hidden = torch.ones(2000)
    hidden[1000] = 1.0e-9
    add("summarize_hidden_small", hidden)

    # dtype suffix, and its placement on a new line when the last line is full
    add("f64_suffix", torch.randn(5, dtype=torch.float64))
    add("f64_2d_suffix", torch.randn(3, 3, dtype=torch.float64))
    add("f64_suffix_newline", torch.arange(8, dtype=torch.float64) * 1.25 + 1000.0)
    for n in range(5, 13):
        t = torch.arange(n, dtype=torch.float64) + 0.5
        if ",\n       dtype=" in str(t):
            add(f"f64_suffix_newline_{n}", t)
            break
    add("i32_2d_suffix", torch.arange(6, dtype=torch.int32).reshape(2, 3))

    # half types
    add("bf16_vec", torch.tensor([1.5, -2.0, 3.25, 1.0e-3], dtype=torch.bfloat16))
    add("f16_vec", torch.tensor([0.1, 65504.0, -2.0], dtype=torch.float16))
    add("bf16_int_mode", torch.tensor([1.0, 256.0], dtype=torch.bfloat16))

    # print options
    add("opt_precision_2", torch.tensor([1.12345, 2.5]), precision=2)
    add("opt_sci_on", torch.tensor([1.5, 2.0]), sci_mode=True)
    add("opt_sci_off", torch.tensor([1.0e-8, 1.0e9]), sci_mode=False)
    add("opt_threshold_5", torch.arange(10), threshold=5)
    add("opt_edgeitems_2", torch.arange(100, dtype=f32).reshape(10, 10), threshold=10, edgeitems=2)
    add("opt_linewidth_40", torch.arange(30, dtype=f32) / 3.0, linewidth=40)

    # device suffix (needs CUDA)
    if torch.cuda.is_available():
        add("cuda_f32", torch.tensor([1.0, 2.5], device="cuda"))
        add("cuda_f64", torch.tensor([1.0, 2.5], dtype=torch.float64, device="cuda"))
        add("cuda_empty", torch.zeros(0, 2, device="cuda"))
        add("cuda_wrap", torch.arange(30, dtype=torch.int32, device="cuda"))
        add("cuda_scalar", torch.tensor(4, device="cuda"))

    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "format_cases.txt")
    lines = [f"# written by gen_format.py with torch {torch.__version__}; {len(cases)} cases"]
    for name, t, opts in cases:
        with torch._tensor_str.printoptions(**{k: v for k, v in opts.items()}):
            text = str(t)
        lines.append(f"case {name}")
        lines.append(f"dtype {t.dtype}")
        lines.append("sizes " + " ".join(str(x) for x in [t.dim(), *t.shape]))
        if opts:
            lines.append("options " + " ".join(str(x) for x in options_tuple(opts)))
        if t.device.type != "cpu":
            lines.append(f"device {t.device}")
        lines.append("values " + values_line(t) if t.numel() > 0 else "values")
        lines.extend("| " + line for line in text.split("\n"))
        lines.append("end")
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(cases)} cases to {out_path}")


if __name__ == "__main__":
    main()
