// tenet's own CPU GEMM (backend/cpu/gemm.hpp) against Eigen (gemm_reference) and a naive triple
// loop in long double: shapes off the register tile and cache blocks, K = 0, transposed and
// strided operands, float and double, 1 and 2 threads, the epilogue hook, and matmul on top.
#include <tenet/tenet.hpp>

#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using tenet::detail::cpu::gemm;
using tenet::detail::cpu::gemm_ex;
using tenet::detail::cpu::gemm_reference;

/// A strided view of an M x K (or K x N) matrix stored in a larger buffer.
template <class T>
struct strided {
  std::vector<T> buf;
  std::int64_t rs = 0, cs = 0;
  const T* data() const { return buf.data(); }
  T at(std::int64_t i, std::int64_t j) const { return buf[static_cast<std::size_t>(i * rs + j * cs)]; }
};

enum class layout { row, col, strided_row, strided_col };

/// rows x cols with the layout; elements uniform in [-1, 1], padding NaN (a read outside the view
/// would show).
template <class T>
strided<T> make(std::int64_t rows, std::int64_t cols, layout l, std::mt19937& gen) {
  strided<T> m;
  std::int64_t size = 0;
  switch (l) {
    case layout::row: m.rs = cols, m.cs = 1, size = rows * cols; break;
    case layout::col: m.rs = 1, m.cs = rows, size = rows * cols; break;
    case layout::strided_row: m.rs = 3 * cols + 1, m.cs = 3, size = rows * m.rs; break;  // e.g. x[:, ::3]
    case layout::strided_col: m.rs = 2, m.cs = 2 * rows + 5, size = cols * m.cs; break;  // a transposed slice
  }
  m.buf.assign(static_cast<std::size_t>(std::max<std::int64_t>(size, 1)), std::numeric_limits<T>::quiet_NaN());
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) m.buf[static_cast<std::size_t>(i * m.rs + j * m.cs)] = static_cast<T>(dist(gen));
  return m;
}

/// |got - want| <= tol * K * eps * (sum_k |a_ik b_kj| + 1), per element; reports the first miss.
template <class T>
void check_against(const std::vector<T>& got, const std::vector<long double>& want, const std::vector<long double>& mag,
                   std::int64_t K, const std::string& what) {
  const long double eps = std::numeric_limits<T>::epsilon();
  const long double bound_k = 2.0L * static_cast<long double>(std::max<std::int64_t>(K, 1)) * eps;
  std::size_t bad = 0;
  std::size_t first = got.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    const long double err = std::fabs(static_cast<long double>(got[i]) - want[i]);
    if (!(err <= bound_k * (mag[i] + 1e-30L))) {
      if (first == got.size()) first = i;
      ++bad;
    }
  }
  INFO(what << ": " << bad << " of " << got.size() << " elements off"
            << (bad ? ", first at " + std::to_string(first) + ": got " + std::to_string(static_cast<double>(got[first])) +
                          " want " + std::to_string(static_cast<double>(want[first]))
                    : std::string()));
  CHECK(bad == 0);
}

template <class T>
void check_shape(std::int64_t M, std::int64_t N, std::int64_t K, layout la, layout lb, std::mt19937& gen) {
  const auto a = make<T>(M, K, la, gen);
  const auto b = make<T>(K, N, lb, gen);
  std::vector<long double> want(static_cast<std::size_t>(M * N)), mag(want.size());
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      long double s = 0, m = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const long double p = static_cast<long double>(a.at(i, k)) * static_cast<long double>(b.at(k, j));
        s += p;
        m += std::fabs(p);
      }
      want[static_cast<std::size_t>(i * N + j)] = s;
      mag[static_cast<std::size_t>(i * N + j)] = m;
    }
  const std::string what = std::string(sizeof(T) == 4 ? "float" : "double") + " M=" + std::to_string(M) +
                           " N=" + std::to_string(N) + " K=" + std::to_string(K) + " layouts " +
                           std::to_string(static_cast<int>(la)) + "," + std::to_string(static_cast<int>(lb));
  std::vector<T> c(want.size(), std::numeric_limits<T>::quiet_NaN());  // every element must be written
  gemm_ex<T>(a.data(), a.rs, a.cs, b.data(), b.rs, b.cs, c.data(), N, M, N, K);  // also M or N == 1
  check_against(c, want, mag, K, what + " tenet vs naive");
  std::vector<T> w(want.size(), std::numeric_limits<T>::quiet_NaN());  // matmul's entry (the GEMV kernels for M, N == 1)
  gemm<T>(a.data(), a.rs, a.cs, b.data(), b.rs, b.cs, w.data(), M, N, K);
  check_against(w, want, mag, K, what + " gemm() vs naive");
  std::vector<T> r(want.size());
  gemm_reference<T>(a.data(), a.rs, a.cs, b.data(), b.rs, b.cs, r.data(), M, N, K);
  check_against(r, want, mag, K, what + " eigen vs naive");
}

/// Runs f with omp_get_max_threads() == n, then restores the setting.
template <class F>
void with_threads(int n, F&& f) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(n);
  f();
  omp_set_num_threads(before);
}

}  // namespace

TEST_CASE("gemm: shapes off the tile and the cache blocks, float and double, against Eigen and a naive loop") {
  std::mt19937 gen(42);
  const std::int64_t sizes[] = {1, 7, 33, 97, 257};
  for (int threads : {1, 2}) {
    with_threads(threads, [&] {
      for (std::int64_t M : sizes)
        for (std::int64_t N : sizes)
          for (std::int64_t K : {std::int64_t{1}, std::int64_t{33}, std::int64_t{400}}) {
            check_shape<float>(M, N, K, layout::row, layout::row, gen);
            check_shape<double>(M, N, K, layout::row, layout::row, gen);
          }
    });
  }
}

TEST_CASE("gemm: matrix-vector products (M or N == 1) in every layout, split over threads") {
  // gemm() runs tenet's GEMV kernels by layout (dot form, the vector copied when it is strided;
  // axpy form; a strided loop for a matrix strided both ways), threaded over the outputs from 2^18
  // multiply-adds on; off-block output counts and a tail in K
  std::mt19937 gen(7);
  for (int threads : {1, 2, 3}) {
    with_threads(threads, [&] {
      for (layout la : {layout::row, layout::col, layout::strided_row, layout::strided_col})
        for (layout lb : {layout::row, layout::col, layout::strided_row, layout::strided_col})
          for (std::int64_t K : {std::int64_t{3}, std::int64_t{517}}) {
            check_shape<float>(1, 4099, K, la, lb, gen);
            check_shape<float>(2051, 1, K, la, lb, gen);
            check_shape<double>(1, 1037, K, la, lb, gen);
            check_shape<double>(1037, 1, K, la, lb, gen);
          }
    });
  }
}

TEST_CASE("gemm: K = 0 gives zeros; 1x1x1") {
  std::mt19937 gen(1);
  for (int threads : {1, 2})
    with_threads(threads, [&] {
      check_shape<float>(7, 33, 0, layout::row, layout::row, gen);
      check_shape<double>(1, 1, 0, layout::row, layout::row, gen);
      check_shape<float>(1, 1, 1, layout::row, layout::row, gen);
      check_shape<double>(1, 1, 1, layout::col, layout::col, gen);
    });
}

TEST_CASE("gemm: transposed and strided operands need no copy and give the same result") {
  std::mt19937 gen(7);
  const layout all[] = {layout::row, layout::col, layout::strided_row, layout::strided_col};
  for (int threads : {1, 2})
    with_threads(threads, [&] {
      for (layout la : all)
        for (layout lb : all) {
          check_shape<float>(97, 33, 257, la, lb, gen);
          check_shape<double>(33, 97, 7, la, lb, gen);
        }
    });
}

TEST_CASE("gemm: large shapes cross every cache block (M, N, K past MC, NC, KC)") {
  std::mt19937 gen(3);
  for (int threads : {1, 2})
    with_threads(threads, [&] {
      check_shape<float>(1000, 1000, 1000, layout::row, layout::col, gen);
      check_shape<double>(257, 1000, 600, layout::col, layout::row, gen);
      check_shape<float>(2100, 40, 97, layout::row, layout::row, gen);  // more rows than one M block
    });
}

TEST_CASE("gemm: the result does not depend on the number of threads") {
  std::mt19937 gen(5);
  const auto a = make<float>(300, 700, layout::row, gen);
  const auto b = make<float>(700, 500, layout::col, gen);
  std::vector<float> c1(300 * 500), c2(c1.size()), c3(c1.size());
  with_threads(1, [&] { gemm<float>(a.data(), a.rs, a.cs, b.data(), b.rs, b.cs, c1.data(), 300, 500, 700); });
  with_threads(2, [&] { gemm<float>(a.data(), a.rs, a.cs, b.data(), b.rs, b.cs, c2.data(), 300, 500, 700); });
  with_threads(16, [&] { gemm<float>(a.data(), a.rs, a.cs, b.data(), b.rs, b.cs, c3.data(), 300, 500, 700); });
  CHECK(c1 == c2);
  CHECK(c1 == c3);
}

TEST_CASE("gemm: the epilogue sees every finished tile once (bias + relu), also with K = 0 and C's row stride") {
  std::mt19937 gen(11);
  for (int threads : {1, 2})
    with_threads(threads, [&] {
      for (std::int64_t K : {std::int64_t{0}, std::int64_t{5}, std::int64_t{1000}}) {
        const std::int64_t M = 97, N = 257, ldc = N + 3;
        const auto a = make<double>(M, K, layout::row, gen);
        const auto b = make<double>(K, N, layout::col, gen);
        std::vector<double> bias(static_cast<std::size_t>(N));
        std::uniform_real_distribution<double> dist(-1.0, 1.0);
        for (auto& v : bias) v = dist(gen);
        std::vector<int> seen(static_cast<std::size_t>(M * N), 0);
        auto bias_relu = [&](double* c, std::int64_t ld, std::int64_t i0, std::int64_t j0, std::int64_t rows,
                             std::int64_t cols) {
          for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < cols; ++j) {
              double& v = c[i * ld + j];
              v = std::max(v + bias[static_cast<std::size_t>(j0 + j)], 0.0);
#pragma omp atomic
              ++seen[static_cast<std::size_t>((i0 + i) * N + j0 + j)];
            }
        };
        std::vector<double> c(static_cast<std::size_t>(M * ldc), -7.0);
        gemm_ex<double>(a.data(), a.rs, a.cs, b.data(), b.rs, b.cs, c.data(), ldc, M, N, K, bias_relu);
        std::vector<double> r(static_cast<std::size_t>(M * N));
        gemm_reference<double>(a.data(), a.rs, a.cs, b.data(), b.rs, b.cs, r.data(), M, N, K);
        std::int64_t bad = 0;
        for (std::int64_t i = 0; i < M; ++i) {
          for (std::int64_t j = 0; j < N; ++j) {
            const double want = std::max(r[static_cast<std::size_t>(i * N + j)] + bias[static_cast<std::size_t>(j)], 0.0);
            const double got = c[static_cast<std::size_t>(i * ldc + j)];
            if (!(std::fabs(got - want) <= 2.0 * static_cast<double>(K + 1) * 2.3e-16 * (std::fabs(want) + 1.0))) ++bad;
            if (seen[static_cast<std::size_t>(i * N + j)] != 1) ++bad;
          }
          for (std::int64_t j = N; j < ldc; ++j)
            if (c[static_cast<std::size_t>(i * ldc + j)] != -7.0) ++bad;  // the padding is not touched
        }
        INFO("K=" << K << " threads=" << threads);
        CHECK(bad == 0);
      }
    });
}

TEST_CASE("gemm: matmul on tensors (transposed views, batched, broadcast, float16) agrees with Eigen") {
  using namespace tenet;
  manual_seed(3);
  const std::int64_t B = 5, M = 33, K = 70, N = 97;
  Tensor<float, shape<dyn, dyn, dyn>> a = randn<float, shape<dyn, dyn, dyn>>(B, M, K);
  Tensor<float, shape<dyn, dyn>> bt = randn<float, shape<dyn, dyn>>(N, K);
  for (int threads : {1, 2, 16}) {
    with_threads(threads, [&] {
      Tensor<float, shape<dyn, dyn, dyn>> c = matmul(a, bt.transpose<0, 1>());  // B broadcast, transposed view
      REQUIRE(c.sizes()[0] == B);
      std::vector<float> r(static_cast<std::size_t>(M * N));
      std::int64_t bad = 0;
      for (std::int64_t bi = 0; bi < B; ++bi) {
        gemm_reference<float>(a.data() + bi * M * K, K, 1, bt.data(), 1, K, r.data(), M, N, K);
        for (std::int64_t i = 0; i < M * N; ++i)
          if (!(std::fabs(c.data()[bi * M * N + i] - r[static_cast<std::size_t>(i)]) <=
                2.0f * K * 1.2e-7f * (std::fabs(r[static_cast<std::size_t>(i)]) + 1.0f)))
            ++bad;
      }
      INFO("threads=" << threads);
      CHECK(bad == 0);
    });
  }
  // 16-bit floats widen to float and round once
  Tensor<float16, shape<dyn, dyn>> h = a.select<0>(0).to<float16>();
  Tensor<float16, shape<dyn, dyn>> hc = matmul(h, h.transpose<0, 1>());
  Tensor<float, shape<dyn, dyn>> hf = h.to<float>();
  std::vector<float> r(static_cast<std::size_t>(M * M));
  gemm_reference<float>(hf.data(), K, 1, hf.data(), 1, K, r.data(), M, M, K);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < M * M; ++i)
    if (hc.data()[i] != static_cast<float16>(r[static_cast<std::size_t>(i)]) &&
        !(std::fabs(static_cast<float>(hc.data()[i]) - r[static_cast<std::size_t>(i)]) <=
          1e-3f * (std::fabs(r[static_cast<std::size_t>(i)]) + 1.0f)))
      ++bad;
  CHECK(bad == 0);
}
