#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// 3x3 conv2d with stride 1, dilation 1 and one group on the CPU, in float or double, by
// Winograd's minimal filtering F(m x m, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional
// Neural Networks", 2016): each m x m block of outputs (a tile) is A^T [ (G g G^T) . (B^T d B) ] A
// over the (m+2) x (m+2) input patch d under it, so the 9 m^2 multiplies of a tile per channel
// pair become (m+2)^2, done as (m+2)^2 small GEMMs per block of tiles. m = 2 in float (16 per 4
// outputs: 2.25x fewer than direct, about im2col's rounding), m = 4 in double (36 per 16: 4x
// fewer; its larger rounding is far below double's tolerances): run_conv2d_winograd says why.
//   xp               the input, zero-padded and channels-last (N, m th + 2, m tw + 2, Cp): the
//                    transforms then read one vector of channels per pixel, with no edge tests;
//   U[k] (Cp x Op)   the transformed weights G g G^T, element k of the (m+2)^2, kept per thread
//                    while the weights are unchanged (winograd::weight_cache);
//   V[k] (TB x Cp)   the transformed patches B^T d B of a block of TB tiles, a vector of channels
//                    at a time (per thread, in L2);
//   M[k] (TB x Op)   V[k] . U[k]: a register-tiled kernel (gemm.hpp's micro-kernel, its broadcast
//                    operand read in place from V's rows);
//   yo               A^T M A per tile, a vector of output channels at a time, channels-last, cut
//                    at the image's edge; then transposed into y (N, O, oh, ow).
// Cp and Op are C and O rounded up to the vector width (Op: to the register tile's columns), the
// extra channels zero. Where it wins over im2col + GEMM (channels, positions): winograd_eligible
// and docs/ops.md, "CPU convolution kernels".
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include <tenet/backend/cpu/gemm.hpp>  // gemm_impl::config (register tile), gemm_impl::scratch
#include <tenet/decomp/conv.hpp>       // conv2d_geometry
#include <tenet/runtime/storage.hpp>   // cpu_block_cache

#include <omp.h>

namespace tenet::detail::cpu {

/// Whether the Winograd kernel computes conv2d with geometry g: a 3x3 kernel, stride 1,
/// dilation 1, one group.
inline bool winograd_applies(const conv2d_geometry& g) {
  return g.kh == 3 && g.kw == 3 && g.stride_h == 1 && g.stride_w == 1 && g.dil_h == 1 && g.dil_w == 1 &&
         g.groups == 1 && g.N > 0 && g.oh > 0 && g.ow > 0;
}
/// Whether it is also faster than im2col + GEMM there (docs/ops.md, "CPU convolution kernels":
/// measured crossovers): 16 or more input and output channels (fewer fill a fraction of each
/// vector) and 512 or more output positions over the batch (the weights' transform, per call,
/// costs about what a few hundred positions do).
inline bool winograd_eligible(const conv2d_geometry& g) {
  return winograd_applies(g) && g.C >= 16 && g.O >= 16 && g.N * g.oh * g.ow >= 512;
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

/// What a convolution kernel runs on each band of output rows [oy0, oy1) of an image n (every
/// channel) as soon as it has written it, on the thread that wrote it, while the band is still in
/// cache: the elementwise tree of conv_epilogue_pattern (schedule/lower.hpp), in place.
/// Type-erased (a function pointer and its context), so the kernels are instantiated once per
/// dtype whatever the tree; empty: nothing.
struct conv_band_epilogue {
  void (*fn)(const void*, std::int64_t, std::int64_t, std::int64_t) = nullptr;
  const void* context = nullptr;
  /// f(n, oy0, oy1), called through the pointer; f must outlive the epilogue.
  template <class F>
  static conv_band_epilogue of(const F& f) {
    return {[](const void* c, std::int64_t n, std::int64_t oy0, std::int64_t oy1) {
              (*static_cast<const F*>(c))(n, oy0, oy1);
            },
            &f};
  }
  void operator()(std::int64_t n, std::int64_t oy0, std::int64_t oy1) const {
    if (fn) fn(context, n, oy0, oy1);
  }
};

namespace winograd {

/// The transforms of F(m x m, 3x3) along one dim, for m = 4 (input tiles of 6: Lavin and
/// Gray's points 0, +-1, +-2 and infinity) and m = 2 (tiles of 4: points 0, +-1, infinity).
/// input: B^T d (alpha = m + 2 values); output: A^T x (m values); weight: G g (alpha values, in
/// double). `stride` is the distance between consecutive values.
template <int M>
struct transforms;

template <>
struct transforms<4> {
  template <class V>
  TENET_INLINE static void input(const V* d, V* r, int stride) {
    using T = typename V::value_type;
    const V d0 = d[0], d1 = d[stride], d2 = d[2 * stride], d3 = d[3 * stride], d4 = d[4 * stride], d5 = d[5 * stride];
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
  template <class V>
  TENET_INLINE static void output(const V* m, V* y, int stride) {
    using T = typename V::value_type;
    const V m0 = m[0], m1 = m[stride], m2 = m[2 * stride], m3 = m[3 * stride], m4 = m[4 * stride], m5 = m[5 * stride];
    const V s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
    y[0] = m0 + s12 + s34;
    y[stride] = xsimd::fma(V(T(2)), d34, d12);
    y[2 * stride] = xsimd::fma(V(T(4)), s34, s12);
    y[3 * stride] = xsimd::fma(V(T(8)), d34, d12) + m5;
  }
  static void weight(const double* g, double* u, int stride) {
    const double g0 = g[0], g1 = g[stride], g2 = g[2 * stride];
    u[0] = g0 / 4;
    u[stride] = -(g0 + g1 + g2) / 6;
    u[2 * stride] = -(g0 - g1 + g2) / 6;
    u[3 * stride] = g0 / 24 + g1 / 12 + g2 / 6;
    u[4 * stride] = g0 / 24 - g1 / 12 + g2 / 6;
    u[5 * stride] = g2;
  }
};

template <>
struct transforms<2> {
  template <class V>
  TENET_INLINE static void input(const V* d, V* r, int stride) {
    const V d0 = d[0], d1 = d[stride], d2 = d[2 * stride], d3 = d[3 * stride];
    r[0] = d0 - d2;
    r[stride] = d1 + d2;
    r[2 * stride] = d2 - d1;
    r[3 * stride] = d1 - d3;
  }
  template <class V>
  TENET_INLINE static void output(const V* m, V* y, int stride) {
    const V m0 = m[0], m1 = m[stride], m2 = m[2 * stride], m3 = m[3 * stride];
    y[0] = m0 + m1 + m2;
    y[stride] = m1 - m2 - m3;
  }
  static void weight(const double* g, double* u, int stride) {
    const double g0 = g[0], g1 = g[stride], g2 = g[2 * stride];
    u[0] = g0;
    u[stride] = (g0 + g1 + g2) / 2;
    u[2 * stride] = (g0 - g1 + g2) / 2;
    u[3 * stride] = g2;
  }
};

/// The transformed weights U of the last convolutions a thread ran, so that a model's weights
/// are transformed once, not on every call: an entry is found by the weight's address and sizes
/// and used only when the weights are still bitwise what they were transformed from (a copy is
/// kept and compared: 4-9 bytes read per transformed value written, a few microseconds for
/// 64 x 64 channels against about 0.2 ms for the transform), so no write to the weights, through
/// tenet's in-place ops, an optimizer step or a raw pointer, and no other tensor later allocated at
/// the same address can give a stale result. At most `entries` weights and `capacity` bytes per
/// thread and dtype, the least recently used replaced; larger weights are not kept.
template <class T>
class weight_cache {
 public:
  static constexpr std::size_t entries = 16;
  static constexpr std::size_t capacity = std::size_t{64} << 20;
  static weight_cache& instance() {
    thread_local weight_cache c;
    return c;
  }
  /// U for the weights w (O x C x 3 x 3) under F(Mt x Mt), of u_size values: the kept one when w
  /// is unchanged, else transform(U) into a kept buffer; null when it is too large to keep.
  template <class F>
  const T* find(const T* w, std::int64_t O, std::int64_t C, int Mt, std::size_t u_size, const F& transform) {
    const std::size_t n = static_cast<std::size_t>(O * C * 9);
    ++clock_;
    for (auto& e : kept_) {
      if (e.w == w && e.O == O && e.C == C && e.Mt == Mt) {
        e.used = clock_;
        if (std::memcmp(e.raw.data(), w, n * sizeof(T)) != 0) {  // written since: transform again
          transform(e.U->data());
          std::memcpy(e.raw.data(), w, n * sizeof(T));
        }
        return e.U->data();
      }
    }
    const std::size_t bytes = (n + u_size) * sizeof(T);
    if (bytes > capacity / 4) return nullptr;
    while (!kept_.empty() && (kept_.size() >= entries || bytes_ + bytes > capacity)) {
      auto lru = kept_.begin();
      for (auto it = kept_.begin(); it != kept_.end(); ++it)
        if (it->used < lru->used) lru = it;
      bytes_ -= lru->bytes;
      kept_.erase(lru);
    }
    entry e{w, O, C, Mt, clock_, bytes, std::vector<T>(w, w + n), std::make_unique<pooled_buffer<T>>(u_size)};
    transform(e.U->data());
    bytes_ += bytes;
    kept_.push_back(std::move(e));
    return kept_.back().U->data();
  }
  /// Drops every kept transform (tests; memory).
  void clear() {
    kept_.clear();
    bytes_ = 0;
  }
  std::size_t size() const { return kept_.size(); }

 private:
  struct entry {
    const T* w;
    std::int64_t O, C;
    int Mt;
    std::uint64_t used;
    std::size_t bytes;
    std::vector<T> raw;                         // the weights U was transformed from
    std::unique_ptr<pooled_buffer<T>> U;        // aligned (block cache)
  };
  std::vector<entry> kept_;
  std::size_t bytes_ = 0;
  std::uint64_t clock_ = 0;
};

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

/// y = conv2d(x, w) by Winograd F(m x m, 3x3) for contiguous x (N, C, H, W), w (O, C, 3, 3),
/// y (N, O, oh, ow), where winograd_applies(g); then the epilogue on each image once written.
template <class T, int Mt>
void run_conv2d_winograd_tiles(const T* x, const T* w, T* y, const conv2d_geometry& g, conv_band_epilogue epilogue) {
  using tf = winograd::transforms<Mt>;
  constexpr int A = Mt + 2, A2 = A * A;  // input tile extent, transform elements
  using B = xsimd::batch<T>;
  using cfg = gemm_impl::config<T>;
  constexpr std::int64_t L = B::size, MR = cfg::MR, NB = cfg::NB, NR = cfg::NR;
  constexpr std::int64_t TB = MR * (sizeof(T) == 4 ? 4 : 2);  // tiles per block: V and M about 200-450 KiB
  const std::int64_t Cp = (g.C + L - 1) / L * L, Op = (g.O + NR - 1) / NR * NR;
  const std::int64_t th = (g.oh + Mt - 1) / Mt, tw = (g.ow + Mt - 1) / Mt, Hp = Mt * th + 2, Wp = Mt * tw + 2;
  const bool threads = !omp_in_parallel() && omp_get_max_threads() > 1;

  // U[k][c][o] = (G w[o][c] G^T)[k], zero for the padding channels: from the calling thread's
  // cache when it holds these very weights (winograd::weight_cache), else transformed here
  const std::size_t u_size = static_cast<std::size_t>(A2 * Cp * Op);
  auto transform = [&](T* U) {
    std::fill(U, U + u_size, T(0));
    for (std::int64_t o = 0; o < g.O; ++o) {
      for (std::int64_t c = 0; c < g.C; ++c) {
        double gk[9], t[3 * A], u[A2];
        for (int i = 0; i < 9; ++i) gk[i] = static_cast<double>(w[(o * g.C + c) * 9 + i]);
        for (int j = 0; j < 3; ++j) tf::weight(gk + j, t + j, 3);  // columns: t (A x 3)
        for (int i = 0; i < A; ++i) tf::weight(t + 3 * i, u + A * i, 1);  // rows: u (A x A)
        for (int k = 0; k < A2; ++k) U[(k * Cp + c) * Op + o] = static_cast<T>(u[k]);
      }
    }
  };
  std::optional<pooled_buffer<T>> u_buf;
  const T* U = winograd::weight_cache<T>::instance().find(w, g.O, g.C, Mt, u_size, transform);
  if (!U) {  // too large to keep
    u_buf.emplace(u_size);
    transform(u_buf->data());
    U = u_buf->data();
  }

  const pooled_buffer<T> xp_buf(static_cast<std::size_t>(g.N * Hp * Wp * Cp));
  T* const xp = xp_buf.data();
  const pooled_buffer<T> yo_buf(static_cast<std::size_t>(g.N * g.oh * g.ow * Op));
  T* const yo = yo_buf.data();
  // The three passes over images [n0, n1), split over the threads when `par`.
  auto images = [&](std::int64_t n0, std::int64_t n1, bool par) {
    // xp[n][yy][xx][c] = x[n][c][yy - pad_top][xx - pad_left], zero outside x and for c >= C; per
    // image and block of L channels, each xp element written once: L planes read row by row (L
    // sequential streams) into whole vectors of channels (reading one row of every channel per xp
    // row instead missed the cache on every row: 11% of the ResNet stage)
    const std::int64_t cblocks = Cp / L;
#pragma omp parallel for schedule(static) if (par)
    for (std::int64_t r = 0; r < (n1 - n0) * cblocks; ++r) {
      const std::int64_t n = n0 + r / cblocks, c0 = r % cblocks * L, cn = std::min(L, g.C - c0);
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
    const std::int64_t first = n0 * th * tw, tiles = (n1 - n0) * th * tw, blocks = (tiles + TB - 1) / TB;
#pragma omp parallel if (par)
    {
      T* V = gemm_impl::scratch<T, 10>(static_cast<std::size_t>(A2 * TB * Cp));
      T* M = gemm_impl::scratch<T, 11>(static_cast<std::size_t>(A2 * TB * Op));
#pragma omp for schedule(static)
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t t0 = b * TB, count = std::min(TB, tiles - t0);
        if (count < TB)  // the rows past the last tile: zeros (their products are not read)
          for (std::int64_t k = 0; k < A2; ++k) std::fill(V + (k * TB + count) * Cp, V + (k + 1) * TB * Cp, T(0));
        for (std::int64_t t = 0; t < count; ++t) {
          const std::int64_t tile = first + t0 + t, n = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
          const T* patch = xp + ((n * Hp + Mt * ty) * Wp + Mt * tx) * Cp;
          for (std::int64_t c = 0; c < Cp; c += L) {
            B d[A2], r[A2];
#pragma GCC unroll 6
            for (int i = 0; i < A; ++i)
#pragma GCC unroll 6
              for (int j = 0; j < A; ++j) d[A * i + j] = B::load_aligned(patch + (i * Wp + j) * Cp + c);
#pragma GCC unroll 6
            for (int j = 0; j < A; ++j) tf::input(d + j, r + j, A);  // columns
#pragma GCC unroll 6
            for (int i = 0; i < A; ++i) tf::input(r + A * i, d + A * i, 1);  // rows
#pragma GCC unroll 36
            for (int k = 0; k < A2; ++k) d[k].store_aligned(V + (k * TB + t) * Cp + c);
          }
        }
        for (std::int64_t k = 0; k < A2; ++k)
          for (std::int64_t i = 0; i < TB; i += MR)
            for (std::int64_t o = 0; o < Op; o += NR)
              winograd::tile_product<T, MR, NB>(Cp, V + (k * TB + i) * Cp, U + k * Cp * Op + o, Op,
                                                M + (k * TB + i) * Op + o, Op);
        for (std::int64_t t = 0; t < count; ++t) {
          const std::int64_t tile = first + t0 + t, n = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
          const std::int64_t rows = std::min<std::int64_t>(Mt, g.oh - Mt * ty), cols = std::min<std::int64_t>(Mt, g.ow - Mt * tx);
          T* out = yo + ((n * g.oh + Mt * ty) * g.ow + Mt * tx) * Op;
          for (std::int64_t o = 0; o < Op; o += L) {
            B m[A2], s[Mt * A];
#pragma GCC unroll 36
            for (int k = 0; k < A2; ++k) m[k] = B::load_aligned(M + (k * TB + t) * Op + o);
#pragma GCC unroll 6
            for (int j = 0; j < A; ++j) tf::output(m + j, s + j, A);  // columns: s (m x A)
            B r[Mt * Mt];
#pragma GCC unroll 4
            for (int i = 0; i < Mt; ++i) tf::output(s + A * i, r + Mt * i, 1);  // rows: r (m x m)
            for (std::int64_t i = 0; i < rows; ++i)
              for (std::int64_t j = 0; j < cols; ++j) r[Mt * i + j].store_aligned(out + (i * g.ow + j) * Op + o);
          }
        }
      }
    }

    // y[n][o][p] = yo[n][p][o], in blocks of 16 positions
    const std::int64_t P = g.oh * g.ow, pblocks = (P + 15) / 16;
#pragma omp parallel for schedule(static) if (par)
    for (std::int64_t r = 0; r < (n1 - n0) * pblocks; ++r) {
      const std::int64_t n = n0 + r / pblocks, p0 = r % pblocks * 16, pn = std::min<std::int64_t>(16, P - p0);
      const T* src = yo + (n * P + p0) * Op;
      T* dst = y + n * g.O * P + p0;
      for (std::int64_t o = 0; o < g.O; ++o)
        for (std::int64_t p = 0; p < pn; ++p) dst[o * P + p] = src[p * Op + o];
    }
    if (!par)
      for (std::int64_t n = n0; n < n1; ++n) epilogue(n, 0, g.oh);
  };  // images

  // With at least as many images as threads (a multiple of them, or 4 per thread), each thread
  // runs whole images: no barrier between the three passes (on a loaded machine a thread that
  // waits for its time slice stalls every barrier; the stage ran 0.7-1.1x torch.compile on two
  // threads with the passes split, where one thread was 1.1x). Otherwise the passes split tiles.
  const std::int64_t nt = omp_get_max_threads();
  if (threads && g.N >= nt && (g.N % nt == 0 || g.N >= 4 * nt)) {
#pragma omp parallel for schedule(static)
    for (std::int64_t n = 0; n < g.N; ++n) images(n, n + 1, false);
  } else {
    images(0, g.N, threads);
    if (threads && epilogue.fn) {
#pragma omp parallel for schedule(static)
      for (std::int64_t n = 0; n < g.N; ++n) epilogue(n, 0, g.oh);
    }
  }
}

/// y = conv2d(x, w) by Winograd for contiguous x (N, C, H, W), w (O, C, 3, 3), y (N, O, oh, ow),
/// where winograd_applies(g): F(2x2, 3x3) in float, F(4x4, 3x3) in double. F(4x4)'s error, a
/// few units of the lane type's precision at the scale of sum |w| |x| (its transforms scale by up
/// to 8 and 5, with sixths and 24ths in the weights'), is several times im2col's: in float that
/// is relative errors of 1e-5 on outputs that cancel, more than tenet promises for float (the
/// conv fuzzer found one at 3.8e-5); F(2x2)'s transforms add and halve only (about im2col's
/// error). In double a few units are far below any tolerance.
template <class T>
void run_conv2d_winograd(const T* x, const T* w, T* y, const conv2d_geometry& g, conv_band_epilogue epilogue = {}) {
  if constexpr (std::is_same_v<T, float>)
    run_conv2d_winograd_tiles<T, 2>(x, w, y, g, epilogue);
  else
    run_conv2d_winograd_tiles<T, 4>(x, w, y, g, epilogue);
}

}  // namespace tenet::detail::cpu
