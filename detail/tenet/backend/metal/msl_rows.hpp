#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The Metal row kernels (docs/metal.md): a reduction (sum or amax), softmax, log_softmax,
// layer_norm and rms_norm over the last dim, one threadgroup
// per row, threads strided over the row, partials combined by simdgroup operations and then across
// the simdgroups through threadgroup memory (one float per simdgroup) - the shape of
// backend/cuda/reduce.cuh's and row_kernels.cuh's block reductions with simdgroups for warps.
//
// float32, float16 and bfloat16 (16-bit elements computed in float, the result rounded once).
// The input is any strided view. Its elements split into rows and columns: a row is an index over
// the `Outer` leading dims, a column an index over the `Inner` trailing ones (a reduction over the
// last dim: Outer = rank - 1, Inner = 1; over every dim: Outer = 0, Inner = rank). The output is
// contiguous, one value per row (reductions) or the input's shape (softmax).
//
// Argument table: buffer(0) out, buffer(1) in, buffer(2) the parameters (long):
//   p[0] rows, p[1] columns, then Outer sizes, Outer strides, Inner sizes, Inner strides
// and threadgroup(0): one float per simdgroup. Threads per threadgroup: a multiple of 32 (every
// simdgroup full: the shuffle reductions read all 32 lanes).
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <tenet/backend/metal/msl_common.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::metal {

enum class row_reduction { sum, amax };

/// The shuffle reduction helpers of the row kernels: NaN-propagating max (MSL leaves simd_max's
/// NaN handling open), a simdgroup max by shuffles down, the result broadcast from lane 0.
inline constexpr std::string_view row_helpers = R"(#ifndef TENET_MSL_ROW_HELPERS
#define TENET_MSL_ROW_HELPERS
inline float tenet_max_nan(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? b : a)); }
inline float tenet_simd_max_nan(float x) {
  for (ushort d = 16; d > 0; d /= 2) x = tenet_max_nan(x, simd_shuffle_down(x, d));
  return simd_broadcast(x, 0);
}
#endif
)";

/// How a row kernel reads and writes elements of type T: float32 as is; float16 / bfloat16 stored
/// as half / bfloat and computed in float (loads widen, the result rounds once when stored).
template <class T>
struct row_element {
  static_assert(std::is_same_v<T, float> || half_precision<T>, "tenet: the Metal row kernels take float32, float16 and bfloat16");
  static std::string type() { return std::string(msl_type<T>()); }
  static std::string load(const std::string& e) { return half_precision<T> ? "float(" + e + ")" : e; }
  static std::string store(const std::string& e) { return half_precision<T> ? type() + "(" + e + ")" : e; }
  static std::string words() {
    if constexpr (std::is_same_v<T, float>) return "float32";
    else if constexpr (std::is_same_v<T, float16>) return "float16";
    else return "bfloat16";
  }
};

/// The barrier after the last read of `part` in a threadgroup reduction, before `part` is written
/// again (tests/metal/msl_generate.cpp removes it from softmax for its negative control).
inline constexpr std::string_view reuse_barrier_line =
    "  threadgroup_barrier(mem_flags::mem_threadgroup);  // every thread has read part before it is reused\n";

namespace rows_detail {
/// Statements computing `var`, the offset of index `idx` over `dims` dims whose sizes start at
/// p[sizes_at] and strides at p[strides_at].
inline std::string offset_of(const std::string& var, const std::string& idx, std::size_t dims, std::size_t sizes_at,
                             std::size_t strides_at, const std::string& indent) {
  std::string s = indent + "long " + var + " = 0;\n";
  if (dims == 0) return s;
  s += indent + "{\n" + indent + "  long rem = " + idx + ";\n";
  for (std::size_t d = dims; d-- > 0;) {
    const std::string sz = "p[" + std::to_string(sizes_at + d) + "]", st = "p[" + std::to_string(strides_at + d) + "]";
    if (d > 0)
      s += indent + "  " + var + " += (rem % " + sz + ") * " + st + ";\n" + indent + "  rem /= " + sz + ";\n";
    else
      s += indent + "  " + var + " += rem * " + st + ";\n";
  }
  return s + indent + "}\n";
}
/// The statements that combine `var`, a float every thread of the threadgroup holds, by `op` over
/// the threadgroup, leaving the result in a new float `result` that every thread holds: within
/// each simdgroup (simd_sum, or a NaN-propagating max by shuffles), then across the simdgroups
/// through `part` (one float per simdgroup; the kernel declares `groups`, the number of
/// simdgroups). With `reuse_barrier`, a closing barrier lets the caller write `part` again (every
/// thread has read it first). Every reduction of the row kernels across a threadgroup is this.
inline std::string threadgroup_reduce(row_reduction op, const std::string& var, const std::string& result, bool reuse_barrier) {
  const bool sum = op == row_reduction::sum;
  std::string s = "  " + var + (sum ? " = simd_sum(" : " = tenet_simd_max_nan(") + var + ");\n";
  s += "  if (lane == 0) part[sg] = " + var + ";\n";
  s += "  threadgroup_barrier(mem_flags::mem_threadgroup);\n";
  if (sum) {
    s += "  float " + result + " = 0.0f;\n";
    s += "  for (uint k = 0; k < groups; ++k) " + result + " += part[k];\n";
  } else {
    s += "  float " + result + " = part[0];\n";
    s += "  for (uint k = 1; k < groups; ++k) " + result + " = tenet_max_nan(" + result + ", part[k]);\n";
  }
  if (reuse_barrier) s += std::string(reuse_barrier_line);
  return s;
}

template <class T>
std::string signature(const std::string& name) {
  const std::string t = row_element<T>::type();
  return "[[kernel]] void " + name +
         "(\n"
         "    tenet_buffer<" + t + "> out [[buffer(0)]],\n"
         "    tenet_buffer<const " + t + "> in [[buffer(1)]],\n"
         "    tenet_buffer<const long> p [[buffer(2)]],\n"
         "    tenet_threadgroup<float> part [[threadgroup(0)]],\n" +
         std::string(builtin_parameters) + ") {\n  (void)gid;\n";
}
}  // namespace rows_detail

/// sum or amax of each row of a view of T (Outer row dims, Inner column dims), accumulated in
/// float.
template <row_reduction Op, std::size_t Outer, std::size_t Inner, class T = float>
const kernel_source& reduce_kernel() {
  static const kernel_source k = [] {
    static_assert(Inner >= 1);
    using rows_detail::offset_of;
    using io = row_element<T>;
    constexpr bool sum = Op == row_reduction::sum;
    kernel_source out;
    out.description = std::string(sum ? "sum" : "amax") + " of " + io::words() + " rows: " + std::to_string(Outer) + " row dims, " +
                      std::to_string(Inner) + " column dims";
    out.name = kernel_name(sum ? "tenet_sum" : "tenet_amax", out.description);
    const std::size_t osz = 2, ost = 2 + Outer, isz = 2 + 2 * Outer, ist = 2 + 2 * Outer + Inner;
    const std::string init = sum ? "0.0f" : "-INFINITY";
    std::string s = rows_detail::signature<T>(out.name);
    s += "  const long row = long(tgid);\n";
    s += "  const uint groups = (tgsize + 31) / 32;\n";
    s += offset_of("base", "row", Outer, osz, ost, "  ");
    s += "  float acc = " + init + ";\n";
    s += "  for (long j = long(lid); j < p[1]; j += long(tgsize)) {\n";
    s += offset_of("off", "j", Inner, isz, ist, "    ");
    s += sum ? "    acc += " + io::load("in[base + off]") + ";\n" : "    acc = tenet_max_nan(acc, " + io::load("in[base + off]") + ");\n";
    s += "  }\n";
    s += "  // within each simdgroup, then across the simdgroups through threadgroup memory\n";
    s += rows_detail::threadgroup_reduce(Op, "acc", "total", false);
    s += "  if (lid == 0) out[row] = " + io::store("total") + ";\n";
    s += "}\n";
    out.source = kernel_file(out.name, out.description, std::string(row_helpers) + s);
    return out;
  }();
  return k;
}

/// softmax (Log: log_softmax) over the last dim of a float32 view of rank Outer + 1, into a
/// contiguous output: exp(x - max) / sum(exp(x - max)) (log: x - max - log(sum)), the max
/// NaN-propagating (a NaN row gives NaNs, as the CPU).
template <std::size_t Outer, bool Log = false, class T = float>
const kernel_source& softmax_kernel() {
  static const kernel_source k = [] {
    using rows_detail::offset_of;
    using io = row_element<T>;
    const std::string x = io::load("in[base + j * cs]");
    kernel_source out;
    out.description = std::string(Log ? "log_softmax" : "softmax") + " over the last dim of " + io::words() + " rows: " +
                      std::to_string(Outer) + " row dims";
    out.name = kernel_name(Log ? "tenet_log_softmax" : "tenet_softmax", out.description);
    const std::size_t osz = 2, ost = 2 + Outer, ist = 2 + 2 * Outer + 1;  // one column dim
    std::string s = rows_detail::signature<T>(out.name);
    s += "  const long row = long(tgid), cols = p[1], cs = p[" + std::to_string(ist) + "];\n";
    s += offset_of("base", "row", Outer, osz, ost, "  ");
    s += "  const uint groups = (tgsize + 31) / 32;\n";
    s += "  // the row's max\n";
    s += "  float m = -INFINITY;\n";
    s += "  for (long j = long(lid); j < cols; j += long(tgsize)) m = tenet_max_nan(m, " + x + ");\n";
    s += rows_detail::threadgroup_reduce(row_reduction::amax, "m", "mx", true);
    s += "  // the sum of exp(x - max)\n";
    s += "  float sum = 0.0f;\n";
    s += "  for (long j = long(lid); j < cols; j += long(tgsize)) sum += metal::precise::exp(" + x + " - mx);\n";
    s += rows_detail::threadgroup_reduce(row_reduction::sum, "sum", "total", false);
    s += "  for (long j = long(lid); j < cols; j += long(tgsize))\n";
    s += Log ? "    out[row * cols + j] = " + io::store(x + " - mx - metal::precise::log(total)") + ";\n"
             : "    out[row * cols + j] = " + io::store("metal::precise::exp(" + x + " - mx) / total") + ";\n";
    s += "}\n";
    out.source = kernel_file(out.name, out.description, std::string(row_helpers) + s);
    return out;
  }();
  return k;
}

/// layer_norm (Rms: rms_norm) over the last dim of a float32 view of rank Outer + 1 with a weight
/// (and for layer_norm a bias) over that dim, contiguous, into a contiguous output:
///   layer_norm: (x - mean) / sqrt(var + eps) * w + b, var the biased variance by two passes;
///   rms_norm:   x / sqrt(mean(x^2) + eps) * w.
/// Argument table: buffer(0) out, buffer(1) in, buffer(2) weight, layer_norm: buffer(3) bias;
/// then the row parameters with eps's float bits appended; threadgroup(0).
template <std::size_t Outer, bool Rms = false, class T = float>
const kernel_source& layer_norm_kernel() {
  static const kernel_source k = [] {
    using rows_detail::offset_of;
    using io = row_element<T>;
    const std::string t = io::type(), x = io::load("in[base + j * cs]");
    kernel_source out;
    out.description = std::string(Rms ? "rms_norm" : "layer_norm") + " over the last dim of " + io::words() + " rows: " +
                      std::to_string(Outer) + " row dims";
    out.name = kernel_name(Rms ? "tenet_rms_norm" : "tenet_layer_norm", out.description);
    const std::size_t osz = 2, ost = 2 + Outer, ist = 2 + 2 * Outer + 1, eps_at = ist + 1;
    std::string s = "[[kernel]] void " + out.name +
                    "(\n"
                    "    tenet_buffer<" + t + "> out [[buffer(0)]],\n"
                    "    tenet_buffer<const " + t + "> in [[buffer(1)]],\n"
                    "    tenet_buffer<const " + t + "> weight [[buffer(2)]],\n";
    s += Rms ? "    tenet_buffer<const long> p [[buffer(3)]],\n"
             : "    tenet_buffer<const " + t + "> bias [[buffer(3)]],\n    tenet_buffer<const long> p [[buffer(4)]],\n";
    s += "    tenet_threadgroup<float> part [[threadgroup(0)]],\n" + std::string(builtin_parameters) + ") {\n  (void)gid;\n";
    s += "  const long row = long(tgid), cols = p[1], cs = p[" + std::to_string(ist) + "];\n";
    s += "  const float eps = as_type<float>(int(p[" + std::to_string(eps_at) + "]));\n";
    s += offset_of("base", "row", Outer, osz, ost, "  ");
    s += "  const uint groups = (tgsize + 31) / 32;\n";
    if constexpr (!Rms) {
      s += "  // the mean\n";
      s += "  float sum = 0.0f;\n";
      s += "  for (long j = long(lid); j < cols; j += long(tgsize)) sum += " + x + ";\n";
      s += rows_detail::threadgroup_reduce(row_reduction::sum, "sum", "total", true);
      s += "  const float mean = total / float(cols);\n";
      s += "  // the variance about it\n";
    } else {
      s += "  const float mean = 0.0f;  // rms_norm: the mean square\n";
    }
    s += "  float sq = 0.0f;\n";
    s += "  for (long j = long(lid); j < cols; j += long(tgsize)) {\n";
    s += "    const float d = " + x + " - mean;\n";
    s += "    sq += d * d;\n";
    s += "  }\n";
    s += rows_detail::threadgroup_reduce(row_reduction::sum, "sq", "var", false);
    s += "  const float rstd = 1.0f / metal::precise::sqrt(var / float(cols) + eps);\n";
    s += "  for (long j = long(lid); j < cols; j += long(tgsize))\n";
    s += Rms ? "    out[row * cols + j] = " + io::store(x + " * rstd * " + io::load("weight[j]")) + ";\n"
             : "    out[row * cols + j] = " + io::store("(" + x + " - mean) * rstd * " + io::load("weight[j]") + " + " + io::load("bias[j]")) + ";\n";
    s += "}\n";
    out.source = kernel_file(out.name, out.description, s);
    return out;
  }();
  return k;
}

/// The parameters of a row kernel over view t, its first `outer` dims the rows, the rest the
/// columns.
template <class T, class S>
std::vector<std::int64_t> row_params(const Tensor<T, S>& t, std::size_t outer) {
  std::int64_t rows = 1, cols = 1;
  for (std::size_t d = 0; d < S::rank; ++d) (d < outer ? rows : cols) *= t.sizes()[d];
  std::vector<std::int64_t> p{rows, cols};
  for (std::size_t d = 0; d < outer; ++d) p.push_back(t.sizes()[d]);
  for (std::size_t d = 0; d < outer; ++d) p.push_back(t.strides()[d]);
  for (std::size_t d = outer; d < S::rank; ++d) p.push_back(t.sizes()[d]);
  for (std::size_t d = outer; d < S::rank; ++d) p.push_back(t.strides()[d]);
  return p;
}

/// Threads per threadgroup for rows of `cols` columns: a multiple of 32, at most 256.
inline std::uint32_t row_threads(std::int64_t cols) {
  std::uint32_t t = 32;
  while (t < 256 && t < cols) t *= 2;
  return t;
}

}  // namespace tenet::detail::metal
