"""A longer differential fuzzing run: fresh programs from gen_fuzz.py, built and compared with PyTorch.

    python3 tests/fuzz/run.py --seeds 100-109 --count 40 [--grad] [--attention | --conv] [--work /tmp/tenet-fuzz]

(TENET_CONV2D_KERNEL=winograd in the environment runs every 3x3 stride-1 conv2d of the programs on
the CPU's Winograd kernel: the programs are smaller than its crossover.)

For each seed: generate a batch, compile it against this checkout (the unit tests' flags), drop the
cases that do not compile (each is reported: a program PyTorch runs that tenet rejects at compile
time is a finding too), run the rest, and print every failing case with its seed, so that
`gen_fuzz.py --seed S` reproduces it. Exit status 1 when any case failed or did not compile.
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def flags(work, autograd):
    return ["-std=c++20", "-Og", "-march=native", "-fopenmp", "-w", f"-I{ROOT}/include", f"-I{ROOT}/detail",
            f"-I{ROOT}/tests", "-I/usr/include/eigen3", f"-DTENET_AUTOGRAD={autograd}",
            f'-DTENET_REFERENCE_DIR="{work}"']


def compiler():
    return ["ccache", "g++"] if subprocess.run(["which", "ccache"], capture_output=True).returncode == 0 else ["g++"]


def case_starts(path):
    starts = []
    with open(path) as f:
        for i, line in enumerate(f, 1):
            m = re.match(r'TEST_CASE\("\w+_(\d+)', line)
            if m:
                starts.append((i, int(m.group(1))))
    return starts


def case_of_line(starts, line):
    found = None
    for start, n in starts:
        if start <= line:
            found = n
    return found


def run_seed(seed, args, main_o):
    work = args.work
    name = f"s{seed}"
    cpp = os.path.join(work, f"{name}.cpp")
    ref = os.path.join(work, f"{name}.txt")
    gen = [sys.executable, os.path.join(HERE, "gen_fuzz.py"), "--seed", str(seed), "--count", str(args.count),
           "--name", name, "--cpp", cpp, "--ref", ref] + (["--grad"] if args.grad else []) + (
               ["--attention"] if args.attention else []) + (["--conv"] if args.conv else [])
    skip = set()
    report = []
    obj = os.path.join(work, f"{name}.o")
    for _ in range(4):
        subprocess.run(gen + ["--skip", ",".join(map(str, sorted(skip)))], check=True, capture_output=True)
        r = subprocess.run(compiler() + flags(work, 1 if args.grad else 0) + ["-c", cpp, "-o", obj],
                           capture_output=True, text=True)
        if r.returncode == 0:
            break
        starts = case_starts(cpp)
        bad = set()
        for m in re.finditer(re.escape(os.path.basename(cpp)) + r":(\d+):\d+:\s+(?:required from here|error)", r.stderr):
            n = case_of_line(starts, int(m.group(1)))
            if n is not None:
                bad.add(n)
        if not bad:
            report.append(f"seed {seed}: compile failed outside any case:\n{r.stderr[-2000:]}")
            return report
        for n in sorted(bad):
            first = [ln for ln in r.stderr.splitlines() if "error" in ln][:1]
            report.append(f"seed {seed} case {name}_{n}: does not compile: {first[0][:300] if first else ''}")
        skip |= bad
    exe = os.path.join(work, name)
    subprocess.run(["g++", "-fopenmp", main_o, obj, "-o", exe, "-lopenblas", "-lfmt"], check=True)
    r = subprocess.run([exe], capture_output=True, text=True)
    if r.returncode != 0:
        for block in r.stdout.split("-" * 79):
            if "FAILED" in block or "due to" in block:
                report.append(f"seed {seed}: " + block.strip()[:1500])
    return report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="100-104")
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--grad", action="store_true")
    ap.add_argument("--attention", action="store_true", help="attention programs (gen_fuzz.py --attention)")
    ap.add_argument("--conv", action="store_true", help="convolution and pooling programs (gen_fuzz.py --conv)")
    ap.add_argument("--work", default="/tmp/tenet-fuzz")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    lo, _, hi = args.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    main_o = os.path.join(args.work, "catch_main.o")
    if not os.path.exists(main_o):
        subprocess.run(compiler() + flags(args.work, 0) + ["-c", os.path.join(ROOT, "tests", "main.cpp"), "-o", main_o],
                       check=True)
    failures = 0
    for s in seeds:
        rep = run_seed(s, args, main_o)
        failures += len(rep)
        print(f"seed {s}: {'ok' if not rep else str(len(rep)) + ' finding(s)'}", flush=True)
        for line in rep:
            print(line, flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
