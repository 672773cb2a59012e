// CUDA line and indexing ops: cumsum and argmax over the last dim of 8192x4096 (fp32, bf16),
// an embedding lookup (64x128 ids into a 50000x1024 bf16 table), gather and scatter_add along the
// last dim of 8192x4096 fp32; common fp32 ops on 8192x4096: sums along each dim and over all,
// amax and var along the rows, softmax along either dim, layer_norm, a row bias added, a column
// scale multiplied, a transposed copy. GB/s counts bytes read + written
// once (indices included).
#include <cstdint>

#include "cuda_harness.hpp"

using namespace tenet;

template <class T>
void run_lines(const char* dtype) {
  const std::int64_t r = 8192, c = 4096;
  using T2 = Tensor<T, dyn_shape<2>>;
  T2 x = randn<T, dyn_shape<2>>(r, c).to(tenet::cuda(0));
  T2 y;
  double s = bench::measure_cuda([&] { y = cumsum<1>(x); });
  bench::report(std::string("cumsum_8192x4096_") + dtype, "tenet", "GB/s", bench::gbps(2.0 * r * c * sizeof(T), s), "cuda");
  Tensor<std::int64_t, dyn_shape<1>> i;
  s = bench::measure_cuda([&] { i = argmax<1>(x); });
  bench::report(std::string("argmax_8192x4096_") + dtype, "tenet", "GB/s", bench::gbps(1.0 * r * c * sizeof(T), s), "cuda");
}

void run_common() {
  const std::int64_t r = 8192, c = 4096;
  using F2 = Tensor<float, dyn_shape<2>>;
  using F1 = Tensor<float, dyn_shape<1>>;
  F2 x = randn<float, dyn_shape<2>>(r, c).to(tenet::cuda(0)), y;
  F1 w = randn<float, dyn_shape<1>>(c).to(tenet::cuda(0)), b = randn<float, dyn_shape<1>>(c).to(tenet::cuda(0)), v;
  Tensor<float, dyn_shape<0>> z;
  const double in = 4.0 * r * c;
  auto line = [](const char* wl, double bytes, double s) { bench::report(wl, "tenet", "GB/s", bench::gbps(bytes, s), "cuda"); };
  line("sum_dim1_8192x4096_fp32", in + 4.0 * r, bench::measure_cuda([&] { v = sum<1>(x); }));
  line("sum_dim0_8192x4096_fp32", in + 4.0 * c, bench::measure_cuda([&] { v = sum<0>(x); }));
  line("sum_all_8192x4096_fp32", in, bench::measure_cuda([&] { z = sum(x); }));
  line("amax_dim1_8192x4096_fp32", in + 4.0 * r, bench::measure_cuda([&] { v = amax<1>(x); }));
  {  // BatchNorm's statistics: a kept dim between reduced ones
    Tensor<float, dyn_shape<4>> x4 = randn<float, dyn_shape<4>>(32, 64, 56, 56).to(tenet::cuda(0));
    line("sum_dims023_32x64x56x56_fp32", 4.0 * 32 * 64 * 56 * 56 + 4.0 * 64, bench::measure_cuda([&] { v = sum<0, 2, 3>(x4); }));
  }
  line("var_dim1_8192x4096_fp32", in + 4.0 * r, bench::measure_cuda([&] { v = var<1>(x); }));
  line("softmax_8192x4096_fp32", 2 * in, bench::measure_cuda([&] { y = softmax<-1>(x); }));
  line("softmax_dim0_8192x4096_fp32", 2 * in, bench::measure_cuda([&] { y = softmax<0>(x); }));
  line("layer_norm_8192x4096_fp32", 2 * in, bench::measure_cuda([&] { y = layer_norm(x, w, b); }));
  F2 col = randn<float, dyn_shape<2>>(r, 1).to(tenet::cuda(0));
  line("add_row_bias_8192x4096_fp32", 2 * in, bench::measure_cuda([&] { y = x + b; }));
  line("mul_col_scale_8192x4096_fp32", 2 * in, bench::measure_cuda([&] { y = x * col; }));
  line("transpose_copy_8192x4096_fp32", 2 * in, bench::measure_cuda([&] { y = x.t().contiguous(); }));
}

int main() {
  bench::require_gpu("cuda_ops");
  run_common();
  manual_seed(0);
  run_lines<float>("fp32");
  run_lines<bfloat16>("bf16");
  {
    const std::int64_t n = 50000, d = 1024, b = 64, t = 128;
    Tensor<bfloat16, dyn_shape<2>> w = randn<bfloat16, dyn_shape<2>>(n, d).to(tenet::cuda(0));
    Tensor<std::int64_t, dyn_shape<2>> ids = randint<std::int64_t, dyn_shape<2>>(0, n, b, t).to(tenet::cuda(0));
    Tensor<bfloat16, dyn_shape<3>> e;
    const double s = bench::measure_cuda([&] { e = embedding(ids, w); });
    bench::report("embedding_64x128_50000x1024_bf16", "tenet", "GB/s", bench::gbps(2.0 * b * t * d * 2 + b * t * 8, s),
                  "cuda");
  }
  {
    const std::int64_t r = 8192, c = 4096;
    using F2 = Tensor<float, dyn_shape<2>>;
    F2 x = randn<float, dyn_shape<2>>(r, c).to(tenet::cuda(0));
    Tensor<std::int64_t, dyn_shape<2>> idx = randint<std::int64_t, dyn_shape<2>>(0, c, r, c).to(tenet::cuda(0));
    F2 y;
    double s = bench::measure_cuda([&] { y = gather<1>(x, idx); });
    bench::report("gather_dim1_8192x4096_fp32", "tenet", "GB/s", bench::gbps(1.0 * r * c * (4 + 8 + 4), s), "cuda");
    s = bench::measure_cuda([&] { y = scatter_add<1>(x, idx, x); });
    bench::report("scatter_add_dim1_8192x4096_fp32", "tenet", "GB/s", bench::gbps(1.0 * r * c * (4 + 8 + 4 + 4 + 4), s),
                  "cuda");
  }
  return 0;
}
