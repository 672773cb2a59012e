// The OpInfo-style table's bfloat16 and float16 rows on cuda(0): the binary rows.
#include <tenet/cuda.hpp>

#define TENET_OPINFO_ON_CUDA 1
#define TENET_OPINFO_HALF 1
#include "../test_opinfo_binary.cpp"
