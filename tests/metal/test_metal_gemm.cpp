// The generated GEMM on simdgroup matrices (msl_gemm.hpp, docs/metal.md), run in the emulator and
// checked against the CPU backend: ragged M, N and K (1, below, at and past the 32 x 32 tile and
// the step of 16), K = 0, transposed operands, a strided output, each epilogue (bias, relu,
// tanh-GELU) on float32, float16 and bfloat16. msl_generate.cpp writes these kernels into
// kernels_gemm.inc / registry_gemm.inc.
//
// Tolerance: float32 within the bound of float summation in any order, 2 K eps (|A| |B|)_ij (the
// CPU's GEMM adds in another order); 16-bit operands against the CPU's float32 GEMM and epilogue
// on the same values, rounded once to the 16-bit type (the kernel's semantics), within one unit of
// its last place and the same bound.
#include "metal_cases.hpp"
#include "kernel_harness.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#if !defined(TENET_METAL_ON_DEVICE)
#include "msl_shim.hpp"
#include "kernels_gemm.inc"
#undef device
#undef constant
#undef thread
#endif

namespace {

using namespace tenet_metal_harness;
using sizes2 = tenet::sizes_t<2>;
using ep = m::gemm_epilogue;
template <class T>
using Mat = Tensor<T, shape<dyn, dyn>>;
template <class T>
using Vec = Tensor<T, shape<dyn>>;

#if defined(TENET_METAL_ON_DEVICE)
void launch(const m::kernel_source& k, std::uint32_t groups, std::uint32_t threads, const std::vector<arg>& args) {
  launch_on_device(k, groups, threads, args);
}
#else
const kernel_entry registry[] = {
#include "registry_gemm.inc"
};
void launch(const m::kernel_source& k, std::uint32_t groups, std::uint32_t threads, const std::vector<arg>& args) {
  launch_emulated(registry, k, groups, threads, args);
}
#endif

/// out = epilogue(a b + bias) by the generated kernel.
template <ep Ep, class T, class SO, class SA, class SB>
void run_gemm(const Tensor<T, SO>& out, const Tensor<T, SA>& a, const Tensor<T, SB>& b, const Vec<T>* bias) {
  const std::vector<std::int64_t> params = m::gemm_params(out, a, b, bias ? bias->strides()[0] : 0);
  const std::int64_t tiles = m::gemm_tiles(params[0], params[1]);
  if (tiles == 0) return;
  std::vector<arg> args{as_arg(out), as_arg(a), as_arg(b)};
  if (bias) args.push_back(as_arg(*bias));
  args.push_back(as_arg(params));
  for (const std::size_t bytes : m::gemm_threadgroup_bytes) args.push_back(arg{nullptr, bytes, true});
  launch(m::gemm_kernel<T, Ep>(), static_cast<std::uint32_t>(tiles), m::gemm_threads, args);
}

/// The CPU's epilogue(a b + bias) in float32.
template <ep Ep, class SA, class SB>
Mat<float> cpu_reference(const Tensor<float, SA>& a, const Tensor<float, SB>& b, const Vec<float>& bias) {
  const Mat<float> prod = tenet::matmul(a, b);
  if constexpr (Ep == ep::none) return prod;
  else if constexpr (Ep == ep::bias) return prod + bias;
  else if constexpr (Ep == ep::bias_relu) return tenet::relu(prod + bias);
  else return tenet::gelu(prod + bias, tenet::approximate_tanh);
}

/// The kernel's epilogue(a b + bias) against the CPU (see the top of the file); also into a
/// transposed (strided) output.
template <ep Ep, class T, class SA, class SB>
void check_gemm(const std::string& what, const Tensor<T, SA>& a, const Tensor<T, SB>& b, std::uint64_t seed) {
  const std::int64_t M = a.sizes()[0], K = a.sizes()[1], N = b.sizes()[1];
  const Vec<T> bias = random_tensor<shape<dyn>, T>(tenet::sizes_t<1>{N}, seed);
  const Mat<float> af = a.template to<float>(), bf = b.template to<float>();
  const Mat<float> want_f = cpu_reference<Ep>(af, bf, Vec<float>(bias.template to<float>()));
  const Mat<T> want = want_f.template to<T>();
  // float summation's bound, scaled by the epilogue's slope (tanh-GELU's is below 1.13)
  const Mat<float> abs_prod = tenet::matmul(tenet::abs(af), tenet::abs(bf));
  const auto ap = values_of(abs_prod);
  const double slope = Ep == ep::bias_gelu_tanh ? 1.13 : 1.0;
  const double rtol = std::is_same_v<T, float> ? (Ep == ep::bias_gelu_tanh ? 1e-6 : 0.0) : tolerance<T>().first;
  const std::string name = "GEMM " + what;

  const auto compare = [&](const auto& got, const std::string& where) {
    REQUIRE(got.sizes() == want.sizes());
    const auto g = values_of(got), w = values_of(want);
    int bad = 0;
    for (std::size_t i = 0; i < g.size() && bad < 5; ++i) {
      const double gi = static_cast<float>(g[i]), wi = static_cast<float>(w[i]);
      const double bound = slope * 2.0 * static_cast<double>(K) * 1.2e-7 * ap[i] + 1e-6 + rtol * std::abs(wi);
      const bool ok = std::isnan(wi) ? std::isnan(gi) : std::isinf(wi) ? gi == wi : std::abs(gi - wi) <= bound;
      if (!ok) {
        ++bad;
        FAIL_CHECK(name << where << ": element " << i << " (row " << static_cast<std::int64_t>(i) / N << "): emulated Metal kernel "
                        << gi << ", CPU " << wi << ", bound " << bound);
      }
    }
  };
  Mat<T> got(sizes2{M, N});
  run_gemm<Ep>(got, a, b, Ep == ep::none ? nullptr : &bias);
  compare(got, "");
  if (M > 0 && N > 0) {
    Mat<T> base(sizes2{N, M});
    const auto out = base.t();
    run_gemm<Ep>(out, a, b, Ep == ep::none ? nullptr : &bias);
    compare(out, ", transposed output");
  }
}

/// Ragged shapes and transposed operands for epilogue Ep on T.
template <ep Ep, class T>
void check_gemm_shapes(const std::string& dtype) {
  using S2 = shape<dyn, dyn>;
  auto r = [](std::int64_t m, std::int64_t n, std::uint64_t seed) { return random_tensor<S2, T>(sizes2{m, n}, seed); };
  check_gemm<Ep>(dtype + " 1x1x1", r(1, 1, 201), r(1, 1, 202), 203);
  check_gemm<Ep>(dtype + " 33x17, K 9", r(33, 9, 204), r(9, 17, 205), 206);
  check_gemm<Ep>(dtype + " 32x32, K 16 (one whole tile and step)", r(32, 16, 207), r(16, 32, 208), 209);
  check_gemm<Ep>(dtype + " 70x45, K 40, both transposed", r(40, 70, 210).t(), r(45, 40, 211).t(), 212);
  check_gemm<Ep>(dtype + " 5x40, K 0", Mat<T>(sizes2{5, 0}), Mat<T>(sizes2{0, 40}), 213);
}

}  // namespace

TEST_CASE("metal: the generated simdgroup_matrix GEMM equals the CPU backend on float32", "[metal]") {
  check_gemm_shapes<ep::none, float>("float32");
  check_gemm_shapes<ep::bias, float>("float32, + bias,");
  check_gemm_shapes<ep::bias_relu, float>("float32, + bias, relu,");
  check_gemm_shapes<ep::bias_gelu_tanh, float>("float32, + bias, tanh-GELU,");
  // a NaN and an infinity in A: the rows they touch (inf * 0 is NaN) as on the CPU
  auto a = random_tensor<shape<dyn, dyn>>(sizes2{9, 20}, 214);
  a.data()[3] = NAN;
  a.data()[20 * 4 + 7] = INFINITY;
  check_gemm<ep::bias_relu>("float32 with NaN and inf", a, random_tensor<shape<dyn, dyn>>(sizes2{20, 11}, 215), 216);
  // a narrowed A (row stride past its columns)
  check_gemm<ep::none>("float32, narrowed A", random_tensor<shape<dyn, dyn>>(sizes2{19, 30}, 217).narrow<1>(3, 21),
                       random_tensor<shape<dyn, dyn>>(sizes2{21, 35}, 218), 219);
}

TEST_CASE("metal: the generated simdgroup_matrix GEMM equals the CPU backend on float16 and bfloat16", "[metal]") {
  check_gemm_shapes<ep::none, tenet::float16>("float16");
  check_gemm_shapes<ep::bias_gelu_tanh, tenet::float16>("float16, + bias, tanh-GELU,");
  check_gemm_shapes<ep::none, tenet::bfloat16>("bfloat16");
  check_gemm_shapes<ep::bias_relu, tenet::bfloat16>("bfloat16, + bias, relu,");
}
