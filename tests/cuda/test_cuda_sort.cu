// CUDA backend tests, part 5: the sort prim (backend/cuda/sort.cuh) and the ops built on it
// (sort, argsort, msort, topk, kthvalue, median, mode). Every GPU result is checked against the CPU
// backend on the same input bit for bit (values and int64 indices): random values, many ties,
// NaN / inf / -0.0, every dtype, dims 0, 1 and -1 of a 3-D tensor, ascending and descending,
// transposed (non-contiguous) inputs, line lengths 1 ... 100,000 (the shared-memory path up to
// 4096, the global merge path above) and empty tensors. The main() that skips without a GPU is in
// test_cuda.cu.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <tenet/cuda.hpp>

#include "check_close.hpp"

using namespace tenet;

namespace {
using tenet::test::gpu;

/// a (from the GPU) and b (CPU) hold the same bytes, element by element.
template <class T, class S, class S2>
void check_bits(const Tensor<T, S>& a, const Tensor<T, S2>& b) {
  REQUIRE(a.device() == tenet::device(gpu));
  REQUIRE(b.device().is_cpu());
  auto g = a.cpu().contiguous();
  auto c = b.contiguous();
  REQUIRE(g.sizes() == c.sizes());
  std::int64_t bad = 0, first = -1;
  for (std::int64_t i = 0; i < g.numel(); ++i)
    if (std::memcmp(g.data() + i, c.data() + i, sizeof(T)) != 0) {
      if (first < 0) first = i;
      ++bad;
    }
  INFO("elements " << g.numel() << ", mismatches " << bad << ", first at " << first);
  CHECK(bad == 0);
}

/// A tensor of dtype T and the given sizes: small integers (many ties) or spread values, and for
/// floating types NaN, +-inf, -0.0 and 0.0 at random places.
template <class T>
Tensor<T, dyn_shape<3>> sample(sizes_t<3> sz, int kind, std::uint32_t seed) {
  Tensor<T, dyn_shape<3>> x(sz);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-3, 3);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  std::uniform_int_distribution<int> pick(0, 15);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      x.data()[i] = small(rng) > 0;
    } else if constexpr (std::is_unsigned_v<T>) {
      x.data()[i] = static_cast<T>(kind == 0 ? small(rng) + 3 : static_cast<int>(rng() & 0xff));
    } else if constexpr (std::is_integral_v<T>) {
      const std::int64_t big = static_cast<std::int64_t>(rng()) - (std::int64_t{1} << 31);
      x.data()[i] = static_cast<T>(kind == 0 ? small(rng) : (sizeof(T) >= 4 ? big : big % 100));
      if (kind == 2 && pick(rng) == 0) x.data()[i] = pick(rng) < 8 ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
    } else {
      float v = kind == 0 ? static_cast<float>(small(rng)) : normal(rng);
      if (kind == 2) {
        switch (pick(rng)) {
          case 0: v = std::numeric_limits<float>::quiet_NaN(); break;
          case 1: v = -std::numeric_limits<float>::quiet_NaN(); break;
          case 2: v = std::numeric_limits<float>::infinity(); break;
          case 3: v = -std::numeric_limits<float>::infinity(); break;
          case 4: v = -0.0f; break;
          case 5: v = 0.0f; break;
          default: break;
        }
      }
      x.data()[i] = static_cast<T>(v);
    }
  }
  return x;
}

template <std::int64_t D, class T>
void check_sort_dim(const Tensor<T, dyn_shape<3>>& x) {
  INFO("dim " << D << ", sizes " << x.size(0) << " x " << x.size(1) << " x " << x.size(2));
  const auto d = x.to(gpu);
  for (bool desc : {false, true}) {
    INFO("descending " << desc);
    auto g = sort<D>(d, desc);
    auto c = sort<D>(x, desc);
    check_bits(g.values, c.values);
    check_bits(g.indices, c.indices);
  }
}

/// sort along dims 0, 1 and -1, each line length in `lens` along the sorted dim.
template <class T>
void check_sort_dtype(std::initializer_list<std::int64_t> lens) {
  std::uint32_t seed = 1;
  for (int kind : {0, 1, 2}) {
    INFO("kind " << kind);
    for (std::int64_t n : lens) {
      check_sort_dim<0>(sample<T>({n, 3, 2}, kind, seed++));
      check_sort_dim<1>(sample<T>({2, n, 3}, kind, seed++));
      check_sort_dim<-1>(sample<T>({3, 2, n}, kind, seed++));
    }
  }
}

using F3 = Tensor<float, dyn_shape<3>>;
using I3 = Tensor<std::int64_t, dyn_shape<3>>;
}  // namespace

TEST_CASE("cuda sort: fp32, every path (line lengths 1 ... 100000), ties, NaN / inf / -0.0, dims 0, 1, -1",
          "[cuda][sort]") {
  check_sort_dtype<float>({1, 2, 31, 1000, 4096, 5000});
  // the global merge path with many lines and one long line
  for (int kind : {0, 2}) {
    check_sort_dim<-1>(sample<float>({1, 1, 100000}, kind, 7));
    check_sort_dim<0>(sample<float>({100000, 2, 1}, kind, 8));
    check_sort_dim<1>(sample<float>({2, 9000, 2}, kind, 9));
  }
}

TEST_CASE("cuda sort: fp64, fp16, bf16 and the integer dtypes, bool", "[cuda][sort]") {
  const std::initializer_list<std::int64_t> lens = {1, 2, 31, 1000, 5000};
  check_sort_dtype<double>({1, 2, 31, 1000, 4096, 5000});
  check_sort_dtype<float16>(lens);
  check_sort_dtype<bfloat16>(lens);
  check_sort_dtype<std::int64_t>({1, 31, 1000, 5000});
  check_sort_dtype<std::int32_t>({2, 1000, 5000});
  check_sort_dtype<std::int16_t>({31, 5000});
  check_sort_dtype<std::int8_t>({31, 5000});
  check_sort_dtype<std::uint8_t>({31, 5000});
  check_sort_dtype<bool>({31, 5000});
  check_sort_dim<-1>(sample<double>({1, 2, 100000}, 2, 11));
}

TEST_CASE("cuda sort: transposed inputs, empty tensors, argsort / msort (lazy prim nodes)", "[cuda][sort]") {
  for (std::int64_t n : {31, 3000, 6000}) {
    const F3 x = sample<float>({n, 4, 3}, 2, 20 + static_cast<std::uint32_t>(n));
    const F3 d = x.to(gpu);
    const F3 xt = x.transpose(0, 2), dt = d.transpose(0, 2);  // lines with stride 12 (dim -1), 1 (dim 0)
    REQUIRE(!dt.is_contiguous());
    check_sort_dim<-1>(xt);  // (copies to the GPU contiguous)
    for (bool desc : {false, true}) {
      auto g = sort<-1>(dt, desc);
      auto c = sort<-1>(xt, desc);
      check_bits(g.values, c.values);
      check_bits(g.indices, c.indices);
      auto g0 = sort<0>(dt, desc);
      auto c0 = sort<0>(xt, desc);
      check_bits(g0.values, c0.values);
      check_bits(g0.indices, c0.indices);
      // argsort of a pointwise expression: the child is evaluated first
      check_bits(I3(argsort<1>(dt * 2.0f, desc)), I3(argsort<1>(xt * 2.0f, desc)));
      check_bits(I3(argsort<-1>(d, desc)), I3(argsort<-1>(x, desc)));
    }
    check_bits(F3(msort(dt)), F3(msort(xt)));
  }
  for (sizes_t<3> sz : {sizes_t<3>{0, 3, 2}, sizes_t<3>{3, 0, 2}, sizes_t<3>{2, 3, 0}}) {
    const F3 x(sz);
    check_sort_dim<-1>(x);
    check_sort_dim<0>(x);
    check_bits(I3(argsort<1>(x.to(gpu))), I3(argsort<1>(x)));
  }
  // a 0-dim tensor and a 1-D one
  Tensor<float, shape<>> s0(sizes_t<0>{});
  s0.fill_(3.0f);
  auto g0 = sort<0>(s0.to(gpu));
  check_bits(g0.values, s0);
  const Tensor<float, dyn_shape<1>> v = sample<float>({1, 1, 777}, 2, 3).reshape<-1>();
  auto g1 = sort<0>(v.to(gpu), true);
  auto c1 = sort<0>(v, true);
  check_bits(g1.values, c1.values);
  check_bits(g1.indices, c1.indices);
}

TEST_CASE("cuda sort: topk, kthvalue, median, mode through the sort kernel", "[cuda][sort]") {
  using F2 = Tensor<float, dyn_shape<2>>;
  using I2 = Tensor<std::int64_t, dyn_shape<2>>;
  for (std::int64_t n : {1, 7, 1000, 5000}) {
    for (int kind : {0, 2}) {
      INFO("n " << n << ", kind " << kind);
      const F3 x = sample<float>({4, 3, n}, kind, 40 + static_cast<std::uint32_t>(n) + kind);
      const F3 d = x.to(gpu);
      for (bool largest : {true, false}) {
        const std::int64_t k = n > 5 ? 5 : n;
        auto g = topk<-1>(d, k, largest);
        auto c = topk<-1>(x, k, largest);
        check_bits(g.values, c.values);
        check_bits(g.indices, c.indices);
      }
      auto gk = kthvalue<-1>(d, (n + 1) / 2);
      auto ck = kthvalue<-1>(x, (n + 1) / 2);
      check_bits(F2(gk.values), F2(ck.values));
      check_bits(I2(gk.indices), I2(ck.indices));
      auto gm = median<-1>(d);
      auto cm = median<-1>(x);
      check_bits(F2(gm.values), F2(cm.values));
      check_bits(I2(gm.indices), I2(cm.indices));
      auto gm1 = median<1>(d);
      auto cm1 = median<1>(x);
      check_bits(F2(gm1.values), F2(cm1.values));
      check_bits(I2(gm1.indices), I2(cm1.indices));
      check_bits(Tensor<float, shape<>>(median(d)), Tensor<float, shape<>>(median(x)));
      if (kind == 0) {  // mode compares values with ==: no NaN here
        auto go = mode<-1>(d);
        auto co = mode<-1>(x);
        check_bits(F2(go.values), F2(co.values));
        check_bits(I2(go.indices), I2(co.indices));
      }
    }
  }
}
