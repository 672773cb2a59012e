// The OpInfo-style table's bfloat16 and float16 rows on cuda(0): the rows along a dim.
#include <tenet/cuda.hpp>

#define TENET_OPINFO_ON_CUDA 1
#define TENET_OPINFO_HALF 1
#include "../test_opinfo_dims.cpp"
