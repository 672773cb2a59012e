#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The sort prim: sort_<Dim, Output>, a stable sort of the elements along one dim, ascending or
// descending (a run-time flag of the op, as torch.sort's `descending`).
//
// @post along Dim, values are ordered (NaN counts as larger than every number, as torch), equal
//       values keep their input order (stable), and values[..., i, ...] = x[..., indices[..., i, ...], ...].
//
// One sort has two results of different dtypes (values: x's dtype, indices: int64). The prim node
// names the one it stands for (Output = sort_output::values | sort_output::indices), so that either
// appears in a lazy expression on its own (argsort, msort); the ATen ops that return both
// (sort, topk, kthvalue, median, mode) run the prim's kernel once for both through
// detail::sort_both_into (backend/evaluate.hpp: each backend's run_sort_both).
#include <cstdint>
#include <string_view>

#include <tenet/expr/concepts.hpp>
#include <tenet/prims/scan.hpp>  // detail::line_dim

namespace tenet::prim {

struct sort_group {};

enum class sort_output { values, indices };

template <std::int64_t Dim, sort_output Output>
struct sort_ {
  static constexpr bool is_prim = true;
  using group = sort_group;
  static constexpr std::string_view name = Output == sort_output::values ? "sort" : "argsort";
  static constexpr std::string_view family = "sort";  // one listed prim for both outputs
  static constexpr std::int64_t requested_dim = Dim;
  bool descending = false;

  template <class C>
  static constexpr std::size_t dim = detail::line_dim<shape_of<C>, Dim>();
  template <class C>
  using result_shape = shape_of<C>;
  template <class C>
  using result_type = std::conditional_t<Output == sort_output::values, value_type_of<C>, std::int64_t>;
  template <class C>
  static auto sizes(const C& c) {
    (void)dim<C>;
    return c.sizes();
  }
};

}  // namespace tenet::prim
