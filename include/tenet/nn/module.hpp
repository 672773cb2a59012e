#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// nn::Module: the base of every layer and model, as torch.nn.Module.
//
// A module owns its parameters and buffers as ordinary typed members (`Tensor<float, shape<128, 784>>
// weight;`) and registers them by name in its constructor; submodules are members registered the same
// way. Names are dotted as in PyTorch ("fc1.weight", "0.bias", "bn.running_mean"), so a state_dict
// saved by PyTorch loads by name.
//
//   struct Net : nn::Module {
//     nn::Linear<784, 128> fc1;
//     nn::Linear<128, 10> fc2;
//     Net() { register_module("fc1", fc1); register_module("fc2", fc2); }
//     template <Expression X> auto operator()(const X& x) const { return fc2(relu(fc1(x))); }
//   };
//
// Modules register the addresses of their members, so a Module can be neither copied nor moved
// (return one from a function by value: C++17 elides that copy). A module must outlive the
// optimizers and the references (nn::tensor_ref) taken from it.
//
// Printing (docs/nn.md, "Printing a model"): `std::cout << model` writes torch's print(model) text
// (type_name(), extra_repr() and the children, indented), nn::summary(model) a table of the modules,
// their parameters and the totals.
#include <algorithm>
#include <any>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>
#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#define TENET_NN_HAS_CXXABI 1
#endif

#include <tenet/device.hpp>
#include <tenet/error.hpp>
#include <tenet/tensor.hpp>
#include <tenet/tensor_dict.hpp>
#include <tenet/backend/backends.hpp>  // has_backend

namespace tenet::nn {

class Module;

namespace detail {
class self_registrar;

template <class T, class S>
concept has_autograd = requires(Tensor<T, S>& t, const Tensor<T, S>& g) {
  t.grad();
  t.set_grad(g);
  t.requires_grad_(true);
  t.requires_grad();
};

/// A typed tensor handle behind a common interface (func::tensor_map). Unlike any_tensor it keeps
/// the tensor's type and autograd identity: a module can run on it (func::functional_call) and
/// gradients can be taken with respect to it (func::grad).
class bound_tensor {
 public:
  virtual ~bound_tensor() = default;
  virtual dtype scalar_type() const = 0;
  virtual std::vector<std::int64_t> sizes() const = 0;
  virtual std::string shape_text() const = 0;
  virtual tenet::device device() const = 0;
  virtual bool defined() const = 0;
  virtual bool requires_grad() const = 0;
  /// The values, detached (any_tensor's rules).
  virtual any_tensor value() const = 0;
  /// The same storage without autograd history.
  virtual std::shared_ptr<bound_tensor> detached() const = 0;
  /// A new autograd leaf over the same storage (requires grad).
  virtual std::shared_ptr<bound_tensor> fresh_leaf() const = 0;
  /// A recorded view of the whole tensor: a new identity whose gradients flow on to this one.
  virtual std::shared_ptr<bound_tensor> alias() const = 0;
  /// The autograd identity (null when none).
  virtual const std::shared_ptr<tenet::detail::ag::meta>& identity() const = 0;
  /// Zeros of this tensor's type, sizes and device.
  virtual std::shared_ptr<bound_tensor> zeros() const = 0;
  /// The gradient the engine left for this tensor (a Tensor<T, dyn_shape<R>> in g), or zeros when g is empty.
  virtual std::shared_ptr<bound_tensor> from_gradient(const std::any& g) const = 0;
  /// Row i along dim 0 (a view, its shape type without the first extent); value_error for rank 0.
  virtual std::shared_ptr<bound_tensor> select0(std::int64_t i) const = 0;
  /// This tensor and `rest` (each of this one's type and sizes) stacked along a new dim 0 (shape
  /// type shape<dyn, ...>): func::stack_module_state.
  virtual std::shared_ptr<bound_tensor> stack0(const std::vector<std::shared_ptr<bound_tensor>>& rest,
                                               const std::string& name) const = 0;
  /// The values as one row, a Tensor<T, dyn_shape<1>> in the std::any (a recorded view or copy
  /// where the tensor is tracked): func's Jacobians over a tensor_map read and write entries by it.
  virtual std::any flat() const = 0;
  /// The tensor detached and contiguous as the autograd engine holds a gradient or a tangent (a
  /// Tensor<T, dyn_shape<R>> in the std::any): func::jvp seeds a tensor_map's tangents with it.
  virtual std::any as_gradient() const = 0;
  /// The allocation the tensor reads (null when undefined): func::vmap tells by it which tensor
  /// an in-place write went to.
  virtual const void* storage_id() const = 0;
};

template <class T, class S>
class typed_bound final : public bound_tensor {
 public:
  explicit typed_bound(Tensor<T, S> t) : tensor(std::move(t)) {}
  Tensor<T, S> tensor;
  dtype scalar_type() const override { return dtype_of<T>; }
  std::vector<std::int64_t> sizes() const override { return {tensor.sizes().begin(), tensor.sizes().end()}; }
  std::string shape_text() const override { return S::text(); }
  tenet::device device() const override { return tensor.device(); }
  bool defined() const override { return tensor.defined(); }
  bool requires_grad() const override {
    if constexpr (has_autograd<T, S>) return tensor.defined() && tensor.requires_grad();
    else return false;
  }
  any_tensor value() const override { return any_tensor(tensor); }
  std::shared_ptr<bound_tensor> detached() const override {
    return std::make_shared<typed_bound>(tensor.defined() ? tensor.detach() : tensor);
  }
  std::shared_ptr<bound_tensor> fresh_leaf() const override {
    auto q = tensor.detach();
    if constexpr (has_autograd<T, S>) q.requires_grad_(true);
    return std::make_shared<typed_bound>(std::move(q));
  }
  std::shared_ptr<bound_tensor> alias() const override {
    return std::make_shared<typed_bound>(tensor.template with_layout<S>(tensor.sizes(), tensor.strides(), tensor.offset()));
  }
  const std::shared_ptr<tenet::detail::ag::meta>& identity() const override { return tensor.autograd_meta(); }
  std::shared_ptr<bound_tensor> zeros() const override {
    Tensor<T, S> z(tensor.sizes(), tensor.device());
    z.zero_();
    return std::make_shared<typed_bound>(std::move(z));
  }
  std::shared_ptr<bound_tensor> from_gradient(const std::any& g) const override {
    if (!g.has_value()) return zeros();
    return std::make_shared<typed_bound>(Tensor<T, S>(std::any_cast<const Tensor<T, dyn_shape<S::rank>>&>(g)));
  }
  std::shared_ptr<bound_tensor> select0(std::int64_t) const override {
    throw value_error("tenet: func::vmap maps a tensor_map's tensors stacked by func::stack_module_state (or "
                      "set with tensor_map::set_stacked); this one is a plain " + std::string(tenet::name(dtype_of<T>)) +
                      " " + S::text());
  }
  std::shared_ptr<bound_tensor> stack0(const std::vector<std::shared_ptr<bound_tensor>>& rest,
                                       const std::string& name) const override;
  std::any flat() const override { return std::any(Tensor<T, dyn_shape<1>>(tensor.contiguous().template reshape<-1>())); }
  std::any as_gradient() const override { return std::any(Tensor<T, dyn_shape<S::rank>>(tensor.detach().contiguous())); }
  const void* storage_id() const override { return tensor.defined() ? tensor.storage().get() : nullptr; }
};

/// One module tensor of type Tensor<T, S> from each of several models, stacked along a new dim 0
/// (func::stack_module_state): sample i is model i's tensor, a typed_bound<T, S> a module of that
/// type can be rebound to (func::vmap). Held as the models' tensors (detached handles, no copy),
/// not as one Tensor<T, shape<dyn, ...>>, so a stacked entry is mapped (vmap) or read (value(): a
/// CPU copy), not differentiated as one tensor.
template <class T, class S>
class stacked_bound final : public bound_tensor {
 public:
  explicit stacked_bound(std::vector<Tensor<T, S>> p) : parts(std::move(p)) {}
  std::vector<Tensor<T, S>> parts;
  dtype scalar_type() const override { return dtype_of<T>; }
  std::vector<std::int64_t> sizes() const override {
    std::vector<std::int64_t> r{static_cast<std::int64_t>(parts.size())};
    if (!parts.empty()) r.insert(r.end(), parts[0].sizes().begin(), parts[0].sizes().end());
    return r;
  }
  std::string shape_text() const override { return "stacked " + std::to_string(parts.size()) + " x " + S::text(); }
  tenet::device device() const override { return parts.empty() ? tenet::device(tenet::cpu) : parts[0].device(); }
  bool defined() const override { return !parts.empty(); }
  bool requires_grad() const override { return false; }
  /// The stacked values as one contiguous CPU any_tensor.
  any_tensor value() const override {
    any_tensor out = any_tensor::zeros(dtype_of<T>, sizes());
    if (parts.empty()) return out;
    const std::size_t bytes = static_cast<std::size_t>(parts[0].numel()) * sizeof(T);
    auto* dst = static_cast<unsigned char*>(const_cast<void*>(out.raw_data()));  // our own fresh zeros
    for (std::size_t k = 0; k < parts.size(); ++k) any_tensor(parts[k]).copy_to_host(dst + k * bytes);
    return out;
  }
  std::shared_ptr<bound_tensor> detached() const override { return std::make_shared<stacked_bound>(parts); }
  static value_error refused() {
    return value_error("tenet: a stacked tensor_map entry (func::stack_module_state) is mapped by func::vmap, not "
                       "differentiated: take gradients with respect to each model's tensors");
  }
  std::shared_ptr<bound_tensor> fresh_leaf() const override { throw refused(); }
  std::shared_ptr<bound_tensor> alias() const override { throw refused(); }
  const std::shared_ptr<tenet::detail::ag::meta>& identity() const override {
    static const std::shared_ptr<tenet::detail::ag::meta> none;
    return none;
  }
  std::shared_ptr<bound_tensor> zeros() const override { throw refused(); }
  std::shared_ptr<bound_tensor> from_gradient(const std::any&) const override { throw refused(); }
  std::shared_ptr<bound_tensor> select0(std::int64_t i) const override {
    if (i < 0 || i >= static_cast<std::int64_t>(parts.size()))
      throw index_error("tenet: stacked tensor_map entry: sample " + std::to_string(i) + " of " +
                        std::to_string(parts.size()));
    return std::make_shared<typed_bound<T, S>>(parts[static_cast<std::size_t>(i)]);
  }
  std::shared_ptr<bound_tensor> stack0(const std::vector<std::shared_ptr<bound_tensor>>&,
                                       const std::string& name) const override {
    throw value_error("tenet: stack_module_state: \"" + name + "\" is already stacked");
  }
  std::any flat() const override { throw refused(); }
  std::any as_gradient() const override { throw refused(); }
  const void* storage_id() const override { return nullptr; }  // vmap reads its samples' (typed_bound)
};

template <class T, class S>
std::shared_ptr<bound_tensor> typed_bound<T, S>::stack0(const std::vector<std::shared_ptr<bound_tensor>>& rest,
                                                        const std::string& name) const {
  std::vector<Tensor<T, S>> parts{tensor.detach()};
  for (const auto& r : rest) {
    const auto* p = dynamic_cast<const typed_bound*>(r.get());
    if (!p)
      throw dtype_error("tenet: stack_module_state: \"" + name + "\" is " + std::string(tenet::name(dtype_of<T>)) + " " +
                        S::text() + " in the first module, " + tenet::name(r->scalar_type()) + " " + r->shape_text() +
                        " in another");
    if (p->tensor.sizes() != tensor.sizes())
      throw shape_error("tenet: stack_module_state: \"" + name + "\" has sizes " +
                        tenet::detail::sizes_text(tensor.sizes()) + " in the first module, " +
                        tenet::detail::sizes_text(p->tensor.sizes()) + " in another");
    if (p->tensor.device() != tensor.device())
      throw device_error("tenet: stack_module_state: \"" + name + "\" is on " + tensor.device().str() +
                         " in the first module, on " + p->tensor.device().str() + " in another");
    parts.push_back(p->tensor.detach());
  }
  return std::make_shared<stacked_bound<T, S>>(std::move(parts));
}

/// One registered tensor member, type-erased.
class tensor_slot {
 public:
  virtual ~tensor_slot() = default;
  virtual dtype scalar_type() const = 0;
  virtual std::vector<std::int64_t> sizes() const = 0;
  virtual std::string shape_text() const = 0;
  virtual any_tensor value() const = 0;
  /// Copies the values of `v` in; `name` only labels the error.
  virtual void load(const any_tensor& v, const std::string& name) = 0;
  virtual any_tensor grad() const = 0;
  virtual void set_grad(const any_tensor& g) = 0;
  virtual void requires_grad_(bool on) = 0;
  virtual bool requires_grad() const = 0;
  virtual tenet::device device() const = 0;
  virtual const void* address() const = 0;
  virtual bool is_contiguous() const = 0;
  /// Rebinds the tensor to its copy on d (requires_grad kept, .grad dropped); nothing when it is there.
  virtual void move_to(tenet::device d) = 0;
  /// The tensor handle itself (same storage and autograd identity).
  virtual std::shared_ptr<bound_tensor> bound() const = 0;
  /// Rebinds the member to b's tensor handle (no copy; b's identity); `name` labels the error when
  /// b's dtype or shape type is not the member's.
  virtual void rebind(const bound_tensor& b, const std::string& name) = 0;
  /// The same member of `owner` (a module moved from this slot's one); null for a tensor
  /// registered by reference, which does not move with its module.
  virtual std::shared_ptr<tensor_slot> relocated(const Module& owner) const = 0;
  /// Rebinds the member to a fresh handle on v's storage (no copy, no autograd history), or to an
  /// undefined tensor when v is undefined (the member then holds no memory): FullyShardedDataParallel
  /// materializes and frees a wrapped module's parameters with it. dtype_error / shape_error
  /// (any_tensor::as) when v's dtype or sizes are not the member's.
  virtual void reset_to(const any_tensor& v) = 0;
};

template <class T, class S>
class typed_slot final : public tensor_slot {
 public:
  /// A tensor registered by reference: a fixed address (its module cannot be moved).
  explicit typed_slot(Tensor<T, S>& t) : fixed_(&t) {}
  /// A member of `owner`, found through `at` (a moved module finds its own).
  typed_slot(const Module& owner, std::function<Tensor<T, S>&(const Module&)> at) : owner_(&owner), at_(std::move(at)) {}
  dtype scalar_type() const override { return dtype_of<T>; }
  std::vector<std::int64_t> sizes() const override { return {t().sizes().begin(), t().sizes().end()}; }
  std::string shape_text() const override { return S::text(); }
  any_tensor value() const override { return any_tensor(t()); }
  void load(const any_tensor& v, const std::string& name) override {
    if (!v.defined()) throw value_error("tenet: load_state_dict: the tensor for \"" + name + "\" is undefined");
    if (v.scalar_type() != dtype_of<T>)
      throw dtype_error("tenet: load_state_dict: \"" + name + "\" has dtype " + tenet::name(v.scalar_type()) +
                        " in the state_dict, but the module's tensor is " + tenet::name(dtype_of<T>));
    const auto want = sizes();
    if (v.sizes() != want)
      throw shape_error("tenet: load_state_dict: size mismatch for \"" + name + "\": copying a tensor of sizes " +
                        tenet::detail::sizes_text(v.sizes()) + " from the state_dict, the module's tensor has sizes " +
                        tenet::detail::sizes_text(want));
    if (!t().defined() || !t().is_contiguous() || !t().device().is_cpu()) {
      const bool rg = requires_grad();
      const tenet::device d = t().defined() ? t().device() : tenet::device(tenet::cpu);
      t() = v.clone().template as<T, S>().to(d);
      if (rg) requires_grad_(true);
      return;
    }
    tenet::detail::bump_version(t().storage().get());  // written in place, as torch's copy_
    v.copy_to_host(static_cast<void*>(t().data()));  // v may be a device's (a CUDA model's state_dict)
  }
  any_tensor grad() const override {
    if constexpr (has_autograd<T, S>) return any_tensor(t().grad());
    else return {};
  }
  void set_grad(const any_tensor& g) override {
    if constexpr (has_autograd<T, S>) {
      if (!g.defined()) t().set_grad(Tensor<T, S>());
      else t().set_grad(g.template as<T, S>());
    } else {
      throw value_error("tenet: set_grad needs autograd (tenet's Tensor has no grad in this build)");
    }
  }
  void requires_grad_(bool on) override {
    if constexpr (has_autograd<T, S>) t().requires_grad_(on);
    else (void)on;
  }
  bool requires_grad() const override {
    if constexpr (has_autograd<T, S>) return t().requires_grad();
    else return false;
  }
  tenet::device device() const override { return t().device(); }
  const void* address() const override { return &t(); }
  bool is_contiguous() const override { return t().defined() && t().is_contiguous(); }
  void move_to(tenet::device d) override {
    if (!t().defined() || t().device() == d) return;
    const bool rg = requires_grad();
    t() = t().detach().to(d);
    if (rg) requires_grad_(true);
  }
  std::shared_ptr<bound_tensor> bound() const override { return std::make_shared<typed_bound<T, S>>(t()); }
  void rebind(const bound_tensor& b, const std::string& name) override {
    const auto* p = dynamic_cast<const typed_bound<T, S>*>(&b);
    if (!p)
      throw dtype_error("tenet: functional_call: \"" + name + "\" is " + tenet::name(b.scalar_type()) + " " +
                        b.shape_text() + ", the module's tensor is " + tenet::name(dtype_of<T>) + " " + S::text());
    if (p->tensor.defined() && p->tensor.sizes() != t().sizes())
      throw shape_error("tenet: functional_call: \"" + name + "\" has sizes " +
                        tenet::detail::sizes_text(p->tensor.sizes()) + ", the module's tensor " +
                        tenet::detail::sizes_text(t().sizes()));
    t() = p->tensor;
  }
  Tensor<T, S>& tensor() const { return t(); }
  void reset_to(const any_tensor& v) override { t() = v.defined() ? v.template as<T, S>() : Tensor<T, S>(); }

 std::shared_ptr<tensor_slot> relocated(const Module& owner) const override {
    if (!at_) return nullptr;
    return std::make_shared<typed_slot>(owner, at_);
  }

 private:
  Tensor<T, S>& t() const { return at_ ? at_(*owner_) : *fixed_; }
  Tensor<T, S>* fixed_ = nullptr;
  const Module* owner_ = nullptr;
  std::function<Tensor<T, S>&(const Module&)> at_;
};
// --- printing helpers (torch's repr texts) ---------------------------------------------------
/// Python's repr of a float: the shortest digits that read back; fixed notation for exponents -4..15
/// ("0.0001", "20.0", with ".0" on an integral value), else scientific with a sign and at least two
/// exponent digits ("1e-05", "1e+16"); "inf", "-inf", "nan".
inline std::string py_float(double x) {
  if (x != x) return "nan";
  if (x > 1.7976931348623157e308) return "inf";
  if (x < -1.7976931348623157e308) return "-inf";
  char buf[48];
  const auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  const std::string s(buf, r.ptr);  // [-]d[.ddd]e(+|-)dd
  const bool neg = s[0] == '-';
  const std::size_t e = s.find('e');
  std::string digits;
  for (std::size_t i = neg ? 1 : 0; i < e; ++i)
    if (s[i] != '.') digits += s[i];
  int exp = 0;
  for (std::size_t i = e + 2; i < s.size(); ++i) exp = exp * 10 + (s[i] - '0');
  if (s[e + 1] == '-') exp = -exp;
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int a = exp < 0 ? -exp : exp;
    out += std::string(exp < 0 ? "e-" : "e+") + (a < 10 ? "0" : "") + std::to_string(a);
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
  } else {
    const auto whole = static_cast<std::size_t>(exp) + 1;
    if (digits.size() <= whole) out = digits + std::string(whole - digits.size(), '0') + ".0";
    else out = digits.substr(0, whole) + "." + digits.substr(whole);
  }
  return neg ? "-" + out : out;
}
inline std::string py_bool(bool b) { return b ? "True" : "False"; }
/// A Python tuple of integers: "(3,)", "(3, 5)".
inline std::string py_tuple(const std::int64_t* v, std::size_t n) {
  std::string s = "(";
  for (std::size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (n == 1 ? ",)" : ")");
}
/// A list of sizes as torch prints one: "[128, 784]", "[]".
inline std::string py_list(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}
/// torch's _addindent: every line after the first indented by n spaces.
inline std::string add_indent(const std::string& s, std::size_t n) {
  std::string out;
  for (char c : s) {
    out += c;
    if (c == '\n') out.append(n, ' ');
  }
  return out;
}
/// The class name of a type_info, readable: demangled (GCC, Clang), without its namespaces or
/// enclosing scopes and without template arguments ("tenet::nn::Linear<4, 2, true, float>" ->
/// "Linear", "(anonymous namespace)::MLP" -> "MLP").
inline std::string readable_type_name(const std::type_info& ti) {
  std::string full = ti.name();
#ifdef TENET_NN_HAS_CXXABI
  int status = 0;
  char* d = abi::__cxa_demangle(ti.name(), nullptr, nullptr, &status);
  if (status == 0 && d) full = d;
  std::free(d);
#else
  for (const char* p : {"class ", "struct "})
    if (full.rfind(p, 0) == 0) full.erase(0, std::strlen(p));
#endif
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i < full.size(); ++i) {
    const char c = full[i];
    if (c == '<' || c == '(' || c == '[' || c == '{') ++depth;
    else if (c == '>' || c == ')' || c == ']' || c == '}') --depth;
    else if (depth == 0 && c == ':' && i + 1 < full.size() && full[i + 1] == ':') start = ++i + 1;
  }
  std::string name = full.substr(start);
  if (const auto lt = name.find('<'); lt != std::string::npos && lt > 0) name.resize(lt);
  return name.empty() ? std::string("Module") : name;
}
}  // namespace detail

/// A reference to a registered parameter or buffer (valid while its module lives).
class tensor_ref {
 public:
  tensor_ref() = default;
  explicit tensor_ref(std::shared_ptr<detail::tensor_slot> s) : slot_(std::move(s)) {}
  dtype scalar_type() const { return slot_->scalar_type(); }
  std::vector<std::int64_t> sizes() const { return slot_->sizes(); }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto s : sizes()) n *= s;
    return n;
  }
  /// The current values (shares the tensor's storage).
  any_tensor value() const { return slot_->value(); }
  /// The gradient (undefined when none).
  any_tensor grad() const { return slot_->grad(); }
  void set_grad(const any_tensor& g) const { slot_->set_grad(g); }
  void requires_grad_(bool on = true) const { slot_->requires_grad_(on); }
  bool requires_grad() const { return slot_->requires_grad(); }
  tenet::device device() const { return slot_->device(); }
  /// True when the tensor is defined and contiguous (value() then shares its storage).
  bool is_contiguous() const { return slot_->is_contiguous(); }
  /// The typed tensor; dtype_error when T, S are not its type.
  template <class T, class S>
  Tensor<T, S>& get() const {
    auto* p = dynamic_cast<detail::typed_slot<T, S>*>(slot_.get());
    if (!p)
      throw dtype_error(std::string("tenet: tensor_ref::get: the tensor is ") + name(scalar_type()) + " " +
                        slot_->shape_text() + ", not " + name(dtype_of<T>) + " " + S::text());
    return p->tensor();
  }
  /// True when both refer to the same tensor object.
  bool same(const tensor_ref& o) const { return slot_->address() == o.slot_->address(); }
  detail::tensor_slot& slot() const { return *slot_; }

 private:
  std::shared_ptr<detail::tensor_slot> slot_;
};

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  /// Moves a module: the new one's registry names the same members of itself (parameters, buffers
  /// and submodules registered through TENET_MODULE or member pointers), its tensors are the moved
  /// ones (same storage, requires_grad kept) and the training flag is copied. Optimizers and
  /// tensor_refs taken from the old module stay with the old one: take them after the move.
  /// A module that registered something by reference (`register_parameter("w", w)`) cannot know
  /// where that object is after a move: moving it throws value_error naming the entry.
  Module(Module&& o) : training_(o.training_) { adopt(o); }
  Module& operator=(Module&& o) {
    if (this != &o) {
      o.check_movable();
      params_.clear();
      buffers_.clear();
      children_.clear();
      training_ = o.training_;
      adopt(o);
    }
    return *this;
  }
  virtual ~Module() = default;

  // --- parameters, buffers, submodules --------------------------------------------------------
  /// Every parameter with its dotted name, this module's first, then each submodule's in
  /// registration order (as torch's named_parameters; a tensor shared by two modules once).
  std::vector<std::pair<std::string, tensor_ref>> named_parameters(bool recurse = true) const {
    std::vector<std::pair<std::string, tensor_ref>> out;
    collect(out, "", recurse, &Module::params_, false);
    return out;
  }
  std::vector<tensor_ref> parameters(bool recurse = true) const {
    std::vector<tensor_ref> out;
    for (auto& [n, r] : named_parameters(recurse)) out.push_back(r);
    return out;
  }
  /// Every buffer (persistent or not) with its dotted name.
  std::vector<std::pair<std::string, tensor_ref>> named_buffers(bool recurse = true) const {
    std::vector<std::pair<std::string, tensor_ref>> out;
    collect(out, "", recurse, &Module::buffers_, false);
    return out;
  }
  std::vector<tensor_ref> buffers(bool recurse = true) const {
    std::vector<tensor_ref> out;
    for (auto& [n, r] : named_buffers(recurse)) out.push_back(r);
    return out;
  }
  std::vector<std::pair<std::string, Module*>> named_children() const {
    std::vector<std::pair<std::string, Module*>> out;
    out.reserve(children_.size());
    for (const auto& c : children_) out.emplace_back(c.name, c.at ? &c.at(*this) : c.fixed);
    return out;
  }
  /// This module (named "") and every descendant with its dotted name.
  std::vector<std::pair<std::string, const Module*>> named_modules() const {
    std::vector<std::pair<std::string, const Module*>> out{{"", this}};
    for (const auto& [n, m] : named_children())
      for (auto& [sub, mm] : m->named_modules()) out.emplace_back(sub.empty() ? n : n + "." + sub, mm);
    return out;
  }
  /// The number of parameter elements.
  std::int64_t num_parameters() const {
    std::int64_t n = 0;
    for (auto& p : parameters()) n += p.numel();
    return n;
  }

  // --- printing (torch's print(model)) --------------------------------------------------------
  /// The name printed for this module (torch's class name). Default: the dynamic type's class name,
  /// demangled, without namespaces and template arguments (`struct MLP : nn::Module` prints "MLP").
  /// tenet's modules return torch's names ("LayerNorm" for LayerNormT<...>, "BatchNorm2d", ...).
  virtual std::string type_name() const { return detail::readable_type_name(typeid(*this)); }
  /// The text inside the parentheses before the children (torch's extra_repr): the module's
  /// options, in torch's words ("in_features=4, out_features=2, bias=True"); empty by default.
  virtual std::string extra_repr() const { return {}; }
  /// torch's repr(module): `type_name()(extra_repr)` on one line when the module has no children,
  /// else the extra_repr's lines and one line per child, "(name): " and the child's repr, indented
  /// by two spaces, and ")" on a line of its own. `std::cout << m` writes it.
  virtual std::string repr() const {
    std::vector<std::string> lines;
    const std::string extra = extra_repr();
    if (!extra.empty()) {  // Python's extra.split('\n')
      std::size_t b = 0;
      for (std::size_t e; (e = extra.find('\n', b)) != std::string::npos; b = e + 1)
        lines.push_back(extra.substr(b, e - b));
      lines.push_back(extra.substr(b));
    }
    const std::size_t n_extra = lines.size();
    for (const auto& [n, m] : named_children()) lines.push_back(detail::add_indent("(" + n + "): " + m->repr(), 2));
    std::string s = type_name() + "(";
    if (n_extra == 1 && children_.empty()) {
      s += lines[0];
    } else if (!lines.empty()) {
      for (const auto& l : lines) s += "\n  " + l;
      s += "\n";
    }
    return s + ")";
  }

  // --- modes ----------------------------------------------------------------------------------
  Module& train(bool on = true) {
    training_ = on;
    for (auto& [n, m] : named_children()) m->train(on);
    return *this;
  }
  Module& eval() { return train(false); }
  bool training() const { return training_; }
  /// Sets requires_grad on every parameter.
  Module& requires_grad_(bool on = true) {
    for (auto& p : parameters()) p.requires_grad_(on);
    return *this;
  }
  /// Clears (set_to_none, the default as in torch 2) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true) {
    for (auto& p : parameters()) {
      auto g = p.grad();
      if (!g.defined()) continue;
      if (set_to_none) {
        p.set_grad(any_tensor());
      } else {
        auto z = any_tensor::zeros(g.scalar_type(), g.sizes());
        p.set_grad(z);
      }
    }
  }
  /// Moves every parameter and buffer to `d` (each tensor rebound to its copy there; requires_grad
  /// kept, gradients dropped). A CPU build holds CPU tensors only: `to(cpu)` keeps them, another
  /// device throws device_error (no backend for it compiled in); CUDA needs an nvcc-compiled caller.
  Module& to(tenet::device d) {
    if (!tenet::detail::has_backend(d)) tenet::detail::require_backend(d, "Module::to");
    for (auto& [n, r] : named_parameters()) {
      if (r.device() == d) continue;
      try {
        r.slot().move_to(d);
      } catch (const device_error& e) {
        throw device_error("tenet: Module::to(" + d.str() + "): parameter \"" + n + "\" is on " + r.device().str() +
                           ": " + e.what());
      }
    }
    for (auto& [n, r] : named_buffers())
      if (r.device() != d) r.slot().move_to(d);
    return *this;
  }

  // --- state ----------------------------------------------------------------------------------
  /// Parameters and persistent buffers by dotted name (the values share the module's storage).
  tensor_dict state_dict() const {
    tensor_dict d;
    std::vector<std::pair<std::string, tensor_ref>> all;
    collect(all, "", true, nullptr, true);
    for (auto& [n, r] : all) d.insert(n, r.value());
    return d;
  }
  /// Copies the tensors of `d` into the parameters and persistent buffers of the same names.
  /// strict: every key of the module must be in d and d must hold no other key (value_error listing
  /// the missing and unexpected keys). Every matched tensor must have the module tensor's dtype and
  /// sizes (dtype_error / shape_error naming the key); nothing is copied when any check fails.
  /// Returns the missing and unexpected keys (both empty when strict).
  std::pair<std::vector<std::string>, std::vector<std::string>> load_state_dict(const tensor_dict& d,
                                                                                bool strict = true) {
    auto result = check_state_dict(d, strict);
    std::vector<std::pair<std::string, tensor_ref>> all;
    collect(all, "", true, nullptr, true);
    for (auto& [n, r] : all)
      if (const any_tensor* v = d.find(n)) r.slot().load(*v, n);
    return result;
  }
  /// The checks of load_state_dict(d, strict) (the same errors) and its result, copying nothing.
  std::pair<std::vector<std::string>, std::vector<std::string>> check_state_dict(const tensor_dict& d,
                                                                                 bool strict = true) const {
    std::vector<std::pair<std::string, tensor_ref>> all;
    collect(all, "", true, nullptr, true);
    std::vector<std::string> missing, unexpected;
    for (auto& [n, r] : all)
      if (!d.contains(n)) missing.push_back(n);
    for (auto& [n, v] : d) {
      bool found = false;
      for (auto& [m, r] : all) found = found || m == n;
      if (!found) unexpected.push_back(n);
    }
    if (strict && (!missing.empty() || !unexpected.empty())) {
      std::string msg = "tenet: error(s) in loading state_dict:";
      if (!missing.empty()) msg += " missing key(s): " + join(missing) + ".";
      if (!unexpected.empty()) msg += " unexpected key(s): " + join(unexpected) + ".";
      throw value_error(msg);
    }
    // check everything first: a failed load leaves the module as it was
    for (auto& [n, r] : all) {
      const any_tensor* v = d.find(n);
      if (!v) continue;
      if (!v->defined()) throw value_error("tenet: load_state_dict: the tensor for \"" + n + "\" is undefined");
      if (v->scalar_type() != r.scalar_type())
        throw dtype_error("tenet: load_state_dict: \"" + n + "\" has dtype " + name(v->scalar_type()) +
                          " in the state_dict, but the module's tensor is " + name(r.scalar_type()));
      if (v->sizes() != r.sizes())
        throw shape_error("tenet: load_state_dict: size mismatch for \"" + n + "\": copying a tensor of sizes " +
                          tenet::detail::sizes_text(v->sizes()) + " from the state_dict, the module's tensor has "
                          "sizes " + tenet::detail::sizes_text(r.sizes()));
    }
    return {missing, unexpected};
  }

 protected:
  // Registration. Each takes the object either as a member pointer (`&Net::fc1`: the module
  // stays movable, a moved module finds its own member) or by reference (a fixed address: any
  // object, but a module holding one cannot be moved). TENET_MODULE(fc1, fc2, w) declares member
  // pointers for its fields, after they are declared, without a constructor.

  /// Registers a parameter; a floating one is marked requires_grad (torch's nn.Parameter).
  template <class T, class S>
  void register_parameter(const std::string& name, Tensor<T, S>& t) {
    add_parameter(name, std::make_shared<detail::typed_slot<T, S>>(t), t);
  }
  template <class C, class T, class S>
  void register_parameter(const std::string& name, Tensor<T, S> C::*member) {
    add_parameter(name, member_slot(member), member_of(member));
  }
  /// A buffer (running statistics, counters): in the state_dict when persistent, never a parameter.
  template <class T, class S>
  void register_buffer(const std::string& name, Tensor<T, S>& t, bool persistent = true) {
    check_name(name);
    buffers_.push_back({name, tensor_ref(std::make_shared<detail::typed_slot<T, S>>(t)), persistent});
  }
  template <class C, class T, class S>
  void register_buffer(const std::string& name, Tensor<T, S> C::*member, bool persistent = true) {
    check_name(name);
    buffers_.push_back({name, tensor_ref(member_slot(member)), persistent});
  }
  void register_module(const std::string& name, Module& m) {
    check_name(name);
    if (&m == this) throw value_error("tenet: register_module: a module cannot be its own child");
    children_.push_back({name, &m, nullptr});
  }
  template <class C, class M>
    requires std::is_base_of_v<Module, M>
  void register_module(const std::string& name, M C::*member) {
    register_module_at(name, [member](const Module& self) -> Module& { return owner_of<C>(self).*member; });
  }
  /// Forgets every registered parameter, buffer and submodule (a container whose elements were
  /// moved away).
  void clear_registry() {
    params_.clear();
    buffers_.clear();
    children_.clear();
  }
  /// A submodule found from this module by `at` (containers: an element of a member container whose
  /// elements keep their address when the container moves, or a tuple element).
  void register_module_at(const std::string& name, std::function<Module&(const Module&)> at) {
    check_name(name);
    if (&at(*this) == this) throw value_error("tenet: register_module: a module cannot be its own child");
    children_.push_back({name, nullptr, std::move(at)});
  }

 private:
  friend class detail::self_registrar;
  template <class C>
  static C& owner_of(const Module& self) {
    static_assert(std::is_base_of_v<Module, C>, "tenet: a registered member pointer must point into an nn::Module");
    return const_cast<C&>(static_cast<const C&>(self));
  }
  template <class C, class X>
  X& member_of(X C::*member) {
    return owner_of<C>(*this).*member;
  }
  template <class C, class T, class S>
  std::shared_ptr<detail::tensor_slot> member_slot(Tensor<T, S> C::*member) const {
    return std::make_shared<detail::typed_slot<T, S>>(
        *this, [member](const Module& self) -> Tensor<T, S>& { return owner_of<C>(self).*member; });
  }
  template <class T, class S>
  void add_parameter(const std::string& name, std::shared_ptr<detail::tensor_slot> slot, Tensor<T, S>& t) {
    check_name(name);
    params_.push_back({name, tensor_ref(std::move(slot))});
    // a parameter requires grad, as torch's nn.Parameter; not in a program without autograd
    // (TENET_AUTOGRAD=0), where the modules still run their forward
    if constexpr (detail::has_autograd<T, S> && TENET_AUTOGRAD != 0)
      if constexpr (is_floating_v<T>) t.requires_grad_(true);
  }
  /// Throws value_error when an entry was registered by reference (it cannot follow a move).
  void check_movable() const {
    auto refuse = [&](const char* what, const std::string& name) {
      throw value_error("tenet: nn::Module: cannot move this " + type_name() + ": its " + what + " \"" + name +
                        "\" was registered by reference, an address that does not move with the module; "
                        "register members with TENET_MODULE(...) or a member pointer (&" + type_name() +
                        "::" + name + ") to make the module movable");
    };
    for (const auto& e : params_)
      if (!e.ref.slot().relocated(*this)) refuse("parameter", e.name);
    for (const auto& e : buffers_)
      if (!e.ref.slot().relocated(*this)) refuse("buffer", e.name);
    for (const auto& c : children_)
      if (!c.at) refuse("submodule", c.name);
  }
  /// This module's registry becomes o's, relocated onto this module.
  void adopt(const Module& o) {
    o.check_movable();
    for (const auto& e : o.params_) params_.push_back({e.name, tensor_ref(e.ref.slot().relocated(*this)), e.persistent});
    for (const auto& e : o.buffers_) buffers_.push_back({e.name, tensor_ref(e.ref.slot().relocated(*this)), e.persistent});
    children_ = o.children_;
  }

 private:
  struct entry {
    std::string name;
    tensor_ref ref;
    bool persistent = true;
  };
  void check_name(const std::string& name) const {
    if (name.empty() || name.find('.') != std::string::npos)
      throw value_error("tenet: a parameter, buffer or module name must be non-empty and hold no '.', got \"" +
                        name + "\"");
    for (const auto& e : params_)
      if (e.name == name) throw value_error("tenet: the name \"" + name + "\" is already registered");
    for (const auto& e : buffers_)
      if (e.name == name) throw value_error("tenet: the name \"" + name + "\" is already registered");
    for (const auto& c : children_)
      if (c.name == name) throw value_error("tenet: the name \"" + name + "\" is already registered");
  }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "\"" : ", \"") + x + "\"";
    return s;
  }
  /// which == nullptr: parameters, then persistent buffers (the state_dict's order per module).
  void collect(std::vector<std::pair<std::string, tensor_ref>>& out, const std::string& prefix, bool recurse,
               std::vector<entry> Module::*which, bool state_only) const {
    auto seen = [&](const tensor_ref& r) {
      for (auto& [n, o] : out)
        if (o.same(r)) return true;
      return false;
    };
    auto add = [&](const std::vector<entry>& list, bool persistent_only) {
      for (const auto& e : list)
        if ((!persistent_only || e.persistent) && (state_only || !seen(e.ref))) out.emplace_back(prefix + e.name, e.ref);
    };
    if (which) {
      add(this->*which, false);
    } else {
      add(params_, false);
      add(buffers_, true);
    }
    if (recurse)
      for (const auto& [n, m] : named_children()) m->collect(out, prefix + n + ".", true, which, state_only);
  }

  struct child {
    std::string name;
    Module* fixed = nullptr;                           // registered by reference
    std::function<Module&(const Module&)> at;          // or found from the module
  };
  std::vector<entry> params_, buffers_;
  std::vector<child> children_;
  bool training_ = true;
};

namespace detail {
/// The member TENET_MODULE declares: registers the fields it names when its module is constructed
/// (it is initialized after them) and does nothing when its module is moved (Module's move
/// relocates the registry).
class self_registrar {
 public:
  template <class Self, class... P>
  self_registrar(Self* self, const char* names, std::tuple<P...> members, bool buffers) {
    static_assert(std::is_base_of_v<Module, Self>, "tenet: TENET_MODULE is used inside a class derived from nn::Module");
    const std::vector<std::string> n = split(names);
    Module& m = *self;
    std::size_t i = 0;
    std::apply([&](auto... mp) { (add(m, n[i++], mp, buffers, self), ...); }, members);
  }
  self_registrar(const self_registrar&) noexcept {}
  self_registrar& operator=(const self_registrar&) noexcept { return *this; }

 private:
  static std::vector<std::string> split(const char* names) {
    std::vector<std::string> out;
    std::string cur;
    for (const char* p = names;; ++p) {
      if (*p == ',' || *p == 0) {
        out.push_back(cur);
        cur.clear();
        if (*p == 0) break;
      } else if (*p != ' ' && *p != '\t' && *p != '\n') {
        cur += *p;
      }
    }
    return out;
  }
  /// The field must be constructed before it is registered (a parameter is marked requires_grad).
  template <class Self, class X>
  void check_order(const Self* self, const X& field, const std::string& name) const {
    if (static_cast<const void*>(&field) > static_cast<const void*>(this))
      throw value_error("tenet: TENET_MODULE(...) in " + static_cast<const Module*>(self)->type_name() +
                        " names \"" + name + "\", which is declared after it: put TENET_MODULE after the members it names");
  }
  template <class Self, class C, class T, class S>
  void add(Module& m, const std::string& name, Tensor<T, S> C::*mp, bool buffer, Self* self) {
    check_order(self, self->*mp, name);
    if (buffer) m.register_buffer(name, mp);
    else m.register_parameter(name, mp);
  }
  template <class Self, class C, class X>
  void add(Module& m, const std::string& name, X C::*mp, bool buffer, Self* self) {
    static_assert(std::is_base_of_v<Module, X>,
                  "tenet: TENET_MODULE / TENET_MODULE_BUFFERS name Tensor and nn::Module members only");
    if (buffer) throw value_error("tenet: TENET_MODULE_BUFFERS names tensors; \"" + name + "\" is a module");
    check_order(self, self->*mp, name);
    m.register_module(name, mp);
  }
};
}  // namespace detail

// TENET_MODULE(a, b, ...): registers the named members of the enclosing module, declared above
// it: each nn::Module member as a submodule, each Tensor member as a parameter, in this order and
// under these names. TENET_MODULE_BUFFERS(...) registers Tensor members as (persistent) buffers.
// Both declare a data member, so they take a semicolon and may each appear once per class; the
// module stays movable (members are registered as member pointers).
//
//   struct Net : nn::Module {
//     nn::Linear<784, 128> fc1;
//     nn::Linear<128, 10> fc2;
//     TENET_MODULE(fc1, fc2);
//     template <Expression X> auto operator()(const X& x) const { return fc2(relu(fc1(x))); }
//   };
#define TENET_NN_PARENS_ ()
#define TENET_NN_EXPAND_(...) TENET_NN_EXPAND3_(TENET_NN_EXPAND3_(TENET_NN_EXPAND3_(TENET_NN_EXPAND3_(__VA_ARGS__))))
#define TENET_NN_EXPAND3_(...) TENET_NN_EXPAND2_(TENET_NN_EXPAND2_(TENET_NN_EXPAND2_(TENET_NN_EXPAND2_(__VA_ARGS__))))
#define TENET_NN_EXPAND2_(...) TENET_NN_EXPAND1_(TENET_NN_EXPAND1_(TENET_NN_EXPAND1_(TENET_NN_EXPAND1_(__VA_ARGS__))))
#define TENET_NN_EXPAND1_(...) __VA_ARGS__
#define TENET_NN_MEMBER_PTRS_(...) __VA_OPT__(TENET_NN_EXPAND_(TENET_NN_MEMBER_PTRS_STEP_(__VA_ARGS__)))
#define TENET_NN_MEMBER_PTRS_STEP_(field, ...) \
  &TenetSelf_::field __VA_OPT__(, TENET_NN_MEMBER_PTRS_AGAIN_ TENET_NN_PARENS_(__VA_ARGS__))
#define TENET_NN_MEMBER_PTRS_AGAIN_() TENET_NN_MEMBER_PTRS_STEP_
#define TENET_NN_REGISTRAR_(member, buffers, ...)                                                    \
  ::tenet::nn::detail::self_registrar member {                                                     \
    this, #__VA_ARGS__,                                                                              \
        []<class TenetSelf_>(TenetSelf_*) { return ::std::tuple{TENET_NN_MEMBER_PTRS_(__VA_ARGS__)}; }(this), \
        buffers                                                                                      \
  }
#define TENET_MODULE(...) TENET_NN_REGISTRAR_(tenet_module_fields_, false, __VA_ARGS__)
#define TENET_MODULE_BUFFERS(...) TENET_NN_REGISTRAR_(tenet_module_buffers_, true, __VA_ARGS__)

/// torch's print(model): `std::cout << model` writes model.repr().
inline std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr(); }

namespace detail {
/// 101770 -> "101,770"
inline std::string thousands(std::int64_t n) {
  std::string d = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return n < 0 ? "-" + out : out;
}
}  // namespace detail

/// A table of the model, as torchinfo.summary without an input (no forward runs): one row per
/// module of named_modules() (the root "(root)"), with its type_name(), its own parameters
/// ("weight [128, 784], bias [128]") and their element count ("--" when it has none); then the
/// totals over named_parameters() / named_buffers() (a shared tensor once): total parameters,
/// trainable ones (requires_grad), non-trainable, buffer elements, and the size of parameters and
/// buffers in MB (10^6 bytes, each tensor's numel times its dtype's itemsize).
inline std::string summary(const Module& model) {
  struct row {
    std::string cell[4];
  };
  std::vector<row> rows{{{"Module", "Type", "Parameters", "Param #"}}};
  for (const auto& [name, m] : model.named_modules()) {
    std::string shapes;
    std::int64_t count = 0;
    const auto own = m->named_parameters(false);
    for (const auto& [pn, p] : own) {
      shapes += (shapes.empty() ? "" : ", ") + pn + " " + detail::py_list(p.sizes());
      count += p.numel();
    }
    rows.push_back({{name.empty() ? "(root)" : name, m->type_name(), own.empty() ? "--" : shapes,
                     own.empty() ? "--" : detail::thousands(count)}});
  }
  std::size_t w[4] = {0, 0, 0, 0};
  for (const auto& r : rows)
    for (int c = 0; c < 4; ++c) w[c] = std::max(w[c], r.cell[c].size());
  const std::size_t width = w[0] + w[1] + w[2] + w[3] + 6;
  const std::string rule(width, '=');
  std::string out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    for (int c = 0; c < 3; ++c) out += r.cell[c] + std::string(w[c] - r.cell[c].size() + 2, ' ');
    out += std::string(w[3] - r.cell[3].size(), ' ') + r.cell[3] + "\n";
    if (i == 0) out += rule + "\n";
  }
  std::int64_t total = 0, trainable = 0, buffer_elems = 0;
  double bytes = 0;
  for (const auto& [n, p] : model.named_parameters()) {
    total += p.numel();
    if (p.requires_grad()) trainable += p.numel();
    bytes += static_cast<double>(p.numel()) * static_cast<double>(itemsize(p.scalar_type()));
  }
  for (const auto& [n, b] : model.named_buffers()) {
    buffer_elems += b.numel();
    bytes += static_cast<double>(b.numel()) * static_cast<double>(itemsize(b.scalar_type()));
  }
  char mb[64];
  const auto r = std::to_chars(mb, mb + sizeof mb, bytes / 1e6, std::chars_format::fixed, 2);
  out += rule + "\n";
  out += "Total params: " + detail::thousands(total) + "\n";
  out += "Trainable params: " + detail::thousands(trainable) + "\n";
  out += "Non-trainable params: " + detail::thousands(total - trainable) + "\n";
  out += "Buffer elements: " + detail::thousands(buffer_elems) + "\n";
  out += "Params + buffers size (MB): " + std::string(mb, r.ptr) + "\n";
  out += rule + "\n";
  return out;
}

}  // namespace tenet::nn
