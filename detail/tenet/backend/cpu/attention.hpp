#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CPU's tiled attention (the flash and memory_efficient variants of
// scaled_dot_product_attention, decomp/attention.hpp): for each (batch, head, block of BQ query
// rows) one task, the tasks spread over OpenMP threads. A task keeps its query block, a BQ x BK
// block of scores and its BQ x Ev output accumulator in float, and walks the keys in blocks of BK:
//
//   S = (Q · scale) Kᵀ                  the GEMM micro-kernel on packed Q and K (attention_tiled)
//   S += mask / S = -inf where masked    the attn_mask's block (memory_efficient), the causal
//                                        triangle (blocks wholly above the diagonal are skipped)
//   m' = max(m, rowmax S); P = exp(S - m'); l = l e^(m - m') + rowsum P; O = O e^(m - m') + P V
//
// With dropout, P is multiplied by the keep factor of each score (0 where its Philox draw is
// below p, else 1 / (1 - p): the draw of the math variant, element (row, key) of the scores) after
// l has summed it and before P V.
// and writes O / l (0 for a row whose keys are all masked out, as torch). Memory is O(BQ (BK + Ev))
// per thread, plus the packed K and V of one head: the L x S scores are never stored, nor is the
// causal mask. 16-bit inputs are converted as they are packed; everything accumulates in float
// (double for double inputs).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include <omp.h>

#include <tenet/backend/cpu/gemm.hpp>
#include <tenet/backend/cpu/simd.hpp>
#include <tenet/dtype.hpp>
#include <tenet/runtime/philox.hpp>

namespace tenet::detail::cpu {

/// An attention operand as (batch, heads, rows, cols): the offset of each flattened batch index
/// (the dims before the heads, any strides) and element strides (0: broadcast).
template <class T>
struct attn_operand {
  const T* p = nullptr;
  std::vector<std::int64_t> boff;
  std::int64_t sh = 0, sr = 0, sc = 0;
};

struct attn_problem {
  std::int64_t batch = 1, hq = 1, group = 1, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1;
  bool causal = false;
  double dropout_p = 0;  // > 0: dropout's draw is the Philox stream (seed, offset), one value per score
  std::uint64_t seed = 0, offset = 0;
};

/// s[0, n) *= dropout's keep factor of scores (row, j0 .. j0 + n), row the flattened (batch,
/// head, query) index: 0 where the score's draw is < p, else 1 / (1 - p), as the math variant's
/// where(uniform < p, 0, 1 / (1 - p)) in the accumulation type A.
template <class A>
void attn_dropout_row(const attn_problem& pr, std::int64_t row, std::int64_t j0, A* s, std::int64_t n) {
  const A p = static_cast<A>(pr.dropout_p);
  const A keep = static_cast<A>(pr.dropout_p < 1 ? 1.0 / (1.0 - pr.dropout_p) : 0.0);
  constexpr unsigned words = uniform_words_per_element<A>();
  const std::int64_t k0 = row * pr.S + j0;
  std::uint64_t at = ~std::uint64_t{0};
  uint4x32 block{};
  for (std::int64_t j = 0; j < n; ++j) {
    const std::int64_t k = k0 + j;
    const std::uint64_t bi = philox_block_of(k, words);
    if (bi != at) block = philox_block(pr.seed, pr.offset, bi), at = bi;
    s[j] *= uniform_element<A>(block, k, 0.0, 1.0) < p ? A(0) : keep;
  }
}

/// The backward's tile sizes: query rows per task and keys per block (docs/attention.md).
inline constexpr std::int64_t attn_block_q = 128;
inline constexpr std::int64_t attn_block_k = 512;
/// The forward's (attention_tiled): see there.
inline constexpr std::int64_t attn_fwd_block_q = 120;
inline constexpr std::int64_t attn_fwd_block_k = 480;
/// The forward packs a whole key/value head at once up to this many values of K and V together
/// (16 MiB of float); above, it packs each block of keys as it reaches it. A variable so that the
/// tests can run the per-block path on small problems.
inline std::int64_t attn_pack_head_limit = std::int64_t(1) << 22;

/// The backward keeps a row block's whole P and dP (BQ x S each) up to this many keys; above, it
/// runs by key blocks from each row's log-sum-exp (one more product, BQ x BK memory). A variable
/// so that the tests can run the blocked path on small problems.
inline std::int64_t attn_backward_full_keys = 8192;

/// Whether s[0, n) holds a NaN (a row whose maximum came out -inf: all masked, or NaN).
template <class A>
bool attn_has_nan(const A* s, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j)
    if (s[j] != s[j]) return true;
  return false;
}

/// s[0, n) = exp(s - m); returns their sum.
template <class A>
A attn_exp_sum(A* s, std::int64_t n, A m) {
  using B = xsimd::batch<A>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  const B bm(m);
  B acc(A(0));
  std::int64_t j = 0;
  for (; j + W <= n; j += W) {
    const B e = xsimd::exp(B::load_unaligned(s + j) - bm);
    e.store_unaligned(s + j);
    acc += e;
  }
  A sum = hsum(acc);
  for (; j < n; ++j) {
    s[j] = std::exp(s[j] - m);
    sum += s[j];
  }
  return sum;
}

/// Applies the mask to scores s[0, n) of row (b, h, i), keys j0 .. j0 + n: a bool mask sets the
/// keys it hides (false) to -inf, a floating one is added. Nothing without a mask (M void).
template <class M, class A, class Op>
void attn_mask_row(const Op& mask, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j0, A* s,
                   std::int64_t n) {
  if constexpr (!std::is_void_v<M>) {
    const auto* mp = mask.p + mask.boff[static_cast<std::size_t>(b)] + h * mask.sh + i * mask.sr + j0 * mask.sc;
    if constexpr (std::is_same_v<M, bool>) {
      for (std::int64_t j = 0; j < n; ++j)
        if (!mp[j * mask.sc]) s[j] = -std::numeric_limits<A>::infinity();
    } else {
      for (std::int64_t j = 0; j < n; ++j) s[j] += static_cast<A>(mp[j * mask.sc]);
    }
  }
}

/// One block of a row's online softmax: s[0, n) = exp(s - m') with m' = max(m, max s) (NaN when
/// the block has a NaN and no other finite score), l = l e^(m - m') + sum; `alpha` = e^(m - m'),
/// the factor for what was accumulated under m. False (nothing changed) while every key so far is
/// masked out.
template <class A>
bool attn_online_block(A* s, std::int64_t n, A& m, A& l, A& alpha) {
  constexpr A neg_inf = -std::numeric_limits<A>::infinity();
  A mx = row_max<A>(s, n);
  if (mx == neg_inf && attn_has_nan<A>(s, n)) mx = std::numeric_limits<A>::quiet_NaN();
  const A m_new = mx != mx ? mx : std::max(m, mx);
  if (m_new == neg_inf) return false;
  alpha = m == neg_inf ? A(0) : std::exp(m - m_new);
  l = l * alpha + attn_exp_sum<A>(s, n, m_new);
  m = m_new;
  return true;
}

/// Packs one key/value head for the forward's products (as gemm_impl's packed B operands, in the
/// accumulation type A, so 16-bit inputs are converted here): pk holds Kᵀ (E x S) as NR-key panels,
/// panel p at pk[p E NR], element (e, j) at [e NR + j]; pv holds V by chunks of KV keys, chunk c at
/// pv[c KV vpan NR], its Ev columns as vpan NR-column panels of the chunk's keys, (j, col) at
/// [(col / NR) kc NR + j NR + col % NR] with kc the chunk's keys. Padding is zero.
template <class T, class A, int NR>
void attn_pack_kv(const T* kp, std::int64_t ksr, std::int64_t ksc, const T* vp, std::int64_t vsr, std::int64_t vsc,
                  std::int64_t S, std::int64_t E, std::int64_t Ev, std::int64_t KV, A* pk, A* pv) {
  const std::int64_t kpan = (S + NR - 1) / NR, vpan = (Ev + NR - 1) / NR;
  for (std::int64_t p = 0; p < kpan; ++p) {
    A* d = pk + p * E * NR;
    const std::int64_t cols = std::min<std::int64_t>(NR, S - p * NR);
    for (std::int64_t e = 0; e < E; ++e) {
      const T* src = kp + p * NR * ksr + e * ksc;
      for (std::int64_t j = 0; j < cols; ++j) d[e * NR + j] = static_cast<A>(src[j * ksr]);
      for (std::int64_t j = cols; j < NR; ++j) d[e * NR + j] = A(0);
    }
  }
  for (std::int64_t c0 = 0; c0 < S; c0 += KV) {
    const std::int64_t kc = std::min(KV, S - c0);
    A* chunk = pv + (c0 / KV) * KV * vpan * NR;
    for (std::int64_t pn = 0; pn < vpan; ++pn) {
      A* d = chunk + pn * kc * NR;
      const std::int64_t cols = std::min<std::int64_t>(NR, Ev - pn * NR);
      for (std::int64_t j = 0; j < kc; ++j) {
        const T* src = vp + (c0 + j) * vsr + pn * NR * vsc;
        for (std::int64_t c = 0; c < cols; ++c) d[j * NR + c] = static_cast<A>(src[c * vsc]);
        for (std::int64_t c = cols; c < NR; ++c) d[j * NR + c] = A(0);
      }
    }
  }
}

/// Rows [0, m) of A (row stride lda, unit column stride), depth columns, packed into pa as the
/// micro-kernel's MR-row panels (panel p at pa[p depth MR]; rows past m zero).
template <class A>
void attn_pack_rows(const A* a, std::int64_t lda, std::int64_t m, std::int64_t depth, A* pa) {
  constexpr int MR = gemm_impl::config<A>::MR;
  for (std::int64_t pnl = 0; pnl * MR < m; ++pnl)
    gemm_impl::pack_a_panel<A, MR>(a + pnl * MR * lda, lda, 1, std::min<std::int64_t>(MR, m - pnl * MR), depth,
                                   pa + pnl * depth * MR);
}
/// C[m, n] (row stride ldc) = A B, or += with `accumulate`, from A packed by attn_pack_rows and B
/// as the micro-kernel's NR-column panels, both depth deep; a depth of 0 gives zeros.
template <class A>
void attn_packed_product(std::int64_t m, std::int64_t n, std::int64_t depth, const A* pa, const A* pb, A* c,
                         std::int64_t ldc, bool accumulate) {
  if (depth > 0)
    gemm_impl::macro_kernel<A>(m, n, depth, pa, pb, c, ldc, accumulate, true, 0, 0, no_epilogue{});
  else if (!accumulate)
    for (std::int64_t r = 0; r < m; ++r) std::fill(c + r * ldc, c + r * ldc + n, A(0));
}

/// out (batch, hq, L, Ev), contiguous = attention of q (batch, hq, L, E), k and v (batch,
/// hq / group, S, E | Ev) with mask M: void (none), bool (false: masked out) or the inputs' type
/// (added to the scores).
///
/// The two products run on gemm_impl's micro-kernel over operands packed once: each thread packs
/// K and V of the key/value head its tasks read (attn_pack_kv: again only when the head changes;
/// tasks are handed out in runs of a head's consecutive query blocks), its query block scaled, and
/// each chunk of P; P V accumulates into the output block in place.
/// The tiled kernels' accumulation type for inputs of type T.
template <class T>
using attn_acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class M, class T>
void attention_tiled(const attn_problem& pr, const attn_operand<T>& q, const attn_operand<T>& k,
                     const attn_operand<T>& v, const attn_operand<std::conditional_t<std::is_void_v<M>, T, M>>& mask,
                     T* out, attn_acc_t<T>* lse = nullptr) {
  using A = attn_acc_t<T>;
  using cfg = gemm_impl::config<A>;
  constexpr int MR = cfg::MR, NR = cfg::NR;
  constexpr A neg_inf = -std::numeric_limits<A>::infinity();
  // query rows per task, keys per score block and per packed V chunk: 120 is a whole number of
  // register tiles (MR = 12 with AVX-512, 6 with AVX2), 480 of NR panels (32 or 16 columns)
  const std::int64_t BQ = attn_fwd_block_q, BK = attn_fwd_block_k, KV = attn_fwd_block_q;
  static_assert(attn_fwd_block_q % cfg::MR == 0 && attn_fwd_block_k % attn_fwd_block_q == 0 && attn_fwd_block_k % cfg::NR == 0);
  const std::int64_t L = pr.L, S = pr.S, E = pr.E, Ev = pr.Ev;
  const std::int64_t qblocks = (L + BQ - 1) / BQ;
  const std::int64_t tasks = pr.batch * pr.hq * qblocks;
  if (tasks == 0 || Ev == 0) return;
  const A scale = static_cast<A>(pr.scale);
  const double work = 2.0 * static_cast<double>(L) * static_cast<double>(S) * static_cast<double>(E + Ev) *
                      static_cast<double>(pr.batch * pr.hq);
  const int threads = (omp_in_parallel() || work < 2e6) ? 1 : omp_get_max_threads();
  // K and V packed for the whole head (pk, pv hold keys [0, S)), or, for long keys, for the block
  // of BK keys being walked (they hold keys [j0, j0 + BK))
  const bool whole_head = S * (E + Ev) <= attn_pack_head_limit;
  const std::int64_t span = whole_head ? S : std::min(BK, S);  // keys pk and pv hold
  const std::int64_t qpan = (BQ + MR - 1) / MR, kpan = (span + NR - 1) / NR, vpan = (Ev + NR - 1) / NR;
  const std::int64_t vchunks = (span + KV - 1) / KV;
  // tasks handed out in runs of consecutive query blocks of one head (a thread packs the head's K
  // and V once per run), as long as every thread still gets about four runs
  const int chunk = static_cast<int>(std::clamp<std::int64_t>(tasks / (4 * threads), 1, qblocks));

#pragma omp parallel num_threads(threads)
  {
    // the thread's buffers, kept from call to call (gemm_impl::scratch: 64-byte aligned; slots 0
    // and 1 are the GEMM's own; slot 9 holds V's rows for a causal cut inside a chunk)
    A* const pq = gemm_impl::scratch<A, 2>(static_cast<std::size_t>(qpan * MR * E));
    A* const pp = gemm_impl::scratch<A, 3>(static_cast<std::size_t>(qpan * MR * KV));
    A* const pk = gemm_impl::scratch<A, 4>(static_cast<std::size_t>(kpan * NR * E));
    A* const pv = gemm_impl::scratch<A, 5>(static_cast<std::size_t>(vchunks * KV * vpan * NR));
    A* const sf = gemm_impl::scratch<A, 6>(static_cast<std::size_t>(BQ * BK));
    A* const of = gemm_impl::scratch<A, 7>(static_cast<std::size_t>(BQ * Ev));
    A* const pvt = gemm_impl::scratch<A, 8>(static_cast<std::size_t>(BQ * Ev));
    std::vector<A> mrow(static_cast<std::size_t>(BQ)), lrow(static_cast<std::size_t>(BQ));
    std::int64_t packed_head = -1;  // the (batch, kv head) pk and pv hold
#pragma omp for schedule(dynamic, chunk)
    for (std::int64_t t = 0; t < tasks; ++t) {
      const std::int64_t qb = t % qblocks, bh = t / qblocks;
      const std::int64_t b = bh / pr.hq, h = bh % pr.hq, hk = h / pr.group;
      const std::int64_t i0 = qb * BQ, nq = std::min(BQ, L - i0);
      const T* qp = q.p + q.boff[static_cast<std::size_t>(b)] + h * q.sh + i0 * q.sr;
      const T* kp = k.p + k.boff[static_cast<std::size_t>(b)] + hk * k.sh;
      const T* vp = v.p + v.boff[static_cast<std::size_t>(b)] + hk * v.sh;
      if (const std::int64_t head = b * (pr.hq / pr.group) + hk; whole_head && head != packed_head) {
        attn_pack_kv<T, A, NR>(kp, k.sr, k.sc, vp, v.sr, v.sc, S, E, Ev, KV, pk, pv);
        packed_head = head;
      }
      // Q scale as MR-row panels (rows past nq zero)
      for (std::int64_t pnl = 0; pnl < qpan; ++pnl) {
        A* d = pq + pnl * E * MR;
        for (std::int64_t e = 0; e < E; ++e)
          for (std::int64_t i = 0; i < MR; ++i) {
            const std::int64_t r = pnl * MR + i;
            d[e * MR + i] = r < nq ? static_cast<A>(qp[r * q.sr + e * q.sc]) * scale : A(0);
          }
      }
      std::fill(mrow.begin(), mrow.begin() + nq, neg_inf);
      std::fill(lrow.begin(), lrow.begin() + nq, A(0));
      std::fill(of, of + nq * Ev, A(0));
      // top-left causal: query i sees keys j <= i, so this block needs keys below i0 + nq
      const std::int64_t kv_end = pr.causal ? std::min(S, i0 + nq) : S;
      for (std::int64_t j0 = 0; j0 < kv_end; j0 += BK) {
        const std::int64_t nk = std::min(BK, kv_end - j0);
        const std::int64_t base = whole_head ? 0 : j0;  // the first key pk and pv hold
        if (!whole_head) {
          attn_pack_kv<T, A, NR>(kp + j0 * k.sr, k.sr, k.sc, vp + j0 * v.sr, v.sr, v.sc, std::min(BK, S - j0), E, Ev, KV,
                                 pk, pv);
          packed_head = -1;
        }
        // scores
        attn_packed_product<A>(nq, nk, E, pq, pk + ((j0 - base) / NR) * E * NR, sf, BK, false);
        // mask, causal triangle, online softmax
        for (std::int64_t r = 0; r < nq; ++r) {
          A* s = sf + r * BK;
          const std::int64_t i = i0 + r;
          attn_mask_row<M>(mask, b, h, i, j0, s, nk);
          std::int64_t n = nk;  // keys of this block the row may see
          if (pr.causal) n = std::clamp<std::int64_t>(i - j0 + 1, 0, nk);
          for (std::int64_t j = n; j < nk; ++j) s[j] = A(0);  // P = 0 there (below)
          A* o = of + r * Ev;
          A alpha;
          if (!attn_online_block<A>(s, n, mrow[static_cast<std::size_t>(r)], lrow[static_cast<std::size_t>(r)], alpha)) {
            std::fill(s, s + n, A(0));  // every key so far masked out: nothing to add
            continue;
          }
          if (pr.dropout_p > 0) attn_dropout_row<A>(pr, bh * L + i, j0, s, n);
          if (alpha != A(1))
            for (std::int64_t c = 0; c < Ev; ++c) o[c] *= alpha;
        }
        // O += P V, a chunk of KV keys at a time
        for (std::int64_t c0 = 0; c0 < nk; c0 += KV) {
          const std::int64_t kc = std::min(KV, nk - c0), key0 = j0 + c0;
          if (kc == std::min(KV, S - key0)) {
            // the whole packed chunk: P's chunk packed as MR-row panels, accumulated in place
            attn_pack_rows<A>(sf + c0, BK, nq, kc, pp);
            attn_packed_product<A>(nq, Ev, kc, pp, pv + ((key0 - base) / KV) * KV * vpan * NR, of, Ev, true);
          } else {
            // part of a chunk (the causal end inside it): the keys beyond are not read at all
            if constexpr (std::is_same_v<T, A>) {
              gemm_ex<A>(sf + c0, BK, 1, vp + key0 * v.sr, v.sr, v.sc, pvt, Ev, nq, Ev, kc);
            } else {
              // V's rows from the packed chunk (converted there), its first kc keys
              const A* chunk = pv + ((key0 - base) / KV) * KV * vpan * NR;
              const std::int64_t full = std::min(KV, S - key0);
              A* const vrows = gemm_impl::scratch<A, 9>(static_cast<std::size_t>(kc * Ev));
              for (std::int64_t j = 0; j < kc; ++j)
                for (std::int64_t c = 0; c < Ev; ++c) vrows[j * Ev + c] = chunk[(c / NR) * full * NR + j * NR + c % NR];
              gemm_ex<A>(sf + c0, BK, 1, vrows, Ev, 1, pvt, Ev, nq, Ev, kc);
            }
            for (std::int64_t x = 0; x < nq * Ev; ++x) of[x] += pvt[x];
          }
        }
      }
      T* op = out + (bh * L + i0) * Ev;
      for (std::int64_t r = 0; r < nq; ++r) {
        const A l = lrow[static_cast<std::size_t>(r)];
        const A inv = l == A(0) ? A(0) : A(1) / l;  // no key seen: 0, as torch
        for (std::int64_t c = 0; c < Ev; ++c) op[r * Ev + c] = static_cast<T>(of[r * Ev + c] * inv);
        // the row's log-sum-exp for the backward; +inf marks a row with no key
        if (lse)
          lse[bh * L + i0 + r] = l == A(0) ? std::numeric_limits<A>::infinity()
                                           : mrow[static_cast<std::size_t>(r)] + std::log(l);
      }
    }
  }
}

/// One query block of the backward by key blocks (attention_backward_tiled when S is above
/// attn_backward_full_keys): pass 1 takes each row's maximum m and sum l over the key blocks, as
/// the forward does; pass 2 recomputes each BQ x BK block of scores, P = exp(S - m) / l, and adds
/// its dV, dK and dQ. qf holds Q scale, gf the gradient rows, drow D = rowsum(g o); p and dp are
/// BQ x BK, tk BK x max(E, Ev), tq and tq2 BQ x E (tq gets dQ / scale).
template <class M, class T, class A>
void attn_backward_block_rows(const attn_problem& pr, const attn_operand<std::conditional_t<std::is_void_v<M>, T, M>>& mask,
                              std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t nq, std::int64_t n, const A* kb,
                              std::int64_t ksr, std::int64_t ksc, const A* vb, std::int64_t vsr, std::int64_t vsc,
                              const A* qf, const A* gf, const A* drow, const A* lse, A* mrow, A* lrow, A* p, A* dp,
                              A* zrow, A* tk, A* tq, A* tq2, A* dk, A* dv) {
  constexpr A neg_inf = -std::numeric_limits<A>::infinity();
  const std::int64_t BK = attn_block_k, E = pr.E, Ev = pr.Ev;
  // the block's scores, masked: p[r * BK + j] for keys j0 .. j0 + nk; returns nothing, `seen`
  // gives each row's visible keys of the block
  auto scores = [&](std::int64_t j0, std::int64_t nk) {
    gemm_ex<A>(qf, E, 1, kb + j0 * ksr, ksc, ksr, p, BK, nq, nk, E);
    for (std::int64_t r = 0; r < nq; ++r) attn_mask_row<M>(mask, b, h, i0 + r, j0, p + r * BK, nk);
  };
  auto seen = [&](std::int64_t r, std::int64_t j0, std::int64_t nk) {
    return pr.causal ? std::clamp<std::int64_t>(i0 + r + 1 - j0, 0, nk) : nk;
  };
  // pass 1: m and l of every row, unless the forward kept its log-sum-exp (then m = lse, l = 1;
  // a row with no key, marked +inf there, gets m = -inf as here)
  if (lse) {
    for (std::int64_t r = 0; r < nq; ++r) {
      const A x = lse[(b * pr.hq + h) * pr.L + i0 + r];
      mrow[r] = x == -neg_inf ? neg_inf : x;
      lrow[r] = A(1);
    }
  } else {
    std::fill(mrow, mrow + nq, neg_inf);
    std::fill(lrow, lrow + nq, A(0));
  }
  for (std::int64_t j0 = 0; !lse && j0 < n; j0 += BK) {
    const std::int64_t nk = std::min(BK, n - j0);
    scores(j0, nk);
    for (std::int64_t r = 0; r < nq; ++r) {
      A alpha;  // l and m only: no accumulator to rescale
      (void)attn_online_block<A>(p + r * BK, seen(r, j0, nk), mrow[r], lrow[r], alpha);
    }
  }
  // pass 2: P, dS and the gradients, block by block
  std::fill(tq, tq + nq * E, A(0));
  for (std::int64_t j0 = 0; j0 < n; j0 += BK) {
    const std::int64_t nk = std::min(BK, n - j0);
    scores(j0, nk);
    for (std::int64_t r = 0; r < nq; ++r) {
      A* s = p + r * BK;
      const std::int64_t c = seen(r, j0, nk);
      if (mrow[r] == neg_inf) {  // no key: P = 0 (and so dq = 0)
        std::fill(s, s + nk, A(0));
        continue;
      }
      attn_exp_sum<A>(s, c, mrow[r]);
      const A inv = A(1) / lrow[r];
      for (std::int64_t j = 0; j < c; ++j) s[j] *= inv;
      std::fill(s + c, s + nk, A(0));
    }
    // dP = g Vᵀ, then dS = P (dP Z - D) in place, P Z for dV
    gemm_ex<A>(gf, Ev, 1, vb + j0 * vsr, vsc, vsr, dp, BK, nq, nk, Ev);
    for (std::int64_t r = 0; r < nq; ++r) {
      A* pr_ = p + r * BK;
      A* d = dp + r * BK;
      const A dr = drow[r];
      if (pr.dropout_p > 0) {
        std::fill(zrow, zrow + nk, A(1));
        attn_dropout_row<A>(pr, (b * pr.hq + h) * pr.L + i0 + r, j0, zrow, nk);
        for (std::int64_t j = 0; j < nk; ++j) {
          d[j] = pr_[j] * (d[j] * zrow[j] - dr);
          pr_[j] *= zrow[j];
        }
      } else {
        for (std::int64_t j = 0; j < nk; ++j) d[j] = pr_[j] * (d[j] - dr);
      }
    }
    // dV += (P Z)ᵀ g, dK += dSᵀ (Q scale), dQ += dS K
    gemm_ex<A>(p, 1, BK, gf, Ev, 1, tk, Ev, nk, Ev, nq);
    for (std::int64_t x = 0; x < nk * Ev; ++x) dv[j0 * Ev + x] += tk[x];
    gemm_ex<A>(dp, 1, BK, qf, E, 1, tk, E, nk, E, nq);
    for (std::int64_t x = 0; x < nk * E; ++x) dk[j0 * E + x] += tk[x];
    gemm_ex<A>(dp, BK, 1, kb + j0 * ksr, ksr, ksc, tq2, E, nq, E, nk);
    for (std::int64_t x = 0; x < nq * E; ++x) tq[x] += tq2[x];
  }
}

/// The backward of attention_tiled: dq (batch, hq, L, E), dk and dv (batch,
/// hkv, S, E | Ev), contiguous, from the forward's output o and its gradient g (batch, hq, L, Ev).
/// One task per (batch, kv head): its dk and dv accumulate in float over the q heads of its group
/// and their query blocks. Per block of BQ query rows, with the row's keys K[0, n) (n = S, or the
/// causal end):
///   P = softmax(Q scale Kᵀ + mask) (the whole row block, kept: BQ x n floats)
///   dP = g Vᵀ; dS = P (dP - D), D = rowsum(g o); dV += Pᵀ g; dQ = dS K scale; dK += dSᵀ Q scale
/// five products, as the math backward, and no log-sum-exp to save: the row block's softmax is
/// recomputed whole. With dropout (keep factors Z of the forward's draw): dP = (g Vᵀ) Z,
/// dV += (P Z)ᵀ g, and D = rowsum(g o) = rowsum(P dP) still.
template <class M, class T>
void attention_backward_tiled(const attn_problem& pr, const attn_operand<T>& q, const attn_operand<T>& k,
                              const attn_operand<T>& v, const attn_operand<T>& o, const attn_operand<T>& g,
                              const attn_operand<std::conditional_t<std::is_void_v<M>, T, M>>& mask, T* dq_out,
                              T* dk_out, T* dv_out, const attn_acc_t<T>* lse = nullptr) {
  using A = attn_acc_t<T>;
  using cfg = gemm_impl::config<A>;
  constexpr int MR = cfg::MR, NR = cfg::NR;
  constexpr bool direct = std::is_same_v<T, A>;
  constexpr A neg_inf = -std::numeric_limits<A>::infinity();
  const std::int64_t BQ = attn_block_q;
  const std::int64_t L = pr.L, S = pr.S, E = pr.E, Ev = pr.Ev;
  const std::int64_t hkv = pr.hq / pr.group;
  const std::int64_t tasks = pr.batch * hkv;
  const A scale = static_cast<A>(pr.scale);
  // dq of every query (including those with no key: 0), dk and dv of every key (0 where no query sees it)
  std::fill(dq_out, dq_out + pr.batch * pr.hq * L * E, T(0));
  if (tasks == 0) return;
  const double work = 5.0 * static_cast<double>(L) * static_cast<double>(S) * static_cast<double>(E + Ev) *
                      static_cast<double>(pr.batch * pr.hq);
  const int threads = (omp_in_parallel() || work < 2e6) ? 1 : omp_get_max_threads();
  const bool blocked = S > attn_backward_full_keys;  // by key blocks from the log-sum-exp
  const std::int64_t BK = attn_block_k;
  const std::int64_t W = blocked ? BK : std::max<std::int64_t>(S, 1);  // P's and dP's row length
#pragma omp parallel num_threads(threads)
  {
    std::vector<A> qf(static_cast<std::size_t>(BQ * std::max<std::int64_t>(E, 1)));
    std::vector<A> gf(static_cast<std::size_t>(BQ * std::max<std::int64_t>(Ev, 1)));
    std::vector<A> p(static_cast<std::size_t>(BQ * W)), dp(static_cast<std::size_t>(BQ * W));
    std::vector<A> dk(static_cast<std::size_t>(S * E)), dv(static_cast<std::size_t>(S * Ev));
    std::vector<A> tk(static_cast<std::size_t>((blocked ? std::min(S, BK) : S) * std::max(E, Ev))), tq(static_cast<std::size_t>(BQ * E));
    std::vector<A> kf(direct ? 0 : static_cast<std::size_t>(S * E)), vf(direct ? 0 : static_cast<std::size_t>(S * Ev));
    std::vector<A> drow(static_cast<std::size_t>(BQ));
    std::vector<A> zrow(pr.dropout_p > 0 ? static_cast<std::size_t>(W) : 0);
    std::vector<A> mrow(blocked ? static_cast<std::size_t>(BQ) : 0), lrow(mrow.size());
    std::vector<A> tq2(blocked ? static_cast<std::size_t>(BQ * E) : 0);
    // the whole-row path runs its products on the micro-kernel: Kᵀ and Vᵀ as NR-key panels (S and
    // dP), K as NR-column panels S deep (dQ), packed once per task; Q scale and g as MR-row panels
    const std::int64_t kpan = (S + NR - 1) / NR, epan = (E + NR - 1) / NR, qpan = (BQ + MR - 1) / MR;
    A* const pkt = blocked ? nullptr : gemm_impl::scratch<A, 2>(static_cast<std::size_t>(kpan * NR * E));
    A* const pvt = blocked ? nullptr : gemm_impl::scratch<A, 3>(static_cast<std::size_t>(kpan * NR * Ev));
    A* const pk = blocked ? nullptr : gemm_impl::scratch<A, 4>(static_cast<std::size_t>(epan * NR * S));
    A* const pq = blocked ? nullptr : gemm_impl::scratch<A, 5>(static_cast<std::size_t>(qpan * MR * std::max(E, Ev)));
    A* const pds = blocked ? nullptr : gemm_impl::scratch<A, 6>(static_cast<std::size_t>(qpan * MR * std::min<std::int64_t>(S, 256)));
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t t = 0; t < tasks; ++t) {
      const std::int64_t b = t / hkv, hk = t % hkv;
      const T* kp = k.p + k.boff[static_cast<std::size_t>(b)] + hk * k.sh;
      const T* vp = v.p + v.boff[static_cast<std::size_t>(b)] + hk * v.sh;
      const A* kb;
      const A* vb;
      std::int64_t ksr, ksc, vsr, vsc;  // K (S x E) and V (S x Ev) element strides
      if constexpr (direct) {
        kb = kp, ksr = k.sr, ksc = k.sc, vb = vp, vsr = v.sr, vsc = v.sc;
      } else {
        for (std::int64_t j = 0; j < S; ++j) {
          for (std::int64_t c = 0; c < E; ++c) kf[j * E + c] = static_cast<A>(kp[j * k.sr + c * k.sc]);
          for (std::int64_t c = 0; c < Ev; ++c) vf[j * Ev + c] = static_cast<A>(vp[j * v.sr + c * v.sc]);
        }
        kb = kf.data(), ksr = E, ksc = 1, vb = vf.data(), vsr = Ev, vsc = 1;
      }
      std::fill(dk.begin(), dk.end(), A(0));
      std::fill(dv.begin(), dv.end(), A(0));
      if (!blocked) {
        for (std::int64_t pnl = 0; pnl < kpan; ++pnl)  // Kᵀ, Vᵀ: panel pnl of NR keys, (c, j) at [c NR + j]
          for (std::int64_t j = 0; j < NR; ++j) {
            const std::int64_t key = pnl * NR + j;
            for (std::int64_t c = 0; c < E; ++c) pkt[pnl * E * NR + c * NR + j] = key < S ? kb[key * ksr + c * ksc] : A(0);
            for (std::int64_t c = 0; c < Ev; ++c) pvt[pnl * Ev * NR + c * NR + j] = key < S ? vb[key * vsr + c * vsc] : A(0);
          }
        for (std::int64_t pnl = 0; pnl < epan; ++pnl)  // K: panel pnl of NR columns, (key, c) at [key NR + c]
          gemm_impl::pack_b_panel<A, NR>(kb + pnl * NR * ksc, ksr, ksc, std::min<std::int64_t>(NR, E - pnl * NR), S,
                                         pk + pnl * S * NR);
      }
      for (std::int64_t h = hk * pr.group; h < (hk + 1) * pr.group; ++h) {
        for (std::int64_t i0 = 0; i0 < L; i0 += BQ) {
          const std::int64_t nq = std::min(BQ, L - i0);
          const std::int64_t n = pr.causal ? std::min(S, i0 + nq) : S;  // keys any row of the block sees
          if (n == 0) continue;
          const T* qp = q.p + q.boff[static_cast<std::size_t>(b)] + h * q.sh + i0 * q.sr;
          const T* gp = g.p + g.boff[static_cast<std::size_t>(b)] + h * g.sh + i0 * g.sr;
          const T* op = o.p + o.boff[static_cast<std::size_t>(b)] + h * o.sh + i0 * o.sr;
          for (std::int64_t r = 0; r < nq; ++r) {
            for (std::int64_t c = 0; c < E; ++c) qf[r * E + c] = static_cast<A>(qp[r * q.sr + c * q.sc]) * scale;
            A dsum = 0;
            for (std::int64_t c = 0; c < Ev; ++c) {
              const A gv = static_cast<A>(gp[r * g.sr + c * g.sc]);
              gf[r * Ev + c] = gv;
              dsum += gv * static_cast<A>(op[r * o.sr + c * o.sc]);
            }
            drow[static_cast<std::size_t>(r)] = dsum;
          }
          if (blocked) {
            attn_backward_block_rows<M, T, A>(pr, mask, b, h, i0, nq, n, kb, ksr, ksc, vb, vsr, vsc, qf.data(), gf.data(),
                                              drow.data(), lse, mrow.data(), lrow.data(), p.data(), dp.data(), zrow.data(),
                                              tk.data(), tq.data(), tq2.data(), dk.data(), dv.data());
          } else {
            // P: the scores, masked, softmax per row
            attn_pack_rows<A>(qf.data(), E, nq, E, pq);
            attn_packed_product<A>(nq, n, E, pq, pkt, p.data(), W, false);
            for (std::int64_t r = 0; r < nq; ++r) {
              A* s = p.data() + r * W;
              const std::int64_t i = i0 + r;
              attn_mask_row<M>(mask, b, h, i, 0, s, n);
              const std::int64_t seen = pr.causal ? std::clamp<std::int64_t>(i + 1, 0, n) : n;
              if (lse) {  // P = exp(S - lse) from the forward's statistic; +inf: no key, P = 0
                const A x = lse[(b * pr.hq + h) * L + i];
                if (x == -neg_inf) {
                  std::fill(s, s + n, A(0));
                  continue;
                }
                (void)attn_exp_sum<A>(s, seen, x);
                std::fill(s + seen, s + n, A(0));
                continue;
              }
              A mx = row_max<A>(s, seen);
              if (mx == neg_inf && attn_has_nan<A>(s, seen)) mx = std::numeric_limits<A>::quiet_NaN();
              if (mx == neg_inf) {  // no key: P = 0 (and so dq = 0)
                std::fill(s, s + n, A(0));
                continue;
              }
              const A sum = attn_exp_sum<A>(s, seen, mx);
              const A inv = A(1) / sum;
              for (std::int64_t j = 0; j < seen; ++j) s[j] *= inv;
              std::fill(s + seen, s + n, A(0));
            }
            // dP = g Vᵀ, then dS = P (dP - D) in place
            attn_pack_rows<A>(gf.data(), Ev, nq, Ev, pq);
            attn_packed_product<A>(nq, n, Ev, pq, pvt, dp.data(), W, false);
            for (std::int64_t r = 0; r < nq; ++r) {
              A* pr_ = p.data() + r * W;
              A* d = dp.data() + r * W;
              const A dr = drow[static_cast<std::size_t>(r)];
              if (pr.dropout_p > 0) {
                std::fill(zrow.begin(), zrow.begin() + n, A(1));
                attn_dropout_row<A>(pr, (b * pr.hq + h) * L + i0 + r, 0, zrow.data(), n);
                for (std::int64_t j = 0; j < n; ++j) {
                  d[j] = pr_[j] * (d[j] * zrow[static_cast<std::size_t>(j)] - dr);
                  pr_[j] *= zrow[static_cast<std::size_t>(j)];  // P Z, for dV
                }
              } else {
                for (std::int64_t j = 0; j < n; ++j) d[j] = pr_[j] * (d[j] - dr);
              }
            }
            // dV += Pᵀ g (P Z with dropout), dK += dSᵀ (Q scale), accumulated in place
            gemm_accumulate<A>(p.data(), 1, W, gf.data(), Ev, 1, dv.data(), Ev, n, Ev, nq);
            gemm_accumulate<A>(dp.data(), 1, W, qf.data(), E, 1, dk.data(), E, n, E, nq);
            // dQ = dS K scale, by chunks of 256 keys, on K's panels
            std::fill(tq.begin(), tq.begin() + nq * E, A(0));
            for (std::int64_t c0 = 0; c0 < n; c0 += 256) {
              const std::int64_t kc = std::min<std::int64_t>(256, n - c0);
              attn_pack_rows<A>(dp.data() + c0, W, nq, kc, pds);
              for (std::int64_t pnl = 0; pnl < epan; ++pnl)  // K's panels are S deep: one product per panel
                attn_packed_product<A>(nq, std::min<std::int64_t>(NR, E - pnl * NR), kc, pds, pk + pnl * S * NR + c0 * NR,
                                       tq.data() + pnl * NR, E, true);
            }
          }
          T* dqp = dq_out + ((b * pr.hq + h) * L + i0) * E;
          for (std::int64_t x = 0; x < nq * E; ++x) dqp[x] = static_cast<T>(tq[x] * scale);
        }
      }
      T* dkp = dk_out + (b * hkv + hk) * S * E;
      T* dvp = dv_out + (b * hkv + hk) * S * Ev;
      for (std::int64_t x = 0; x < S * E; ++x) dkp[x] = static_cast<T>(dk[x]);
      for (std::int64_t x = 0; x < S * Ev; ++x) dvp[x] = static_cast<T>(dv[x]);
    }
  }
}

/// An operand of rank R laid over the scores' (batch..., heads, rows, cols) sizes `target`
/// (sizes, strides: the operand's, right-aligned, broadcast where its extent is 1 or missing).
template <class T, std::size_t R, std::size_t RT>
attn_operand<T> attn_operand_of(const T* p, const std::array<std::int64_t, R>& sizes,
                                const std::array<std::int64_t, R>& strides, const std::array<std::int64_t, RT>& target) {
  static_assert(R <= RT && RT >= 2);
  std::array<std::int64_t, RT> st{};  // strides over target's dims, 0 where broadcast
  for (std::size_t i = 0; i < R; ++i) {
    const std::size_t j = RT - R + i;
    st[j] = sizes[i] == 1 && target[j] != 1 ? 0 : strides[i];
  }
  attn_operand<T> o;
  o.p = p;
  o.sc = st[RT - 1], o.sr = st[RT - 2];
  if constexpr (RT >= 3) o.sh = st[RT - 3];
  std::int64_t batch = 1;
  for (std::size_t i = 0; i + 3 < RT; ++i) batch *= target[i];
  o.boff.assign(static_cast<std::size_t>(batch), 0);
  for (std::int64_t b = 0; b < batch; ++b) {
    std::int64_t rem = b, off = 0;
    for (std::size_t i = RT >= 3 ? RT - 3 : 0; i-- > 0;) {
      off += (rem % target[i]) * st[i];
      rem /= target[i];
    }
    o.boff[static_cast<std::size_t>(b)] = off;
  }
  return o;
}

}  // namespace tenet::detail::cpu
