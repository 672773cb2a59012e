// One nvcc translation unit of tenet_cuda_tests (see tests/CMakeLists.txt): several test files in
// one unit, because every CUDA unit pays about 40 s of CPU before its first test (cudafe++, cicc's
// and the host compiler's passes over tenet and Catch2), and nvcc has no precompiled headers.
#include "test_cuda.cu"  // main
#include "test_cuda_rows.cu"
#include "test_cuda_sort.cu"
