// detail::fast_divisor (division by a multiply-high, used by the CUDA pointwise rows mode) against
// the division operator: every divisor up to 4096 with dividends at the edges and spread over
// [0, 2^31), powers of two and their neighbours, and divisors near 2^31.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include <tenet/dtype.hpp>  // a public header first (internal headers check for one)
#include <tenet/fast_divisor.hpp>

using tenet::detail::fast_divisor;

namespace {

std::int64_t mismatches(std::uint32_t d) {
  const fast_divisor f(d);
  const std::uint32_t top = (std::uint32_t{1} << 31) - 1;
  std::vector<std::uint32_t> ns = {0, 1, d - 1, d, d + 1, top, top - 1, top - d, top / d * d, top / d * d - 1};
  for (std::uint32_t k = 1; k < 64; ++k) ns.push_back(static_cast<std::uint32_t>((std::uint64_t{top} * k) / 64));
  for (std::uint32_t q = 1; q < 2000; q += 7) {  // multiples of d and their neighbours
    const std::uint64_t n = std::uint64_t{q} * d;
    if (n + 1 <= top) ns.insert(ns.end(), {static_cast<std::uint32_t>(n - 1), static_cast<std::uint32_t>(n),
                                           static_cast<std::uint32_t>(n + 1)});
  }
  std::int64_t bad = 0;
  for (const std::uint32_t n : ns)
    if (n <= top && f.div(n) != n / d) ++bad;
  return bad;
}

}  // namespace

TEST_CASE("fast_divisor: the quotient of the division operator") {
  std::int64_t bad = 0;
  for (std::uint32_t d = 1; d <= 4096; ++d) bad += mismatches(d);
  for (int b = 12; b < 31; ++b)
    for (const std::int64_t delta : {-1, 0, 1}) bad += mismatches(static_cast<std::uint32_t>((std::int64_t{1} << b) + delta));
  for (const std::uint32_t d : {12544u, 3136u, 100003u, 2147483647u, 2147483646u, 1073741825u}) bad += mismatches(d);
  CHECK(bad == 0);
  // every dividend below 2^20 for a few divisors
  for (const std::uint32_t d : {3u, 7u, 12u, 641u}) {
    const fast_divisor f(d);
    std::int64_t wrong = 0;
    for (std::uint32_t n = 0; n < (1u << 20); ++n) wrong += f.div(n) != n / d;
    CHECK(wrong == 0);
  }
}
