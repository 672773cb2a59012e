// The OpInfo-style table on cuda(0): the rows along a dim (reductions, scans, softmax, argsort).
#include <tenet/cuda.hpp>

#define TENET_OPINFO_ON_CUDA 1
#include "../test_opinfo_dims.cpp"
