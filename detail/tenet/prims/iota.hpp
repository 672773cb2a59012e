#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The iota prim: iota_<T>, the 1-D sequence start + step * i for i in [0, length), of a run-time
// length (torch.arange's values). No operand: the node holds length, start and step.
//
// @post out[i] = T(start + step * i), computed in int64 for integer T and in double otherwise (as
//       torch.arange's CPU kernel), so iota_<float> of large i rounds once.
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include <tenet/error.hpp>
#include <tenet/shape.hpp>

namespace tenet::prim {

struct generator_group {};

template <class T>
struct iota_ {
  static constexpr bool is_prim = true;
  using group = generator_group;
  static constexpr std::string_view name = "iota";
  /// The type start and step are held and multiplied in.
  using step_type = std::conditional_t<std::is_integral_v<T>, std::int64_t, double>;

  std::int64_t length = 0;
  step_type start = 0;
  step_type step = 1;

  template <class... C>
  using result_type = T;
  template <class... C>
  using result_shape = shape<dyn>;
  sizes_t<1> sizes() const {
    if (length < 0) throw value_error("tenet: iota: negative length " + std::to_string(length));
    return {length};
  }
  TENET_HOST_DEVICE T at(std::int64_t i) const { return static_cast<T>(start + step * static_cast<step_type>(i)); }
};

}  // namespace tenet::prim
