#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers:
// as easy as 1, 2, 3", SC 2011) and tenet's random stream built on it.
//
// The stream contract (every backend reproduces it from these definitions alone):
//
//   key(seed)      = { lo32(seed), hi32(seed) }
//   block(seed, offset, b) = philox4x32_10({ lo32(offset + b), hi32(offset + b), 0, 0 }, key(seed))
//                    (offset + b wraps modulo 2^64; `offset` counts blocks, not elements)
//
//   A draw of n elements with (seed, offset) reads its words from blocks offset .. offset + B - 1:
//   - one-word kinds (uniform and normal for every type except double, randint with
//     high - low <= 2^32): element k reads word k % 4 of block k / 4, so one Philox call serves 4
//     consecutive elements, and B = ceil(n / 4);
//   - two-word kinds (uniform and normal for double, randint with high - low > 2^32): element k
//     reads words 2 (k % 2) (low half) and 2 (k % 2) + 1 (high half) of block k / 2, and
//     B = ceil(n / 2).
//   Element k depends on (seed, offset, k) only, so any sub-range [begin, end) can be computed on its
//   own (one thread, one GPU) with results identical to the whole draw.
//
//   uniform: u = (w >> (32 - b)) * 2^-b with b = min(digits(T), 24) random bits for one-word kinds
//            (digits from std::numeric_limits<T> where it is specialised, else 24), and
//            u = (w64 >> 11) * 2^-53 for double; value = T(fma(high - low, u, low)), computed in
//            double with one fused multiply-add; a value that rounds up to `high` in T is replaced
//            by `low`, so the result lies in [low, high).
//   normal:  Box-Muller on a pair of elements (2j, 2j + 1) that share two uniforms: u1 in (0, 1]
//            (never log(0)) and u2 in [0, 1); r = sqrt(-2 ln u1), element 2j = r cos(2 pi u2),
//            element 2j + 1 = r sin(2 pi u2); value = T(fma(std, z, mean)), computed in double.
//            One-word kinds: element k takes u1 from word (k % 4) & ~1 and u2 from word (k % 4) | 1
//            (24-bit uniforms); double: block k / 2 gives u1 from words 0, 1 and u2 from words 2, 3.
//   randint: value = low + mulhi(w, high - low): 32 x 32 -> 64-bit multiply-high for one-word kinds,
//            64 x 64 -> 128-bit for two-word kinds (Lemire's reduction without rejection). The bias:
//            every value in [low, high) has probability floor(2^W / range) / 2^W or
//            ceil(2^W / range) / 2^W (W = 32 or 64), so the relative error of any probability is
//            below range / 2^W (below 2.4e-7 for ranges up to 1000 drawn from one word).
//
// Uniform and randint values are bit-identical on every backend (integer arithmetic, exact
// conversions, one explicit fused multiply-add; checked between g++ and nvcc on an H100). Normal
// values use log, sqrt, cos and sin in double and round once to T: float and smaller types came out
// bit-identical between glibc and CUDA in that check; double agrees to a few ulp there, as two
// math libraries may differ in the last bit.
#include <array>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>

#include <cmath>

#include <tenet/error.hpp>  // tenet::value_error
#include <tenet/dtype.hpp>    // is_floating_v (random_fill)

namespace tenet::detail {

// ---------------------------------------------------------------------------------------------
// Philox4x32-10 itself

/// Four 32-bit words: a Philox counter or a Philox output block.
struct uint4x32 {
  std::uint32_t w[4];

  TENET_HOST_DEVICE constexpr std::uint32_t& operator[](int i) { return w[i]; }
  TENET_HOST_DEVICE constexpr std::uint32_t operator[](int i) const { return w[i]; }
  friend constexpr bool operator==(const uint4x32&, const uint4x32&) = default;
};

/// The Philox4x32 key: two 32-bit words.
struct philox_key {
  std::uint32_t k0;
  std::uint32_t k1;
  friend constexpr bool operator==(const philox_key&, const philox_key&) = default;
};

inline constexpr std::uint32_t philox_multiplier0 = 0xD2511F53u;
inline constexpr std::uint32_t philox_multiplier1 = 0xCD9E8D57u;
inline constexpr std::uint32_t philox_weyl0 = 0x9E3779B9u;  // golden ratio
inline constexpr std::uint32_t philox_weyl1 = 0xBB67AE85u;  // sqrt(3) - 1
inline constexpr int philox_rounds = 10;

/// One Philox round: two 32 x 32 -> 64-bit products, their halves mixed with the key.
TENET_HOST_DEVICE constexpr uint4x32 philox_round(uint4x32 c, philox_key key) {
  const std::uint64_t p0 = static_cast<std::uint64_t>(philox_multiplier0) * c[0];
  const std::uint64_t p1 = static_cast<std::uint64_t>(philox_multiplier1) * c[2];
  const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
  const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
  return uint4x32{{hi1 ^ c[1] ^ key.k0, lo1, hi0 ^ c[3] ^ key.k1, lo0}};
}

/// Philox4x32-10: ten rounds, the key advanced by the Weyl constants between rounds.
/// @post matches the Random123 known-answer vectors (tests/test_philox_format.cpp checks three).
TENET_HOST_DEVICE constexpr uint4x32 philox4x32_10(uint4x32 counter, philox_key key) {
  for (int round = 0; round < philox_rounds; ++round) {
    if (round > 0) {
      key.k0 += philox_weyl0;
      key.k1 += philox_weyl1;
    }
    counter = philox_round(counter, key);
  }
  return counter;
}

// ---------------------------------------------------------------------------------------------
// The stream: (seed, offset, block index) -> four words

TENET_HOST_DEVICE constexpr philox_key philox_key_from_seed(std::uint64_t seed) {
  return {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
}

/// Block `block` of the stream (seed, offset): the four words that elements of that block read.
TENET_HOST_DEVICE constexpr uint4x32 philox_block(std::uint64_t seed, std::uint64_t offset,
                                                  std::uint64_t block) {
  const std::uint64_t c = offset + block;
  return philox4x32_10(uint4x32{{static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(c >> 32), 0u, 0u}},
                       philox_key_from_seed(seed));
}

/// Number of blocks a draw of `n` elements reads, for kinds using `words_per_element` (1 or 2)
/// words per element: ceil(n * words / 4).
TENET_HOST_DEVICE constexpr std::uint64_t philox_blocks_for(std::int64_t n, unsigned words_per_element) {
  if (n <= 0) return 0;
  return (static_cast<std::uint64_t>(n) * words_per_element + 3) / 4;
}

// ---------------------------------------------------------------------------------------------
// Words -> numbers

/// [0, 1) from the top 24 bits of a word: (x >> 8) * 2^-24, exact in float.
TENET_HOST_DEVICE constexpr float uniform_float(std::uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

/// [0, 1) from the top 53 bits of a 64-bit word made of (lo, hi): (w >> 11) * 2^-53, exact in double.
TENET_HOST_DEVICE constexpr double uniform_double(std::uint32_t lo, std::uint32_t hi) {
  const std::uint64_t w = (static_cast<std::uint64_t>(hi) << 32) | lo;
  return static_cast<double>(w >> 11) * (1.0 / 9007199254740992.0);
}

/// [0, 1) from the top `bits` (1..32) bits of a word, exact in double.
TENET_HOST_DEVICE constexpr double uniform_bits(std::uint32_t x, int bits) {
  return static_cast<double>(x >> (32 - bits)) / static_cast<double>(std::uint64_t{1} << bits);
}

/// (0, 1] from 24 bits: ((x >> 8) + 1) * 2^-24; used as Box-Muller's u1 so log never sees 0.
TENET_HOST_DEVICE constexpr double uniform_open0_24(std::uint32_t x) {
  return static_cast<double>((x >> 8) + 1u) * (1.0 / 16777216.0);
}

/// (0, 1] from 53 bits of (lo, hi).
TENET_HOST_DEVICE constexpr double uniform_open0_53(std::uint32_t lo, std::uint32_t hi) {
  const std::uint64_t w = (static_cast<std::uint64_t>(hi) << 32) | lo;
  return static_cast<double>((w >> 11) + 1u) * (1.0 / 9007199254740992.0);
}

/// High 64 bits of the 128-bit product a * b, in portable 32-bit pieces (constexpr, host and device).
TENET_HOST_DEVICE constexpr std::uint64_t mulhi64(std::uint64_t a, std::uint64_t b) {
  const std::uint64_t a_lo = static_cast<std::uint32_t>(a), a_hi = a >> 32;
  const std::uint64_t b_lo = static_cast<std::uint32_t>(b), b_hi = b >> 32;
  const std::uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  // At most (2^32 - 1) * 3 + (2^32 - 1)^2 = 2^64 - 1: no overflow.
  const std::uint64_t cross = (lo_lo >> 32) + static_cast<std::uint32_t>(hi_lo) + lo_hi;
  return hi_hi + (hi_lo >> 32) + (cross >> 32);
}

/// An integer in [low, low + range) from one word: low + (x * range) >> 32. Needs 1 <= range <= 2^32.
TENET_HOST_DEVICE constexpr std::int64_t uniform_int(std::uint32_t x, std::int64_t low, std::uint64_t range) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + ((static_cast<std::uint64_t>(x) * range) >> 32));
}

/// An integer in [low, low + range) from two words (lo, hi): low + mulhi64(w, range). Any range >= 1.
TENET_HOST_DEVICE constexpr std::int64_t uniform_int(std::uint32_t lo, std::uint32_t hi, std::int64_t low,
                                                     std::uint64_t range) {
  const std::uint64_t w = (static_cast<std::uint64_t>(hi) << 32) | lo;
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + mulhi64(w, range));
}

// ---------------------------------------------------------------------------------------------
// Element types: anything convertible to double (the arithmetic types, and tenet::bfloat16 /
// tenet::float16, which convert through float).

template <class T>
TENET_HOST_DEVICE constexpr double random_to_double(T v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<double>(v);
  } else {
    return static_cast<double>(static_cast<float>(v));
  }
}

template <class T>
TENET_HOST_DEVICE constexpr T random_from_double(double v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<T>(v);
  } else {
    return T(static_cast<float>(v));
  }
}

template <class T>
TENET_HOST_DEVICE constexpr T random_from_int(std::int64_t v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(v);
  } else {
    return random_from_double<T>(static_cast<double>(v));
  }
}

/// True for the types drawn from two words per element by uniform and normal (53-bit uniforms).
template <class T>
inline constexpr bool random_uses_double = std::is_same_v<std::remove_cv_t<T>, double>;

/// Random bits in a one-word uniform of type T: T's significand digits where numeric_limits knows
/// them (8 for bfloat16, 11 for float16, so every draw is exact in T), at most 24.
template <class T>
TENET_HOST_DEVICE constexpr int uniform_random_bits() {
  if constexpr (std::numeric_limits<T>::is_specialized && !std::numeric_limits<T>::is_integer) {
    constexpr int d = std::numeric_limits<T>::digits;
    return d < 24 ? (d < 1 ? 1 : d) : 24;
  } else {
    return 24;
  }
}

template <class T>
TENET_HOST_DEVICE constexpr unsigned uniform_words_per_element() {
  return random_uses_double<T> ? 2u : 1u;
}
template <class T>
TENET_HOST_DEVICE constexpr unsigned normal_words_per_element() {
  return random_uses_double<T> ? 2u : 1u;
}
/// range = high - low (as unsigned): one word up to 2^32, else two.
TENET_HOST_DEVICE constexpr unsigned randint_words_per_element(std::int64_t low, std::int64_t high) {
  const std::uint64_t range = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  return range <= (std::uint64_t{1} << 32) ? 1u : 2u;
}

// ---------------------------------------------------------------------------------------------
// Element k of a draw, from its block (the range fills below cache the block; a GPU kernel can
// call these directly with philox_block(seed, offset, k / 4) or (k / 2)).

/// Which block element k reads, for kinds with `words_per_element` words.
TENET_HOST_DEVICE constexpr std::uint64_t philox_block_of(std::int64_t k, unsigned words_per_element) {
  return words_per_element == 1 ? static_cast<std::uint64_t>(k) / 4 : static_cast<std::uint64_t>(k) / 2;
}

/// The [0, 1) value of a one-word kind T from its word (rand, dropout's mask): the general
/// path's value without double arithmetic (slow on GPUs): `bits` <= 24 bits times a power of two
/// is exact in float and in T, and fma(1, u, 0) = u < 1.
template <class T>
TENET_HOST_DEVICE T uniform01_from_word(std::uint32_t w) {
  constexpr int bits = uniform_random_bits<T>();
  const float u = static_cast<float>(w >> (32 - bits)) * (1.0f / static_cast<float>(std::uint32_t{1} << bits));
  if constexpr (std::is_arithmetic_v<T>)
    return static_cast<T>(u);
  else
    return T(u);
}

template <class T>
TENET_HOST_DEVICE T uniform_element(const uint4x32& block, std::int64_t k, double low, double high) {
  if constexpr (!random_uses_double<T>) {
    if (low == 0.0 && high == 1.0) return uniform01_from_word<T>(block[static_cast<int>(k & 3)]);
  }
  double u;
  if constexpr (random_uses_double<T>) {
    const int j = 2 * static_cast<int>(k & 1);
    u = uniform_double(block[j], block[j + 1]);
  } else {
    u = uniform_bits(block[static_cast<int>(k & 3)], uniform_random_bits<T>());
  }
  // An explicit fma, so that no compiler's contraction choice changes the value (nvcc contracts
  // a * b + c by default, g++ with -ffp-contract=fast too).
  T v = random_from_double<T>(::fma(high - low, u, low));
  if (low < high && random_to_double(v) >= high) v = random_from_double<T>(low);
  return v;
}

template <class T>
TENET_HOST_DEVICE T normal_element(const uint4x32& block, std::int64_t k, double mean, double std_dev) {
  double u1, u2;
  if constexpr (random_uses_double<T>) {
    u1 = uniform_open0_53(block[0], block[1]);
    u2 = uniform_double(block[2], block[3]);
  } else {
    const int j = static_cast<int>(k & 3) & ~1;
    u1 = uniform_open0_24(block[j]);
    u2 = static_cast<double>(uniform_float(block[j + 1]));
  }
  constexpr double two_pi = 6.283185307179586476925286766559;
  const double r = ::sqrt(-2.0 * ::log(u1));
  const double z = (k & 1) == 0 ? r * ::cos(two_pi * u2) : r * ::sin(two_pi * u2);
  return random_from_double<T>(::fma(std_dev, z, mean));
}

/// Needs low < high.
template <class T>
TENET_HOST_DEVICE constexpr T randint_element(const uint4x32& block, std::int64_t k, std::int64_t low,
                                              std::int64_t high) {
  const std::uint64_t range = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  if (range <= (std::uint64_t{1} << 32)) return random_from_int<T>(uniform_int(block[static_cast<int>(k & 3)], low, range));
  const int j = 2 * static_cast<int>(k & 1);
  return random_from_int<T>(uniform_int(block[j], block[j + 1], low, range));
}

// ---------------------------------------------------------------------------------------------
// Range fills: out[k - begin] = element k of the draw, for k in [begin, end).
// @post for any split begin = b0 < b1 < ... < bm = end, filling each [b_i, b_i+1) on its own gives
//       the same values as filling [begin, end) at once (tested).

namespace philox_impl {
template <class T, class Element>
TENET_HOST_DEVICE constexpr void fill_range(T* out, std::int64_t begin, std::int64_t end, std::uint64_t seed,
                                            std::uint64_t offset, unsigned words_per_element, Element element) {
  std::uint64_t cached = ~std::uint64_t{0};
  uint4x32 block{};
  for (std::int64_t k = begin; k < end; ++k) {
    const std::uint64_t b = philox_block_of(k, words_per_element);
    if (b != cached || k == begin) {
      block = philox_block(seed, offset, b);
      cached = b;
    }
    out[k - begin] = element(block, k);
  }
}
}  // namespace philox_impl

template <class T>
TENET_HOST_DEVICE void fill_uniform_range(T* out, std::int64_t begin, std::int64_t end, std::uint64_t seed,
                                          std::uint64_t offset, double low = 0.0, double high = 1.0) {
  philox_impl::fill_range(out, begin, end, seed, offset, uniform_words_per_element<T>(),
                          [=](const uint4x32& block, std::int64_t k) { return uniform_element<T>(block, k, low, high); });
}

template <class T>
TENET_HOST_DEVICE void fill_normal_range(T* out, std::int64_t begin, std::int64_t end, std::uint64_t seed,
                                         std::uint64_t offset, double mean = 0.0, double std_dev = 1.0) {
  philox_impl::fill_range(out, begin, end, seed, offset, normal_words_per_element<T>(),
                          [=](const uint4x32& block, std::int64_t k) { return normal_element<T>(block, k, mean, std_dev); });
}

/// Needs low < high (fill_randint checks it on the host).
template <class T>
TENET_HOST_DEVICE constexpr void fill_randint_range(T* out, std::int64_t begin, std::int64_t end, std::uint64_t seed,
                                                    std::uint64_t offset, std::int64_t low, std::int64_t high) {
  philox_impl::fill_range(out, begin, end, seed, offset, randint_words_per_element(low, high),
                          [=](const uint4x32& block, std::int64_t k) { return randint_element<T>(block, k, low, high); });
}

/// out[0, n) = elements 0 .. n-1 of a uniform draw on [low, high).
template <class T>
void fill_uniform(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t offset, double low = 0.0,
                  double high = 1.0) {
  if (!(low <= high)) {
    throw value_error("uniform: expects low <= high, but got low=" + std::to_string(low) +
                      " and high=" + std::to_string(high) + "; swap the bounds");
  }
  fill_uniform_range(out, 0, n, seed, offset, low, high);
}

/// out[0, n) = elements 0 .. n-1 of a normal draw with the given mean and standard deviation.
template <class T>
void fill_normal(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t offset, double mean = 0.0,
                 double std_dev = 1.0) {
  if (!(std_dev >= 0.0)) {
    throw value_error("normal: expects std >= 0.0, but got std=" + std::to_string(std_dev));
  }
  fill_normal_range(out, 0, n, seed, offset, mean, std_dev);
}

/// out[0, n) = elements 0 .. n-1 of a draw of integers in [low, high) (high excluded, as torch.randint).
template <class T>
void fill_randint(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t offset, std::int64_t low,
                  std::int64_t high) {
  if (!(low < high)) {
    throw value_error("randint: expects low < high (high is excluded), but got low=" + std::to_string(low) +
                      " and high=" + std::to_string(high) + "; for the single value v use low=v, high=v+1");
  }
  fill_randint_range(out, 0, n, seed, offset, low, high);
}

// ---------------------------------------------------------------------------------------------
// The default generator: a seed and an offset (in blocks), nothing else.

/// Where one draw reads the stream: pass both to the fill functions.
struct philox_draw {
  std::uint64_t seed;
  std::uint64_t offset;
};

class generator {
 public:
  static constexpr std::uint64_t default_seed = 0x2545F4914F6CDD1Dull;

  explicit generator(std::uint64_t seed = default_seed) : seed_(seed) {}

  /// Sets the seed and restarts the stream at offset 0 (as torch.manual_seed).
  void manual_seed(std::uint64_t seed) {
    std::lock_guard<std::mutex> lock(mutex_);
    seed_ = seed;
    offset_ = 0;
  }

  /// Reserves the blocks a draw of `n_elements` needs and returns where the draw starts.
  /// `words_per_element` is 1 or 2 (see *_words_per_element); the default 2 covers every kind.
  /// @post consecutive reservations read disjoint blocks: the offset advances by
  ///       philox_blocks_for(n_elements, words_per_element).
  philox_draw reserve(std::int64_t n_elements, unsigned words_per_element = 2) {
    std::lock_guard<std::mutex> lock(mutex_);
    const philox_draw draw{seed_, offset_};
    offset_ += philox_blocks_for(n_elements, words_per_element);
    return draw;
  }

  /// The current (seed, offset), e.g. to save and later restore the stream.
  philox_draw state() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {seed_, offset_};
  }
  void set_state(philox_draw state) {
    std::lock_guard<std::mutex> lock(mutex_);
    seed_ = state.seed;
    offset_ = state.offset;
  }
  std::uint64_t seed() const { return state().seed; }
  std::uint64_t offset() const { return state().offset; }

 private:
  mutable std::mutex mutex_;
  std::uint64_t seed_;
  std::uint64_t offset_ = 0;
};

/// The process-wide generator that tenet's random ops draw from unless given another.
inline generator& default_generator() {
  static generator g;
  return g;
}

/// One draw of the default generator's stream (above), described so that every
/// backend computes the same values from it: element k depends on (seed, offset, k) only.
struct random_fill {
  enum kind_t { uniform, normal, randint } kind;
  std::uint64_t seed, offset;
  double a = 0.0, b = 1.0;             // uniform: [a, b); normal: mean a, std b
  std::int64_t low = 0, high = 0;      // randint: [low, high)
};
/// out[0, n) = elements 0 .. n-1 of the draw r, on the host. With n = 0 it only checks r's
/// bounds (the value_error of fill_uniform / fill_normal / fill_randint).
template <class T>
void fill_random_on_host(T* out, std::int64_t n, const random_fill& r) {
  if (r.kind == random_fill::uniform) {
    if constexpr (is_floating_v<T>) fill_uniform(out, n, r.seed, r.offset, r.a, r.b);
  } else if (r.kind == random_fill::normal) {
    if constexpr (is_floating_v<T>) fill_normal(out, n, r.seed, r.offset, r.a, r.b);
  } else {
    fill_randint(out, n, r.seed, r.offset, r.low, r.high);
  }
}
}  // namespace tenet::detail
