#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// apply_tuple(f, t): f(std::get<0>(t), std::get<1>(t), ...), what std::apply does, in two function
// templates instead of std::apply's four (apply, __apply_impl, __invoke, __invoke_impl) and its
// __invoke_result traits. tenet walks every expression tree with it (decompose, plan, cse,
// materialize, autograd, ...): one instantiation per walker, node type and call site, each named
// after the whole subtree. In a CUDA test unit there were 2,731 std::apply instantiations, and
// nvcc's front ends and the host compiler each paid for all of their plumbing.
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tenet::detail {

template <class F, class Tup, std::size_t... I>
constexpr decltype(auto) apply_tuple_at(F&& f, Tup&& t, std::index_sequence<I...>) {
  return static_cast<F&&>(f)(std::get<I>(static_cast<Tup&&>(t))...);
}
template <class F, class Tup>
constexpr decltype(auto) apply_tuple(F&& f, Tup&& t) {
  return apply_tuple_at(static_cast<F&&>(f), static_cast<Tup&&>(t),
                        std::make_index_sequence<std::tuple_size_v<std::remove_reference_t<Tup>>>{});
}

}  // namespace tenet::detail
