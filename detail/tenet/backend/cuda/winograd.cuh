#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// 3x3 conv2d with stride 1, dilation 1 and one group, in float or double, by Winograd's minimal
// filtering F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks"):
// each 2x2 block of outputs (a tile) is A^T [ (G g G^T) . (B^T d B) ] A over the 4x4 input patch d
// under it, so the 36 multiplies of a tile per channel pair become 16, done as 16 GEMMs:
//   U[xi] (O x C)  = the transformed weights (G g G^T, element xi of the 4x4), per call;
//   V[xi] (C x P)  = the transformed input patches (B^T d B) of P tiles (a chunk of images);
//   M[xi] (O x P)  = U[xi] . V[xi]: one strided-batched cuBLASLt GEMM of batch 16;
//   y              = A^T M A per tile and output channel, cut at the image's edge.
// The weight gradient (autograd's conv2d_weight) runs the same way backwards: dU[xi] (O x C) =
// DM[xi] (O x P) . V[xi]^T (P x C), DM = A dy A^T per tile, then dw = G^T dU G.
// Against im2col (9 C rows per output position, then a GEMM with K = 9 C) this does 2.25x fewer
// multiplies and moves 16 (C + O) / 4 values per tile instead of 9 C + O per position.
// The transforms add and halve only, so the rounding error stays a few units of float's precision
// at the scale of the sums (checked against the CPU's direct convolution in the tests).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <tenet/decomp/conv.hpp>  // conv2d_geometry
#include <tenet/backend/cuda/gemm.hpp>
#include <tenet/backend/cuda/pointwise.cuh>  // grid_for, check_launch
#include <tenet/backend/cuda/runtime.hpp>

namespace tenet::detail::cuda {

/// Images per chunk when conv2d with geometry g runs as Winograd F(2x2, 3x3) for element type T,
/// or 0 where it does not: another shape, 16-bit T (im2col feeds the tensor cores, and the
/// transforms would round in 16 bits), or an image whose transformed values pass 256 MiB. A
/// chunk's 16 (C + O) values per tile stay under 256 MiB and 2^30 (32-bit indices in the kernels).
template <class T>
std::int64_t winograd_chunk(const conv2d_geometry& g) {
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
    return 0;
  } else {
    if (g.kh != 3 || g.kw != 3 || g.stride_h != 1 || g.stride_w != 1 || g.dil_h != 1 || g.dil_w != 1 ||
        g.groups != 1 || g.N <= 0 || g.oh <= 0 || g.ow <= 0 || g.C <= 0 || g.O <= 0)
      return 0;
    const std::int64_t lim = std::int64_t{1} << 30;
    if (g.H >= lim || g.W >= lim || g.pad_top >= lim || g.pad_left >= lim || 16 * g.O * g.C >= lim) return 0;
    const std::int64_t values = 16 * (g.C + g.O) * ((g.oh + 1) / 2) * ((g.ow + 1) / 2);  // per image
    const std::int64_t cap = std::min((std::int64_t{256} << 20) / (values * static_cast<std::int64_t>(sizeof(T))),
                                      lim / values);
    return std::min(g.N, cap);
  }
}

/// The tiling of a chunk: th x tw tiles per image, P = nb * th * tw tiles, laid out in S slices
/// of Ps tiles (S Ps >= P; the tiles past P are zeros): a transformed value of channel c and tile
/// p = s Ps + ps sits at [xi][s][c][ps], so that the weight gradient's GEMM (which sums over the
/// tiles) runs as 16 S GEMMs of Ps tiles each, enough of them to fill the GPU (16 small products
/// alone would use 16 of its SMs). The forward takes S = 1.
struct wino_tiles {
  std::int32_t th, tw, per_image, P, S, Ps;
  /// Value t of a [S][rows][Ps] plane: its row (a channel) and tile p = s Ps + ps.
  TENET_HOST_DEVICE TENET_INLINE void slot(std::int32_t t, std::int32_t rows, std::int32_t& row,
                                           std::int32_t& p) const {
    const std::int32_t ps = t % Ps, r = t / Ps;
    row = r % rows, p = (r / rows) * Ps + ps;
  }
  /// Tile p (< P): its image n of the chunk and its first output row and column.
  TENET_HOST_DEVICE TENET_INLINE void locate(std::int32_t p, std::int32_t& n, std::int32_t& oy,
                                             std::int32_t& ox) const {
    const std::int32_t q = p % per_image;
    n = p / per_image, oy = (q / tw) * 2, ox = (q % tw) * 2;
  }
};

/// U[xi][o][c] = (G g G^T)[xi] of w[o][c] (3x3, contiguous O, C, 3, 3); a thread per (o, c).
template <class T>
__global__ void wino_weight_kernel(const T* __restrict__ w, T* __restrict__ U, std::int32_t OC) {
  for (std::int32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < OC; t += gridDim.x * blockDim.x) {
    T g[9];
    for (int i = 0; i < 9; ++i) g[i] = w[std::int64_t{t} * 9 + i];
    // G g (4 x 3): rows g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2 of each column
    T a[12];
    for (int j = 0; j < 3; ++j) {
      const T r0 = g[j], r1 = g[3 + j], r2 = g[6 + j];
      a[j] = r0;
      a[3 + j] = T(0.5) * (r0 + r1 + r2);
      a[6 + j] = T(0.5) * (r0 - r1 + r2);
      a[9 + j] = r2;
    }
    // (G g) G^T (4 x 4): the same along each row
    for (int i = 0; i < 4; ++i) {
      const T c0 = a[3 * i], c1 = a[3 * i + 1], c2 = a[3 * i + 2];
      const T u[4] = {c0, T(0.5) * (c0 + c1 + c2), T(0.5) * (c0 - c1 + c2), c2};
      for (int j = 0; j < 4; ++j) U[std::int64_t{4 * i + j} * OC + t] = u[j];
    }
  }
}

/// V[xi][s][c][ps] = (B^T d B)[xi] of the 4x4 patch d of channel c under tile p = s Ps + ps
/// (zeros outside x, and for p >= P); a thread per value of a plane, consecutive threads on
/// consecutive tiles (coalesced stores).
template <class T>
__global__ void wino_input_kernel(const T* __restrict__ x, T* __restrict__ V, std::int64_t sn, std::int64_t sc,
                                  std::int64_t sy, std::int64_t sx, std::int32_t C, std::int32_t H, std::int32_t W,
                                  std::int32_t pt, std::int32_t pl, wino_tiles tl) {
  const std::int32_t total = C * tl.S * tl.Ps;
  for (std::int32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
    std::int32_t c, p;
    tl.slot(t, C, c, p);
    T d[16];
    if (p < tl.P) {
      std::int32_t n, oy, ox;
      tl.locate(p, n, oy, ox);
      const std::int32_t y0 = oy - pt, x0 = ox - pl;
      const T* base = x + n * sn + c * sc;
      for (int i = 0; i < 4; ++i) {
        const std::int32_t iy = y0 + i;
        const bool row_in = iy >= 0 && iy < H;
        for (int j = 0; j < 4; ++j) {
          const std::int32_t ix = x0 + j;
          d[4 * i + j] = row_in && ix >= 0 && ix < W ? base[iy * sy + ix * sx] : T(0);
        }
      }
    } else {
      for (int i = 0; i < 16; ++i) d[i] = T(0);
    }
    // B^T d: rows d0 - d2, d1 + d2, d2 - d1, d1 - d3 of each column
    T e[16];
    for (int j = 0; j < 4; ++j) {
      const T r0 = d[j], r1 = d[4 + j], r2 = d[8 + j], r3 = d[12 + j];
      e[j] = r0 - r2;
      e[4 + j] = r1 + r2;
      e[8 + j] = r2 - r1;
      e[12 + j] = r1 - r3;
    }
    // (B^T d) B: the same along each row
    T* out = V + t;
    for (int i = 0; i < 4; ++i) {
      const T c0 = e[4 * i], c1 = e[4 * i + 1], c2 = e[4 * i + 2], c3 = e[4 * i + 3];
      out[std::int64_t{4 * i + 0} * total] = c0 - c2;
      out[std::int64_t{4 * i + 1} * total] = c1 + c2;
      out[std::int64_t{4 * i + 2} * total] = c2 - c1;
      out[std::int64_t{4 * i + 3} * total] = c1 - c3;
    }
  }
}

/// y[n][o][2 ty + a][2 tx + b] = (A^T M A)[a][b] of tile p = (n, ty, tx), inside the image; a
/// thread per (o, p). y is the chunk's first image of a contiguous (N, O, oh, ow) output.
template <class T>
__global__ void wino_output_kernel(const T* __restrict__ M, T* __restrict__ y, std::int32_t O, std::int32_t oh,
                                   std::int32_t ow, wino_tiles tl) {
  const std::int32_t total = O * tl.P;
  const std::int64_t plane = std::int64_t{O} * tl.P;
  for (std::int32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
    const std::int32_t p = t % tl.P, o = t / tl.P;
    std::int32_t n, oy, ox;
    tl.locate(p, n, oy, ox);
    const T* in = M + std::int64_t{o} * tl.P + p;
    T m[16];
    for (int i = 0; i < 16; ++i) m[i] = in[i * plane];
    // A^T m (2 x 4): rows m0 + m1 + m2, m1 - m2 - m3 of each column
    T r[8];
    for (int j = 0; j < 4; ++j) {
      r[j] = m[j] + m[4 + j] + m[8 + j];
      r[4 + j] = m[4 + j] - m[8 + j] - m[12 + j];
    }
    T* out = y + (std::int64_t{n} * O + o) * oh * ow;
    for (int a = 0; a < 2 && oy + a < oh; ++a) {
      const T v0 = r[4 * a] + r[4 * a + 1] + r[4 * a + 2];
      const T v1 = r[4 * a + 1] - r[4 * a + 2] - r[4 * a + 3];
      T* row = out + std::int64_t{oy + a} * ow + ox;
      row[0] = v0;
      if (ox + 1 < ow) row[1] = v1;
    }
  }
}

/// DM[xi][s][o][ps] = (A dy A^T)[xi] of the 2x2 output-gradient block of tile p = s Ps + ps
/// (zeros past the image's edge and for p >= P), gy in (O, N, oh, ow) layout (contiguous)
/// starting at the chunk's first image; a thread per value of a plane. (The gradient of
/// y = A^T m A is dm = A dy A^T.)
template <class T>
__global__ void wino_grad_output_kernel(const T* __restrict__ gy, T* __restrict__ DM, std::int64_t image_stride,
                                        std::int64_t channel_stride, std::int32_t O, std::int32_t oh,
                                        std::int32_t ow, wino_tiles tl) {
  const std::int32_t total = O * tl.S * tl.Ps;
  for (std::int32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
    std::int32_t o, p;
    tl.slot(t, O, o, p);
    T d00 = T(0), d01 = T(0), d10 = T(0), d11 = T(0);
    if (p < tl.P) {
      std::int32_t n, oy, ox;
      tl.locate(p, n, oy, ox);
      const T* in = gy + o * channel_stride + n * image_stride + std::int64_t{oy} * ow + ox;
      const bool r1 = oy + 1 < oh, c1 = ox + 1 < ow;
      d00 = in[0];
      if (c1) d01 = in[1];
      if (r1) d10 = in[ow];
      if (r1 && c1) d11 = in[ow + 1];
    }
    // A d (4 x 2): rows d0, d0 + d1, d0 - d1, -d1 of each column; then the same along each row
    const T a[8] = {d00, d01, d00 + d10, d01 + d11, d00 - d10, d01 - d11, -d10, -d11};
    T* out = DM + t;
    for (int i = 0; i < 4; ++i) {
      const T e0 = a[2 * i], e1 = a[2 * i + 1];
      out[std::int64_t{4 * i + 0} * total] = e0;
      out[std::int64_t{4 * i + 1} * total] = e0 + e1;
      out[std::int64_t{4 * i + 2} * total] = e0 - e1;
      out[std::int64_t{4 * i + 3} * total] = -e1;
    }
  }
}

/// dw[o][c] (3x3) = G^T dU G of dU[xi][o][c] = the sum over s of the slices' dU[xi][s][o][c] (the
/// weight gradient of U = G g G^T); a thread per (o, c).
template <class T>
__global__ void wino_grad_weight_kernel(const T* __restrict__ dU, T* __restrict__ dw, std::int32_t OC, std::int32_t S) {
  for (std::int32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < OC; t += gridDim.x * blockDim.x) {
    T u[16];
    for (int i = 0; i < 16; ++i) {
      const T* in = dU + std::int64_t{i} * S * OC + t;
      T acc = T(0);
      for (std::int32_t k = 0; k < S; ++k) acc += in[std::int64_t{k} * OC];
      u[i] = acc;
    }
    // G^T u (3 x 4): rows u0 + (u1 + u2) / 2, (u1 - u2) / 2, (u1 + u2) / 2 + u3 of each column
    T a[12];
    for (int j = 0; j < 4; ++j) {
      const T r0 = u[j], r1 = u[4 + j], r2 = u[8 + j], r3 = u[12 + j];
      a[j] = r0 + T(0.5) * (r1 + r2);
      a[4 + j] = T(0.5) * (r1 - r2);
      a[8 + j] = T(0.5) * (r1 + r2) + r3;
    }
    // (G^T u) G (3 x 3): the same along each row
    for (int i = 0; i < 3; ++i) {
      const T c0 = a[4 * i], c1 = a[4 * i + 1], c2 = a[4 * i + 2], c3 = a[4 * i + 3];
      T* out = dw + std::int64_t{t} * 9 + 3 * i;
      out[0] = c0 + T(0.5) * (c1 + c2);
      out[1] = T(0.5) * (c1 - c2);
      out[2] = T(0.5) * (c1 + c2) + c3;
    }
  }
}

/// The input transform of images [0, nb) of x into V (layout [16][S][C][Ps]).
template <class T>
void wino_transform_input(const T* x, const sizes_t<4>& xst, T* V, const conv2d_geometry& g,
                          const wino_tiles& tl, const device& dev) {
  constexpr int threads = 256;
  wino_input_kernel<T><<<grid_for(g.C * tl.S * tl.Ps, threads, dev.index), threads, 0, current_stream()>>>(
      x, V, xst[0], xst[1], xst[2], xst[3], static_cast<std::int32_t>(g.C), static_cast<std::int32_t>(g.H),
      static_cast<std::int32_t>(g.W), static_cast<std::int32_t>(g.pad_top), static_cast<std::int32_t>(g.pad_left), tl);
  check_launch("the Winograd input transform launch");
}

/// The tiling of a chunk of nb images under geometry g, in S slices.
inline wino_tiles wino_tiling(const conv2d_geometry& g, std::int64_t nb, std::int64_t S = 1) {
  const std::int64_t th = (g.oh + 1) / 2, tw = (g.ow + 1) / 2, P = nb * th * tw;
  return {static_cast<std::int32_t>(th), static_cast<std::int32_t>(tw), static_cast<std::int32_t>(th * tw),
          static_cast<std::int32_t>(P),  static_cast<std::int32_t>(S),  static_cast<std::int32_t>((P + S - 1) / S)};
}

/// out (N, O, oh, ow; fresh, contiguous) = conv2d of x (N, C, H, W; any strides) with w (O, C, 3,
/// 3; contiguous), geometry g, in chunks of chunk = winograd_chunk<T>(g) > 0 images.
template <class T>
void run_conv2d_winograd(T* out, const T* x, const sizes_t<4>& xst, const T* w, const conv2d_geometry& g,
                         std::int64_t chunk, const device& dev) {
  const std::int64_t full = wino_tiling(g, chunk).P;
  const std::int64_t OC = g.O * g.C;
  Tensor<T, dyn_shape<1>> U(sizes_t<1>{16 * OC}, dev);
  Tensor<T, dyn_shape<1>> V(sizes_t<1>{16 * g.C * full}, dev);
  Tensor<T, dyn_shape<1>> M(sizes_t<1>{16 * g.O * full}, dev);
  constexpr int threads = 256;
  const cudaStream_t s = current_stream();
  wino_weight_kernel<T><<<grid_for(OC, threads, dev.index), threads, 0, s>>>(w, U.data(), static_cast<std::int32_t>(OC));
  check_launch("the Winograd weight transform launch");
  for (std::int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const wino_tiles tl = wino_tiling(g, std::min(chunk, g.N - n0));
    const std::int64_t P = tl.P;
    wino_transform_input(x + n0 * xst[0], xst, V.data(), g, tl, dev);
    // column-major, batch xi: M[xi]' (P x O) = V[xi]' (P x C) . U[xi]' (C x O)
    lt_matmul<T>(dev.index, P, g.O, g.C, lt_operand{V.data(), false, P, g.C * P}, lt_operand{U.data(), false, g.C, OC},
                 M.data(), P, g.O * P, 16, nullptr, epilogue::none);
    wino_output_kernel<T><<<grid_for(g.O * P, threads, dev.index), threads, 0, s>>>(
        M.data(), out + n0 * g.O * g.oh * g.ow, static_cast<std::int32_t>(g.O), static_cast<std::int32_t>(g.oh),
        static_cast<std::int32_t>(g.ow), tl);
    check_launch("the Winograd output transform launch");
  }
}

/// dw (O, C, 3, 3; fresh, contiguous) = the weight gradient of conv2d with geometry g (in chunks
/// of chunk = winograd_chunk<T>(g) > 0 images), input x (any strides) and output gradient gp in
/// (O, N, oh, ow) layout (contiguous): per chunk, the input transform V (as the forward) and the gradient's
/// DM = A dy A^T, then dU[xi] (O x C) += DM[xi] (O x P) . V[xi]^T (P x C), one batched GEMM;
/// finally dw = G^T dU G.
template <class T>
void run_conv2d_weight_winograd(T* dw, const T* x, const sizes_t<4>& xst, const T* gp, const conv2d_geometry& g,
                                std::int64_t chunk, const device& dev) {
  const std::int64_t full = wino_tiling(g, chunk).P;
  const std::int64_t OC = g.O * g.C, L = g.oh * g.ow;
  // slices: about four GEMM tiles of 128 x 128 per SM over the 16 S products, each of at least
  // 256 tiles (a slice's padding stays small); then a chunk's values grow by at most S tiles
  const std::int64_t tiles = ((g.O + 127) / 128) * ((g.C + 127) / 128);
  const std::int64_t S = std::clamp<std::int64_t>((4 * sm_count(dev.index) + 16 * tiles - 1) / (16 * tiles), 1,
                                                  std::max<std::int64_t>(1, full / 256));
  const std::int64_t padded = S * ((full + S - 1) / S);
  Tensor<T, dyn_shape<1>> dU(sizes_t<1>{16 * S * OC}, dev);
  Tensor<T, dyn_shape<1>> V(sizes_t<1>{16 * g.C * padded}, dev);
  Tensor<T, dyn_shape<1>> DM(sizes_t<1>{16 * g.O * padded}, dev);
  constexpr int threads = 256;
  const cudaStream_t s = current_stream();
  for (std::int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const wino_tiles tl = wino_tiling(g, std::min(chunk, g.N - n0), S);
    const std::int64_t Ps = tl.Ps;
    wino_transform_input(x + n0 * xst[0], xst, V.data(), g, tl, dev);
    wino_grad_output_kernel<T><<<grid_for(g.O * S * Ps, threads, dev.index), threads, 0, s>>>(
        gp + n0 * L, DM.data(), L, g.N * L, static_cast<std::int32_t>(g.O), static_cast<std::int32_t>(g.oh),
        static_cast<std::int32_t>(g.ow), tl);
    check_launch("the Winograd output-gradient transform launch");
    // column-major, batch (xi, s): dU[xi][s]' (C x O) (+)= V[xi][s] (C x Ps, stored Ps x C) . DM[xi][s]' (Ps x O)
    lt_matmul<T>(dev.index, g.C, g.O, Ps, lt_operand{V.data(), true, Ps, g.C * Ps},
                 lt_operand{DM.data(), false, Ps, g.O * Ps}, dU.data(), g.C, OC, static_cast<int>(16 * S), nullptr,
                 epilogue::none, n0 > 0);
  }
  wino_grad_weight_kernel<T><<<grid_for(OC, threads, dev.index), threads, 0, s>>>(
      dU.data(), dw, static_cast<std::int32_t>(OC), static_cast<std::int32_t>(S));
  check_launch("the Winograd weight-gradient transform launch");
}

}  // namespace tenet::detail::cuda
