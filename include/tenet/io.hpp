#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Printing as PyTorch prints: `std::cout << t`, fmt::format("{}", t), tenet::to_string(t); sizes
// (`t.sizes()`, a std::array<std::int64_t, R>, and the std::vector<std::int64_t> of any_tensor and
// nn::tensor_ref) as torch.Size: `tenet::to_string(t.sizes())`, and `std::cout << t.sizes()` where
// tenet's operators are visible (`using namespace tenet;`). nn modules print through nn/module.hpp.
#include <array>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include <tenet/tensor.hpp>

#include <tenet/io/format.hpp>

namespace tenet {

namespace detail {
/// str() of a host tensor of any rank, from its data, sizes and strides: one instantiation of the
/// printer per dtype (the getter was a lambda per shape type, and a unit printing three shapes
/// compiled the printer three times).
template <class T>
std::string format_host_tensor(const T* base, std::span<const std::int64_t> sizes, std::span<const std::int64_t> strides,
                               const std::string& device_suffix) {
  auto get = [&](std::int64_t flat) -> T {
    std::int64_t off = 0;
    for (std::size_t d = sizes.size(); d-- > 0;) {
      off += (flat % sizes[d]) * strides[d];
      flat /= sizes[d];
    }
    return base[off];
  };
  constexpr dtype dt = dtype_of<T>;
  const bool default_dtype = dt == dtype::float32 || dt == dtype::int64 || dt == dtype::bool_;
  return format_tensor<T>(sizes, get, torch_name(dt), default_dtype, device_suffix);
}
}  // namespace detail

namespace detail {
template <class A>
struct is_int64_sizes : std::false_type {};
template <std::size_t R>
struct is_int64_sizes<std::array<std::int64_t, R>> : std::true_type {};
template <>
struct is_int64_sizes<std::vector<std::int64_t>> : std::true_type {};
}  // namespace detail

/// A tensor's sizes as torch prints a torch.Size: "torch.Size([2, 3])", "torch.Size([])".
inline std::string sizes_to_string(std::span<const std::int64_t> s) {
  std::string out = "torch.Size([";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "])";
}
/// to_string(t.sizes()) for a std::array<std::int64_t, R> (Tensor::sizes()) or a
/// std::vector<std::int64_t> (any_tensor::sizes(), nn::tensor_ref::sizes()): "torch.Size([2, 3])".
template <class A>
  requires detail::is_int64_sizes<A>::value
std::string to_string(const A& sizes) {
  return sizes_to_string(std::span<const std::int64_t>(sizes.data(), sizes.size()));
}
/// `os << t.sizes()` writes to_string(sizes). These operators are for std types, so argument-dependent
/// lookup does not find them: they are visible with `using namespace tenet;` (or `using
/// tenet::operator<<;`) in the caller's scope. They are constrained templates on purpose: any
/// operator<< a program declares for these types (a non-template, or a template for std::vector<T> /
/// std::array<T, N>) is a better match, so they never make a call ambiguous or change what it prints.
template <class A>
  requires detail::is_int64_sizes<A>::value
std::ostream& operator<<(std::ostream& os, const A& sizes) {
  return os << to_string(sizes);
}

template <class T, class S>
std::string to_string(const Tensor<T, S>& t) {
  if (!t.defined()) return "tensor(undefined)";
  // a device tensor prints from a host copy, with device='cuda:0' as PyTorch prints it
  const bool on_host = t.device().is_cpu();
  const Tensor<T, S> h = on_host ? t : t.cpu();
  const auto sizes = h.sizes();
  const auto strides = h.strides();
  return detail::format_host_tensor<T>(h.numel() ? h.data() : nullptr,
                                       std::span<const std::int64_t>(sizes.data(), sizes.size()),
                                       std::span<const std::int64_t>(strides.data(), strides.size()),
                                       on_host ? std::string() : t.device().str());
}

template <class T, class S>
std::ostream& operator<<(std::ostream& os, const Tensor<T, S>& t) {
  return os << to_string(t);
}
/// An unevaluated expression prints its value (evaluated now).
template <Expression E>
  requires(!TensorType<E>)
std::string to_string(const E& e) {
  return to_string(detail::evaluate(e));
}
template <Expression E>
  requires(!TensorType<E>)
std::ostream& operator<<(std::ostream& os, const E& e) {
  return os << to_string(e);
}

}  // namespace tenet

template <class T, class S>
struct fmt::formatter<tenet::Tensor<T, S>> : fmt::formatter<std::string> {
  template <class Ctx>
  auto format(const tenet::Tensor<T, S>& t, Ctx& ctx) const {
    return fmt::formatter<std::string>::format(tenet::to_string(t), ctx);
  }
};
