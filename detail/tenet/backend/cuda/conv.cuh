#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// conv2d on CUDA (nvcc only): per chunk of images, one im2col kernel writes the columns
// col[n][(c * kh + i) * kw + j][oy * ow + ox] (zeros where a window reads padding), then one
// strided-batched cuBLASLt GEMM per group computes y[n][g] (O/g x L) = w[g] (O/g x K) . col[n][g]
// (K x L), K = C/g * kh * kw, L = oh * ow, straight into the NCHW output (no transposing copy).
// A 1x1 convolution with stride 1 and no padding reads a contiguous x as its columns (no im2col);
// a 3x3 one with stride 1 and one group, in float or double, runs as Winograd F(2x2, 3x3)
// (winograd.cuh), its weight gradient too.
// The chunk keeps the columns under 256 MiB. float, double, float16 and bfloat16 (cuBLASLt's).
// The weight gradient (aten::conv2d_weight, autograd's) uses the same columns in (K, images, L)
// layout and one GEMM per group over all positions of a chunk, accumulating across chunks.
// max_pool2d: a thread per output, reading its window straight from x (NaN propagates, as amax).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <tenet/decomp/conv.hpp>  // conv2d_geometry
#include <tenet/backend/cuda/gemm.hpp>
#include <tenet/backend/cuda/pointwise.cuh>
#include <tenet/backend/cuda/runtime.hpp>
#include <tenet/backend/cuda/winograd.cuh>

namespace tenet::detail::cuda {

/// The im2col geometry in the index type I of the kernel (32-bit where every index fits).
template <class I>
struct im2col_args {
  I C, H, W, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow;
  I sn, sc, sy, sx;  // x's strides
  I rows, L;         // C * kh * kw, oh * ow
  I nb;              // images in the chunk
};

/// cols[n][r][l] (RowsOuter: cols[r][n][l]) for images n of the chunk: r = (c * kh + i) * kw + j,
/// l = oy * ow + ox.
template <class T, class I, bool RowsOuter>
__global__ void im2col_kernel(const T* __restrict__ x, T* __restrict__ cols, im2col_args<I> a, I total) {
  const I stride = static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x);
  for (I idx = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x); idx < total;
       idx += stride) {
    const I l = idx % a.L;
    const I rest = idx / a.L;
    const I r = RowsOuter ? rest / a.nb : rest % a.rows;
    const I n = RowsOuter ? rest % a.nb : rest / a.rows;
    const I ox = l % a.ow, oy = l / a.ow;
    const I j = r % a.kw;
    const I ci = r / a.kw;
    const I i = ci % a.kh, c = ci / a.kh;
    const I iy = oy * a.sh - a.pt + i * a.dh, ix = ox * a.sw - a.pl + j * a.dw;
    T v = T(0);
    if (iy >= 0 && iy < a.H && ix >= 0 && ix < a.W) v = x[n * a.sn + c * a.sc + iy * a.sy + ix * a.sx];
    cols[idx] = v;
  }
}

/// The GEMM extents of a convolution with geometry g: L output positions per image, rows =
/// C*kh*kw rows of an image's columns, and per group Og outputs over K = C/groups*kh*kw.
struct conv_gemm_dims {
  std::int64_t L, rows, Og, K;
  explicit conv_gemm_dims(const conv2d_geometry& g)
      : L(g.oh * g.ow), rows(g.C * g.kh * g.kw), Og(g.O / g.groups), K(g.C / g.groups * g.kh * g.kw) {}
};

/// Writes the columns of images [0, nb) of x (any strides) into cols: layout (nb, C*kh*kw, L), or
/// (C*kh*kw, nb, L) when RowsOuter.
template <class T, bool RowsOuter>
void launch_im2col(const T* x, const sizes_t<4>& xst, T* cols, const conv2d_geometry& g, std::int64_t nb,
                   const device& dev) {
  const conv_gemm_dims dims(g);
  const std::int64_t total = nb * dims.rows * dims.L;
  if (total == 0) return;
  auto launch = [&](auto zero) {
    using I = decltype(zero);
    im2col_args<I> a{};
    a.C = static_cast<I>(g.C), a.H = static_cast<I>(g.H), a.W = static_cast<I>(g.W);
    a.kh = static_cast<I>(g.kh), a.kw = static_cast<I>(g.kw);
    a.sh = static_cast<I>(g.stride_h), a.sw = static_cast<I>(g.stride_w);
    a.dh = static_cast<I>(g.dil_h), a.dw = static_cast<I>(g.dil_w);
    a.pt = static_cast<I>(g.pad_top), a.pl = static_cast<I>(g.pad_left);
    a.oh = static_cast<I>(g.oh), a.ow = static_cast<I>(g.ow);
    a.sn = static_cast<I>(xst[0]), a.sc = static_cast<I>(xst[1]), a.sy = static_cast<I>(xst[2]),
    a.sx = static_cast<I>(xst[3]);
    a.rows = static_cast<I>(dims.rows), a.L = static_cast<I>(dims.L), a.nb = static_cast<I>(nb);
    constexpr int threads = 256;
    im2col_kernel<T, I, RowsOuter><<<grid_for(total, threads, dev.index), threads, 0, current_stream()>>>(
        x, cols, a, static_cast<I>(total));
  };
  // 32-bit indices when every index and offset fits (x's extent through its strides too)
  std::int64_t xspan = 1;
  for (std::size_t d = 0; d < 4; ++d) {
    const std::int64_t ext = d == 0 ? nb : d == 1 ? g.C : d == 2 ? g.H : g.W;
    xspan += (ext - 1) * std::abs(xst[d]);
  }
  const std::int64_t lim = std::int64_t{1} << 30;
  if (total < lim && xspan < lim)
    launch(std::int32_t{0});
  else
    launch(std::int64_t{0});
  check_launch("the im2col kernel launch");
}

/// Images per chunk: their columns (per_image elements of T each) under 256 MiB, at least one.
template <class T>
std::int64_t conv_chunk(std::int64_t n, std::int64_t per_image) {
  const std::int64_t cap = (std::int64_t{256} << 20) / std::max<std::int64_t>(1, per_image * static_cast<std::int64_t>(sizeof(T)));
  return std::max<std::int64_t>(1, std::min({n, cap, std::int64_t{1} << 20}));
}

/// out (N, O, oh, ow; fresh, contiguous, on x's device) = conv2d of x (N, C, H, W; any strides)
/// with w (O, C/groups, kh, kw; contiguous), geometry g.
template <class T>
void run_conv2d(T* out, const T* x, const sizes_t<4>& xst, const T* w, const conv2d_geometry& g,
                const device& dev) {
  static_assert(lt_supported<T>);
  const auto [L, rows, Og, K] = conv_gemm_dims(g);
  if (g.N == 0 || g.O == 0 || L == 0) return;
  device_context ctx(dev);
  if (K == 0) {  // no input channels: zeros (as torch)
    check(cudaMemsetAsync(out, 0, static_cast<std::size_t>(g.N * g.O * L) * sizeof(T), current_stream()),
          "the conv2d fill");
    return;
  }
  if (const std::int64_t chunk = winograd_chunk<T>(g); chunk > 0) {  // 3x3, stride 1, one group, fp32/fp64
    run_conv2d_winograd(out, x, xst, w, g, chunk, dev);
    return;
  }
  const bool direct = g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 &&
                      g.pad_left == 0 && g.pad_bottom == 0 && g.pad_right == 0 && xst[3] == 1 && xst[2] == g.W &&
                      xst[1] == g.H * g.W;
  const std::int64_t per_image = rows * L;
  const std::int64_t chunk = direct ? g.N : conv_chunk<T>(g.N, per_image);
  Tensor<T, dyn_shape<1>> buf;
  if (!direct) buf = Tensor<T, dyn_shape<1>>(sizes_t<1>{chunk * per_image}, dev);
  for (std::int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const std::int64_t nb = std::min(chunk, g.N - n0);
    const T* cols = nullptr;
    std::int64_t col_stride = 0;  // between images
    if (direct) {
      cols = x + n0 * xst[0];
      col_stride = xst[0];
    } else {
      launch_im2col<T, false>(x + n0 * xst[0], xst, buf.data(), g, nb, dev);
      cols = buf.data();
      col_stride = per_image;
    }
    for (std::int64_t gi = 0; gi < g.groups; ++gi) {
      // column-major: y[n][g]' (L x Og) = col[n][g]' (L x K) . w[g]' (K x Og)
      lt_matmul<T>(dev.index, L, Og, K, lt_operand{cols + gi * K * L, false, L, col_stride},
                   lt_operand{w + gi * Og * K, false, K, 0}, out + (n0 * g.O + gi * Og) * L, L, g.O * L,
                   static_cast<int>(nb), nullptr, epilogue::none);
    }
  }
}

/// dw (O, C/groups, kh, kw; fresh, contiguous) = the weight gradient of conv2d with geometry g,
/// input x (any strides) and output gradient gp permuted to (O, N, oh, ow) (contiguous): per
/// chunk of images the columns in (C*kh*kw, nb, L) layout, then per group one GEMM over all the
/// chunk's positions, dw[g] (O/g x K) += gp[g] (O/g x nb*L) . col[g]^T (nb*L x K).
template <class T>
void run_conv2d_weight(T* dw, const T* x, const sizes_t<4>& xst, const T* gp, const conv2d_geometry& g,
                       const device& dev) {
  static_assert(lt_supported<T>);
  const auto [L, rows, Og, K] = conv_gemm_dims(g);
  if (g.O == 0 || K == 0) return;
  device_context ctx(dev);
  if (g.N == 0 || L == 0) {
    check(cudaMemsetAsync(dw, 0, static_cast<std::size_t>(g.O * K) * sizeof(T), current_stream()), "the conv2d_weight fill");
    return;
  }
  if (const std::int64_t chunk = winograd_chunk<T>(g); chunk > 0) {  // 3x3, stride 1, one group, fp32/fp64
    run_conv2d_weight_winograd(dw, x, xst, gp, g, chunk, dev);
    return;
  }
  const std::int64_t per_image = rows * L;
  const std::int64_t chunk = conv_chunk<T>(g.N, per_image);
  Tensor<T, dyn_shape<1>> buf(sizes_t<1>{chunk * per_image}, dev);
  for (std::int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const std::int64_t nb = std::min(chunk, g.N - n0);
    launch_im2col<T, true>(x + n0 * xst[0], xst, buf.data(), g, nb, dev);
    for (std::int64_t gi = 0; gi < g.groups; ++gi) {
      // column-major: dw[g]' (K x Og) = col[g] (K x nb L, stored as its transpose) . gp[g]' (nb L x Og)
      lt_matmul<T>(dev.index, K, Og, nb * L, lt_operand{buf.data() + gi * K * nb * L, true, nb * L, 0},
                   lt_operand{gp + gi * Og * g.N * L + n0 * L, false, g.N * L, 0}, dw + gi * Og * K, K, 0, 1, nullptr,
                   epilogue::none, n0 > 0);
    }
  }
}

struct pool_args {
  std::int64_t C, H, W, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  std::int64_t sn, sc, sy, sx;  // x's strides
};

template <class T>
__global__ void max_pool2d_kernel(const T* __restrict__ x, T* __restrict__ out, pool_args a, T low, std::int64_t total) {
  using A = std::conditional_t<(sizeof(T) < 4) && !std::is_integral_v<T>, float, T>;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const std::int64_t ox = idx % a.ow;
    std::int64_t rest = idx / a.ow;
    const std::int64_t oy = rest % a.oh;
    rest /= a.oh;
    const std::int64_t c = rest % a.C, n = rest / a.C;
    const T* base = x + n * a.sn + c * a.sc;
    const std::int64_t y0 = oy * a.sh - a.ph, x0 = ox * a.sw - a.pw;
    A m = static_cast<A>(low);
    bool nan = false;
    for (std::int64_t i = 0; i < a.kh && !nan; ++i) {
      const std::int64_t iy = y0 + i * a.dh;
      if (iy < 0 || iy >= a.H) continue;
      for (std::int64_t j = 0; j < a.kw; ++j) {
        const std::int64_t ix = x0 + j * a.dw;
        if (ix < 0 || ix >= a.W) continue;
        const A v = static_cast<A>(base[iy * a.sy + ix * a.sx]);
        if (v != v) {
          m = v;
          nan = true;
          break;
        }
        if (v > m) m = v;
      }
    }
    out[idx] = static_cast<T>(m);
  }
}

/// out (N, C, oh, ow; fresh, contiguous) = max_pool2d of x (any strides) with plan pl.
template <class T, class Plan>
void run_max_pool2d(T* out, const T* x, const sizes_t<4>& xs, const sizes_t<4>& xst, const Plan& pl, T low,
                    const device& dev) {
  const std::int64_t total = xs[0] * xs[1] * pl.out[0] * pl.out[1];
  if (total == 0) return;
  device_context ctx(dev);
  const pool_args a{xs[1],    xs[2],    xs[3],    pl.out[0], pl.out[1], pl.k[0], pl.k[1], pl.s[0], pl.s[1],
                    pl.p[0],  pl.p[1],  pl.d[0],  pl.d[1],   xst[0],    xst[1],    xst[2],  xst[3]};
  constexpr int threads = 256;
  max_pool2d_kernel<T><<<grid_for(total, threads, dev.index), threads, 0, current_stream()>>>(x, out, a, low, total);
  check_launch("the max_pool2d kernel launch");
}

}  // namespace tenet::detail::cuda
