#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// 3x3 conv2d with stride 1, dilation 1 and one group on the CPU, in float or double, by
// Winograd's minimal filtering F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional
// Neural Networks", 2016): each 4x4 block of outputs (a tile) is A^T [ (G g G^T) . (B^T d B) ] A
// over the 6x6 input patch d under it, so the 144 multiplies of a tile per channel pair become 36,
// done as 36 small GEMMs per block of tiles:
//   xp               the input, zero-padded and channels-last (N, 4 th + 2, 4 tw + 2, Cp): the
//                    transforms then read one vector of channels per pixel, with no edge tests;
//   U[k] (Cp x Op)   the transformed weights G g G^T, element k of the 6x6, per call;
//   V[k] (TB x Cp)   the transformed patches B^T d B of a block of TB tiles, a vector of channels
//                    at a time (per thread, in L2);
//   M[k] (TB x Op)   V[k] . U[k]: a register-tiled kernel (gemm.hpp's micro-kernel, its broadcast
//                    operand read in place from V's rows);
//   yo               A^T M A per tile, a vector of output channels at a time, channels-last, cut
//                    at the image's edge; then transposed into y (N, O, oh, ow).
// Cp and Op are C and O rounded up to the vector width (Op: to the register tile's columns), the
// extra channels zero. Against im2col + GEMM (K = 9 C per output position) this does 4x fewer
// multiplies; the transforms and the two layout passes cost about as much as a quarter of them
// for 64 channels, so it wins from about 16 channels on (docs/ops.md, "CPU convolution kernels").
// Rounding: the transforms scale by up to 8 (A^T) and 5 (B^T), with G's sixths and 24ths, so the
// error is a few tens of units of the lane type's precision at the scale of sum |w| |x| (checked
// against a double direct convolution in tests/test_conv.cpp), where im2col's is a few.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include <xsimd/xsimd.hpp>

#include <tenet/backend/cpu/gemm.hpp>  // gemm_impl::config (register tile), gemm_impl::scratch
#include <tenet/decomp/conv.hpp>       // conv2d_geometry
#include <tenet/runtime/storage.hpp>   // cpu_block_cache

#include <omp.h>

namespace tenet::detail::cpu {

/// Whether conv2d with geometry g runs as Winograd F(4x4, 3x3) (run_conv2d_winograd): a 3x3
/// kernel, stride 1, dilation 1, one group, and enough channels for the transforms to pay:
/// C >= 16 and O >= 16 (the crossovers measured in docs/ops.md).
inline bool winograd_eligible(const conv2d_geometry& g) {
  return g.kh == 3 && g.kw == 3 && g.stride_h == 1 && g.stride_w == 1 && g.dil_h == 1 && g.dil_w == 1 &&
         g.groups == 1 && g.C >= 16 && g.O >= 16 && g.N > 0 && g.oh > 0 && g.ow > 0;
}

/// A buffer of n values from the CPU's block cache (runtime/storage.hpp), given back when it goes
/// out of scope: a kernel's large working copies (im2col columns, Winograd's padded input) cost no
/// page faults when the same shapes run again, and hold no memory between calls.
template <class T>
class pooled_buffer {
 public:
  explicit pooled_buffer(std::size_t n)
      : bytes_(std::max<std::size_t>(n, 1) * sizeof(T)), p_(static_cast<T*>(cpu_block_cache::instance().get(bytes_))) {}
  ~pooled_buffer() { cpu_block_cache::instance().put(p_, bytes_); }
  pooled_buffer(const pooled_buffer&) = delete;
  pooled_buffer& operator=(const pooled_buffer&) = delete;
  T* data() const { return p_; }

 private:
  std::size_t bytes_;
  T* p_;
};

namespace winograd {

/// B^T d for d = (d0 .. d5): the input transform along one dim.
template <class V>
TENET_INLINE void input_1d(const V* d, V* r, int stride) {
  const V d0 = d[0], d1 = d[stride], d2 = d[2 * stride], d3 = d[3 * stride], d4 = d[4 * stride], d5 = d[5 * stride];
  using T = typename V::value_type;
  const V four(T(4)), five(T(5)), two(T(2));
  const V t0 = d4 - four * d2;   // -4 d2 + d4
  const V t1 = d3 - four * d1;   // -4 d1 + d3
  const V t2 = d4 - d2;          // -d2 + d4
  const V t3 = two * (d3 - d1);  // -2 d1 + 2 d3
  r[0] = xsimd::fma(four, d0, xsimd::fnma(five, d2, d4));
  r[stride] = t0 + t1;
  r[2 * stride] = t0 - t1;
  r[3 * stride] = t2 + t3;
  r[4 * stride] = t2 - t3;
  r[5 * stride] = xsimd::fma(four, d1, xsimd::fnma(five, d3, d5));
}

/// A^T m for m = (m0 .. m5): the output transform along one dim (4 values).
template <class V>
TENET_INLINE void output_1d(const V* m, V* y, int stride) {
  using T = typename V::value_type;
  const V m0 = m[0], m1 = m[stride], m2 = m[2 * stride], m3 = m[3 * stride], m4 = m[4 * stride], m5 = m[5 * stride];
  const V s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
  y[0] = m0 + s12 + s34;
  y[stride] = xsimd::fma(V(T(2)), d34, d12);
  y[2 * stride] = xsimd::fma(V(T(4)), s34, s12);
  y[3 * stride] = xsimd::fma(V(T(8)), d34, d12) + m5;
}

/// G g for g = (g0, g1, g2): the weight transform along one dim (6 values), in double.
inline void weight_1d(const double* g, double* u, int stride) {
  const double g0 = g[0], g1 = g[stride], g2 = g[2 * stride];
  u[0] = g0 / 4;
  u[stride] = -(g0 + g1 + g2) / 6;
  u[2 * stride] = -(g0 - g1 + g2) / 6;
  u[3 * stride] = g0 / 24 + g1 / 12 + g2 / 6;
  u[4 * stride] = g0 / 24 - g1 / 12 + g2 / 6;
  u[5 * stride] = g2;
}

/// The register-tiled product of one transform element: m (MR rows x NB batches, row stride ldm)
/// = v (MR rows of cp, row stride cp: broadcast in place) . u (cp x NB batches, row stride ldu).
template <class T, int MR, int NB>
TENET_INLINE void tile_product(std::int64_t cp, const T* __restrict v, const T* __restrict u, std::int64_t ldu,
                               T* __restrict m, std::int64_t ldm) {
  using B = xsimd::batch<T>;
  constexpr int L = static_cast<int>(B::size);
  B acc[MR][NB];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) acc[i][j] = B(T(0));
  for (std::int64_t c = 0; c < cp; ++c) {
    B uv[NB];
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) uv[j] = B::load_aligned(u + c * ldu + j * L);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const B vv(v[i * cp + c]);
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) acc[i][j] = xsimd::fma(vv, uv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) acc[i][j].store_aligned(m + i * ldm + j * L);
}

}  // namespace winograd

/// y = conv2d(x, w) by Winograd F(4x4, 3x3) for contiguous x (N, C, H, W), w (O, C, 3, 3),
/// y (N, O, oh, ow), where winograd_eligible(g).
template <class T>
void run_conv2d_winograd(const T* x, const T* w, T* y, const conv2d_geometry& g) {
  using B = xsimd::batch<T>;
  using cfg = gemm_impl::config<T>;
  constexpr std::int64_t L = B::size, MR = cfg::MR, NB = cfg::NB, NR = cfg::NR;
  constexpr std::int64_t TB = MR * (sizeof(T) == 4 ? 4 : 2);  // tiles per block: V and M about 200-450 KiB
  const std::int64_t Cp = (g.C + L - 1) / L * L, Op = (g.O + NR - 1) / NR * NR;
  const std::int64_t th = (g.oh + 3) / 4, tw = (g.ow + 3) / 4, Hp = 4 * th + 2, Wp = 4 * tw + 2;
  const std::int64_t tiles = g.N * th * tw, blocks = (tiles + TB - 1) / TB;
  const bool threads = !omp_in_parallel() && omp_get_max_threads() > 1;

  // U[k][c][o] = (G w[o][c] G^T)[k], zero for the padding channels
  const pooled_buffer<T> u_buf(static_cast<std::size_t>(36 * Cp * Op));
  T* const U = u_buf.data();
  std::fill(U, U + 36 * Cp * Op, T(0));
  for (std::int64_t o = 0; o < g.O; ++o) {
    for (std::int64_t c = 0; c < g.C; ++c) {
      double gk[9], t[18], u[36];
      for (int i = 0; i < 9; ++i) gk[i] = static_cast<double>(w[(o * g.C + c) * 9 + i]);
      for (int j = 0; j < 3; ++j) winograd::weight_1d(gk + j, t + j, 3);  // columns: t (6 x 3)
      for (int i = 0; i < 6; ++i) winograd::weight_1d(t + 3 * i, u + 6 * i, 1);  // rows: u (6 x 6)
      for (int k = 0; k < 36; ++k) U[(k * Cp + c) * Op + o] = static_cast<T>(u[k]);
    }
  }

  // xp[n][yy][xx][c] = x[n][c][yy - pad_top][xx - pad_left], zero outside x and for c >= C; per
  // image and block of L channels, each xp element written once: L planes read row by row (L
  // sequential streams) into whole vectors of channels (reading one row of every channel per xp
  // row instead missed the cache on every row: 11% of the ResNet stage)
  const pooled_buffer<T> xp_buf(static_cast<std::size_t>(g.N * Hp * Wp * Cp));
  T* const xp = xp_buf.data();
  const std::int64_t cblocks = Cp / L;
#pragma omp parallel for schedule(static) if (threads)
  for (std::int64_t r = 0; r < g.N * cblocks; ++r) {
    const std::int64_t n = r / cblocks, c0 = r % cblocks * L, cn = std::min(L, g.C - c0);
    const T* planes = x + (n * g.C + c0) * g.H * g.W;
    for (std::int64_t yy = 0; yy < Hp; ++yy) {
      T* dst = xp + ((n * Hp + yy) * Wp) * Cp + c0;
      const std::int64_t iy = yy - g.pad_top;
      if (iy < 0 || iy >= g.H) {
        for (std::int64_t xx = 0; xx < Wp; ++xx) B(T(0)).store_aligned(dst + xx * Cp);
        continue;
      }
      // (scalar stores straight into xp: a vector built in memory and loaded back stalls on
      // store forwarding)
      const T* row = planes + iy * g.W;
      for (std::int64_t xx = 0; xx < Wp; ++xx) {
        const std::int64_t ix = xx - g.pad_left;
        T* d = dst + xx * Cp;
        if (ix < 0 || ix >= g.W) {
          B(T(0)).store_aligned(d);
          continue;
        }
        for (std::int64_t k = 0; k < cn; ++k) d[k] = row[k * g.H * g.W + ix];
        for (std::int64_t k = cn; k < L; ++k) d[k] = T(0);
      }
    }
  }

  // per block of tiles: transform, 36 products, inverse transform into yo (N, oh, ow, Op)
  const pooled_buffer<T> yo_buf(static_cast<std::size_t>(g.N * g.oh * g.ow * Op));
  T* const yo = yo_buf.data();
#pragma omp parallel if (threads)
  {
    T* V = gemm_impl::scratch<T, 10>(static_cast<std::size_t>(36 * TB * Cp));
    T* M = gemm_impl::scratch<T, 11>(static_cast<std::size_t>(36 * TB * Op));
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t t0 = b * TB, count = std::min(TB, tiles - t0);
      if (count < TB)  // the rows past the last tile: zeros (their products are not read)
        for (std::int64_t k = 0; k < 36; ++k) std::fill(V + (k * TB + count) * Cp, V + (k + 1) * TB * Cp, T(0));
      for (std::int64_t t = 0; t < count; ++t) {
        const std::int64_t tile = t0 + t, n = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
        const T* patch = xp + ((n * Hp + 4 * ty) * Wp + 4 * tx) * Cp;
        for (std::int64_t c = 0; c < Cp; c += L) {
          B d[36], r[36];
#pragma GCC unroll 6
          for (int i = 0; i < 6; ++i)
#pragma GCC unroll 6
            for (int j = 0; j < 6; ++j) d[6 * i + j] = B::load_aligned(patch + (i * Wp + j) * Cp + c);
#pragma GCC unroll 6
          for (int j = 0; j < 6; ++j) winograd::input_1d(d + j, r + j, 6);  // columns
#pragma GCC unroll 6
          for (int i = 0; i < 6; ++i) winograd::input_1d(r + 6 * i, d + 6 * i, 1);  // rows
#pragma GCC unroll 36
          for (int k = 0; k < 36; ++k) d[k].store_aligned(V + (k * TB + t) * Cp + c);
        }
      }
      for (std::int64_t k = 0; k < 36; ++k)
        for (std::int64_t i = 0; i < TB; i += MR)
          for (std::int64_t o = 0; o < Op; o += NR)
            winograd::tile_product<T, MR, NB>(Cp, V + (k * TB + i) * Cp, U + k * Cp * Op + o, Op,
                                              M + (k * TB + i) * Op + o, Op);
      for (std::int64_t t = 0; t < count; ++t) {
        const std::int64_t tile = t0 + t, n = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
        const std::int64_t rows = std::min<std::int64_t>(4, g.oh - 4 * ty), cols = std::min<std::int64_t>(4, g.ow - 4 * tx);
        T* out = yo + ((n * g.oh + 4 * ty) * g.ow + 4 * tx) * Op;
        for (std::int64_t o = 0; o < Op; o += L) {
          B m[36], s[24];
#pragma GCC unroll 36
          for (int k = 0; k < 36; ++k) m[k] = B::load_aligned(M + (k * TB + t) * Op + o);
#pragma GCC unroll 6
          for (int j = 0; j < 6; ++j) winograd::output_1d(m + j, s + j, 6);  // columns: s (4 x 6)
          B r[16];
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i) winograd::output_1d(s + 6 * i, r + 4 * i, 1);  // rows: r (4 x 4)
          for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < cols; ++j) r[4 * i + j].store_aligned(out + (i * g.ow + j) * Op + o);
        }
      }
    }
  }

  // y[n][o][p] = yo[n][p][o], in blocks of 16 positions
  const std::int64_t P = g.oh * g.ow, pblocks = (P + 15) / 16;
#pragma omp parallel for schedule(static) if (threads)
  for (std::int64_t r = 0; r < g.N * pblocks; ++r) {
    const std::int64_t n = r / pblocks, p0 = r % pblocks * 16, pn = std::min<std::int64_t>(16, P - p0);
    const T* src = yo + (n * P + p0) * Op;
    T* dst = y + n * g.O * P + p0;
    for (std::int64_t o = 0; o < g.O; ++o)
      for (std::int64_t p = 0; p < pn; ++p) dst[o * P + p] = src[p * Op + o];
  }
}

}  // namespace tenet::detail::cpu
