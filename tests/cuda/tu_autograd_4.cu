// One nvcc translation unit of tenet_cuda_autograd_tests (see tests/CMakeLists.txt): the attention
// kernels (their forward and backward instantiations are this unit's own cost), autocast's
// backward and tenet::func on CUDA tensors.
#include "test_cuda_attention.cu"
#include "test_cuda_autocast_backward.cu"
#include "test_cuda_func.cu"
