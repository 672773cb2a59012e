#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Printing as PyTorch prints: `std::cout << t`, fmt::format("{}", t), tenet::to_string(t).
#include <cstdint>
#include <ostream>
#include <span>
#include <string>

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
