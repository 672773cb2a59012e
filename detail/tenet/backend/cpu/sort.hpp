#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CPU kernel of sort_: each line is copied into (value, index) pairs and sorted by value, then
// by index, which is a stable sort (NaN last ascending, first descending, as torch). NaNs are set
// apart before the sort, so the comparison is a plain one.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include <tenet/backend/cpu/scan.hpp>  // line_space, for_each_line

namespace tenet::detail::cpu {

/// Orders numbers (no NaN) by value, then by input index (stability).
template <class A>
struct sort_less {
  bool descending;
  bool operator()(const std::pair<A, std::int64_t>& p, const std::pair<A, std::int64_t>& q) const {
    if (p.first != q.first) return descending ? q.first < p.first : p.first < q.first;
    return p.second < q.second;
  }
};

/// Sorts x along dim d into values and/or indices (contiguous; either pointer may be null).
template <class T, class S, class TV, class SV, class SI>
void run_sort(const Tensor<T, S>& x, std::size_t d, bool descending, const Tensor<TV, SV>* values,
              const Tensor<std::int64_t, SI>* indices) {
  constexpr std::size_t R = S::rank;
  const line_space<R> space{x.sizes(), d};
  const std::int64_t n = space.length(), lines = space.count();
  if (lines == 0) return;
  const T* in = x.data();
  const std::int64_t is = space.stride(x.strides());
  using A = compute_t<T>;
  const sort_less<A> less{descending};
  auto body = [&](std::int64_t l, std::vector<std::pair<A, std::int64_t>>& buf) {
    const T* a = in + space.base(l, x.strides());
    buf.resize(static_cast<std::size_t>(n));
    // NaNs (the largest values) are set apart in input order: last ascending, first descending
    std::size_t numbers = 0, nans = static_cast<std::size_t>(n);
    for (std::int64_t i = 0; i < n; ++i) {
      const A v = static_cast<A>(a[i * is]);
      if (v != v)
        buf[--nans] = {v, i};
      else
        buf[numbers++] = {v, i};
    }
    std::reverse(buf.begin() + static_cast<std::ptrdiff_t>(nans), buf.end());
    std::sort(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(numbers), less);
    if (descending) std::rotate(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(numbers), buf.end());
    if (values) {
      TV* y = values->data() + space.base(l, values->strides());
      const std::int64_t ys = space.stride(values->strides());
      for (std::int64_t i = 0; i < n; ++i) y[i * ys] = a[buf[static_cast<std::size_t>(i)].second * is];
    }
    if (indices) {
      std::int64_t* y = indices->data() + space.base(l, indices->strides());
      const std::int64_t ys = space.stride(indices->strides());
      for (std::int64_t i = 0; i < n; ++i) y[i * ys] = buf[static_cast<std::size_t>(i)].second;
    }
  };
  if (omp_get_max_threads() > 1 && lines > 1 && lines * n >= line_grain / 4) {
#pragma omp parallel
    {
      std::vector<std::pair<A, std::int64_t>> buf;
#pragma omp for schedule(static)
      for (std::int64_t l = 0; l < lines; ++l) body(l, buf);
    }
  } else {
    std::vector<std::pair<A, std::int64_t>> buf;
    for (std::int64_t l = 0; l < lines; ++l) body(l, buf);
  }
}

}  // namespace tenet::detail::cpu
