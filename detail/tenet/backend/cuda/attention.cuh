#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// scaled_dot_product_attention's CUDA kernels (nvcc only): the flash variant (no mask) and the
// memory_efficient one (a bool or additive attn_mask broadcast to the scores) for bf16 and fp16
// inputs, forward and backward, on tensor cores through mma.sync (sm_80 and later).
//
// One tiling serves every kernel. A CTA has W warps; each warp owns 16 rows of a row tile and
// walks a column tile of BN through shared memory:
//   forward      rows = queries, columns = keys:   S = Q Kᵀ, online softmax, O += P V
//   backward dQ  rows = queries, columns = keys:   S, P from the log-sum-exp, dP = dO Vᵀ,
//                                                  dS = P (dP - D), dQ += dS K
//   backward dKV rows = keys,    columns = queries: Sᵀ = K Qᵀ, Pᵀ, dPᵀ = V dOᵀ,
//                                                  dV += Pᵀ dO, dK += dSᵀ Q
// so two warp-level products cover all of them: gemm_nt (A rows · B rowsᵀ, both in shared memory,
// read by ldmatrix) and gemm_pv (a score tile in registers, turned into the A operand the way the
// m16n8k16 layouts line up, times a shared-memory tile read transposed by ldmatrix.trans).
// D = rowsum(dO ∘ O) comes from a small row kernel; the log-sum-exp from the forward kernel (the
// backward runs it without the P V product when the forward's was not kept). Each gradient is
// written by one CTA (dK and dV sum a GQA group's heads in the CTA), so the backward is
// deterministic: no atomics.
//
// Scores are kept in base 2: x = s · scale · log2(e) (+ mask · log2(e)), p = 2^(x - m). A row with
// no key left (all masked) gives 0, as the math variant. Dropout multiplies p by the keep factor
// of the shared Philox stream: score (bh, i, j) reads element (bh · L + i) · S + j of the draw
// (runtime/philox.hpp), the CPU kernels' and the math variant's value for the same seed.
//
// Operands: any strides (ldmatrix tiles are loaded by cp.async 16 bytes at a time where the last
// dim is contiguous and the rows and base are 16-byte aligned, else element by element); up to
// four batch dims before the heads dim, each with its own stride (so a mask broadcast over some
// batch dims needs no copy). Head dims up to 256: the kernels are built for 64, 128 and 256 and a
// smaller one is zero-padded in shared memory.
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include <tenet/backend/cuda/pointwise.cuh>  // check_launch
#include <tenet/backend/cuda/runtime.hpp>
#include <tenet/runtime/half.hpp>
#include <tenet/runtime/philox.hpp>

namespace tenet::detail::cuda::attn {

inline constexpr int max_batch_dims = 4;
inline constexpr int max_head_dim = 256;

/// One operand: its base and element strides over (batch dims..., heads, rows, cols).
struct operand {
  const void* p = nullptr;
  std::int64_t sb[max_batch_dims] = {};
  std::int64_t sh = 0, sr = 0, sc = 1;
  bool vec = false;  // cp.async path: sc == 1, 16-byte aligned base and rows, cols % 8 == 0
};

struct params {
  operand q, k, v, o, dout, mask;
  int nb = 0;                              // batch dims
  std::int64_t bsize[max_batch_dims] = {};  // their sizes
  std::int64_t hq = 1;                     // query heads
  int group = 1;                           // query heads per key/value head
  std::int64_t L = 0, S = 0;
  int E = 0, Ev = 0;
  float scale_log2 = 0;  // scale · log2(e)
  bool causal = false;
  float dropout_p = 0, keep_scale = 1;
  std::uint64_t seed = 0, offset = 0;
  void* out = nullptr;      // forward: O (batch..., hq, L, Ev) contiguous
  float* lse2 = nullptr;    // (batch · hq, L): max + log2(sum) in base 2, +inf for a row with no key
  float* delta = nullptr;   // (batch · hq, L): rowsum(dO ∘ O)
  void* dq = nullptr;       // contiguous like q
  void* dk = nullptr;       // contiguous like k
  void* dv = nullptr;       // contiguous like v
};

enum mask_kind : int { no_mask = 0, bool_mask = 1, additive_mask = 2 };

#if defined(__CUDACC__)

__device__ TENET_INLINE std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
__device__ TENET_INLINE void cp_async16(std::uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ TENET_INLINE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ TENET_INLINE void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
/// Waits for every group but the last committed (the prefetch of the next tile).
__device__ TENET_INLINE void cp_async_wait_prev() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

__device__ TENET_INLINE void ldsm_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ TENET_INLINE void ldsm_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

/// c += a b for one m16n8k16 tile (fp32 accumulation).
template <bool Bf>
__device__ TENET_INLINE void mma16816(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (Bf)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)c, (void)a, (void)b0, (void)b1;
  __trap();  // the host never launches these kernels below sm_80 (sm_supported)
#endif
}

/// Two floats as one 32-bit pair of 16-bit values (lo in the low half).
template <bool Bf>
__device__ TENET_INLINE std::uint32_t pack2(float lo, float hi) {
  std::uint32_t r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (Bf)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#else
  (void)lo, (void)hi;
  r = 0;
#endif
  return r;
}
template <bool Bf>
__device__ TENET_INLINE float to_float(std::uint16_t b) {
  if constexpr (Bf) {
    return __uint_as_float(static_cast<std::uint32_t>(b) << 16);
  } else {
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(b));
    return f;
  }
}
template <bool Bf>
__device__ TENET_INLINE std::uint16_t from_float(float f) {
  return static_cast<std::uint16_t>(pack2<Bf>(f, 0.f) & 0xffffu);
}
__device__ TENET_INLINE float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/// The element offset of operand x at batch index b (flat over the batch dims), head h.
__device__ TENET_INLINE std::int64_t batch_offset(const params& p, const operand& x, std::int64_t b, std::int64_t h) {
  std::int64_t off = h * x.sh;
  for (int d = p.nb - 1; d >= 0; --d) {
    const std::int64_t s = p.bsize[d];
    off += (b % s) * x.sb[d];
    b /= s;
  }
  return off;
}

/// load_tile's element-by-element path (any strides), out of line: the kernels' loops stay small.
template <int ROWS, int HD, int THREADS>
__device__ __noinline__ void load_tile_strided(std::uint16_t* s, const std::uint16_t* g, std::int64_t sr, std::int64_t sc,
                                               std::int64_t valid, int cols) {
  constexpr int ld = HD + 8;
  for (int c = threadIdx.x; c < ROWS * HD; c += THREADS) {
    const int r = c / HD, col = c % HD;
    s[r * ld + col] = r < valid && col < cols ? g[r * sr + col * sc] : std::uint16_t(0);
  }
}

/// Loads rows [0, nrows) (zero past `valid` rows and past `cols` columns) of a tile of HD columns
/// from g (row stride x.sr, column stride x.sc) into shared memory s (row stride HD + 8).
template <int ROWS, int HD, int THREADS>
__device__ TENET_INLINE void load_tile(std::uint16_t* s, const std::uint16_t* g, const operand& x, std::int64_t valid,
                                       int cols) {
  constexpr int ld = HD + 8;
  if (x.vec) {
    // each thread copies one 16-byte column chunk of every rpp-th row: its offsets are fixed, so
    // a chunk costs an address add, a compare and the copy
    constexpr int per_row = HD / 8, rpp = THREADS / per_row;
    static_assert(THREADS % per_row == 0 && ROWS % rpp == 0);
    const int r0 = static_cast<int>(threadIdx.x) / per_row, ch = static_cast<int>(threadIdx.x) % per_row;
    const int rows = valid <= 0 ? 0 : valid < ROWS ? static_cast<int>(valid) : ROWS;
    const bool col_ok = ch * 8 < cols;
    const std::uint16_t* src = g + r0 * x.sr + ch * 8;
    const std::int64_t step = rpp * x.sr;
    const std::uint32_t dst = smem_addr(s + r0 * ld + ch * 8);
#pragma unroll
    for (int c = 0; c < ROWS / rpp; ++c) {
      const bool ok = col_ok && r0 + c * rpp < rows;
      cp_async16(dst + c * rpp * ld * 2, ok ? src + c * step : g, ok);
    }
  } else {
    load_tile_strided<ROWS, HD, THREADS>(s, g, x.sr, x.sc, valid, cols);
  }
}

/// acc[MT][NT] += A Bᵀ: A the warp's 16 · MT rows at sA, B the 8 · NT rows at sB, both row-major
/// with HD + 8 columns in shared memory; k over the first 16 · ktiles columns.
template <bool Bf, int MT, int NT, int HD>
__device__ TENET_INLINE void gemm_nt(float (&acc)[MT][NT][4], const std::uint16_t* sA, const std::uint16_t* sB,
                                     int ktiles) {
  constexpr int ld = HD + 8;
  const int lane = threadIdx.x & 31;
  // this lane's ldmatrix row addresses; the tiles' offsets below are constants
  const std::uint32_t a0 = smem_addr(sA + (lane & 15) * ld + (lane >> 4) * 8);
  const std::uint32_t b0 = smem_addr(sB + ((lane & 7) + ((lane >> 4) << 3)) * ld + ((lane >> 3) & 1) * 8);
#pragma unroll
  for (int kt = 0; kt < HD / 16; ++kt) {
    if (kt < ktiles) {
      std::uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) ldsm_x4(a[mt], a0 + (mt * 16 * ld + kt * 16) * 2);
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        std::uint32_t b[4];
        ldsm_x4(b, b0 + (np * 16 * ld + kt * 16) * 2);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816<Bf>(acc[mt][2 * np], a[mt], b[0], b[1]);
          mma16816<Bf>(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
        }
      }
    }
  }
}

/// acc[MT][NO] += P B: P the warp's score tile in registers (its NT column tiles are the k dim),
/// B row-major in shared memory (8 · NT rows, HD + 8 columns) read transposed; output column
/// tiles in pairs up to 2 · opairs.
template <bool Bf, int MT, int NT, int NO, int HD>
__device__ TENET_INLINE void gemm_pv(float (&acc)[MT][NO][4], const float (&p)[MT][NT][4], const std::uint16_t* sB,
                                     int opairs) {
  constexpr int ld = HD + 8;
  const int lane = threadIdx.x & 31;
  const std::uint32_t b0 = smem_addr(sB + ((lane & 7) + (((lane >> 3) & 1) << 3)) * ld + ((lane >> 4) << 3));
#pragma unroll
  for (int kk = 0; kk < NT / 2; ++kk) {
    std::uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      a[mt][0] = pack2<Bf>(p[mt][2 * kk][0], p[mt][2 * kk][1]);
      a[mt][1] = pack2<Bf>(p[mt][2 * kk][2], p[mt][2 * kk][3]);
      a[mt][2] = pack2<Bf>(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
      a[mt][3] = pack2<Bf>(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < NO / 2; ++dp) {
      if (dp < opairs) {
        std::uint32_t b[4];
        ldsm_x4_trans(b, b0 + (kk * 16 * ld + dp * 16) * 2);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816<Bf>(acc[mt][2 * dp], a[mt], b[0], b[1]);
          mma16816<Bf>(acc[mt][2 * dp + 1], a[mt], b[2], b[3]);
        }
      }
    }
  }
}

/// The mask's value at (query i, key j) of head h, batch b (additive, in base 2), or -inf where a
/// bool mask is false; 0 without a mask.
template <int MK, class MT>
__device__ TENET_INLINE float mask_at(const params& p, std::int64_t mbase, std::int64_t i, std::int64_t j) {
  if constexpr (MK == no_mask) {
    return 0.f;
  } else {
    const std::int64_t off = mbase + i * p.mask.sr + j * p.mask.sc;
    if constexpr (MK == bool_mask) {
      return static_cast<const std::uint8_t*>(p.mask.p)[off] ? 0.f : -std::numeric_limits<float>::infinity();
    } else {
      return static_cast<float>(static_cast<const MT*>(p.mask.p)[off]) * 1.4426950408889634f;
    }
  }
}

/// Dropout's factor for score k (flat over (batch · heads, L, S)): 0 where its draw is < p.
/// (uniform_element<float> on [0, 1), its word picked by selects rather than an indexed array,
/// which would live in local memory.)
__device__ TENET_INLINE bool kept(std::uint64_t seed, std::uint64_t offset, float dropout_p, std::int64_t k) {
  const uint4x32 b = philox_block(seed, offset, philox_block_of(k, 1));
  const std::uint32_t w = (k & 2) ? ((k & 1) ? b[3] : b[2]) : ((k & 1) ? b[1] : b[0]);
  return !(uniform01_from_word<float>(w) < dropout_p);
}
__device__ TENET_INLINE float keep_factor(const params& p, std::int64_t k) {
  return kept(p.seed, p.offset, p.dropout_p, k) ? p.keep_scale : 0.f;
}

/// Dropout's keep bits of a lane's score fragment (NT column tiles of 4 values): bit 4 t + e is set
/// where element e of tile t is kept, that element being score k = base + (e >> 1) dA + t dT +
/// (e & 1) dE of the draw. Out of line: inline, the 4 NT Philox calls made each kernel's loop body
/// several times larger (instruction fetch stalls in ncu).
template <int NT>
__device__ __noinline__ std::uint32_t keep_bits(std::uint64_t seed, std::uint64_t offset, float dropout_p, std::int64_t base,
                                                std::int64_t dA, std::int64_t dT, std::int64_t dE) {
  std::uint32_t bits = 0;
#pragma unroll 1
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (kept(seed, offset, dropout_p, base + (e >> 1) * dA + t * dT + (e & 1) * dE)) bits |= 1u << (4 * t + e);
  return bits;
}

__device__ TENET_INLINE float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ TENET_INLINE float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/// Writes a warp's accumulator tile (16 rows from row0, columns < cols) scaled by f[row half] to a
/// contiguous row-major output of `cols` columns, rows < nrows.
template <bool Bf, int NO>
__device__ TENET_INLINE void store_rows(std::uint16_t* out, const float (&acc)[NO][4], std::int64_t row0,
                                        std::int64_t nrows, int cols, const float (&f)[2]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const std::int64_t r = row0 + g + 8 * half;
    if (r >= nrows) continue;
    std::uint16_t* o = out + r * cols;
#pragma unroll
    for (int t = 0; t < NO; ++t) {
      const int c = t * 8 + tig * 2;
      if (c + 1 < cols && (cols & 1) == 0) {
        *reinterpret_cast<std::uint32_t*>(o + c) = pack2<Bf>(acc[t][2 * half] * f[half], acc[t][2 * half + 1] * f[half]);
      } else {
        if (c < cols) o[c] = from_float<Bf>(acc[t][2 * half] * f[half]);
        if (c + 1 < cols) o[c + 1] = from_float<Bf>(acc[t][2 * half + 1] * f[half]);
      }
    }
  }
}

/// Shared memory a kernel of row tile BM and column tile BN needs, with `tiles` tiles of each.
template <int HD>
constexpr int tile_bytes(int rows) {
  return rows * (HD + 8) * 2;
}

/// The forward. Grid (row tiles, batch · hq); W warps of RT · 16 query rows (RT row tiles share
/// each K and V fragment read from shared memory); K and V tiles double buffered (the next pair
/// loads while this one is used). LseOnly: the log-sum-exp only (the backward's, when the
/// forward's is not at hand).
template <bool Bf, int HD, int BN, int W, int RT, int MK, class MT, bool LseOnly>
__global__ void __launch_bounds__(W * 32) flash_forward(const params p) {
  constexpr int BM = 16 * W * RT, ld = HD + 8, NT = BN / 8, NO = HD / 8;
  constexpr float inf = std::numeric_limits<float>::infinity();
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* sQ = smem;
  std::uint16_t* sKV = sQ + BM * ld;  // buffer b: K at sKV + 2 b BN ld, V after it
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * BM;
  const std::int64_t BH = [&] {
    std::int64_t n = p.hq;
    for (int d = 0; d < p.nb; ++d) n *= p.bsize[d];
    return n;
  }();
  const int ktiles = (p.E + 15) / 16, opairs = (p.Ev + 15) / 16;
  for (std::int64_t bh = blockIdx.y; bh < BH; bh += gridDim.y) {
    const std::int64_t b = bh / p.hq, h = bh % p.hq, hk = h / p.group;
    const auto* q = static_cast<const std::uint16_t*>(p.q.p) + batch_offset(p, p.q, b, h) + m0 * p.q.sr;
    const auto* k = static_cast<const std::uint16_t*>(p.k.p) + batch_offset(p, p.k, b, hk);
    const auto* v = static_cast<const std::uint16_t*>(p.v.p) + batch_offset(p, p.v, b, hk);
    const std::int64_t mbase = MK == no_mask ? 0 : batch_offset(p, p.mask, b, h);
    std::int64_t nblocks = (p.S + BN - 1) / BN;
    if (p.causal) nblocks = std::min(nblocks, (std::min(p.S, m0 + BM) + BN - 1) / BN);
    const auto load_kv = [&](std::int64_t j) {
      std::uint16_t* sK = sKV + 2 * (j & 1) * BN * ld;
      const std::int64_t n0 = j * BN;
      load_tile<BN, HD, W * 32>(sK, k + n0 * p.k.sr, p.k, p.S - n0, p.E);
      if (!LseOnly) load_tile<BN, HD, W * 32>(sK + BN * ld, v + n0 * p.v.sr, p.v, p.S - n0, p.Ev);
    };
    load_tile<BM, HD, W * 32>(sQ, q, p.q, p.L - m0, p.E);
    if (nblocks > 0) load_kv(0);
    cp_async_commit();
    float o[RT][NO][4] = {};
    float mrow[RT][2], lrow[RT][2];
#pragma unroll
    for (int mt = 0; mt < RT; ++mt) mrow[mt][0] = mrow[mt][1] = -inf, lrow[mt][0] = lrow[mt][1] = 0.f;
    const std::int64_t rw = m0 + warp * 16 * RT;  // this warp's rows: rw + 16 mt + g (+ 8)
    for (std::int64_t j = 0; j < nblocks; ++j) {
      const std::int64_t n0 = j * BN;
      if (j + 1 < nblocks) load_kv(j + 1);
      cp_async_commit();
      cp_async_wait_prev();
      __syncthreads();  // tile j in place for every warp
      const std::uint16_t* sK = sKV + 2 * (j & 1) * BN * ld;
      float s[RT][NT][4] = {};
      gemm_nt<Bf, RT, NT, HD>(s, sQ + warp * 16 * RT * ld, sK, ktiles);
      const bool edge = n0 + BN > p.S || (p.causal && n0 + BN - 1 > rw) || MK != no_mask;
#pragma unroll
      for (int mt = 0; mt < RT; ++mt) {
        const std::int64_t r0 = rw + mt * 16 + g;  // this lane's rows: r0 and r0 + 8
        float mx[2] = {-inf, -inf};
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float x = s[mt][t][e] * p.scale_log2;
            if (edge) {
              const std::int64_t i = r0 + 8 * (e >> 1), jj = n0 + t * 8 + tig * 2 + (e & 1);
              if (jj >= p.S || i >= p.L || (p.causal && jj > i))
                x = -inf;
              else
                x += mask_at<MK, MT>(p, mbase, i, jj);
            }
            s[mt][t][e] = x;
            mx[e >> 1] = fmaxf(mx[e >> 1], x);
          }
        float muse[2], alpha[2];
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const float mnew = fmaxf(mrow[mt][hf], quad_max(mx[hf]));
          muse[hf] = mnew == -inf ? 0.f : mnew;
          alpha[hf] = fast_exp2(mrow[mt][hf] - muse[hf]);
          mrow[mt][hf] = mnew;
        }
        float sum[2] = {0.f, 0.f};
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float pe = fast_exp2(s[mt][t][e] - muse[e >> 1]);
            sum[e >> 1] += pe;
            s[mt][t][e] = pe;
          }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) lrow[mt][hf] = lrow[mt][hf] * alpha[hf] + sum[hf];
        if (!LseOnly) {
          if (p.dropout_p > 0) {
            const std::uint32_t keep =
                keep_bits<NT>(p.seed, p.offset, p.dropout_p, (bh * p.L + r0) * p.S + n0 + tig * 2, 8 * p.S, 8, 1);
#pragma unroll
            for (int t = 0; t < NT; ++t)
#pragma unroll
              for (int e = 0; e < 4; ++e) s[mt][t][e] *= (keep >> (4 * t + e)) & 1 ? p.keep_scale : 0.f;
          }
#pragma unroll
          for (int t = 0; t < NO; ++t)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[mt][t][e] *= alpha[e >> 1];
        }
      }
      if (!LseOnly) gemm_pv<Bf, RT, NT, NO, HD>(o, s, sK + BN * ld, opairs);
      __syncthreads();  // every warp done with tile j before its buffer is refilled
    }
    cp_async_wait_all();
#pragma unroll
    for (int mt = 0; mt < RT; ++mt) {
      float f[2];
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const float l = quad_sum(lrow[mt][hf]);
        f[hf] = l > 0 ? 1.f / l : 0.f;
        const std::int64_t i = rw + mt * 16 + g + 8 * hf;
        if (p.lse2 && tig == 0 && i < p.L) p.lse2[bh * p.L + i] = l > 0 ? mrow[mt][hf] + __log2f(l) : inf;
      }
      if (!LseOnly)
        store_rows<Bf, NO>(static_cast<std::uint16_t*>(p.out) + bh * p.L * p.Ev, o[mt], rw + mt * 16, p.L, p.Ev, f);
    }
    __syncthreads();  // the next head reuses the tiles
  }
}

/// D = rowsum(dO ∘ O) in float, one warp per row of (batch · hq, L).
template <bool Bf>
__global__ void attention_delta(const params p, std::int64_t rows) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const std::int64_t bh = row / p.L, i = row % p.L, b = bh / p.hq, h = bh % p.hq;
  const auto* o = static_cast<const std::uint16_t*>(p.o.p) + batch_offset(p, p.o, b, h) + i * p.o.sr;
  const auto* d = static_cast<const std::uint16_t*>(p.dout.p) + batch_offset(p, p.dout, b, h) + i * p.dout.sr;
  float acc = 0;
  for (int c = lane; c < p.Ev; c += 32) acc += to_float<Bf>(o[c * p.o.sc]) * to_float<Bf>(d[c * p.dout.sc]);
  for (int w = 16; w > 0; w >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, w);
  if (lane == 0) p.delta[row] = acc;
}

/// The same for 16-byte aligned rows (o and dout `vec`): TPR threads per row, 8 values per load.
template <bool Bf, int TPR>
__global__ void attention_delta_vec(const params p, std::int64_t rows) {
  const int sub = static_cast<int>(threadIdx.x) % TPR;
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / TPR;
  float acc = 0;
  if (row < rows) {
    const std::int64_t bh = row / p.L, i = row % p.L, b = bh / p.hq, h = bh % p.hq;
    const auto* o = static_cast<const std::uint16_t*>(p.o.p) + batch_offset(p, p.o, b, h) + i * p.o.sr;
    const auto* d = static_cast<const std::uint16_t*>(p.dout.p) + batch_offset(p, p.dout, b, h) + i * p.dout.sr;
    for (int c = sub * 8; c < p.Ev; c += TPR * 8) {
      const uint4 x = *reinterpret_cast<const uint4*>(o + c), y = *reinterpret_cast<const uint4*>(d + c);
      const std::uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
      for (int w = 0; w < 4; ++w)
        acc += to_float<Bf>(static_cast<std::uint16_t>(xs[w] & 0xffffu)) * to_float<Bf>(static_cast<std::uint16_t>(ys[w] & 0xffffu)) +
               to_float<Bf>(static_cast<std::uint16_t>(xs[w] >> 16)) * to_float<Bf>(static_cast<std::uint16_t>(ys[w] >> 16));
    }
  }
#pragma unroll
  for (int w = TPR / 2; w > 0; w >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, w);
  if (row < rows && sub == 0) p.delta[row] = acc;
}

/// The backward's dQ. Grid (query tiles, batch · hq); W warps of 16 query rows; K and V tiles
/// double buffered.
template <bool Bf, int HD, int BN, int W, int MK, class MT>
__global__ void __launch_bounds__(W * 32) flash_backward_dq(const params p) {
  constexpr int BM = 16 * W, ld = HD + 8, NT = BN / 8, NO = HD / 8;
  constexpr float inf = std::numeric_limits<float>::infinity();
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* sQ = smem;
  std::uint16_t* sD = sQ + BM * ld;   // dO
  std::uint16_t* sKV = sD + BM * ld;  // buffer b: K at sKV + 2 b BN ld, V after it
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * BM;
  const std::int64_t BH = [&] {
    std::int64_t n = p.hq;
    for (int d = 0; d < p.nb; ++d) n *= p.bsize[d];
    return n;
  }();
  const int etiles = (p.E + 15) / 16, vtiles = (p.Ev + 15) / 16;
  for (std::int64_t bh = blockIdx.y; bh < BH; bh += gridDim.y) {
    const std::int64_t b = bh / p.hq, h = bh % p.hq, hk = h / p.group;
    const auto* q = static_cast<const std::uint16_t*>(p.q.p) + batch_offset(p, p.q, b, h) + m0 * p.q.sr;
    const auto* dout = static_cast<const std::uint16_t*>(p.dout.p) + batch_offset(p, p.dout, b, h) + m0 * p.dout.sr;
    const auto* k = static_cast<const std::uint16_t*>(p.k.p) + batch_offset(p, p.k, b, hk);
    const auto* v = static_cast<const std::uint16_t*>(p.v.p) + batch_offset(p, p.v, b, hk);
    const std::int64_t mbase = MK == no_mask ? 0 : batch_offset(p, p.mask, b, h);
    std::int64_t nblocks = (p.S + BN - 1) / BN;
    if (p.causal) nblocks = std::min(nblocks, (std::min(p.S, m0 + BM) + BN - 1) / BN);
    const auto load_kv = [&](std::int64_t j) {
      std::uint16_t* sK = sKV + 2 * (j & 1) * BN * ld;
      const std::int64_t n0 = j * BN;
      load_tile<BN, HD, W * 32>(sK, k + n0 * p.k.sr, p.k, p.S - n0, p.E);
      load_tile<BN, HD, W * 32>(sK + BN * ld, v + n0 * p.v.sr, p.v, p.S - n0, p.Ev);
    };
    load_tile<BM, HD, W * 32>(sQ, q, p.q, p.L - m0, p.E);
    load_tile<BM, HD, W * 32>(sD, dout, p.dout, p.L - m0, p.Ev);
    if (nblocks > 0) load_kv(0);
    cp_async_commit();
    const std::int64_t r0 = m0 + warp * 16 + g;
    float lse[2], dl[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const std::int64_t i = r0 + 8 * hf;
      lse[hf] = i < p.L ? p.lse2[bh * p.L + i] : inf;
      dl[hf] = i < p.L ? p.delta[bh * p.L + i] : 0.f;
    }
    float dq[1][NO][4] = {};
    for (std::int64_t j = 0; j < nblocks; ++j) {
      const std::int64_t n0 = j * BN;
      if (j + 1 < nblocks) load_kv(j + 1);
      cp_async_commit();
      cp_async_wait_prev();
      __syncthreads();
      const std::uint16_t* sK = sKV + 2 * (j & 1) * BN * ld;
      float s[1][NT][4] = {}, dp[1][NT][4] = {};
      gemm_nt<Bf, 1, NT, HD>(s, sQ + warp * 16 * ld, sK, etiles);
      gemm_nt<Bf, 1, NT, HD>(dp, sD + warp * 16 * ld, sK + BN * ld, vtiles);
      const bool edge = n0 + BN > p.S || (p.causal && n0 + BN - 1 > m0) || MK != no_mask || m0 + BM > p.L;
      const std::uint32_t keep = p.dropout_p > 0 ? keep_bits<NT>(p.seed, p.offset, p.dropout_p, (bh * p.L + r0) * p.S + n0 + tig * 2, 8 * p.S, 8, 1) : ~0u;
      const float keep_scale = p.dropout_p > 0 ? p.keep_scale : 1.f;
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const std::int64_t i = r0 + 8 * (e >> 1), jj = n0 + t * 8 + tig * 2 + (e & 1);
          float pe = 0.f;
          if (!edge || !(jj >= p.S || i >= p.L || (p.causal && jj > i))) {
            const float x = s[0][t][e] * p.scale_log2 + mask_at<MK, MT>(p, mbase, i, jj);
            pe = fast_exp2(x - lse[e >> 1]);
          }
          const float dpe = dp[0][t][e] * ((keep >> (4 * t + e)) & 1 ? keep_scale : 0.f);
          s[0][t][e] = pe * (dpe - dl[e >> 1]);  // dS
        }
      gemm_pv<Bf, 1, NT, NO, HD>(dq, s, sK, etiles);
      __syncthreads();  // every warp done with tile j before its buffer is refilled
    }
    cp_async_wait_all();
    const float sc = p.scale_log2 / 1.4426950408889634f;
    const float f[2] = {sc, sc};
    store_rows<Bf, NO>(static_cast<std::uint16_t*>(p.dq) + bh * p.L * p.E, dq[0], m0 + warp * 16, p.L, p.E, f);
    __syncthreads();
  }
}

/// The backward's dK and dV (Which: 1 dV, 2 dK, 3 both). Grid (key tiles, batch · hkv); W warps of
/// 16 key rows; the query heads of the key's group are summed here; Q and dO tiles double buffered.
template <bool Bf, int HD, int BN, int W, int MK, class MT, int Which>
__global__ void __launch_bounds__(W * 32) flash_backward_dkv(const params p) {
  constexpr int BM = 16 * W, ld = HD + 8, NT = BN / 8, NO = HD / 8;
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* sK = smem;
  std::uint16_t* sV = sK + BM * ld;
  std::uint16_t* sQD = sV + BM * ld;  // buffer b: Q at sQD + 2 b BN ld, dO after it
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.x) * BM;
  const std::int64_t hkv = p.hq / p.group;
  const std::int64_t BKV = [&] {
    std::int64_t n = hkv;
    for (int d = 0; d < p.nb; ++d) n *= p.bsize[d];
    return n;
  }();
  const int etiles = (p.E + 15) / 16, vtiles = (p.Ev + 15) / 16;
  for (std::int64_t bk = blockIdx.y; bk < BKV; bk += gridDim.y) {
    const std::int64_t b = bk / hkv, hk = bk % hkv;
    const auto* k = static_cast<const std::uint16_t*>(p.k.p) + batch_offset(p, p.k, b, hk) + n0 * p.k.sr;
    const auto* v = static_cast<const std::uint16_t*>(p.v.p) + batch_offset(p, p.v, b, hk) + n0 * p.v.sr;
    load_tile<BM, HD, W * 32>(sK, k, p.k, p.S - n0, p.E);
    load_tile<BM, HD, W * 32>(sV, v, p.v, p.S - n0, p.Ev);
    const std::int64_t c0 = n0 + warp * 16 + g;  // this lane's keys: c0 and c0 + 8
    float dk[1][NO][4] = {}, dv[1][NO][4] = {};
    // the (query head, query tile) steps: group heads times the tiles from `first` on
    const std::int64_t first = p.causal ? n0 / BN : 0, blocks = (p.L + BN - 1) / BN;
    const std::int64_t per_head = blocks > first ? blocks - first : 0, steps = per_head * p.group;
    const auto load_qd = [&](std::int64_t step) {
      std::uint16_t* sQ = sQD + 2 * (step & 1) * BN * ld;
      const std::int64_t h = hk * p.group + step / per_head, i0 = (first + step % per_head) * BN;
      const auto* q = static_cast<const std::uint16_t*>(p.q.p) + batch_offset(p, p.q, b, h) + i0 * p.q.sr;
      const auto* dout = static_cast<const std::uint16_t*>(p.dout.p) + batch_offset(p, p.dout, b, h) + i0 * p.dout.sr;
      load_tile<BN, HD, W * 32>(sQ, q, p.q, p.L - i0, p.E);
      load_tile<BN, HD, W * 32>(sQ + BN * ld, dout, p.dout, p.L - i0, p.Ev);
    };
    if (steps > 0) load_qd(0);
    cp_async_commit();
    for (std::int64_t step = 0; step < steps; ++step) {
      const std::int64_t h = hk * p.group + step / per_head, bh = b * p.hq + h;
      const std::int64_t i0 = (first + step % per_head) * BN;
      const std::int64_t mbase = MK == no_mask ? 0 : batch_offset(p, p.mask, b, h);
      // this lane's query columns' log-sum-exp and D
      float lse[NT][2], dl[NT][2];
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int x = 0; x < 2; ++x) {
          const std::int64_t i = i0 + t * 8 + tig * 2 + x;
          lse[t][x] = i < p.L ? p.lse2[bh * p.L + i] : std::numeric_limits<float>::infinity();
          dl[t][x] = i < p.L ? p.delta[bh * p.L + i] : 0.f;
        }
      if (step + 1 < steps) load_qd(step + 1);
      cp_async_commit();
      cp_async_wait_prev();
      __syncthreads();
      const std::uint16_t* sQ = sQD + 2 * (step & 1) * BN * ld;
      float s[1][NT][4] = {}, dp[1][NT][4] = {};
      gemm_nt<Bf, 1, NT, HD>(s, sK + warp * 16 * ld, sQ, etiles);
      if (Which & 2) gemm_nt<Bf, 1, NT, HD>(dp, sV + warp * 16 * ld, sQ + BN * ld, vtiles);
      const bool edge = n0 + BM > p.S || i0 + BN > p.L || (p.causal && n0 + BM - 1 > i0) || MK != no_mask;
      const std::uint32_t keep = p.dropout_p > 0 ? keep_bits<NT>(p.seed, p.offset, p.dropout_p, (bh * p.L + i0 + tig * 2) * p.S + c0, 8, 8 * p.S, p.S) : ~0u;
      const float keep_scale = p.dropout_p > 0 ? p.keep_scale : 1.f;
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const std::int64_t jj = c0 + 8 * (e >> 1), i = i0 + t * 8 + tig * 2 + (e & 1);
          float pe = 0.f;
          if (!edge || !(jj >= p.S || i >= p.L || (p.causal && jj > i))) {
            const float x = s[0][t][e] * p.scale_log2 + mask_at<MK, MT>(p, mbase, i, jj);
            pe = fast_exp2(x - lse[t][e & 1]);
          }
          const float z = (keep >> (4 * t + e)) & 1 ? keep_scale : 0.f;
          if (Which & 2) dp[0][t][e] = pe * (dp[0][t][e] * z - dl[t][e & 1]);
          s[0][t][e] = pe * z;
        }
      if (Which & 1) gemm_pv<Bf, 1, NT, NO, HD>(dv, s, sQ + BN * ld, vtiles);
      if (Which & 2) gemm_pv<Bf, 1, NT, NO, HD>(dk, dp, sQ, etiles);
      __syncthreads();  // every warp done with this tile before its buffer is refilled
    }
    cp_async_wait_all();
    const float sc = p.scale_log2 / 1.4426950408889634f;
    const std::int64_t out_row = bk * p.S;
    if (Which & 2) {
      const float f[2] = {sc, sc};
      store_rows<Bf, NO>(static_cast<std::uint16_t*>(p.dk) + out_row * p.E, dk[0], n0 + warp * 16, p.S, p.E, f);
    }
    if (Which & 1) {
      const float f[2] = {1.f, 1.f};
      store_rows<Bf, NO>(static_cast<std::uint16_t*>(p.dv) + out_row * p.Ev, dv[0], n0 + warp * 16, p.S, p.Ev, f);
    }
    __syncthreads();
  }
}

// ---------------------------------------------------------------------------------------------
// Host side: the operands' layouts, the tile configurations and the launches.

/// Whether device `dev` runs these kernels (mma.sync on bf16 / fp16: sm_80 and later).
inline bool sm_supported(int dev) {
  int major = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute");
  return major >= 8;
}

/// x (rank R, right-aligned with the scores' (batch..., heads, rows, cols) of rank RS) as an
/// operand: a dim of size 1, or missing, has stride 0.
template <std::size_t RS, class X>
operand operand_of(const X& x, int cols_valid) {
  constexpr std::size_t R = rank_of<X>;
  static_assert(R <= RS);
  const auto sz = x.sizes();
  const auto st = x.strides();
  std::int64_t s[RS] = {};
  for (std::size_t d = 0; d < R; ++d) s[RS - R + d] = sz[d] == 1 ? 0 : st[d];
  operand o;
  o.p = x.data();
  constexpr int nb = RS >= 3 ? static_cast<int>(RS) - 3 : 0;
  for (int d = 0; d < nb; ++d) o.sb[d] = s[d];
  if constexpr (RS >= 3) o.sh = s[RS - 3];
  o.sr = s[RS - 2];
  o.sc = s[RS - 1];
  bool vec = o.sc == 1 && cols_valid % 8 == 0 && reinterpret_cast<std::uintptr_t>(o.p) % 16 == 0 && o.sr % 8 == 0 &&
             o.sh % 8 == 0;
  for (int d = 0; d < nb; ++d) vec = vec && o.sb[d] % 8 == 0;
  if (sz[R - 1] == 1 && cols_valid == 1) vec = false;  // (a single column: sc may be anything)
  o.vec = vec;
  return o;
}

/// The kernels' head dim for E and Ev (both <= max_head_dim).
inline int head_dim_for(int E, int Ev) {
  const int e = E > Ev ? E : Ev;
  return e <= 64 ? 64 : e <= 128 ? 128 : 256;
}

template <auto Kernel>
void launch(const params& p, dim3 grid, int threads, int smem, const char* what) {
  if (grid.x == 0 || grid.y == 0) return;
  if (smem > 48 * 1024)  // (per device: set on each launch)
    check(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), what);
  Kernel<<<grid, threads, smem, current_stream()>>>(p);
  check_launch(what);
}

inline dim3 grid_of(std::int64_t tiles, std::int64_t heads) {
  return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(heads < 65535 ? heads : 65535));
}
inline std::int64_t batch_heads(const params& p, std::int64_t heads) {
  for (int d = 0; d < p.nb; ++d) heads *= p.bsize[d];
  return heads;
}

/// A forward tiling: W warps of RT row tiles (16 rows each), BN keys per step.
template <int W_, int RT_, int BN_>
struct fwd_tiles {
  static constexpr int W = W_, RT = RT_, BN = BN_, BM = 16 * W_ * RT_;
};
/// The forward's tiling by head dim (H200, bf16: bench/cuda_attention.cu; docs/attention.md): two
/// row tiles a warp at 128 (1.13x one, 181 -> 205 TFLOP/s: each K / V fragment feeds twice the
/// products), one at 64 (two: 10% slower, 232 registers, half the CTAs per SM) and 256 (two spill).
template <int HD>
using fwd_tiles_for = std::conditional_t<HD == 128, fwd_tiles<4, 2, 64>, fwd_tiles<4, 1, 64>>;

/// The forward (O into p.out, the log-sum-exp into p.lse2 when set); LseOnly: the log-sum-exp only.
/// Tiles: fwd_tiles_for the head dim, or Cfg<HD> where given (the benchmark's variants).
template <bool Bf, int MK, class MT, bool LseOnly = false, template <int> class Cfg = fwd_tiles_for>
void forward(const params& p) {
  const auto go = [&]<int HD>() {
    using C = Cfg<HD>;
    const dim3 grid = grid_of((p.L + C::BM - 1) / C::BM, batch_heads(p, p.hq));
    launch<flash_forward<Bf, HD, C::BN, C::W, C::RT, MK, MT, LseOnly>>(p, grid, C::W * 32, tile_bytes<HD>(C::BM + 4 * C::BN),
                                                                       "the attention forward kernel launch");
  };
  switch (head_dim_for(p.E, p.Ev)) {
    case 64: go.template operator()<64>(); break;
    case 128: go.template operator()<128>(); break;
    default: go.template operator()<256>(); break;
  }
}

/// The backward: p.lse2 and p.delta are (batch · hq, L) float scratch, p.dq / dk / dv the outputs.
/// lse_ready: p.lse2 holds the forward's log-sum-exp already (else the forward kernel computes it
/// here, without its P V product).
template <bool Bf, int MK, class MT>
void backward(const params& p, bool lse_ready = false) {
  constexpr int W = 4, BM = 16 * W;
  const std::int64_t rows = batch_heads(p, p.hq) * p.L;
  if (!lse_ready) forward<Bf, MK, MT, true>(p);
  if (rows > 0) {
    const cudaStream_t s = current_stream();
    if (p.o.vec && p.dout.vec) {  // 16-byte loads, a row per 8, 16 or 32 threads
      const auto go = [&]<int TPR>() {
        attention_delta_vec<Bf, TPR><<<static_cast<unsigned>((rows * TPR + 255) / 256), 256, 0, s>>>(p, rows);
      };
      if (p.Ev <= 64) go.template operator()<8>();
      else if (p.Ev <= 128) go.template operator()<16>();
      else go.template operator()<32>();
    } else {
      attention_delta<Bf><<<static_cast<unsigned>((rows + 7) / 8), 256, 0, s>>>(p, rows);
    }
    check_launch("the attention backward's row kernel launch");
  }
  const dim3 gq = grid_of((p.L + BM - 1) / BM, batch_heads(p, p.hq));
  const dim3 gk = grid_of((p.S + BM - 1) / BM, batch_heads(p, p.hq / p.group));
  const auto go = [&]<int HD, int BNQ, int BNK, bool Split>() {
    launch<flash_backward_dq<Bf, HD, BNQ, W, MK, MT>>(p, gq, W * 32, tile_bytes<HD>(2 * BM + 4 * BNQ),
                                                      "the attention backward (dq) kernel launch");
    constexpr int kv_smem = tile_bytes<HD>(2 * BM + 4 * BNK);
    if constexpr (Split) {
      launch<flash_backward_dkv<Bf, HD, BNK, W, MK, MT, 1>>(p, gk, W * 32, kv_smem, "the attention backward (dv) kernel launch");
      launch<flash_backward_dkv<Bf, HD, BNK, W, MK, MT, 2>>(p, gk, W * 32, kv_smem, "the attention backward (dk) kernel launch");
    } else {
      launch<flash_backward_dkv<Bf, HD, BNK, W, MK, MT, 3>>(p, gk, W * 32, kv_smem, "the attention backward (dk, dv) kernel launch");
    }
  };
  switch (head_dim_for(p.E, p.Ev)) {
    case 64: go.template operator()<64, 64, 64, false>(); break;
    case 128: go.template operator()<128, 64, 32, false>(); break;
    default: go.template operator()<256, 32, 32, true>(); break;
  }
}

/// The kernels' problem for the attention op `op` (a forward's) over tensors q, k, v (and the mask).
template <class Op, class Q, class K, class V, class... M>
params params_of(const Op& op, const Q& q, const K& k, const V& v, const M&... m) {
  constexpr std::size_t R = rank_of<Q>;
  const auto d = op.dims(q, k, v, m...);
  params p;
  p.nb = R >= 3 ? static_cast<int>(R) - 3 : 0;
  const auto qs = q.sizes();
  for (int i = 0; i < p.nb; ++i) p.bsize[i] = qs[i];
  p.hq = d.hq, p.group = d.hkv == 0 ? 1 : static_cast<int>(d.hq / d.hkv);
  p.L = d.L, p.S = d.S, p.E = static_cast<int>(d.E), p.Ev = static_cast<int>(d.Ev);
  p.scale_log2 = static_cast<float>(op.scale * 1.4426950408889634);
  p.causal = op.is_causal;
  p.dropout_p = static_cast<float>(op.dropout_p);
  p.keep_scale = static_cast<float>(op.dropout_p < 1 ? 1.0 / (1.0 - op.dropout_p) : 0.0);
  p.seed = op.seed, p.offset = op.offset;
  p.q = operand_of<R>(q, p.E), p.k = operand_of<R>(k, p.E), p.v = operand_of<R>(v, p.Ev);
  if constexpr (sizeof...(M) == 1) p.mask = operand_of<R>(m..., 0);
  return p;
}

/// The mask kind and element type of the optional mask M...
template <class... M>
struct mask_traits {
  static constexpr int kind = no_mask;
  using type = float;
};
template <class M>
struct mask_traits<M> {
  using type = value_type_of<M>;
  static constexpr int kind = std::is_same_v<type, bool> ? bool_mask : additive_mask;
};

#endif  // __CUDACC__

}  // namespace tenet::detail::cuda::attn
