#pragma once
// The OpInfo-style table's driver: every op of tests/test_opinfo_*.cpp runs on each sample of its
// case in opinfo.txt (tests/reference/gen_opinfo.py): the edge values, a non-contiguous input, a
// broadcast (binary ops), an empty and a size-1 input, all with dyn dims. It checks the result
// dtype against PyTorch's, the values (NaN for NaN, infinities exactly, the sign of a zero result
// on the edge sample) and that the op's decomposition holds only prims. Every sample of every row
// but the float64 ones (compile_checked) also runs through tenet::compile (reduce_overhead: the
// memory-planned path, called twice) and must give the eager result bit for bit.
// Compiled by nvcc with TENET_OPINFO_ON_CUDA defined (tests/cuda/tu_opinfo_*.cu), the same rows
// run their samples on cuda(0) (the non-contiguous sample transposed there) and the results come
// back to the host for the same checks against PyTorch; the compile checks are the CPU's only.
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include <tenet/compile.hpp>
#include <tenet/decomp/prim_list.hpp>

#include "reference.hpp"

namespace tenet_test::opinfo {

inline constexpr const char* kFile = "opinfo.txt";
using tenet::dyn;
template <class T>
using mat = tenet::Tensor<T, tenet::shape<dyn, dyn>>;

#if defined(TENET_OPINFO_ON_CUDA)
inline constexpr bool on_cuda = true;
#else
inline constexpr bool on_cuda = false;
#endif
#if defined(TENET_OPINFO_HALF)
inline constexpr bool half_rows = true;
#else
inline constexpr bool half_rows = false;
#endif
template <class T>
inline constexpr bool is_half = std::is_same_v<T, tenet::bfloat16> || std::is_same_v<T, tenet::float16>;
/// On CUDA the float32 rows run (the other dtypes' rows take the same kernels with another
/// element type; compiling them too cost about 7 CPU minutes and 9 GB per translation unit).
/// With TENET_OPINFO_HALF (the CUDA program tenet_cuda_opinfo_half_tests) the bfloat16 and
/// float16 rows run instead, against opinfo_half.txt (tests/reference/gen_opinfo_half.py: PyTorch
/// on CUDA); the CPU does not run them.
template <class T>
inline constexpr bool row_runs = half_rows ? on_cuda && is_half<T> : !is_half<T> && (!on_cuda || std::is_same_v<T, float>);
/// The reference file of T's rows.
template <class T>
const char* file_for() {
  return is_half<T> ? "opinfo_half.txt" : kFile;
}
/// A sample on the device the rows run on.
template <class T>
mat<T> place(const mat<T>& t) {
  if constexpr (on_cuda)
    return t.to(tenet::cuda(0));
  else
    return t;
}
/// A result on the host, for the checks.
template <class R>
mat<R> host(const mat<R>& t) {
  if constexpr (on_cuda)
    return t.cpu();
  else
    return t;
}

/// Tolerances of one row: (rtol, atol) for float32; float64 uses the defaults.
struct tol {
  double rtol = 1.3e-6, atol = 1e-5;
};

template <class T>
const char* dtype_name() {
  return tenet::name(tenet::dtype_of<T>);
}

/// Deliberate differences from PyTorch (docs/design.md): the element of a sample where tenet gives
/// the mathematical value and torch's kernel does not. The test checks that torch's value is still
/// the one named here, then skips the element.
struct known_difference {
  const char* case_name;
  const char* sample;
  std::size_t element;
  double torch_value;
  const char* why;
};
inline const known_difference known_differences[] = {
    {"gelu_float32", "out_edge", 12, NAN, "gelu(+inf) is +inf; torch's float32 kernel gives nan"},
    {"fmod_float32", "out_edge", 152, NAN, "fmod(1e30, 1e-30) is finite; torch's float32 kernel overflows a / b"},
    {"fmod_float32", "out_edge", 168, NAN, "fmod(-1e30, 1e-30) is finite; torch's float32 kernel overflows a / b"},
    {"remainder_float32", "out_edge", 152, NAN, "as fmod"},
    {"remainder_float32", "out_edge", 168, NAN, "as fmod"},
};

/// On CUDA only: the scan kernels add a line in a tree order, not left to right. In cumsum's edge
/// sample (..., 1.45 so far, 1e-30, 1e30, -1e30, 88.5, ...) the pair 1e30 + -1e30 cancels before
/// the prefix is added, which gives the exact sums 1.45 and 89.95 where torch's left-to-right sum
/// loses the prefix to 1e30 and gives 0 and 88.5.
inline const known_difference known_differences_cuda[] = {
    {"cumsum_dim1_float32", "out_edge", 10, 0.0, "the scan's tree order keeps the prefix 1.45 (exact)"},
    {"cumsum_dim1_float32", "out_edge", 11, 88.5, "the scan's tree order keeps the prefix 1.45 (exact)"},
    {"cumsum_dim1_bfloat16", "out_edge", 10, 0.0, "the scan's tree order keeps the prefix 1.45 (exact)"},
    {"cumsum_dim1_bfloat16", "out_edge", 11, 88.5, "the scan's tree order keeps the prefix 1.45 (exact)"},
    // tenet's scans add in float32 and round each output once; torch's float16 CUDA scan does not:
    // -2.59375 is the exact sum -2.59314 rounded to float16, torch gives -2.58984 (two ulps off)
    {"cumsum_dim1_float16", "out_nc", 4, -2.58984375, "float32 accumulation: the exact sum, rounded once"},
    {"cumsum_dim1_float16", "out_nc", 14, -0.115234375, "float32 accumulation: the exact sum, rounded once"},
};

template <class R>
void check_sample(const std::string& case_name, const char* sample, const mat<R>& got, ref_tensor want, tol t,
                  bool zero_signs) {
  REQUIRE(std::string(dtype_name<R>()) == want.dtype);
  const auto c = got.contiguous();
  auto skip = [&](const known_difference& k) {
    if (case_name != k.case_name || std::string(sample) != k.sample) return;
    INFO("known difference: " << k.why);
    REQUIRE(k.element < want.values.size());
    const double w = want.values[k.element];
    CHECK((std::isnan(k.torch_value) ? std::isnan(w) : w == k.torch_value));
    want.values[k.element] = static_cast<double>(c.data()[k.element]);
  };
  for (const auto& k : known_differences) skip(k);
  if constexpr (on_cuda)
    for (const auto& k : known_differences_cuda) skip(k);
  if constexpr (std::is_same_v<R, float>) check_close(got, want, t.rtol, t.atol);
  else check_close(got, want);
  if constexpr (std::is_floating_point_v<R>) {
    if (!zero_signs) return;
    for (std::int64_t i = 0; i < want.numel(); ++i) {
      const double w = want.values[static_cast<std::size_t>(i)];
      if (w == 0 && c.data()[i] == 0) {
        INFO("element " << i << ": the sign of zero");
        CHECK(std::signbit(static_cast<double>(c.data()[i])) == std::signbit(w));
      }
    }
  }
}

/// Which rows also run through tenet::compile: all but the float64 ones. Every op has a float32
/// row, which takes the same scheduler paths; compiling the check once more per op for float64
/// cost about a tenth of each opinfo file's compile time.
template <class T>
inline constexpr bool compile_checked = !on_cuda && !std::is_same_v<T, double>;

/// The compiled function's result equals the eager one bit for bit (NaN payloads included).
template <class R, class F, class... X>
void check_compiled(F f, const mat<R>& eager, const X&... x) {
  auto cf = tenet::compile(f, {.mode = tenet::compile_mode::reduce_overhead});
  for (int call = 0; call < 2; ++call) {
    const mat<R> y = cf(x...);
    REQUIRE(y.sizes() == eager.sizes());
    const auto a = y.contiguous();
    const auto b = eager.contiguous();
    INFO("compiled call " << call);
    CHECK(std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.numel()) * sizeof(R)) == 0);
  }
}

template <class E>
void check_prims_only() {
  static_assert(tenet::detail::holds_only_listed_prims<tenet::decompose_t<E>>(),
                "the decomposition left an op that is not in the prim list");
}

template <class T, class F>
void unary_row(const std::string& op, F f, tol t) {
  const std::string name = op + "_" + dtype_name<T>();
  INFO("opinfo case " << name);
  const auto& c = get_case(file_for<T>(), name);
  using R = tenet::value_type_of<decltype(f(std::declval<mat<T>>()))>;
  check_prims_only<decltype(f(std::declval<mat<T>>()))>();
  auto run = [&](const mat<T>& x, const char* out, bool signs) {
    INFO("sample " << out);
    const mat<R> y = f(x);
    check_sample<R>(name, out, host(y), c.at(out), t, signs);
    if constexpr (compile_checked<T>) check_compiled<R>(f, y, x);
  };
  auto m = [&](const char* k) { return place(make<T, tenet::shape<dyn, dyn>>(c.at(k))); };
  run(m("x_edge"), "out_edge", true);
  run(m("x_nc").template transpose<0, 1>(), "out_nc", false);
  run(m("x_empty"), "out_empty", false);
  run(m("x_one"), "out_one", false);
}

template <class T, class F>
void binary_row(const std::string& op, F f, tol t) {
  const std::string name = op + "_" + dtype_name<T>();
  INFO("opinfo case " << name);
  const auto& c = get_case(file_for<T>(), name);
  using R = tenet::value_type_of<decltype(f(std::declval<mat<T>>(), std::declval<mat<T>>()))>;
  check_prims_only<decltype(f(std::declval<mat<T>>(), std::declval<mat<T>>()))>();
  auto run = [&](const mat<T>& a, const mat<T>& b, const char* out, bool signs) {
    INFO("sample " << out);
    const mat<R> y = f(a, b);
    check_sample<R>(name, out, host(y), c.at(out), t, signs);
    if constexpr (compile_checked<T>) check_compiled<R>(f, y, a, b);
  };
  auto m = [&](const char* k) { return place(make<T, tenet::shape<dyn, dyn>>(c.at(k))); };
  // torch's maximum/minimum give either operand on a 0.0 / -0.0 tie depending on the kernel it
  // picks (contiguous: the first; broadcast: the second); tenet gives the first, as fmax and relu
  const bool signs = op != "maximum" && op != "minimum";
  run(m("a_edge"), m("b_edge"), "out_edge", signs);
  run(m("a_nc").template transpose<0, 1>(), m("b_nc"), "out_nc", false);
  run(m("a_bc"), m("b_bc"), "out_bc", false);
  run(m("a_empty"), m("b_empty"), "out_empty", false);
}

/// One row of the table: op's case for dtype T (a row that does not run on this device is skipped).
template <class T, class F>
void unary(const std::string& op, F f, tol t = {}) {
  if constexpr (row_runs<T>) unary_row<T>(op, f, t);
}
template <class T, class F>
void binary(const std::string& op, F f, tol t = {}) {
  if constexpr (row_runs<T>) binary_row<T>(op, f, t);
}

}  // namespace tenet_test::opinfo

/// One table row: the op's name in opinfo.txt and a call of the tenet function of that name.
#define OPINFO_FN1(NAME) [](const auto& x) { return tenet::NAME(x); }
#define OPINFO_FN2(NAME) [](const auto& a, const auto& b) { return tenet::NAME(a, b); }
