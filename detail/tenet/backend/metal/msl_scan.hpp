#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The Metal scan kernels (docs/metal.md): scan_<Kind, Dim> (prims/scan.hpp) for the kinds sum
// (cumsum), prod (cumprod), logaddexp (logcumsumexp), amax and amin (cummax / cummin's values),
// one threadgroup per line (the elements along the scanned dim), the line taken in chunks of
// `tgsize` elements:
//   1. each thread loads one element (or the kind's identity past the end);
//   2. an inclusive scan within each simdgroup by shuffles up (log2 32 = 5 steps);
//   3. each simdgroup's total to threadgroup memory, a barrier, then each thread combines the
//      carry of the earlier chunks with the totals of the simdgroups before its own, in order;
//   4. every thread folds all the totals into its carry (the same combinations in the same order,
//      so every thread holds the same carry), and a barrier before the next chunk writes `part`.
// The shape of the row kernels' threadgroup reduction (msl_rows.hpp, threadgroup_reduce) with a
// prefix instead of a total.
//
// Types: float32, float16 and bfloat16 accumulate in float (16-bit results rounded once, as the
// CPU's float accumulator); int32 sums and products accumulate in long and give int64 (as torch),
// wrapping modulo 2^64 (computed on ulong, defined in MSL and C++); int32 amax / amin stay int.
// The CPU accumulates float32 sums, products and logaddexp in double (prims/scan.hpp): the kernel's
// float results differ from it by float rounding in a different order (the tests bound it).
//
// Argument table: buffer(0) out, buffer(1) in, buffer(2) the parameters (long):
//   p[0] lines, p[1] line length, p[2] in's stride along the line, p[3] out's stride along it,
//   then the R - 1 other dims' sizes, in's strides there, out's strides there
// and threadgroup(0): one accumulator per simdgroup. Threads per threadgroup: a multiple of 32.
// One kernel serves every dim of a rank-R view: the scanned dim is a run-time parameter.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <tenet/backend/metal/msl_rows.hpp>
#include <tenet/prims/scan.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::metal {

/// How scan Kind combines elements of type T in MSL: the accumulator type, its identity, the
/// combination of two accumulators, and how an element loads and a result stores.
template <class Kind, class T>
struct scan_combiner {
  static constexpr bool is_int = std::is_same_v<T, std::int32_t>;
  static constexpr bool sum = std::is_same_v<Kind, prim::sum_kind>, prod = std::is_same_v<Kind, prim::prod_kind>;
  static constexpr bool max = std::is_same_v<Kind, prim::amax_kind>, min = std::is_same_v<Kind, prim::amin_kind>;
  static constexpr bool lse = std::is_same_v<Kind, prim::logaddexp_kind>;
  static_assert(sum || prod || max || min || lse,
                "tenet: the Metal scan kernels run cumsum, cumprod, logcumsumexp, and cummax / cummin's values");
  static_assert(std::is_same_v<T, float> || half_precision<T> || (is_int && !lse),
                "tenet: the Metal scan kernels take float32, float16, bfloat16 and (but logcumsumexp) int32");
  /// the accumulator's and the result's MSL types
  static constexpr bool wide = is_int && (sum || prod);
  using result = typename Kind::template result<T>;
  static std::string acc() { return is_int ? (wide ? "long" : "int") : "float"; }
  static std::string identity() {
    if (sum) return is_int ? "0" : "0.0f";
    if (prod) return is_int ? "1" : "1.0f";
    if (lse || max) return is_int ? "INT_MIN" : "-INFINITY";
    return is_int ? "INT_MAX" : "INFINITY";
  }
  static std::string combine(const std::string& a, const std::string& b) {
    if (sum) return is_int ? "as_type<long>(as_type<ulong>(" + a + ") + as_type<ulong>(" + b + "))" : a + " + " + b;
    if (prod) return is_int ? "as_type<long>(as_type<ulong>(" + a + ") * as_type<ulong>(" + b + "))" : a + " * " + b;
    if (lse) return "tenet_logaddexp(" + a + ", " + b + ")";
    if (max) return is_int ? "max(" + a + ", " + b + ")" : "tenet_max_nan(" + a + ", " + b + ")";
    return is_int ? "min(" + a + ", " + b + ")" : "tenet_min_nan(" + a + ", " + b + ")";
  }
  static std::string shuffle_up(const std::string& v) {
    return wide ? "tenet_simd_shuffle_up_long(" + v + ", d)" : "simd_shuffle_up(" + v + ", d)";
  }
  static std::string load(const std::string& e) { return half_precision<T> ? "float(" + e + ")" : (wide ? "long(" + e + ")" : e); }
  static std::string store(const std::string& e) { return half_precision<T> ? std::string(msl_type<T>()) + "(" + e + ")" : e; }
  static std::string words() {
    if constexpr (std::is_same_v<T, float>) return "float32";
    else if constexpr (std::is_same_v<T, float16>) return "float16";
    else if constexpr (std::is_same_v<T, bfloat16>) return "bfloat16";
    else return "int32";
  }
};

/// The combiners of the scans that MSL has no function for: NaN-propagating min (max is the row
/// kernels'), logaddexp as prims/scan.hpp's logaddexp_kind, and a shuffle of a long as two uints.
inline constexpr std::string_view scan_helpers = R"(#ifndef TENET_MSL_SCAN_HELPERS
#define TENET_MSL_SCAN_HELPERS
inline float tenet_min_nan(float a, float b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); }
inline float tenet_logaddexp(float a, float b) {
  if (b != b) return b;
  if (a != a) return a;
  const float lo = b < a ? b : a, hi = b < a ? a : b;
  if (lo == hi && metal::isinf(lo)) return lo;
  return hi + tenet_log1p(metal::precise::exp(lo - hi));
}
inline long tenet_simd_shuffle_up_long(long v, ushort d) {
  const uint2 u = as_type<uint2>(v);
  return as_type<long>(uint2(simd_shuffle_up(u.x, d), simd_shuffle_up(u.y, d)));
}
#endif
)";

/// The scan of Kind along one dim of a rank-R view of T (the dim a run-time parameter), into an
/// output of any strides.
template <class Kind, std::size_t R, class T = float>
const kernel_source& scan_kernel() {
  static const kernel_source k = [] {
    static_assert(R >= 1);
    using c = scan_combiner<Kind, T>;
    using rows_detail::offset_of;
    const std::string a = c::acc(), out_t(msl_type<typename c::result>()), in_t(msl_type<T>());
    kernel_source out;
    out.description = std::string(prim::scan_name<Kind>) + " of " + c::words() + " along one dim of a rank-" + std::to_string(R) + " view";
    out.name = kernel_name("tenet_" + std::string(prim::scan_name<Kind>), out.description);
    constexpr std::size_t lsz = 4, lin = 4 + (R - 1), lout = 4 + 2 * (R - 1);
    std::string s = "[[kernel]] void " + out.name +
                    "(\n"
                    "    tenet_buffer<" + out_t + "> out [[buffer(0)]],\n"
                    "    tenet_buffer<const " + in_t + "> in [[buffer(1)]],\n"
                    "    tenet_buffer<const long> p [[buffer(2)]],\n"
                    "    tenet_threadgroup<" + a + "> part [[threadgroup(0)]],\n" +
                    std::string(builtin_parameters) + ") {\n  (void)gid;\n";
    s += "  const long line = long(tgid), n = p[1], xs = p[2], os = p[3];\n";
    s += "  const uint groups = (tgsize + 31) / 32;\n";
    s += offset_of("ib", "line", R - 1, lsz, lin, "  ");
    s += offset_of("ob", "line", R - 1, lsz, lout, "  ");
    s += "  " + a + " carry = " + c::identity() + ";  // the combination of the chunks before\n";
    s += "  for (long start = 0; start < n; start += long(tgsize)) {\n";
    s += "    const long j = start + long(lid);\n";
    s += "    " + a + " v = j < n ? " + c::load("in[ib + j * xs]") + " : " + c::identity() + ";\n";
    s += "    // inclusive scan within the simdgroup: after step d, lane l holds lanes max(0, l - 2d + 1) .. l\n";
    s += "    for (ushort d = 1; d < 32; d *= 2) {\n";
    s += "      const " + a + " u = " + c::shuffle_up("v") + ";\n";
    s += "      if (lane >= d) v = " + c::combine("u", "v") + ";\n";
    s += "    }\n";
    s += "    if (lane == 31) part[sg] = v;\n";
    s += "    threadgroup_barrier(mem_flags::mem_threadgroup);\n";
    s += "    " + a + " before = carry;\n";
    s += "    for (uint k = 0; k < sg; ++k) before = " + c::combine("before", a + "(part[k])") + ";\n";
    s += "    if (j < n) out[ob + j * os] = " + c::store(c::combine("before", "v")) + ";\n";
    s += "    for (uint k = 0; k < groups; ++k) carry = " + c::combine("carry", a + "(part[k])") + ";\n";
    s += "  " + std::string(reuse_barrier_line);
    s += "  }\n}\n";
    out.source = kernel_file(out.name, out.description, std::string(row_helpers) + std::string(scan_helpers) + s);
    return out;
  }();
  return k;
}

/// The parameters of scan_kernel for out = scan(x) along dim d (out and x of the same sizes).
template <class TO, class SO, class T, class S>
std::vector<std::int64_t> scan_params(const Tensor<TO, SO>& out, const Tensor<T, S>& x, std::size_t d) {
  static_assert(S::rank >= 1 && SO::rank == S::rank);
  std::int64_t lines = 1;
  for (std::size_t k = 0; k < S::rank; ++k)
    if (k != d) lines *= x.sizes()[k];
  std::vector<std::int64_t> p{lines, x.sizes()[d], x.strides()[d], out.strides()[d]};
  for (std::size_t k = 0; k < S::rank; ++k)
    if (k != d) p.push_back(x.sizes()[k]);
  for (std::size_t k = 0; k < S::rank; ++k)
    if (k != d) p.push_back(x.strides()[k]);
  for (std::size_t k = 0; k < S::rank; ++k)
    if (k != d) p.push_back(out.strides()[k]);
  return p;
}

/// The bytes of threadgroup memory a scan of Kind over T needs for `threads` threads.
template <class Kind, class T>
std::size_t scan_threadgroup_bytes(std::uint32_t threads) {
  return (threads + 31) / 32 * (scan_combiner<Kind, T>::wide ? 8 : 4);
}

}  // namespace tenet::detail::metal
