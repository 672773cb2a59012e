#!/usr/bin/env python3
"""bench/build_time.py: what a tenet program costs to compile (issue 29), as JSON lines.

Usage: bench/build_time.py [--units NAME,...] [--against REV] [--repeat N] [--report] [--cxx g++]

Compiles each unit (-c, one at a time, nothing else should run) with the flags CMake gives the
examples (tenet_program_flags: -O2 -g0 -march=native -fopenmp, GCC's ggc params) and prints one JSON
line per unit and checkout:

  {"workload": "build_quickstart", "impl": "tenet", "rev": "worktree", "metric": "user_s",
   "value": 19.8, "max_rss_gb": 1.49, "sys_s": 0.9}

Units (the table of issue 29, and the heaviest unit of CI):
  empty        a file that only includes <tenet/tenet.hpp>
  quickstart   examples/quickstart.cpp
  mlp_forward  examples/mlp_forward.cpp
  nanogpt      examples/nanogpt.cpp
  eigen        the reference: a file that includes Eigen's Dense and CXX11 Tensor modules
  fuzz_grad    tests/test_autograd_fuzz.cpp with the test programs' flags (-Og, TENET_AUTOGRAD=1,
               no precompiled header)

--against REV also compiles every unit against REV's headers (git archive of include/, detail/,
examples/ and tests/ into a temporary folder), alternating old and new, so the A/B pair shares
the machine's state. --repeat N takes the median of N compiles. --report adds, per unit, GCC's
-ftime-report phases (parsing, template instantiation, code generation) as a second JSON line.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

EXAMPLE_FLAGS = ["-std=c++20", "-O2", "-Wall", "-Wextra", "-Wno-maybe-uninitialized", "-Wno-uninitialized",
                 "--param=ggc-min-expand=100", "--param=ggc-min-heapsize=1048576", "-g0", "-march=native",
                 "-fopenmp", "-DNDEBUG", "-DFMT_HEADER_ONLY=1"]
TEST_FLAGS = [f if f != "-O2" else "-Og" for f in EXAMPLE_FLAGS]


def units(tree: Path, scratch: Path):
    """{name: (source, flags)} for a checkout whose files are under `tree`."""
    empty = scratch / "empty.cpp"
    empty.write_text("#include <tenet/tenet.hpp>\nint main() { return 0; }\n")
    eigen = scratch / "eigen.cpp"
    eigen.write_text("#include <Eigen/Dense>\n#include <unsupported/Eigen/CXX11/Tensor>\nint main() { return 0; }\n")
    data = f'-DTENET_EXAMPLE_DATA_DIR="{tree}/examples/data"'
    ref = f'-DTENET_REFERENCE_DIR="{tree}/tests/reference"'
    return {
        "empty": (empty, EXAMPLE_FLAGS),
        "quickstart": (tree / "examples/quickstart.cpp", EXAMPLE_FLAGS),
        "mlp_forward": (tree / "examples/mlp_forward.cpp", EXAMPLE_FLAGS),
        "nanogpt": (tree / "examples/nanogpt.cpp", EXAMPLE_FLAGS + [data]),
        "eigen": (eigen, EXAMPLE_FLAGS),
        "fuzz_grad": (tree / "tests/test_autograd_fuzz.cpp", TEST_FLAGS + ["-DTENET_AUTOGRAD=1", ref]),
    }


def compile_once(cxx, tree, src, flags, out, extra=()):
    cmd = ["/usr/bin/time", "-f", "TIME %U %S %M", cxx, *flags, *extra, f"-I{tree}/include", f"-I{tree}/detail",
           f"-I{tree}/tests", "-isystem", "/usr/include/eigen3", "-c", str(src), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"^TIME ([\d.]+) ([\d.]+) (\d+)$", r.stderr, re.M)
    if r.returncode != 0 or not m:
        sys.exit(f"build_time: compiling {src} failed:\n{r.stderr[-4000:]}")
    return float(m.group(1)), float(m.group(2)), int(m.group(3)) / 1e6, r.stderr


def phases(report: str):
    """GCC's -ftime-report: seconds of user time per phase and the top passes."""
    out = {}
    for line in report.splitlines():
        m = re.match(r"\s*(phase [\w. ]+?|template instantiation|callgraph functions expansion|"
                     r"callgraph ipa passes|integration|garbage collection)\s*:\s*([\d.]+)", line)
        if m:
            out[m.group(1).strip()] = float(m.group(2))
    return out


def checkout(rev: str, into: Path) -> Path:
    tree = into / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "include", "detail", "examples", "tests"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--units", default="empty,quickstart,mlp_forward,nanogpt,eigen")
    ap.add_argument("--against", metavar="REV")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="tenet_build_time_"))
    try:
        trees = [("worktree", ROOT)]
        if args.against:
            trees.insert(0, (args.against, checkout(args.against, scratch)))
        names = [n.strip() for n in args.units.split(",") if n.strip()]
        for name in names:
            for i, (rev, tree) in enumerate(trees):
                unit_dir = scratch / f"{name}_{i}"
                unit_dir.mkdir(exist_ok=True)
                table = units(tree, unit_dir)
                if name not in table:
                    sys.exit(f"build_time: unknown unit '{name}' (known: {', '.join(table)})")
                src, flags = table[name]
                runs = [compile_once(args.cxx, tree, src, flags, unit_dir / "out.o") for _ in range(args.repeat)]
                user = statistics.median(r[0] for r in runs)
                line = {"workload": f"build_{name}", "impl": "tenet" if name != "eigen" else "eigen", "rev": rev,
                        "metric": "user_s", "value": round(user, 2),
                        "sys_s": round(statistics.median(r[1] for r in runs), 2),
                        "max_rss_gb": round(max(r[2] for r in runs), 2)}
                print(json.dumps(line), flush=True)
                if args.report:
                    _, _, _, err = compile_once(args.cxx, tree, src, flags, unit_dir / "out.o", ["-ftime-report"])
                    print(json.dumps({"workload": f"build_{name}", "rev": rev, "time_report_user_s": phases(err)}),
                          flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
