#!/usr/bin/env python3
"""Writes the NumPy and CSV fixtures of tests/test_data.cpp with NumPy itself:

  data_<dtype>.npy     one (2, 3) C-order array of each dtype NumPy and tenet share (bool uint8 int8
                       int16 int32 int64 float16 float32 float64), little-endian ('|' for one-byte
                       types), written by numpy.save; element k (C order) is value(dtype, k) below
  data_fortran.npy     '<i4' of shape (2, 3, 4) in Fortran order, element [i, j, l] = 100 i + 10 j + l
  data_fortran_big.npy '>f8' of shape (3, 2) in Fortran order, element [i, j] = i - j / 4
  data_scalar.npy      a 0-d '<f8' array holding 2.5
  data_empty.npy       '<f4' of shape (0, 3)
  data_v2.npy          '<i2' [1, -2, 300] with a version 2.0 header (4-byte header length)
  data_v3.npy          '<f4' [0.5, -1.5] with a version 3.0 header (UTF-8)
  data_arrays.npz      numpy.savez (stored members) of the big-endian arrays '>i2' '>i4' '>i8'
                       '>f2' '>f4' '>f8' (named int16 ... float64, values as data_<dtype>.npy),
                       plus "scalar" (0-d '<i8' 7), "empty" ('<f8' of shape (0, 2)), "flags" ('|b1')
  data_compressed.npz  numpy.savez_compressed of one small array (tenet refuses it)
  data_table.csv       a small CSV with a quoted header

    /work/venv/bin/python tests/reference/gen_data.py             # writes the fixtures
    /work/venv/bin/python tests/reference/gen_data.py --check F   # loads F (.npy or .npz, a file tenet
                                                                  # wrote) with numpy and prints it
"""
import io
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]


def value(dtype, k):
    """Element k of the (2, 3) arrays (the C++ test computes the same)."""
    if dtype == "bool":
        return k % 3 == 0
    if dtype == "uint8":
        return (k * 53) % 256  # 0 53 106 159 212 9
    if dtype == "int8":
        return (k * 53) % 256 - 128
    if dtype == "int16":
        return 258 * k - 3000
    if dtype == "int32":
        return 100003 * k - 70000
    if dtype == "int64":
        return (3 ** k) * 1000003 - (1 << 40)
    if dtype == "float16":
        return (k - 2.5) * 0.25
    if dtype == "float32":
        return (k - 2.5) / 3
    return (k - 2.5) / 7  # float64


def array(dtype, order="<"):
    a = np.array([value(dtype, k) for k in range(6)], dtype=np.float64 if dtype.startswith("float") else None)
    a = a.astype(np.dtype(dtype).newbyteorder(order) if np.dtype(dtype).itemsize > 1 else dtype)
    return a.reshape(2, 3)


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def npy_bytes(a, version=None):
    b = io.BytesIO()
    if version is None:
        np.save(b, a)
    else:
        np.lib.format.write_array(b, a, version=version)
    return b.getvalue()


def main():
    for dt in DTYPES:
        write(f"data_{dt}.npy", npy_bytes(array(dt)))
    i, j, l = np.meshgrid(np.arange(2), np.arange(3), np.arange(4), indexing="ij")
    fortran = np.asfortranarray((100 * i + 10 * j + l).astype("<i4"))
    assert fortran.flags.f_contiguous and not fortran.flags.c_contiguous
    write("data_fortran.npy", npy_bytes(fortran))
    i, j = np.meshgrid(np.arange(3), np.arange(2), indexing="ij")
    write("data_fortran_big.npy", npy_bytes(np.asfortranarray((i - j / 4).astype(">f8"))))
    write("data_scalar.npy", npy_bytes(np.array(2.5, dtype="<f8")))
    write("data_empty.npy", npy_bytes(np.zeros((0, 3), dtype="<f4")))
    write("data_v2.npy", npy_bytes(np.array([1, -2, 300], dtype="<i2"), version=(2, 0)))
    write("data_v3.npy", npy_bytes(np.array([0.5, -1.5], dtype="<f4"), version=(3, 0)))

    arrays = {dt: array(dt, ">") for dt in DTYPES if np.dtype(dt).itemsize > 1}
    arrays["scalar"] = np.array(7, dtype="<i8")
    arrays["empty"] = np.zeros((0, 2), dtype="<f8")
    arrays["flags"] = np.array([True, False, True])
    b = io.BytesIO()
    np.savez(b, **arrays)
    write("data_arrays.npz", b.getvalue())
    b = io.BytesIO()
    np.savez_compressed(b, x=np.arange(4, dtype="<f4"))
    write("data_compressed.npz", b.getvalue())

    write("data_table.csv", b'"id","x, value",y\n1,0.5,-2\n2,1e3,+3.25\n\n3, -0.125 ,4\n')


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--check":
        loaded = np.load(sys.argv[2])
        if isinstance(loaded, np.ndarray):
            print(loaded.dtype, loaded.shape, loaded.tolist())
        else:
            for k in loaded.files:
                print(k, loaded[k].dtype, loaded[k].shape, loaded[k].tolist())
    else:
        main()
