#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// conv2d on the CPU: per image and group, im2col into a per-thread buffer (zeros where a window
// reads padding), then one GEMM (tenet's, backend/cpu/gemm.hpp)  y[g] (O/g x L) = w[g] (O/g x K) .
// col (K x L), K = C/g * kh * kw, L = oh * ow. Images run in parallel (each GEMM single-threaded)
// when there are at least as many as threads and 4 MFLOP of work; otherwise the GEMM threads
// itself. Small images (L < 256, padded planes of at most 4096 elements) put several images'
// columns in one GEMM, their im2col a gather from zero-padded planes (run_conv2d_batched).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>  // the max_pool2d rows

#include <tenet/backend/cpu/gemm.hpp>
#include <tenet/backend/cpu/winograd.hpp>  // run_conv2d_winograd, winograd_applies, winograd_eligible
#include <tenet/decomp/conv.hpp>  // conv2d_geometry

#include <omp.h>

namespace tenet::detail::cpu {

/// col[(c * kh + i) * kw + j][(oy - oy0) * ow + ox] = x[c][oy*sh - pt + i*dh][ox*sw - pl + j*dw]
/// (0 outside), for the output rows oy in [oy0, oy1) (default: all).
template <class T>
void im2col(const T* x, std::int64_t channels, const conv2d_geometry& g, T* col, std::int64_t oy0 = 0,
            std::int64_t oy1 = -1) {
  if (oy1 < 0) oy1 = g.oh;
  const std::int64_t L = (oy1 - oy0) * g.ow;
  for (std::int64_t c = 0; c < channels; ++c) {
    const T* xc = x + c * g.H * g.W;
    for (std::int64_t i = 0; i < g.kh; ++i) {
      for (std::int64_t j = 0; j < g.kw; ++j) {
        T* row = col + ((c * g.kh + i) * g.kw + j) * L;
        const std::int64_t xoff = j * g.dil_w - g.pad_left;
        // ox in [lo, hi) reads inside the row: 0 <= ox*sw + xoff < W
        const std::int64_t lo = xoff >= 0 ? 0 : std::min(g.ow, (-xoff + g.stride_w - 1) / g.stride_w);
        const std::int64_t hi =
            g.W - xoff <= 0 ? 0 : std::max(lo, std::min(g.ow, (g.W - xoff + g.stride_w - 1) / g.stride_w));
        for (std::int64_t oy = oy0; oy < oy1; ++oy) {
          T* out = row + (oy - oy0) * g.ow;
          const std::int64_t iy = oy * g.stride_h - g.pad_top + i * g.dil_h;
          if (iy < 0 || iy >= g.H) {
            std::fill(out, out + g.ow, T(0));
            continue;
          }
          const T* src = xc + iy * g.W + xoff;
          std::fill(out, out + lo, T(0));
          if (g.stride_w == 1) {
            if (hi > lo) std::memcpy(out + lo, src + lo, static_cast<std::size_t>(hi - lo) * sizeof(T));
          } else {
            for (std::int64_t ox = lo; ox < hi; ++ox) out[ox] = src[ox * g.stride_w];
          }
          std::fill(out + hi, out + g.ow, T(0));
        }
      }
    }
  }
}

/// For small outputs: where each column of im2col reads, per kernel tap (i, j) and output
/// position p, in a channel plane padded by the conv's padding on every side ((H + pt + pb) x
/// (W + pl + pr), zeros around): kh * kw * L offsets, every one inside the padded plane.
inline std::vector<std::int32_t> im2col_taps(const conv2d_geometry& g) {
  const std::int64_t L = g.oh * g.ow, Wp = g.W + g.pad_left + g.pad_right;
  std::vector<std::int32_t> t(static_cast<std::size_t>(g.kh * g.kw * L));
  for (std::int64_t i = 0; i < g.kh; ++i)
    for (std::int64_t j = 0; j < g.kw; ++j)
      for (std::int64_t oy = 0; oy < g.oh; ++oy)
        for (std::int64_t ox = 0; ox < g.ow; ++ox)
          t[static_cast<std::size_t>((i * g.kw + j) * L + oy * g.ow + ox)] =
              static_cast<std::int32_t>((oy * g.stride_h + i * g.dil_h) * Wp + ox * g.stride_w + j * g.dil_w);
  return t;
}
/// im2col through the tap table (im2col_taps) from zero-padded copies of the channel planes
/// (`padded`, (H + pt + pb) * (W + pl + pr) elements per channel, its border zero): one gather
/// loop of L elements per row, with no test for padding; the row-by-row copies of im2col cost
/// more than the GEMM for images of a few pixels.
template <class T>
void im2col_gather(const T* x, std::int64_t channels, const conv2d_geometry& g, const std::int32_t* taps, T* col,
                   std::int64_t ld, T* padded) {
  const std::int64_t L = g.oh * g.ow, kk = g.kh * g.kw, Wp = g.W + g.pad_left + g.pad_right;
  const std::int64_t plane = (g.H + g.pad_top + g.pad_bottom) * Wp;
  for (std::int64_t c = 0; c < channels; ++c) {
    const T* xc = x + c * g.H * g.W;
    T* pc = padded + c * plane;  // the border stays zero: only the interior is written
    for (std::int64_t y = 0; y < g.H; ++y)
      for (std::int64_t x0 = 0; x0 < g.W; ++x0) pc[(y + g.pad_top) * Wp + g.pad_left + x0] = xc[y * g.W + x0];
    for (std::int64_t k = 0; k < kk; ++k) {
      const std::int32_t* t = taps + k * L;
      T* row = col + (c * kk + k) * ld;
      for (std::int64_t p = 0; p < L; ++p) row[p] = pc[t[p]];
    }
  }
}

/// conv2d of small images: the columns of nb images side by side in one GEMM per group
/// (w[g] (Og x K) . col (K x nb*L)), then each image's rows copied to y. A GEMM of a few dozen
/// columns per image is mostly packing and call overhead (the digits CNN: 8x8 and 4x4 outputs).
template <class T>
void run_conv2d_batched(const T* x, const T* w, T* y, const conv2d_geometry& g, std::int64_t nb, double flops,
                        conv_band_epilogue epilogue) {
  const std::int64_t Cg = g.C / g.groups, Og = g.O / g.groups;
  const std::int64_t K = Cg * g.kh * g.kw, L = g.oh * g.ow;
  const std::int64_t chunks = (g.N + nb - 1) / nb;
  const std::vector<std::int32_t> taps = im2col_taps(g);
  const auto padded_size = static_cast<std::size_t>(Cg * (g.H + g.pad_top + g.pad_bottom) *
                                                    (g.W + g.pad_left + g.pad_right));
  auto chunk = [&](std::int64_t c, std::vector<T>& col, std::vector<T>& out, std::vector<T>& padded) {
    const std::int64_t n0 = c * nb, count = std::min(nb, g.N - n0), width = count * L;
    for (std::int64_t gi = 0; gi < g.groups; ++gi) {
      for (std::int64_t i = 0; i < count; ++i)
        im2col_gather(x + ((n0 + i) * g.C + gi * Cg) * g.H * g.W, Cg, g, taps.data(), col.data() + i * L, width,
                      padded.data());
      gemm_ex<T>(w + gi * Og * K, K, 1, col.data(), width, 1, out.data(), width, Og, width, K);
      for (std::int64_t i = 0; i < count; ++i)
        for (std::int64_t o = 0; o < Og; ++o)
          std::memcpy(y + ((n0 + i) * g.O + gi * Og + o) * L, out.data() + o * width + i * L,
                      static_cast<std::size_t>(L) * sizeof(T));
    }
    for (std::int64_t i = 0; i < count; ++i) epilogue(n0 + i, 0, g.oh);
  };
  const auto col_size = static_cast<std::size_t>(K * nb * L), out_size = static_cast<std::size_t>(Og * nb * L);
  if (chunks >= omp_get_max_threads() && chunks > 1 && flops >= gemm_parallel_min_flops && !omp_in_parallel()) {
    const gemm_blocking blk = current_gemm_blocking();  // the caller's, for the worker threads
#pragma omp parallel
    {
      const gemm_blocking_scope scope(blk);
      std::vector<T> col(col_size), out(out_size), padded(padded_size);  // small images: small buffers
#pragma omp for schedule(static)
      for (std::int64_t c = 0; c < chunks; ++c) chunk(c, col, out, padded);
    }
  } else {
    std::vector<T> col(col_size), out(out_size), padded(padded_size);
    for (std::int64_t c = 0; c < chunks; ++c) chunk(c, col, out, padded);
  }
}

/// y = conv2d(x, w) by im2col + GEMM for contiguous x (N, C, H, W), w (O, C/groups, kh, kw),
/// y (N, O, oh, ow): every geometry; then the epilogue on each band of rows once written.
template <class T>
void run_conv2d_im2col(const T* x, const T* w, T* y, const conv2d_geometry& g, conv_band_epilogue epilogue = {}) {
  const std::int64_t Cg = g.C / g.groups, Og = g.O / g.groups;
  const std::int64_t K = Cg * g.kh * g.kw, L = g.oh * g.ow;
  if (g.N == 0 || g.O == 0 || L == 0) {
    for (std::int64_t n = 0; n < g.N; ++n) epilogue(n, 0, g.oh);  // nothing to write (an empty image: a no-op)
    return;
  }
  const double flops = 2.0 * static_cast<double>(g.N) * static_cast<double>(g.O) * static_cast<double>(L) *
                       static_cast<double>(K);
  // small images (padded planes of at most 4096 elements, outputs of fewer than 256 positions):
  // about 512 columns of several images per GEMM, im2col by gathers from padded planes
  const std::int64_t padded_plane = (g.H + g.pad_top + g.pad_bottom) * (g.W + g.pad_left + g.pad_right);
  if (const std::int64_t nb = std::min<std::int64_t>(g.N, 512 / L); L < 256 && nb > 1 && K > 0 && padded_plane <= 4096) {
    run_conv2d_batched(x, w, y, g, nb, flops, epilogue);
    return;
  }
  const bool direct = g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 &&
                      g.pad_left == 0 && g.pad_bottom == 0 && g.pad_right == 0;  // col is x itself
  // images on the threads when there are enough of them and enough work: GEMM's rule (4 MFLOP,
  // gemm.hpp). A parallel region for a few microseconds of work costs more than it saves, and
  // on a busy machine a thread that waits for its time slice makes a 0.4 ms model take 24 ms.
  const bool images_on_threads =
      g.N >= omp_get_max_threads() && g.N > 1 && flops >= gemm_parallel_min_flops && !omp_in_parallel();
  // Where each image's GEMM runs on one thread, the output rows go in bands whose columns (K x
  // band) fill about 512 KiB: im2col writes them and the GEMM reads them in L2, and the epilogue
  // finds its band there (the 7x7/2 stem: 147 x 12544 columns were 7.4 MB per image written and
  // read back from memory). A GEMM that threads itself keeps whole images (its split needs columns).
  const bool gemm_threads = !images_on_threads && !omp_in_parallel() && omp_get_max_threads() > 1;
  const std::int64_t band_columns = std::max<std::int64_t>(1, (std::int64_t{512} << 10) / static_cast<std::int64_t>(sizeof(T)) / std::max<std::int64_t>(K, 1));
  const std::int64_t band = direct || gemm_threads ? g.oh : std::clamp<std::int64_t>(band_columns / g.ow, 1, g.oh);
  auto image = [&](std::int64_t n, T* col) {
    for (std::int64_t oy0 = 0; oy0 < g.oh; oy0 += band) {
      const std::int64_t oy1 = std::min(g.oh, oy0 + band), Lb = (oy1 - oy0) * g.ow;
      for (std::int64_t gi = 0; gi < g.groups; ++gi) {
        const T* xg = x + (n * g.C + gi * Cg) * g.H * g.W;
        const T* cols = xg;
        if (!direct) {
          im2col(xg, Cg, g, col, oy0, oy1);
          cols = col;
        }
        // y[g] (Og x L, row-major), its columns of the band = w[g] (Og x K) . col (K x Lb); K == 0
        // writes zeros
        gemm_ex<T>(w + gi * Og * K, K, 1, cols, Lb, 1, y + (n * g.O + gi * Og) * L + oy0 * g.ow, L, Og, Lb, K);
      }
      epilogue(n, oy0, oy1);
    }
  };
  const std::size_t buffer = direct ? 0 : static_cast<std::size_t>(K * band * g.ow);
  if (images_on_threads) {
    const gemm_blocking blk = current_gemm_blocking();  // the caller's, for the worker threads
#pragma omp parallel
    {
      const gemm_blocking_scope scope(blk);
      const pooled_buffer<T> col(buffer);  // (K x L per image: megabytes, faulted in per call from the heap)
#pragma omp for schedule(static)
      for (std::int64_t n = 0; n < g.N; ++n) image(n, col.data());
    }
  } else {
    const pooled_buffer<T> col(buffer);
    for (std::int64_t n = 0; n < g.N; ++n) image(n, col.data());
  }
}

/// Which kernel conv2d takes on the CPU: automatic (Winograd where winograd_eligible, im2col +
/// GEMM otherwise), or one forced (Winograd where winograd_applies) for the calling thread, as
/// tests and benchmarks do: conv2d_kernel_scope. Each thread starts with TENET_CONV2D_KERNEL
/// (`winograd` or `im2col`; unset: automatic), so that a program's convolutions can all be
/// run on one kernel from outside (the conv fuzzer's programs are below Winograd's crossover).
enum class conv2d_kernel { automatic, im2col, winograd };
inline conv2d_kernel conv2d_kernel_from_environment() {
  static const conv2d_kernel k = [] {
    const char* e = std::getenv("TENET_CONV2D_KERNEL");
    if (e && std::string_view(e) == "winograd") return conv2d_kernel::winograd;
    if (e && std::string_view(e) == "im2col") return conv2d_kernel::im2col;
    return conv2d_kernel::automatic;
  }();
  return k;
}
inline conv2d_kernel& current_conv2d_kernel() {
  thread_local conv2d_kernel k = conv2d_kernel_from_environment();
  return k;
}
/// Forces conv2d's CPU kernel on this thread while in scope.
class conv2d_kernel_scope {
 public:
  explicit conv2d_kernel_scope(conv2d_kernel k) : saved_(current_conv2d_kernel()) { current_conv2d_kernel() = k; }
  ~conv2d_kernel_scope() { current_conv2d_kernel() = saved_; }
  conv2d_kernel_scope(const conv2d_kernel_scope&) = delete;
  conv2d_kernel_scope& operator=(const conv2d_kernel_scope&) = delete;

 private:
  conv2d_kernel saved_;
};

/// y = conv2d(x, w) for contiguous x (N, C, H, W), w (O, C/groups, kh, kw), y (N, O, oh, ow):
/// Winograd (winograd.hpp) or im2col + GEMM, as current_conv2d_kernel() says; then the epilogue
/// on each band of output rows (a whole image, or the rows of an im2col band) once written, on
/// the thread that wrote it (conv_epilogue_pattern).
template <class T>
void run_conv2d(const T* x, const T* w, T* y, const conv2d_geometry& g, conv_band_epilogue epilogue = {}) {
  const conv2d_kernel k = current_conv2d_kernel();
  if (k == conv2d_kernel::automatic ? winograd_eligible(g) : k == conv2d_kernel::winograd && winograd_applies(g))
    run_conv2d_winograd(x, w, y, g, epilogue);
  else
    run_conv2d_im2col(x, w, y, g, epilogue);
}

/// max_pool2d of x (N, C, H, W; any strides) into out (N, C, oh, ow; contiguous): one pass over
/// each window, NaN propagating as amax does; `low` fills windows that read padding only. Float
/// and double planes with unit column stride take the separable form: the window's rows combined
/// a vector of columns at a time into one row, then its columns per output. (The maximum of
/// each window is the same; of a +0.0 and a -0.0 in one window either may come out, where the
/// scalar loop keeps the first in row-major order: equal values either way.)
template <class T, class Sizes, class Plan>
void run_max_pool2d(T* od, const T* xd, const Sizes& xs, const Sizes& st, const Plan& pl, T low) {
  const std::int64_t planes = xs[0] * xs[1], oh = pl.out[0], ow = pl.out[1];
  if (planes == 0 || oh * ow == 0) return;
  // v replaces m when it is larger or NaN (a NaN, once in, stays)
  auto take = [](T m, T v) { return (v != v || v > m) ? v : m; };
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (st[3] == 1) {
      using B = xsimd::batch<T>;
      constexpr std::int64_t L = B::size;
      const std::int64_t W = xs[3];
#pragma omp parallel if (planes * oh * ow > 32768)
      {
        std::vector<T> rowmax(static_cast<std::size_t>(W));
        T* const t = rowmax.data();
#pragma omp for schedule(static)
        for (std::int64_t plane = 0; plane < planes; ++plane) {
          const T* base = xd + (plane / xs[1]) * st[0] + (plane % xs[1]) * st[1];
          T* o = od + plane * oh * ow;
          for (std::int64_t oy = 0; oy < oh; ++oy) {
            bool any = false;  // whether a row of the window lies inside the input
            for (std::int64_t i = 0; i < pl.k[0]; ++i) {
              const std::int64_t iy = oy * pl.s[0] - pl.p[0] + i * pl.d[0];
              if (iy < 0 || iy >= xs[2]) continue;
              const T* row = base + iy * st[2];
              if (!any) {
                std::copy(row, row + W, t);
                any = true;
                continue;
              }
              std::int64_t x = 0;
              for (; x + L <= W; x += L) {
                const B m = B::load_unaligned(t + x), v = B::load_unaligned(row + x);
                xsimd::select(xsimd::isnan(v) | (v > m), v, m).store_unaligned(t + x);  // (xsimd's != is ordered: false for NaN)
              }
              for (; x < W; ++x) t[x] = take(t[x], row[x]);
            }
            T* orow = o + oy * ow;
            if (!any) {
              std::fill(orow, orow + ow, low);
              continue;
            }
            for (std::int64_t ox = 0; ox < ow; ++ox) {
              const std::int64_t x0 = ox * pl.s[1] - pl.p[1];
              T m = low;
              for (std::int64_t j = 0; j < pl.k[1]; ++j) {
                const std::int64_t ix = x0 + j * pl.d[1];
                if (ix >= 0 && ix < W) m = take(m, t[ix]);
              }
              orow[ox] = m;
            }
          }
        }
      }
      return;
    }
  }
#pragma omp parallel for schedule(static) if (planes * oh * ow > 32768)
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    const T* base = xd + (plane / xs[1]) * st[0] + (plane % xs[1]) * st[1];
    T* o = od + plane * oh * ow;
    for (std::int64_t oy = 0; oy < oh; ++oy) {
      const std::int64_t y0 = oy * pl.s[0] - pl.p[0];
      for (std::int64_t ox = 0; ox < ow; ++ox) {
        const std::int64_t x0 = ox * pl.s[1] - pl.p[1];
        T m = low;
        for (std::int64_t i = 0; i < pl.k[0]; ++i) {
          const std::int64_t iy = y0 + i * pl.d[0];
          if (iy < 0 || iy >= xs[2]) continue;
          const T* row = base + iy * st[2];
          for (std::int64_t j = 0; j < pl.k[1]; ++j) {
            const std::int64_t ix = x0 + j * pl.d[1];
            if (ix < 0 || ix >= xs[3]) continue;
            const T v = row[ix * st[3]];
            if (v != v || v > m) m = v;
            if (m != m) break;
          }
          if (m != m) break;
        }
        o[oy * ow + ox] = m;
      }
    }
  }
}

}  // namespace tenet::detail::cpu
