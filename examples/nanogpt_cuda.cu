// nanogpt built by nvcc (TENET_CUDA=ON): the same program, whose --device cuda trains the GPT on the GPU.
// The CTest test example.nanogpt_cuda runs it with --device cuda (skipped, exit 77, without a GPU).
#include "nanogpt.cpp"
