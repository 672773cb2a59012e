#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// tenet's own GEMM for float and double on the CPU: C[M,N] = A[M,K] · B[K,N], A and B with any
// element strides, C row-major with leading dimension ldc. The structure is the BLIS one, written
// for a row-major C (the vector dimension is N, the broadcast dimension is M):
//
//   for i3 over M in blocks of MC            (A block, about 3 MiB: L3)
//     for p over K in blocks of KC           (one rank-KC update; the first one overwrites C)
//       pack A[i3 block, p block] into MR-row panels (k-major, zero-padded)
//       for j0 over N in blocks of NC
//         pack B[p block, j0 block] into NR-column panels (k-major, zero-padded; about 512 KiB: L2)
//         for ir over MR rows: for jr over NR columns: micro-kernel
//
// The micro-kernel keeps an MR x NR tile of C in registers (MR rows x NB xsimd batches), reads one
// A micro-panel (KC x MR, stays in L1 across the jr loop) and streams B micro-panels from L2: per
// k it loads NB batches of B, broadcasts MR values of A and issues MR*NB FMAs. Partial tiles at
// the edges go through a small local tile (the panels are zero-padded, so the kernel always runs
// full). Packing reads A and B through their strides, so transposed views cost no extra copy.
//
// Threads: C is cut into a grid of about `threads` parts (at multiples of MR and NR, the grid that
// repacks least), and each thread runs the loops above on its parts with its own packing buffers,
// with no barrier. The tile grid and the K blocking do not depend on the cut, so the result does
// not depend on the number of threads.
//
// Blocking: KC, NC and MC default to config<T> (sized for L1/L2/L3 below) and can be set at run
// time per thread (gemm_blocking, current_gemm_blocking(): tenet::compile's max_autotune times a
// few candidates per shape class).
//
// Epilogue: gemm_ex takes a functor called once on every finished C tile (after the last K block),
// while the tile is still in cache: ep(T* c, ldc, row0, col0, rows, cols), c pointing at
// C[row0, col0]. It is what a fused linear + bias + activation plugs into; `no_epilogue` costs
// nothing.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include <omp.h>

namespace tenet::detail::cpu {

/// Below this many flops a GEMM, or a conv's images, run on one thread: starting the team costs
/// more than it saves (and inside another parallel region, nothing is split further).
inline constexpr double gemm_parallel_min_flops = 4e6;

struct no_epilogue {
  template <class T>
  void operator()(T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t) const {}
};

/// The GEMM's cache blocking, chosen at run time: kc (the depth of one rank-kc update: an A
/// micro-panel kc x MR stays in L1), nc (the columns of a packed B block, kc x nc: L2) and mc (the
/// rows of a packed A block, mc x kc: L3). A zero field takes config<T>'s default. The register
/// tile (MR x NR) stays a compile-time constant. mc and nc do not change any element's summation
/// order (results are bit for bit the same); kc does (C accumulates one rank-kc update at a time).
struct gemm_blocking {
  std::int64_t mc = 0, kc = 0, nc = 0;
  bool operator==(const gemm_blocking&) const = default;
  bool is_default() const { return mc == 0 && kc == 0 && nc == 0; }
};
/// The blocking GEMMs started on this thread use (tenet::compile's max_autotune sets it for a
/// call; gemm_ex reads it once on entry and hands it to its worker threads).
inline gemm_blocking& current_gemm_blocking() {
  thread_local gemm_blocking b;
  return b;
}
/// Sets the current blocking for a scope (a batched matmul's or conv's worker threads copy the
/// caller's blocking with it).
struct gemm_blocking_scope {
  gemm_blocking previous;
  explicit gemm_blocking_scope(gemm_blocking b) : previous(current_gemm_blocking()) { current_gemm_blocking() = b; }
  ~gemm_blocking_scope() { current_gemm_blocking() = previous; }
  gemm_blocking_scope(const gemm_blocking_scope&) = delete;
  gemm_blocking_scope& operator=(const gemm_blocking_scope&) = delete;
};

namespace gemm_impl {

/// Register tile and cache blocks for lane type T on the arch the build targets.
template <class T>
struct config {
  using batch = xsimd::batch<T>;
  static constexpr int lanes = static_cast<int>(batch::size);
  // 32 vector registers with AVX-512, 16 with AVX/AVX2 (and NEON has 32, SSE 16).
  static constexpr bool many_regs = sizeof(batch) >= 64;
  static constexpr int MR = many_regs ? 12 : 6;  // rows of the register tile (broadcasts)
  static constexpr int NB = 2;                   // batches per row of the tile
  static constexpr int NR = NB * lanes;          // columns of the register tile
  // KC: an A micro-panel (KC x MR) stays in L1 next to streaming B panels.
  static constexpr std::int64_t KC = sizeof(T) == 4 ? 384 : 256;
  // NC: a packed B block (KC x NC) takes about half of a 1 MiB L2.
  static constexpr std::int64_t NC = ((512 * 1024) / (KC * sizeof(T))) / NR * NR;
  // MC: a packed A block (MC x KC), about 3 MiB (L3).
  static constexpr std::int64_t MC = ((3 * 1024 * 1024) / (KC * sizeof(T))) / MR * MR;
};

/// A blocking with every field filled in for T: zero fields take the defaults, mc is a multiple
/// of MR and nc of NR (at least one register tile each).
template <class T>
gemm_blocking resolve(gemm_blocking b) {
  using cfg = config<T>;
  gemm_blocking r;
  r.kc = b.kc > 0 ? b.kc : cfg::KC;
  r.nc = b.nc > 0 ? std::max<std::int64_t>(cfg::NR, b.nc / cfg::NR * cfg::NR) : cfg::NC;
  r.mc = b.mc > 0 ? std::max<std::int64_t>(cfg::MR, b.mc / cfg::MR * cfg::MR) : cfg::MC;
  return r;
}

}  // namespace gemm_impl

/// The blockings tenet::compile's max_autotune times for lane type T, resolved; the default first.
/// Besides the default (kc for L1, a 512 KiB B block, a 3 MiB A block): a shallower and a deeper
/// kc, smaller blocks (256 KiB B, 1 MiB A: a busier shared cache) and larger ones (768 KiB B,
/// 6 MiB A).
template <class T>
std::vector<gemm_blocking> gemm_blocking_candidates() {
  using cfg = gemm_impl::config<T>;
  auto make = [](std::int64_t kc, std::int64_t b_bytes, std::int64_t a_bytes) {
    const auto per_k = kc * static_cast<std::int64_t>(sizeof(T));
    return gemm_impl::resolve<T>({a_bytes / per_k, kc, b_bytes / per_k});
  };
  constexpr std::int64_t KiB = 1024, MiB = 1024 * 1024;
  std::vector<gemm_blocking> c{gemm_impl::resolve<T>({})};
  for (auto b : {make(cfg::KC * 2 / 3, 512 * KiB, 3 * MiB), make(cfg::KC * 4 / 3, 512 * KiB, 3 * MiB),
                 make(cfg::KC, 256 * KiB, 1 * MiB), make(cfg::KC, 768 * KiB, 6 * MiB)})
    if (std::find(c.begin(), c.end(), b) == c.end()) c.push_back(b);
  return c;
}

namespace gemm_impl {

/// A grow-only, 64-byte aligned scratch buffer per thread (packing buffers; no allocation per call
/// once warm).
template <class T, int Slot>
T* scratch(std::size_t n) {
  struct deleter {
    void operator()(T* p) const { ::operator delete(p, std::align_val_t{64}); }
  };
  thread_local std::unique_ptr<T, deleter> buf;
  thread_local std::size_t cap = 0;
  if (n > cap) {
    buf.reset();
    buf.reset(static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})));
    cap = n;
  }
  return buf.get();
}

/// Packs rows [0, mc) x k [0, kc) of A (a points at the block's first element) into MR-row panels:
/// panel r holds a[(r*MR + i) , k] at dst[r*kc*MR + k*MR + i]; rows past mc are zero.
template <class T, int MR>
void pack_a_panel(const T* a, std::int64_t ars, std::int64_t acs, std::int64_t rows, std::int64_t kc, T* dst) {
  if (rows < MR) std::fill(dst, dst + kc * MR, T(0));
  if (ars == 1) {
    for (std::int64_t k = 0; k < kc; ++k)
      for (std::int64_t i = 0; i < rows; ++i) dst[k * MR + i] = a[i + k * acs];
  } else {
    for (std::int64_t i = 0; i < rows; ++i) {
      const T* src = a + i * ars;
      for (std::int64_t k = 0; k < kc; ++k) dst[k * MR + i] = src[k * acs];
    }
  }
}

/// Packs k [0, kc) x columns [0, cols) of B into one NR-column panel: dst[k*NR + j]; columns past
/// cols are zero.
template <class T, int NR>
void pack_b_panel(const T* b, std::int64_t brs, std::int64_t bcs, std::int64_t cols, std::int64_t kc, T* dst) {
  if (bcs == 1) {
    for (std::int64_t k = 0; k < kc; ++k) {
      std::memcpy(dst + k * NR, b + k * brs, static_cast<std::size_t>(cols) * sizeof(T));
      if (cols < NR) std::fill(dst + k * NR + cols, dst + (k + 1) * NR, T(0));
    }
  } else if (brs == 1) {
    // B transposed (linear's weight.t()): each column's k-run is contiguous. In blocks of one
    // cache line of k, the panel rows being written (KB x NR) and the lines being read (one per
    // column) all stay in L1; a whole-kc column at a time would sweep kc x NR (48 KiB) per column.
    if (cols < NR) std::fill(dst, dst + kc * NR, T(0));
    constexpr std::int64_t KB = 64 / sizeof(T);
    for (std::int64_t k0 = 0; k0 < kc; k0 += KB) {
      const std::int64_t kb = std::min(KB, kc - k0);
      for (std::int64_t j = 0; j < cols; ++j) {
        const T* src = b + j * bcs + k0;
        T* d = dst + k0 * NR + j;
        for (std::int64_t t = 0; t < kb; ++t) d[t * NR] = src[t];
      }
    }
  } else {
    if (cols < NR) std::fill(dst, dst + kc * NR, T(0));
    for (std::int64_t j = 0; j < cols; ++j) {
      const T* src = b + j * bcs;
      for (std::int64_t k = 0; k < kc; ++k) dst[k * NR + j] = src[k * brs];
    }
  }
}

/// The register-tiled micro-kernel: tile[MR x NR] (+)= Apanel(kc x MR)^T · Bpanel(kc x NR), tile
/// row stride ldc. `accumulate` false overwrites the tile.
template <class T, int MR, int NB>
TENET_INLINE void micro_kernel(std::int64_t kc, const T* __restrict a, const T* __restrict b, T* __restrict c,
                               std::int64_t ldc, bool accumulate) {
  using B = xsimd::batch<T>;
  constexpr int L = static_cast<int>(B::size);
  constexpr int NR = NB * L;
  B acc[MR][NB];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) acc[i][j] = B(T(0));
  for (std::int64_t k = 0; k < kc; ++k) {
    B bv[NB];
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) bv[j] = B::load_aligned(b + j * L);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const B av(a[i]);
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) acc[i][j] = xsimd::fma(av, bv[j], acc[i][j]);
    }
    a += MR;
    b += NR;
  }
  if (accumulate) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j)
        (acc[i][j] + B::load_unaligned(c + i * ldc + j * L)).store_unaligned(c + i * ldc + j * L);
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) acc[i][j].store_unaligned(c + i * ldc + j * L);
  }
}

/// The macro-kernel: C[rows x cols] (+)= packed A block rows x packed B block, tile by tile.
template <class T, class Ep>
void macro_kernel(std::int64_t rows, std::int64_t cols, std::int64_t kc, const T* pa, const T* pb, T* c,
                  std::int64_t ldc, bool accumulate, bool last, std::int64_t row0, std::int64_t col0, const Ep& ep) {
  using cfg = config<T>;
  constexpr int MR = cfg::MR, NR = cfg::NR;
  alignas(64) T tile[MR * NR];
  for (std::int64_t i = 0; i < rows; i += MR) {
    const std::int64_t mr = std::min<std::int64_t>(MR, rows - i);
    const T* ap = pa + (i / MR) * kc * MR;
    for (std::int64_t j = 0; j < cols; j += NR) {
      const std::int64_t nr = std::min<std::int64_t>(NR, cols - j);
      const T* bp = pb + (j / NR) * kc * NR;
      T* ct = c + i * ldc + j;
      if (mr == MR && nr == NR) {
        micro_kernel<T, MR, cfg::NB>(kc, ap, bp, ct, ldc, accumulate);
      } else {
        micro_kernel<T, MR, cfg::NB>(kc, ap, bp, tile, NR, false);
        for (std::int64_t ii = 0; ii < mr; ++ii)
          for (std::int64_t jj = 0; jj < nr; ++jj)
            ct[ii * ldc + jj] = accumulate ? ct[ii * ldc + jj] + tile[ii * NR + jj] : tile[ii * NR + jj];
      }
      if constexpr (!std::is_same_v<Ep, no_epilogue>)
        if (last) ep(ct, ldc, row0 + i, col0 + j, mr, nr);
    }
  }
}

}  // namespace gemm_impl

namespace gemm_impl {
/// The blocked loops over C[M,N] on the calling thread; the epilogue sees tile positions offset by
/// (row_off, col_off) (the part's place in the whole C). `into`: C += A B (C's values are kept).
template <class T, class Ep>
void blocked(const T* a, std::int64_t ars, std::int64_t acs, const T* b, std::int64_t brs, std::int64_t bcs, T* c,
             std::int64_t ldc, std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t row_off,
             std::int64_t col_off, const Ep& ep, const gemm_blocking& blk, bool into = false) {
  using cfg = config<T>;
  constexpr int MR = cfg::MR, NR = cfg::NR;
  const std::int64_t MC = blk.mc, KC = blk.kc, NC = blk.nc;  // resolved (resolve<T>)
  // M blocks of equal height (a multiple of MR, at most MC + MR), N blocks of equal width (a
  // multiple of NR, at most NC + NR): no thin leftover block that would repack a whole operand.
  const std::int64_t mblocks = (M + MC - 1) / MC;
  const std::int64_t mh = ((M + mblocks - 1) / mblocks + MR - 1) / MR * MR;
  const std::int64_t npanels = (N + NR - 1) / NR;
  const std::int64_t nblocks = (N + NC - 1) / NC;
  const std::int64_t nw = (npanels + nblocks - 1) / nblocks * NR;
  const std::int64_t kc_max = std::min<std::int64_t>(KC, K);
  T* pa = scratch<T, 0>(static_cast<std::size_t>(std::min<std::int64_t>(mh, (M + MR - 1) / MR * MR) * kc_max));
  T* pb = scratch<T, 1>(static_cast<std::size_t>(std::min<std::int64_t>(nw, npanels * NR) * kc_max));

  for (std::int64_t i3 = 0; i3 < M; i3 += mh) {
    const std::int64_t mc = std::min<std::int64_t>(mh, M - i3);
    const std::int64_t a_panels = (mc + MR - 1) / MR;
    for (std::int64_t p = 0; p < K; p += KC) {
      const std::int64_t kc = std::min<std::int64_t>(KC, K - p);
      const bool accumulate = into || p > 0, last = p + kc >= K;
      const T* ablk = a + i3 * ars + p * acs;
      for (std::int64_t r = 0; r < a_panels; ++r)
        pack_a_panel<T, MR>(ablk + r * MR * ars, ars, acs, std::min<std::int64_t>(MR, mc - r * MR), kc,
                            pa + r * kc * MR);
      for (std::int64_t j0 = 0; j0 < N; j0 += nw) {
        const std::int64_t ncols = std::min(nw, N - j0);
        for (std::int64_t j = 0; j < ncols; j += NR)
          pack_b_panel<T, NR>(b + p * brs + (j0 + j) * bcs, brs, bcs, std::min<std::int64_t>(NR, ncols - j), kc,
                              pb + (j / NR) * kc * NR);
        macro_kernel<T>(mc, ncols, kc, pa, pb, c + i3 * ldc + j0, ldc, accumulate, last, row_off + i3, col_off + j0,
                        ep);
      }
    }
  }
}

}  // namespace gemm_impl

/// C[M,N] = A[M,K] · B[K,N] (+ epilogue on each finished tile); A and B with element strides
/// (ars, acs), (brs, bcs); C row-major with row stride ldc. Threads with OpenMP unless called inside
/// a parallel region (batched matmul threads over batches) or the problem is small.
template <class T, class Ep = no_epilogue>
void gemm_ex(const T* a, std::int64_t ars, std::int64_t acs, const T* b, std::int64_t brs, std::int64_t bcs, T* c,
             std::int64_t ldc, std::int64_t M, std::int64_t N, std::int64_t K, const Ep& ep = {}) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "gemm_ex: float or double");
  using cfg = gemm_impl::config<T>;
  constexpr int MR = cfg::MR, NR = cfg::NR;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (std::int64_t i = 0; i < M; ++i) std::fill(c + i * ldc, c + i * ldc + N, T(0));
    if constexpr (!std::is_same_v<Ep, no_epilogue>)
      for (std::int64_t i = 0; i < M; i += MR)
        for (std::int64_t j = 0; j < N; j += NR)
          ep(c + i * ldc + j, ldc, i, j, std::min<std::int64_t>(MR, M - i), std::min<std::int64_t>(NR, N - j));
    return;
  }
  const gemm_blocking blk = gemm_impl::resolve<T>(current_gemm_blocking());
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const int threads = (omp_in_parallel() || flops < gemm_parallel_min_flops) ? 1 : omp_get_max_threads();

  if (threads > 1) {
    // Each thread owns whole C blocks (a grid of pm x pn parts, split at multiples of MR and NR) and
    // packs its own A and B: no barrier at all. Sharing one packed A block between threads needs a
    // barrier per K block, which on a busy machine cost a third of the speed (2 threads: 72 vs 102
    // GFLOP/s at 2048^3). The grid minimises the repacking: B is packed once per row of parts (pm
    // times), A once per column of parts (pn times).
    const std::int64_t mpan = (M + MR - 1) / MR, npan = (N + NR - 1) / NR;
    std::int64_t pm = 1, pn = 1;
    double best_balance = -1, best_cost = 0;
    for (std::int64_t m = 1; m <= std::min<std::int64_t>(mpan, threads); ++m) {
      const std::int64_t n = std::min<std::int64_t>(npan, (threads + m - 1) / m);
      // the share of thread time the parts keep busy, then the repacking
      const std::int64_t parts = m * n, rounds = (parts + threads - 1) / threads;
      const double balance = static_cast<double>(parts) / static_cast<double>(rounds * threads);
      const double cost = static_cast<double>(m) * static_cast<double>(N) + static_cast<double>(n) * static_cast<double>(M);
      if (balance > best_balance || (balance == best_balance && cost < best_cost))
        pm = m, pn = n, best_balance = balance, best_cost = cost;
    }
    const std::int64_t mh = (mpan + pm - 1) / pm * MR, nw = (npan + pn - 1) / pn * NR;
    const std::int64_t gm = (M + mh - 1) / mh, gn = (N + nw - 1) / nw;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (std::int64_t part = 0; part < gm * gn; ++part) {
      const std::int64_t i0 = (part / gn) * mh, j0 = (part % gn) * nw;
      gemm_impl::blocked<T>(a + i0 * ars, ars, acs, b + j0 * bcs, brs, bcs, c + i0 * ldc + j0, ldc,
                            std::min(mh, M - i0), std::min(nw, N - j0), K, i0, j0, ep, blk);
    }
    return;
  }
  gemm_impl::blocked<T>(a, ars, acs, b, brs, bcs, c, ldc, M, N, K, 0, 0, ep, blk);
}

/// C[M,N] += A[M,K] · B[K,N] (strides as gemm_ex's) on the calling thread (inside a parallel
/// region: the attention backward's dK and dV accumulate over query blocks in place).
template <class T>
void gemm_accumulate(const T* a, std::int64_t ars, std::int64_t acs, const T* b, std::int64_t brs, std::int64_t bcs, T* c,
                     std::int64_t ldc, std::int64_t M, std::int64_t N, std::int64_t K) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "gemm_accumulate: float or double");
  if (M <= 0 || N <= 0 || K <= 0) return;
  gemm_impl::blocked<T>(a, ars, acs, b, brs, bcs, c, ldc, M, N, K, 0, 0, no_epilogue{},
                        gemm_impl::resolve<T>(current_gemm_blocking()), true);
}

}  // namespace tenet::detail::cpu
