// digits_mlp built by nvcc (TENET_CUDA=ON): the same program, whose --device cuda trains on the GPU.
// The CTest test example.digits_mlp_cuda runs it with --device cuda (skipped, exit 77, without a GPU).
#include "digits_mlp.cpp"
