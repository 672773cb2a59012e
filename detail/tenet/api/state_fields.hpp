#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The scalar fields of a state_dict that is not a module's (an LR scheduler's, a DataLoader's, a
// training_state's counters): how they are written as tensors, and a reader that checks each
// field's presence and type and names the key in its value_error.
//   integers: int64 scalars; reals: float64 scalars; flags: bool scalars; strings: uint8 tensors
//   of their bytes (safetensors has no string dtype).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <tenet/error.hpp>
#include <tenet/tensor_dict.hpp>

namespace tenet::detail {

inline any_tensor int_field(std::int64_t v) {
  any_tensor t = any_tensor::zeros(dtype::int64, {});
  *static_cast<std::int64_t*>(t.raw_data_mut()) = v;
  return t;
}
inline any_tensor real_field(double v) {
  any_tensor t = any_tensor::zeros(dtype::float64, {});
  *static_cast<double*>(t.raw_data_mut()) = v;
  return t;
}
inline any_tensor flag_field(bool v) {
  any_tensor t = any_tensor::zeros(dtype::bool_, {});
  *static_cast<bool*>(t.raw_data_mut()) = v;
  return t;
}
inline any_tensor text_field(const std::string& s) {
  any_tensor t = any_tensor::zeros(dtype::uint8, {static_cast<std::int64_t>(s.size())});
  if (!s.empty()) std::memcpy(t.raw_data_mut(), s.data(), s.size());
  return t;
}

/// Reads the fields of one state_dict. Every getter throws value_error "<who>: ..." naming the key
/// when it is missing or of the wrong type; finish() throws when the dict holds a key no getter
/// asked for. A reader changes nothing: callers read every field first, then apply them.
class state_reader {
 public:
  state_reader(const tensor_dict& d, std::string who) : d_(d), who_(std::move(who)) {}

  [[noreturn]] void fail(const std::string& why) const { throw value_error("tenet: " + who_ + ": " + why); }
  bool has(const std::string& key) const { return d_.contains(key); }

  /// An int64 scalar (or a float64 one holding an integer).
  std::int64_t integer(const std::string& key) {
    const any_tensor& t = get(key);
    if (t.numel() == 1 && t.scalar_type() == dtype::int64) return read<std::int64_t>(t);
    if (t.numel() == 1 && t.scalar_type() == dtype::float64) {
      const double v = read<double>(t);
      if (v >= -9.2e18 && v <= 9.2e18 && v == static_cast<double>(static_cast<std::int64_t>(v)))
        return static_cast<std::int64_t>(v);
    }
    fail("\"" + key + "\" must be an integer (an int64 scalar), got " + what(t));
  }
  /// A float64 (or float32) scalar.
  double real(const std::string& key) {
    const any_tensor& t = get(key);
    if (t.numel() == 1 && t.scalar_type() == dtype::float64) return read<double>(t);
    if (t.numel() == 1 && t.scalar_type() == dtype::float32) return static_cast<double>(read<float>(t));
    fail("\"" + key + "\" must be a float64 scalar, got " + what(t));
  }
  /// A bool scalar.
  bool flag(const std::string& key) {
    const any_tensor& t = get(key);
    if (t.numel() == 1 && t.scalar_type() == dtype::bool_) return read<bool>(t);
    fail("\"" + key + "\" must be a bool scalar, got " + what(t));
  }
  /// A string (a 1-D uint8 tensor of its bytes).
  std::string text(const std::string& key) {
    const any_tensor& t = get(key);
    if (t.dim() != 1 || t.scalar_type() != dtype::uint8)
      fail("\"" + key + "\" must be a string (a 1-D uint8 tensor of its bytes), got " + what(t));
    std::string s(static_cast<std::size_t>(t.numel()), '\0');
    t.copy_to_host(s.data());
    return s;
  }
  /// value_error naming the first key of the dict that no getter read.
  void finish() const {
    for (const auto& [key, t] : d_) {
      bool used = false;
      for (const auto& u : used_) used = used || u == key;
      if (!used) fail("unexpected key \"" + key + "\"");
    }
  }

 private:
  const any_tensor& get(const std::string& key) {
    const any_tensor* t = d_.find(key);
    if (!t) fail("missing key \"" + key + "\"");
    if (!t->defined()) fail("\"" + key + "\" is undefined");
    used_.push_back(key);
    return *t;
  }
  template <class T>
  static T read(const any_tensor& t) {
    T v{};
    t.copy_to_host(&v);
    return v;
  }
  static std::string what(const any_tensor& t) {
    return std::string(tenet::name(t.scalar_type())) + " of sizes " + sizes_text(t.sizes());
  }
  const tensor_dict& d_;
  std::string who_;
  std::vector<std::string> used_;
};

}  // namespace tenet::detail
