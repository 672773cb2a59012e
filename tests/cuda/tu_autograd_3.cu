// One nvcc translation unit of tenet_cuda_autograd_tests: see tu_forward_1.cu. (Split from
// tu_autograd_1.cu, which took 18 minutes of a CI core alone and so ended the build last.)
#include "test_cuda_autograd_views.cu"
#include "test_cuda_autograd_conv.cu"
