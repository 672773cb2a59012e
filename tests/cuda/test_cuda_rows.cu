// CUDA backend tests, part 2: the cuda_gpu decomposition (row composites arrive whole), the one-pass
// row kernels (softmax, log_softmax, layer_norm, rms_norm: warp-per-row, block-per-row and the
// scalar fallback), bf16/fp16 pointwise, and linear + bias (+ relu / tanh-gelu) as one cuBLASLt
// call. Every GPU value is checked against the CPU backend (fp32 on the same rounded inputs for
// the half types). The main() that skips without a GPU is in test_cuda.cu.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <utility>
#include <type_traits>

#include <tenet/cuda.hpp>

#include "check_close.hpp"

using namespace tenet;
using tenet::test::check_close;
using F1 = Tensor<float, dyn_shape<1>>;
using F2 = Tensor<float, dyn_shape<2>>;
using F3 = Tensor<float, dyn_shape<3>>;
using B1 = Tensor<bfloat16, dyn_shape<1>>;
using B2 = Tensor<bfloat16, dyn_shape<2>>;
using H2 = Tensor<float16, dyn_shape<2>>;

namespace {
// The decomposition is chosen per backend at compile time: on CUDA the row composites stay whole
// for the half types too (the CPU runs them natively for float/double only).
using detail::cpu_simd;
using detail::cuda_gpu;
using SmB = decltype(softmax<-1>(std::declval<B2>()));
static_assert(std::is_same_v<typename detail::decompose_t<SmB, cuda_gpu>::op_type, aten::softmax<-1>>);
static_assert(!std::is_same_v<typename detail::decompose_t<SmB, cpu_simd>::op_type, aten::softmax<-1>>);
using LnB = decltype(layer_norm(std::declval<B2>(), std::declval<B1>(), std::declval<B1>()));
static_assert(std::is_same_v<typename detail::decompose_t<LnB, cuda_gpu>::op_type, aten::norm_last<1, false>>);
static_assert(!std::is_same_v<typename detail::decompose_t<LnB, cpu_simd>::op_type, aten::norm_last<1, false>>);
// softmax over a dim other than the last is decomposed on both
using Sm0 = decltype(softmax<0>(std::declval<F2>()));
static_assert(!std::is_same_v<typename detail::decompose_t<Sm0, cuda_gpu>::op_type, aten::softmax<0>>);
// the GEMM-epilogue patterns: tanh gelu and relu fuse, the exact (erf) gelu does not
using MmF = decltype(matmul(std::declval<F2>(), std::declval<F2>()) + std::declval<F1>());
static_assert(detail::cuda::bias_act<MmF>::kind == detail::cuda::bias_act_kind::bias);
static_assert(detail::cuda::bias_act<decltype(gelu(std::declval<MmF>(), approximate_tanh))>::kind ==
              detail::cuda::bias_act_kind::gelu_tanh);
static_assert(detail::cuda::bias_act<decltype(relu(std::declval<MmF>()))>::kind == detail::cuda::bias_act_kind::relu);
static_assert(detail::cuda::bias_act<decltype(gelu(std::declval<MmF>()))>::kind == detail::cuda::bias_act_kind::none);

// var over the last dim runs whole on CUDA (one row kernel), over another dim it is decomposed
using VarB = decltype(var<-1>(std::declval<B2>()));
static_assert(std::is_same_v<typename detail::decompose_t<VarB, cuda_gpu>::op_type, aten::var_<false, -1>>);
using Var0 = decltype(var<0>(std::declval<F2>()));
static_assert(!std::is_same_v<typename detail::decompose_t<Var0, cuda_gpu>::op_type, aten::var_<false, 0>>);

std::int64_t& kernels() { return detail::kernels_launched(); }

/// softmax and log_softmax of x (rows x cols) on the GPU in fp32 and bf16 against the CPU's fp32.
void check_softmax_shape(std::int64_t rows, std::int64_t cols) {
  INFO("rows " << rows << ", cols " << cols);
  F2 x = randn<float, dyn_shape<2>>(rows, cols) * 3.0f;
  auto dx = x.to(tenet::cuda(0));
  check_close(F2(softmax<-1>(dx)), F2(softmax<-1>(x)), 1e-5, 1e-9);
  check_close(F2(log_softmax<-1>(dx)), F2(log_softmax<-1>(x)), 1e-5, 1e-5);
  B2 xb = x.to<bfloat16>();
  F2 xr = xb.to<float>();  // the rounded inputs, in fp32 on the CPU
  auto dxb = xb.to(tenet::cuda(0));
  const std::int64_t k0 = kernels();
  B2 sb = softmax<-1>(dxb);
  CHECK(kernels() - k0 == 1);  // one row kernel, not a decomposition
  check_close(sb, F2(softmax<-1>(xr)), 8e-3, 1e-7);
  check_close(B2(log_softmax<-1>(dxb)), F2(log_softmax<-1>(xr)), 8e-3, 2e-2);
}

}  // namespace

TEST_CASE("cuda rows: softmax / log_softmax, warp, block and scalar-fallback kernels") {
  manual_seed(11);
  check_softmax_shape(37, 96);     // warp per row
  check_softmax_shape(5, 1024);    // warp per row, 4 vectors per lane (bf16); block (fp32)
  check_softmax_shape(9, 4096);    // fp32: 1024 vectors, block of 256 x 4; bf16: row_pipe_kernel, 128 x 4
  check_softmax_shape(4, 2048);    // fp32: 512 vectors, 256 threads of 2; bf16: row_pipe_kernel, 64 x 4
  check_softmax_shape(3, 2400);    // bf16: 300 vectors, row_pipe_kernel, 128 threads, some with fewer vectors
  check_softmax_shape(3, 1200);    // fp32: 300 vectors, 256 threads of 2, some without a second vector
  check_softmax_shape(6, 1001);    // odd length: scalar fallback
  check_softmax_shape(2, 40000);   // longer than the register kernels hold: scalar fallback
  check_softmax_shape(2, 20000);   // bf16: 2500 vectors, 1024-thread blocks
  check_softmax_shape(1, 1);
  // fp16, 3-D, and a non-contiguous input (its contiguous copy feeds the row kernel)
  F3 x3 = randn<float, dyn_shape<3>>(4, 7, 256);
  auto d3 = x3.to(tenet::cuda(0));
  check_close(F3(softmax<-1>(d3)), F3(softmax<-1>(x3)), 1e-5, 1e-9);
  H2 xh = randn<float, dyn_shape<2>>(33, 512).to<float16>();
  check_close(H2(softmax<-1>(xh.to(tenet::cuda(0)))), F2(softmax<-1>(xh.to<float>())), 2e-3, 1e-7);
  F2 xt = randn<float, dyn_shape<2>>(64, 48);
  check_close(F2(softmax<-1>(xt.to(tenet::cuda(0)).transpose<0, 1>())), F2(softmax<-1>(xt.transpose<0, 1>())), 1e-5,
              1e-9);
  // a pointwise producer and a softmax over dim 0 (decomposed) still agree with the CPU
  check_close(F2(softmax<-1>(xt.to(tenet::cuda(0)) * 0.5f + 1.0f)), F2(softmax<-1>(xt * 0.5f + 1.0f)), 1e-5, 1e-9);
  check_close(F2(softmax<0>(xt.to(tenet::cuda(0)))), F2(softmax<0>(xt)), 1e-5, 1e-9);
  // -inf entries, a row of -inf (NaN, as torch)
  F2 xi = randn<float, dyn_shape<2>>(3, 64);
  xi(0, 5) = -INFINITY;
  for (std::int64_t j = 0; j < 64; ++j) xi(2, j) = -INFINITY;
  check_close(F2(softmax<-1>(xi.to(tenet::cuda(0)))), F2(softmax<-1>(xi)), 1e-5, 1e-9);
}

TEST_CASE("cuda rows: layer_norm and rms_norm, fp32 / bf16 / fp16, one and two normalized dims") {
  manual_seed(12);
  for (const auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{37, 128}, {8, 4096}, {5, 2048}, {3, 2400}, {3, 1200}, {3, 999}, {2, 20000}, {2, 40000}}) {
    INFO("rows " << rows << ", cols " << cols);
    F2 x = randn<float, dyn_shape<2>>(rows, cols) * 2.0f + 0.5f;
    F1 w = randn<float, dyn_shape<1>>(cols);
    F1 b = randn<float, dyn_shape<1>>(cols);
    auto dx = x.to(tenet::cuda(0));
    auto dw = w.to(tenet::cuda(0));
    auto db = b.to(tenet::cuda(0));
    check_close(F2(layer_norm(dx, dw, db)), F2(layer_norm(x, w, b)), 1e-4, 1e-4);
    check_close(F2(rms_norm(dx, dw)), F2(rms_norm(x, w)), 1e-4, 1e-4);
    check_close(F2(rms_norm(dx, dw, 1e-3)), F2(rms_norm(x, w, 1e-3)), 1e-4, 1e-4);
    B2 xb = x.to<bfloat16>();
    B1 wb = w.to<bfloat16>(), bb = b.to<bfloat16>();
    auto dxb = xb.to(tenet::cuda(0));
    auto dwb = wb.to(tenet::cuda(0)), dbb = bb.to(tenet::cuda(0));
    const std::int64_t k0 = kernels();
    B2 lb = layer_norm(dxb, dwb, dbb, 1e-5);
    CHECK(kernels() - k0 == 1);
    check_close(lb, F2(layer_norm(xb.to<float>(), wb.to<float>(), bb.to<float>(), 1e-5)), 1e-2, 2e-2);
    // bf16's default eps (its epsilon) in both
    check_close(B2(rms_norm(dxb, dwb)),
                F2(rms_norm(xb.to<float>(), wb.to<float>(), static_cast<double>(std::numeric_limits<bfloat16>::epsilon()))),
                1e-2, 2e-2);
    H2 xh = x.to<float16>();
    auto wh = w.to<float16>(), bh = b.to<float16>();
    check_close(H2(layer_norm(xh.to(tenet::cuda(0)), wh.to(tenet::cuda(0)), bh.to(tenet::cuda(0)))),
                F2(layer_norm(xh.to<float>(), wh.to<float>(), bh.to<float>())), 3e-3, 5e-3);
  }
  // two normalized dims, a 3-D input, a residual producer
  F3 x = randn<float, dyn_shape<3>>(5, 6, 40);
  F2 w = randn<float, dyn_shape<2>>(6, 40), b = randn<float, dyn_shape<2>>(6, 40);
  auto dx = x.to(tenet::cuda(0));
  check_close(F3(layer_norm(dx, w.to(tenet::cuda(0)), b.to(tenet::cuda(0)))), F3(layer_norm(x, w, b)), 1e-4, 1e-4);
  F1 w1 = randn<float, dyn_shape<1>>(40), b1 = randn<float, dyn_shape<1>>(40);
  check_close(F3(layer_norm(dx + dx * 0.5f, w1.to(tenet::cuda(0)), b1.to(tenet::cuda(0)))),
              F3(layer_norm(x + x * 0.5f, w1, b1)), 1e-4, 1e-4);
  // a weight of the wrong size is a shape_error on the GPU too
  F1 bad = randn<float, dyn_shape<1>>(39);
  CHECK_THROWS_AS(F3(rms_norm(dx, bad.to(tenet::cuda(0)))), shape_error);
}

TEST_CASE("cuda rows: bf16 and fp16 pointwise trees (16-byte vectors, hardware rounding) equal the CPU's") {
  manual_seed(13);
  const std::int64_t n = (1 << 16) + 5;  // a tail after the vector groups
  B1 x = randn<float, dyn_shape<1>>(n).to<bfloat16>();
  auto dx = x.to(tenet::cuda(0));
  const bfloat16 a(1.25f), b(0.5f), c(0.75f);
  // each op rounds to bf16 on both; erf may differ by one float ulp before the rounding
  check_close(B1(gelu(dx * a + b) * c), B1(gelu(x * a + b) * c), 8e-3, 1e-6);
  check_close(B1(dx * a + b), B1(x * a + b), 0.0, 0.0);  // exact: one rounding per op on both
  auto xh = randn<float, dyn_shape<1>>(n).to<float16>();
  check_close(Tensor<float16, dyn_shape<1>>(xh.to(tenet::cuda(0)) * float16(3.0f) - float16(0.25f)),
              Tensor<float16, dyn_shape<1>>(xh * float16(3.0f) - float16(0.25f)), 0.0, 0.0);
  // a misaligned view takes the scalar path
  auto dv = dx.slice<0>(1, n);
  check_close(B1(dv * a + b), B1(x.slice<0>(1, n) * a + b), 0.0, 0.0);
}

TEST_CASE("cuda gemm epilogue: linear + bias (+ relu / tanh-gelu) from the scheduler, one cuBLASLt call") {
  manual_seed(14);
  const std::int64_t M = 96, K = 80, N = 72;
  F2 x = randn<float, dyn_shape<2>>(M, K), w = randn<float, dyn_shape<2>>(N, K);
  F1 bias = randn<float, dyn_shape<1>>(N);
  auto dx = x.to(tenet::cuda(0)), dw = w.to(tenet::cuda(0));
  auto db = bias.to(tenet::cuda(0));
  auto one_call = [&](auto&& f) {
    const std::int64_t k0 = kernels();
    F2 r = f();
    return std::pair<F2, std::int64_t>(r, kernels() - k0);
  };
  {
    auto [r, k] = one_call([&] { return F2(matmul(dx, dw.transpose<0, 1>()) + db); });
    CHECK(k == 1);
    check_close(r, F2(matmul(x, w.transpose<0, 1>()) + bias), 1e-4, 1e-4);
  }
  {
    auto [r, k] = one_call([&] { return F2(db + matmul(dx, dw.transpose<0, 1>())); });
    CHECK(k == 1);
    check_close(r, F2(bias + matmul(x, w.transpose<0, 1>())), 1e-4, 1e-4);
  }
  {
    auto [r, k] = one_call([&] { return F2(relu(matmul(dx, dw.transpose<0, 1>()) + db)); });
    CHECK(k == 1);
    check_close(r, F2(relu(matmul(x, w.transpose<0, 1>()) + bias)), 1e-4, 1e-4);
  }
  {
    auto [r, k] = one_call([&] { return F2(gelu(matmul(dx, dw.transpose<0, 1>()) + db, approximate_tanh)); });
    CHECK(k == 1);
    // (cuBLASLt's GELU may use its own tanh: as test_cuda.cu's linear test, 1e-3)
    check_close(r, F2(gelu(matmul(x, w.transpose<0, 1>()) + bias, approximate_tanh)), 1e-3, 1e-3);
  }
  {
    // the exact gelu is not cuBLASLt's: GEMM, then one pointwise kernel
    auto [r, k] = one_call([&] { return F2(gelu(matmul(dx, dw.transpose<0, 1>()) + db)); });
    CHECK(k == 2);
    check_close(r, F2(gelu(matmul(x, w.transpose<0, 1>()) + bias)), 1e-4, 1e-4);
  }
  // not fusable at run time (GEMM, then the pointwise kernel): a bias of one element (broadcast),
  // a product of one column broadcast by the bias, relu's maximum with a non-zero scalar
  F1 b1 = randn<float, dyn_shape<1>>(1);
  check_close(F2(matmul(dx, dw.transpose<0, 1>()) + b1.to(tenet::cuda(0))), F2(matmul(x, w.transpose<0, 1>()) + b1),
              1e-4, 1e-4);
  F2 w1 = randn<float, dyn_shape<2>>(1, K);
  check_close(F2(matmul(dx, w1.to(tenet::cuda(0)).transpose<0, 1>()) + db), F2(matmul(x, w1.transpose<0, 1>()) + bias),
              1e-4, 1e-4);
  {
    auto [r, k] = one_call([&] { return F2(maximum(matmul(dx, dw.transpose<0, 1>()) + db, 0.5f)); });
    CHECK(k == 2);
    check_close(r, F2(maximum(matmul(x, w.transpose<0, 1>()) + bias, 0.5f)), 1e-4, 1e-4);
  }
  // bf16: the epilogue runs in fp32 before the one rounding (the unfused tree rounds after each op)
  B2 xb = x.to<bfloat16>(), wb = w.to<bfloat16>();
  B1 bb = bias.to<bfloat16>();
  B2 rb = gelu(matmul(xb.to(tenet::cuda(0)), wb.to(tenet::cuda(0)).transpose<0, 1>()) + bb.to(tenet::cuda(0)),
               approximate_tanh);
  check_close(rb, F2(gelu(matmul(xb.to<float>(), wb.to<float>().transpose<0, 1>()) + bb.to<float>(), approximate_tanh)),
              2e-2, 2e-2);
  // a non-contiguous x and a contiguous (non-transposed) weight
  F2 xt = randn<float, dyn_shape<2>>(K, M), wk = randn<float, dyn_shape<2>>(K, N);
  check_close(F2(matmul(xt.to(tenet::cuda(0)).transpose<0, 1>(), wk.to(tenet::cuda(0))) + db),
              F2(matmul(xt.transpose<0, 1>(), wk) + bias), 1e-4, 1e-4);
}

TEST_CASE("cuda gemm epilogue: a Transformer's linear of x [B, T, K] + bias (+ tanh-gelu) is one cuBLASLt call") {
  using B3 = Tensor<bfloat16, dyn_shape<3>>;
  manual_seed(15);
  const std::int64_t Bn = 3, T = 20, K = 48, N = 40;
  F3 x = randn<float, dyn_shape<3>>(Bn, T, K);
  F2 w = randn<float, dyn_shape<2>>(N, K);
  F1 bias = randn<float, dyn_shape<1>>(N);
  auto dx = x.to(tenet::cuda(0));
  auto dw = w.to(tenet::cuda(0));
  auto db = bias.to(tenet::cuda(0));
  auto count = [&](auto&& f) {
    const std::int64_t k0 = kernels();
    F3 r = f();
    return std::pair<F3, std::int64_t>(r, kernels() - k0);
  };
  {
    auto [r, k] = count([&] { return F3(linear(dx, dw, db)); });
    CHECK(k == 1);
    check_close(r, F3(linear(x, w, bias)), 1e-4, 1e-4);
  }
  {
    auto [r, k] = count([&] { return F3(gelu(linear(dx, dw, db), approximate_tanh)); });
    CHECK(k == 1);
    check_close(r, F3(gelu(linear(x, w, bias), approximate_tanh)), 1e-3, 1e-3);
  }
  {
    auto [r, k] = count([&] { return F3(relu(linear(dx, dw, db))); });
    CHECK(k == 1);
    check_close(r, F3(relu(linear(x, w, bias))), 1e-4, 1e-4);
  }
  // leading dims that do not merge (x [T, B, K] seen as [B, T, K]): copied, then the same call
  F3 xt = randn<float, dyn_shape<3>>(T, Bn, K);
  auto dxt = xt.to(tenet::cuda(0)).transpose<0, 1>();
  check_close(F3(linear(dxt, dw, db)), F3(linear(xt.transpose<0, 1>(), w, bias)), 1e-4, 1e-4);
  // size-1 leading dims
  F3 x1 = randn<float, dyn_shape<3>>(1, T, K), x2 = randn<float, dyn_shape<3>>(Bn, 1, K);
  check_close(F3(linear(x1.to(tenet::cuda(0)), dw, db)), F3(linear(x1, w, bias)), 1e-4, 1e-4);
  check_close(F3(linear(x2.to(tenet::cuda(0)), dw, db)), F3(linear(x2, w, bias)), 1e-4, 1e-4);
  // bf16 operands and bias: one rounding after the epilogue
  B3 xb = x.to<bfloat16>();
  B2 wb = w.to<bfloat16>();
  B1 bb = bias.to<bfloat16>();
  {
    const auto dxb = xb.to(tenet::cuda(0));
    const auto dwb = wb.to(tenet::cuda(0));
    const auto dbb = bb.to(tenet::cuda(0));
    const std::int64_t k0 = kernels();
    B3 rb = gelu(linear(dxb, dwb, dbb), approximate_tanh);
    CHECK(kernels() - k0 == 1);
    check_close(rb, F3(gelu(linear(xb.to<float>(), wb.to<float>(), bb.to<float>()), approximate_tanh)), 2e-2, 2e-2);
  }
  // under autocast, float operands: the same call in bf16 (against the CPU's float32 product of the
  // bf16-rounded operands: the one rounding of the result is what is left)
  {
    autocast ac(tenet::cuda(0), dtype::bfloat16);
    const std::int64_t k0 = kernels();
    F3 r = linear(dx, dw, db);
    CHECK(kernels() - k0 <= 5);  // the operands' and the bias's casts, the GEMM, the result's cast
    check_close(r, F3(linear(xb.to<float>(), wb.to<float>(), bb.to<float>())), 2e-2, 2e-2);
  }
}

TEST_CASE("cuda rows: 16-bit rows through the looping kernel, more rows than its grid") {
  // bf16 / fp16 rows of 129..4096 vectors from a contiguous tensor run row_pipe_kernel, whose grid
  // holds 2048 threads per SM (132 SMs, 128-thread blocks: 2112 blocks): 4500 rows make each block
  // loop over two or three rows, the last with no next row to load; 16384 columns: 512 threads.
  manual_seed(13);
  for (const auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{4500, 4096}, {9001, 1040}, {3, 16384}}) {
    INFO("rows " << rows << ", cols " << cols);
    F2 x = randn<float, dyn_shape<2>>(rows, cols) * 2.0f + 0.25f;
    F1 w = randn<float, dyn_shape<1>>(cols), b = randn<float, dyn_shape<1>>(cols);
    B2 xb = x.to<bfloat16>();
    B1 wb = w.to<bfloat16>(), bb = b.to<bfloat16>();
    F2 xr = xb.to<float>();
    F1 wr = wb.to<float>(), br = bb.to<float>();
    auto dxb = xb.to(tenet::cuda(0));
    auto dwb = wb.to(tenet::cuda(0)), dbb = bb.to(tenet::cuda(0));
    const std::int64_t k0 = kernels();
    B2 sb = softmax<-1>(dxb);
    CHECK(kernels() - k0 == 1);
    check_close(sb, F2(softmax<-1>(xr)), 8e-3, 1e-7);
    check_close(B2(log_softmax<-1>(dxb)), F2(log_softmax<-1>(xr)), 8e-3, 2e-2);
    check_close(B2(layer_norm(dxb, dwb, dbb, 1e-5)), F2(layer_norm(xr, wr, br, 1e-5)), 1e-2, 2e-2);
    check_close(B2(rms_norm(dxb, dwb, 1e-5)), F2(rms_norm(xr, wr, 1e-5)), 1e-2, 2e-2);
    H2 xh = x.to<float16>();
    auto wh = w.to<float16>(), bh = b.to<float16>();
    check_close(H2(layer_norm(xh.to(tenet::cuda(0)), wh.to(tenet::cuda(0)), bh.to(tenet::cuda(0)))),
                F2(layer_norm(xh.to<float>(), wh.to<float>(), bh.to<float>())), 3e-3, 5e-3);
    check_close(H2(softmax<-1>(xh.to(tenet::cuda(0)))), F2(softmax<-1>(xh.to<float>())), 2e-3, 1e-7);
  }
}

TEST_CASE("cuda rows: var / std over the last dim, one row kernel (warp, block, looping, scalar), fp32 / bf16 / fp16 / fp64") {
  manual_seed(17);
  using P = std::pair<std::int64_t, std::int64_t>;
  // warp per row; block of 256 x 4 (fp32) / looping kernel (bf16); 300 vectors; odd length (scalar
  // kernel); longer than the register kernels hold; few long rows (fp32: the decomposition's split
  // reductions; 16-bit: still the row kernel, in fp32); a single element (0 / 0: NaN, as torch)
  for (const auto [rows, cols] : {P{37, 96}, P{9, 4096}, P{3, 2400}, P{6, 1001}, P{300, 20000}, P{2, 100000}, P{3, 1}}) {
    INFO("rows " << rows << ", cols " << cols);
    F2 x = randn<float, dyn_shape<2>>(rows, cols) * 2.0f + 3.0f;  // a mean far from 0: the centering matters
    auto dx = x.to(tenet::cuda(0));
    const std::int64_t k0 = kernels();
    F1 v = var<-1>(dx);
    if (cols <= 16384) CHECK(kernels() - k0 == 1);  // one row kernel
    check_close(v, F1(var<-1>(x)), 1e-4, 1e-6);
    check_close(F1(var<1>(dx, 0.0)), F1(var<1>(x, 0.0)), 1e-4, 1e-6);
    check_close(F2(tenet::std<-1>(dx, keepdim)), F2(tenet::std<-1>(x, keepdim)), 1e-4, 1e-6);
    B2 xb = x.to<bfloat16>();
    F2 xr = xb.to<float>();
    check_close(B1(var<-1>(xb.to(tenet::cuda(0)))), F1(var<-1>(xr)), 1e-2, 1e-2);
    H2 xh = x.to<float16>();
    check_close(Tensor<float16, dyn_shape<1>>(var<-1>(xh.to(tenet::cuda(0)))), F1(var<-1>(xh.to<float>())), 3e-3, 1e-3);
  }
  // a pointwise producer read inside the kernel, a transposed input (copied first), fp64, 3-D,
  // empty rows (NaN) and no rows
  F2 x = randn<float, dyn_shape<2>>(64, 48);
  auto dx = x.to(tenet::cuda(0));
  check_close(F1(var<-1>(dx * 0.5f + 1.0f)), F1(var<-1>(x * 0.5f + 1.0f)), 1e-5, 1e-7);
  check_close(F1(var<-1>(dx.transpose<0, 1>())), F1(var<-1>(x.transpose<0, 1>())), 1e-5, 1e-7);
  auto xd = x.to<double>();
  check_close(Tensor<double, dyn_shape<1>>(var<-1>(xd.to(tenet::cuda(0)))), Tensor<double, dyn_shape<1>>(var<-1>(xd)),
              1e-12, 1e-14);
  F3 x3 = randn<float, dyn_shape<3>>(4, 7, 256);
  check_close(F2(var<2>(x3.to(tenet::cuda(0)))), F2(var<2>(x3)), 1e-5, 1e-7);
  F2 e0 = randn<float, dyn_shape<2>>(5, 0), e1 = randn<float, dyn_shape<2>>(0, 7);
  check_close(F1(var<-1>(e0.to(tenet::cuda(0)))), F1(var<-1>(e0)), 0, 0);
  CHECK(F1(var<-1>(e1.to(tenet::cuda(0)))).numel() == 0);
}

namespace {
using CeNode = decltype(make_node(aten::cross_entropy_rows{}, std::declval<B2>(), std::declval<Tensor<std::int64_t, dyn_shape<2>>>()));
static_assert(std::is_same_v<typename detail::decompose_t<CeNode, cuda_gpu>::op_type, aten::cross_entropy_rows>);
static_assert(!std::is_same_v<typename detail::decompose_t<CeNode, cpu_simd>::op_type, aten::cross_entropy_rows>);

/// cross_entropy over rows (a block per row, cross_entropy.cuh) of logits of dtype T, forward and
/// gradient node, against the CPU's decomposition of the same rounded values; every fifth target is
/// ignore_index. The forward is read through a float cast where T is 16-bit (GPT-2's loss).
template <class T>
void check_cross_entropy(std::int64_t rows, std::int64_t cols, double rtol) {
  INFO("rows " << rows << ", cols " << cols << ", " << tenet::name(dtype_of<T>));
  using X = Tensor<T, dyn_shape<2>>;
  using A = compute_t<T>;
  const X x = (randn<float, dyn_shape<2>>(rows, cols) * 3.0f).to<T>();
  Tensor<std::int64_t, dyn_shape<1>> t({rows});
  for (std::int64_t i = 0; i < rows; ++i) t.data()[i] = i % 5 == 3 ? -100 : (i * 7919 + 13) % cols;
  Tensor<A, dyn_shape<2>> g = randn<float, dyn_shape<2>>(rows, 1).to<A>();
  const auto dev = tenet::cuda(0);
  auto dx = x.to(dev);
  auto dt = t.to(dev);
  Tensor<A, dyn_shape<1>> got = cross_entropy<reduction::none>(cast<A>(dx), dt);
  Tensor<A, dyn_shape<1>> want = cross_entropy<reduction::none>(cast<A>(x), t);
  check_close(got, want, rtol, 1e-5);
  Tensor<A, shape<>> mean_got = cross_entropy(cast<A>(dx), dt);
  Tensor<A, shape<>> mean_want = cross_entropy(cast<A>(x), t);
  CHECK(mean_got.to(tenet::cpu).item() == Approx(mean_want.item()).epsilon(rtol).margin(1e-6));  // (a loss near 0 cancels)
  const std::int64_t k0 = kernels();
  X dgot = make_node(aten::cross_entropy_rows_grad{-100}, dx, dt.template unsqueeze<1>(), g.to(dev));
  CHECK(kernels() - k0 == 1);
  X dwant = make_node(aten::cross_entropy_rows_grad{-100}, x, t.template unsqueeze<1>(), g);
  check_close(dgot, dwant, sizeof(T) == 2 ? 1e-2 : rtol, 1e-6);
  if (rows > 3) {  // row 3 is ignored: a zero gradient
    const Tensor<float, dyn_shape<2>> ignored = dgot.to(tenet::cpu).template narrow<0>(3, 1).template to<float>();
    for (std::int64_t c = 0; c < cols; ++c) CHECK(ignored.data()[c] == 0.0f);
  }
}
}  // namespace

TEST_CASE("cuda rows: cross_entropy over rows and its gradient, a block per row (vector and scalar loads)") {
  manual_seed(19);
  using P = std::pair<std::int64_t, std::int64_t>;
  // short rows; a row of 4 bf16 vectors; odd lengths (scalar loads); GPT-2's padded vocabulary;
  // the register kernels' bounds (1024 and 8192 vectors a row) and one vector past them
  for (const auto [rows, cols] : {P{37, 10}, P{9, 32}, P{6, 1001}, P{64, 50304}, P{1, 3}, P{5, 8192}, P{3, 8184},
                                  P{4, 65536}, P{3, 65544}}) {
    check_cross_entropy<bfloat16>(rows, cols, 1e-5);
    check_cross_entropy<float>(rows, cols, 1e-5);
  }
  check_cross_entropy<float16>(33, 4000, 1e-5);
  check_cross_entropy<double>(17, 777, 1e-12);
  // an all-ignored batch: zero rows, a NaN mean (0 / 0), as torch
  Tensor<std::int64_t, dyn_shape<1>> t = full<std::int64_t, dyn_shape<1>>(-100, 4);
  Tensor<float, shape<>> m = cross_entropy(randn<float, dyn_shape<2>>(4, 8).to(tenet::cuda(0)), t.to(tenet::cuda(0)));
  CHECK(std::isnan(m.to(tenet::cpu).item()));
}

namespace {
/// layer_norm's / rms_norm's input gradient node (one row kernel, row_kernels.cuh) of dtype T
/// against the CPU's (its kernel for float / double, the decomposition for 16-bit) on the same
/// rounded values.
template <class T, bool Rms>
void check_norm_grad(std::int64_t rows, std::int64_t cols, double rtol, double atol) {
  INFO("rows " << rows << ", cols " << cols << ", " << tenet::name(dtype_of<T>) << (Rms ? ", rms" : ""));
  using X = Tensor<T, dyn_shape<2>>;
  const X x = (randn<float, dyn_shape<2>>(rows, cols) * 2.0f + 0.5f).to<T>();
  const X g = randn<float, dyn_shape<2>>(rows, cols).to<T>();
  const Tensor<T, dyn_shape<1>> w = (randn<float, dyn_shape<1>>(cols) * 0.5f + 1.0f).to<T>();
  const auto dev = tenet::cuda(0);
  const aten::norm_last_grad<1, Rms> op{1e-5};
  const std::int64_t k0 = kernels();
  X got = make_node(op, x.to(dev), w.to(dev), g.to(dev));
  CHECK(kernels() - k0 == 1);
  X want = make_node(op, x, w, g);
  check_close(got, want, rtol, atol);
}
}  // namespace

TEST_CASE("cuda rows: layer_norm / rms_norm input gradient, one row kernel (warp, block, scalar, long rows)") {
  manual_seed(23);
  using P = std::pair<std::int64_t, std::int64_t>;
  // warp per row (GPT-2's 768); a block per row; odd length (scalar loads); longer than the
  // registers hold (the long-row kernel); one element
  for (const auto [rows, cols] : {P{37, 768}, P{5, 4096}, P{6, 1001}, P{3, 40000}, P{4, 1}}) {
    check_norm_grad<float, false>(rows, cols, 1e-4, 1e-4);
    check_norm_grad<float, true>(rows, cols, 1e-4, 1e-4);
    check_norm_grad<bfloat16, false>(rows, cols, 2e-2, 5e-2);
  }
  check_norm_grad<float16, false>(9, 200, 5e-3, 1e-2);
  check_norm_grad<double, true>(7, 96, 1e-10, 1e-10);
}
