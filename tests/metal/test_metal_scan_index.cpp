// The generated scan and indexing kernels (docs/metal.md), run in the emulator and checked against
// the CPU backend: cumsum, cumprod, logcumsumexp, cummax / cummin's values (msl_scan.hpp); gather
// (and index_select through it), scatter with every combining op, scatter_add with atomics, and
// the fault channel that reports a bad index (msl_indexing.hpp). A translation unit of its own:
// msl_generate.cpp writes these kernels into kernels_scan_index.inc / registry_scan_index.inc.
//
// Layouts: lines of one and of several chunks of a threadgroup (1000 elements over 256 threads),
// lines shorter than a simdgroup, a scan along dim 0 (strided lines), transposed and narrowed
// views, rank 1 and 3, 1 x 1, empty tensors, a strided output; indices with duplicates, int64 and
// int32 indices, a stride-0 index (index_select's), a source of one value (torch.scatter's value
// form).
#include "metal_cases.hpp"
#include "kernel_harness.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#if !defined(TENET_METAL_ON_DEVICE)
#include "msl_shim.hpp"
#include "kernels_scan_index.inc"
#undef device
#undef constant
#undef thread
#endif

namespace {

using namespace tenet_metal_harness;
namespace p = tenet::prim;
using sizes2 = tenet::sizes_t<2>;
using X2 = Tensor<float, shape<dyn, dyn>>;

#if defined(TENET_METAL_ON_DEVICE)
void launch(const m::kernel_source& k, std::uint32_t groups, std::uint32_t threads, const std::vector<arg>& args) {
  launch_on_device(k, groups, threads, args);
}
#else
const kernel_entry registry[] = {
#include "registry_scan_index.inc"
};
void launch(const m::kernel_source& k, std::uint32_t groups, std::uint32_t threads, const std::vector<arg>& args) {
  launch_emulated(registry, k, groups, threads, args);
}
#endif

constexpr double float_eps = 1.2e-7;

// ---------------------------------------------------------------------------------------------
// scans

/// out = scan of Kind along dim d of x, by the generated kernel: a threadgroup per line.
template <class Kind, class TO, class SO, class T, class S>
void run_scan(const Tensor<TO, SO>& out, const Tensor<T, S>& x, std::size_t d) {
  const std::vector<std::int64_t> params = m::scan_params(out, x, d);
  if (params[0] == 0) return;
  const std::uint32_t threads = m::row_threads(params[1]);
  launch(m::scan_kernel<Kind, S::rank, T>(), static_cast<std::uint32_t>(params[0]), threads,
         {as_arg(out), as_arg(x), as_arg(params), arg{nullptr, m::scan_threadgroup_bytes<Kind, T>(threads), true}});
}

/// |got - want| <= bound[i] + rtol |want| elementwise (NaN matches NaN, infinities exactly).
template <class T, class S>
void check_within(const Tensor<T, S>& got, const Tensor<T, S>& want, const std::vector<double>& bound, double rtol,
                  const std::string& what) {
  REQUIRE(got.sizes() == want.sizes());
  const auto g = values_of(got), w = values_of(want);
  int bad = 0;
  for (std::size_t i = 0; i < g.size() && bad < 5; ++i) {
    const double gi = static_cast<float>(g[i]), wi = static_cast<float>(w[i]);
    const bool ok = std::isnan(wi) ? std::isnan(gi) : std::isinf(wi) ? gi == wi : std::abs(gi - wi) <= bound[i] + rtol * std::abs(wi);
    if (!ok) {
      ++bad;
      FAIL_CHECK(what << ": element " << i << ": emulated Metal kernel " << gi << ", CPU " << wi << ", bound " << bound[i] + rtol * std::abs(wi));
    }
  }
}

/// Kind's scan of x along D by the kernel against the CPU backend, with the tolerance that float
/// accumulation in another order needs: each running sum within 2 n eps of the running sum of |x|
/// (n the line's length), products 2 n eps and logaddexp 1e-5 relative, amax / amin and integers
/// exact; 16-bit results also within their dtype's rounding.
template <class Kind, std::int64_t D, class T, class S>
void check_scan(const std::string& what, const Tensor<T, S>& x) {
  constexpr std::size_t d = static_cast<std::size_t>(D);
  using R = typename Kind::template result<T>;
  const Tensor<R, S> want = tenet::make_node(p::scan_<Kind, D>{}, x);
  Tensor<R, S> got(x.sizes());
  run_scan<Kind>(got, x, d);
  const std::int64_t n = x.sizes()[d];
  const std::string name = std::string(p::scan_name<Kind>) + ", " + what;
  constexpr bool sum = std::is_same_v<Kind, p::sum_kind>, prod = std::is_same_v<Kind, p::prod_kind>;
  constexpr bool lse = std::is_same_v<Kind, p::logaddexp_kind>;
  if constexpr (std::is_integral_v<T> || !(sum || prod || lse)) {
    check_equal(got, want, name, 0.0, 0.0);
  } else {
    const double rtol = (std::is_same_v<T, float> ? 0.0 : tolerance<T>().first) +
                        (prod ? 2.0 * static_cast<double>(n) * float_eps : lse ? 1e-5 : 0.0);
    std::vector<double> bound(static_cast<std::size_t>(x.numel()), 1e-6);
    if constexpr (sum) {
      using F = Tensor<float, S>;
      const F running_abs = tenet::cumsum<D>(tenet::abs(F(x.template to<float>())));
      const auto a = values_of(running_abs);
      for (std::size_t i = 0; i < a.size(); ++i) bound[i] = 2.0 * static_cast<double>(n) * float_eps * a[i] + 1e-6;
    }
    check_within(got, want, bound, rtol, name);
  }
  if constexpr (S::rank == 2) {  // into a strided output: a transposed view
    if (x.numel() > 0) {
      Tensor<R, S> base(sizes2{x.sizes()[1], x.sizes()[0]});
      const auto out = base.t();
      run_scan<Kind>(out, x, d);
      check_equal(out, got, name + ", transposed output", 0.0, 0.0);
    }
  }
}

/// Values near 1 for cumprod (products of a few hundred stay finite): 1 + x / 20.
template <class T, class S>
Tensor<T, S> near_one(const Tensor<T, S>& x) {
  if constexpr (std::is_integral_v<T>) {
    return x;
  } else {
    const Tensor<float, S> f = x.template to<float>() * 0.05f + 1.0f;
    return f.template to<T>();
  }
}

template <class Kind, class T>
void check_scan_layouts(const std::string& dtype) {
  using S2 = shape<dyn, dyn>;
  constexpr bool prod = std::is_same_v<Kind, p::prod_kind>;
  auto r = [&](std::int64_t a, std::int64_t b, std::uint64_t seed, bool special = false) {
    const auto t = random_tensor<S2, T>(sizes2{a, b}, seed, special);
    return prod ? near_one(t) : t;
  };
  check_scan<Kind, 1>(dtype + ", contiguous 3x300 along dim 1 (two chunks)", r(3, 300, 71));
  check_scan<Kind, 0>(dtype + ", 37x5 along dim 0", r(37, 5, 72));
  check_scan<Kind, 1>(dtype + ", transposed 5x70 along dim 1", r(70, 5, 73).t());
  check_scan<Kind, 1>(dtype + ", narrowed 4x33 of 4x50", r(4, 50, 74).template narrow<1>(9, 33));
  check_scan<Kind, 1>(dtype + ", 1x1", r(1, 1, 75));
  check_scan<Kind, 1>(dtype + ", empty 0x5", Tensor<T, S2>(sizes2{0, 5}));
  check_scan<Kind, 1>(dtype + ", empty 3x0", Tensor<T, S2>(sizes2{3, 0}));
  if constexpr (!prod) check_scan<Kind, 1>(dtype + ", 2x40 with 0, -0, +-1, +-inf and NaN", r(2, 40, 76, true));
}

}  // namespace

TEST_CASE("metal: the generated scan kernels equal the CPU backend on float32", "[metal]") {
  check_scan_layouts<p::sum_kind, float>("float32");
  check_scan_layouts<p::prod_kind, float>("float32");
  check_scan_layouts<p::logaddexp_kind, float>("float32");
  check_scan_layouts<p::amax_kind, float>("float32");
  check_scan_layouts<p::amin_kind, float>("float32");
  // rank 1 over four chunks; rank 3 along the middle dim of a narrowed, transposed view
  const auto v = random_tensor<shape<dyn>>(tenet::sizes_t<1>{1000}, 77);
  check_scan<p::sum_kind, 0>("float32, rank 1 of 1000", v);
  const auto x3 = random_tensor<shape<dyn, dyn, dyn>>(tenet::sizes_t<3>{3, 8, 45}, 78).transpose(1, 2).template narrow<2>(1, 6);
  check_scan<p::sum_kind, 1>("float32, rank 3 (3x45x6 view) along dim 1", x3);
  // the public ops are these prims: cummax's values
  const X2 x = random_tensor<shape<dyn, dyn>>(sizes2{4, 50}, 79, true);
  X2 got(x.sizes());
  run_scan<p::amax_kind>(got, x, 1);
  check_equal(got, X2(tenet::cummax<1>(x).values), "cummax's values", 0.0, 0.0);
}

TEST_CASE("metal: the generated scan kernels equal the CPU backend on float16, bfloat16 and int32", "[metal]") {
  check_scan_layouts<p::sum_kind, tenet::float16>("float16");
  check_scan_layouts<p::prod_kind, tenet::float16>("float16");
  check_scan_layouts<p::logaddexp_kind, tenet::float16>("float16");
  check_scan_layouts<p::sum_kind, tenet::bfloat16>("bfloat16");
  check_scan_layouts<p::prod_kind, tenet::bfloat16>("bfloat16");
  check_scan_layouts<p::logaddexp_kind, tenet::bfloat16>("bfloat16");
  // int32: sums and products in int64 (products wrapping past 2^63), maxima in int32
  check_scan_layouts<p::sum_kind, std::int32_t>("int32");
  check_scan_layouts<p::prod_kind, std::int32_t>("int32");
  check_scan_layouts<p::amax_kind, std::int32_t>("int32");
}

// ---------------------------------------------------------------------------------------------
// gather

namespace {

/// Indices in [0, n) (deterministic), of I.
template <class I, class S>
Tensor<I, S> random_index(const typename Tensor<I, S>::sizes_type& sizes, std::int64_t n, std::uint64_t seed) {
  Tensor<I, S> t(sizes);
  values v{seed};
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data()[i] = static_cast<I>(std::min<std::int64_t>(n - 1, static_cast<std::int64_t>((v.next() + 3.0f) / 6.0f * static_cast<float>(n))));
  return t;
}

/// out = gather(x, d, idx) by the generated kernel; the fault record it leaves.
template <class T, class S, class I, class SI>
m::index_fault_record run_gather(const Tensor<T, SI>& out, const Tensor<T, S>& x, const Tensor<I, SI>& idx, std::size_t d) {
  m::index_fault_record fault;
  const std::vector<std::int64_t> params = m::gather_params(x, idx, d);
  if (params[0] == 0) return fault;
  const std::uint32_t threads = 64;
  launch(m::gather_kernel<S::rank, T, I>(), static_cast<std::uint32_t>((params[0] + threads - 1) / threads), threads,
         {as_arg(out), as_arg(x), as_arg(idx), as_arg(params), arg{&fault, sizeof fault, false, true}});
  return fault;
}

template <std::int64_t D, class T, class S, class I, class SI>
void check_gather(const std::string& what, const Tensor<T, S>& x, const Tensor<I, SI>& idx) {
  const Tensor<T, SI> want = tenet::gather<D>(x, idx);
  Tensor<T, SI> got(idx.sizes());
  const auto fault = run_gather(got, x, idx, static_cast<std::size_t>(D));
  CHECK(fault.count == 0);
  check_equal(got, want, "gather, " + what, 0.0, 0.0);
}

template <class T>
void check_gather_layouts(const std::string& dtype) {
  using S2 = shape<dyn, dyn>;
  using I2 = Tensor<std::int64_t, S2>;
  const auto x = random_tensor<S2, T>(sizes2{6, 9}, 81, true);
  check_gather<1>(dtype + ", 6x9 by a 6x20 index along dim 1 (duplicates)", x, random_index<std::int64_t, S2>(sizes2{6, 20}, 9, 82));
  check_gather<0>(dtype + ", 6x9 by a 11x4 index along dim 0", x, random_index<std::int64_t, S2>(sizes2{11, 4}, 6, 83));
  check_gather<1>(dtype + ", transposed 9x6 by a transposed index", random_tensor<S2, T>(sizes2{6, 9}, 84).t(),
                  random_index<std::int64_t, S2>(sizes2{5, 9}, 6, 85).t());
  check_gather<1>(dtype + ", empty index", x, I2(sizes2{6, 0}));
}

}  // namespace

TEST_CASE("metal: the generated gather kernels equal the CPU backend", "[metal]") {
  check_gather_layouts<float>("float32");
  check_gather_layouts<tenet::float16>("float16");
  check_gather_layouts<tenet::bfloat16>("bfloat16");
  check_gather_layouts<std::int32_t>("int32");
  using S2 = shape<dyn, dyn>;
  const auto x = random_tensor<S2>(sizes2{7, 5}, 86);
  check_gather<0>("float32 by int32 indices", x, random_index<std::int32_t, S2>(sizes2{3, 5}, 7, 87));
  // index_select<1> of a rank-3 view: gather_ with the index vector viewed along dim 1 (stride 0
  // elsewhere), the operand index_select's plan hands the backend
  using S3 = shape<dyn, dyn, dyn>;
  const auto x3 = random_tensor<S3>(tenet::sizes_t<3>{3, 10, 4}, 88).transpose(0, 2);  // 4 x 10 x 3
  const auto v = random_index<std::int64_t, shape<dyn>>(tenet::sizes_t<1>{7}, 10, 89);
  const auto idx = tenet::detail::along_dim<S3>(v, x3.sizes(), 1);
  Tensor<float, S3> got(idx.sizes());
  CHECK(run_gather(got, x3, idx, 1).count == 0);
  check_equal(got, Tensor<float, S3>(tenet::index_select<1>(x3, v)), "index_select<1> of a transposed rank-3 view", 0.0, 0.0);
}

TEST_CASE("metal: a bad gather index is reported through the fault record as the CPU's index_error", "[metal]") {
  using S2 = shape<dyn, dyn>;
  const auto x = random_tensor<S2>(sizes2{4, 6}, 90);
  auto idx = random_index<std::int64_t, S2>(sizes2{4, 3}, 6, 91);
  idx.data()[7] = 6;  // one past the end of dim 1
  std::string cpu = "(no error)", metal = "(no error)";
  try {
    (void)X2(tenet::gather<1>(x, idx));
  } catch (const tenet::index_error& e) {
    cpu = e.what();
  }
  X2 got(idx.sizes());
  const auto fault = run_gather(got, x, idx, 1);
  CHECK(fault.count == 1);
  try {
    m::throw_if_index_fault(fault, "gather", 1, 6);
  } catch (const tenet::index_error& e) {
    metal = e.what();
  }
  CHECK(metal == cpu);
  idx.data()[2] = -5;  // two bad indices: both counted, the first thread's reported
  CHECK(run_gather(got, x, idx, 1).count == 2);
}

// ---------------------------------------------------------------------------------------------
// scatter

namespace {

/// out (a contiguous copy of self) = scatter(self, d, idx, src) with Op by the generated kernel
/// (atomic: scatter_add_atomic_kernel); the fault record.
template <p::scatter_op Op, bool Atomic = false, class T, class I, class SI, class SS>
m::index_fault_record run_scatter(const Tensor<T, SI>& out, const Tensor<I, SI>& idx, const Tensor<T, SS>& src, std::size_t d,
                                  bool include_self) {
  m::index_fault_record fault;
  const std::vector<std::int64_t> params = m::scatter_params(out, idx, src, d, include_self);
  const std::int64_t work = Atomic ? params[0] * params[1] : params[0];
  if (params[0] == 0 || params[1] == 0) return fault;
  const std::uint32_t threads = 32;
  const auto groups = static_cast<std::uint32_t>((work + threads - 1) / threads);
  std::vector<arg> args{as_arg(out), as_arg(idx), as_arg(src), as_arg(params), arg{&fault, sizeof fault, false, true}};
  std::vector<std::int64_t> count(static_cast<std::size_t>(out.numel()), 0);
  if constexpr (Op == p::scatter_op::mean) args.push_back(arg{count.data(), count.size() * sizeof(std::int64_t), false, true});
  if constexpr (Atomic) launch(m::scatter_add_atomic_kernel<SI::rank, T, I>(), groups, threads, args);
  else launch(m::scatter_kernel<Op, SI::rank, T, I>(), groups, threads, args);
  return fault;
}

template <p::scatter_op Op>
inline constexpr tenet::scatter_reduction reduction_of = Op == p::scatter_op::sum    ? tenet::scatter_reduction::sum
                                                         : Op == p::scatter_op::prod ? tenet::scatter_reduction::prod
                                                         : Op == p::scatter_op::mean ? tenet::scatter_reduction::mean
                                                         : Op == p::scatter_op::amax ? tenet::scatter_reduction::amax
                                                                                     : tenet::scatter_reduction::amin;

/// Scatter Op of src into self at idx along D by the kernel against the CPU: equal bit for bit
/// (the fiber kernel combines in the CPU's order), or for the atomic kernel's float sums within 2
/// n eps sum|src|.
template <p::scatter_op Op, std::int64_t D, bool Atomic = false, class T, class SI, class I, class SS>
void check_scatter(const std::string& what, const Tensor<T, SI>& self, const Tensor<I, SI>& idx, const Tensor<T, SS>& src,
                   bool include_self = true) {
  const Tensor<T, SI> want = [&]() -> Tensor<T, SI> {
    if constexpr (Op == p::scatter_op::replace) return tenet::scatter<D>(self, idx, src);
    else return tenet::scatter_reduce<D, reduction_of<Op>>(self, idx, src, include_self);
  }();
  const Tensor<T, SI> got = self.clone();  // contiguous, its own storage
  const auto fault = run_scatter<Op, Atomic>(got, idx, src, static_cast<std::size_t>(D), include_self);
  CHECK(fault.count == 0);
  const std::string name = std::string(p::scatter_<0, Op>::name) + (Atomic ? " (atomic)" : "") + (include_self ? "" : " (not self)") + ", " + what;
  if constexpr (Atomic && std::is_same_v<T, float>) {
    double s = 0;
    for (float v : values_of(src)) s += std::abs(v);
    check_equal(got, want, name, 0.0, 2.0 * static_cast<double>(idx.numel()) * float_eps * s + 1e-6);
  } else {
    check_equal(got, want, name, 0.0, 0.0);
  }
}

template <p::scatter_op Op, class T>
void check_scatter_layouts(const std::string& dtype, bool include_self = true) {
  using S2 = shape<dyn, dyn>;
  using I2 = Tensor<std::int64_t, S2>;
  const auto self = random_tensor<S2, T>(sizes2{5, 8}, 101, true);
  const auto src = random_tensor<S2, T>(sizes2{6, 12}, 102);
  check_scatter<Op, 1>(dtype + ", 5x8 at a 5x12 index along dim 1 (duplicates)", self, random_index<std::int64_t, S2>(sizes2{5, 12}, 8, 103),
                       src, include_self);
  check_scatter<Op, 0>(dtype + ", 5x8 at a 6x3 index along dim 0", self, random_index<std::int64_t, S2>(sizes2{6, 3}, 5, 104), src,
                       include_self);
  check_scatter<Op, 1>(dtype + ", transposed self and src, transposed index", random_tensor<S2, T>(sizes2{8, 5}, 105).t(),
                       random_index<std::int64_t, S2>(sizes2{7, 4}, 8, 106).t(), random_tensor<S2, T>(sizes2{9, 4}, 107).t(),
                       include_self);
  check_scatter<Op, 1>(dtype + ", empty index", self, I2(sizes2{5, 0}), src, include_self);
}

}  // namespace

TEST_CASE("metal: the generated scatter kernels equal the CPU backend", "[metal]") {
  using S2 = shape<dyn, dyn>;
  check_scatter_layouts<p::scatter_op::replace, float>("float32");
  for (bool self : {true, false}) {
    check_scatter_layouts<p::scatter_op::sum, float>("float32", self);
    check_scatter_layouts<p::scatter_op::prod, float>("float32", self);
    check_scatter_layouts<p::scatter_op::mean, float>("float32", self);
    check_scatter_layouts<p::scatter_op::amax, float>("float32", self);
    check_scatter_layouts<p::scatter_op::amin, float>("float32", self);
  }
  check_scatter_layouts<p::scatter_op::sum, tenet::float16>("float16");
  check_scatter_layouts<p::scatter_op::amax, tenet::float16>("float16", false);
  check_scatter_layouts<p::scatter_op::sum, tenet::bfloat16>("bfloat16");
  check_scatter_layouts<p::scatter_op::mean, tenet::bfloat16>("bfloat16", false);
  check_scatter_layouts<p::scatter_op::sum, std::int32_t>("int32");
  check_scatter_layouts<p::scatter_op::prod, std::int32_t>("int32");
  check_scatter_layouts<p::scatter_op::mean, std::int32_t>("int32");  // floor division of negative sums
  check_scatter_layouts<p::scatter_op::mean, std::int32_t>("int32", false);
  // torch.scatter's value form: one value (a 0-dim source, strides 0) at every index position
  const auto self = random_tensor<S2>(sizes2{4, 6}, 108);
  Tensor<float, shape<>> one(tenet::sizes_t<0>{});
  one.data()[0] = 2.5f;
  check_scatter<p::scatter_op::replace, 1>("float32, one value", self, random_index<std::int64_t, S2>(sizes2{4, 3}, 6, 109), one);
}

TEST_CASE("metal: the generated atomic scatter_add equals the CPU backend", "[metal]") {
  using S2 = shape<dyn, dyn>;
  // few long fibers: the case the atomic kernel is chosen for
  CHECK(m::scatter_uses_atomics(3, 200));
  CHECK_FALSE(m::scatter_uses_atomics(100000, 200));
  const auto idx = random_index<std::int64_t, S2>(sizes2{3, 200}, 7, 111);
  check_scatter<p::scatter_op::sum, 1, true>("float32, 3x7 at a 3x200 index along dim 1", random_tensor<S2>(sizes2{3, 7}, 110), idx,
                                             random_tensor<S2>(sizes2{3, 200}, 112));
  check_scatter<p::scatter_op::sum, 0, true>("float32, transposed, along dim 0", random_tensor<S2>(sizes2{4, 9}, 113).t(),
                                             random_index<std::int64_t, S2>(sizes2{2, 70}, 9, 114).t(),
                                             random_tensor<S2>(sizes2{2, 80}, 115).t());
  check_scatter<p::scatter_op::sum, 1, true>("int32, wrapping", random_tensor<S2, std::int32_t>(sizes2{3, 7}, 116, true), idx,
                                             random_tensor<S2, std::int32_t>(sizes2{3, 200}, 117, true));
}

TEST_CASE("metal: a bad scatter index leaves its fiber unwritten and raises the CPU's index_error", "[metal]") {
  using S2 = shape<dyn, dyn>;
  const auto self = random_tensor<S2>(sizes2{3, 5}, 120);
  auto idx = random_index<std::int64_t, S2>(sizes2{3, 4}, 5, 121);
  idx.data()[5] = 5;  // row 1
  const auto src = random_tensor<S2>(sizes2{3, 4}, 122);
  std::string cpu = "(no error)", metal = "(no error)";
  try {
    (void)X2(tenet::scatter_add<1>(self, idx, src));
  } catch (const tenet::index_error& e) {
    cpu = e.what();
  }
  const X2 got = self.clone();
  const auto fault = run_scatter<p::scatter_op::sum>(got, idx, src, 1, true);
  try {
    m::throw_if_index_fault(fault, "scatter_sum", 1, 5);
  } catch (const tenet::index_error& e) {
    metal = e.what();
  }
  CHECK(metal == cpu);
  // row 1 untouched; rows 0 and 2 scattered
  const auto g = values_of(got), s = values_of(self);
  for (std::size_t j = 5; j < 10; ++j) CHECK(g[j] == s[j]);
  CHECK(g != s);
}

#if !defined(TENET_METAL_ON_DEVICE)
TEST_CASE("metal: the emulator reports the device memory race of scatter_add without atomics", "[metal]") {
  // msl_generate.cpp writes this control: the atomic scatter_add kernel with a plain +=
  const kernel_entry* control = nullptr;
  for (const auto& e : registry)
    if (e.name == "control_scatter_add_without_atomics") control = &e;
  REQUIRE(control != nullptr);
  using S2 = shape<dyn, dyn>;
  const auto idx = random_index<std::int64_t, S2>(sizes2{2, 40}, 3, 130);  // duplicates along dim 1
  const auto src = random_tensor<S2>(sizes2{2, 40}, 131);
  X2 out = random_tensor<S2>(sizes2{2, 3}, 132);
  const auto params = m::scatter_params(out, idx, src, 1, true);
  m::index_fault_record fault;
  std::string message = "(no error)";
  try {
    control->run(3, 32, bindings({as_arg(out), as_arg(idx), as_arg(src), as_arg(params), arg{&fault, sizeof fault, false, true}}));
  } catch (const emu::emulation_error& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("device memory race in kernel 'control_scatter_add_without_atomics'") != std::string::npos);
  // the atomic kernel on the same operands is clean
  const X2 got = out.clone();
  CHECK(run_scatter<p::scatter_op::sum, true>(got, idx, src, 1, true).count == 0);
}
#endif
