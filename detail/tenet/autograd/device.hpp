#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The device side of autograd: what the backward runs on a tensor that is not on the CPU. These
// are declared here, where the engine calls them, and defined in backend/training.hpp, which
// sends each to the tensor's backend (on_backend) or throws a device_error naming the device.
#include <cstdint>
#include <string>

#include <tenet/device.hpp>
#include <tenet/error.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::ag {

[[noreturn]] inline void no_device_kernel(const device& d, const char* what) {
  require_backend(d, what);
  throw device_error(std::string("tenet: ") + what + " has no kernel for tensors on " + d.str());
}

/// out (contiguous, on g's device) = g summed over the dims where out has size 1 and over g's
/// leading extra dims (autograd's sum_to_size, vjp.hpp reduce_to).
template <class T, std::size_t Rg, std::size_t R>
void sum_to_on_device(const Tensor<T, dyn_shape<Rg>>& g, const Tensor<T, dyn_shape<R>>& out);

/// A linear layer's weight and bias gradients in one GEMM with a bias-gradient epilogue, where
/// the device's backend has one: dw (out x in) = g^T x and db = g's column sums, for x (rows x in)
/// and g (rows x out) on one device. False (nothing written) where there is none: the caller
/// computes them apart.
template <class T>
bool linear_grad_on_device(const Tensor<T, dyn_shape<2>>& x, const Tensor<T, dyn_shape<2>>& g,
                           const Tensor<T, dyn_shape<2>>& dw, const Tensor<T, dyn_shape<1>>& db);

/// out (contiguous, the base's sizes) = the gradient of a base read through (bstrides, boffset)
/// given the gradient g of a view reading (g's sizes, vstrides, voffset) of the same storage; lo
/// and hi bound the storage positions both touch (graph.hpp view_backward).
template <class T, std::size_t RV, std::size_t RB>
void view_backward_on_device(const Tensor<T, dyn_shape<RV>>& g, const sizes_t<RV>& vstrides, std::int64_t voffset,
                             const Tensor<T, dyn_shape<RB>>& out, const sizes_t<RB>& bstrides, std::int64_t boffset,
                             std::int64_t lo, std::int64_t hi);

}  // namespace tenet::detail::ag
