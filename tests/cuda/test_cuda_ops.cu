// CUDA backend tests, part 3: argmax / argmin, the scans (cumsum, cumprod, cummax / cummin,
// logcumsumexp), gather / scatter / scatter_add / scatter_reduce / index_select / embedding,
// cat / stack of device tensors, tenet::autocast, and random draws (rand_lazy, dropout). Every GPU value is checked against the CPU backend on the same
// inputs (exactly for indices, gathers, scatters without arithmetic and integer scans), for fp32,
// fp64, fp16, bf16 and integers, with transposed (non-contiguous) inputs, empty and size-1 dims,
// and out-of-range indices (index_error, not a device fault). The main() that skips without a GPU
// is in test_cuda.cu.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include <tenet/cuda.hpp>

#include "check_close.hpp"

using namespace tenet;
using tenet::test::check_close;
using I1 = Tensor<std::int64_t, dyn_shape<1>>;
using I2 = Tensor<std::int64_t, dyn_shape<2>>;

namespace {
using tenet::test::gpu;

template <class A, class B>
void check_equal(const A& g, const B& c) {
  check_close(g, c, 0.0, 0.0);
}

/// x (rows x cols) of dtype T with many ties (small integers), or continuous values.
template <class T>
Tensor<T, dyn_shape<2>> sample(std::int64_t rows, std::int64_t cols, bool ties) {
  if (ties) return randint<std::int64_t, dyn_shape<2>>(-3, 4, rows, cols).template to<T>();
  return Tensor<float, dyn_shape<2>>(randn<float, dyn_shape<2>>(rows, cols) * 4.0f).template to<T>();
}

/// argmax / argmin along each dim, with keepdim, over every dim, on a transposed view.
template <class T>
void check_arg(const Tensor<T, dyn_shape<2>>& x) {
  INFO("sizes " << x.size(0) << " x " << x.size(1));
  using T2 = Tensor<T, dyn_shape<2>>;
  auto d = x.to(gpu);
  check_equal(I1(argmax<1>(d)), I1(argmax<1>(x)));
  check_equal(I1(argmax<0>(d)), I1(argmax<0>(x)));
  check_equal(I1(argmin<1>(d)), I1(argmin<1>(x)));
  check_equal(I2(argmin<0>(d, keepdim)), I2(argmin<0>(x, keepdim)));
  if (x.numel() > 0) {
    check_equal(Tensor<std::int64_t, shape<>>(argmax(d)), Tensor<std::int64_t, shape<>>(argmax(x)));
    check_equal(Tensor<std::int64_t, shape<>>(argmin(d)), Tensor<std::int64_t, shape<>>(argmin(x)));
  }
  T2 dt = d.t();  // a transposed view: strided lines
  T2 xt = x.t();
  check_equal(I1(argmax<1>(dt)), I1(argmax<1>(xt)));
  check_equal(I1(argmin<0>(dt)), I1(argmin<0>(xt)));
}

template <class T>
void check_arg_dtype(bool nan) {
  for (bool ties : {true, false}) {
    for (auto [r, c] : {std::pair<std::int64_t, std::int64_t>{37, 300}, {3000, 5}, {4, 20000}, {1, 1}, {1, 7}, {5000, 1}}) {
      auto x = sample<T>(r, c, ties);
      if constexpr (std::numeric_limits<T>::has_quiet_NaN) {
        if (nan && x.numel() > 4) {
          x.data()[x.numel() / 2] = std::numeric_limits<T>::quiet_NaN();  // two NaNs: the first one wins
          x.data()[x.numel() / 2 + 1] = std::numeric_limits<T>::quiet_NaN();
          x.data()[0] = std::numeric_limits<T>::quiet_NaN();
        }
      }
      check_arg(x);
    }
  }
}

/// The scans along both dims, contiguous and transposed, against the CPU.
template <class T>
void check_scans(const Tensor<T, dyn_shape<2>>& x, double rtol, double atol) {
  INFO("sizes " << x.size(0) << " x " << x.size(1));
  using O = Tensor<typename prim::sum_kind::template result<T>, dyn_shape<2>>;
  auto d = x.to(gpu);
  check_close(O(cumsum<1>(d)), O(cumsum<1>(x)), rtol, atol);
  check_close(O(cumsum<0>(d)), O(cumsum<0>(x)), rtol, atol);
  Tensor<T, dyn_shape<2>> xt = x.t();
  Tensor<T, dyn_shape<2>> dt = d.t();
  check_close(O(cumsum<1>(dt)), O(cumsum<1>(xt)), rtol, atol);
  check_close(O(cumsum<0>(dt)), O(cumsum<0>(xt)), rtol, atol);
}

template <class T>
void check_scans_dtype(double rtol, double atol) {
  for (auto [r, c] : {std::pair<std::int64_t, std::int64_t>{5, 3000}, {3000, 9}, {2, 70000}, {1, 1}, {0, 4}, {6, 0},
                      {1, 1025}, {40, 33}}) {
    check_scans<T>(sample<T>(r, c, std::is_integral_v<T>), rtol, atol);
  }
}

/// cumprod on values near 1 (no overflow), cummax / cummin with ties and NaN, logcumsumexp.
template <class T>
void check_other_scans(std::int64_t r, std::int64_t c, double rtol) {
  INFO("sizes " << r << " x " << c);
  using T2 = Tensor<T, dyn_shape<2>>;
  T2 x = Tensor<float, dyn_shape<2>>(randn<float, dyn_shape<2>>(r, c) * 0.01f + 1.0f).template to<T>();
  auto d = x.to(gpu);
  check_close(T2(cumprod<1>(d)), T2(cumprod<1>(x)), rtol, 1e-6);
  check_close(T2(cumprod<0>(d)), T2(cumprod<0>(x)), rtol, 1e-6);
  T2 y = sample<T>(r, c, true);
  if (y.numel() > 3) y.data()[y.numel() / 3] = std::numeric_limits<T>::quiet_NaN();
  auto dy = y.to(gpu);
  auto gm = cummax<1>(dy);
  auto cm = cummax<1>(y);
  check_equal(gm.values, cm.values);
  check_equal(gm.indices, cm.indices);
  auto gn = cummin<0>(dy);
  auto cn = cummin<0>(y);
  check_equal(gn.values, cn.values);
  check_equal(gn.indices, cn.indices);
  check_close(T2(logcumsumexp<1>(d)), T2(logcumsumexp<1>(x)), rtol, rtol);
}

}  // namespace

TEST_CASE("cuda ops: argmax / argmin, every dtype, ties, NaN, transposed, size-1 and empty dims") {
  manual_seed(21);
  check_arg_dtype<float>(true);
  check_arg_dtype<double>(true);
  check_arg_dtype<bfloat16>(true);
  check_arg_dtype<float16>(true);
  check_arg_dtype<std::int32_t>(false);
  check_arg_dtype<std::int64_t>(false);
  // a long line: the block-per-line kernel; a NaN far in
  {
    auto x = randn<float, dyn_shape<2>>(2, 1 << 20);
    x.data()[(1 << 20) + 777777] = std::numeric_limits<float>::quiet_NaN();
    check_arg(x);
  }
  // an empty kept dim gives an empty result; an empty reduced dim is an error, as on the CPU
  auto e = randn<float, dyn_shape<2>>(0, 5);
  auto de = e.to(gpu);
  CHECK(I1(argmax<0>(de.t())).numel() == 0);
  CHECK_THROWS_AS(I1(argmax<0>(de)), value_error);
  CHECK_THROWS_AS(I1(argmax<0>(e)), value_error);
  // 3-D, the middle dim, and a pointwise producer
  auto x3 = randn<float, dyn_shape<3>>(6, 50, 7);
  auto d3 = x3.to(gpu);
  check_equal(I2(argmax<1>(d3 * -1.0f + 2.0f)), I2(argmax<1>(x3 * -1.0f + 2.0f)));
}

TEST_CASE("cuda ops: cumsum (fp32 accumulation for 16-bit types), long lines, outer dims, transposed") {
  manual_seed(22);
  check_scans_dtype<float>(1e-5, 1e-4);
  check_scans_dtype<double>(1e-12, 1e-12);
  check_scans_dtype<bfloat16>(1e-2, 1e-2);  // one rounding of an fp32 sum (order differs: ~1 ulp)
  check_scans_dtype<float16>(2e-3, 2e-3);
  check_scans_dtype<std::int32_t>(0.0, 0.0);  // int64 results, exact
  check_scans_dtype<std::int64_t>(0.0, 0.0);
  // bool counts to int64
  Tensor<bool, dyn_shape<2>> m = randn<float, dyn_shape<2>>(7, 999) > 0.0f;
  check_equal(I2(cumsum<1>(m.to(gpu))), I2(cumsum<1>(m)));
  // rank 1 and 3
  auto x1 = randn<float, dyn_shape<1>>(100000);
  check_close(Tensor<float, dyn_shape<1>>(cumsum<0>(x1.to(gpu))), Tensor<float, dyn_shape<1>>(cumsum<0>(x1)), 1e-5, 1e-3);
  auto x3 = randn<float, dyn_shape<3>>(3, 300, 17);
  check_close(Tensor<float, dyn_shape<3>>(cumsum<1>(x3.to(gpu))), Tensor<float, dyn_shape<3>>(cumsum<1>(x3)), 1e-5, 1e-4);
}

TEST_CASE("cuda ops: cumprod, cummax / cummin (values and indices), logcumsumexp") {
  manual_seed(23);
  check_other_scans<float>(9, 3000, 1e-5);
  check_other_scans<float>(3000, 4, 1e-5);
  check_other_scans<double>(5, 500, 1e-12);
  check_other_scans<bfloat16>(6, 700, 1e-2);
  check_other_scans<float16>(6, 700, 3e-3);
  check_other_scans<float>(1, 1, 1e-6);
}

namespace {
template <class T>
void check_indexing_dtype() {
  using T2 = Tensor<T, dyn_shape<2>>;
  using T3 = Tensor<T, dyn_shape<3>>;
  T2 x = sample<T>(50, 33, std::is_integral_v<T>);
  auto d = x.to(gpu);
  // gather along each dim, int64 and int32 indices, a transposed input
  I2 i1 = randint<std::int64_t, dyn_shape<2>>(0, 33, 50, 20);
  I2 i0 = randint<std::int64_t, dyn_shape<2>>(0, 50, 7, 33);
  check_equal(T2(gather<1>(d, i1.to(gpu))), T2(gather<1>(x, i1)));
  check_equal(T2(gather<0>(d, i0.to(gpu))), T2(gather<0>(x, i0)));
  Tensor<std::int32_t, dyn_shape<2>> i32 = i0.to<std::int32_t>();
  check_equal(T2(gather<0>(d, i32.to(gpu))), T2(gather<0>(x, i32)));
  T2 xt = x.t();
  T2 dt = d.t();
  I2 it = randint<std::int64_t, dyn_shape<2>>(0, 50, 33, 11);
  check_equal(T2(gather<1>(dt, it.to(gpu))), T2(gather<1>(xt, it)));
  // index_select and embedding (stride-0 index views)
  I1 sel = randint<std::int64_t, dyn_shape<1>>(0, 50, 64);
  check_equal(T2(index_select<0>(d, sel.to(gpu))), T2(index_select<0>(x, sel)));
  I1 sel1 = randint<std::int64_t, dyn_shape<1>>(0, 33, 5);
  check_equal(T2(index_select<1>(d, sel1.to(gpu))), T2(index_select<1>(x, sel1)));
  check_equal(T3(embedding(i0.to(gpu), d)), T3(embedding(i0, x)));
  // scatter (duplicates: the last along the dim wins, as the CPU), scatter_add, scatter_reduce
  T2 src = sample<T>(50, 33, true);
  auto ds = src.to(gpu);
  I2 si = randint<std::int64_t, dyn_shape<2>>(0, 33, 50, 12);
  check_equal(T2(scatter<1>(d, si.to(gpu), ds)), T2(scatter<1>(x, si, src)));
  check_equal(T2(scatter<1>(d, si.to(gpu), 5)), T2(scatter<1>(x, si, 5)));
  I2 s0 = randint<std::int64_t, dyn_shape<2>>(0, 50, 80, 20);
  T2 src0 = sample<T>(80, 30, true);
  // (20 fibers of 80: the atomic path for fp32 / fp64 / int64, whose float sums may differ in order)
  check_close(T2(scatter_add<0>(d, s0.to(gpu), src0.to(gpu))), T2(scatter_add<0>(x, s0, src0)), 1e-6, 1e-5);
  check_equal(T2(scatter_reduce<0, scatter_reduction::amax>(d, s0.to(gpu), src0.to(gpu), false)),
              T2(scatter_reduce<0, scatter_reduction::amax>(x, s0, src0, false)));
  check_close(T2(scatter_reduce<0, scatter_reduction::mean>(d, s0.to(gpu), src0.to(gpu))),
              T2(scatter_reduce<0, scatter_reduction::mean>(x, s0, src0)), 1e-6, 1e-6);
  check_equal(T2(scatter_reduce<1, scatter_reduction::prod>(d, si.to(gpu), ds, false)),
              T2(scatter_reduce<1, scatter_reduction::prod>(x, si, src, false)));
  // empty index: nothing gathered / scattered
  I2 none = randint<std::int64_t, dyn_shape<2>>(0, 33, 50, 0);
  CHECK(T2(gather<1>(d, none.to(gpu))).numel() == 0);
  check_equal(T2(scatter_add<1>(d, none.to(gpu), ds)), x);
}
}  // namespace

TEST_CASE("cuda ops: gather / scatter / scatter_add / scatter_reduce / index_select / embedding") {
  manual_seed(24);
  check_indexing_dtype<float>();
  check_indexing_dtype<double>();
  check_indexing_dtype<bfloat16>();
  check_indexing_dtype<float16>();
  check_indexing_dtype<std::int64_t>();
  // a large embedding lookup: rows of a [50000, 256] table
  auto w = randn<float, dyn_shape<2>>(50000, 256);
  I2 ids = randint<std::int64_t, dyn_shape<2>>(0, 50000, 64, 128);
  check_equal(Tensor<float, dyn_shape<3>>(embedding(ids.to(gpu), w.to(gpu))), Tensor<float, dyn_shape<3>>(embedding(ids, w)));
  // index_add and index_fill (decomposed into scatter)
  auto x = randn<float, dyn_shape<2>>(20, 8);
  auto src = randn<float, dyn_shape<2>>(6, 8);
  I1 rows = randint<std::int64_t, dyn_shape<1>>(0, 20, 6);
  check_close(Tensor<float, dyn_shape<2>>(index_add<0>(x.to(gpu), rows.to(gpu), src.to(gpu), 2.0f)),
              Tensor<float, dyn_shape<2>>(index_add<0>(x, rows, src, 2.0f)), 1e-6, 1e-6);
  auto csrc = randn<float, dyn_shape<2>>(3, 8);
  I1 crow = randint<std::int64_t, dyn_shape<1>>(0, 20, 3);
  check_equal(Tensor<float, dyn_shape<2>>(index_copy<0>(x.to(gpu), crow.to(gpu), csrc.to(gpu))),
              Tensor<float, dyn_shape<2>>(index_copy<0>(x, crow, csrc)));
  I2 tk = randint<std::int64_t, dyn_shape<2>>(-8, 8, 20, 5);  // negative indices count from the end
  check_equal(Tensor<float, dyn_shape<2>>(take_along_dim<1>(x.to(gpu), tk.to(gpu))),
              Tensor<float, dyn_shape<2>>(take_along_dim<1>(x, tk)));
  check_equal(Tensor<float, dyn_shape<2>>(index_fill<1>(x.to(gpu), rows.to(gpu).narrow<0>(0, 2) % 8, -1.5f)),
              Tensor<float, dyn_shape<2>>(index_fill<1>(x, rows.narrow<0>(0, 2) % 8, -1.5f)));
}

// A bad index is found by the kernel without a synchronization; the index_error comes at the next
// wait for the device (here the copy to the host), naming the op, the value, the dim and its size.
TEST_CASE("cuda ops: out-of-range indices are index_error at the next wait, and the device stays usable") {
  using F2 = Tensor<float, dyn_shape<2>>;
  auto x = randn<float, dyn_shape<2>>(10, 6).to(gpu);
  I2 bad = randint<std::int64_t, dyn_shape<2>>(0, 6, 10, 4);
  bad.data()[17] = 6;
  const I2 hi = bad.to(gpu);
  bad.data()[17] = -1;
  const I2 lo = bad.to(gpu);
  CHECK_THROWS_AS(F2(gather<1>(x, hi)).cpu(), index_error);
  CHECK_THROWS_AS(F2(gather<1>(x, lo)).cpu(), index_error);
  CHECK_THROWS_AS(F2(scatter<1>(x, lo, x)).cpu(), index_error);
  CHECK_THROWS_AS(F2(scatter_add<1>(x, lo, x)).cpu(), index_error);
  CHECK_THROWS_AS(F2(scatter_reduce<1, scatter_reduction::mean>(x, lo, x)).cpu(), index_error);
  I1 sel = randint<std::int64_t, dyn_shape<1>>(0, 10, 5);
  sel.data()[3] = 10;
  const I1 sel_g = sel.to(gpu);
  CHECK_THROWS_AS(F2(index_select<0>(x, sel_g)).cpu(), index_error);
  using F3 = Tensor<float, dyn_shape<3>>;
  CHECK_THROWS_AS(F3(embedding(lo, x)).cpu(), index_error);
  // the message, raised by the wait (cuda::synchronize), not by the launch
  F2 y;
  CHECK_NOTHROW(y = gather<1>(x, hi));
  bool raised = false;
  try {
    tenet::cuda::synchronize();
  } catch (const index_error& e) {
    raised = true;
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("gather: index 6 is out of bounds for dim 1 with size 6") != std::string::npos);
    CHECK(m.find("first wait for cuda:0") != std::string::npos);
  }
  CHECK(raised);
  CHECK_NOTHROW(tenet::cuda::synchronize());  // reported once
  // a scatter's name and a negative value; raised by a stream's synchronize()
  {
    tenet::cuda::stream st(gpu);
    const tenet::cuda::stream_guard on(st);
    F2 z = scatter_add<1>(x, lo, x);
    try {
      st.synchronize();
      FAIL("no index_error");
    } catch (const index_error& e) {
      CHECK(std::string(e.what()).find("index -1 is out of bounds for dim 1 with size 6") != std::string::npos);
      CHECK(std::string(e.what()).find("scatter_sum: index -1") != std::string::npos);  // the prim's name
    }
  }
  // good indices after a fault: no error, right values (no sticky device fault)
  const I2 good = randint<std::int64_t, dyn_shape<2>>(0, 6, 10, 4);
  check_equal(F2(gather<1>(x, good.to(gpu))), F2(gather<1>(x.cpu(), good)));
  auto w = randn<float, dyn_shape<2>>(10, 6);
  check_close(F2(w.to(gpu) * 2.0f), F2(w * 2.0f), 0.0, 0.0);
  tenet::cuda::synchronize();
}

// An integer division by zero (remainder, fmod, floor_divide of integer tensors) is found by the
// kernel and raised as value_error at the next wait, as the CPU raises it after its loop; nonzero
// divisors give the CPU's values (Python's signs); a cuda::event's synchronize is a wait too.
TEST_CASE("cuda ops: integer division by zero is value_error at the next wait") {
  I2 a = randint<std::int64_t, dyn_shape<2>>(-50, 50, 8, 33);
  I2 b = randint<std::int64_t, dyn_shape<2>>(1, 9, 8, 33);
  for (std::int64_t i = 0; i < b.numel(); i += 3) b.data()[i] = -b.data()[i];  // negative divisors too
  const I2 ag = a.to(gpu), bg = b.to(gpu);
  check_equal(I2(remainder(ag, bg)), I2(remainder(a, b)));
  check_equal(I2(fmod(ag, bg)), I2(fmod(a, b)));
  check_equal(I2(floor_divide(ag, bg)), I2(floor_divide(a, b)));
  // a broadcast divisor and a transposed (strided-kernel) operand
  check_equal(I2(remainder(ag.t(), bg.t())), I2(remainder(a.t(), b.t())));
  I2 z = b;
  z.data()[40] = 0;
  const I2 zg = z.to(gpu);
  CHECK_THROWS_AS(I2(remainder(ag, zg)).cpu(), value_error);
  CHECK_THROWS_AS(I2(fmod(ag, zg)).cpu(), value_error);
  CHECK_THROWS_AS(I2(floor_divide(ag, zg)).cpu(), value_error);
  CHECK_THROWS_AS(I2(remainder(ag.t(), zg.t())).cpu(), value_error);  // the strided kernel
  using I32 = Tensor<std::int32_t, dyn_shape<1>>;
  const I32 ai = randint<std::int32_t, dyn_shape<1>>(-9, 9, 100).to(gpu);
  CHECK_THROWS_AS(I32(remainder(ai, std::int32_t(0))).cpu(), value_error);  // a scalar divisor
  // inside a reduction's input
  using I1r = Tensor<std::int64_t, dyn_shape<1>>;
  CHECK_THROWS_AS(I1r(sum<1>(remainder(ag, zg))).cpu(), value_error);
  // the message, raised by an event's synchronize; reported once
  I2 q;
  CHECK_NOTHROW(q = remainder(ag, zg));
  tenet::cuda::event done;
  done.record();
  try {
    done.synchronize();
    FAIL("no value_error");
  } catch (const value_error& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("integer division by zero in remainder") != std::string::npos);
    CHECK(m.find("first wait for cuda:0") != std::string::npos);
  }
  CHECK_NOTHROW(tenet::cuda::synchronize());
  // floating division by zero is not an error (inf / nan, as PyTorch)
  using F2 = Tensor<float, dyn_shape<2>>;
  const F2 fz = zg.to<float>();
  F2 inf;
  CHECK_NOTHROW(inf = F2(ag.to<float>() / fz).cpu());
  // an event's synchronize also reports a bad gather index
  const I2 badi = full<std::int64_t, dyn_shape<2>>(std::int64_t(7), 2, 2).to(gpu);
  F2 gx = randn<float, dyn_shape<2>>(2, 3).to(gpu);
  F2 gy;
  CHECK_NOTHROW(gy = gather<1>(gx, badi));
  done.record();
  CHECK_THROWS_AS(done.synchronize(), index_error);
  tenet::cuda::synchronize();
}

TEST_CASE("cuda ops: cat / stack of device tensors, tril / triu") {
  manual_seed(25);
  using F2 = Tensor<float, dyn_shape<2>>;
  using B2 = Tensor<bfloat16, dyn_shape<2>>;
  auto a = randn<float, dyn_shape<2>>(4, 7), b = randn<float, dyn_shape<2>>(3, 7), c = randn<float, dyn_shape<2>>(0, 7);
  auto da = a.to(gpu), db = b.to(gpu), dc = c.to(gpu);
  F2 g0 = cat<0>(da, db, dc);
  CHECK(g0.device() == gpu);
  check_equal(g0, F2(cat<0>(a, b, c)));
  F2 at = a.t(), bt = b.t();
  F2 dat = da.t(), dbt = db.t();
  check_equal(F2(cat<1>(dat, dbt)), F2(cat<1>(at, bt)));  // transposed inputs
  check_equal(F2(cat<0>(std::vector<F2>{da, db, da})), F2(cat<0>(std::vector<F2>{a, b, a})));
  check_equal(Tensor<float, dyn_shape<3>>(stack<0>(da, da * 2.0f)), Tensor<float, dyn_shape<3>>(stack<0>(a, a * 2.0f)));
  check_equal(Tensor<float, dyn_shape<3>>(stack<2>(da, da)), Tensor<float, dyn_shape<3>>(stack<2>(a, a)));
  B2 ab = a.to<bfloat16>(), bb = b.to<bfloat16>();
  check_equal(B2(cat<0>(ab.to(gpu), bb.to(gpu))), B2(cat<0>(ab, bb)));
  // one device per cat
  CHECK_THROWS_AS(F2(cat<0>(da, b)), device_error);
  // tril / triu: their position masks are made on the input's device
  check_equal(F2(tril(da)), F2(tril(a)));
  check_equal(F2(triu(da, 1)), F2(triu(a, 1)));
}

namespace {
/// True when every element of the GPU tensor g (fp32) is exactly a value of L.
template <class L>
bool all_representable(const Tensor<float, dyn_shape<2>>& g) {
  auto h = g.cpu();
  for (std::int64_t i = 0; i < h.numel(); ++i) {
    const float v = h.data()[i];
    if (static_cast<float>(static_cast<L>(v)) != v) return false;
  }
  return true;
}
}  // namespace

TEST_CASE("cuda autocast: fp32 matmul and linear + bias run in bf16 / fp16; guards nest and restore") {
  manual_seed(26);
  using F1 = Tensor<float, dyn_shape<1>>;
  using F2 = Tensor<float, dyn_shape<2>>;
  using D2 = Tensor<double, dyn_shape<2>>;
  using B2 = Tensor<bfloat16, dyn_shape<2>>;
  using H2 = Tensor<float16, dyn_shape<2>>;
  F2 a = randn<float, dyn_shape<2>>(64, 96), b = randn<float, dyn_shape<2>>(96, 80), w = randn<float, dyn_shape<2>>(80, 96);
  F1 bias = randn<float, dyn_shape<1>>(80);
  auto da = a.to(gpu), db = b.to(gpu), dw = w.to(gpu);
  auto dbias = bias.to(gpu);
  // the references: the CPU's products of the rounded operands, rounded to the low dtype
  B2 ab = a.to<bfloat16>(), bb = b.to<bfloat16>();
  F2 ref_b = B2(matmul(ab, bb)).to<float>();
  H2 ah = a.to<float16>(), bh = b.to<float16>();
  F2 ref_h = H2(matmul(ah, bh)).to<float>();
  F2 ref_f = matmul(a, b);
  CHECK(!is_autocast_enabled());
  CHECK(!all_representable<bfloat16>(F2(matmul(da, db))));
  {
    autocast ac(gpu, dtype::bfloat16);
    CHECK(is_autocast_enabled());
    CHECK(get_autocast_dtype() == dtype::bfloat16);
    F2 y = matmul(da, db);
    CHECK(all_representable<bfloat16>(y));
    check_close(y, ref_b, 1e-2, 1e-2);
    {
      autocast inner(gpu, dtype::float16);
      F2 yh = matmul(da, db);
      CHECK(all_representable<float16>(yh));
      check_close(yh, ref_h, 2e-3, 2e-3);
      {
        autocast off(gpu, dtype::float16, false);
        check_close(F2(matmul(da, db)), ref_f, 1e-4, 1e-4);
      }
      CHECK(get_autocast_dtype() == dtype::float16);
    }
    CHECK(get_autocast_dtype() == dtype::bfloat16);
    // linear + bias (the cuBLASLt epilogue): operands and bias in bf16, one rounding
    F2 lin = matmul(da, dw.t()) + dbias;
    CHECK(all_representable<bfloat16>(lin));
    B2 lin_ref = matmul(ab, B2(w.to<bfloat16>()).t()) + bias.to<bfloat16>();
    check_close(lin, lin_ref, 2e-2, 2e-2);
    // a transposed view as an operand
    check_close(F2(matmul(da, db.t().t())), ref_b, 1e-2, 1e-2);
    // float64 is not cast; CPU tensors are not affected
    D2 ad = a.to<double>(), bd = b.to<double>();
    check_close(D2(matmul(ad.to(gpu), bd.to(gpu))), D2(matmul(ad, bd)), 1e-10, 1e-10);
    F2 on_cpu = matmul(a, b);
    check_close(on_cpu.to(gpu), ref_f, 0.0, 0.0);
  }
  CHECK(!is_autocast_enabled());
  CHECK(!all_representable<bfloat16>(F2(matmul(da, db))));
  CHECK_THROWS_AS(autocast(tenet::cpu, dtype::bfloat16), value_error);
  CHECK_THROWS_AS(autocast(gpu, dtype::float32), value_error);
}

// --- random draws on the GPU -------------------------------------------------------------------
namespace {
/// rand_lazy on the GPU (the default device under a guard), alone and inside a fused expression,
/// against the same draw on the CPU: the same Philox stream, so equal bit for bit.
template <class T>
void check_uniform_draw(std::int64_t rows, std::int64_t cols) {
  using T2 = Tensor<T, dyn_shape<2>>;
  INFO("sizes " << rows << " x " << cols);
  manual_seed(7);
  const T2 c = rand_lazy<T, dyn_shape<2>>(rows, cols);
  const T2 cf = rand_lazy<T, dyn_shape<2>>(rows, cols) * T(2) - T(1);
  manual_seed(7);
  T2 g, gf;
  {
    const device_guard on(gpu);
    g = rand_lazy<T, dyn_shape<2>>(rows, cols);
    gf = rand_lazy<T, dyn_shape<2>>(rows, cols) * T(2) - T(1);
  }
  check_equal(g, c);
  check_equal(gf, cf);
}
}  // namespace

TEST_CASE("cuda random: rand_lazy and dropout on the GPU draw the CPU's values; devices do not mix") {
  for (auto [r, c] : {std::pair<std::int64_t, std::int64_t>{37, 129}, {1, 1}, {0, 5}, {1025, 1031}}) {
    check_uniform_draw<float>(r, c);
    check_uniform_draw<double>(r, c);  // two Philox blocks per four elements
    check_uniform_draw<bfloat16>(r, c);
    check_uniform_draw<float16>(r, c);
  }
  // the draw inside other kernels: a reduction, a row kernel's producer, broadcast over rows, a
  // GEMM operand, written through copy_ into a strided view
  manual_seed(5);
  const auto x0 = randn<float, dyn_shape<2>>(300, 257);
  const auto xg0 = x0.to(gpu);
  auto forms = [](const auto& x) {
    const device_guard on(x.device());
    using T1 = Tensor<float, dyn_shape<1>>;
    using T2 = Tensor<float, dyn_shape<2>>;
    T1 s = sum<1>(rand_lazy<float, dyn_shape<2>>(300, 257) * x);
    T2 sm = softmax<-1>(x + rand_lazy<float, dyn_shape<2>>(300, 257));
    T2 row = x * rand_lazy<float, dyn_shape<1>>(257);
    T2 mm = matmul(rand_lazy<float, dyn_shape<2>>(16, 300), x);
    T2 view = zeros<float, dyn_shape<2>>(257, 300);
    view.t().copy_(rand_lazy<float, dyn_shape<2>>(300, 257) - x);
    return std::tuple<T1, T2, T2, T2, T2>{s, sm, row, mm, view};
  };
  manual_seed(13);
  const auto [sc, smc, rowc, mmc, vc] = forms(x0);
  manual_seed(13);
  const auto [sg, smg, rowg, mmg, vg] = forms(xg0);
  check_close(sg, sc, 1e-5, 1e-5);
  check_close(smg, smc, 1e-5, 1e-7);
  check_equal(rowg, rowc);
  check_close(mmg, mmc, 1e-5, 1e-5);
  check_equal(vg, vc);
  // the draw read as 16-byte groups by the reductions' two-dim paths (rows, then columns)
  auto reduced = [](const device& d) {
    const device_guard on(d);
    using T1 = Tensor<float, dyn_shape<1>>;
    return std::pair<T1, T1>{sum<1>(rand_lazy<float, dyn_shape<2>>(300, 256) * 2.0f),
                             sum<0>(rand_lazy<float, dyn_shape<2>>(300, 256) + 1.0f)};
  };
  manual_seed(17);
  const auto [rows_c, cols_c] = reduced(x0.device());
  manual_seed(17);
  const auto [rows_g, cols_g] = reduced(xg0.device());
  check_close(rows_g, rows_c, 1e-5, 1e-5);
  check_close(cols_g, cols_c, 1e-5, 1e-5);
  // dropout: the mask is drawn on the input's device, from the same stream
  manual_seed(3);
  const auto x = randn<float, dyn_shape<2>>(333, 77);
  const auto xg = x.to(gpu);
  for (double p : {0.0, 0.3, 1.0}) {
    INFO("p " << p);
    manual_seed(11);
    const auto yc = dropout(x, p);
    manual_seed(11);
    const auto yg = dropout(xg, p);
    check_equal(yg, yc);
    manual_seed(11);
    const auto bc = dropout(x.to<bfloat16>(), p);
    manual_seed(11);
    const auto bg = dropout(xg.to<bfloat16>(), p);
    check_equal(bg, bc);
  }
  // a draw placed on the CPU (the default device) with a GPU tensor, or written into a CPU tensor
  // from the GPU: device_error naming both devices
  const auto mixed = [&] { return Tensor<float, dyn_shape<2>>(rand_lazy<float, dyn_shape<2>>(333, 77) * xg); };
  CHECK_THROWS_AS(mixed(), device_error);
  CHECK_THROWS_WITH(mixed(), Catch::Contains("cpu") && Catch::Contains("cuda:0"));
  Tensor<float, dyn_shape<2>> host({4, 4}, tenet::cpu);
  const device_guard on(gpu);
  CHECK_THROWS_AS(host.copy_(rand_lazy<float, dyn_shape<2>>(4, 4)), device_error);
}

namespace {
/// The factories under a CUDA default device: the draw is written on the GPU and equals the CPU's
/// for the same seed (uniform and randint bit for bit; normal bit for bit for float and smaller,
/// double to a few ulp: two math libraries' log / cos / sin).
template <class T>
void check_factories_on_gpu(const char* dtype, std::int64_t r, std::int64_t c) {
  INFO("dtype " << dtype << ", " << r << "x" << c);
  using X = Tensor<T, dyn_shape<2>>;
  manual_seed(21);
  const X uc = rand<T, dyn_shape<2>>(r, c), nc = randn<T, dyn_shape<2>>(r, c);
  const X ulc = rand_like(uc), nlc = randn_like(uc);
  X ic({r, c}, tenet::cpu);
  tenet::nn::init::uniform_(ic, -2.0, 3.0);
  X jc({r, c}, tenet::cpu);
  tenet::nn::init::normal_(jc, 1.0, 0.5);
  manual_seed(21);
  X ug, ng, ulg, nlg, ig, jg;
  {
    const device_guard on(gpu);
    ug = rand<T, dyn_shape<2>>(r, c);
    ng = randn<T, dyn_shape<2>>(r, c);
    ulg = rand_like(ug);
    nlg = randn_like(ug);
    ig = X({r, c});
    tenet::nn::init::uniform_(ig, -2.0, 3.0);
    jg = X({r, c});
    tenet::nn::init::normal_(jg, 1.0, 0.5);
  }
  for (const X* t : {&ug, &ng, &ulg, &nlg, &ig, &jg}) CHECK(t->device() == gpu);
  check_equal(ug, uc);
  check_equal(ulg, ulc);
  check_equal(ig, ic);
  const double tol = std::is_same_v<T, double> ? 1e-13 : 0.0;
  check_close(ng, nc, tol, tol);
  check_close(nlg, nlc, tol, tol);
  check_close(jg, jc, tol, tol);
}
template <class I>
void check_randint_on_gpu(std::int64_t low, std::int64_t high) {
  INFO("randint [" << low << ", " << high << ") of a " << sizeof(I) << "-byte type");
  manual_seed(8);
  const auto c = randint<I, dyn_shape<1>>(low, high, 10007);
  manual_seed(8);
  Tensor<I, dyn_shape<1>> g;
  {
    const device_guard on(gpu);
    g = randint<I, dyn_shape<1>>(low, high, 10007);
  }
  CHECK(g.device() == gpu);
  check_equal(g, c);
}
}  // namespace

TEST_CASE("cuda random: rand / randn / randint / *_like / init fill on the GPU with the CPU's values") {
  for (auto [r, c] : {std::pair<std::int64_t, std::int64_t>{37, 129}, {1, 1}, {0, 5}, {1, 3}, {513, 1031}}) {
    check_factories_on_gpu<float>("float", r, c);
    check_factories_on_gpu<double>("double", r, c);
    check_factories_on_gpu<bfloat16>("bfloat16", r, c);
    check_factories_on_gpu<float16>("float16", r, c);
  }
  check_randint_on_gpu<std::int64_t>(-3, 5);
  check_randint_on_gpu<std::int64_t>(-(std::int64_t{1} << 40), std::int64_t{1} << 40);  // two words
  check_randint_on_gpu<std::int32_t>(0, 1000);
  check_randint_on_gpu<std::uint8_t>(0, 256);
  check_randint_on_gpu<float>(-10, 10);
  // the stream goes on where the GPU draw left it: the next CPU draw equals the one after a CPU draw
  manual_seed(4);
  (void)rand<float, dyn_shape<1>>(999);
  const auto after_cpu = rand<float, dyn_shape<1>>(7);
  manual_seed(4);
  {
    const device_guard on(gpu);
    (void)rand<float, dyn_shape<1>>(999);
  }
  const auto next = rand<float, dyn_shape<1>>(7);
  REQUIRE(next.device().is_cpu());
  for (std::int64_t i = 0; i < 7; ++i) CHECK(next.data()[i] == after_cpu.data()[i]);
  // bad bounds: value_error before any launch, the device stays usable
  const device_guard on(gpu);
  CHECK_THROWS_AS((randint<std::int64_t, dyn_shape<1>>(5, 5, 10)), value_error);
  Tensor<float, dyn_shape<1>> t({16});
  CHECK_THROWS_AS(tenet::nn::init::normal_(t, 0.0, -1.0), value_error);
  CHECK_THROWS_AS(tenet::nn::init::uniform_(t, 2.0, 1.0), value_error);
  CHECK(Tensor<float, dyn_shape<1>>(rand<float, dyn_shape<1>>(16) * 0.0f).cpu().data()[3] == 0.0f);
}

TEST_CASE("cuda ops: scaled_dot_product_attention in float32 (the math variant: the CUDA kernels are bf16 / fp16)") {
  using S4 = dyn_shape<4>;
  manual_seed(11);
  const auto q = randn<float, S4>(2, 4, 37, 16), k = randn<float, S4>(2, 2, 45, 16), v = randn<float, S4>(2, 2, 45, 8);
  const auto qd = q.to(gpu), kd = k.to(gpu), vd = v.to(gpu);
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    const sdpa_options o{.is_causal = causal, .enable_gqa = true};
    check_close(Tensor<float, S4>(scaled_dot_product_attention(qd, kd, vd, o)),
                Tensor<float, S4>(scaled_dot_product_attention(q, k, v, o)), 1e-4, 1e-5);
  }
  Tensor<bool, dyn_shape<2>> keep = rand<float, dyn_shape<2>>(37, 45) > 0.3f;
  for (std::int64_t j = 0; j < 45; ++j) keep.data()[3 * 45 + j] = false;  // a row that sees no key: 0
  check_close(Tensor<float, S4>(scaled_dot_product_attention(qd, kd, vd, keep.to(gpu), {.enable_gqa = true})),
              Tensor<float, S4>(scaled_dot_product_attention(q, k, v, keep, {.enable_gqa = true})), 1e-4, 1e-5);
  // dropout: the GPU draws the CPU's Philox values
  manual_seed(21);
  const Tensor<float, S4> dropped_gpu = scaled_dot_product_attention(qd, kd, vd, {.dropout_p = 0.25, .enable_gqa = true});
  manual_seed(21);
  const Tensor<float, S4> dropped_cpu = scaled_dot_product_attention(q, k, v, {.dropout_p = 0.25, .enable_gqa = true});
  check_close(dropped_gpu, dropped_cpu, 1e-4, 1e-5);
  // forcing a variant CUDA lacks is an error that says why
  CHECK_THROWS_WITH(eval(scaled_dot_product_attention<sdpa::flash>(qd, kd, vd, {.enable_gqa = true})),
                    Catch::Contains("flash: the cuda_gpu backend has no kernel for float32 inputs"));
}
