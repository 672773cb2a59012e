// gpt2_train built by nvcc (TENET_CUDA=ON): the same program, whose --device cuda trains on the GPU
// (--dtype bfloat16: autocast's bf16 matmuls). The CTest test example.gpt2_train_cuda runs its
// self-check with --device cuda (skipped, exit 77, without a GPU).
#include "gpt2_train.cpp"
