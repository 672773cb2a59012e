#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The Metal kernels of the indexing prims (docs/metal.md): gather_ and scatter_ (prims/indexing.hpp),
// and with them every op decomposed into them (index_select, embedding, take_along_dim,
// scatter_add, scatter_reduce, index_add ...). The MSL twins of backend/cuda/indexing.cuh:
//
// gather: a thread per output element (the output has the index's sizes and is contiguous); x
//   and the index any strides.
// scatter: a thread per fiber of the index (the positions that differ only in the indexed dim d).
//   A fiber writes only the matching fiber of the output, so fibers are independent, and inside
//   one the positions run in order along d: the result is deterministic and the CPU backend's (for
//   `replace` the last duplicate along d wins; sums add in index order; mean divides each position
//   once, by its count, at the end of the fiber).
// scatter_add with atomics: a thread per index element adds its value with
//   atomic_fetch_add_explicit (float32 and int32; the order of float additions is not fixed, as
//   torch's GPU scatter_add), for few long fibers, where the fiber kernel has too little
//   parallelism (scatter_uses_atomics).
//
// Bad indices: the kernels have a fault channel, buffer `fault` of three uints: a thread that
// meets an index outside [0, size) adds 1 to fault[0] and, the first to do so, stores the value's
// low and high 32 bits in fault[1] and fault[2]; its element (gather) or fiber (scatter) is not
// written. The host raises the CPU's index_error from the record (throw_if_index_fault). When
// several indices are bad the value reported is the first thread's, not the CPU's lowest fiber.
//
// Types: any element type the generator names (float32, float16, bfloat16, int32, int64, bool) for
// gather; float32, float16, bfloat16 and int32 for scatter (16-bit values combine in float and
// round at every step, as the CPU's scatter_combine; int32 sums and products wrap); int64 or int32
// indices.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <tenet/backend/metal/msl_common.hpp>
#include <tenet/error.hpp>
#include <tenet/prims/indexing.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::metal {

/// The fault channel's helper: counts the bad index, the first records its value.
inline constexpr std::string_view index_helpers = R"(#ifndef TENET_MSL_INDEX_HELPERS
#define TENET_MSL_INDEX_HELPERS
inline void tenet_index_fault(tenet_buffer<atomic_uint> fault, long v) {
  if (atomic_fetch_add_explicit(fault, 1u, memory_order_relaxed) == 0u) {
    atomic_store_explicit(fault + 1, uint(as_type<ulong>(v)), memory_order_relaxed);
    atomic_store_explicit(fault + 2, uint(as_type<ulong>(v) >> 32), memory_order_relaxed);
  }
}
inline float tenet_scatter_max(float a, float b) { return a != a ? a : (b != b ? b : (b > a ? b : a)); }
inline float tenet_scatter_min(float a, float b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); }
// floor division by a positive count (scatter_reduce's mean of integers)
inline int tenet_floor_div_count(int a, int b) {
  const int q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
#endif
)";

/// A fault record as the host reads it back (three uints).
struct index_fault_record {
  std::uint32_t count = 0, low = 0, high = 0;
};

/// Raises the CPU backend's index_error for a fault record that holds a bad index (op: the prim's
/// name, dim and size: the indexed dim's).
inline void throw_if_index_fault(const index_fault_record& f, const char* op, std::size_t dim, std::int64_t size) {
  if (f.count == 0) return;
  const auto value = static_cast<std::int64_t>((static_cast<std::uint64_t>(f.high) << 32) | f.low);
  throw index_error(std::string("tenet: ") + op + ": index " + std::to_string(value) + " is out of bounds for dim " +
                    std::to_string(dim) + " with size " + std::to_string(size) + " (indices must be in [0, " +
                    std::to_string(size) + "))");
}

namespace indexing_detail {
template <class T>
std::string words() {
  if constexpr (std::is_same_v<T, float>) return "float32";
  else if constexpr (std::is_same_v<T, float16>) return "float16";
  else if constexpr (std::is_same_v<T, bfloat16>) return "bfloat16";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  else return "bool";
}
/// Statements that split `idx` over R dims (sizes p[sizes_at + k], the indexed dim's size
/// `dsize`) into offsets: var i gets the index's strides from p[strides_at[i] + k]; `skip_d[i]`:
/// var i leaves out the indexed dim d.
inline std::string split(std::size_t R, const std::string& idx, std::size_t sizes_at, const std::string& dsize,
                         const std::vector<std::string>& vars, const std::vector<std::size_t>& strides_at,
                         const std::vector<bool>& skip_d) {
  std::string s = "  long rem = " + idx + ";\n";
  for (const auto& v : vars) s += "  long " + v + " = 0;\n";
  for (std::size_t k = R; k-- > 0;) {
    const std::string ks = std::to_string(k);
    const std::string sz = dsize.empty() ? "p[" + std::to_string(sizes_at + k) + "]"
                                         : "(d == " + ks + " ? " + dsize + " : p[" + std::to_string(sizes_at + k) + "])";
    s += "  {\n    const long c = rem % " + sz + ";\n    rem /= " + sz + ";\n";
    for (std::size_t i = 0; i < vars.size(); ++i) {
      const std::string add = vars[i] + " += c * p[" + std::to_string(strides_at[i] + k) + "];";
      s += skip_d[i] ? "    if (d != " + ks + ") " + add + "\n" : "    " + add + "\n";
    }
    s += "  }\n";
  }
  return s;
}
template <class T, class I>
void check_types() {
  static_assert(msl_element<T>, "tenet: the Metal indexing kernels take float32, float16, bfloat16, int32, int64 and bool");
  static_assert(std::is_same_v<I, std::int64_t> || std::is_same_v<I, std::int32_t>, "tenet: an index is int64 or int32");
}
}  // namespace indexing_detail

/// gather along a run-time dim d of rank-R views: out[i] = in[i with i_d := idx[i]], out
/// contiguous with idx's sizes.
/// Argument table: buffer(0) out, buffer(1) in, buffer(2) idx, buffer(3) the parameters (long):
///   p[0] elements, p[1] in.size(d), p[2] d, then idx's sizes, in's strides, idx's strides (R each)
/// and buffer(4) the fault record. One thread per element.
template <std::size_t R, class T, class I = std::int64_t>
const kernel_source& gather_kernel() {
  static const kernel_source k = [] {
    indexing_detail::check_types<T, I>();
    static_assert(R >= 1);
    const std::string t(msl_type<T>()), it(msl_type<I>());
    kernel_source out;
    out.description = "gather of " + indexing_detail::words<T>() + " by " + indexing_detail::words<I>() + " indices along one dim of rank-" +
                      std::to_string(R) + " views";
    out.name = kernel_name("tenet_gather", out.description);
    std::string s = "[[kernel]] void " + out.name +
                    "(\n"
                    "    tenet_buffer<" + t + "> out [[buffer(0)]],\n"
                    "    tenet_buffer<const " + t + "> in [[buffer(1)]],\n"
                    "    tenet_buffer<const " + it + "> idx [[buffer(2)]],\n"
                    "    tenet_buffer<const long> p [[buffer(3)]],\n"
                    "    tenet_buffer<atomic_uint> fault [[buffer(4)]],\n" +
                    std::string(builtin_parameters) + ") {\n  (void)tgid, (void)lid, (void)tgsize, (void)lane, (void)sg;\n";
    s += "  if (long(gid) >= p[0]) return;\n";
    s += "  const long d = p[2];\n";
    s += indexing_detail::split(R, "long(gid)", 3, "", {"xo", "io"}, {3 + R, 3 + 2 * R}, {true, false});
    s += "  const long v = long(idx[io]);\n";
    s += "  if (v < 0 || v >= p[1]) {\n    tenet_index_fault(fault, v);\n    return;\n  }\n";
    s += "  out[gid] = in[xo + v * p[" + std::to_string(3 + R) + " + d]];\n";
    s += "}\n";
    out.source = kernel_file(out.name, out.description, std::string(index_helpers) + s);
    return out;
  }();
  return k;
}

/// The parameters of gather_kernel for out = gather(x, d, idx).
template <class T, class S, class I, class SI>
std::vector<std::int64_t> gather_params(const Tensor<T, S>& x, const Tensor<I, SI>& idx, std::size_t d) {
  std::vector<std::int64_t> p{idx.numel(), x.sizes()[d], static_cast<std::int64_t>(d)};
  for (std::size_t k = 0; k < S::rank; ++k) p.push_back(idx.sizes()[k]);
  for (std::size_t k = 0; k < S::rank; ++k) p.push_back(x.strides()[k]);
  for (std::size_t k = 0; k < S::rank; ++k) p.push_back(idx.strides()[k]);
  return p;
}

namespace indexing_detail {
/// The MSL of scatter Op combining the current value `a` (of T) with `b` (of T), rounded to T.
template <prim::scatter_op Op, class T>
std::string combine(const std::string& a, const std::string& b) {
  const std::string t(msl_type<T>());
  constexpr bool is_int = std::is_same_v<T, std::int32_t>;
  if constexpr (Op == prim::scatter_op::replace) return b;
  else if constexpr (is_int) {
    if constexpr (Op == prim::scatter_op::sum || Op == prim::scatter_op::mean)
      return "as_type<int>(as_type<uint>(" + a + ") + as_type<uint>(" + b + "))";
    else if constexpr (Op == prim::scatter_op::prod) return "as_type<int>(as_type<uint>(" + a + ") * as_type<uint>(" + b + "))";
    else if constexpr (Op == prim::scatter_op::amax) return "max(" + a + ", " + b + ")";
    else return "min(" + a + ", " + b + ")";
  } else {
    const std::string x = "float(" + a + ")", y = "float(" + b + ")";
    std::string r;
    if constexpr (Op == prim::scatter_op::sum || Op == prim::scatter_op::mean) r = x + " + " + y;
    else if constexpr (Op == prim::scatter_op::prod) r = x + " * " + y;
    else if constexpr (Op == prim::scatter_op::amax) r = "tenet_scatter_max(" + x + ", " + y + ")";
    else r = "tenet_scatter_min(" + x + ", " + y + ")";
    return std::is_same_v<T, float> ? r : t + "(" + r + ")";
  }
}
template <prim::scatter_op Op, class T>
std::string identity() {
  constexpr bool is_int = std::is_same_v<T, std::int32_t>;
  const std::string t(msl_type<T>());
  if constexpr (Op == prim::scatter_op::prod) return is_int ? "1" : t + "(1.0f)";
  else if constexpr (Op == prim::scatter_op::amax) return is_int ? "INT_MIN" : t + "(-INFINITY)";
  else if constexpr (Op == prim::scatter_op::amin) return is_int ? "INT_MAX" : t + "(INFINITY)";
  else return is_int ? "0" : t + "(0.0f)";
}
inline constexpr std::size_t scatter_fixed = 5;  // p[0] .. p[4] before the per-dim arrays
template <class T, class I>
std::string scatter_signature(const std::string& name, bool atomic, bool count) {
  const std::string t(msl_type<T>()), it(msl_type<I>());
  const std::string ot = atomic ? (std::is_same_v<T, float> ? "atomic_float" : "atomic_int") : t;
  std::string s = "[[kernel]] void " + name +
                  "(\n"
                  "    tenet_buffer<" + ot + "> out [[buffer(0)]],\n"
                  "    tenet_buffer<const " + it + "> idx [[buffer(1)]],\n"
                  "    tenet_buffer<const " + t + "> src [[buffer(2)]],\n"
                  "    tenet_buffer<const long> p [[buffer(3)]],\n"
                  "    tenet_buffer<atomic_uint> fault [[buffer(4)]],\n";
  if (count) s += "    tenet_buffer<long> count [[buffer(5)]],\n";
  return s + std::string(builtin_parameters) + ") {\n  (void)tgid, (void)lid, (void)tgsize, (void)lane, (void)sg;\n";
}
template <class T>
void check_scatter_type() {
  static_assert(std::is_same_v<T, float> || half_precision<T> || std::is_same_v<T, std::int32_t>,
                "tenet: the Metal scatter kernels take float32, float16, bfloat16 and int32");
}
}  // namespace indexing_detail

/// scatter_<d, Op> along a run-time dim d of rank-R views, a thread per fiber of the index: out
/// (holding self; contiguous) combined with src at the index's positions (see the top of the
/// file). Argument table: buffer(0) out, buffer(1) idx, buffer(2) src, buffer(3) the parameters
/// (long, scatter_params), buffer(4) the fault record; mean: buffer(5) a count per element of out
/// (zeroed, laid out as out).
template <prim::scatter_op Op, std::size_t R, class T, class I = std::int64_t>
const kernel_source& scatter_kernel() {
  static const kernel_source k = [] {
    using namespace indexing_detail;
    check_types<T, I>();
    check_scatter_type<T>();
    static_assert(R >= 1);
    constexpr bool mean = Op == prim::scatter_op::mean, reduces = Op != prim::scatter_op::replace;
    constexpr std::size_t f = scatter_fixed;
    const std::string t(msl_type<T>()), R_ = std::to_string(R);
    kernel_source out;
    out.description = std::string(prim::scatter_<0, Op>::name) + " of " + words<T>() + " by " + words<I>() +
                      " indices along one dim of rank-" + R_ + " views, a thread per fiber";
    out.name = kernel_name("tenet_" + std::string(prim::scatter_<0, Op>::name), out.description);
    std::string s = scatter_signature<T, I>(out.name, false, mean);
    s += "  if (long(gid) >= p[0]) return;\n";
    s += "  const long len = p[1], n = p[2], d = p[3];\n";
    s += split(R, "long(gid)", f, "", {"oo", "io", "so"}, {f + R, f + 2 * R, f + 3 * R}, {false, false, false});
    s += "  const long osd = p[" + std::to_string(f + R) + " + d], isd = p[" + std::to_string(f + 2 * R) + " + d], ssd = p[" +
         std::to_string(f + 3 * R) + " + d];\n";
    s += "  // every index of the fiber first: a bad one leaves the fiber unwritten (as the CPU)\n";
    s += "  for (long j = 0; j < len; ++j) {\n";
    s += "    const long v = long(idx[io + j * isd]);\n";
    s += "    if (v < 0 || v >= n) {\n      tenet_index_fault(fault, v);\n      return;\n    }\n  }\n";
    if (reduces) {
      s += "  if (p[4] == 0)  // include_self false: a position that receives a value starts from the identity\n";
      s += "    for (long j = 0; j < len; ++j) out[oo + long(idx[io + j * isd]) * osd] = " + identity<Op, T>() + ";\n";
    }
    s += "  for (long j = 0; j < len; ++j) {\n";
    s += "    const long at = oo + long(idx[io + j * isd]) * osd;\n";
    s += "    const " + t + " old = out[at];\n";
    s += "    out[at] = " + combine<Op, T>("old", "src[so + j * ssd]") + ";\n";
    if (mean) s += "    count[at] += 1;\n";
    s += "  }\n";
    if (mean) {
      s += "  // each position once: divided by its count (+1 for self), the count then cleared\n";
      s += "  for (long j = 0; j < len; ++j) {\n";
      s += "    const long at = oo + long(idx[io + j * isd]) * osd;\n";
      s += "    const long c = count[at];\n";
      s += "    if (c == 0) continue;\n";
      s += "    const " + t + " sum = out[at];\n";
      if constexpr (std::is_same_v<T, std::int32_t>) s += "    out[at] = tenet_floor_div_count(sum, int(c + p[4]));\n";
      else if constexpr (std::is_same_v<T, float>) s += "    out[at] = sum / float(c + p[4]);\n";
      else s += "    out[at] = " + t + "(float(sum) / float(c + p[4]));\n";
      s += "    count[at] = 0;\n";
      s += "  }\n";
    }
    s += "}\n";
    out.source = kernel_file(out.name, out.description, std::string(index_helpers) + s);
    return out;
  }();
  return k;
}

/// scatter_add (sum, include_self) with atomics: a thread per index element (float32, int32).
/// The argument table of scatter_kernel<sum>.
template <std::size_t R, class T, class I = std::int64_t>
const kernel_source& scatter_add_atomic_kernel() {
  static const kernel_source k = [] {
    using namespace indexing_detail;
    check_types<T, I>();
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, std::int32_t>,
                  "tenet: Metal's atomic adds on device memory take float32 and int32");
    constexpr std::size_t f = scatter_fixed;
    kernel_source out;
    out.description = "scatter_sum of " + words<T>() + " by " + words<I>() + " indices along one dim of rank-" + std::to_string(R) +
                      " views, a thread per index element, atomic adds";
    out.name = kernel_name("tenet_scatter_add_atomic", out.description);
    std::string s = scatter_signature<T, I>(out.name, true, false);
    s += "  const long len = p[1], n = p[2], d = p[3];\n";
    s += "  if (long(gid) >= p[0] * len) return;\n";
    s += split(R, "long(gid)", f, "len", {"oo", "io", "so"}, {f + R, f + 2 * R, f + 3 * R}, {true, false, false});
    s += "  const long v = long(idx[io]);\n";
    s += "  if (v < 0 || v >= n) {\n    tenet_index_fault(fault, v);\n    return;\n  }\n";
    s += "  atomic_fetch_add_explicit(out + (oo + v * p[" + std::to_string(f + R) + " + d]), src[so], memory_order_relaxed);\n";
    s += "}\n";
    out.source = kernel_file(out.name, out.description, std::string(index_helpers) + s);
    return out;
  }();
  return k;
}

/// The parameters of the scatter kernels for scatter(out, d, idx, src): the fibers, idx.size(d),
/// out.size(d), d, include_self, then idx's sizes with 1 at d, out's, idx's and src's strides (src
/// a single value: strides 0).
template <class T, class SO, class I, class SI, class SS>
std::vector<std::int64_t> scatter_params(const Tensor<T, SO>& out, const Tensor<I, SI>& idx, const Tensor<T, SS>& src,
                                         std::size_t d, bool include_self) {
  constexpr std::size_t R = SO::rank;
  std::int64_t fibers = 1;
  for (std::size_t k = 0; k < R; ++k)
    if (k != d) fibers *= idx.sizes()[k];
  std::vector<std::int64_t> p{fibers, idx.sizes()[d], out.sizes()[d], static_cast<std::int64_t>(d), include_self ? 1 : 0};
  for (std::size_t k = 0; k < R; ++k) p.push_back(k == d ? 1 : idx.sizes()[k]);
  for (std::size_t k = 0; k < R; ++k) p.push_back(out.strides()[k]);
  for (std::size_t k = 0; k < R; ++k) p.push_back(idx.strides()[k]);
  for (std::size_t k = 0; k < R; ++k) {
    if constexpr (SS::rank == R) p.push_back(src.strides()[k]);
    else p.push_back(0);
  }
  return p;
}

/// Whether scatter_add runs scatter_add_atomic_kernel: few fibers (under 4096) of at least 64
/// positions, where a thread per fiber leaves the GPU idle (as CUDA's choice).
inline bool scatter_uses_atomics(std::int64_t fibers, std::int64_t len) { return fibers < 4096 && len >= 64; }

}  // namespace tenet::detail::metal
