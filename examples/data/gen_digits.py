#!/usr/bin/env python3
"""Writes digits.txt from scikit-learn's copy of the UCI "Optical Recognition of Handwritten Digits"
data set (sklearn.datasets.load_digits: 1797 8x8 images, pixel values 0..16, labels 0..9).

Format: one image per line, "<label> <64 characters>", the characters the pixels in row-major order
written in base 17 ("0".."9", "a".."g" for 10..16). Lines starting with '#' are comments.

    pip install scikit-learn; python3 examples/data/gen_digits.py
"""
import os

from sklearn.datasets import load_digits

DIGITS = "0123456789abcdefg"
d = load_digits()
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "digits.txt")
with open(path, "w") as f:
    f.write("# UCI Optical Recognition of Handwritten Digits (Alpaydin & Kaynak, 1998), CC BY 4.0,\n")
    f.write("# https://doi.org/10.24432/C50P49 ; the 1797 images of sklearn.datasets.load_digits.\n")
    f.write("# <label> <64 pixels 0..16 in base 17>, see examples/data/README.md\n")
    for img, label in zip(d.data.astype(int), d.target):
        f.write(f"{label} {''.join(DIGITS[v] for v in img)}\n")
print(f"wrote {path}: {len(d.target)} images")
