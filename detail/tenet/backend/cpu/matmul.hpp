#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// matmul on the CPU: tenet's packed, cache-blocked GEMM (backend/cpu/gemm.hpp) for float and
// double; it reads any strides, so transposed views need no copy. Eigen's GEMM on mapped buffers
// stays as `gemm_reference`, what the tests compare against. Batches broadcast; many batches run in
// parallel (each GEMM single-threaded), few batches let the GEMM thread itself. 16-bit floats are
// widened to float and the result rounded once, as PyTorch's CPU kernels accumulate in float.
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <Eigen/Core>  // Eigen::Map, GEMM
#include <xsimd/xsimd.hpp>

#include <omp.h>

#include <tenet/backend/cpu/gemm.hpp>
#include <tenet/backend/cpu/simd.hpp>  // hsum
#include <tenet/prims/wrapping.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::cpu {

template <class T>
using gemm_t = std::conditional_t<std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>, float, T>;

/// C[M,N] = A[M,K] · B[K,N] with arbitrary element strides (rs: row stride, cs: column stride), C
/// contiguous: Eigen's GEMM, the reference the tests hold tenet's own kernel to. Each operand is
/// mapped row-major (outer stride rs, inner cs) when its columns are unit-stride and column-major
/// (outer cs, inner rs) when its rows are; a size-1 dim's stride is meaningless, so it may take the
/// unit-stride role, but the other dim's stride is always kept (a one-row A still steps by acs).
template <class T>
void gemm_reference(const T* a, std::int64_t ars, std::int64_t acs, const T* b, std::int64_t brs, std::int64_t bcs, T* c,
          std::int64_t M, std::int64_t N, std::int64_t K) {
  using namespace Eigen;
  using Dyn = Stride<Dynamic, Dynamic>;
  using RowM = Matrix<T, Dynamic, Dynamic, RowMajor>;
  using ColM = Matrix<T, Dynamic, Dynamic, ColMajor>;
  Map<RowM> C(c, M, N);
  if (K == 0) {
    C.setZero();
    return;
  }
  auto with_a = [&](auto&& A) {
    if (bcs == 1 || N == 1)
      C.noalias() = A * Map<const RowM, 0, Dyn>(b, K, N, Dyn(brs, N == 1 ? 1 : bcs));
    else if (brs == 1 || K == 1)
      C.noalias() = A * Map<const ColM, 0, Dyn>(b, K, N, Dyn(bcs, K == 1 ? 1 : brs));
    else
      C.noalias() = A * Map<const RowM, 0, Dyn>(b, K, N, Dyn(brs, bcs)).eval();
  };
  if (acs == 1 || K == 1)
    with_a(Map<const RowM, 0, Dyn>(a, M, K, Dyn(ars, K == 1 ? 1 : acs)));
  else if (ars == 1 || M == 1)
    with_a(Map<const ColM, 0, Dyn>(a, M, K, Dyn(acs, M == 1 ? 1 : ars)));
  else
    with_a(Map<const RowM, 0, Dyn>(a, M, K, Dyn(ars, acs)).eval());
}

/// C = A · B for 8- and 16-bit integers, wrapping as torch: the products and sums run in unsigned
/// int (Eigen would compute unsigned short products in int, which can overflow).
template <class T>
void gemm_small_int(const T* a, std::int64_t ars, std::int64_t acs, const T* b, std::int64_t brs, std::int64_t bcs,
                    T* c, std::int64_t M, std::int64_t N, std::int64_t K) {
  using U = wrap_unsigned_t<T>;
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      U s = 0;
      for (std::int64_t k = 0; k < K; ++k)
        s = static_cast<U>(s + static_cast<U>(a[m * ars + k * acs]) * static_cast<U>(b[k * brs + n * bcs]));
      c[m * N + n] = static_cast<T>(s);
    }
}

/// out[o] = dot(x[0, K), rows + o rs) for o < n: contiguous x and rows, four rows per pass (each x
/// load feeds four FMAs). Eigen's GEMV on such a column-major matrix reached 4 GB/s on one core.
template <class T>
void gemv_dot_rows(const T* x, const T* rows, std::int64_t rs, T* out, std::int64_t n, std::int64_t K) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  std::int64_t o = 0;
  for (; o + 4 <= n; o += 4) {
    const T* r0 = rows + o * rs;
    const T* r1 = r0 + rs;
    const T* r2 = r1 + rs;
    const T* r3 = r2 + rs;
    B s0(T(0)), s1(T(0)), s2(T(0)), s3(T(0));
    std::int64_t k = 0;
    for (; k + W <= K; k += W) {
      const B xv = B::load_unaligned(x + k);
      s0 = xsimd::fma(xv, B::load_unaligned(r0 + k), s0);
      s1 = xsimd::fma(xv, B::load_unaligned(r1 + k), s1);
      s2 = xsimd::fma(xv, B::load_unaligned(r2 + k), s2);
      s3 = xsimd::fma(xv, B::load_unaligned(r3 + k), s3);
    }
    T t0 = hsum(s0), t1 = hsum(s1), t2 = hsum(s2), t3 = hsum(s3);
    for (; k < K; ++k) {
      t0 += x[k] * r0[k], t1 += x[k] * r1[k], t2 += x[k] * r2[k], t3 += x[k] * r3[k];
    }
    out[o] = t0, out[o + 1] = t1, out[o + 2] = t2, out[o + 3] = t3;
  }
  for (; o < n; ++o) {
    const T* r = rows + o * rs;
    B acc(T(0));
    std::int64_t k = 0;
    for (; k + W <= K; k += W) acc = xsimd::fma(B::load_unaligned(x + k), B::load_unaligned(r + k), acc);
    T t = hsum(acc);
    for (; k < K; ++k) t += x[k] * r[k];
    out[o] = t;
  }
}

/// out[o] = sum_k x[k] cols[k rs + o] for o < n: rows of the matrix contiguous along the outputs
/// (x W with W [K, N] row-major), a register block of 4 vectors of outputs at a time over every k.
template <class T>
void gemv_axpy_rows(const T* x, std::int64_t xs, const T* cols, std::int64_t rs, T* out, std::int64_t n, std::int64_t K) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  std::int64_t o = 0;
  for (; o + 4 * W <= n; o += 4 * W) {
    B s0(T(0)), s1(T(0)), s2(T(0)), s3(T(0));
    const T* p = cols + o;
    for (std::int64_t k = 0; k < K; ++k, p += rs) {
      const B xv(x[k * xs]);
      s0 = xsimd::fma(xv, B::load_unaligned(p), s0);
      s1 = xsimd::fma(xv, B::load_unaligned(p + W), s1);
      s2 = xsimd::fma(xv, B::load_unaligned(p + 2 * W), s2);
      s3 = xsimd::fma(xv, B::load_unaligned(p + 3 * W), s3);
    }
    s0.store_unaligned(out + o), s1.store_unaligned(out + o + W);
    s2.store_unaligned(out + o + 2 * W), s3.store_unaligned(out + o + 3 * W);
  }
  for (; o + W <= n; o += W) {
    B acc(T(0));
    const T* p = cols + o;
    for (std::int64_t k = 0; k < K; ++k, p += rs) acc = xsimd::fma(B(x[k * xs]), B::load_unaligned(p), acc);
    acc.store_unaligned(out + o);
  }
  for (; o < n; ++o) {
    T t(0);
    for (std::int64_t k = 0; k < K; ++k) t += x[k * xs] * cols[k * rs + o];
    out[o] = t;
  }
}

/// out[o] = sum_k x[k xs] m[k mk + o mo] for o < n, any strides: a layout neither GEMV kernel
/// takes (a matrix strided both ways), one output at a time.
template <class T>
void gemv_strided(const T* x, std::int64_t xs, const T* m, std::int64_t mk, std::int64_t mo, T* out, std::int64_t n,
                  std::int64_t K) {
  for (std::int64_t o = 0; o < n; ++o) {
    T t(0);
    for (std::int64_t k = 0; k < K; ++k) t += x[k * xs] * m[k * mk + o * mo];
    out[o] = t;
  }
}

/// A matrix-vector product (M == 1 or N == 1), the outputs split over the threads in blocks of 16:
/// a GEMV reads the whole matrix once, so one thread is bound by one core's memory bandwidth
/// (GPT-2 small's decode: 500 MB of weights per token).
/// Outputs [o0, o1) of it, as out = x · m with the vector x (a if M == 1, else b) and the matrix m
/// (b, else a) whose stride along K is mk and along the outputs mo: gemv_dot_rows where m is
/// contiguous along K (x Wᵀ with W [N, K] row-major, as linear(); W v), the vector copied first if
/// it is strided; gemv_axpy_rows where m is contiguous along the outputs (x W, W [K, N]; Wᵀ v);
/// else gemv_strided. No Eigen here: its GEMM for the nine layout pairs of gemm_reference was
/// about 5.6 s of g++ at -O2 in every unit with a float matmul.
template <class T>
void gemv_part(const T* a, std::int64_t ars, std::int64_t acs, const T* b, std::int64_t brs, std::int64_t bcs, T* c,
               std::int64_t M, std::int64_t /*N*/, std::int64_t K, std::int64_t o0, std::int64_t o1) {
  const bool row = M == 1;  // the outputs run along N
  const T* x = row ? a : b;
  const std::int64_t xs = row ? acs : brs;
  const std::int64_t mk = row ? brs : acs, mo = row ? bcs : ars;
  const T* m = (row ? b : a) + o0 * mo;
  const std::int64_t n = o1 - o0;
  const bool x_unit = xs == 1 || K <= 1, m_along_k = mk == 1 || K <= 1;
  if (m_along_k && x_unit) {
    gemv_dot_rows<T>(x, m, mo, c + o0, n, K);
  } else if (mo == 1) {
    gemv_axpy_rows<T>(x, xs, m, mk, c + o0, n, K);
  } else if (m_along_k) {
    std::vector<T> xc(static_cast<std::size_t>(K));
    for (std::int64_t k = 0; k < K; ++k) xc[static_cast<std::size_t>(k)] = x[k * xs];
    gemv_dot_rows<T>(xc.data(), m, mo, c + o0, n, K);
  } else {
    gemv_strided<T>(x, xs, m, mk, mo, c + o0, n, K);
  }
}

template <class T>
void gemv_threaded(const T* a, std::int64_t ars, std::int64_t acs, const T* b, std::int64_t brs, std::int64_t bcs, T* c,
                   std::int64_t M, std::int64_t N, std::int64_t K) {
  const std::int64_t outputs = M == 1 ? N : M;
  const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const std::int64_t max_threads = (omp_in_parallel() || work < 262144.0) ? 1 : omp_get_max_threads();
  // the axpy form with few outputs per thread (x W, W [768, 2304], on 16 threads: 144 columns, so
  // every row is read in short pieces): split K instead, each thread streaming whole rows into its
  // own partial sums, added after
  const bool axpy = (M == 1 && bcs == 1) || (N == 1 && M > 1 && ars == 1);
  if (axpy && max_threads > 1 && outputs / max_threads < 2048 && K >= 4 * max_threads) {
    const std::int64_t threads = max_threads;
    std::vector<T> part(static_cast<std::size_t>(threads * outputs));
    const T* x = M == 1 ? a : b;            // the vector, stride xs
    const std::int64_t xs = M == 1 ? acs : brs;
    const T* mat = M == 1 ? b : a;          // rows along K, contiguous along the outputs
    const std::int64_t rs = M == 1 ? brs : acs;
#pragma omp parallel for num_threads(static_cast<int>(threads)) schedule(static)
    for (std::int64_t t = 0; t < threads; ++t) {
      const std::int64_t k0 = K * t / threads, k1 = K * (t + 1) / threads;
      gemv_axpy_rows<T>(x + k0 * xs, xs, mat + k0 * rs, rs, part.data() + t * outputs, outputs, k1 - k0);
    }
    for (std::int64_t o = 0; o < outputs; ++o) {
      T s = part[static_cast<std::size_t>(o)];
      for (std::int64_t t = 1; t < threads; ++t) s += part[static_cast<std::size_t>(t * outputs + o)];
      c[o] = s;
    }
    return;
  }
  const std::int64_t threads = std::min<std::int64_t>(max_threads, outputs / 64);
  if (threads <= 1) {
    gemv_part<T>(a, ars, acs, b, brs, bcs, c, M, N, K, 0, outputs);
    return;
  }
#pragma omp parallel for num_threads(static_cast<int>(threads)) schedule(static)
  for (std::int64_t t = 0; t < threads; ++t) {
    const std::int64_t o0 = (outputs * t / threads) & ~std::int64_t{15};
    const std::int64_t o1 = t + 1 == threads ? outputs : (outputs * (t + 1) / threads) & ~std::int64_t{15};
    if (o1 <= o0) continue;
    gemv_part<T>(a, ars, acs, b, brs, bcs, c, M, N, K, o0, o1);
  }
}

/// C[M,N] = A[M,K] · B[K,N] with arbitrary element strides, C contiguous: tenet's own kernels for
/// float and double (GEMM, and GEMV kernels for M or N == 1, threaded over the outputs:
/// gemv_threaded, where a padded register tile was slow: 1 x 1000 x 1000 at 2.8 GFLOP/s against
/// Eigen's GEMV at 10.6), Eigen for other types. Integers wrap
/// as torch's without signed overflow: 32- and 64-bit ones run Eigen on the same bytes read as the
/// unsigned type (two's complement sums and products are the same modulo 2^bits).
template <class T>
void gemm(const T* a, std::int64_t ars, std::int64_t acs, const T* b, std::int64_t brs, std::int64_t bcs, T* c,
          std::int64_t M, std::int64_t N, std::int64_t K) {
  if constexpr (wrapping_int<T> && sizeof(T) < sizeof(int)) {
    gemm_small_int<T>(a, ars, acs, b, brs, bcs, c, M, N, K);
  } else if constexpr (wrapping_int<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    gemm_reference<U>(reinterpret_cast<const U*>(a), ars, acs, reinterpret_cast<const U*>(b), brs, bcs,
                      reinterpret_cast<U*>(c), M, N, K);
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (M > 1 && N > 1)
      gemm_ex<T>(a, ars, acs, b, brs, bcs, c, N, M, N, K);
    else
      gemv_threaded<T>(a, ars, acs, b, brs, bcs, c, M, N, K);
  } else
    gemm_reference<T>(a, ars, acs, b, brs, bcs, c, M, N, K);
}

/// out = a @ b for operands of rank >= 2 (1-D operands are unsqueezed by the caller); out is fresh
/// and contiguous with sizes batch..., M, N.
template <class T, class SA, class SB, class SO>
void run_matmul(const Tensor<T, SO>& out, const Tensor<T, SA>& a, const Tensor<T, SB>& b) {
  constexpr std::size_t ra = SA::rank, rb = SB::rank, ro = SO::rank;
  static_assert(ra >= 2 && rb >= 2 && ro >= 2);
  const std::int64_t M = a.sizes()[ra - 2], K = a.sizes()[ra - 1], N = b.sizes()[rb - 1];
  std::int64_t batches = 1;
  for (std::size_t i = 0; i + 2 < ro; ++i) batches *= out.sizes()[i];
  if (batches == 0 || M == 0 || N == 0) return;
  // batch strides of a and b in the output's batch space (0 where they broadcast)
  std::array<std::int64_t, ro> sa{}, sb{};
  for (std::size_t i = 0; i + 2 < ro; ++i) {
    if (i + ra >= ro) sa[i] = a.sizes()[i + ra - ro] == 1 ? 0 : a.strides()[i + ra - ro];
    if (i + rb >= ro) sb[i] = b.sizes()[i + rb - ro] == 1 ? 0 : b.strides()[i + rb - ro];
  }
  const T* pa = a.data();
  const T* pb = b.data();
  T* pc = out.data();
  const auto ars = a.strides()[ra - 2], acs = a.strides()[ra - 1];
  const auto brs = b.strides()[rb - 2], bcs = b.strides()[rb - 1];
  auto one = [&](std::int64_t bi) {
    std::int64_t oa = 0, ob = 0, rem = bi;
    for (std::size_t i = ro - 2; i-- > 0;) {
      const std::int64_t idx = rem % out.sizes()[i];
      rem /= out.sizes()[i];
      oa += idx * sa[i];
      ob += idx * sb[i];
    }
    T* c = pc + bi * M * N;
    if constexpr (std::is_same_v<gemm_t<T>, T>) {
      gemm<T>(pa + oa, ars, acs, pb + ob, brs, bcs, c, M, N, K);
    } else {
      // widen both operands to float, multiply, round once
      std::vector<float> fa(static_cast<std::size_t>(M * K)), fb(static_cast<std::size_t>(K * N)),
          fc(static_cast<std::size_t>(M * N));
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t k = 0; k < K; ++k) fa[i * K + k] = static_cast<float>(pa[oa + i * ars + k * acs]);
      for (std::int64_t k = 0; k < K; ++k)
        for (std::int64_t j = 0; j < N; ++j) fb[k * N + j] = static_cast<float>(pb[ob + k * brs + j * bcs]);
      gemm<float>(fa.data(), K, 1, fb.data(), N, 1, fc.data(), M, N, K);
      for (std::int64_t i = 0; i < M * N; ++i) c[i] = static_cast<T>(fc[i]);
    }
  };
  if (batches >= omp_get_max_threads() && batches > 1) {
    const gemm_blocking blk = current_gemm_blocking();  // the caller's, for the worker threads
#pragma omp parallel for schedule(static)
    for (std::int64_t bi = 0; bi < batches; ++bi) {
      const gemm_blocking_scope scope(blk);
      one(bi);
    }
  } else {
    for (std::int64_t bi = 0; bi < batches; ++bi) one(bi);
  }
}

}  // namespace tenet::detail::cpu
