#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// How scan_, sort_ and iota_ run on the CPU (their kernels are in backend/cpu/scan.hpp and
// backend/cpu/sort.hpp; sort's CUDA kernel in backend/cuda/sort.hpp). The child of a line prim is
// evaluated to a tensor first (any strides).
#include <type_traits>

#include <tenet/backend/cpu/scan.hpp>
#include <tenet/backend/cpu/sort.hpp>
#include <tenet/error.hpp>
#include <tenet/backend/evaluate.hpp>
#include <tenet/prims/iota.hpp>
#include <tenet/prims/scan.hpp>
#include <tenet/prims/sort.hpp>

namespace tenet::prim {

template <class Kind, std::int64_t Dim>
template <class E, class Out>
void scan_<Kind, Dim>::run_on_cpu_into(const E& e, const Out& out) {
  const auto& child = std::get<0>(e.children);
  using C = std::remove_cvref_t<decltype(child)>;
  detail::cpu::run_scan<Kind>(out, detail::to_tensor(child), dim<C>);
}

template <std::int64_t Dim, sort_output Output>
template <class E, class Out>
void sort_<Dim, Output>::run_on_cpu_into(const E& e, const Out& out) {
  const auto& child = std::get<0>(e.children);
  using C = std::remove_cvref_t<decltype(child)>;
  const auto x = detail::to_tensor(child);
  if constexpr (Output == sort_output::values)
    detail::cpu::run_sort<value_type_of<C>, shape_of<C>, value_type_of<C>, shape_of<Out>, shape_of<Out>>(
        x, dim<C>, e.op.descending, &out, nullptr);
  else
    detail::cpu::run_sort<value_type_of<C>, shape_of<C>, value_type_of<C>, shape_of<Out>, shape_of<Out>>(
        x, dim<C>, e.op.descending, nullptr, &out);
}

template <std::int64_t Dim, sort_output Output>
template <class X, class V, class I>
void sort_<Dim, Output>::run_on_cpu_both(const X& x, const V& values, const I& indices, bool descending) {
  // (the name is the CPU's; a CUDA tensor in a CUDA translation unit runs backend/cuda/sort.hpp)
#if defined(__CUDACC__)
  if (x.device().type == device_type::cuda) {
    detail::cuda::run_sort(x, dim<X>, descending, &values, &indices);
    return;
  }
#endif
  if (!x.device().is_cpu())
    throw device_error("tenet: sort of a tensor on " + x.device().str() +
                       " needs a CUDA translation unit (nvcc) or a CPU tensor (t.cpu())");
  detail::cpu::run_sort(x, dim<X>, descending, &values, &indices);
}

template <class T>
template <class E, class Out>
void iota_<T>::run_on_cpu_into(const E& e, const Out& out) {
  detail::cpu::run_iota(out, e.op);
}

}  // namespace tenet::prim
