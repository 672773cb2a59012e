#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The indexing prims: gather_ and scatter_ along one compile-time dim (torch.gather and
// torch.scatter / scatter_reduce semantics). Every ATen-level indexing op (index_select, index_add,
// embedding, one_hot, bincount, nll_loss ...) is a decomposition into these two and the elementwise
// and reduction prims (include/tenet/indexing.hpp).
//
// Contracts (x: input, idx: int64 or int32 index of the same rank as x):
//   gather_<d>(x, idx)[i]  = x[i with i_d := idx[i]]            result: idx's shape, x's dtype
//       idx.size(k) <= x.size(k) for every k != d
//   scatter_<d, op>(self, idx, src): a copy of self, then for every position i of idx, in row-major
//       order along d (so for `replace` the last duplicate along d wins, as torch's CPU kernel):
//       out[i with i_d := idx[i]] = op(out[...], src[i])       result: self's shape and dtype
//       idx.size(k) <= src.size(k) for every k; idx.size(k) <= self.size(k) for k != d; a 0-dim
//       src is one value for every position (torch.scatter(..., value)).
//       include_self = false: a position that receives at least one value starts from op's identity
//       instead of self's value (torch.scatter_reduce); mean divides by the number of values
//       (+1 with include_self), with floor division for integers.
//   An index outside [0, size) of the indexed dim throws index_error naming the value, the dim
//   and its size (negative indices are errors, as in torch.gather/scatter).
// CPU kernels: backend/cpu/indexing.hpp.
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include <tenet/dtype.hpp>
#include <tenet/error.hpp>
#include <tenet/expr/concepts.hpp>
#include <tenet/shape/rules.hpp>

namespace tenet {
/// How scatter_reduce combines the values that meet at one position (torch's `reduce` strings).
enum class scatter_reduction { sum, prod, mean, amax, amin };
}  // namespace tenet

namespace tenet::compile_error {
template <class InputShape, class IndexShape, class Dim>
struct index_larger_than_input {
  static_assert(always_false<InputShape>,
                "tenet: in 'index_larger_than_input<input shape, index shape, dim<k>>' above the index is larger "
                "than the input at dim k, which is not the indexed dim (index.size(k) <= input.size(k) is needed)");
};
template <class IndexType>
struct index_dtype_not_integer {
  static_assert(always_false<IndexType>,
                "tenet: an index tensor must hold int64 (or int32) values; convert it with .to<std::int64_t>()");
};
}  // namespace tenet::compile_error

namespace tenet::prim {

struct indexing_group {};

/// The combining op of scatter_: replace (torch.scatter) or one of torch.scatter_reduce's.
enum class scatter_op { replace, sum, prod, mean, amax, amin };

template <class I>
inline constexpr bool is_index_type = std::is_same_v<I, std::int64_t> || std::is_same_v<I, std::int32_t>;

namespace detail_indexing {
template <class I>
constexpr bool check_index_type() {
  if constexpr (!is_index_type<I>) (void)sizeof(compile_error::index_dtype_not_integer<I>);
  return is_index_type<I>;
}
/// The dim D of a rank-R tensor, normalized (a 0-dim tensor has the one dim 0 or -1, as torch).
template <std::size_t R, std::int64_t D>
constexpr std::size_t norm_dim() {
  constexpr std::int64_t r = R == 0 ? 1 : static_cast<std::int64_t>(R);
  static_assert(D >= -r && D < r, "tenet: the indexing dim is out of range for the tensor's rank");
  return static_cast<std::size_t>(D < 0 ? D + r : D);
}
/// Static check: Idx is not larger than In at any dim other than Skip (Skip = rank: check every dim).
template <class In, class Idx, std::size_t Skip>
constexpr bool check_extents() {
  static_assert(In::rank == Idx::rank,
                "tenet: the index must have the same rank as the tensor it indexes (as torch.gather/scatter); "
                "unsqueeze or reshape it");
  constexpr std::size_t bad = [] {
    for (std::size_t k = 0; k < In::rank; ++k)
      if (k != Skip && In::info[k].is_fixed() && Idx::info[k].is_fixed() && Idx::info[k].value > In::info[k].value)
        return k;
    return In::rank;
  }();
  if constexpr (bad < In::rank)
    (void)sizeof(compile_error::index_larger_than_input<In, Idx, compile_error::dim<static_cast<std::int64_t>(bad)>>);
  return true;
}
template <std::size_t R>
void check_sizes_fit(const char* op, const sizes_t<R>& in, const sizes_t<R>& idx, std::size_t skip, const char* what) {
  for (std::size_t k = 0; k < R; ++k)
    if (k != skip && idx[k] > in[k])
      throw shape_error(std::string("tenet: ") + op + ": index " + detail::sizes_text(idx) + " is larger than " +
                        what + " " + detail::sizes_text(in) + " at dim " + std::to_string(k) + " (" +
                        std::to_string(idx[k]) + " > " + std::to_string(in[k]) +
                        "); index.size(k) <= " + what + ".size(k) is needed" +
                        (skip < R ? " for k != " + std::to_string(skip) : std::string()));
}
}  // namespace detail_indexing

/// gather_<D>: torch.gather(x, D, idx). skip_grad: an index value whose positions send no
/// gradient back to x (embedding's padding_idx, as torch); -1, none. The value ignores it.
template <std::int64_t D>
struct gather_ {
  static constexpr bool is_prim = true;
  using group = indexing_group;
  static constexpr std::string_view name = "gather";
  static constexpr std::int64_t dim = D;
  std::int64_t skip_grad = -1;
  template <class X, class I>
  static constexpr std::size_t axis = detail_indexing::norm_dim<rank_of<X>, D>();

  template <class X, class I>
    requires(detail_indexing::check_index_type<value_type_of<I>>() &&
             detail_indexing::check_extents<shape_of<X>, shape_of<I>, axis<X, I>>())
  using result_shape = shape_of<I>;
  template <class X, class I>
  using result_type = value_type_of<X>;

  template <class X, class I>
  static auto sizes(const X& x, const I& idx) {
    const auto is = idx.sizes();
    detail_indexing::check_sizes_fit<rank_of<X>>("gather", x.sizes(), is, axis<X, I>, "input");
    return is;
  }
};

/// scatter_<D, Op>: torch.scatter(self, D, idx, src) (Op = replace) or torch.scatter_reduce with
/// the reduce Op and include_self (a run-time flag).
template <std::int64_t D, scatter_op Op>
struct scatter_ {
  static constexpr bool is_prim = true;
  using group = indexing_group;
  static constexpr std::string_view name = Op == scatter_op::replace ? "scatter"
                                           : Op == scatter_op::sum   ? "scatter_sum"
                                           : Op == scatter_op::prod  ? "scatter_prod"
                                           : Op == scatter_op::mean  ? "scatter_mean"
                                           : Op == scatter_op::amax  ? "scatter_amax"
                                                                     : "scatter_amin";
  static constexpr std::string_view family = "scatter";  // one listed prim for every combining op
  static constexpr std::int64_t dim = D;
  static constexpr scatter_op op = Op;
  bool include_self = true;

  template <class X, class I, class Src>
  static constexpr std::size_t axis = detail_indexing::norm_dim<rank_of<X>, D>();
  template <class X, class I, class Src>
  static constexpr bool check() {
    static_assert(std::is_same_v<value_type_of<X>, value_type_of<Src>>,
                  "tenet: scatter: src must have the dtype of self (as torch); cast it");
    static_assert(rank_of<Src> == 0 || rank_of<Src> == rank_of<X>,
                  "tenet: scatter: src must have the rank of self (or be one value)");
    if constexpr (rank_of<Src> != 0) detail_indexing::check_extents<shape_of<Src>, shape_of<I>, rank_of<X>>();
    return detail_indexing::check_index_type<value_type_of<I>>() &&
           detail_indexing::check_extents<shape_of<X>, shape_of<I>, axis<X, I, Src>>();
  }
  template <class X, class I, class Src>
    requires(check<X, I, Src>())
  using result_shape = shape_of<X>;
  template <class X, class I, class Src>
  using result_type = value_type_of<X>;

  template <class X, class I, class Src>
  static auto sizes(const X& x, const I& idx, const Src& src) {
    constexpr std::size_t R = rank_of<X>;
    const auto is = idx.sizes();
    detail_indexing::check_sizes_fit<R>(name.data(), x.sizes(), is, axis<X, I, Src>, "self");
    if constexpr (rank_of<Src> != 0) detail_indexing::check_sizes_fit<R>(name.data(), src.sizes(), is, R, "src");
    return x.sizes();
  }
};

}  // namespace tenet::prim
