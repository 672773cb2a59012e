#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Tensor<T, Shape>: a strided view of shared storage on a device.
//
// - `Tensor<float, shape<2, 3>> t = expr;` evaluates `expr` now (eager) into fresh storage.
// - `t = expr;` rebinds t to the fresh result, as `t = ...` does in Python: alias-safe by construction.
// - `t.copy_(expr)`, `t += expr`, `t.fill_(v)` write into t's storage (through views too); when the
//   expression reads t's storage it is evaluated into a temporary first.
// - Views (reshape, permute, transpose, slice, narrow, select, expand, squeeze, unsqueeze, flatten)
//   share storage and never copy; `contiguous()` copies only when needed.
#include <array>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>

#include <tenet/device.hpp>
#include <tenet/dtype.hpp>
#include <tenet/error.hpp>
#include <tenet/shape.hpp>

#include <tenet/runtime/grad_mode.hpp>
#include <tenet/expr/concepts.hpp>
#include <tenet/expr/node.hpp>
#include <tenet/runtime/storage.hpp>
#include <tenet/shape/rules.hpp>

namespace tenet {

namespace detail {
template <Expression E>
auto evaluate(const E& e);  // backend dispatch; defined in detail/tenet/backend/evaluate.hpp
template <class T, class S, Expression E>
void assign(const Tensor<T, S>& dst, const E& e);  // in-place write through a view

template <std::size_t R>
std::array<std::int64_t, R> contiguous_strides(const std::array<std::int64_t, R>& sizes) {
  std::array<std::int64_t, R> st{};
  std::int64_t s = 1;
  for (std::size_t i = R; i-- > 0;) {
    st[i] = s;
    s *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return st;
}

/// The shape with every extent that a run-time dim argument could move replaced by dyn: S itself
/// when all extents of S are the same, else all dyn.
template <class S>
struct runtime_permuted {
  static constexpr bool uniform = [] {
    for (std::size_t i = 1; i < S::rank; ++i) {
      const auto &a = S::info[0], &b = S::info[i];
      if (a.kind != b.kind || a.value != b.value || a.name != b.name) return false;
    }
    return true;
  }();
  using type = std::conditional_t<uniform, S, dyn_shape<S::rank>>;
};

inline std::int64_t checked_dim(std::int64_t d, std::size_t rank, const char* what) {
  const std::int64_t r = static_cast<std::int64_t>(rank);
  const std::int64_t n = normalize_dim(d, r == 0 ? 1 : r);
  if (n < 0 || (r == 0 && n != 0))
    throw index_error(std::string("tenet: ") + what + ": dim " + std::to_string(d) + " out of range for rank " +
                      std::to_string(rank) + " (expected in [" + std::to_string(-r) + ", " + std::to_string(r) + "))");
  return n;
}

template <class S, std::int64_t D>
constexpr std::size_t static_dim() {
  constexpr std::int64_t n = normalize_dim(D, static_cast<std::int64_t>(S::rank));
  if constexpr (n < 0) {
    (void)sizeof(compile_error::invalid_dim<S, compile_error::dim<D>>);
    return 0;
  } else {
    return static_cast<std::size_t>(n);
  }
}
}  // namespace detail

/// The value of an expression now, as a Tensor of its dtype and shape type (backend/evaluate.hpp).
template <Expression E>
auto eval(const E& e);

template <class T, class S = dyn_shape<1>>
class Tensor {
  static_assert(Element<T>, "tenet: Tensor element type must be one of bool, uint8_t, int8_t, int16_t, int32_t, "
                            "int64_t, float16, bfloat16, float, double");
  static_assert(Shape<S>, "tenet: the second argument of Tensor must be a tenet::shape<...>");
  template <class, class>
  friend class Tensor;

 public:
  static constexpr bool is_expression = true;
  using value_type = T;
  using shape_type = S;
  static constexpr std::size_t rank = S::rank;
  using sizes_type = sizes_t<rank>;

  /// An undefined tensor (no storage), like a default-constructed torch.Tensor(): assign to it.
  Tensor() = default;

  /// Uninitialized contiguous storage of the given sizes (which must fit S).
  explicit Tensor(const sizes_type& sizes, device dev = default_device()) : sizes_(sizes) {
    detail::check_sizes_match<S>(sizes_, "Tensor");
    const std::size_t bytes = detail::checked_nbytes(sizes_, sizeof(T), "Tensor");  // before any product of the sizes
    strides_ = detail::contiguous_strides(sizes_);
    storage_ = detail::allocate(bytes, dev);
  }
  /// Evaluates an expression (eager).
  template <Expression E>
    requires(!TensorType<E>)
  Tensor(const E& e) {  // NOLINT: implicit on purpose, `Tensor t = a + b;`
    *this = e;
  }
  /// Views another tensor of a compatible shape (same storage; run-time extents are checked).
  template <class S2>
    requires(!std::is_same_v<S2, S>)
  Tensor(const Tensor<T, S2>& o)  // NOLINT
      : storage_(o.storage_), offset_(o.offset_), ag_(o.ag_) {
    static_assert(S2::rank == rank, "tenet: cannot view a tensor as a shape of another rank (use reshape)");
    static_assert(detail::shapes_compatible<S, S2>(), "tenet: the static extents of the two shapes differ");
    for (std::size_t i = 0; i < rank; ++i) sizes_[i] = o.sizes_[i], strides_[i] = o.strides_[i];
    if (o.defined()) detail::check_sizes_match<S>(sizes_, "Tensor view");
  }
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(const Tensor&) = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  /// Rebinds to the value of `e`, computed into fresh storage.
  template <Expression E>
    requires(!TensorType<E>)
  Tensor& operator=(const E& e) {
    static_assert(std::is_same_v<value_type_of<E>, T>,
                  "tenet: the expression's dtype differs from the tensor's; convert it with .to<T>() or "
                  "tenet::cast<T>(expr)");
    static_assert(shape_of<E>::rank == rank, "tenet: the expression's rank differs from the tensor's");
    static_assert(detail::shapes_compatible<S, shape_of<E>>(),
                  "tenet: the expression's static shape differs from the tensor's");
    auto r = detail::evaluate(e);
    detail::check_sizes_match<S>(r.sizes(), "assigning an expression");
    *this = Tensor(r);
    return *this;
  }
  template <class S2>
    requires(!std::is_same_v<S2, S>)
  Tensor& operator=(const Tensor<T, S2>& o) {
    return *this = Tensor(o);
  }

  // --- metadata ----------------------------------------------------------------------------
  bool defined() const { return static_cast<bool>(storage_); }
  const sizes_type& sizes() const { return sizes_; }
  const sizes_type& strides() const { return strides_; }
  std::int64_t size(std::int64_t d) const { return sizes_[dim_index(d)]; }
  std::int64_t stride(std::int64_t d) const { return strides_[dim_index(d)]; }
  std::int64_t offset() const { return offset_; }
  static constexpr std::int64_t dim() { return static_cast<std::int64_t>(rank); }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto s : sizes_) n *= s;
    return n;
  }
  static constexpr dtype scalar_type() { return dtype_of<T>; }
  tenet::device device() const { return storage_ ? storage_->dev : default_device(); }
  bool is_contiguous() const {
    std::int64_t expect = 1;
    for (std::size_t i = rank; i-- > 0;) {
      if (sizes_[i] == 1) continue;
      if (sizes_[i] == 0) return true;
      if (strides_[i] != expect) return false;
      expect *= sizes_[i];
    }
    return true;
  }
  T* data() const {
    require_defined("data()");
    return static_cast<T*>(storage_->data) + offset_;
  }
  const std::shared_ptr<detail::storage>& storage() const { return storage_; }
  /// torch's `t._version`: the in-place writes into this tensor's storage so far, through any view
  /// (0 for an undefined tensor). Autograd checks it for the tensors a backward reads.
  std::uint64_t version() const { return storage_ ? storage_->version.load(std::memory_order_relaxed) : 0; }
  /// True when both views read the same allocation.
  template <class T2, class S2>
  bool shares_storage(const Tensor<T2, S2>& o) const {
    return storage_ && storage_ == o.storage_;
  }

  // --- element access (CPU) ------------------------------------------------------------------
  template <std::integral... I>
  T& operator()(I... idx) const {
    static_assert(sizeof...(I) == rank, "tenet: operator() needs one index per dimension");
    require_cpu("element access");
    std::int64_t off = offset_;
    std::size_t d = 0;
    ((off += checked_index(static_cast<std::int64_t>(idx), d) * strides_[d], ++d), ...);
    return static_cast<T*>(storage_->data)[off];
  }
  /// The only element of a one-element tensor.
  T item() const {
    require_cpu("item()");
    if (numel() != 1)
      throw value_error("tenet: item() needs a tensor with one element, this one has " + std::to_string(numel()) +
                        " (sizes " + detail::sizes_text(sizes_) + ")");
    return *data();
  }

  // --- views ---------------------------------------------------------------------------------
  /// reshape<E...>(n...): E may hold -1 (inferred); each dyn or sym extent takes one argument.
  template <auto... E, std::integral... N>
  auto reshape(N... n) const;
  template <auto... E, std::integral... N>
  auto view(N... n) const {
    if (!is_contiguous()) throw value_error("tenet: view() needs a contiguous tensor of sizes " +
                                            detail::sizes_text(sizes_) + "; use reshape() (which may copy)");
    return reshape<E...>(n...);
  }
  template <std::int64_t... P>
  auto permute() const;
  template <std::int64_t D0, std::int64_t D1>
  auto transpose() const;
  auto transpose(std::int64_t d0, std::int64_t d1) const;
  /// Matrix transpose of a rank <= 2 tensor, as torch's t().
  auto t() const {
    static_assert(rank <= 2, "tenet: t() needs rank <= 2; use transpose<d0, d1>()");
    if constexpr (rank < 2)
      return *this;
    else
      return transpose<0, 1>();
  }
  auto mT() const {
    static_assert(rank >= 2, "tenet: mT needs rank >= 2");
    return transpose<-2, -1>();
  }
  /// Elements start, start+step, ... < end of dim D (negative start/end count from the end; clamped).
  template <std::int64_t D>
  auto slice(std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  template <std::int64_t D>
  auto narrow(std::int64_t start, std::int64_t length) const;
  template <std::int64_t D>
  auto select(std::int64_t index) const;
  /// expand<E...>(n...): like torch's expand; -1 keeps an extent; dyn/sym extents take an argument.
  template <auto... E, std::integral... N>
  auto expand(N... n) const;
  template <class S2>
  auto expand_as_shape(const sizes_t<S2::rank>& target) const;
  template <class E>
  auto expand_as(const E& other) const {
    return expand_as_shape<shape_of<E>>(other.sizes());
  }
  template <std::int64_t D>
  auto unsqueeze() const;
  template <std::int64_t D>
  auto squeeze() const;
  auto squeeze() const;
  template <std::int64_t Start = 0, std::int64_t End = -1>
  auto flatten() const;
  /// This tensor when contiguous, else a contiguous copy.
  Tensor contiguous() const;
  Tensor clone() const;
  template <class U>
  auto to() const;
  /// A copy on device d (this tensor itself when it is already there), as torch's t.to(device).
  Tensor to(tenet::device d) const;
  /// A copy in host memory (this tensor itself when it is already there).
  Tensor cpu() const { return to(tenet::cpu); }

  // --- in-place ------------------------------------------------------------------------------
  template <ExprOrScalar E>
  const Tensor& copy_(const E& e) const;
  template <Scalar V>
  const Tensor& fill_(V v) const;
  const Tensor& zero_() const { return fill_(0); }
  template <ExprOrScalar E>
  const Tensor& add_(const E& e) const;
  template <ExprOrScalar E>
  const Tensor& sub_(const E& e) const;
  template <ExprOrScalar E>
  const Tensor& mul_(const E& e) const;
  template <ExprOrScalar E>
  const Tensor& div_(const E& e) const;
  template <ExprOrScalar E>
  const Tensor& operator+=(const E& e) const { return add_(e); }
  template <ExprOrScalar E>
  const Tensor& operator-=(const E& e) const { return sub_(e); }
  template <ExprOrScalar E>
  const Tensor& operator*=(const E& e) const { return mul_(e); }
  template <ExprOrScalar E>
  const Tensor& operator/=(const E& e) const { return div_(e); }

  // --- autograd (detail/tenet/autograd/tensor_members.hpp, docs/autograd.md) ----------------
  /// Copies of a handle are one autograd identity (they share requires_grad, grad and grad_fn).
  /// On a non-floating dtype requires_grad_(true) throws dtype_error.
  Tensor& requires_grad_(bool on = true);
  bool requires_grad() const;
  /// True unless the tensor was computed, with grad mode on, from one that requires grad.
  bool is_leaf() const;
  /// The accumulated gradient; an undefined tensor when there is none.
  Tensor grad() const;
  /// Replaces the gradient (an undefined g clears it); g must have this tensor's sizes.
  void set_grad(const Tensor& g) const;
  /// The same storage without autograd history.
  Tensor detach() const;
  /// Backpropagates from this one-element tensor (seed 1) / with the given seed gradient.
  void backward(bool retain_graph = false) const;
  void backward(const Tensor& seed, bool retain_graph = false) const;
  /// The same with options: `loss.backward({.create_graph = true})` (second order).
  void backward(const backward_options& options) const;
  void backward(const Tensor& seed, const backward_options& options) const;
  /// The autograd identity (null when the tensor takes no part in autograd).
  const std::shared_ptr<detail::ag::meta>& autograd_meta() const { return ag_; }
  void set_autograd_meta(std::shared_ptr<detail::ag::meta> m) { ag_ = std::move(m); }

  // --- internals shared with views and kernels --------------------------------------------
  /// A tensor of shape S2 over this storage (no checks beyond the static ones of S2). A view of a
  /// tracked tensor records a view node (gradients flow back to this tensor).
  template <class S2>
  Tensor<T, S2> with_layout(const sizes_t<S2::rank>& sizes, const sizes_t<S2::rank>& strides,
                            std::int64_t offset) const {
    Tensor<T, S2> r;
    r.storage_ = storage_;
    r.sizes_ = sizes;
    r.strides_ = strides;
    r.offset_ = offset;
    if (ag_) detail::ag::on_view(*this, r);
    return r;
  }
  /// A tensor over the given storage (backends adopting memory they allocated, e.g. pinned host).
  static Tensor from_storage(std::shared_ptr<detail::storage> st, const sizes_type& sizes, const sizes_type& strides,
                             std::int64_t offset) {
    Tensor r;
    r.storage_ = std::move(st);
    r.sizes_ = sizes;
    r.strides_ = strides;
    r.offset_ = offset;
    return r;
  }

 private:
  std::size_t dim_index(std::int64_t d) const {
    return static_cast<std::size_t>(detail::checked_dim(d, rank, "size/stride"));
  }
  std::int64_t checked_index(std::int64_t i, std::size_t d) const {
    const std::int64_t n = sizes_[d];
    if (i < -n || i >= n)
      throw index_error("tenet: index " + std::to_string(i) + " is out of range for dim " + std::to_string(d) +
                        " of size " + std::to_string(n) + " (sizes " + detail::sizes_text(sizes_) + ")");
    return i < 0 ? i + n : i;
  }
  void require_defined(const char* what) const {
    if (!storage_) throw value_error(std::string("tenet: ") + what + " on an undefined tensor (assign to it first)");
  }
  void require_cpu(const char* what) const {
    require_defined(what);
    if (!storage_->dev.is_cpu())
      throw device_error(std::string("tenet: ") + what + " needs a CPU tensor, this one is on " + storage_->dev.str() +
                         "; copy it with .to(tenet::cpu) first");
  }

  std::shared_ptr<detail::storage> storage_;
  sizes_type sizes_{};
  sizes_type strides_{};
  std::int64_t offset_ = 0;
  std::shared_ptr<detail::ag::meta> ag_;
};

}  // namespace tenet
