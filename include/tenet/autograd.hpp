#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Eager autograd (docs/autograd.md): requires_grad_, backward, grad, detach, no_grad / enable_grad.
// Each evaluated expression with a tensor that requires grad is one node of the graph; its backward
// is the VJP of the expression, derived at compile time from the prims it decomposes into.
#include <tenet/backend/evaluate.hpp>
#include <tenet/autograd/graph.hpp>
#include <tenet/autograd/tensor_members.hpp>
#include <tenet/autograd/functions.hpp>
#include <tenet/autograd/grad.hpp>
#include <tenet/autograd/hooks.hpp>
