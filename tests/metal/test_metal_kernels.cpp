// The Metal kernels that tenet generates, run in the emulator and checked against the CPU backend
// (docs/metal.md). msl_generate.cpp wrote their MSL (generated/*.metal); this file includes every
// one through msl_shim.hpp, so each compiles as C++ here, and runs it on random inputs in several
// layouts: contiguous (with 0, -0, +-1, +-inf and NaN among the values), transposed and narrowed
// views, broadcasts over size-1 dims and over a missing leading dim, a 1 x 1 and empty tensors,
// and a strided output. Values must equal the CPU's within the tests' tolerance against PyTorch
// (reference.hpp: float32 rtol 1.3e-6, float16 1e-3, bfloat16 1.6e-2, atol 1e-5; NaN matches NaN,
// infinities exactly); bools exactly.
//
// Built with TENET_METAL_ON_DEVICE (tenet_metal_device_tests, Apple only, tests/metal/CMakeLists.txt)
// the same checks run each kernel on the GPU through the metal-cpp runtime instead of the emulator
// (not yet compiled: no Apple machine was at hand; docs/metal.md).
#if defined(TENET_METAL_ON_DEVICE)
// the same checks on an Apple GPU: kernels compiled by Metal from the generated source (Apple only);
// this unit holds metal-cpp's definitions
#define NS_PRIVATE_IMPLEMENTATION
#define MTL_PRIVATE_IMPLEMENTATION
#endif
#include "metal_cases.hpp"
#include "kernel_harness.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#if !defined(TENET_METAL_ON_DEVICE)
// the generated kernels, as C++
#include "msl_shim.hpp"
#include "kernels.inc"
#undef device
#undef constant
#undef thread
#endif

namespace {

using namespace tenet_metal_harness;
namespace c = tenet_metal_cases;

#if defined(TENET_METAL_ON_DEVICE)
void launch(const m::kernel_source& k, std::uint32_t groups, std::uint32_t threads, const std::vector<arg>& args) {
  launch_on_device(k, groups, threads, args);
}
#else
const kernel_entry registry[] = {
#include "registry.inc"
};

/// Kernel k in the emulator (it was generated and included above).
void launch(const m::kernel_source& k, std::uint32_t groups, std::uint32_t threads, const std::vector<arg>& args) {
  launch_emulated(registry, k, groups, threads, args);
}
#endif

/// out = tree, by the generated pointwise kernel (64 threads a threadgroup).
template <class Out, class S, class E>
void run_pointwise_emulated(const Tensor<Out, S>& out, const E& tree) {
  constexpr std::size_t R = S::rank == 0 ? 1 : S::rank;
  const m::kernel_source& k = m::pointwise_kernel<Out, R, E>();
  const m::pointwise_arguments args(out, tree);
  if (args.n == 0) return;
  std::vector<arg> b{as_arg(out)};
  for (const auto& in : args.inputs) b.push_back(as_arg(in));
  b.push_back(as_arg(args.params));
  const std::uint32_t threads = 64;
  launch(k, static_cast<std::uint32_t>((args.n + threads - 1) / threads), threads, b);
}

using sizes2 = tenet::sizes_t<2>;

/// Runs case C on operands made by `make` and compares with the CPU; `strided_out`: the kernel
/// writes into a transposed view.
template <class C, class... A>
void check_case(const std::string& layout, const A&... a) {
  auto e = C::make(a...);
  using R = tenet::value_type_of<decltype(e)>;
  using S = tenet::shape_of<decltype(e)>;
  const auto tree = tenet::detail::decompose<tenet::detail::reference_backend>(e);
  // float32: the CPU's own evaluation of the expression (its native composites included). 16-bit
  // operands: the CPU's evaluation of the same prim tree, since each prim rounds to 16 bits while
  // the CPU runs sigmoid, gelu ... natively in float and rounds once (docs/metal.md)
  using First = tenet::value_type_of<std::tuple_element_t<0, std::tuple<A...>>>;
  const Tensor<R, S> want = [&]() -> Tensor<R, S> {
    if constexpr (tenet::half_precision<First>) return tree;
    else return e;
  }();
  Tensor<R, S> got(want.sizes());
  run_pointwise_emulated(got, tree);
  check_equal(got, want, std::string(C::name) + ", " + layout);
  if constexpr (S::rank == 2) {  // a strided output: a transposed view
    if (want.numel() > 0) {
      Tensor<R, S> base(sizes2{want.sizes()[1], want.sizes()[0]});
      const auto out = base.t();
      run_pointwise_emulated(out, tree);
      check_equal(out, want, std::string(C::name) + ", " + layout + ", transposed output");
    }
  }
}

template <class C, class T = float>
void check_unary_case() {
  using X = Tensor<T, shape<dyn, dyn>>;
  check_case<C>("contiguous 5x7", random_tensor<shape<dyn, dyn>, T>(sizes2{5, 7}, 1, true));
  check_case<C>("transposed 6x4", random_tensor<shape<dyn, dyn>, T>(sizes2{4, 6}, 2).t());
  check_case<C>("narrowed 5x7 of 5x10", random_tensor<shape<dyn, dyn>, T>(sizes2{5, 10}, 3).template narrow<1>(2, 7));
  check_case<C>("1x1", random_tensor<shape<dyn, dyn>, T>(sizes2{1, 1}, 4));
  check_case<C>("empty 0x7", X(sizes2{0, 7}));
  check_case<C>("empty 3x0", X(sizes2{3, 0}));
}

template <class C, class T = float>
void check_binary_case() {
  using X = Tensor<T, shape<dyn, dyn>>;
  auto r = [](std::int64_t m, std::int64_t n, std::uint64_t seed, bool special = false) {
    return random_tensor<shape<dyn, dyn>, T>(sizes2{m, n}, seed, special);
  };
  check_case<C>("contiguous 5x7", r(5, 7, 1, true), r(5, 7, 2));
  check_case<C>("special values against each other", r(3, 3, 1, true), r(3, 3, 1, true).t());
  check_case<C>("transposed and narrowed", r(7, 5, 3).t(), r(5, 9, 4).template narrow<1>(1, 7));
  check_case<C>("broadcast 5x7 with 1x7", r(5, 7, 5), r(1, 7, 6));
  check_case<C>("broadcast 5x1 with 1x7", r(5, 1, 7), r(1, 7, 8));
  check_case<C>("1x1", r(1, 1, 9), r(1, 1, 10));
  check_case<C>("empty 0x7 with 1x7", X(sizes2{0, 7}), r(1, 7, 11));
  check_case<C>("empty 3x0", X(sizes2{3, 0}), X(sizes2{3, 0}));
}

template <class C>
void check_row_broadcast_case() {
  using V = c::row_operand;
  check_case<C>("5x7 with a row of 7", random_tensor<shape<dyn, dyn>>(sizes2{5, 7}, 12),
                random_tensor<shape<dyn>>(tenet::sizes_t<1>{7}, 13));
  check_case<C>("5x7 with a row of 1", random_tensor<shape<dyn, dyn>>(sizes2{5, 7}, 14),
                random_tensor<shape<dyn>>(tenet::sizes_t<1>{1}, 15));
  check_case<C>("empty 0x7 with a row of 7", c::operand(sizes2{0, 7}), random_tensor<shape<dyn>>(tenet::sizes_t<1>{7}, 16));
  (void)sizeof(V);
}

}  // namespace

TEST_CASE("metal: every generated pointwise kernel equals the CPU backend", "[metal]") {
  std::apply([](auto... k) { (check_unary_case<decltype(k)>(), ...); }, c::unary_cases{});
  std::apply([](auto... k) { (check_binary_case<decltype(k)>(), ...); }, c::binary_cases{});
  check_row_broadcast_case<c::add>();
  check_row_broadcast_case<c::gelu_of_sum>();
}

TEST_CASE("metal: generated pointwise kernels on int32 equal the CPU backend", "[metal]") {
  std::apply([](auto... k) { (check_unary_case<decltype(k), std::int32_t>(), ...); }, c::int_unary_cases{});
  std::apply([](auto... k) { (check_binary_case<decltype(k), std::int32_t>(), ...); }, c::int_binary_cases{});
}

TEST_CASE("metal: generated pointwise kernels on float16 and bfloat16 equal the CPU backend", "[metal]") {
  std::apply([](auto... k) { (check_unary_case<decltype(k), tenet::float16>(), ...); }, c::half_unary_cases{});
  std::apply([](auto... k) { (check_unary_case<decltype(k), tenet::bfloat16>(), ...); }, c::half_unary_cases{});
  std::apply([](auto... k) { (check_binary_case<decltype(k), tenet::float16>(), ...); }, c::half_binary_cases{});
  std::apply([](auto... k) { (check_binary_case<decltype(k), tenet::bfloat16>(), ...); }, c::half_binary_cases{});
}

namespace {

/// A row kernel over view x (its first `outer` dims the rows) into out (contiguous): one
/// threadgroup per row.
template <class T, class S, class O, class OS>
void run_rows_emulated(const m::kernel_source& k, const Tensor<O, OS>& out, const Tensor<T, S>& x, std::size_t outer) {
  const std::vector<std::int64_t> p = m::row_params(x, outer);
  if (p[0] == 0) return;
  const std::uint32_t threads = m::row_threads(p[1]);
  launch(k, static_cast<std::uint32_t>(p[0]), threads, {as_arg(out), as_arg(x), as_arg(p), arg{nullptr, threads / 32 * sizeof(float), true}});
}

/// |got - want| within the bound of float summation in any order: 2 (n - 1) eps sum |x|.
template <class S1, class S2>
void check_sums(const Tensor<float, S1>& got, const Tensor<float, S2>& want, const std::vector<double>& abs_sums,
                std::int64_t n, const std::string& what) {
  const auto g = values_of(got), w = values_of(want);
  REQUIRE(g.size() == w.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double bound = 2.0 * static_cast<double>(std::max<std::int64_t>(n - 1, 1)) * 1.2e-7 * abs_sums[i] + 1e-30;
    INFO(what << ": row " << i << ": emulated " << g[i] << ", CPU " << w[i] << ", bound " << bound);
    CHECK(std::abs(static_cast<double>(g[i]) - w[i]) <= bound);
  }
}

template <class S>
std::vector<double> row_abs_sums(const Tensor<float, S>& x) {
  const auto v = values_of(x);
  const std::int64_t cols = x.sizes()[S::rank - 1], rows = cols ? x.numel() / cols : 0;
  std::vector<double> s(static_cast<std::size_t>(std::max<std::int64_t>(rows, x.numel() == 0 ? x.sizes()[0] : rows)), 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) s[static_cast<std::size_t>(r)] += std::abs(v[static_cast<std::size_t>(r * cols + j)]);
  return s;
}

}  // namespace

TEST_CASE("metal: the generated sum and amax kernels equal the CPU backend", "[metal]") {
  using X = Tensor<float, shape<dyn, dyn>>;
  const auto sum_last = m::reduce_kernel<m::row_reduction::sum, 1, 1>();
  const auto sum_all = m::reduce_kernel<m::row_reduction::sum, 0, 2>();
  const auto max_last = m::reduce_kernel<m::row_reduction::amax, 1, 1>();
  const auto max_all = m::reduce_kernel<m::row_reduction::amax, 0, 2>();
  const std::vector<std::pair<std::string, X>> inputs{
      {"contiguous 6x300", random_tensor<shape<dyn, dyn>>(sizes2{6, 300}, 21)},
      {"transposed 37x41", random_tensor<shape<dyn, dyn>>(sizes2{41, 37}, 22).t()},
      {"narrowed 4x33 of 4x50", random_tensor<shape<dyn, dyn>>(sizes2{4, 50}, 23).template narrow<1>(5, 33)},
      {"1x1", random_tensor<shape<dyn, dyn>>(sizes2{1, 1}, 24)},
      {"3x5", random_tensor<shape<dyn, dyn>>(sizes2{3, 5}, 25)},
  };
  for (const auto& [what, x] : inputs) {
    const std::int64_t rows = x.sizes()[0], cols = x.sizes()[1];
    Tensor<float, shape<dyn>> s(tenet::sizes_t<1>{rows}), mx(tenet::sizes_t<1>{rows});
    run_rows_emulated(sum_last, s, x, 1);
    run_rows_emulated(max_last, mx, x, 1);
    const Tensor<float, shape<dyn>> want_s = tenet::sum<-1>(x), want_mx = tenet::amax<-1>(x);
    check_sums(s, want_s, row_abs_sums(x), cols, "sum over the last dim, " + what);
    check_equal(mx, want_mx, "amax over the last dim, " + what, 0.0, 0.0);

    Tensor<float, shape<>> all_s(tenet::sizes_t<0>{}), all_mx(tenet::sizes_t<0>{});
    run_rows_emulated(sum_all, all_s, x, 0);
    run_rows_emulated(max_all, all_mx, x, 0);
    const Tensor<float, shape<>> want_all_s = tenet::sum(x), want_all_mx = tenet::amax(x);
    double abs_total = 0;
    for (double v : row_abs_sums(x)) abs_total += v;
    check_sums(all_s, want_all_s, {abs_total}, x.numel(), "sum of all, " + what);
    check_equal(all_mx, want_all_mx, "amax of all, " + what, 0.0, 0.0);
  }
  // NaN propagates through amax; a row of no columns sums to 0; no rows run no threadgroup
  X nan_x = random_tensor<shape<dyn, dyn>>(sizes2{2, 70}, 26);
  nan_x.data()[70 + 45] = NAN;
  Tensor<float, shape<dyn>> mx(tenet::sizes_t<1>{2});
  run_rows_emulated(max_last, mx, nan_x, 1);
  CHECK(!std::isnan(mx.data()[0]));
  CHECK(std::isnan(mx.data()[1]));
  const X no_cols(sizes2{3, 0});
  Tensor<float, shape<dyn>> s0(tenet::sizes_t<1>{3});
  for (int i = 0; i < 3; ++i) s0.data()[i] = -1.0f;
  run_rows_emulated(sum_last, s0, no_cols, 1);
  CHECK(values_of(s0) == std::vector<float>{0.0f, 0.0f, 0.0f});
  const X no_rows(sizes2{0, 5});
  Tensor<float, shape<dyn>> none(tenet::sizes_t<1>{0});
  run_rows_emulated(sum_last, none, no_rows, 1);
}

TEST_CASE("metal: the generated softmax and log_softmax kernels equal the CPU backend", "[metal]") {
  const auto& k2 = m::softmax_kernel<1>();
  const auto& k3 = m::softmax_kernel<2>();
  using X = Tensor<float, shape<dyn, dyn>>;
  const std::vector<std::pair<std::string, X>> inputs{
      {"contiguous 4x300", random_tensor<shape<dyn, dyn>>(sizes2{4, 300}, 31)},
      {"transposed 9x40", random_tensor<shape<dyn, dyn>>(sizes2{40, 9}, 32).t()},
      {"1x1", random_tensor<shape<dyn, dyn>>(sizes2{1, 1}, 33)},
      {"3x5 with a NaN", random_tensor<shape<dyn, dyn>>(sizes2{3, 5}, 34, true)},
      {"empty 0x5", X(sizes2{0, 5})},
  };
  for (const auto& [what, x] : inputs) {
    const X want = tenet::softmax<-1>(x);
    X got(x.sizes());
    run_rows_emulated(k2, got, x, 1);
    check_equal(got, want, "softmax, " + what);
  }
  for (const auto& [what, x] : inputs) {
    const X want = tenet::log_softmax<-1>(x);
    X got(x.sizes());
    run_rows_emulated(m::softmax_kernel<1, true>(), got, x, 1);
    check_equal(got, want, "log_softmax, " + what);
  }
  using X3 = Tensor<float, shape<dyn, dyn, dyn>>;
  X3 base = random_tensor<shape<dyn, dyn, dyn>>(tenet::sizes_t<3>{3, 65, 4}, 35);
  const auto x3 = base.transpose(1, 2);  // 3 x 4 x 65, the last dim strided
  const X3 want = tenet::softmax<-1>(x3);
  X3 got(want.sizes());
  run_rows_emulated(k3, got, x3, 2);
  check_equal(got, want, "softmax, rank 3, transposed");
}

TEST_CASE("metal: the generated layer_norm and rms_norm kernels equal the CPU backend", "[metal]") {
  using X = Tensor<float, shape<dyn, dyn>>;
  using V = Tensor<float, shape<dyn>>;
  const std::vector<std::pair<std::string, X>> inputs{
      {"contiguous 4x300", random_tensor<shape<dyn, dyn>>(sizes2{4, 300}, 51)},
      {"transposed 9x40", random_tensor<shape<dyn, dyn>>(sizes2{40, 9}, 52).t()},
      {"1x1", random_tensor<shape<dyn, dyn>>(sizes2{1, 1}, 53)},
      {"empty 0x5", X(sizes2{0, 5})},
  };
  const double eps = 1e-5;
  for (const auto& [what, x] : inputs) {
    const std::int64_t cols = x.sizes()[1];
    const V w = random_tensor<shape<dyn>>(tenet::sizes_t<1>{cols}, 54), b = random_tensor<shape<dyn>>(tenet::sizes_t<1>{cols}, 55);
    const X want = tenet::layer_norm(x, w, b, eps);
    X got(x.sizes());
    std::vector<std::int64_t> p = m::row_params(x, 1);
    const float e = static_cast<float>(eps);
    std::uint32_t bits;
    std::memcpy(&bits, &e, sizeof bits);
    p.push_back(static_cast<std::int64_t>(bits));
    if (p[0] > 0) {
      const std::uint32_t threads = m::row_threads(p[1]);
      launch(m::layer_norm_kernel<1>(), static_cast<std::uint32_t>(p[0]), threads,
             {as_arg(got), as_arg(x), as_arg(w), as_arg(b), as_arg(p), arg{nullptr, threads / 32 * sizeof(float), true}});
    }
    check_equal(got, want, "layer_norm, " + what);

    const double rms_eps = 1e-6;
    const X want_rms = tenet::rms_norm(x, w, rms_eps);
    X got_rms(x.sizes());
    std::vector<std::int64_t> q = m::row_params(x, 1);
    const float re = static_cast<float>(rms_eps);
    std::memcpy(&bits, &re, sizeof bits);
    q.push_back(static_cast<std::int64_t>(bits));
    if (q[0] > 0) {
      const std::uint32_t threads = m::row_threads(q[1]);
      launch(m::layer_norm_kernel<1, true>(), static_cast<std::uint32_t>(q[0]), threads,
             {as_arg(got_rms), as_arg(x), as_arg(w), as_arg(q), arg{nullptr, threads / 32 * sizeof(float), true}});
    }
    check_equal(got_rms, want_rms, "rms_norm, " + what);
  }
}

namespace {
/// The row kernels on 16-bit T (loads widened to float, the result rounded once), against the CPU.
template <class T>
void check_half_rows(const std::string& dtype) {
  using X = Tensor<T, shape<dyn, dyn>>;
  using V = Tensor<T, shape<dyn>>;
  const std::vector<std::pair<std::string, X>> inputs{
      {"contiguous 4x300", random_tensor<shape<dyn, dyn>, T>(sizes2{4, 300}, 61)},
      {"transposed 9x40", random_tensor<shape<dyn, dyn>, T>(sizes2{40, 9}, 62).t()},
      {"1x1", random_tensor<shape<dyn, dyn>, T>(sizes2{1, 1}, 63)},
  };
  for (const auto& [layout, x] : inputs) {
    const std::string what = dtype + ", " + layout;
    const std::int64_t rows = x.sizes()[0], cols = x.sizes()[1];
    V s(tenet::sizes_t<1>{rows}), mx(tenet::sizes_t<1>{rows});
    run_rows_emulated(m::reduce_kernel<m::row_reduction::sum, 1, 1, T>(), s, x, 1);
    run_rows_emulated(m::reduce_kernel<m::row_reduction::amax, 1, 1, T>(), mx, x, 1);
    const V want_s = tenet::sum<-1>(x), want_mx = tenet::amax<-1>(x);
    check_equal(s, want_s, "sum over the last dim, " + what);
    check_equal(mx, want_mx, "amax over the last dim, " + what, 0.0, 0.0);

    const X want_sm = tenet::softmax<-1>(x);
    X sm(x.sizes());
    run_rows_emulated(m::softmax_kernel<1, false, T>(), sm, x, 1);
    check_equal(sm, want_sm, "softmax, " + what);

    const V w = random_tensor<shape<dyn>, T>(tenet::sizes_t<1>{cols}, 64), b = random_tensor<shape<dyn>, T>(tenet::sizes_t<1>{cols}, 65);
    const double eps = 1e-5;
    // the CPU in float32 on the same values, rounded once: the kernel's (and torch's) semantics. The
    // CPU runs a 16-bit layer_norm as its decomposition, rounding after every prim, which differs by
    // a few units in the last place (docs/metal.md)
    using F = Tensor<float, shape<dyn, dyn>>;
    using FV = Tensor<float, shape<dyn>>;
    const F want_f = tenet::layer_norm(F(x.template to<float>()), FV(w.template to<float>()), FV(b.template to<float>()), eps);
    const X want_ln = want_f.template to<T>();
    X ln(x.sizes());
    std::vector<std::int64_t> p = m::row_params(x, 1);
    const float e = static_cast<float>(eps);
    std::uint32_t bits;
    std::memcpy(&bits, &e, sizeof bits);
    p.push_back(static_cast<std::int64_t>(bits));
    const std::uint32_t threads = m::row_threads(p[1]);
    launch(m::layer_norm_kernel<1, false, T>(), static_cast<std::uint32_t>(p[0]), threads,
           {as_arg(ln), as_arg(x), as_arg(w), as_arg(b), as_arg(p), arg{nullptr, threads / 32 * sizeof(float), true}});
    check_equal(ln, want_ln, "layer_norm, " + what);
  }
}
}  // namespace

TEST_CASE("metal: the generated row kernels on float16 and bfloat16 equal the CPU backend", "[metal]") {
  check_half_rows<tenet::float16>("float16");
  check_half_rows<tenet::bfloat16>("bfloat16");
}

#if !defined(TENET_METAL_ON_DEVICE)
TEST_CASE("metal: the emulator reports the race of a generated kernel with a barrier removed", "[metal]") {
  // msl_generate.cpp writes this control: the softmax kernel without its second barrier
  const kernel_entry* control = nullptr;
  for (const auto& e : registry)
    if (e.name == "control_softmax_without_reuse_barrier") control = &e;
  REQUIRE(control != nullptr);
  const auto x = random_tensor<shape<dyn, dyn>>(sizes2{2, 100}, 41);
  Tensor<float, shape<dyn, dyn>> out(x.sizes());
  const std::vector<std::int64_t> p = m::row_params(x, 1);
  std::string message = "(no error)";
  try {
    control->run(2, 128, bindings({as_arg(out), as_arg(x), as_arg(p), arg{nullptr, 4 * sizeof(float), true}}));
  } catch (const emu::emulation_error& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("threadgroup memory race in kernel 'control_softmax_without_reuse_barrier'") != std::string::npos);
  // with the barrier, the same run is clean
  run_rows_emulated(m::softmax_kernel<1>(), out, x, 1);
}
#endif
