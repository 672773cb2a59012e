#pragma once
// Reads the reference data that tests/reference/gen_*.py write with PyTorch, and compares tenet
// tensors against it. File format (text, one tensor per line):
//   case <name>
//   tensor <key> <dtype> <ndim> <size0> ... <value0> <value1> ...     (row-major; floats as Python
//                                                                      repr, nan/inf/-inf allowed)
//   end
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <tenet/tenet.hpp>

namespace tenet_test {

struct ref_tensor {
  std::string dtype;
  std::vector<std::int64_t> sizes;
  std::vector<double> values;
  std::int64_t numel() const { return static_cast<std::int64_t>(values.size()); }
};
using ref_case = std::map<std::string, ref_tensor>;
using ref_file = std::map<std::string, ref_case>;

inline double parse_value(const std::string& s) {
  if (s == "nan") return std::nan("");
  if (s == "inf") return INFINITY;
  if (s == "-inf") return -INFINITY;
  if (s == "True") return 1;
  if (s == "False") return 0;
  return std::strtod(s.c_str(), nullptr);
}

/// Loads tests/reference/<name> (cached).
inline const ref_file& load(const std::string& name) {
  static std::map<std::string, ref_file> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  std::ifstream in(std::string(TENET_REFERENCE_DIR) + "/" + name);
  if (!in) throw std::runtime_error("reference file missing: " + name);
  ref_file f;
  std::string line, current;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string word;
    ls >> word;
    if (word == "case") {
      ls >> current;
      f[current];
    } else if (word == "tensor") {
      std::string key;
      ref_tensor t;
      std::size_t ndim = 0;
      ls >> key >> t.dtype >> ndim;
      t.sizes.resize(ndim);
      for (auto& s : t.sizes) ls >> s;
      std::string v;
      while (ls >> v) t.values.push_back(parse_value(v));
      f[current][key] = std::move(t);
    }
  }
  return cache[name] = std::move(f);
}

inline const ref_case& get_case(const std::string& file, const std::string& name) {
  const auto& f = load(file);
  auto it = f.find(name);
  if (it == f.end()) throw std::runtime_error("reference case missing: " + file + ":" + name);
  return it->second;
}

/// A contiguous tensor holding the reference values (S must fit the reference sizes).
template <class T, class S>
tenet::Tensor<T, S> make(const ref_tensor& r) {
  REQUIRE(r.sizes.size() == S::rank);
  tenet::sizes_t<S::rank> s{};
  for (std::size_t i = 0; i < S::rank; ++i) s[i] = r.sizes[i];
  tenet::Tensor<T, S> t(s);
  T* p = t.data();
  for (std::int64_t i = 0; i < r.numel(); ++i) {
    if constexpr (std::is_same_v<T, bool>)
      p[i] = r.values[static_cast<std::size_t>(i)] != 0;
    else
      p[i] = static_cast<T>(r.values[static_cast<std::size_t>(i)]);
  }
  return t;
}

/// Per-dtype tolerances (relative, absolute), as torch.testing.assert_close's defaults.
template <class T>
constexpr std::pair<double, double> default_tolerance() {
  if constexpr (std::is_same_v<T, float>) return {1.3e-6, 1e-5};
  else if constexpr (std::is_same_v<T, double>) return {1e-7, 1e-7};
  else if constexpr (std::is_same_v<T, tenet::bfloat16>) return {1.6e-2, 1e-5};
  else if constexpr (std::is_same_v<T, tenet::float16>) return {1e-3, 1e-5};
  else return {0.0, 0.0};
}

/// Checks sizes and every value (NaN matches NaN; infinities must match exactly).
template <class T, class S>
void check_close(const tenet::Tensor<T, S>& got, const ref_tensor& want, double rtol = default_tolerance<T>().first,
                 double atol = default_tolerance<T>().second) {
  REQUIRE(want.sizes.size() == S::rank);
  for (std::size_t i = 0; i < S::rank; ++i) REQUIRE(got.sizes()[i] == want.sizes[i]);
  const auto c = got.contiguous();
  const T* p = c.numel() ? c.data() : nullptr;
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double g = static_cast<double>(static_cast<tenet::compute_t<T>>(p[i]));
    const double w = want.values[static_cast<std::size_t>(i)];
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::abs(g - w) <= atol + rtol * std::abs(w);
    if (!ok && bad++ < 5) {
      UNSCOPED_INFO("element " << i << ": got " << g << ", want " << w);
    }
  }
  CHECK(bad == 0);
}

/// Runs fn on the 1-D input "x" (dtype T) of case `name` in `file`, checks at compile time that the
/// result dtype is Expect, and checks the values against "out".
template <class T, class Expect, class Fn>
void check_unary(const std::string& file, const std::string& name, Fn fn) {
  INFO("case " << name);
  const auto& c = get_case(file, name);
  const tenet::Tensor<T, tenet::shape<tenet::dyn>> x = make<T, tenet::shape<tenet::dyn>>(c.at("x"));
  auto e = fn(x);
  using R = tenet::value_type_of<decltype(e)>;
  static_assert(std::is_same_v<R, Expect>, "unexpected result dtype");
  const tenet::Tensor<R, tenet::shape<tenet::dyn>> y = e;
  check_close(y, c.at("out"));
}

}  // namespace tenet_test
