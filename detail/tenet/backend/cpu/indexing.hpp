#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// CPU kernels of the indexing prims (prims/indexing.hpp): gather and scatter along one dim.
//
// Both walk the index tensor fiber by fiber over OpenMP threads. Gather's fibers are the rows of
// the output (its writes are contiguous). Scatter's fibers are the positions that differ only in
// the indexed dim d: a fiber of the index writes only the matching fiber of the output, so fibers
// are independent, and inside a fiber the positions run in order along d, which makes scatter
// deterministic: for `replace` the last duplicate along d wins and float sums add in index order,
// as torch's CPU kernel.
// A bad index inside the parallel loop is recorded and thrown after it (index_error).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <omp.h>

#include <tenet/backend/cpu/elementwise.hpp>
#include <tenet/prims/indexing.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::cpu {

inline constexpr std::int64_t indexing_grain = 16384;  // index positions per thread, at least

/// The first bad index met by any thread (the one with the lowest fiber number is reported).
struct bad_index {
  std::atomic<std::int64_t> fiber{std::numeric_limits<std::int64_t>::max()};
  std::int64_t value = 0;
  void note(std::int64_t f, std::int64_t v) {
#pragma omp critical(tenet_bad_index)
    {
      if (f < fiber.load(std::memory_order_relaxed)) {
        fiber.store(f, std::memory_order_relaxed);
        value = v;
      }
    }
  }
  void throw_if_any(const char* op, std::size_t dim, std::int64_t size) const {
    if (fiber.load() != std::numeric_limits<std::int64_t>::max())
      throw index_error(std::string("tenet: ") + op + ": index " + std::to_string(value) +
                        " is out of bounds for dim " + std::to_string(dim) + " with size " + std::to_string(size) +
                        " (indices must be in [0, " + std::to_string(size) + "))");
  }
};

/// Calls body(fiber, coord) for every fiber of `sizes` along dim d (coord[d] == 0), threads over
/// fibers when there is enough work. R >= 1.
template <std::size_t R, class Body>
void for_each_fiber(const sizes_t<R>& sizes, std::size_t d, Body&& body) {
  std::int64_t fibers = 1;
  for (std::size_t k = 0; k < R; ++k)
    if (k != d) fibers *= sizes[k];
  const std::int64_t len = sizes[d];
  if (fibers == 0 || len == 0) return;
  auto run = [&](std::int64_t begin, std::int64_t end) {
    std::array<std::int64_t, R> c{};
    std::int64_t rest = begin;
    for (std::size_t k = R; k-- > 0;) {
      if (k == d) continue;
      c[k] = rest % sizes[k];
      rest /= sizes[k];
    }
    for (std::int64_t f = begin; f < end; ++f) {
      body(f, c);
      for (std::size_t k = R; k-- > 0;) {  // odometer over the dims other than d
        if (k == d) continue;
        if (++c[k] < sizes[k]) break;
        c[k] = 0;
      }
    }
  };
  const int threads = fibers * len >= 2 * indexing_grain && fibers > 1 ? omp_get_max_threads() : 1;
  if (threads <= 1) {
    run(0, fibers);
    return;
  }
  const std::int64_t chunks = std::min<std::int64_t>(fibers, threads * 4);
  kernel_flag_collector flags;  // the gathered source may be a tree that divides integers
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t ch = 0; ch < chunks; ++ch) {
    run(fibers * ch / chunks, fibers * (ch + 1) / chunks);
    flags.collect();
  }
}

template <std::size_t R>
std::int64_t offset_of(const std::array<std::int64_t, R>& c, const sizes_t<R>& strides) {
  std::int64_t o = 0;
  for (std::size_t k = 0; k < R; ++k) o += c[k] * strides[k];
  return o;
}

/// out (contiguous, idx's sizes) = gather(x, d, idx). Reads have no order to keep, so the loop
/// runs over out's rows (fibers of the last dim): writes are contiguous whatever d is.
template <class T, class SO, class SX, class I, class SI>
void run_gather(const Tensor<T, SO>& out, const Tensor<T, SX>& x, const Tensor<I, SI>& idx, std::size_t d) {
  constexpr std::size_t R = SI::rank;
  if (out.numel() == 0) return;
  const std::int64_t n = x.sizes()[d];
  const T* xp = x.data();
  const I* ip = idx.data();
  T* op = out.data();
  const auto xs = x.strides(), is = idx.strides(), os = out.strides();
  constexpr std::size_t last = R - 1;
  const std::int64_t xsd = xs[d], isl = is[last], osl = os[last], len = idx.sizes()[last];
  const std::int64_t xsj = d == last ? 0 : xs[last];  // x's step along a row (none when d is the row dim)
  bad_index bad;
  for_each_fiber<R>(idx.sizes(), last, [&](std::int64_t f, const std::array<std::int64_t, R>& c) {
    const T* xr = xp + offset_of<R>(c, xs) - c[d] * xsd;  // the row's start in x, without dim d
    const I* ir = ip + offset_of<R>(c, is);
    T* orow = op + offset_of<R>(c, os);
    for (std::int64_t j = 0; j < len; ++j) {
      const std::int64_t v = static_cast<std::int64_t>(ir[j * isl]);
      if (v < 0 || v >= n) {
        bad.note(f, v);
        return;
      }
      orow[j * osl] = xr[j * xsj + v * xsd];
    }
  });
  bad.throw_if_any("gather", d, n);
}

/// The identity of a scatter reduction (the start of a position with include_self = false).
template <prim::scatter_op Op, class C>
constexpr C scatter_identity() {
  if constexpr (Op == prim::scatter_op::prod) return C(1);
  else if constexpr (Op == prim::scatter_op::amax) return prim::amax_kind::identity<C>();
  else if constexpr (Op == prim::scatter_op::amin) return prim::amin_kind::identity<C>();
  else return C(0);
}
template <prim::scatter_op Op, class T>
TENET_INLINE T scatter_combine(T a, T b) {
  using C = compute_t<T>;
  const C x = static_cast<C>(a), y = static_cast<C>(b);
  if constexpr (Op == prim::scatter_op::replace) return b;
  else if constexpr (Op == prim::scatter_op::sum || Op == prim::scatter_op::mean) return static_cast<T>(x + y);
  else if constexpr (Op == prim::scatter_op::prod) return static_cast<T>(x * y);
  else if constexpr (Op == prim::scatter_op::amax) return static_cast<T>(prim::amax_kind::combine<C>(x, y));
  else return static_cast<T>(prim::amin_kind::combine<C>(x, y));
}

/// out (contiguous, self's sizes, already holding self) = scatter(out, d, idx, src, Op).
/// A 0-dim src is one value for every position.
template <prim::scatter_op Op, class T, class SO, class I, class SI, class SS>
void run_scatter(const Tensor<T, SO>& out, const Tensor<I, SI>& idx, const Tensor<T, SS>& src, std::size_t d,
                 bool include_self) {
  constexpr std::size_t R = SI::rank;
  const std::int64_t n = out.sizes()[d];
  T* op = out.numel() ? out.data() : nullptr;
  const I* ip = idx.numel() ? idx.data() : nullptr;
  const T* sp = src.numel() ? src.data() : nullptr;
  const auto os = out.strides(), is = idx.strides();
  std::array<std::int64_t, R> ss{};
  if constexpr (SS::rank == R)
    for (std::size_t k = 0; k < R; ++k) ss[k] = src.strides()[k];
  const std::int64_t osd = os[d], isd = is[d], ssd = ss[d], len = idx.sizes()[d];
  constexpr bool reduces = Op != prim::scatter_op::replace;
  constexpr bool mean = Op == prim::scatter_op::mean;
  // mean: the number of values at each position (+1 for self)
  std::vector<std::int64_t> count;
  if constexpr (mean) count.assign(static_cast<std::size_t>(out.numel()), include_self ? 1 : 0);
  const auto cs = contiguous_strides(out.sizes());
  bad_index bad;
  for_each_fiber<R>(idx.sizes(), d, [&](std::int64_t f, const std::array<std::int64_t, R>& c) {
    T* of = op + offset_of<R>(c, os);
    const I* iff = ip + offset_of<R>(c, is);
    const T* sf = sp + offset_of<R>(c, ss);
    std::int64_t* cf = mean ? count.data() + offset_of<R>(c, cs) : nullptr;
    for (std::int64_t j = 0; j < len; ++j) {  // check first: an error leaves out untouched per fiber
      const std::int64_t v = static_cast<std::int64_t>(iff[j * isd]);
      if (v < 0 || v >= n) {
        bad.note(f, v);
        return;
      }
    }
    if (reduces && !include_self)
      for (std::int64_t j = 0; j < len; ++j)
        of[static_cast<std::int64_t>(iff[j * isd]) * osd] = static_cast<T>(scatter_identity<Op, compute_t<T>>());
    for (std::int64_t j = 0; j < len; ++j) {
      const std::int64_t v = static_cast<std::int64_t>(iff[j * isd]);
      T& dst = of[v * osd];
      dst = scatter_combine<Op>(dst, sf[j * ssd]);
      if constexpr (mean) ++cf[v * cs[d]];
    }
  });
  bad.throw_if_any(prim::scatter_<0, Op>::name.data(), d, n);
  if constexpr (mean) {
    // count is laid out like out (both contiguous)
    const std::int64_t total = out.numel();
    for (std::int64_t p = 0; p < total; ++p) {
      const std::int64_t k = count[static_cast<std::size_t>(p)];
      if (k > 1 || (k == 1 && !include_self)) {
        using C = compute_t<T>;
        if constexpr (std::is_integral_v<C>)
          op[p] = static_cast<T>(prim::int_floor_div<C>(static_cast<C>(op[p]), static_cast<C>(k)));
        else
          op[p] = static_cast<T>(static_cast<C>(op[p]) / static_cast<C>(k));
      }
    }
  }
}

}  // namespace tenet::detail::cpu

