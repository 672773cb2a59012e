// The OpInfo-style table on cuda(0): the binary rows.
#include <tenet/cuda.hpp>

#define TENET_OPINFO_ON_CUDA 1
#include "../test_opinfo_binary.cpp"
