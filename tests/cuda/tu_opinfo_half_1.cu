// The OpInfo-style table's bfloat16 and float16 rows on cuda(0) (tests/opinfo.hpp with
// TENET_OPINFO_HALF; references from PyTorch on CUDA: tests/reference/gen_opinfo_half.py): the
// unary rows. Without a GPU the program prints why and exits with 77, which CTest reports as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "gpu_main.hpp"


#include <tenet/cuda.hpp>

#define TENET_OPINFO_ON_CUDA 1
#define TENET_OPINFO_HALF 1
#include "../test_opinfo_unary.cpp"

int main(int argc, char** argv) { return tenet::test::run_or_skip("tenet CUDA OpInfo half tests", argc, argv); }
