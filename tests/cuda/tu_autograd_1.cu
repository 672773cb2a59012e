// One nvcc translation unit of tenet_cuda_autograd_tests: see tu_forward_1.cu.
#include "test_cuda_autograd.cu"  // main
#include "test_cuda_autograd_pointwise.cu"
#include "test_cuda_autograd_half.cu"
