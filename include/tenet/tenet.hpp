#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// tenet: PyTorch 2.0 at C++ compile time. The one header users include.
#include <tenet/activations.hpp>
#include <tenet/autocast.hpp>
#include <tenet/attention.hpp>
#include <tenet/autograd.hpp>
#include <tenet/compile.hpp>
#include <tenet/conv.hpp>
#include <tenet/data.hpp>
#include <tenet/device.hpp>
#include <tenet/dtype.hpp>
#include <tenet/error.hpp>
#include <tenet/explain.hpp>
#include <tenet/factories.hpp>
#include <tenet/func.hpp>
#include <tenet/indexing.hpp>
#include <tenet/io.hpp>
#include <tenet/losses.hpp>
#include <tenet/math.hpp>
#include <tenet/nn/activation.hpp>
#include <tenet/nn/container.hpp>
#include <tenet/nn/conv.hpp>
#include <tenet/nn/init.hpp>
#include <tenet/nn/linear.hpp>
#include <tenet/nn/module.hpp>
#include <tenet/nn/normalization.hpp>
#include <tenet/nn/transformer.hpp>
#include <tenet/nn/utils.hpp>
#include <tenet/nn_functional.hpp>
#include <tenet/ops.hpp>
#include <tenet/optim.hpp>
#include <tenet/safetensors.hpp>
#include <tenet/shape.hpp>
#include <tenet/shape_ops.hpp>
#include <tenet/sorting.hpp>
#include <tenet/tensor_dict.hpp>
#include <tenet/tensor.hpp>
#include <tenet/threads.hpp>
#include <tenet/training_state.hpp>

#include <tenet/backend/evaluate.hpp>
#include <tenet/join.hpp>
#include <tenet/api/tensor_eval.hpp>
#include <tenet/tensor/views.hpp>

// The CUDA backend's API (tenet::cuda::...), in translation units nvcc compiles.
#if defined(__CUDACC__)
#include <tenet/cuda.hpp>
#endif
