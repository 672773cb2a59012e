#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The Tensor members that evaluate: contiguous, clone, to, and the in-place ops.
#include <type_traits>

#include <tenet/backend/evaluate.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail {
/// PyTorch's can_cast for in-place results: no floating result into an integer tensor, no
/// non-bool result into a bool tensor.
template <class From, class To>
inline constexpr bool can_cast_in_place =
    !(is_floating_v<From> && !is_floating_v<To>) && !(!std::is_same_v<From, bool> && std::is_same_v<To, bool>);

template <class T, class E>
constexpr void check_in_place_cast() {
  static_assert(can_cast_in_place<value_type_of<E>, T>,
                "tenet: the result type of this in-place op cannot be cast to the tensor's dtype (as PyTorch: e.g. "
                "float into an integer tensor); use an out-of-place op and .to<T>()");
}
}  // namespace tenet::detail

namespace tenet {

template <class T, class S>
Tensor<T, S> Tensor<T, S>::contiguous() const {
  require_defined("contiguous");
  return is_contiguous() ? *this : clone();
}

template <class T, class S>
Tensor<T, S> Tensor<T, S>::clone() const {
  require_defined("clone");
  Tensor out(sizes_, device());
  detail::run_pointwise_on(out, *this);
  if constexpr (detail::ag::is_autograd_dtype<T>)  // clone is differentiable
    if (ag_ && detail::ag::grad_mode() && detail::ag::is_tracked(*this)) detail::ag::attach(*this, out);
  return out;
}

template <class T, class S>
Tensor<T, S> Tensor<T, S>::to(tenet::device d) const {
  require_defined("to");
  if (d == device()) return *this;
  if (!d.is_cpu()) (void)detail::backend_hooks(d, "copying a tensor");
  const Tensor src = contiguous();
  Tensor out(sizes_, d);
  detail::copy_bytes(out.storage_->data, d, src.data(), src.device(), static_cast<std::size_t>(numel()) * sizeof(T));
  if (ag_) detail::ag::on_to_device(*this, out);  // differentiable, as torch's .to
  return out;
}

template <class T, class S>
template <class U>
auto Tensor<T, S>::to() const {
  require_defined("to");
  return Tensor<U, S>(cast<U>(*this));
}

template <class T, class S>
template <ExprOrScalar E>
const Tensor<T, S>& Tensor<T, S>::copy_(const E& e) const {
  require_defined("copy_");
  if constexpr (Expression<E>)
    detail::assign(*this, e);
  else
    detail::assign(*this, detail::cast_to<T>(e));
  return *this;
}

template <class T, class S>
template <Scalar V>
const Tensor<T, S>& Tensor<T, S>::fill_(V v) const {
  require_defined("fill_");
  detail::bump_version(storage_.get());
  detail::run_pointwise_on(*this, detail::cast_to<T>(v));
  return *this;
}

#define TENET_IN_PLACE(NAME, FN)                                   \
  template <class T, class S>                                      \
  template <ExprOrScalar E>                                        \
  const Tensor<T, S>& Tensor<T, S>::NAME(const E& e) const {       \
    require_defined(#NAME);                                        \
    auto r = FN(*this, e);                                         \
    detail::check_in_place_cast<T, decltype(r)>();            \
    detail::assign(*this, r);                                      \
    return *this;                                                  \
  }
TENET_IN_PLACE(add_, add)
TENET_IN_PLACE(sub_, sub)
TENET_IN_PLACE(mul_, mul)
TENET_IN_PLACE(div_, div)
#undef TENET_IN_PLACE

}  // namespace tenet
