#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// any_tensor: a contiguous tensor whose dtype and rank are known at run time only (the values of a
// state_dict, of a safetensors file). tensor_dict: an ordered name -> any_tensor map (PyTorch's
// OrderedDict of a state_dict).
//
//   tenet::any_tensor a(weight);                       // shares weight's storage (copies when strided)
//   auto w = a.as<float, tenet::shape<128, 784>>();    // typed view; dtype_error / shape_error on mismatch
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <tenet/dtype.hpp>
#include <tenet/error.hpp>
#include <tenet/shape.hpp>
#include <tenet/tensor.hpp>

#include <tenet/api/tensor_eval.hpp>  // contiguous()

namespace tenet {

namespace detail {
inline std::string sizes_text(const std::vector<std::int64_t>& s) { return sizes_text(s.data(), s.size()); }
}  // namespace detail

class any_tensor {
  template <class T>
  using flat_t = Tensor<T, shape<dyn>>;
  using holder = std::variant<std::monostate, flat_t<bool>, flat_t<std::uint8_t>, flat_t<std::int8_t>,
                              flat_t<std::int16_t>, flat_t<std::int32_t>, flat_t<std::int64_t>, flat_t<float16>,
                              flat_t<bfloat16>, flat_t<float>, flat_t<double>>;

 public:
  /// Undefined (no dtype, no storage).
  any_tensor() = default;
  /// The values of t: shares t's storage when t is contiguous (bool values are copied), else a
  /// contiguous copy. Detached: an any_tensor takes no part in autograd.
  template <class T, class S>
  explicit any_tensor(const Tensor<T, S>& t) {
    if (!t.defined()) return;
    auto c = t.detach().contiguous();
    sizes_.assign(c.sizes().begin(), c.sizes().end());
    if constexpr (std::is_same_v<T, bool>) {
      flat_ = bool_copy<shape<dyn>>(c.data(), c.device(), {c.numel()});
    } else {
      flat_ = c.template with_layout<shape<dyn>>({c.numel()}, {1}, c.offset());
    }
  }
  /// Fresh zero-filled storage of the given dtype and sizes.
  static any_tensor zeros(dtype d, std::vector<std::int64_t> sizes) {
    for (auto s : sizes)
      if (s < 0) throw shape_error("tenet: any_tensor: negative size in " + detail::sizes_text(sizes));
    // checked: a product that overflows int64, or bytes beyond 2^63 - 1, are a shape_error
    (void)detail::checked_nbytes(sizes.data(), sizes.size(), itemsize(d), "any_tensor::zeros");
    const std::int64_t n = detail::checked_numel(sizes.data(), sizes.size(), "any_tensor::zeros");
    any_tensor r;
    r.sizes_ = std::move(sizes);
    visit_dtype(d, [&]<class T>() {
      flat_t<T> f({n});
      f.zero_();
      r.flat_ = f;
    });
    return r;
  }

  bool defined() const { return flat_.index() != 0; }
  dtype scalar_type() const {
    require_defined("scalar_type()");
    return all_dtypes[flat_.index() - 1];
  }
  const std::vector<std::int64_t>& sizes() const { return sizes_; }
  std::int64_t dim() const { return static_cast<std::int64_t>(sizes_.size()); }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto s : sizes_) n *= s;
    return n;
  }
  std::size_t nbytes() const { return defined() ? static_cast<std::size_t>(numel()) * itemsize(scalar_type()) : 0; }
  /// Where the values are (the CPU for an undefined any_tensor).
  tenet::device device() const {
    return std::visit([](const auto& f) -> tenet::device {
      if constexpr (std::is_same_v<std::decay_t<decltype(f)>, std::monostate>) return tenet::cpu;
      else return f.device();
    }, flat_);
  }
  /// The first byte of the (contiguous, little-endian host order) values. device_error when they
  /// are in a device's memory (a host pointer into it would crash): copy_to_host reads those.
  const void* raw_data() const {
    require_defined("raw_data()");
    if (const tenet::device d = device(); !d.is_cpu())
      throw device_error("tenet: any_tensor::raw_data() of values on " + d.str() +
                         "; read them with copy_to_host, or move the tensor to the CPU first");
    return std::visit([](const auto& f) -> const void* {
      if constexpr (std::is_same_v<std::decay_t<decltype(f)>, std::monostate>) return nullptr;
      else return f.numel() ? static_cast<const void*>(f.data()) : nullptr;
    }, flat_);
  }
  void* raw_data_mut() const { return const_cast<void*>(raw_data()); }
  /// Copies the nbytes() bytes of the values into host memory at dst, from whichever device holds them.
  void copy_to_host(void* dst) const {
    require_defined("copy_to_host()");
    if (const std::size_t n = nbytes()) {
      const void* src = std::visit([](const auto& f) -> const void* {
        if constexpr (std::is_same_v<std::decay_t<decltype(f)>, std::monostate>) return nullptr;
        else return f.data();
      }, flat_);
      detail::copy_bytes(dst, tenet::cpu, src, device(), n);
    }
  }

  /// The values as a 1-D tensor of T (shares storage); dtype_error when the dtype is not T's.
  template <class T>
  flat_t<T> flat() const {
    require_defined("flat()");
    if (scalar_type() != dtype_of<T>)
      throw dtype_error(std::string("tenet: any_tensor holds ") + name(scalar_type()) + ", not " + name(dtype_of<T>));
    return std::get<flat_t<T>>(flat_);
  }
  /// The values as a Tensor<T, S> (shares storage; bool values are copied); dtype_error /
  /// shape_error on a mismatch.
  template <class T, class S>
  Tensor<T, S> as() const {
    auto f = flat<T>();
    if (sizes_.size() != S::rank)
      throw shape_error("tenet: any_tensor of sizes " + detail::sizes_text(sizes_) + " cannot be viewed as " +
                        S::text() + " (rank " + std::to_string(S::rank) + ")");
    sizes_t<S::rank> s{};
    for (std::size_t i = 0; i < S::rank; ++i) s[i] = sizes_[i];
    detail::check_sizes_match<S>(s, "any_tensor::as");
    if constexpr (std::is_same_v<T, bool>) return bool_copy<S>(f.data(), f.device(), s);
    else return f.template with_layout<S>(s, detail::contiguous_strides(s), f.offset());
  }
  /// A deep copy.
  any_tensor clone() const {
    if (!defined()) return {};
    any_tensor r;
    r.sizes_ = sizes_;
    std::visit([&](const auto& f) {
      if constexpr (!std::is_same_v<std::decay_t<decltype(f)>, std::monostate>) r.flat_ = f.clone();
    }, flat_);
    return r;
  }

  /// A copy on device d (this any_tensor itself when it is already there, or undefined).
  any_tensor to(tenet::device d) const {
    if (!defined() || device() == d) return *this;
    any_tensor r;
    r.sizes_ = sizes_;
    std::visit([&](const auto& f) {
      using F = std::decay_t<decltype(f)>;
      if constexpr (!std::is_same_v<F, std::monostate>) {
        F out({f.numel()}, d);
        if (f.numel()) detail::copy_bytes(static_cast<void*>(out.data()), d, f.data(), f.device(), nbytes());
        r.flat_ = out;
      }
    }, flat_);
    return r;
  }

  /// Calls f.template operator()<T>() with the C++ type of dtype d.
  template <class F>
  static void visit_dtype(dtype d, F&& f) {
    switch (d) {
      case dtype::bool_: return f.template operator()<bool>();
      case dtype::uint8: return f.template operator()<std::uint8_t>();
      case dtype::int8: return f.template operator()<std::int8_t>();
      case dtype::int16: return f.template operator()<std::int16_t>();
      case dtype::int32: return f.template operator()<std::int32_t>();
      case dtype::int64: return f.template operator()<std::int64_t>();
      case dtype::float16: return f.template operator()<float16>();
      case dtype::bfloat16: return f.template operator()<bfloat16>();
      case dtype::float32: return f.template operator()<float>();
      case dtype::float64: return f.template operator()<double>();
    }
    throw dtype_error("tenet: invalid dtype value " + std::to_string(static_cast<int>(d)));
  }
  /// visit_dtype for the four floating dtypes; false, and f not called, for any other.
  template <class F>
  static bool visit_floating_dtype(dtype d, F&& f) {
    if (!is_floating(d)) return false;
    visit_dtype(d, [&]<class T>() {
      if constexpr (is_floating_v<T>) f.template operator()<T>();
    });
    return true;
  }

 private:
  /// A fresh bool tensor on device d holding n values from p (in d's memory). (bool values are
  /// copied rather than viewed: no view of a bool tensor is instantiated here, so that nothing
  /// depends on the view machinery's support of bool.)
  template <class S>
  static Tensor<bool, S> bool_copy(const bool* p, tenet::device d, const sizes_t<S::rank>& sizes) {
    Tensor<bool, S> r(sizes, d);
    if (r.numel()) detail::copy_bytes(static_cast<void*>(r.data()), d, p, d, static_cast<std::size_t>(r.numel()));
    return r;
  }
  void require_defined(const char* what) const {
    if (!defined()) throw value_error(std::string("tenet: any_tensor::") + what + " on an undefined any_tensor");
  }
  holder flat_;
  std::vector<std::int64_t> sizes_;
};

/// Names to tensors, in insertion order (a state_dict). Names are unique. Look-ups go through a
/// hash index (a file of a million tensors loads in linear time, issue 27).
class tensor_dict {
 public:
  using item = std::pair<std::string, any_tensor>;
  /// Adds name -> t; value_error when the name is already there.
  void insert(std::string name, any_tensor t) {
    if (contains(name)) throw value_error("tenet: tensor_dict: the name \"" + name + "\" is already present");
    index_.emplace(name, items_.size());
    items_.emplace_back(std::move(name), std::move(t));
  }
  /// Adds or replaces.
  void set(const std::string& name, any_tensor t) {
    if (auto it = index_.find(name); it != index_.end()) {
      items_[it->second].second = std::move(t);
      return;
    }
    index_.emplace(name, items_.size());
    items_.emplace_back(name, std::move(t));
  }
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  const any_tensor* find(const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  /// The tensor named `name`; index_error when absent.
  const any_tensor& at(const std::string& name) const {
    if (auto* p = find(name)) return *p;
    throw index_error("tenet: tensor_dict: no tensor named \"" + name + "\"");
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    for (const auto& [n, v] : items_) k.push_back(n);
    return k;
  }
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<item> items_;
  std::unordered_map<std::string, std::size_t> index_;  // name -> its place in items_
};

}  // namespace tenet

// ---------------------------------------------------------------------------------------------
// The scalar fields of a state_dict that is not a module's (an LR scheduler's, a DataLoader's, a
// training_state's counters): how they are written as tensors, and a reader that checks each
// field's presence and type and names the key in its value_error.
//   integers: int64 scalars; reals: float64 scalars; flags: bool scalars; strings: uint8 tensors
//   of their bytes (safetensors has no string dtype).
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
