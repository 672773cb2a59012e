// One nvcc translation unit of tenet_cuda_tests: see tu_forward_1.cu.
#include "test_cuda_ops.cu"
#include "test_cuda_compile.cu"
