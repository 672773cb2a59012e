// CUDA backend tests: every result on cuda(0) against the same expression on the CPU backend.
// Without a GPU the program prints why and exits with 77, which CTest reports as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "gpu_main.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include <tenet/cuda.hpp>

#include "check_close.hpp"

using namespace tenet;
using F2 = Tensor<float, dyn_shape<2>>;
using F3 = Tensor<float, dyn_shape<3>>;
using B2 = Tensor<bfloat16, dyn_shape<2>>;

using tenet::test::check_close;
namespace {

F2 cpu_randn(std::int64_t m, std::int64_t n) { return randn<float, dyn_shape<2>>(m, n); }

}  // namespace

TEST_CASE("cuda: copies host <-> device keep the values; views are copied contiguous") {
  manual_seed(1);
  F2 x = cpu_randn(37, 53);
  auto d = x.to(tenet::cuda(0));
  CHECK(d.device() == tenet::device(tenet::cuda(0)));
  CHECK(d.is_contiguous());
  check_close(d, x, 0, 0);
  // a transposed view goes through a contiguous copy
  auto xt = x.transpose<0, 1>();
  auto dt = xt.to(tenet::cuda(0));
  CHECK(dt.sizes() == xt.sizes());
  check_close(dt, F2(xt.contiguous()), 0, 0);
  // printing copies to the host and names the device, as PyTorch does
  CHECK(to_string(d.slice<0>(0, 1)).find("device='cuda:0'") != std::string::npos);
  // the device copy of a device tensor is itself; to(cpu) of a cpu tensor too
  CHECK(d.to(tenet::cuda(0)).shares_storage(d));
  CHECK(x.cpu().shares_storage(x));
}

TEST_CASE("cuda: one fused pointwise kernel, contiguous, broadcast and strided") {
  manual_seed(2);
  F2 x = cpu_randn(129, 257), row = cpu_randn(1, 257), col = cpu_randn(129, 1);
  auto dx = x.to(tenet::cuda(0)), drow = row.to(tenet::cuda(0)), dcol = col.to(tenet::cuda(0));
  SECTION("gelu(x * a + b) * c, contiguous (vector path)") {
    F2 ref = gelu(x * 1.5f + 0.25f) * 0.75f;
    F2 got = gelu(dx * 1.5f + 0.25f) * 0.75f;
    check_close(got, ref, 1e-5, 1e-6);
  }
  SECTION("broadcast of a row and a column") {
    F2 ref = x * row + col;
    F2 got = dx * drow + dcol;
    check_close(got, ref, 1e-6, 1e-6);
  }
  SECTION("two-dim groups: a row bias, a column scale, sliced rows, a batch broadcast, bf16 and fp64") {
    F2 w = cpu_randn(130, 256);
    F2 brow = cpu_randn(1, 256), bcol = cpu_randn(130, 1);
    auto dw = w.to(tenet::cuda(0)), dbrow = brow.to(tenet::cuda(0)), dbcol = bcol.to(tenet::cuda(0));
    check_close(F2(dw * dbrow + dbcol), F2(w * brow + bcol), 1e-6, 1e-6);
    check_close(F2(dw.slice<1>(0, 128) * dbcol), F2(w.slice<1>(0, 128) * bcol), 1e-6, 1e-6);
    check_close(F2(dw.slice<1>(128, 256) - dbrow.slice<1>(4, 132)), F2(w.slice<1>(128, 256) - brow.slice<1>(4, 132)), 1e-6,
                1e-6);
    F3 att = randn<float, dyn_shape<3>>(6, 40, 40), mask = randn<float, dyn_shape<3>>(1, 40, 40);
    check_close(F3(att.to(tenet::cuda(0)) + mask.to(tenet::cuda(0))), F3(att + mask), 1e-6, 1e-6);
    B2 wb = w.to<bfloat16>(), rb = brow.to<bfloat16>();
    check_close(B2(wb.to(tenet::cuda(0)) * rb.to(tenet::cuda(0))), B2(wb * rb), 0, 0);
    auto wd = w.to<double>();
    auto cd = bcol.to<double>();
    check_close(Tensor<double, dyn_shape<2>>(wd.to(tenet::cuda(0)) + cd.to(tenet::cuda(0))),
                Tensor<double, dyn_shape<2>>(wd + cd), 0, 0);
    F2 into = zeros<float, dyn_shape<2>>(130, 260).to(tenet::cuda(0));  // a destination with a row stride
    into.slice<1>(0, 256).copy_(dw + dbrow);
    check_close(F2(into.slice<1>(0, 256).contiguous()), F2(w + brow), 1e-6, 1e-6);
  }
  SECTION("rows of two dims: a per-channel scale and shift over N, C, H x W, a residual, bf16, fallbacks") {
    using F4 = Tensor<float, dyn_shape<4>>;
    const auto g = tenet::cuda(0);
    F4 y = randn<float, dyn_shape<4>>(3, 5, 6, 8), r = randn<float, dyn_shape<4>>(3, 5, 6, 8);  // H x W: 12 groups
    F3 sc = randn<float, dyn_shape<3>>(5, 1, 1), sh = randn<float, dyn_shape<3>>(5, 1, 1);
    const F4 dy = y.to(g);
    const F3 dsc = sc.to(g), dsh = sh.to(g);
    check_close(F4(relu(dy * dsc + dsh)), F4(relu(y * sc + sh)), 1e-6, 1e-6);  // ResNet's eval batch norm
    check_close(F4(relu(dy * dsc + dsh + r.to(g))), F4(relu(y * sc + sh + r)), 1e-6, 1e-6);
    // a channel slice: rows (n, c) at strides 240 and 48 of the parent
    check_close(F4(dy.slice<1>(1, 4) * dsc.slice<0>(1, 4)), F4(y.slice<1>(1, 4) * sc.slice<0>(1, 4)), 1e-6, 1e-6);
    // H x W = 9, not whole 16-byte groups: the index-per-element path
    F4 odd = randn<float, dyn_shape<4>>(2, 5, 3, 3);
    check_close(F4(odd.to(g) * dsc - dsh), F4(odd * sc - sh), 1e-6, 1e-6);
    Tensor<bfloat16, dyn_shape<4>> yb = y.to<bfloat16>();
    Tensor<bfloat16, dyn_shape<3>> scb = sc.to<bfloat16>();
    check_close(Tensor<bfloat16, dyn_shape<4>>(yb.to(g) * scb.to(g)), Tensor<bfloat16, dyn_shape<4>>(yb * scb), 0, 0);
    // a lazy draw in the two-dim rows: element (n, c, h, w) draws the CPU's value
    auto drawn = [](const F3& scale) {
      const device_guard on(scale.device());
      return F4(rand_lazy<float, dyn_shape<4>>(3, 5, 6, 8) * scale);
    };
    manual_seed(19);
    const F4 dc = drawn(sc);
    manual_seed(19);
    check_close(drawn(dsc), dc, 0, 0);
  }
  SECTION("rows of three dims: attention's (B, H, T, D) heads as views of a (B, T, 3C) projection, and back") {
    using F4 = Tensor<float, dyn_shape<4>>;
    using B4 = Tensor<bfloat16, dyn_shape<4>>;
    const auto g = tenet::cuda(0);
    // B 2, T 10, C 32: 4 heads of 8; the heads' dims do not coalesce, so each 16-byte group of a
    // head row is found from three row indices (the rows mode), not per element
    F3 qkv = randn<float, dyn_shape<3>>(2, 10, 96);
    const F3 dqkv = qkv.to(g);
    auto head = [](auto& t, int i) { return t.template narrow<2>(i * 32, 32).template reshape<dyn, dyn, dyn, dyn>(2, 10, 4, 8).template transpose<1, 2>(); };
    for (int i = 0; i < 3; ++i) {
      check_close(B4(cast<bfloat16>(head(dqkv, i))), B4(cast<bfloat16>(head(qkv, i))), 0, 0);
      check_close(F4(head(dqkv, i) * 2.0f + 1.0f), F4(head(qkv, i) * 2.0f + 1.0f), 0, 0);
    }
    // a head's gradient (B, H, T, D) written into its slot of a (B, T, 3C) buffer
    const F4 gh = randn<float, dyn_shape<4>>(2, 4, 10, 8);
    F3 into = zeros<float, dyn_shape<3>>(2, 10, 96).to(g), want = zeros<float, dyn_shape<3>>(2, 10, 96);
    auto slot = [](auto& t) { return t.template narrow<2>(32, 32).template reshape<dyn, dyn, dyn, dyn>(2, 10, 4, 8); };
    slot(into).copy_(gh.to(g).transpose<1, 2>());
    slot(want).copy_(gh.transpose<1, 2>());
    CHECK(eval(amax(abs(want))).item() > 0.0f);  // the slot is a view: the copy reached the buffer
    check_close(F3(into), want, 0, 0);
    // a lazy draw over the heads: element (b, h, t, d) draws the CPU's value
    auto drawn = [&](const F3& base) {
      const device_guard on(base.device());
      return F4(rand_lazy<float, dyn_shape<4>>(2, 4, 10, 8) * head(base, 2));
    };
    manual_seed(23);
    const F4 dc = drawn(qkv);
    manual_seed(23);
    check_close(drawn(dqkv), dc, 0, 0);
  }
  SECTION("a transposed (non-contiguous) operand") {
    F2 sq = cpu_randn(64, 64);
    auto dsq = sq.to(tenet::cuda(0));
    F2 ref = exp(sq.transpose<0, 1>()) - sq;
    F2 got = exp(dsq.transpose<0, 1>()) - dsq;
    check_close(got, ref, 1e-5, 1e-6);
  }
  SECTION("an odd size and an offset view (the scalar tail and the unaligned path)") {
    auto xs = x.slice<1>(1, 256);
    auto dxs = dx.slice<1>(1, 256);
    F2 ref = xs * xs;
    F2 got = dxs * dxs;
    check_close(got, ref, 1e-6, 1e-7);
  }
  SECTION("bfloat16 in, float compute, bfloat16 out") {
    B2 xb = x.to<bfloat16>();
    auto dxb = xb.to(tenet::cuda(0));
    B2 ref = gelu(xb * bfloat16(1.5f) + bfloat16(0.25f));
    B2 got = gelu(dxb * bfloat16(1.5f) + bfloat16(0.25f));
    check_close(got, ref, 1e-2, 1e-2);
  }
  SECTION("float16: device conversions round as the host's") {
    Tensor<float16, dyn_shape<2>> xh = x.to<float16>();
    auto dxh = xh.to(tenet::cuda(0));
    Tensor<float16, dyn_shape<2>> ref = xh * xh - float16(0.5f);
    Tensor<float16, dyn_shape<2>> got = dxh * dxh - float16(0.5f);
    check_close(got, ref, 0, 0);
  }
  SECTION("16-bit add, sub and mul two lanes per instruction: the bits of float math, rounded") {
    // special values among the normal ones: subnormals, overflow, infinities, NaN, signed zeros
    auto run = [&]<class H>(H) {
      const std::int64_t n = 4099;  // odd: the scalar tail too
      Tensor<H, dyn_shape<1>> a({n}), b({n}), c({n});
      const std::uint16_t special[] = {0x0000, 0x8000, 0x0001, 0x8003, 0x7c00, 0xfc00, 0x7e00, 0x7f80, 0xff80, 0x7fc0,
                                       0x7bff, 0x7f7f, 0x3c00, 0x3f80, 0x0400, 0x0080};
      F2 r = cpu_randn(3, n);
      for (std::int64_t i = 0; i < n; ++i) {
        a.data()[i] = i % 7 == 0 ? H::from_bits(special[(i / 7) % 16]) : H(r.data()[i] * 100.0f);
        b.data()[i] = i % 11 == 0 ? H::from_bits(special[(i / 11) % 16]) : H(r.data()[n + i] * 1e-3f);
        c.data()[i] = H(r.data()[2 * n + i]);
      }
      auto da = a.to(tenet::cuda(0)), db = b.to(tenet::cuda(0)), dc = c.to(tenet::cuda(0));
      Tensor<H, dyn_shape<1>> ref = (a * b + c) - a * H(3.0f);
      Tensor<H, dyn_shape<1>> got = (da * db + dc) - da * H(3.0f);
      auto g = got.cpu();
      std::int64_t bad = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const float x = static_cast<float>(g.data()[i]), y = static_cast<float>(ref.data()[i]);
        if (std::isnan(x) && std::isnan(y)) continue;
        if (g.data()[i].bits != ref.data()[i].bits) ++bad;
      }
      CHECK(bad == 0);
    };
    run(bfloat16{});
    run(float16{});
  }
  SECTION("16-bit gelu: the host's values (the same Phi fit; ex2.approx on the GPU) to one ulp") {
    Tensor<float16, dyn_shape<2>> xh = F2(x * 3.0f).to<float16>();
    B2 xb = F2(x * 3.0f).to<bfloat16>();
    Tensor<float16, dyn_shape<2>> gh = gelu(xh.to(tenet::cuda(0)));
    B2 gb = gelu(xb.to(tenet::cuda(0)));
    check_close(gh, Tensor<float16, dyn_shape<2>>(gelu(xh)), 0x1p-10, 0x1p-24);
    check_close(gb, B2(gelu(xb)), 0x1p-7, 1e-30);
  }
  SECTION("double") {
    Tensor<double, dyn_shape<2>> xd = x.to<double>();
    auto dd = xd.to(tenet::cuda(0));
    Tensor<double, dyn_shape<2>> ref = tanh(xd) * xd;
    Tensor<double, dyn_shape<2>> got = tanh(dd) * dd;
    check_close(got, ref, 1e-12, 1e-14);
  }
}

TEST_CASE("cuda: reductions along inner, middle and outer axes, and a long split one") {
  manual_seed(3);
  F3 x = randn<float, dyn_shape<3>>(33, 65, 129);
  auto dx = x.to(tenet::cuda(0));
  SECTION("sum over the inner dim (rows kernel)") {
    F2 ref = sum<2>(x * x);
    F2 got = sum<2>(dx * dx);
    check_close(got, ref, 1e-5, 1e-5);
  }
  SECTION("sum over the middle dim (columns kernel)") {
    F2 ref = sum<1>(x);
    F2 got = sum<1>(dx);
    check_close(got, ref, 1e-5, 1e-4);
  }
  SECTION("amax over the outer dim, keepdim") {
    F3 ref = amax<0>(x, keepdim);
    F3 got = amax<0>(dx, keepdim);
    check_close(got, ref, 0, 0);
  }
  SECTION("mean over two dims") {
    Tensor<float, dyn_shape<1>> ref = mean<0, 2>(x);
    Tensor<float, dyn_shape<1>> got = mean<0, 2>(dx);
    check_close(got, ref, 1e-5, 1e-6);
  }
  SECTION("a full sum of 4 Mi elements (split over the card, then combined)") {
    Tensor<float, dyn_shape<1>> big = randn<float, dyn_shape<1>>(4 << 20);
    auto dbig = big.to(tenet::cuda(0));
    Tensor<float, shape<>> ref = sum(big);
    Tensor<float, shape<>> got = sum(dbig);
    check_close(got, ref, 1e-4, 1e-2);
  }
}

TEST_CASE("cuda: means, var and a mean loss of 16-bit inputs longer than 65504 (float, one rounding)") {
  manual_seed(9);
  using H1 = Tensor<float16, dyn_shape<1>>;
  using H0 = Tensor<float16, shape<>>;
  // a float16 sum or count above 65504 is infinite: these were NaN through 16-bit decompositions
  Tensor<float16, dyn_shape<2>> h = cast<float16>(cpu_randn(3, 100000) * 2.0f + 0.5f);
  auto dh = h.to(tenet::cuda(0));
  check_close(H1(mean<1>(dh)), H1(mean<1>(h)), 1e-3, 1e-3);
  check_close(H1(mean<0>(dh.transpose<0, 1>())), H1(mean<1>(h)), 1e-3, 1e-3);  // a columns reduction
  check_close(H1(var<1>(dh)), H1(var<1>(h)), 2e-3, 1e-3);                       // the row kernel
  check_close(H1(var<0>(dh.transpose<0, 1>())), H1(var<1>(h)), 2e-3, 1e-3);     // the decomposition
  check_close(H0(mean(dh)), H0(mean(h)), 1e-3, 1e-3);
  Tensor<float16, dyn_shape<2>> logits = cpu_randn(70000, 5).to<float16>();
  Tensor<std::int64_t, dyn_shape<1>> target = remainder(arange<std::int64_t>(0, 70000), std::int64_t{5});
  H0 ce = cross_entropy(logits.to(tenet::cuda(0)), target.to(tenet::cuda(0)));
  const float want = float(H0(cross_entropy(logits, target)).item());
  REQUIRE(std::isfinite(want));
  CHECK(std::fabs(float(ce.cpu().item()) - want) <= 2e-3f * want);
}

TEST_CASE("cuda: two-dim reductions (one kept and one reduced dim after coalescing) and their fallbacks") {
  manual_seed(5);
  using F1 = Tensor<float, dyn_shape<1>>;
  SECTION("rows, a warp per row: sum of a fused tree, amax, prod, keepdim over two trailing dims") {
    F2 x = cpu_randn(300, 256);
    auto dx = x.to(tenet::cuda(0));
    check_close(F1(sum<1>(dx * dx + 1.5f)), F1(sum<1>(x * x + 1.5f)), 1e-5, 1e-5);
    check_close(F1(amax<1>(dx)), F1(amax<1>(x)), 0, 0);
    check_close(F1(amin<1>(dx)), F1(amin<1>(x)), 0, 0);
    check_close(F1(prod<1>(dx * 0.01f + 1.0f)), F1(prod<1>(x * 0.01f + 1.0f)), 1e-5, 1e-6);
    F3 x3 = randn<float, dyn_shape<3>>(5, 6, 8);
    check_close(F3(sum<1, 2>(x3.to(tenet::cuda(0)), keepdim)), F3(sum<1, 2>(x3, keepdim)), 1e-5, 1e-5);
    F3 x1 = randn<float, dyn_shape<3>>(300, 1, 256);  // a size-1 dim between them
    check_close(F2(sum<2>(x1.to(tenet::cuda(0)))), F2(sum<2>(x1)), 1e-5, 1e-5);
  }
  SECTION("rows, a block per row: few long rows, split over the card") {
    for (std::int64_t rows : {1, 3, 400}) {
      INFO("rows " << rows);
      F2 x = cpu_randn(rows, rows == 400 ? 8192 : 100000);
      auto dx = x.to(tenet::cuda(0));
      check_close(F1(sum<1>(dx)), F1(sum<1>(x)), 1e-4, 1e-3);
      check_close(F1(amax<1>(dx)), F1(amax<1>(x)), 0, 0);
    }
  }
  SECTION("columns: sum and amax over leading dims, split over the card") {
    F2 x = cpu_randn(1000, 64);
    auto dx = x.to(tenet::cuda(0));
    check_close(F1(sum<0>(dx)), F1(sum<0>(x)), 1e-4, 1e-4);
    check_close(F1(amax<0>(dx)), F1(amax<0>(x)), 0, 0);
    F3 x3 = randn<float, dyn_shape<3>>(7, 9, 128);
    check_close(F1(mean<0, 1>(x3.to(tenet::cuda(0)))), F1(mean<0, 1>(x3)), 1e-5, 1e-5);
    F2 wide = cpu_randn(3, 65536);  // many outputs, few rows: no split
    check_close(F1(sum<0>(wide.to(tenet::cuda(0)))), F1(sum<0>(wide)), 1e-5, 1e-5);
  }
  SECTION("bf16, fp64 and int32 inputs, rows and columns") {
    B2 b = cpu_randn(513, 48).to<bfloat16>();
    auto db = b.to(tenet::cuda(0));
    check_close(Tensor<bfloat16, dyn_shape<1>>(sum<0>(db)), Tensor<bfloat16, dyn_shape<1>>(sum<0>(b)), 1e-2, 1e-2);
    check_close(Tensor<bfloat16, dyn_shape<1>>(sum<1>(db)), Tensor<bfloat16, dyn_shape<1>>(sum<1>(b)), 1e-2, 1e-2);
    auto d = cpu_randn(50, 34).to<double>();
    auto dd = d.to(tenet::cuda(0));
    check_close(Tensor<double, dyn_shape<1>>(sum<0>(dd)), Tensor<double, dyn_shape<1>>(sum<0>(d)), 1e-12, 1e-12);
    check_close(Tensor<double, dyn_shape<1>>(sum<1>(dd)), Tensor<double, dyn_shape<1>>(sum<1>(d)), 1e-12, 1e-12);
    auto i = randint<std::int32_t, dyn_shape<2>>(-9, 9, 33, 64);
    auto di = i.to(tenet::cuda(0));
    check_close(eval(sum<1>(di)), eval(sum<1>(i)), 0, 0);
    check_close(eval(sum<0>(di)), eval(sum<0>(i)), 0, 0);
  }
  SECTION("a NaN propagates through amax and sum") {
    F2 x = cpu_randn(40, 128);
    x.data()[5 * 128 + 77] = std::nanf("");
    auto dx = x.to(tenet::cuda(0));
    check_close(F1(amax<1>(dx)), F1(amax<1>(x)), 0, 0);
    check_close(F1(sum<0>(dx)), F1(sum<0>(x)), 1e-5, 1e-5);
  }
  SECTION("other strides: a broadcast row and column, sliced rows, a transposed view, var, softmax over dim 0") {
    F2 x = cpu_randn(300, 260);
    F1 b = randn<float, dyn_shape<1>>(256);
    auto dx = x.to(tenet::cuda(0));
    auto db = b.to(tenet::cuda(0));
    check_close(F1(sum<1>(dx.slice<1>(0, 256) + db)), F1(sum<1>(x.slice<1>(0, 256) + b)), 1e-5, 1e-5);
    check_close(F1(sum<1>(dx.slice<1>(4, 260))), F1(sum<1>(x.slice<1>(4, 260))), 1e-5, 1e-5);
    check_close(F1(sum<1>(dx.t())), F1(sum<1>(x.t())), 1e-5, 1e-5);
    check_close(F1(amax<0>(dx.t())), F1(amax<0>(x.t())), 0, 0);
    check_close(F1(var<1>(dx)), F1(var<1>(x)), 1e-5, 1e-5);
    check_close(F1(var<0>(dx)), F1(var<0>(x)), 1e-5, 1e-5);
    check_close(F2(softmax<0>(dx)), F2(softmax<0>(x)), 1e-5, 1e-7);
    F2 col = cpu_randn(300, 1);
    check_close(F2(sum<0>(dx * col.to(tenet::cuda(0)), keepdim)), F2(sum<0>(x * col, keepdim)), 1e-5, 1e-5);
  }
  SECTION("a kept dim between reduced ones (NCHW statistics over N, H, W): rows, then columns") {
    using F4 = Tensor<float, dyn_shape<4>>;
    F4 x = randn<float, dyn_shape<4>>(6, 16, 12, 20) + 1.0f;
    auto dx = x.to(tenet::cuda(0));
    check_close(F1(sum<0, 2, 3>(dx)), F1(sum<0, 2, 3>(x)), 1e-5, 1e-4);
    check_close(F1(mean<0, 2, 3>(dx * dx)), F1(mean<0, 2, 3>(x * x)), 1e-5, 1e-5);
    check_close(F1(amax<0, 2, 3>(dx)), F1(amax<0, 2, 3>(x)), 0, 0);
    check_close(F1(var<0, 2, 3>(dx)), F1(var<0, 2, 3>(x)), 1e-4, 1e-5);
    Tensor<bfloat16, dyn_shape<4>> xb = x.to<bfloat16>();
    check_close(Tensor<bfloat16, dyn_shape<1>>(sum<0, 2, 3>(xb.to(tenet::cuda(0)))), F1(sum<0, 2, 3>(xb.to<float>())), 1e-2,
                1e-1);
    // a per-channel leaf ([1, C, 1, 1]) does not step N by C times its channel stride, and H * W =
    // 49 is not a whole number of groups: the kernel that computes each element's index
    F4 w = randn<float, dyn_shape<4>>(1, 16, 1, 1);
    check_close(F1(sum<0, 2, 3>(dx * w.to(tenet::cuda(0)))), F1(sum<0, 2, 3>(x * w)), 1e-5, 1e-4);
    F4 y = randn<float, dyn_shape<4>>(3, 8, 7, 7);
    check_close(F1(sum<0, 2, 3>(y.to(tenet::cuda(0)))), F1(sum<0, 2, 3>(y)), 1e-5, 1e-5);
  }
  SECTION("fallbacks: an unaligned start, a row not of whole groups, an unaligned row stride") {
    F2 x = cpu_randn(300, 260);
    auto dx = x.to(tenet::cuda(0));
    check_close(F1(sum<1>(dx.slice<1>(1, 257))), F1(sum<1>(x.slice<1>(1, 257))), 1e-5, 1e-5);
    F2 y = cpu_randn(300, 258);
    check_close(F1(sum<1>(y.to(tenet::cuda(0)).slice<1>(0, 256))), F1(sum<1>(y.slice<1>(0, 256))), 1e-5, 1e-5);
    F1 flat = randn<float, dyn_shape<1>>(4097);
    auto dflat = flat.to(tenet::cuda(0));
    check_close(Tensor<float, shape<>>(sum(dflat.slice<0>(1, 4097))), Tensor<float, shape<>>(sum(flat.slice<0>(1, 4097))),
                1e-4, 1e-4);
    check_close(F1(sum<1>(dx.slice<1>(0, 255))), F1(sum<1>(x.slice<1>(0, 255))), 1e-5, 1e-5);
    check_close(F1(sum<0>(dx.slice<1>(0, 255))), F1(sum<0>(x.slice<1>(0, 255))), 1e-5, 1e-5);
  }
}

TEST_CASE("cuda: transposed copies go through shared-memory tiles; the values are the CPU's") {
  manual_seed(6);
  F2 x = cpu_randn(300, 257);
  auto dx = x.to(tenet::cuda(0));
  check_close(F2(dx.t().contiguous()), F2(x.t().contiguous()), 0, 0);
  check_close(F2(dx.slice<0>(1, 300).t().contiguous()), F2(x.slice<0>(1, 300).t().contiguous()), 0, 0);
  B2 b = cpu_randn(64, 96).to<bfloat16>();
  check_close(B2(b.to(tenet::cuda(0)).t().contiguous()), B2(b.t().contiguous()), 0, 0);
  auto d = cpu_randn(33, 65).to<double>();
  check_close(Tensor<double, dyn_shape<2>>(d.to(tenet::cuda(0)).t().contiguous()),
              Tensor<double, dyn_shape<2>>(d.t().contiguous()), 0, 0);
  F3 x3 = randn<float, dyn_shape<3>>(3, 40, 70);
  auto dx3 = x3.to(tenet::cuda(0));
  check_close(F3(dx3.permute<0, 2, 1>().contiguous()), F3(x3.permute<0, 2, 1>().contiguous()), 0, 0);
  check_close(F3(dx3.permute<2, 0, 1>().contiguous()), F3(x3.permute<2, 0, 1>().contiguous()), 0, 0);
  check_close(F3(dx3.permute<1, 2, 0>().contiguous()), F3(x3.permute<1, 2, 0>().contiguous()), 0, 0);
  F2 one = cpu_randn(1, 77);  // a transposed row is contiguous: the flat kernel
  check_close(F2(one.to(tenet::cuda(0)).t().contiguous()), F2(one.t().contiguous()), 0, 0);
}

TEST_CASE("cuda: softmax and log_softmax over the last dim, fp32 and bf16") {
  manual_seed(4);
  F2 x = cpu_randn(300, 1000);
  auto dx = x.to(tenet::cuda(0));
  F2 ref = softmax<-1>(x);
  F2 got = softmax<-1>(dx);
  check_close(got, ref, 1e-5, 1e-8);
  F2 lref = log_softmax<-1>(x);
  F2 lgot = log_softmax<-1>(dx);
  check_close(lgot, lref, 1e-5, 1e-6);
  B2 xb = x.to<bfloat16>();
  B2 bref = softmax<-1>(xb);
  B2 bgot = softmax<-1>(xb.to(tenet::cuda(0)));
  check_close(bgot, bref, 2e-2, 1e-4);
}

TEST_CASE("cuda: matmul through cuBLASLt: fp32, bf16, batched, transposed, linear+bias+act") {
  manual_seed(5);
  cuda::set_allow_tf32(false);
  F2 a = cpu_randn(70, 45), b = cpu_randn(45, 33);
  auto da = a.to(tenet::cuda(0)), db = b.to(tenet::cuda(0));
  SECTION("fp32") {
    F2 ref = matmul(a, b);
    F2 got = matmul(da, db);
    check_close(got, ref, 1e-4, 1e-4);
  }
  SECTION("a transposed operand") {
    F2 bt = cpu_randn(33, 45);
    F2 ref = matmul(a, bt.transpose<0, 1>());
    F2 got = matmul(da, bt.to(tenet::cuda(0)).transpose<0, 1>());
    check_close(got, ref, 1e-4, 1e-4);
  }
  SECTION("bf16 with fp32 accumulation") {
    B2 ab = a.to<bfloat16>(), bb = b.to<bfloat16>();
    B2 ref = matmul(ab, bb);
    B2 got = matmul(ab.to(tenet::cuda(0)), bb.to(tenet::cuda(0)));
    check_close(got, ref, 2e-2, 2e-2);
  }
  SECTION("batched, with a broadcast right operand") {
    F3 x = randn<float, dyn_shape<3>>(5, 17, 23);
    F2 w = cpu_randn(23, 9);
    F3 ref = matmul(x, w);
    F3 got = matmul(x.to(tenet::cuda(0)), w.to(tenet::cuda(0)));
    check_close(got, ref, 1e-4, 1e-4);
  }
  SECTION("batch layouts one stride cannot express: heads split from one qkv tensor, a partial broadcast") {
    // q, k, v as attention takes them from one [B, T, 3C] projection: [B, nh, T, hs] views whose
    // (B, nh) strides are not one batch stride; each is copied contiguous for one batched call
    const std::int64_t B = 3, T = 5, nh = 4, hs = 6, C = nh * hs;
    Tensor<float, dyn_shape<3>> qkv = randn<float, dyn_shape<3>>(B, T, 3 * C);
    const auto dqkv = qkv.to(tenet::cuda(0));
    auto heads = [&](const auto& t, int i) {
      return t.template narrow<2>(i * C, C).template reshape<dyn, dyn, dyn, dyn>(B, T, nh, hs).template transpose<1, 2>();
    };
    using F4 = Tensor<float, dyn_shape<4>>;
    F4 ref = matmul(heads(qkv, 0), heads(qkv, 1).transpose<-2, -1>());
    F4 got = matmul(heads(dqkv, 0), heads(dqkv, 1).transpose<-2, -1>());
    check_close(got, ref, 1e-4, 1e-4);
    check_close(F4(matmul(got, heads(dqkv, 2))), F4(matmul(ref, heads(qkv, 2))), 1e-4, 1e-4);
    // [B, 1, M, K] @ [nh, K, N]: a broadcast over one batch dim of each
    F4 l = randn<float, dyn_shape<4>>(B, 1, 7, 8);
    F3 r = randn<float, dyn_shape<3>>(nh, 8, 9);
    check_close(F4(matmul(l.to(tenet::cuda(0)), r.to(tenet::cuda(0)))), F4(matmul(l, r)), 1e-4, 1e-4);
  }
  SECTION("linear + bias + relu / gelu(tanh) in one call") {
    F2 x = cpu_randn(64, 48), w = cpu_randn(40, 48);
    Tensor<float, dyn_shape<1>> bias = randn<float, dyn_shape<1>>(40);
    auto dx = x.to(tenet::cuda(0)), dw = w.to(tenet::cuda(0));
    auto dbias = bias.to(tenet::cuda(0));
    F2 lin = matmul(x, w.transpose<0, 1>()) + bias;
    F2 ref_relu = relu(lin);
    F2 ref_gelu = gelu(lin, approximate_tanh);
    check_close(cuda::linear(dx, dw, dbias, cuda::activation::relu), ref_relu, 1e-4, 1e-4);
    check_close(cuda::linear(dx, dw, dbias, cuda::activation::gelu_tanh), ref_gelu, 1e-3, 1e-3);
    check_close(cuda::linear(dx, dw, dbias, cuda::activation::none), lin, 1e-4, 1e-4);
  }
}

TEST_CASE("cuda: matmul tuning times cuBLASLt's candidates; results stay the CPU's") {
  manual_seed(6);
  cuda::set_allow_tf32(false);
  REQUIRE_FALSE(cuda::matmul_tuning());
  cuda::set_matmul_tuning(true);
  struct off_at_exit {
    ~off_at_exit() { cuda::set_matmul_tuning(false); }
  } restore;
  REQUIRE(cuda::matmul_tuning());
  // sizes no other test uses, so that these problems are tuned here, twice each (the second call
  // reads the kept choice)
  F2 a = cpu_randn(300, 260), b = cpu_randn(260, 130), w = cpu_randn(140, 260);
  Tensor<float, dyn_shape<1>> bias = randn<float, dyn_shape<1>>(140);
  auto da = a.to(tenet::cuda(0)), db = b.to(tenet::cuda(0)), dw = w.to(tenet::cuda(0));
  auto dbias = bias.to(tenet::cuda(0));
  for (int call = 0; call < 2; ++call) {
    check_close(F2(matmul(da, db)), F2(matmul(a, b)), 1e-4, 1e-4);
    B2 ab = a.to<bfloat16>(), bb = b.to<bfloat16>();
    check_close(B2(matmul(ab.to(tenet::cuda(0)), bb.to(tenet::cuda(0)))), B2(matmul(ab, bb)), 2e-2, 2e-2);
    check_close(cuda::linear(da, dw, dbias, cuda::activation::gelu_tanh),
                F2(gelu(matmul(a, w.transpose<0, 1>()) + bias, approximate_tanh)), 1e-3, 1e-3);
    F3 x = randn<float, dyn_shape<3>>(3, 50, 260);
    check_close(F3(matmul(x.to(tenet::cuda(0)), db)), F3(matmul(x, b)), 1e-4, 1e-4);
  }
}

TEST_CASE("cuda: the caching allocator reuses freed blocks and reports allocated/reserved/peak") {
  cuda::empty_cache();
  const auto s0 = cuda::memory_stats();
  {
    F2 t({1024, 1024}, tenet::cuda(0));  // 4 MiB
    const auto s1 = cuda::memory_stats();
    CHECK(s1.allocated == s0.allocated + (std::size_t{4} << 20));
    CHECK(s1.reserved >= s0.reserved + (std::size_t{4} << 20));
    CHECK(s1.peak_allocated >= s1.allocated);
  }
  const auto s2 = cuda::memory_stats();
  CHECK(s2.allocated == s0.allocated);
  CHECK(s2.reserved >= s0.reserved + (std::size_t{4} << 20));  // kept in the cache
  {
    F2 t({1024, 1024}, tenet::cuda(0));
    CHECK(cuda::memory_stats().cache_hits == s2.cache_hits + 1);
    CHECK(cuda::memory_stats().reserved == s2.reserved);
  }
  cuda::empty_cache();
  CHECK(cuda::memory_stats().reserved == s0.reserved);
  using F1 = Tensor<float, dyn_shape<1>>;
  const std::size_t mib = std::size_t{1} << 20;
  {  // a cached block is split to serve a smaller request; the pieces merge back when freed
    { F1 big(sizes_t<1>{std::int64_t{25} << 20}, tenet::cuda(0)); }  // 100 MiB, its own segment, then cached
    const auto a1 = cuda::memory_stats();
    CHECK(a1.reserved == s0.reserved + 100 * mib);
    {
      F1 t(sizes_t<1>{std::int64_t{15} << 20}, tenet::cuda(0));  // 60 MiB: cut from the 100 MiB block
      F1 u(sizes_t<1>{std::int64_t{10} << 20}, tenet::cuda(0));  // 40 MiB: the rest
      const auto a2 = cuda::memory_stats();
      CHECK(a2.cache_hits == a1.cache_hits + 2);
      CHECK(a2.reserved == a1.reserved);
      CHECK(a2.allocated == a1.allocated + 100 * mib);
      CHECK(a2.splits == a1.splits + 1);
      CHECK(u.data() == t.data() + (std::int64_t{15} << 20));  // the two pieces are adjacent
      t.fill_(1.0f);
      u.fill_(2.0f);
      CHECK(t.cpu()(t.numel() - 1) == 1.0f);  // the pieces are distinct memory
      CHECK(u.cpu()(0) == 2.0f);
    }
    CHECK(cuda::memory_stats().allocated == a1.allocated);
    {  // merged again: one 100 MiB request fits without a new segment
      F1 t(sizes_t<1>{std::int64_t{25} << 20}, tenet::cuda(0));
      CHECK(cuda::memory_stats().reserved == a1.reserved);
    }
    {  // small requests share 2 MiB segments: sixteen 128 KiB tensors take one
      cuda::empty_cache();
      const auto b1 = cuda::memory_stats();
      std::vector<F1> smalls;
      for (int i = 0; i < 16; ++i) smalls.emplace_back(sizes_t<1>{std::int64_t{32} << 10}, tenet::cuda(0));
      CHECK(cuda::memory_stats().reserved <= b1.reserved + 2 * mib);  // (a partly used one may serve some)
      CHECK(cuda::memory_stats().segments <= b1.segments + 1);
      CHECK(cuda::memory_stats().cache_hits == b1.cache_hits + 15);
    }
  }
  cuda::empty_cache();
  CHECK(cuda::memory_stats().reserved == s0.reserved);
  {  // a tensor on another stream never takes a block freed on this one before that stream's work
    cuda::stream side;
    { F1 t(sizes_t<1>{std::int64_t{1} << 20}, tenet::cuda(0)); }  // 4 MiB, freed on the default stream
    const auto c1 = cuda::memory_stats();
    {
      cuda::stream_guard g(side);
      F1 t(sizes_t<1>{std::int64_t{1} << 20}, tenet::cuda(0));
      CHECK(cuda::memory_stats().cache_hits == c1.cache_hits);
      CHECK(cuda::memory_stats().reserved == c1.reserved + 20 * mib);
    }
  }  // the side stream's segment goes back when the stream is destroyed
  cuda::empty_cache();
  CHECK(cuda::memory_stats().reserved == s0.reserved);
}

TEST_CASE("cuda: streams, events, pinned memory and asynchronous copies") {
  manual_seed(6);
  cuda::stream s;
  cuda::event start, stop;
  F2 x = cpu_randn(512, 512);
  auto pinned = cuda::pinned_empty<float, dyn_shape<2>>({512, 512});
  CHECK(pinned.device().is_cpu());
  for (std::int64_t i = 0; i < x.numel(); ++i) pinned.data()[i] = x.data()[i];
  F2 back_pinned = cuda::pinned_empty<float, dyn_shape<2>>({512, 512});
  {
    cuda::stream_guard g(s);
    F2 d({512, 512}, tenet::cuda(0));
    start.record();
    cuda::copy_async(d, F2(pinned));
    F2 y = d * 2.0f + 1.0f;
    cuda::copy_async(back_pinned, y);
    stop.record();
    stop.synchronize();
    CHECK(s.query());
    CHECK(stop.elapsed_ms(start) >= 0.0f);
  }
  F2 ref = x * 2.0f + 1.0f;
  for (std::int64_t i = 0; i < x.numel(); ++i) REQUIRE(back_pinned.data()[i] == ref.data()[i]);
}

TEST_CASE("cuda: factories follow the default device; device_guard restores it") {
  {
    device_guard g(tenet::cuda(0));
    auto z = zeros<float, dyn_shape<2>>(3, 4);
    CHECK(z.device() == tenet::device(tenet::cuda(0)));
    auto r = randn<float, dyn_shape<1>>(100);
    CHECK(r.device() == tenet::device(tenet::cuda(0)));
    auto zc = z.cpu();
    for (std::int64_t i = 0; i < zc.numel(); ++i) CHECK(zc.data()[i] == 0.0f);
  }
  CHECK(default_device().is_cpu());
  CHECK(zeros<float, dyn_shape<1>>(2).device().is_cpu());
}

TEST_CASE("cuda: mixing devices in one expression is a device_error naming both") {
  F2 a = cpu_randn(4, 4);
  auto d = a.to(tenet::cuda(0));
  CHECK_THROWS_AS(F2(a + d), device_error);
  CHECK_THROWS_WITH(F2(a + d), Catch::Contains("cpu") && Catch::Contains("cuda:0"));
  CHECK_THROWS_WITH(d.copy_(a * 2.0f), Catch::Contains("cpu") && Catch::Contains("cuda:0"));
  CHECK_THROWS_AS(d(0, 0), device_error);  // element access needs the host
}

int main(int argc, char** argv) { return tenet::test::run_or_skip("tenet CUDA tests", argc, argv); }
