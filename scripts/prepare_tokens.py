#!/usr/bin/env python3
"""Writes a text file as token files for examples/gpt2_train.cpp, in nanoGPT's format: OUT/train.bin
and OUT/val.bin, token ids as little-endian uint16, the first 90% of the tokens training, the rest
validating.

  scripts/prepare_tokens.py TEXT OUT [--bpe] [--val-fraction 0.1]

Tokens are the text's bytes (ids 0..255: train with --vocab-size 256 or more; GPT-2's --config gpt2
pads its vocabulary to 50304), or with --bpe GPT-2's BPE through tiktoken (pip install tiktoken),
ids below 50257. Needs only Python's standard library without --bpe.

examples/data/gpl-bytes was written by: scripts/prepare_tokens.py examples/data/gpl-3.0.txt examples/data/gpl-bytes
"""
import argparse
import array
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("text")
    ap.add_argument("out")
    ap.add_argument("--bpe", action="store_true", help="GPT-2's BPE (tiktoken) instead of bytes")
    ap.add_argument("--val-fraction", type=float, default=0.1)
    a = ap.parse_args()
    if not 0 < a.val_fraction < 1:
        sys.exit("prepare_tokens: --val-fraction must be between 0 and 1")
    with open(a.text, "rb") as f:
        raw = f.read()
    if a.bpe:
        import tiktoken  # noqa: PLC0415 (optional dependency)

        ids = tiktoken.get_encoding("gpt2").encode_ordinary(raw.decode("utf-8"))
    else:
        ids = list(raw)
    n_val = int(len(ids) * a.val_fraction)
    if n_val < 2 or len(ids) - n_val < 2:
        sys.exit(f"prepare_tokens: {a.text} has {len(ids)} tokens, too few to split")
    os.makedirs(a.out, exist_ok=True)
    for name, part in (("train", ids[: len(ids) - n_val]), ("val", ids[len(ids) - n_val:])):
        arr = array.array("H", part)
        if sys.byteorder != "little":
            arr.byteswap()
        with open(os.path.join(a.out, name + ".bin"), "wb") as f:
            arr.tofile(f)
        print(f"{name}: {len(part)} tokens -> {os.path.join(a.out, name + '.bin')}")


if __name__ == "__main__":
    main()
