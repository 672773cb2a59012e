// Tests of the Philox random stream (detail/tenet/runtime/philox.hpp) and of PyTorch-compatible
// tensor printing (detail/tenet/io/format.hpp).
#define TENET_PUBLIC_HEADER_INCLUDED 1  // these are tests of internal headers
#include <tenet/io/format.hpp>
#include <tenet/runtime/half.hpp>  // tenet::bfloat16, float16
#include <tenet/runtime/philox.hpp>
#include <tenet/backend/cpu/random.hpp>  // the CPU kernel of uniform_ (batched Philox)

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifndef TENET_REFERENCE_DIR
#error "define TENET_REFERENCE_DIR to the folder holding format_cases.txt (tests/reference)"
#endif

namespace td = tenet::detail;

namespace {

// A 2-byte-like floating type that is not arithmetic, as tenet::float16 is: explicit from float,
// converts to float, 11 significand digits. It keeps the value rounded to 11 bits.
struct mock_half {
  float v = 0.0f;
  mock_half() = default;
  explicit mock_half(float f) {
    int e = 0;
    const float m = std::frexp(f, &e);
    v = std::isfinite(f) && f != 0.0f ? std::ldexp(std::nearbyint(std::ldexp(m, 11)), e - 11) : f;
  }
  operator float() const { return v; }
};

}  // namespace

template <>
struct std::numeric_limits<mock_half> {
  static constexpr bool is_specialized = true;
  static constexpr bool is_integer = false;
  static constexpr int digits = 11;
};

namespace {

// ---------------------------------------------------------------------------------------------
// Philox

// Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter (4 words), key (2), result (4).
constexpr td::uint4x32 kat_zero = td::philox4x32_10(td::uint4x32{{0, 0, 0, 0}}, td::philox_key{0, 0});
static_assert(kat_zero == td::uint4x32{{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
              "Philox4x32-10 must be usable (and right) at compile time");

TEST_CASE("philox4x32_10 matches the Random123 known-answer vectors", "[philox]") {
  CHECK(td::philox4x32_10({{0u, 0u, 0u, 0u}}, {0u, 0u}) ==
        td::uint4x32{{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
  CHECK(td::philox4x32_10({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, {0xffffffffu, 0xffffffffu}) ==
        td::uint4x32{{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}});
  CHECK(td::philox4x32_10({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, {0xa4093822u, 0x299f31d0u}) ==
        td::uint4x32{{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}});
}

TEST_CASE("philox stream: counter and key layout", "[philox]") {
  const std::uint64_t seed = 0x0123456789abcdefull, offset = 0xfffffffffffffffeull;
  // block 3 of (seed, offset) is the counter offset + 3 (wrapping), split into two words.
  const std::uint64_t c = offset + 3;
  CHECK(td::philox_block(seed, offset, 3) ==
        td::philox4x32_10({{static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(c >> 32), 0, 0}},
                          {0x89abcdefu, 0x01234567u}));
  CHECK(td::philox_blocks_for(0, 1) == 0);
  CHECK(td::philox_blocks_for(1, 1) == 1);
  CHECK(td::philox_blocks_for(4, 1) == 1);
  CHECK(td::philox_blocks_for(5, 1) == 2);
  CHECK(td::philox_blocks_for(5, 2) == 3);
}

TEST_CASE("philox word -> number conversions", "[philox]") {
  CHECK(td::uniform_float(0u) == 0.0f);
  CHECK(td::uniform_float(0xffffffffu) == 1.0f - 0x1p-24f);
  CHECK(td::uniform_double(0u, 0u) == 0.0);
  CHECK(td::uniform_double(0xffffffffu, 0xffffffffu) == 1.0 - 0x1p-53);
  CHECK(td::uniform_open0_24(0u) == 0x1p-24);
  CHECK(td::uniform_open0_24(0xffffffffu) == 1.0);
  CHECK(td::uniform_open0_53(0u, 0u) == 0x1p-53);
  CHECK(td::uniform_open0_53(0xffffffffu, 0xffffffffu) == 1.0);
  CHECK(td::uniform_int(0u, -5, 10) == -5);
  CHECK(td::uniform_int(0xffffffffu, -5, 10) == 4);
  CHECK(td::uniform_int(0xffffffffu, 0, std::uint64_t{1} << 32) == 0xffffffffll);
  CHECK(td::uniform_int(0xffffffffu, 0xffffffffu, std::numeric_limits<std::int64_t>::min(), ~std::uint64_t{0}) ==
        std::numeric_limits<std::int64_t>::max() - 1);
  // mulhi64 against the compiler's 128-bit product
  std::uint64_t a = 0x9e3779b97f4a7c15ull, b = 0xbf58476d1ce4e5b9ull;
  for (int i = 0; i < 1000; ++i) {
    __extension__ using u128 = unsigned __int128;
    const auto expect = static_cast<std::uint64_t>((static_cast<u128>(a) * b) >> 64);
    REQUIRE(td::mulhi64(a, b) == expect);
    a = a * 6364136223846793005ull + 1442695040888963407ull;
    b ^= a >> 17;
    b *= 0xff51afd7ed558ccdull;
  }
  CHECK(td::mulhi64(~0ull, ~0ull) == ~0ull - 1);
}

template <class T, class Fill>
void check_split_equivalence(Fill fill) {
  constexpr std::int64_t n = 1003;
  std::vector<T> whole(n), parts(n);
  fill(whole.data(), 0, n);
  // splits at every residue modulo 4 and 2, and single elements
  const std::vector<std::int64_t> cuts = {0, 1, 2, 3, 5, 6, 7, 10, 11, 17, 64, 65, 66, 67, 500, 999, 1001, 1002, n};
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) fill(parts.data() + cuts[i], cuts[i], cuts[i + 1]);
  CHECK(std::memcmp(whole.data(), parts.data(), sizeof(T) * n) == 0);
  // a sub-range on its own equals the same elements of the whole
  std::vector<T> sub(250);
  fill(sub.data(), 333, 583);
  CHECK(std::memcmp(whole.data() + 333, sub.data(), sizeof(T) * 250) == 0);
}

TEST_CASE("philox fills: any split of a range gives the same values", "[philox]") {
  const std::uint64_t seed = 42, offset = 7;
  check_split_equivalence<float>([&](float* o, std::int64_t b, std::int64_t e) {
    td::fill_uniform_range(o, b, e, seed, offset, -1.0, 2.0);
  });
  check_split_equivalence<double>([&](double* o, std::int64_t b, std::int64_t e) {
    td::fill_uniform_range(o, b, e, seed, offset, -1.0, 2.0);
  });
  check_split_equivalence<float>([&](float* o, std::int64_t b, std::int64_t e) {
    td::fill_normal_range(o, b, e, seed, offset, 1.0, 3.0);
  });
  check_split_equivalence<double>([&](double* o, std::int64_t b, std::int64_t e) {
    td::fill_normal_range(o, b, e, seed, offset, 1.0, 3.0);
  });
  check_split_equivalence<std::int64_t>([&](std::int64_t* o, std::int64_t b, std::int64_t e) {
    td::fill_randint_range(o, b, e, seed, offset, -3, 1000);
  });
  check_split_equivalence<std::int64_t>([&](std::int64_t* o, std::int64_t b, std::int64_t e) {
    td::fill_randint_range(o, b, e, seed, offset, -(std::int64_t{1} << 40), std::int64_t{1} << 40);
  });
}

namespace {
/// The CPU kernel of the uniform prim (16 Philox blocks per batch, vectorized, threaded) against
/// the scalar range fill: bit for bit, every size around the batch and chunk edges, offsets that
/// carry into the counter's high word.
template <class T>
void check_batched_uniform() {
  for (std::int64_t n : {0, 1, 3, 4, 63, 64, 65, 127, 128, 1000, 16383, 16384, 16385, 50001})
    for (std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{5}, std::uint64_t{0xFFFFFFFFu} - 7, ~std::uint64_t{0} - 9}) {
      INFO("n " << n << ", offset " << offset << ", " << sizeof(T) << "-byte type");
      std::vector<T> a(static_cast<std::size_t>(n)), b(static_cast<std::size_t>(n));
      td::cpu::run_uniform(a.data(), n, 0x0123456789ABCDEFull, offset);
      td::fill_uniform_range(b.data(), 0, n, 0x0123456789ABCDEFull, offset);
      CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
    }
}
}  // namespace

TEST_CASE("philox: the CPU uniform kernel's batched blocks equal the scalar stream", "[philox]") {
  check_batched_uniform<float>();
  check_batched_uniform<double>();
  check_batched_uniform<tenet::float16>();
  check_batched_uniform<tenet::bfloat16>();
}

TEST_CASE("philox fills follow the documented stream", "[philox]") {
  const std::uint64_t seed = 0xfeedfacecafebeefull, offset = 123;
  std::vector<float> f(9);
  std::vector<double> d(5);
  td::fill_uniform(f.data(), 9, seed, offset);
  td::fill_uniform(d.data(), 5, seed, offset);
  for (std::int64_t k = 0; k < 9; ++k) {
    const auto block = td::philox_block(seed, offset, k / 4);
    CHECK(f[k] == td::uniform_float(block[static_cast<int>(k % 4)]));
  }
  for (std::int64_t k = 0; k < 5; ++k) {
    const auto block = td::philox_block(seed, offset, k / 2);
    const int j = static_cast<int>(2 * (k % 2));
    CHECK(d[k] == td::uniform_double(block[j], block[j + 1]));
  }
  // normal: pairs share (u1, u2), cos then sin, so z0^2 + z1^2 = -2 ln u1
  std::vector<double> z(8);
  td::fill_normal(z.data(), 8, seed, offset);
  for (std::int64_t k = 0; k < 8; k += 2) {
    const auto block = td::philox_block(seed, offset, k / 2);
    const double u1 = td::uniform_open0_53(block[0], block[1]);
    CHECK(z[k] * z[k] + z[k + 1] * z[k + 1] == Approx(-2.0 * std::log(u1)).epsilon(1e-12));
  }
  // different offsets and seeds give different streams
  std::vector<float> g(9);
  td::fill_uniform(g.data(), 9, seed, offset + 3);
  CHECK(g != f);
  td::fill_uniform(g.data(), 9, seed + 1, offset);
  CHECK(g != f);
}

template <class T>
void check_moments(const std::vector<T>& v, double mean, double var, double z = 6.0) {
  const double n = static_cast<double>(v.size());
  double s = 0.0, s2 = 0.0;
  for (T x : v) s += static_cast<double>(x);
  const double m = s / n;
  for (T x : v) s2 += (static_cast<double>(x) - m) * (static_cast<double>(x) - m);
  const double var_hat = s2 / (n - 1);
  // standard errors: of the mean sqrt(var / n); of the variance about var * sqrt(2 / n) for a
  // normal sample and less for a uniform one
  CHECK(std::abs(m - mean) < z * std::sqrt(var / n));
  CHECK(std::abs(var_hat - var) < z * var * std::sqrt(2.0 / n));
}

TEST_CASE("philox uniform and normal: mean and variance of 1e6 draws", "[philox]") {
  constexpr std::int64_t n = 1'000'000;
  std::vector<float> f(n);
  std::vector<double> d(n);
  td::fill_uniform(f.data(), n, 1, 0);
  check_moments(f, 0.5, 1.0 / 12.0);
  CHECK(*std::min_element(f.begin(), f.end()) >= 0.0f);
  CHECK(*std::max_element(f.begin(), f.end()) < 1.0f);
  td::fill_uniform(d.data(), n, 2, 0, -2.0, 3.0);
  check_moments(d, 0.5, 25.0 / 12.0);
  CHECK(*std::min_element(d.begin(), d.end()) >= -2.0);
  CHECK(*std::max_element(d.begin(), d.end()) < 3.0);
  td::fill_normal(f.data(), n, 3, 0);
  check_moments(f, 0.0, 1.0);
  td::fill_normal(d.data(), n, 4, 0, 10.0, 2.0);
  check_moments(d, 10.0, 4.0);
  // the fraction within one standard deviation: 0.6827
  const auto within = std::count_if(d.begin(), d.end(), [](double x) { return std::abs(x - 10.0) < 2.0; });
  CHECK(std::abs(static_cast<double>(within) / n - 0.682689) < 6.0 * std::sqrt(0.68 * 0.32 / n));
  CHECK(std::all_of(f.begin(), f.end(), [](float x) { return std::isfinite(x); }));
}

template <class T>
void check_unit_uniform_fast_path() {
  // uniform_element's [0, 1) path computes in float; the general formula, in double
  constexpr int bits = td::uniform_random_bits<T>();
  std::int64_t differ = 0;
  for (std::uint64_t b = 0; b < 4096; ++b) {
    const auto block = td::philox_block(77, 5, b);
    for (std::int64_t k = 4 * static_cast<std::int64_t>(b); k < 4 * static_cast<std::int64_t>(b) + 4; ++k) {
      const T fast = td::uniform_element<T>(block, k, 0.0, 1.0);
      const T general = td::random_from_double<T>(std::fma(1.0, td::uniform_bits(block[static_cast<int>(k & 3)], bits), 0.0));
      differ += static_cast<float>(fast) != static_cast<float>(general);
    }
  }
  CHECK(differ == 0);
}
TEST_CASE("philox uniform between 0 and 1 computed in float equals the double formula", "[philox]") {
  check_unit_uniform_fast_path<float>();
  check_unit_uniform_fast_path<tenet::bfloat16>();
  check_unit_uniform_fast_path<tenet::float16>();
  check_unit_uniform_fast_path<mock_half>();
}
TEST_CASE("philox uniform for a non-arithmetic half type is exact in it and below high", "[philox]") {
  constexpr std::int64_t n = 100'000;
  std::vector<mock_half> h(n);
  td::fill_uniform(h.data(), n, 5, 0);
  double s = 0.0;
  for (mock_half x : h) {
    const float v = x;
    REQUIRE(v >= 0.0f);
    REQUIRE(v < 1.0f);
    REQUIRE(std::ldexp(v, 11) == std::nearbyint(std::ldexp(v, 11)));  // 11 random bits: k / 2048
    s += v;
  }
  CHECK(std::abs(s / n - (0.5 - 0.5 / 2048)) < 6.0 * std::sqrt(1.0 / 12.0 / n));
  std::vector<mock_half> z(n);
  td::fill_normal(z.data(), n, 6, 0);
  std::vector<float> zf(z.begin(), z.end());
  check_moments(zf, 0.0, 1.0);
}

TEST_CASE("philox randint: bounds, every value hit, two-word ranges", "[philox]") {
  constexpr std::int64_t n = 100'000;
  std::vector<std::int64_t> v(n);
  td::fill_randint(v.data(), n, 9, 0, -3, 4);  // [-3, 4): 7 values, 4 excluded
  std::set<std::int64_t> seen(v.begin(), v.end());
  CHECK(seen == std::set<std::int64_t>{-3, -2, -1, 0, 1, 2, 3});
  for (std::int64_t x = -3; x < 4; ++x) {
    const auto c = std::count(v.begin(), v.end(), x);
    CHECK(std::abs(static_cast<double>(c) - n / 7.0) < 6.0 * std::sqrt(n / 7.0));
  }
  std::vector<bool> bits_seen(2, false);
  std::vector<std::uint8_t> b(64);
  td::fill_randint(b.data(), 64, 10, 0, 0, 2);
  for (auto x : b) {
    REQUIRE(x < 2);
    bits_seen[x] = true;
  }
  CHECK((bits_seen[0] && bits_seen[1]));
  std::vector<std::int64_t> one(10);
  td::fill_randint(one.data(), 10, 11, 0, 5, 6);
  CHECK(std::all_of(one.begin(), one.end(), [](std::int64_t x) { return x == 5; }));

  // a range over 2^32 uses two words; its values spread over the whole range
  const std::int64_t lo = -(std::int64_t{1} << 40), hi = (std::int64_t{1} << 40) + 12345;
  td::fill_randint(v.data(), n, 12, 0, lo, hi);
  CHECK(*std::min_element(v.begin(), v.end()) >= lo);
  CHECK(*std::max_element(v.begin(), v.end()) < hi);
  std::vector<double> vd(v.begin(), v.end());
  const double width = static_cast<double>(hi) - static_cast<double>(lo);
  check_moments(vd, (static_cast<double>(lo) + static_cast<double>(hi) - 1) / 2, width * width / 12.0);
  // the whole int64 range less one value
  td::fill_randint(v.data(), 1000, 13, 0, std::numeric_limits<std::int64_t>::min(),
                   std::numeric_limits<std::int64_t>::max());
  CHECK(std::count_if(v.begin(), v.begin() + 1000, [](std::int64_t x) { return x < 0; }) > 400);
  CHECK(std::count_if(v.begin(), v.begin() + 1000, [](std::int64_t x) { return x > 0; }) > 400);
  // float outputs
  std::vector<float> fv(1000);
  td::fill_randint(fv.data(), 1000, 14, 0, 0, 10);
  CHECK(std::all_of(fv.begin(), fv.end(), [](float x) { return x >= 0 && x < 10 && x == std::floor(x); }));

  CHECK_THROWS_AS(td::fill_randint(v.data(), 1, 0, 0, 4, 4), tenet::value_error);
  CHECK_THROWS_AS(td::fill_uniform(fv.data(), 1, 0, 0, 2.0, 1.0), tenet::value_error);
  CHECK_THROWS_AS(td::fill_normal(fv.data(), 1, 0, 0, 0.0, -1.0), tenet::value_error);
}

TEST_CASE("generator: seed, reservations that never overlap, thread safety", "[philox]") {
  td::generator g;
  CHECK(g.seed() == 0x2545F4914F6CDD1Dull);
  CHECK(g.offset() == 0);
  const auto a = g.reserve(10, 1);  // 3 blocks
  const auto b = g.reserve(10);     // 2 words per element: 5 blocks
  const auto c = g.reserve(1, 1);
  CHECK(a.offset == 0);
  CHECK(b.offset == 3);
  CHECK(c.offset == 8);
  CHECK(g.offset() == 9);
  g.manual_seed(77);
  CHECK(g.state().seed == 77);
  CHECK(g.state().offset == 0);
  g.set_state({5, 100});
  CHECK(g.reserve(4).offset == 100);

  CHECK(&td::default_generator() == &td::default_generator());

  td::generator shared(1);
  constexpr int threads = 8, per_thread = 1000;
  std::vector<std::vector<std::uint64_t>> got(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) got[t].push_back(shared.reserve(6, 2).offset);  // 3 blocks each
    });
  }
  for (auto& th : pool) th.join();
  std::set<std::uint64_t> all;
  for (const auto& v : got) all.insert(v.begin(), v.end());
  CHECK(all.size() == threads * per_thread);
  CHECK(*all.rbegin() == 3ull * (threads * per_thread - 1));
  CHECK(shared.offset() == 3ull * threads * per_thread);
}

// ---------------------------------------------------------------------------------------------
// Printing, against str(tensor) from PyTorch (tests/reference/format_cases.txt, made by
// tests/reference/gen_format.py)

struct format_case {
  std::string name, dtype, device;
  std::vector<std::int64_t> sizes;
  std::vector<std::string> values;
  td::print_options options;
  std::string expected;
};

std::vector<format_case> read_format_cases() {
  const std::string path = std::string(TENET_REFERENCE_DIR) + "/format_cases.txt";
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<format_case> cases;
  format_case cur;
  bool first_line = true;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == "case") {
      cur = format_case{};
      words >> cur.name;
      first_line = true;
    } else if (key == "dtype") {
      words >> cur.dtype;
    } else if (key == "device") {
      words >> cur.device;
    } else if (key == "sizes") {
      std::size_t ndim = 0;
      words >> ndim;
      cur.sizes.resize(ndim);
      for (auto& s : cur.sizes) words >> s;
    } else if (key == "options") {
      auto& o = cur.options;
      words >> o.precision >> o.threshold >> o.edgeitems >> o.linewidth >> o.sci_mode;
    } else if (key == "values") {
      std::string v;
      while (words >> v) cur.values.push_back(v);
    } else if (key == "|" || line.rfind("|", 0) == 0) {
      if (!first_line) cur.expected += '\n';
      cur.expected += line.size() > 2 ? line.substr(2) : std::string();
      first_line = false;
    } else if (key == "end") {
      cases.push_back(cur);
    } else {
      FAIL("format_cases.txt: unexpected line: " << line);
    }
  }
  return cases;
}

template <class T>
std::string format_case_as(const format_case& c) {
  std::vector<T> data;
  for (const std::string& v : c.values) {
    if constexpr (std::is_integral_v<T>) {
      data.push_back(static_cast<T>(std::strtoll(v.c_str(), nullptr, 10)));
    } else {
      data.push_back(static_cast<T>(std::strtod(v.c_str(), nullptr)));  // "0x1.8p+1", "inf", "nan", "-0x0.0p+0"
    }
  }
  const bool default_dtype = c.dtype == "torch.float32" || c.dtype == "torch.int64" || c.dtype == "torch.bool";
  return td::format_tensor<T>(c.sizes, [&](std::int64_t k) { return data.at(static_cast<std::size_t>(k)); }, c.dtype,
                              default_dtype, c.device, c.options);
}

std::string format_case_any(const format_case& c) {
  if (c.dtype == "torch.float32") return format_case_as<float>(c);
  if (c.dtype == "torch.float64" || c.dtype == "torch.bfloat16" || c.dtype == "torch.float16") {
    return format_case_as<double>(c);
  }
  if (c.dtype == "torch.int64") return format_case_as<std::int64_t>(c);
  if (c.dtype == "torch.int32") return format_case_as<std::int32_t>(c);
  if (c.dtype == "torch.int16") return format_case_as<std::int16_t>(c);
  if (c.dtype == "torch.int8") return format_case_as<std::int8_t>(c);
  if (c.dtype == "torch.uint8") return format_case_as<std::uint8_t>(c);
  if (c.dtype == "torch.bool") return format_case_as<bool>(c);
  FAIL("format_cases.txt: no element type for " << c.dtype);
  return {};
}

TEST_CASE("format_tensor prints exactly what PyTorch prints", "[format]") {
  const auto cases = read_format_cases();
  CHECK(cases.size() >= 25);
  for (const auto& c : cases) {
    INFO("case " << c.name << ", dtype " << c.dtype);
    CHECK(format_case_any(c) == c.expected);
  }
}

TEST_CASE("format_tensor takes any floating type convertible to float", "[format]") {
  // a half type that is not arithmetic formats as floating point, as its float value
  for (const auto& c : read_format_cases()) {
    if (c.dtype != "torch.float16" && c.dtype != "torch.bfloat16") continue;
    INFO("case " << c.name);
    std::vector<float> data;
    for (const auto& v : c.values) data.push_back(static_cast<float>(std::strtod(v.c_str(), nullptr)));
    const std::string got = td::format_tensor<mock_half>(
        c.sizes, [&](std::int64_t k) { mock_half h; h.v = data.at(static_cast<std::size_t>(k)); return h; }, c.dtype,
        false, c.device, c.options);
    CHECK(got == c.expected);
  }
}

TEST_CASE("format_tensor reads only the elements it shows", "[format]") {
  const std::vector<std::int64_t> sizes = {1000, 1000};
  std::int64_t calls = 0;
  const std::string s = td::format_tensor<std::int64_t>(
      sizes, [&](std::int64_t k) { ++calls; return k; }, "torch.int64", true, "");
  CHECK(calls <= 2 * 36);
  CHECK(s.find("999999]])") != std::string::npos);
}

}  // namespace
