#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// tenet::func (docs/func.md): torch.func's function transforms over tenet's eager autograd.
//
//   func::grad(f)(x)                         df/dx for a scalar f          (torch.func.grad)
//   func::grad(f, func::argnums<0, 2>)(x, y, z)   a tuple of gradients
//   func::grad_and_value(f)(x)               (df/dx, f(x))
//   func::vjp(f, x, w)                       (f(x, w), vjp_fn): vjp_fn(ct) -> (ct J_x, ct J_w)
//   func::jvp(f, {x}, {t})                   (f(x), J t)                    (forward mode)
//   func::linearize(f, x)                    (f(x), jvp_fn): jvp_fn(t) -> J t, f recorded once
//   func::jacrev(f)(x), func::jacfwd(f)(x)   the Jacobian, shape f(x).shape + x.shape
//   func::hessian(f)(x)                      jacfwd(jacrev(f))
//
// The transforms compose (grad(grad(f)), jacfwd(jacrev(f)), jvp(grad(f)), grad(jvp(...)), vjp of
// any of them) in a program built with -DTENET_AUTOGRAD=2, which records a backward so that it can
// be differentiated again. How: a transform differentiates with respect to fresh identities of
// its arguments. Where an argument already requires grad and grad mode is on (an enclosing
// transform, or ordinary autograd, is differentiating through this call), the fresh identity is a
// recorded view of it instead, and the transform's own gradients are computed with create_graph:
// the enclosing level then differentiates through them. Each level's gradients stop at its own
// identities, so an inner level never mistakes an outer variable for its own (perturbation
// confusion): grad(x -> grad(y -> x * y)(x))(x) is 1, not 2.
//
//   func::functional_call(model, params, x)  model(x) with the parameters in `params` (tensor_map)
//   func::grad(loss)(func::parameters(model), x)   gradients as a tensor_map
//   func::jacrev(f)(params), jacfwd, vjp, jvp  over a tensor_map: per-name results (a Jacobian's
//                                            blocks are read with get<T, S>, S = f(x) ++ tensor)
//   func::hessian(f, func::argnums<0, 1>)(x, w)   ((H00, H01), (H10, H11))
//
//   func::vmap(f[, in_dims<...>[, out_dims<O>]])(xs...)   f per sample, results stacked; an
//                                            in-place write into a tensor it does not map is an error
//
//   func::stack_module_state(models)       parameters and buffers stacked, for vmap (ensembling)
//
//   func::vmap(f, ..., func::batching)(xs...)   f once on batched values, each op applying its
//                                            batching rule (include/tenet/func/batching.hpp);
//                                            vmap(grad(f), ..., batching): per-sample gradients
//                                            from one batched backward pass
//   func::jacrev(f, ..., func::batching), jacfwd(...), hessian(...)   the whole Jacobian / Hessian
//                                            in one batched pass over copies of the arguments
//                                            (f's ops need batching rules)
//
// Not here yet (issue 33): batching rules as the prims' batch slot and for every op (those
// without one run per sample: vmap without func::batching); without func::batching, jacrev and
// jacfwd compute their rows / columns one by one.
#include <algorithm>
#include <cstddef>
#include <any>
#include <array>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include <tenet/autograd.hpp>
#include <tenet/error.hpp>
#include <tenet/join.hpp>
#include <tenet/nn/module.hpp>
#include <tenet/runtime/philox.hpp>
#include <tenet/tensor.hpp>
#include <tenet/func/batching.hpp>

namespace tenet::func {

/// The positions of the arguments a transform differentiates: func::grad(f, func::argnums<0, 2>).
template <std::size_t... I>
struct argnums_t {
  static_assert(sizeof...(I) > 0, "tenet: func::argnums<...> needs at least one argument index");
};
template <std::size_t... I>
inline constexpr argnums_t<I...> argnums{};

/// f returns (output, aux): the transform differentiates the output and hands aux back as it is.
struct has_aux_t {};
inline constexpr has_aux_t has_aux{};

namespace detail {
/// One entry of a Jacobian over a tensor_map argument (jacrev / jacfwd): the block of f(x) with
/// respect to one named tensor, of sizes f(x).sizes ++ the tensor's. Its shape type is f's
/// output's followed by the tensor's, which only the caller names (tensor_map erases the second),
/// so the values are held flat and tensor_map::get<T, S> views them as Tensor<T, S> (checked).
template <class T>
class jacobian_block final : public nn::detail::bound_tensor {
 public:
  jacobian_block(Tensor<T, dyn_shape<1>> v, std::vector<std::int64_t> s, std::string text)
      : values(std::move(v)), sizes_(std::move(s)), text_(std::move(text)) {}
  Tensor<T, dyn_shape<1>> values;  // contiguous, row-major over sizes_

  /// The block as Tensor<T, S> (a view; recorded where the values are): dtype_error when S does
  /// not have the block's rank or one of S's static extents differs from the block's size.
  template <class S>
  Tensor<T, S> as(const std::string& name) const {
    bool fits = S::rank == sizes_.size();
    for (std::size_t d = 0; fits && d < S::rank; ++d)
      fits = S::static_extent(d) < 0 || S::static_extent(d) == sizes_[d];
    if (!fits)
      throw dtype_error("tenet: func::tensor_map::get: \"" + name + "\" is a Jacobian block of sizes " +
                        tenet::detail::sizes_text(sizes_.data(), sizes_.size()) + " (" + text_ + "), not " + S::text());
    typename Tensor<T, S>::sizes_type s{};
    for (std::size_t d = 0; d < S::rank; ++d) s[d] = sizes_[d];
    return values.template with_layout<S>(s, tenet::detail::contiguous_strides(s), values.offset());
  }

  dtype scalar_type() const override { return dtype_of<T>; }
  std::vector<std::int64_t> sizes() const override { return sizes_; }
  std::string shape_text() const override { return text_; }
  tenet::device device() const override { return values.device(); }
  bool defined() const override { return values.defined(); }
  bool requires_grad() const override { return values.requires_grad(); }
  any_tensor value() const override {
    any_tensor out = any_tensor::zeros(dtype_of<T>, sizes_);
    if (values.numel() > 0) any_tensor(values.detach()).copy_to_host(const_cast<void*>(out.raw_data()));  // our own fresh zeros
    return out;
  }
  std::shared_ptr<bound_tensor> detached() const override {
    return std::make_shared<jacobian_block>(values.detach(), sizes_, text_);
  }
  const std::shared_ptr<tenet::detail::ag::meta>& identity() const override { return values.autograd_meta(); }
  std::any flat() const override { return std::any(values); }
  const void* storage_id() const override { return values.defined() ? values.storage().get() : nullptr; }
  static value_error refused() {
    return value_error("tenet: func: a Jacobian block of a tensor_map (jacrev / jacfwd) is read with "
                       "get<T, S>(name) (shape f(x) ++ the tensor's), not differentiated or mapped as it is");
  }
  std::shared_ptr<bound_tensor> fresh_leaf() const override { throw refused(); }
  std::shared_ptr<bound_tensor> alias() const override { throw refused(); }
  std::shared_ptr<bound_tensor> zeros() const override { throw refused(); }
  std::shared_ptr<bound_tensor> from_gradient(const std::any&) const override { throw refused(); }
  std::shared_ptr<bound_tensor> select0(std::int64_t) const override { throw refused(); }
  std::shared_ptr<bound_tensor> stack0(const std::vector<std::shared_ptr<bound_tensor>>&,
                                       const std::string&) const override {
    throw refused();
  }
  std::any as_gradient() const override { throw refused(); }

 private:
  std::vector<std::int64_t> sizes_;
  std::string text_;
};
}  // namespace detail

/// Named tensors of any dtypes and shape types that keep their handles (storage and autograd
/// identity): torch.func's dict of parameters and buffers, for functional_call and grad.
class tensor_map {
 public:
  using entry = std::pair<std::string, std::shared_ptr<nn::detail::bound_tensor>>;
  tensor_map() = default;
  /// Adds or replaces `name` with the handle t (no copy).
  template <class T, class S>
  void set(const std::string& name, const Tensor<T, S>& t) {
    set(name, std::make_shared<nn::detail::typed_bound<T, S>>(t));
  }
  /// Adds or replaces `name` with one Tensor<T, S> per model, stacked (what stack_module_state
  /// makes): vmap maps it, each sample one of them (for functional_call).
  template <class T, class S>
  void set_stacked(const std::string& name, std::vector<Tensor<T, S>> per_model) {
    set(name, std::make_shared<nn::detail::stacked_bound<T, S>>(std::move(per_model)));
  }
  void set(const std::string& name, std::shared_ptr<nn::detail::bound_tensor> b) {
    for (auto& [n, v] : items_)
      if (n == name) {
        v = std::move(b);
        return;
      }
    items_.emplace_back(name, std::move(b));
  }
  /// The tensor of `name` as Tensor<T, S>: value_error when absent, dtype_error when of another type.
  /// An entry of a Jacobian (jacrev / jacfwd over a tensor_map) is read as the shape type of f's
  /// output followed by the tensor's (shape<3, 4, 5> for an output of shape<3> and a tensor of
  /// shape<4, 5>; dyn extents also fit).
  template <class T, class S>
  Tensor<T, S> get(const std::string& name) const {
    const auto& b = at(name);
    if (const auto* j = dynamic_cast<const detail::jacobian_block<T>*>(b.get())) return j->template as<S>(name);
    const auto* p = dynamic_cast<const nn::detail::typed_bound<T, S>*>(b.get());
    if (!p)
      throw dtype_error("tenet: func::tensor_map::get: \"" + name + "\" is " + tenet::name(b->scalar_type()) + " " +
                        b->shape_text() + ", not " + tenet::name(dtype_of<T>) + " " + S::text());
    return p->tensor;
  }
  const std::shared_ptr<nn::detail::bound_tensor>& at(const std::string& name) const {
    for (const auto& [n, v] : items_)
      if (n == name) return v;
    throw value_error("tenet: func::tensor_map: no tensor named \"" + name + "\"");
  }
  bool contains(const std::string& name) const {
    for (const auto& [n, v] : items_)
      if (n == name) return true;
    return false;
  }
  /// The values of `name`, detached (any_tensor).
  any_tensor value(const std::string& name) const { return at(name)->value(); }
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> names() const {
    std::vector<std::string> r;
    for (const auto& [n, v] : items_) r.push_back(n);
    return r;
  }
  const std::vector<entry>& items() const { return items_; }
  /// The same names, each tensor transformed by fn (a bound_tensor -> shared_ptr<bound_tensor>).
  template <class Fn>
  tensor_map map(Fn&& fn) const {
    tensor_map r;
    for (const auto& [n, v] : items_) r.items_.emplace_back(n, fn(*v));
    return r;
  }

 private:
  std::vector<entry> items_;
};

namespace detail {
inline tensor_map from_refs(const std::vector<std::pair<std::string, nn::tensor_ref>>& refs) {
  tensor_map r;
  for (const auto& [n, ref] : refs) r.set(n, ref.slot().bound()->detached());
  return r;
}
}  // namespace detail

/// The module's parameters by their dotted names, detached (torch: {k: v.detach() for k, v in
/// model.named_parameters()}): the same storage, no autograd history.
inline tensor_map parameters(const nn::Module& m) { return detail::from_refs(m.named_parameters()); }
/// The module's buffers, detached.
inline tensor_map buffers(const nn::Module& m) { return detail::from_refs(m.named_buffers()); }

namespace detail {
/// Evaluates what a module returned: an expression to a Tensor, each expression of a pair or tuple.
template <class R>
auto evaluate_result(R&& r) {
  using X = std::remove_cvref_t<R>;
  if constexpr (Expression<X>) {
    return eval(r);
  } else if constexpr (requires { std::tuple_size<X>::value; }) {
    return std::apply([](auto&&... e) { return std::make_tuple(evaluate_result(e)...); }, std::forward<R>(r));
  } else {
    return X(std::forward<R>(r));
  }
}
}  // namespace detail

/// torch.func.functional_call: runs module(args...) with the parameters and buffers named in
/// `values` in place of the module's own (their handles: gradients flow to them), then puts the
/// module's own back (also when the call throws). Names the module lacks, or a dtype, shape type
/// or size that is not the module's tensor's, are errors. The result is evaluated before the
/// module's tensors are put back (an expression, or each expression of a returned pair/tuple).
template <class M, class... A>
auto functional_call(M& module, const tensor_map& values, const A&... args) {
  std::vector<std::pair<std::string, nn::tensor_ref>> all = module.named_parameters();
  for (auto& nb : module.named_buffers()) all.push_back(nb);
  struct swapped {
    std::vector<std::pair<nn::tensor_ref, std::shared_ptr<nn::detail::bound_tensor>>> old;
    ~swapped() {
      for (auto it = old.rbegin(); it != old.rend(); ++it) it->first.slot().rebind(*it->second, "(restore)");
    }
  } undo;
  for (const auto& [name, b] : values.items()) {
    const nn::tensor_ref* ref = nullptr;
    for (const auto& [n, r] : all)
      if (n == name) ref = &r;
    if (!ref) {
      std::string known;
      for (const auto& [n, r] : all) known += (known.empty() ? "" : ", ") + n;
      throw value_error("tenet: func::functional_call: the module has no parameter or buffer named \"" + name +
                        "\" (it has: " + known + ")");
    }
    auto previous = ref->slot().bound();
    ref->slot().rebind(*b, name);
    undo.old.emplace_back(*ref, std::move(previous));
  }
  return detail::evaluate_result(module(args...));
}

namespace detail {
namespace ag = tenet::detail::ag;

template <class X>
inline constexpr bool is_tensor_v = false;
template <class T, class S>
inline constexpr bool is_tensor_v<Tensor<T, S>> = true;
template <class X>
inline constexpr bool is_float_tensor_v = false;
template <class T, class S>
inline constexpr bool is_float_tensor_v<Tensor<T, S>> = is_floating_v<T>;
/// What grad differentiates: a floating Tensor, or a tensor_map (each of its floating tensors).
template <class X>
inline constexpr bool is_differentiable_v = is_float_tensor_v<X> || std::is_same_v<X, tensor_map>;

template <std::size_t... I>
constexpr bool distinct() {
  constexpr std::size_t v[] = {I...};
  for (std::size_t a = 0; a < sizeof...(I); ++a)
    for (std::size_t b = a + 1; b < sizeof...(I); ++b)
      if (v[a] == v[b]) return false;
  return true;
}

/// Where argument K sits among the argnums I..., or -1.
template <std::size_t K, std::size_t... I>
constexpr int position() {
  constexpr std::size_t v[] = {I...};
  for (std::size_t n = 0; n < sizeof...(I); ++n)
    if (v[n] == K) return static_cast<int>(n);
  return -1;
}

template <bool Maps, class... A, std::size_t... I>
constexpr void check_argnums(argnums_t<I...>) {
  static_assert(((I < sizeof...(A)) && ...), "tenet: func: an argnums index is not the position of an argument");
  static_assert(distinct<I...>(), "tenet: func: argnums holds an index twice");
  if constexpr (((I < sizeof...(A)) && ...)) {
    if constexpr (Maps)
      static_assert((is_differentiable_v<std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>> && ...),
                    "tenet: func: a differentiated argument (argnums) must be a Tensor of a floating dtype or a "
                    "func::tensor_map");
    else
      static_assert((is_float_tensor_v<std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>> && ...),
                    "tenet: func: a differentiated argument (argnums) must be a Tensor of a floating dtype");
  }
}

/// One transform's level: whether an enclosing level differentiates through this call (grad mode
/// on when it was called), and the fresh identities this level made.
struct level {
  bool outer = false;
  std::unordered_set<const ag::meta*> own;
};

/// The identity this level differentiates x by: a fresh leaf sharing x's storage, or, where an
/// enclosing level differentiates x, a recorded view of x (its gradients flow on to x).
template <class T, class S>
Tensor<T, S> enter(const Tensor<T, S>& x, level& lv, const char* who) {
  if (!x.defined()) throw value_error(std::string("tenet: func::") + who + ": a differentiated argument is undefined");
  if (lv.outer && x.requires_grad()) return x.template with_layout<S>(x.sizes(), x.strides(), x.offset());
  Tensor<T, S> q = x.detach();
  q.requires_grad_();
  lv.own.insert(q.autograd_meta().get());
  return q;
}

/// Each floating tensor of the map entered as above (the others as they are).
inline tensor_map enter(const tensor_map& m, level& lv, const char* who) {
  return m.map([&](const nn::detail::bound_tensor& b) {
    if (!b.defined())
      throw value_error(std::string("tenet: func::") + who + ": a differentiated tensor_map holds an undefined tensor");
    if (!is_floating(b.scalar_type())) return b.detached();
    if (lv.outer && b.requires_grad()) return b.alias();
    auto q = b.fresh_leaf();
    lv.own.insert(q->identity().get());
    return q;
  });
}

/// Whether the graph of m reaches a tensor that requires grad and is not this level's own: then an
/// enclosing level (or ordinary autograd) differentiates through this call.
inline bool reaches_outer(const std::shared_ptr<ag::meta>& m, const level& lv) {
  if (!m) return false;
  std::vector<const ag::meta*> todo{m.get()};
  std::unordered_set<const ag::meta*> seen;
  while (!todo.empty()) {
    const ag::meta* x = todo.back();
    todo.pop_back();
    if (!seen.insert(x).second || lv.own.count(x)) continue;
    if (!x->grad_fn) {
      if (x->requires_grad) return true;
      continue;
    }
    for (const auto& in : x->grad_fn->inputs)
      if (in) todo.push_back(in.get());
  }
  return false;
}

/// Whether this level must record its backward (create_graph) for an enclosing one; a value_error
/// where that needs TENET_AUTOGRAD=2 and the program has 1.
inline bool keeps_graph(bool needed, const char* who) {
  if (needed && TENET_AUTOGRAD < 2)
    throw value_error(std::string("tenet: func::") + who +
                      ": the function reads a tensor that requires grad from outside this transform (an argument "
                      "that requires grad, a captured parameter, or an enclosing transform's variable), so its "
                      "result must stay differentiable, which records the backward (create_graph): build with "
                      "-DTENET_AUTOGRAD=2, or call the transform under tenet::no_grad (its result is then not "
                      "tracked), or pass detach()ed tensors");
  return needed;
}

template <class T, class S>
Tensor<T, S> zeros_of(const Tensor<T, S>& like) {
  Tensor<T, S> z(like.sizes(), like.device());
  z.zero_();
  return z;
}

/// A tensor of like's sizes and device, 0 but a 1 at flat position i (row-major).
template <class T, class S>
Tensor<T, S> one_hot_of(const Tensor<T, S>& like, std::int64_t i) {
  Tensor<T, S> e(like.sizes(), tenet::cpu);
  e.zero_();
  e.data()[i] = T(1);
  return like.device().is_cpu() ? e : e.to(like.device());
}

inline tensor_map zeros_of(const tensor_map& like) {
  return like.map([](const nn::detail::bound_tensor& b) { return b.zeros(); });
}

inline std::int64_t numel_of(const std::vector<std::int64_t>& s) {
  std::int64_t n = 1;
  for (auto e : s) n *= e;
  return n;
}

/// A tensor_map entry's values as one row of f's output dtype T: a Jacobian (jacrev, jacfwd) or a
/// tangent pass over a tensor_map needs every tensor in the map of that dtype (a dtype_error).
template <class T>
void check_entry_dtype(const nn::detail::bound_tensor& b, const std::string& name, const char* who) {
  if (b.scalar_type() != dtype_of<T>)
    throw dtype_error(std::string("tenet: func::") + who + ": the tensor_map's \"" + name + "\" is " +
                      tenet::name(b.scalar_type()) + " " + b.shape_text() + ", f's output " +
                      tenet::name(dtype_of<T>) + "; a Jacobian over a tensor_map needs every tensor in the map "
                      "of f's output's dtype (leave the others out of the map, or capture them)");
}
template <class T>
Tensor<T, dyn_shape<1>> flat_of(const nn::detail::bound_tensor& b, const std::string& name, const char* who) {
  check_entry_dtype<T>(b, name, who);
  return std::any_cast<Tensor<T, dyn_shape<1>>>(b.flat());
}

/// One Jacobian block per tensor of x (jacobian_block: sizes y ++ the tensor's), from values(name,
/// b), the numel(y) * numel(b) values of its block in (y index, x index) order.
template <class T, class Sy, class Values>
tensor_map jacobian_map(const Tensor<T, Sy>& y, const tensor_map& x, const char* who, Values&& values) {
  tensor_map r;
  for (const auto& [name, b] : x.items()) {
    check_entry_dtype<T>(*b, name, who);
    std::vector<std::int64_t> s(y.sizes().begin(), y.sizes().end());
    const auto bs = b->sizes();
    s.insert(s.end(), bs.begin(), bs.end());
    Tensor<T, dyn_shape<1>> v;
    if (y.numel() == 0 || numel_of(bs) == 0) {
      v = Tensor<T, dyn_shape<1>>({numel_of(s)}, b->device());
      v.zero_();
    } else {
      v = values(name, *b);
    }
    r.set(name, std::make_shared<jacobian_block<T>>(std::move(v), std::move(s), Sy::text() + " ++ " + b->shape_text()));
  }
  return r;
}

template <class X>
X detach_if_tensor(X x) {
  if constexpr (is_tensor_v<X>) return x.defined() ? x.detach() : x;
  else if constexpr (std::is_same_v<X, tensor_map>) return x.map([](const nn::detail::bound_tensor& b) { return b.detached(); });
  else return x;
}

/// f's value: (output tensor, aux) with has_aux, else (output tensor, nothing).
template <bool Aux, class Out>
auto split_output(Out&& out) {
  if constexpr (Aux) {
    static_assert(std::tuple_size<std::remove_cvref_t<Out>>::value == 2,
                  "tenet: func: with has_aux, f must return a pair (output, aux)");
    auto y = eval(std::get<0>(out));
    return std::make_pair(y, std::get<1>(std::forward<Out>(out)));
  } else {
    auto y = eval(out);
    return std::make_pair(y, std::monostate{});
  }
}

/// Calls f with args, the ones at I... replaced by q (this level's identities), grad mode on.
template <bool Aux, class F, std::size_t... I, class... A, class... Q>
auto call(const F& f, argnums_t<I...>, const std::tuple<const A&...>& args, const std::tuple<Q...>& q) {
  const ag::grad_mode_guard on(true);
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto pick = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) -> decltype(auto) {
      constexpr int p = position<J, I...>();
      if constexpr (p >= 0) return std::get<static_cast<std::size_t>(p)>(q);
      else return std::get<J>(args);
    };
    return split_output<Aux>(f(pick(std::integral_constant<std::size_t, K>{})...));
  }(std::index_sequence_for<A...>{});
}

/// The gradients of y with respect to q (zeros for an input y does not depend on), for seed.
using capture_map = std::unordered_map<const ag::meta*, std::any>;

template <class T, class S>
void capture(const Tensor<T, S>& x, capture_map& c) {
  c.emplace(x.autograd_meta().get(), std::any());
}
inline void capture(const tensor_map& m, capture_map& c) {
  for (const auto& [n, b] : m.items())
    if (b->identity()) c.emplace(b->identity().get(), std::any());
}
template <class T, class S>
Tensor<T, S> captured(const Tensor<T, S>& x, const capture_map& c) {
  const std::any& g = c.at(x.autograd_meta().get());
  if (!g.has_value()) return zeros_of(x);
  return Tensor<T, S>(std::any_cast<const ag::grad_tensor<T, S::rank>&>(g));
}
inline tensor_map captured(const tensor_map& m, const capture_map& c) {
  return m.map([&](const nn::detail::bound_tensor& b) {
    if (!b.identity()) return b.zeros();
    return b.from_gradient(c.at(b.identity().get()));
  });
}

/// The gradients of y with respect to q (zeros for an input y does not depend on), for seed.
template <class Y, class... Q>
std::tuple<Q...> gradients(const Y& y, const std::tuple<Q...>& q, const Y& seed, bool graph, bool retain) {
  if (!y.requires_grad())
    return std::apply([](const auto&... x) { return std::tuple<Q...>{zeros_of(x)...}; }, q);
  capture_map c;
  std::apply([&](const auto&... x) { (capture(x, c), ...); }, q);
  ag::gradients_into(y, seed, c, {.retain_graph = retain, .create_graph = graph, .allow_unused = true});
  return std::apply([&](const auto&... x) { return std::tuple<Q...>{captured(x, c)...}; }, q);
}

template <class... X>
auto single_or_tuple(std::tuple<X...> t) {
  if constexpr (sizeof...(X) == 1) return std::get<0>(std::move(t));
  else return t;
}

template <class Tp>
Tp detach_all(Tp t) {
  std::apply([](auto&... x) { ((x = detach_if_tensor(x)), ...); }, t);
  return t;
}

/// d(value)/d(args at I...) with the value (and aux): the body of grad and grad_and_value.
template <bool Aux, class F, std::size_t... I, class... A>
auto grad_and_value_at(const F& f, argnums_t<I...> nums, const A&... a) {
  check_argnums<true, A...>(nums);
  const std::tuple<const A&...> args(a...);
  level lv{ag::grad_mode(), {}};
  auto q = std::make_tuple(enter(std::get<I>(args), lv, "grad")...);
  auto out = call<Aux>(f, nums, args, q);  // not a structured binding: lambdas below use y (clang 14)
  auto& y = out.first;
  auto& aux = out.second;
  using Y = std::remove_cvref_t<decltype(y)>;
  static_assert(Y::rank == 0,
                "tenet: func::grad: f must return a scalar (a rank-0 tensor, shape<>); for other outputs use "
                "func::vjp or func::jacrev");
  static_assert(is_floating_v<typename Y::value_type>, "tenet: func::grad: f must return a floating tensor");
  const bool graph = keeps_graph(lv.outer && reaches_outer(y.autograd_meta(), lv), "grad");
  Y one(y.sizes(), y.device());
  one.fill_(1);
  auto g = gradients(y, q, one, graph, false);
  if (!graph) return std::make_tuple(single_or_tuple(std::move(g)), y.detach(), detach_if_tensor(std::move(aux)));
  return std::make_tuple(single_or_tuple(std::move(g)), y, std::move(aux));
}

/// Forward mode over one recording of f: the tangent of its output for any tangents of the
/// primals. Without an enclosing level, tenet's forward mode (the JVP rules over the recorded
/// graph); where an enclosing level differentiates through the call, the double-VJP form
/// (J t = d<J^T u, t>/du, u a fresh variable), whose every step is recorded.
template <class Y, class... P>
class linearized {
 public:
  template <class F, std::size_t... I, class... A>
  linearized(const F& f, argnums_t<I...> nums, const std::tuple<const A&...>& args, const char* who) : who_(who) {
    lv_.outer = ag::grad_mode();
    q_ = std::make_tuple(enter(std::get<I>(args), lv_, who)...);
    auto [y, aux] = call<false>(f, nums, args, q_);
    (void)aux;
    y_ = y;
    graph_ = keeps_graph(lv_.outer && reaches_outer(y_.autograd_meta(), lv_), who);
    if (graph_) record_transpose();
  }
  /// f's output: tracked where an enclosing level differentiates through it, else detached.
  Y output() const { return graph_ ? y_ : y_.detach(); }
  bool recorded() const { return graph_; }

  /// J t for tangents t of the primals' types and sizes.
  Y operator()(const std::tuple<P...>& t) const {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (check_tangent(std::get<K>(q_), std::get<K>(t)), ...);
    }(std::index_sequence_for<P...>{});
    const bool tracked_t = ag::grad_mode() && std::apply([](const auto&... x) { return (tracked(x) || ...); }, t);
    if (!graph_ && tracked_t && keeps_graph(true, who_)) record_transpose();  // J t must stay differentiable in t
    if (!y_.requires_grad()) return zeros_of(y_);
    if (!graph_ && !tracked_t) {
      ag::jvp_context ctx;
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        (seed(ctx, std::get<K>(q_), std::get<K>(t)), ...);
      }(std::index_sequence_for<P...>{});
      const ag::grad_mode_guard off(false);
      const device_guard on_device(y_.device());
      return Y(ag::meta_tangent<typename Y::value_type, Y::rank>(y_.autograd_meta(), y_.sizes(), ctx));
    }
    return recorded_jvp(t);
  }

 private:
  template <class Q>
  static bool tracked(const Q& t) {
    if constexpr (std::is_same_v<Q, tensor_map>) {
      for (const auto& [n, b] : t.items())
        if (b->requires_grad()) return true;
      return false;
    } else {
      return t.requires_grad();
    }
  }
  template <class Q>
  static void seed(ag::jvp_context& ctx, const Q& q, const Q& t) {
    if constexpr (std::is_same_v<Q, tensor_map>) {
      for (const auto& [name, b] : q.items())
        if (b->identity()) ctx.seeds[b->identity().get()] = t.at(name)->as_gradient();
    } else {
      ctx.seeds[q.autograd_meta().get()] = ag::grad_tensor<typename Q::value_type, Q::rank>(t.detach().contiguous());
    }
  }
  /// A tangent map holds the primal map's names, each of its tensor's dtype, shape type, sizes
  /// and device (in any order).
  void check_tangent(const tensor_map& q, const tensor_map& t) const {
    if (t.size() != q.size() || [&] {
          for (const auto& [name, b] : q.items())
            if (!t.contains(name)) return true;
          return false;
        }()) {
      std::string qn, tn;
      for (const auto& n : q.names()) qn += (qn.empty() ? "" : ", ") + n;
      for (const auto& n : t.names()) tn += (tn.empty() ? "" : ", ") + n;
      throw value_error(std::string("tenet: func::") + who_ + ": the tangent tensor_map holds " + tn +
                        "; its primal holds " + qn + " (one tangent per name)");
    }
    for (const auto& [name, b] : q.items()) {
      const auto& tb = t.at(name);
      if (!tb->defined() || tb->scalar_type() != b->scalar_type() || tb->shape_text() != b->shape_text())
        throw dtype_error(std::string("tenet: func::") + who_ + ": the tangent of \"" + name + "\" is " +
                          (tb->defined() ? std::string(tenet::name(tb->scalar_type())) + " " + tb->shape_text()
                                         : std::string("undefined")) +
                          ", its primal " + tenet::name(b->scalar_type()) + " " + b->shape_text());
      if (tb->sizes() != b->sizes())
        throw shape_error(std::string("tenet: func::") + who_ + ": the tangent of \"" + name + "\" has sizes " +
                          tenet::detail::sizes_text(tb->sizes().data(), tb->sizes().size()) + ", its primal " +
                          tenet::detail::sizes_text(b->sizes().data(), b->sizes().size()));
      if (tb->device() != b->device())
        throw device_error(std::string("tenet: func::") + who_ + ": the tangent of \"" + name + "\" is on " +
                           tb->device().str() + ", its primal on " + b->device().str());
    }
  }
  template <class Q>
  void check_tangent(const Q& q, const Q& t) const {
    if (!t.defined() || t.sizes() != q.sizes())
      throw shape_error(std::string("tenet: func::") + who_ + ": a tangent has sizes " +
                        (t.defined() ? tenet::detail::sizes_text(t.sizes()) : std::string("(undefined)")) +
                        ", its primal " + tenet::detail::sizes_text(q.sizes()));
    if (t.device() != q.device())
      throw device_error(std::string("tenet: func::") + who_ + ": a tangent is on " + t.device().str() +
                         ", its primal on " + q.device().str());
  }

  /// gq_ = J^T u for a fresh variable u, recorded (create_graph): the double-VJP form's first half.
  void record_transpose() const {
    if constexpr (TENET_AUTOGRAD >= 2) {
      if (recorded_ || !y_.requires_grad()) return;
      u_ = zeros_of(y_);
      u_.requires_grad_();
      const ag::grad_mode_guard on(true);
      if constexpr ((std::is_same_v<P, tensor_map> || ...))
        gq_ = gradients(y_, q_, u_, true, true);  // zeros where unused
      else
        gq_ = autograd::grad(y_, q_, u_, {.retain_graph = true, .create_graph = true, .allow_unused = true});
      recorded_ = true;
    }
  }

  Y recorded_jvp(const std::tuple<P...>& t) const {
    if constexpr (TENET_AUTOGRAD < 2) {
      (void)t;
      throw value_error("tenet: func: unreachable (keeps_graph refused)");
    } else {
      using T = typename Y::value_type;
      const ag::grad_mode_guard on(true);
      Tensor<T, shape<>> s(sizes_t<0>{}, y_.device());
      s.zero_();
      bool any = false;
      auto add = [&](const auto& gk, const auto& tk) {
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(gk)>, tensor_map>) {
          for (const auto& [name, g] : gk.items()) {
            if (!is_floating(g->scalar_type())) continue;
            any = true;
            s = Tensor<T, shape<>>(s + sum(flat_of<T>(*g, name, who_) * flat_of<T>(*tk.at(name), name, who_)));
          }
        } else {
          if (!gk.defined()) return;
          any = true;
          s = Tensor<T, shape<>>(s + sum(gk * tk).template to<T>());
        }
      };
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        (add(std::get<K>(gq_), std::get<K>(t)), ...);
      }(std::index_sequence_for<P...>{});
      if (!any || !s.requires_grad()) return zeros_of(y_);
      Y jt = autograd::grad(s, u_, {.retain_graph = true, .create_graph = true, .allow_unused = true});
      return jt.defined() ? jt : zeros_of(y_);
    }
  }

  const char* who_;
  level lv_;
  std::tuple<P...> q_;
  Y y_;
  bool graph_ = false;
  mutable bool recorded_ = false;
  mutable Y u_;
  mutable std::tuple<P...> gq_;
};

template <class F, std::size_t... I, class... A>
auto linearize_at(const F& f, argnums_t<I...> nums, const std::tuple<const A&...>& args, const char* who) {
  using Yt = decltype(eval(std::declval<const F&>()(std::declval<const A&>()...)));
  using Y = Tensor<typename Yt::value_type, typename Yt::shape_type>;
  static_assert(is_floating_v<typename Y::value_type>, "tenet: func: f must return a floating tensor");
  return linearized<Y, std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>...>(f, nums, args, who);
}

/// The Jacobian block of y (sizes Sy) with respect to x (sizes Sx), from its numel(y) rows (each
/// x's sizes) or numel(x) columns (each y's sizes), as a Tensor of shape Sy ++ Sx.
template <class T, class Sy, class Sx>
using jacobian_t = Tensor<T, tenet::detail::concat_shapes_t<Sy, Sx>>;

template <class T, class Sy, class Sx>
typename jacobian_t<T, Sy, Sx>::sizes_type jacobian_sizes(const Tensor<T, Sy>& y, const Tensor<T, Sx>& x) {
  typename jacobian_t<T, Sy, Sx>::sizes_type s{};
  for (std::size_t d = 0; d < Sy::rank; ++d) s[d] = y.sizes()[d];
  for (std::size_t d = 0; d < Sx::rank; ++d) s[Sy::rank + d] = x.sizes()[d];
  return s;
}

/// all (contiguous, numel(y) * numel(x) values in (y index, x index) order) viewed as the Jacobian.
template <class T, class Sy, class Sx, class Flat>
jacobian_t<T, Sy, Sx> as_jacobian(const Flat& all, const Tensor<T, Sy>& y, const Tensor<T, Sx>& x) {
  using J = jacobian_t<T, Sy, Sx>;
  const auto s = jacobian_sizes(y, x);
  return all.template with_layout<typename J::shape_type>(s, tenet::detail::contiguous_strides(s), all.offset());
}

template <class T, class Sy, class Sx>
jacobian_t<T, Sy, Sx> zero_jacobian(const Tensor<T, Sy>& y, const Tensor<T, Sx>& x) {
  jacobian_t<T, Sy, Sx> z(jacobian_sizes(y, x), x.device());
  z.zero_();
  return z;
}

template <class T, class Sy, class Sx>
jacobian_t<T, Sy, Sx> from_rows(const std::vector<Tensor<T, Sx>>& rows, const Tensor<T, Sy>& y,
                                const Tensor<T, Sx>& x) {
  if (rows.empty() || x.numel() == 0) return zero_jacobian(y, x);
  std::vector<Tensor<T, dyn_shape<1>>> flat;
  flat.reserve(rows.size());
  for (const auto& r : rows) flat.push_back(r.template reshape<-1>());
  return as_jacobian(cat<0>(flat), y, x);  // recorded where a row is
}

template <class T, class Sy, class Sx>
jacobian_t<T, Sy, Sx> from_columns(const std::vector<Tensor<T, Sy>>& cols, const Tensor<T, Sy>& y,
                                   const Tensor<T, Sx>& x) {
  if (cols.empty() || y.numel() == 0) return zero_jacobian(y, x);
  std::vector<Tensor<T, dyn_shape<2>>> flat;
  flat.reserve(cols.size());
  for (const auto& c : cols) flat.push_back(c.template reshape<1, -1>());
  return as_jacobian(cat<0>(flat).t().contiguous(), y, x);
}

/// The Jacobian over a tensor_map argument from its numel(y) rows (gradients, each a tensor_map):
/// a tensor_map of Jacobian blocks, one per name.
template <class T, class Sy>
tensor_map from_rows(const std::vector<tensor_map>& rows, const Tensor<T, Sy>& y, const tensor_map& x) {
  return jacobian_map(y, x, "jacrev", [&](const std::string& name, const nn::detail::bound_tensor&) {
    std::vector<Tensor<T, dyn_shape<1>>> flat;
    flat.reserve(rows.size());
    for (const auto& r : rows) flat.push_back(flat_of<T>(*r.at(name), name, "jacrev"));
    return Tensor<T, dyn_shape<1>>(cat<0>(flat));
  });
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// grad, grad_and_value

/// torch.func.grad_and_value: a function of f's arguments returning (gradient, value); the
/// gradient is a Tensor for one argnum, a std::tuple for several; with has_aux,
/// (gradient, (value, aux)).
template <class F, std::size_t... I>
auto grad_and_value(F f, argnums_t<I...> nums) {
  return [f = std::move(f), nums](const auto&... a) {
    auto [g, y, aux] = detail::grad_and_value_at<false>(f, nums, a...);
    (void)aux;
    return std::make_pair(std::move(g), std::move(y));
  };
}
template <class F, std::size_t... I>
auto grad_and_value(F f, argnums_t<I...> nums, has_aux_t) {
  return [f = std::move(f), nums](const auto&... a) {
    auto [g, y, aux] = detail::grad_and_value_at<true>(f, nums, a...);
    return std::make_pair(std::move(g), std::make_pair(std::move(y), std::move(aux)));
  };
}
template <class F>
auto grad_and_value(F f) {
  return grad_and_value(std::move(f), argnums<0>);
}
template <class F>
auto grad_and_value(F f, has_aux_t) {
  return grad_and_value(std::move(f), argnums<0>, has_aux);
}

/// torch.func.grad: the gradient of a scalar-valued f with respect to argument 0 (or argnums): a
/// function of f's arguments. With has_aux, (gradient, aux).
namespace detail {
/// grad(f, argnums<I...>) as a named type, so that vmap's batching rules can see f through it
/// (vmap(grad(f)): per-sample gradients from one batched backward pass).
template <class F, std::size_t... I>
struct grad_fn {
  F f;
  template <class... A>
  auto operator()(const A&... a) const {
    return std::get<0>(grad_and_value_at<false>(f, argnums_t<I...>{}, a...));
  }
};
template <class F>
inline constexpr bool is_grad_fn_v = false;
template <class F, std::size_t... I>
inline constexpr bool is_grad_fn_v<grad_fn<F, I...>> = true;
}  // namespace detail

template <class F, std::size_t... I>
auto grad(F f, argnums_t<I...>) {
  return detail::grad_fn<F, I...>{std::move(f)};
}
template <class F, std::size_t... I>
auto grad(F f, argnums_t<I...> nums, has_aux_t) {
  return [f = std::move(f), nums](const auto&... a) {
    auto [g, y, aux] = detail::grad_and_value_at<true>(f, nums, a...);
    (void)y;
    return std::make_pair(std::move(g), std::move(aux));
  };
}
template <class F>
auto grad(F f) {
  return grad(std::move(f), argnums<0>);
}
template <class F>
auto grad(F f, has_aux_t) {
  return grad(std::move(f), argnums<0>, has_aux);
}

// ---------------------------------------------------------------------------------------------
// vjp

/// torch.func.vjp: (f(primals...), vjp_fn) where vjp_fn(cotangent) returns a std::tuple with the
/// cotangent times the Jacobian for each primal (zeros where f does not depend on it). vjp_fn may
/// be called any number of times. Every primal must be a floating Tensor.
template <class F, class... P>
auto vjp(F f, const P&... primals) {
  static_assert(sizeof...(P) > 0, "tenet: func::vjp needs at least one primal");
  static_assert((detail::is_differentiable_v<P> && ...),
                "tenet: func::vjp: every primal must be a floating Tensor or a func::tensor_map");
  using Yt = decltype(eval(f(primals...)));
  using Y = Tensor<typename Yt::value_type, typename Yt::shape_type>;
  struct state {
    detail::level lv;
    std::tuple<P...> q;
    Y y;
    bool graph = false;
  };
  auto st = std::make_shared<state>();
  st->lv.outer = detail::ag::grad_mode();
  st->q = std::make_tuple(detail::enter(primals, st->lv, "vjp")...);
  {
    const detail::ag::grad_mode_guard on(true);
    st->y = std::apply([&](const auto&... x) { return Y(eval(f(x...))); }, st->q);
  }
  st->graph = detail::keeps_graph(st->lv.outer && detail::reaches_outer(st->y.autograd_meta(), st->lv), "vjp");
  auto fn = [st](const Y& ct) {
    if (!ct.defined() || ct.sizes() != st->y.sizes())
      throw shape_error("tenet: func::vjp: the cotangent has sizes " +
                        (ct.defined() ? tenet::detail::sizes_text(ct.sizes()) : std::string("(undefined)")) +
                        ", f's output " + tenet::detail::sizes_text(st->y.sizes()));
    if (ct.device() != st->y.device())
      throw device_error("tenet: func::vjp: the cotangent is on " + ct.device().str() + ", f's output on " +
                         st->y.device().str());
    const bool graph = st->graph || detail::keeps_graph(detail::ag::grad_mode() && ct.requires_grad(), "vjp");
    auto g = detail::gradients(st->y, st->q, ct, graph, true);
    return graph ? g : detail::detach_all(std::move(g));
  };
  return std::make_pair(st->graph ? st->y : st->y.detach(), std::move(fn));
}

// ---------------------------------------------------------------------------------------------
// jvp, linearize

namespace detail {
template <std::size_t N>
constexpr auto all_argnums() {
  return []<std::size_t... K>(std::index_sequence<K...>) { return argnums_t<K...>{}; }(std::make_index_sequence<N>{});
}
}  // namespace detail

/// torch.func.linearize: (f(primals...), jvp_fn) where jvp_fn(tangents...) returns J t; f runs
/// (and is recorded) once, each jvp_fn call is one forward-mode pass over the recording.
template <class F, class... P>
auto linearize(F f, const P&... primals) {
  static_assert(sizeof...(P) > 0, "tenet: func::linearize needs at least one primal");
  static_assert((detail::is_differentiable_v<P> && ...),
                "tenet: func::linearize: every primal must be a floating Tensor or a func::tensor_map");
  const std::tuple<const P&...> args(primals...);
  auto lin = std::make_shared<decltype(detail::linearize_at(f, detail::all_argnums<sizeof...(P)>(), args, "linearize"))>(
      detail::linearize_at(f, detail::all_argnums<sizeof...(P)>(), args, "linearize"));
  auto y = lin->output();
  return std::make_pair(std::move(y), [lin](const P&... t) { return (*lin)(std::tuple<P...>(t...)); });
}

/// torch.func.jvp: (f(primals...), J t) for tangents t of the primals' types and sizes.
template <class F, class... P>
auto jvp(F f, const std::tuple<P...>& primals, const std::tuple<P...>& tangents) {
  static_assert(sizeof...(P) > 0, "tenet: func::jvp needs at least one primal");
  static_assert((detail::is_differentiable_v<P> && ...),
                "tenet: func::jvp: every primal must be a floating Tensor or a func::tensor_map");
  auto lin = std::apply(
      [&](const auto&... p) {
        return detail::linearize_at(f, detail::all_argnums<sizeof...(P)>(), std::tuple<const P&...>(p...), "jvp");
      },
      primals);
  auto jt = lin(tangents);
  return std::make_pair(lin.output(), std::move(jt));
}

// ---------------------------------------------------------------------------------------------
// jacrev, jacfwd, hessian

namespace detail {
template <class Y, class X>
constexpr bool same_dtype() {
  if constexpr (std::is_same_v<X, tensor_map>) return true;  // checked per tensor (check_entry_dtype)
  else return std::is_same_v<typename Y::value_type, typename X::value_type>;
}
template <class Y, class... X>
constexpr void check_jacobian_dtypes() {
  static_assert((same_dtype<Y, X>() && ...),
                "tenet: func::jacrev / jacfwd: f's output and the differentiated arguments must have one dtype");
}

template <bool Aux, class F, std::size_t... I, class... A>
auto jacrev_at(const F& f, argnums_t<I...> nums, const A&... a) {
  check_argnums<true, A...>(nums);
  const std::tuple<const A&...> args(a...);
  level lv{ag::grad_mode(), {}};
  auto q = std::make_tuple(enter(std::get<I>(args), lv, "jacrev")...);
  auto out = call<Aux>(f, nums, args, q);  // not a structured binding: lambdas below use y (clang 14)
  auto& y = out.first;
  auto& aux = out.second;
  using Y = std::remove_cvref_t<decltype(y)>;
  check_jacobian_dtypes<Y, std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>...>();
  const bool graph = keeps_graph(lv.outer && reaches_outer(y.autograd_meta(), lv), "jacrev");
  std::tuple<std::vector<std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>>...> rows;
  const std::int64_t n = y.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    auto g = gradients(y, q, one_hot_of(y, i), graph, true);
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (std::get<K>(rows).push_back(std::move(std::get<K>(g))), ...);
    }(std::index_sequence_for<decltype(I)...>{});
  }
  auto jac = [&]<std::size_t... K>(std::index_sequence<K...>) {
    return std::make_tuple(from_rows(std::get<K>(rows), y, std::get<K>(q))...);
  }(std::index_sequence_for<decltype(I)...>{});
  if (!graph) return std::make_pair(single_or_tuple(detach_all(std::move(jac))), detach_if_tensor(std::move(aux)));
  return std::make_pair(single_or_tuple(std::move(jac)), std::move(aux));
}

template <class F, std::size_t... I, class... A>
auto jacfwd_at(const F& f, argnums_t<I...> nums, const A&... a) {
  check_argnums<true, A...>(nums);
  const std::tuple<const A&...> args(a...);
  auto lin = linearize_at(f, nums, args, "jacfwd");
  auto y = lin.output();
  using Y = std::remove_cvref_t<decltype(y)>;
  check_jacobian_dtypes<Y, std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>...>();
  auto primals = std::make_tuple(std::get<I>(args)...);
  auto block = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
    const auto& x = std::get<K>(primals);
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(x)>, tensor_map>) {
      // one tangent pass per element of each tensor of the map, the others' tangents zero
      using T = typename Y::value_type;
      const auto zero = std::apply([](const auto&... p) { return std::make_tuple(zeros_of(p)...); }, primals);
      return jacobian_map(y, x, "jacfwd", [&](const std::string& name, const nn::detail::bound_tensor& b) {
        const std::int64_t n = numel_of(b.sizes());
        std::vector<Tensor<T, dyn_shape<2>>> cols;
        cols.reserve(static_cast<std::size_t>(n));
        for (std::int64_t j = 0; j < n; ++j) {
          auto t = zero;
          auto e = b.zeros();
          flat_of<T>(*e, name, "jacfwd").template narrow<0>(j, 1).fill_(T(1));
          std::get<K>(t).set(name, std::move(e));
          cols.push_back(lin(t).template reshape<1, -1>());
        }
        return Tensor<T, dyn_shape<1>>(cat<0>(cols).t().contiguous().template reshape<-1>());
      });
    } else {
      std::vector<Y> cols;
      const std::int64_t n = x.numel();
      cols.reserve(static_cast<std::size_t>(n));
      for (std::int64_t j = 0; j < n; ++j) {
        auto t = std::apply([](const auto&... p) { return std::make_tuple(zeros_of(p)...); }, primals);
        std::get<K>(t) = one_hot_of(x, j);
        cols.push_back(lin(t));
      }
      return from_columns(cols, y, x);
    }
  };
  auto jac = [&]<std::size_t... K>(std::index_sequence<K...>) {
    return std::make_tuple(block(std::integral_constant<std::size_t, K>{})...);
  }(std::index_sequence_for<decltype(I)...>{});
  const bool recorded = lin.recorded();  // an enclosing level or autograd differentiates through it
  return std::make_pair(single_or_tuple(recorded ? std::move(jac) : detach_all(std::move(jac))), recorded);
}

/// jacfwd with has_aux: f returns (output, aux); f runs once, and its aux comes back beside the
/// Jacobian (detached unless an enclosing level differentiates through the call, as jacrev's).
template <class F, std::size_t... I, class... A>
auto jacfwd_aux_at(const F& f, argnums_t<I...> nums, const A&... a) {
  using R = std::remove_cvref_t<decltype(f(a...))>;
  static_assert(std::tuple_size<R>::value == 2, "tenet: func: with has_aux, f must return a pair (output, aux)");
  std::optional<std::remove_cvref_t<std::tuple_element_t<1, R>>> aux;
  auto out = [&f, &aux](const auto&... x) {
    auto r = f(x...);
    aux.emplace(std::get<1>(r));
    return std::get<0>(std::move(r));
  };
  auto jr = jacfwd_at(out, nums, a...);
  return std::make_pair(std::move(jr.first), jr.second ? std::move(*aux) : detach_if_tensor(std::move(*aux)));
}
}  // namespace detail

/// torch.func.jacrev: the Jacobian of f with respect to argument 0 (or argnums) by reverse mode,
/// one backward pass per element of f's output; its shape is f(x).shape ++ x.shape (a std::tuple
/// of one per argnum for several). With has_aux, (jacobian, aux).
template <class F, std::size_t... I>
auto jacrev(F f, argnums_t<I...> nums) {
  return [f = std::move(f), nums](const auto&... a) { return detail::jacrev_at<false>(f, nums, a...).first; };
}
template <class F, std::size_t... I>
auto jacrev(F f, argnums_t<I...> nums, has_aux_t) {
  return [f = std::move(f), nums](const auto&... a) { return detail::jacrev_at<true>(f, nums, a...); };
}
template <class F>
auto jacrev(F f) {
  return jacrev(std::move(f), argnums<0>);
}
template <class F>
auto jacrev(F f, has_aux_t) {
  return jacrev(std::move(f), argnums<0>, has_aux);
}

/// torch.func.jacfwd: the same Jacobian by forward mode, one tangent pass per element of the
/// differentiated argument (f runs once). With has_aux, (jacobian, aux).
template <class F, std::size_t... I>
auto jacfwd(F f, argnums_t<I...> nums) {
  return [f = std::move(f), nums](const auto&... a) { return detail::jacfwd_at(f, nums, a...).first; };
}
template <class F, std::size_t... I>
auto jacfwd(F f, argnums_t<I...> nums, has_aux_t) {
  return [f = std::move(f), nums](const auto&... a) { return detail::jacfwd_aux_at(f, nums, a...); };
}
template <class F>
auto jacfwd(F f) {
  return jacfwd(std::move(f), argnums<0>);
}
template <class F>
auto jacfwd(F f, has_aux_t) {
  return jacfwd(std::move(f), argnums<0>, has_aux);
}

/// torch.func.hessian: jacfwd(jacrev(f, argnums), argnums), for one argnum; shape f(x).shape ++
/// x.shape ++ x.shape. Needs TENET_AUTOGRAD=2 (jacrev's backward is differentiated).
template <class F, std::size_t I>
auto hessian(F f, argnums_t<I> nums) {
  return jacfwd(jacrev(std::move(f), nums), nums);
}
/// torch.func.hessian over several argnums: the nested std::tuple of blocks, ((H00, H01, ...),
/// (H10, H11, ...), ...), block (r, c) the second derivative with respect to argument I_r then
/// I_c, of shape f(x).shape ++ x_r.shape ++ x_c.shape. Row r is jacfwd of the r-th gradient
/// (jacrev's r-th block) over every argnum, so f's gradient is recorded once per argnum.
template <class F, std::size_t I0, std::size_t I1, std::size_t... I>
auto hessian(F f, argnums_t<I0, I1, I...> nums) {
  return [f = std::move(f), nums](const auto&... a) {
    return [&]<std::size_t... R>(std::index_sequence<R...>) {
      auto row = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
        return jacfwd([&f, nums](const auto&... x) { return std::get<K>(jacrev(f, nums)(x...)); }, nums)(a...);
      };
      return std::make_tuple(row(std::integral_constant<std::size_t, R>{})...);
    }(std::make_index_sequence<2 + sizeof...(I)>{});
  };
}
template <class F>
auto hessian(F f) {
  return hessian(std::move(f), argnums<0>);
}

// ---------------------------------------------------------------------------------------------
// vmap

/// An argument vmap does not map (torch's in_dims None): func::in_dims<0, func::none>.
inline constexpr int none = -(1 << 30);
/// The mapped dim of each argument (negative counts from the end; func::none: not mapped).
template <int... D>
struct in_dims_t {};
template <int... D>
inline constexpr in_dims_t<D...> in_dims{};
/// The dim of the outputs that the batch is stacked along.
template <int D>
struct out_dims_t {};
template <int D>
inline constexpr out_dims_t<D> out_dims{};

/// What vmap does when f draws random numbers (torch.func.vmap's randomness).
enum class randomness {
  error,      // a value_error (torch's default)
  different,  // each sample draws its own numbers
  same,       // every sample draws the same numbers
};
struct vmap_options {
  func::randomness randomness = randomness::error;
  /// torch's chunk_size (0: none): with func::batching, f runs once per chunk of this many
  /// samples; the per-sample vmap runs f per sample anyway, so there it changes nothing.
  std::int64_t chunk_size = 0;
};

namespace detail {
/// The mapped dim of argument K of type A (in_dims D..., or 0 for every Tensor when none given),
/// normalized; -1 when the argument is not mapped.
template <class A, int D>
constexpr int mapped_dim() {
  if constexpr (D == none) {
    return -1;
  } else if constexpr (std::is_same_v<A, tensor_map>) {
    static_assert(D == 0, "tenet: func::vmap: a tensor_map is mapped along dim 0 of every tensor (in_dims 0)");
    return 0;
  } else {
    static_assert(is_tensor_v<A>,
                  "tenet: func::vmap: an argument with a mapped dim (in_dims) must be a Tensor or a func::tensor_map");
    if constexpr (is_tensor_v<A>) {
      constexpr int r = static_cast<int>(A::rank);
      static_assert(r >= 1, "tenet: func::vmap: a mapped argument must have at least one dim");
      static_assert(D >= -r && D < r, "tenet: func::vmap: an in_dims entry is outside its argument's dims");
      return D < 0 ? D + r : D;
    } else {
      return -1;
    }
  }
}

template <int M, class A>
decltype(auto) sample_of(const A& a, std::int64_t i) {
  if constexpr (M < 0) return (a);
  else if constexpr (std::is_same_v<A, tensor_map>) return a.map([&](const nn::detail::bound_tensor& b) { return b.select0(i); });
  else return a.template select<M>(i);
}

/// The extent of a mapped argument's dim: a Tensor's, or the common first extent of a tensor_map's
/// tensors (value_error when they differ or one has no dim).
template <int M, class A>
std::int64_t mapped_size(const A& x, std::size_t k) {
  if constexpr (std::is_same_v<A, tensor_map>) {
    std::int64_t n = -1;
    for (const auto& [name, b] : x.items()) {
      const auto s = b->sizes();
      if (s.empty())
        throw value_error("tenet: func::vmap: argument " + std::to_string(k) + " (a tensor_map) maps \"" + name +
                          "\", which has no dim 0");
      if (n < 0) n = s[0];
      else if (s[0] != n)
        throw value_error("tenet: func::vmap: argument " + std::to_string(k) + " (a tensor_map) holds tensors of "
                          "first extents " + std::to_string(n) + " and " + std::to_string(s[0]) + " (\"" + name + "\")");
    }
    if (n < 0) throw value_error("tenet: func::vmap: argument " + std::to_string(k) + " is an empty tensor_map");
    return n;
  } else {
    if (!x.defined()) throw value_error("tenet: func::vmap: argument " + std::to_string(k) + " is undefined");
    return x.sizes()[static_cast<std::size_t>(M)];
  }
}

/// The batch's extent type: the first mapped argument's extent at its mapped dim (static or dyn).
template <class... P>
struct first_extent;
template <>
struct first_extent<> {
  using type = shape<dyn>;
};
template <class P0, class... P>
struct first_extent<P0, P...> {
  using type = std::conditional_t<(P0::dim >= 0), typename P0::extent, typename first_extent<P...>::type>;
};
template <class A, int M>
struct arg_dim {
  static constexpr int dim = M;
  using extent = std::conditional_t<(M >= 0), tenet::detail::take_extents_t<typename A::shape_type, (M >= 0 ? M : 0), (M >= 0 ? M + 1 : 1)>,
                                    shape<dyn>>;
};
template <class A>
struct arg_dim<A, -1> {
  static constexpr int dim = -1;
  using extent = shape<dyn>;
};
template <>
struct arg_dim<tensor_map, 0> {
  static constexpr int dim = 0;
  using extent = shape<dyn>;
};

/// The outputs of every sample stacked along dim O: a Tensor, or each Tensor of a pair / tuple.
template <int O, class BatchExtent, class R>
auto stack_samples(const std::vector<R>& outs) {
  if constexpr (is_tensor_v<R>) {
    using T = typename R::value_type;
    using S = typename R::shape_type;
    constexpr int r = static_cast<int>(S::rank);
    static_assert(O >= -(r + 1) && O <= r, "tenet: func::vmap: out_dims is outside the output's dims");
    constexpr std::size_t o = static_cast<std::size_t>(O < 0 ? O + r + 1 : O);
    using SB = tenet::detail::concat_shapes_t<tenet::detail::take_extents_t<S, 0, o>, BatchExtent,
                                              tenet::detail::take_extents_t<S, o, S::rank>>;
    for (std::size_t i = 1; i < outs.size(); ++i)
      if (outs[i].sizes() != outs[0].sizes())
        throw value_error("tenet: func::vmap: f returned sizes " + tenet::detail::sizes_text(outs[0].sizes()) +
                          " for sample 0 and " + tenet::detail::sizes_text(outs[i].sizes()) + " for sample " +
                          std::to_string(i) +
                          "; vmap needs one output shape for every sample (a data-dependent shape, as "
                          "nonzero's or masked_select's, cannot be batched)");
    std::vector<decltype(outs[0].template unsqueeze<static_cast<std::int64_t>(o)>())> parts;
    parts.reserve(outs.size());
    for (const auto& t : outs) parts.push_back(t.template unsqueeze<static_cast<std::int64_t>(o)>());
    return Tensor<T, SB>(cat<static_cast<std::int64_t>(o)>(parts));
  } else {
    return [&]<std::size_t... K>(std::index_sequence<K...>) {
      auto part = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
        std::vector<std::remove_cvref_t<std::tuple_element_t<J, R>>> v;
        v.reserve(outs.size());
        for (const auto& o : outs) v.push_back(std::get<J>(o));
        return stack_samples<O, BatchExtent>(v);
      };
      return std::make_tuple(part(std::integral_constant<std::size_t, K>{})...);
    }(std::make_index_sequence<std::tuple_size<R>::value>{});
  }
}

/// The allocations f may write into during sample i: its mapped arguments' (the sample's slice).
template <int M, class A>
void mapped_storages(const A& a, std::int64_t i, std::vector<const void*>& out) {
  if constexpr (M >= 0) {
    if constexpr (std::is_same_v<A, tensor_map>) {
      for (const auto& [n, b] : sample_of<M>(a, i).items()) out.push_back(b->storage_id());
    } else {
      out.push_back(a.storage().get());
    }
  }
}

/// What an unmapped argument K of f is, where a write went into its allocation `where` (empty
/// when it is not that argument's).
template <int M, class A>
std::string unmapped_name(const A& a, std::size_t k, const void* where) {
  if constexpr (M < 0) {
    if constexpr (std::is_same_v<A, tensor_map>) {
      for (const auto& [n, b] : a.items())
        if (b->storage_id() == where) return "argument " + std::to_string(k) + "'s \"" + n + "\" (a tensor_map)";
    } else if constexpr (is_tensor_v<A>) {
      if (a.defined() && a.storage().get() == where) return "argument " + std::to_string(k) + " (" + A::shape_type::text() + ")";
    }
  }
  return {};
}

/// Installs a write watch on this thread for one sample (tenet::detail::write_watch): it records
/// the in-place writes into allocations older than the sample.
struct sample_watch {
  tenet::detail::write_watch w;
  sample_watch() {
    w.outer = tenet::detail::current_write_watch();
    tenet::detail::current_write_watch() = &w;
  }
  ~sample_watch() { tenet::detail::current_write_watch() = w.outer; }
  sample_watch(const sample_watch&) = delete;
  sample_watch& operator=(const sample_watch&) = delete;
};

/// The batch size: the common extent of the mapped dims M... of the arguments (value_error when
/// they differ, when none is mapped or when it is 0).
template <int... M, class... A>
std::int64_t batch_size(const A&... a) {
  constexpr int dims[] = {M..., 0};
  std::int64_t batch = -1;
  std::string all;
  bool mismatch = false;
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (
        [&] {
          constexpr int m = dims[K];
          if constexpr (m >= 0) {
            const std::int64_t n = mapped_size<m>(std::get<K>(std::forward_as_tuple(a...)), K);
            all += (all.empty() ? "" : ", ") + std::string("argument ") + std::to_string(K) + ": " + std::to_string(n);
            if (batch < 0) batch = n;
            else if (n != batch) mismatch = true;
          }
        }(),
        ...);
  }(std::index_sequence_for<A...>{});
  if (batch < 0)
    throw value_error("tenet: func::vmap: no argument is mapped (in_dims are all func::none); at least one Tensor "
                      "argument needs a mapped dim");
  if (mismatch)
    throw value_error("tenet: func::vmap: the mapped dims of the arguments have different sizes (" + all +
                      "); every mapped argument needs the same batch size");
  if (batch == 0)
    throw value_error("tenet: func::vmap: the batch is empty (mapped dims of size 0): the output's shape is unknown "
                      "without a sample");
  return batch;
}

template <int O, int... D, class F, class... A>
auto vmap_call(const F& f, const vmap_options& opt, const A&... a) {
  static_assert(sizeof...(D) == sizeof...(A),
                "tenet: func::vmap: in_dims needs one entry per argument of the mapped function (func::none for "
                "an argument that is not mapped)");
  constexpr int dims[] = {mapped_dim<A, D>()..., 0};
  if (opt.chunk_size < 0)
    throw value_error("tenet: func::vmap: chunk_size must be positive (or 0 for none), got " +
                      std::to_string(opt.chunk_size));
  const std::int64_t batch = batch_size<mapped_dim<A, D>()...>(a...);
  auto& gen = tenet::detail::default_generator();
  const auto start = gen.state();
  auto run = [&](std::int64_t i) {
    return [&]<std::size_t... K>(std::index_sequence<K...>) {
      return evaluate_result(f(sample_of<dims[K]>(std::get<K>(std::forward_as_tuple(a...)), i)...));
    }(std::index_sequence_for<A...>{});
  };
  using R = decltype(run(0));
  std::vector<R> outs;
  outs.reserve(static_cast<std::size_t>(batch));
  // An in-place write during a sample into a tensor from outside f that the sample does not map
  // (an unmapped argument, a captured tensor) would land once per sample, one after another,
  // where torch.func.vmap writes a batched value into an unbatched tensor never: an error.
  auto check_writes = [&](const std::vector<tenet::detail::write_watch::write>& writes, std::int64_t i) {
    if (writes.empty()) return;
    std::vector<const void*> mapped;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (mapped_storages<dims[K]>(std::get<K>(std::forward_as_tuple(a...)), i, mapped), ...);
    }(std::index_sequence_for<A...>{});
    for (const auto& wr : writes) {
      const void* where = wr.where;
      if (std::find(mapped.begin(), mapped.end(), where) != mapped.end()) continue;
      std::string what;
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        ((what.empty() ? void(what = unmapped_name<dims[K]>(std::get<K>(std::forward_as_tuple(a...)), K, where))
                       : void()),
         ...);
      }(std::index_sequence_for<A...>{});
      if (what.empty())
        what = "a tensor from outside f that it captured (" + std::to_string(wr.bytes) + " bytes on " + wr.dev.str() + ")";
      throw value_error("tenet: func::vmap: f wrote in place into " + what + ", which vmap does not map, in sample " +
                        std::to_string(i) + ": vmap runs f once per sample, so the samples' writes would land on "
                        "that one tensor one after another (torch.func.vmap refuses an in-place write into an "
                        "unbatched tensor too). Write into a tensor f creates (clone() it inside f), map the "
                        "tensor (in_dims), or make the write outside vmap");
    }
  };
  for (std::int64_t i = 0; i < batch; ++i) {
    if (opt.randomness == randomness::same) gen.set_state(start);
    const auto before = gen.state();
    std::vector<tenet::detail::write_watch::write> writes;
    {
      sample_watch watch;
      outs.push_back(run(i));
      writes = std::move(watch.w.writes);
    }
    check_writes(writes, i);
    const auto after = gen.state();
    if (opt.randomness == randomness::error && (after.seed != before.seed || after.offset != before.offset))
      throw value_error("tenet: func::vmap: f draws random numbers; say how the samples draw them: "
                        "vmap_options{.randomness = func::randomness::different} (each its own) or ::same");
  }
  using E = typename first_extent<arg_dim<std::remove_cvref_t<A>, mapped_dim<A, D>()>...>::type;
  return stack_samples<O, E>(outs);
}

// --- vmap with batching rules (func::batching) ------------------------------------------------

/// The per-sample gradient of an unmapped argument under vmap(grad(f), ..., batching)
/// (batch_rules::tied): its value, and the parts of its gradient, each (n, ...) batch first: the
/// probes of linear's rule, and the gradient of the batched leaf (a copy per sample, made only
/// when an op without the tied rule reads the argument).
template <class T, class S>
struct tie_slot {
  using value_type = T;
  using shape_type = S;
  using BS = tenet::detail::concat_shapes_t<shape<dyn>, S>;
  Tensor<T, S> w;
  std::int64_t n = 0;
  std::optional<Tensor<T, BS>> leaf_;
  std::vector<std::function<void(capture_map&)>> captures;
  std::vector<std::function<Tensor<T, BS>(const capture_map&)>> parts;

  const Tensor<T, BS>& leaf() {
    if (!leaf_) {
      Tensor<T, BS> l = batch_rules::physical(w, n).contiguous();
      l = l.detach();
      l.requires_grad_();
      leaf_ = l;
      captures.push_back([l](capture_map& c) { capture(l, c); });
      parts.push_back([l](const capture_map& c) { return captured(l, c).detach(); });
    }
    return *leaf_;
  }
  /// A part of the gradient: fn of the gradient of probe.
  template <class P, class Fn>
  void add(const P& probe, Fn fn) {
    captures.push_back([probe](capture_map& c) { capture(probe, c); });
    parts.push_back([probe, fn](const capture_map& c) {
      auto r = eval(fn(captured(probe, c).detach())).contiguous();
      return r.template with_layout<BS>(r.sizes(), r.strides(), r.offset());
    });
  }
  void capture_all(capture_map& c) const {
    for (const auto& f : captures) f(c);
  }
  Tensor<T, BS> collect(const capture_map& c) const {
    if (parts.empty()) {
      sizes_t<BS::rank> s{};
      s[0] = n;
      for (std::size_t i = 0; i < S::rank; ++i) s[i + 1] = w.sizes()[i];
      Tensor<T, BS> z(s, w.device());
      z.zero_();
      return z;
    }
    Tensor<T, BS> acc = parts[0](c);
    for (std::size_t k = 1; k < parts.size(); ++k) acc = Tensor<T, BS>(acc + parts[k](c));
    return acc;
  }
};

/// Argument a with its mapped dim M moved to the front (a view).
template <int M, class A>
auto batch_first(const A& a) {
  if constexpr (M == 0) {
    return a;
  } else {
    return [&]<std::size_t... J>(std::index_sequence<J...>) {
      return a.template permute<static_cast<std::int64_t>(M), static_cast<std::int64_t>(J < M ? J : J + 1)...>();
    }(std::make_index_sequence<A::rank - 1>{});
  }
}

/// Samples [start, start + len) of argument a mapped at M, batch dim first; an unmapped argument
/// as it is.
template <int M, class A>
decltype(auto) chunk_of(const A& a, std::int64_t start, std::int64_t len, std::int64_t batch) {
  if constexpr (M < 0) {
    return (a);
  } else {
    static_assert(!std::is_same_v<A, tensor_map>,
                  "tenet: func::vmap: the batching rules (func::batching) take Tensor arguments; map a tensor_map "
                  "(stack_module_state, functional_call) without func::batching (per sample)");
    (void)batch;  // a view of every sample is a narrow too: one type (the batch extent dyn) for each chunk
    return batch_first<M>(a.template narrow<M>(start, len));
  }
}

/// A batch-first physical result of the batched f as one Tensor: a batched value's, or an
/// unbatched one (the same for every sample) expanded over the batch, as torch's vmap does.
template <class R>
auto physical_result(const R& r, std::int64_t n) {
  if constexpr (batch_rules::Batched<R>) return eval(r.p);
  else return eval(batch_rules::physical(r, n));
}
template <class R>
auto physical_results(const R& r, std::int64_t n) {
  if constexpr (requires { std::tuple_size<R>::value; })
    return std::apply([&](const auto&... e) { return std::make_tuple(physical_results(e, n)...); }, r);
  else return physical_result(r, n);
}

/// Chunks' batch-first results joined along the batch dim (each of a tuple).
template <class P>
P join_chunks(std::vector<P>& parts) {
  if (parts.size() == 1) return std::move(parts[0]);
  if constexpr (is_tensor_v<P>) {
    return P(cat<0>(parts));
  } else {
    return [&]<std::size_t... K>(std::index_sequence<K...>) {
      auto one = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
        std::vector<std::tuple_element_t<J, P>> v;
        for (auto& q : parts) v.push_back(std::get<J>(q));
        return join_chunks(v);
      };
      return P(one(std::integral_constant<std::size_t, K>{})...);
    }(std::make_index_sequence<std::tuple_size<P>::value>{});
  }
}

/// The batch-first result as vmap's output: the batch dim moved to O (a view) and the batch
/// extent's type E put in (the first mapped argument's, as the per-sample path gives).
template <int O, class E, class P>
auto place_batch(const P& r) {
  if constexpr (is_tensor_v<P>) {
    using S = tenet::detail::take_extents_t<typename P::shape_type, 1, P::shape_type::rank>;
    constexpr int rs = static_cast<int>(S::rank);
    static_assert(O >= -(rs + 1) && O <= rs, "tenet: func::vmap: out_dims is outside the output's dims");
    constexpr std::size_t o = static_cast<std::size_t>(O < 0 ? O + rs + 1 : O);
    using SB = tenet::detail::concat_shapes_t<tenet::detail::take_extents_t<S, 0, o>, E,
                                              tenet::detail::take_extents_t<S, o, S::rank>>;
    auto moved = [&]<std::size_t... J>(std::index_sequence<J...>) {
      if constexpr (o == 0) return r;
      else return r.template permute<static_cast<std::int64_t>(J < o ? J + 1 : (J == o ? 0 : J))...>();
    }(std::make_index_sequence<S::rank + 1>{});
    return moved.template with_layout<SB>(moved.sizes(), moved.strides(), moved.offset());
  } else {
    return std::apply([](const auto&... e) { return std::make_tuple(place_batch<O, E>(e)...); }, r);
  }
}

/// Entry K of M... (the mapped dim of argument K).
template <std::size_t K, int... M>
constexpr int dim_of() {
  constexpr int ms[] = {M..., 0};
  return ms[K];
}

template <std::size_t K, std::size_t... I>
constexpr bool in_argnums(std::index_sequence<I...>) {
  return ((K == I) || ...);
}

/// One chunk of vmap(f, ..., batching): f called once on batched values. For f = grad(g,
/// argnums<I...>) (per-sample gradients), each differentiated argument is a batched leaf (a
/// mapped one's samples, an unmapped one expanded over the batch: a view) and one backward pass
/// differentiates the sum of g's per-sample values: sample i's value depends on leaf row i alone
/// (no batching rule mixes samples), so row i of the gradient is sample i's gradient, exactly.
/// An unmapped leaf is a copy per sample, not an expanded view: autograd gives a view's gradient
/// through its storage, where the rows of an expanded view are one row (their gradients summed).
template <int... M, class F, class... A>
auto batched_chunk(const F& f, std::int64_t start, std::int64_t len, std::int64_t batch, const A&... a) {
  if constexpr (is_grad_fn_v<F>) {
    return [&]<class G, std::size_t... I>(const grad_fn<G, I...>& gf) {
      check_argnums<false, A...>(argnums_t<I...>{});
      const std::tuple<const A&...> args(a...);
      if (ag::grad_mode() && (std::get<I>(args).requires_grad() || ...))
        throw value_error("tenet: func::vmap(grad(f), ..., func::batching): an enclosing transform or autograd "
                          "differentiates through the per-sample gradients, which the batched backward does not "
                          "record; map grad(f) without func::batching there");
      const ag::grad_mode_guard on(true);
      // the differentiated arguments: a mapped one a leaf over its samples, an unmapped one tied
      auto diff = std::make_tuple([&] {
        using X = std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>;
        if constexpr (dim_of<I, M...>() >= 0) {
          auto l = chunk_of<dim_of<I, M...>()>(std::get<I>(args), start, len, batch).detach();
          l.requires_grad_();
          return l;
        } else {
          auto slot = std::make_shared<tie_slot<typename X::value_type, typename X::shape_type>>();
          slot->w = std::get<I>(args).detach();
          slot->n = len;
          return slot;
        }
      }()...);
      auto value = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) -> decltype(auto) {
        constexpr int p = position<K, I...>();
        if constexpr (p >= 0) {
          const auto& d = std::get<static_cast<std::size_t>(p)>(diff);
          if constexpr (dim_of<K, M...>() >= 0) return batch_rules::wrap(d);
          else return batch_rules::tied<std::remove_cvref_t<decltype(*d)>>{d};
        } else if constexpr (dim_of<K, M...>() >= 0) {
          return batch_rules::wrap(chunk_of<dim_of<K, M...>()>(std::get<K>(args), start, len, batch));
        } else {
          return (std::get<K>(args));
        }
      };
      auto y = [&]<std::size_t... K>(std::index_sequence<K...>) {
        return gf.f(value(std::integral_constant<std::size_t, K>{})...);
      }(std::index_sequence_for<A...>{});
      using Y = std::remove_cvref_t<decltype(y)>;
      capture_map c;
      std::apply([&](const auto&... d) {
        ([&] {
          if constexpr (is_tensor_v<std::remove_cvref_t<decltype(d)>>) capture(d, c);
          else d->capture_all(c);
        }(), ...);
      }, diff);
      if constexpr (batch_rules::Batched<Y>) {
        static_assert(Y::rank == 0,
                      "tenet: func::grad: f must return a scalar (a rank-0 tensor, shape<>); for other outputs use "
                      "func::vmap(func::vjp ...) or func::jacrev");
        static_assert(is_floating_v<typename Y::value_type>, "tenet: func::grad: f must return a floating tensor");
        // the samples' values summed: row i of each gradient is sample i's
        auto total = eval(tenet::sum(batch_rules::phys(y)));
        if (total.requires_grad()) {
          decltype(total) one(total.sizes(), total.device());
          one.fill_(1);
          ag::gradients_into(total, one, c, {.retain_graph = false, .create_graph = false, .allow_unused = true});
        }
      }
      return single_or_tuple(std::apply([&](const auto&... d) {
        return std::make_tuple([&]() {
          if constexpr (is_tensor_v<std::remove_cvref_t<decltype(d)>>) return captured(d, c).detach();
          else return d->collect(c);
        }()...);
      }, diff));
    }(f);
  } else {
    return physical_results(f(batch_rules::wrap_if<M>(chunk_of<M>(a, start, len, batch))...), len);
  }
}

template <int O, int... D, class F, class... A>
auto vmap_batched_call(const F& f, const vmap_options& opt, const A&... a) {
  static_assert(sizeof...(D) == sizeof...(A),
                "tenet: func::vmap: in_dims needs one entry per argument of the mapped function (func::none for "
                "an argument that is not mapped)");
  if (opt.chunk_size < 0)
    throw value_error("tenet: func::vmap: chunk_size must be positive (or 0 for none), got " +
                      std::to_string(opt.chunk_size));
  const std::int64_t batch = batch_size<mapped_dim<A, D>()...>(a...);
  auto& gen = tenet::detail::default_generator();
  const auto before = gen.state();
  const std::int64_t step = opt.chunk_size > 0 && opt.chunk_size < batch ? opt.chunk_size : batch;
  using P = decltype(batched_chunk<mapped_dim<A, D>()...>(f, 0, batch, batch, a...));
  std::vector<P> parts;
  for (std::int64_t s = 0; s < batch; s += step) {
    const std::int64_t len = std::min(step, batch - s);
    if (opt.randomness == randomness::same) gen.set_state(before);
    const auto start = gen.state();
    parts.push_back(batched_chunk<mapped_dim<A, D>()...>(f, s, len, batch, a...));
    const auto after = gen.state();
    if (after.seed != start.seed || after.offset != start.offset) {
      if (opt.randomness == randomness::error)
        throw value_error("tenet: func::vmap: f draws random numbers; say how the samples draw them: "
                          "vmap_options{.randomness = func::randomness::different} (each its own) or ::same");
      if (opt.randomness == randomness::different)
        throw value_error("tenet: func::vmap: f draws random numbers with randomness::different, but under the "
                          "batching rules (func::batching) f runs once for the batch and its draws would be shared "
                          "by every sample; map f without func::batching (per sample) for different draws, or "
                          "use randomness::same");
    }
  }
  using E = typename first_extent<arg_dim<std::remove_cvref_t<A>, mapped_dim<A, D>()>...>::type;
  return place_batch<O, E>(join_chunks(parts));
}

template <class A>
constexpr int default_in_dim() {
  return is_tensor_v<A> || std::is_same_v<A, tensor_map> ? 0 : none;
}
}  // namespace detail

/// torch.func.stack_module_state: the parameters and the buffers of modules of one type, each
/// stacked along a new dim 0 (detached), by their dotted names; with vmap over them and
/// functional_call on one module of the type, one call runs every model (model ensembling).
/// `models` is a range of modules or of pointers to modules.
template <class Range>
std::pair<tensor_map, tensor_map> stack_module_state(const Range& models) {
  auto module_of = [](const auto& m) -> const nn::Module& {
    if constexpr (std::is_pointer_v<std::remove_cvref_t<decltype(m)>>) return *m;
    else return m;
  };
  auto stacked = [&](bool params) {
    tensor_map out;
    std::vector<std::vector<std::pair<std::string, nn::tensor_ref>>> all;
    for (const auto& m : models) all.push_back(params ? module_of(m).named_parameters() : module_of(m).named_buffers());
    if (all.empty()) throw value_error("tenet: func::stack_module_state needs at least one module");
    for (std::size_t i = 0; i < all[0].size(); ++i) {
      const std::string& name = all[0][i].first;
      std::vector<std::shared_ptr<nn::detail::bound_tensor>> rest;
      for (std::size_t k = 1; k < all.size(); ++k) {
        if (all[k].size() != all[0].size() || all[k][i].first != name)
          throw value_error("tenet: func::stack_module_state: module " + std::to_string(k) +
                            " has other parameters or buffers than module 0 (at \"" + name + "\")");
        rest.push_back(all[k][i].second.slot().bound());
      }
      out.set(name, all[0][i].second.slot().bound()->stack0(rest, name));
    }
    return out;
  };
  return {stacked(true), stacked(false)};
}

/// torch.func.vmap: f mapped over dim in_dims of its arguments (0 of every Tensor argument by
/// default; func::none leaves one unmapped), its outputs (a Tensor, or a pair / tuple of them)
/// stacked along out_dims (0). The batch extent is the first mapped argument's (static or dyn).
///
/// This vmap runs f once per sample and stacks the results (torch's fallback for an op without
/// a batching rule): exact for every op, composable (vmap(grad(f)), vmap(vmap(f)), grad of a vmap),
/// but it does not batch the computation; with func::batching (below) f runs once on the batch.
template <class F, int... D, int O>
auto vmap(F f, in_dims_t<D...>, out_dims_t<O>, vmap_options opt = {}) {
  return [f = std::move(f), opt](const auto&... a) { return detail::vmap_call<O, D...>(f, opt, a...); };
}
template <class F, int... D>
auto vmap(F f, in_dims_t<D...> d, vmap_options opt = {}) {
  return vmap(std::move(f), d, out_dims<0>, opt);
}
template <class F>
auto vmap(F f, vmap_options opt = {}) {
  return [f = std::move(f), opt](const auto&... a) {
    return detail::vmap_call<0, detail::default_in_dim<std::remove_cvref_t<decltype(a)>>()...>(f, opt, a...);
  };
}

/// vmap with batching rules: func::vmap(f[, in_dims<D...>[, out_dims<O>]], func::batching[, opt])
/// calls f once, on batched values (include/tenet/func/batching.hpp: each op of f applies its
/// batching rule), where the plain vmap calls it once per sample. Same results (up to float
/// reassociation), same in_dims / out_dims / chunk_size / randomness (::different is an error
/// when f draws: its draws would be shared). Every op f calls on a mapped value needs a rule
/// (docs/func.md lists them): an op without one is a compile error, and such an f is mapped
/// without func::batching. vmap(grad(f), ..., batching) gives per-sample gradients from one
/// batched backward pass.
struct batching_t {};
inline constexpr batching_t batching{};
template <class F, int... D, int O>
auto vmap(F f, in_dims_t<D...>, out_dims_t<O>, batching_t, vmap_options opt = {}) {
  return [f = std::move(f), opt](const auto&... a) { return detail::vmap_batched_call<O, D...>(f, opt, a...); };
}
template <class F, int... D>
auto vmap(F f, in_dims_t<D...> d, batching_t b, vmap_options opt = {}) {
  return vmap(std::move(f), d, out_dims<0>, b, opt);
}
template <class F>
auto vmap(F f, batching_t, vmap_options opt = {}) {
  return [f = std::move(f), opt](const auto&... a) {
    return detail::vmap_batched_call<0, detail::default_in_dim<std::remove_cvref_t<decltype(a)>>()...>(f, opt, a...);
  };
}

// ---------------------------------------------------------------------------------------------
// jacrev, jacfwd, hessian with func::batching: every row / column in one batched pass

namespace detail {

/// Argument x as the differentiated value of a batched Jacobian: n copies of it, (n, x...) batch
/// first. Where an enclosing level differentiates x, the copies are recorded from x (gradients
/// flow on to it); else they are a fresh leaf of this level.
template <class T, class S>
auto batched_copies(const Tensor<T, S>& x, std::int64_t n, level& lv, const char* who) {
  if (!x.defined()) throw value_error(std::string("tenet: func::") + who + ": a differentiated argument is undefined");
  using BS = tenet::detail::concat_shapes_t<shape<dyn>, S>;
  if (lv.outer && x.requires_grad()) {
    Tensor<T, BS> c = batch_rules::physical(x, n).clone();
    return c;
  }
  Tensor<T, BS> c = batch_rules::physical(x.detach(), n).clone();
  c.requires_grad_();
  lv.own.insert(c.autograd_meta().get());
  return c;
}

/// A tensor of like's sizes (n, ...) batch first, 0 but for the rows [off, off + count): row
/// off + r holds a 1 at flat position pos(r) of the row. The identity basis (pos(r) = r) is the
/// one-hot cotangent of every output element (jacrev) or tangent of every input element (jacfwd).
template <class P, class Pos>
P basis_rows(const P& like, std::int64_t off, std::int64_t count, Pos pos) {
  P e(like.sizes(), tenet::cpu);
  e.zero_();
  const std::int64_t per = like.sizes()[0] > 0 ? like.numel() / like.sizes()[0] : 0;
  for (std::int64_t r = 0; r < count; ++r) e.data()[(off + r) * per + pos(r)] = 1;
  return like.device().is_cpu() ? e : e.to(like.device());
}

/// A contiguous tensor (or a contiguous run of rows of one) viewed as a Jacobian block of type J.
template <class J, class Flat>
J as_block(const Flat& all, const typename J::sizes_type& s) {
  return all.template with_layout<typename J::shape_type>(s, tenet::detail::contiguous_strides(s), all.offset());
}

/// The sizes a ++ b ++ c of a block.
template <class J, std::size_t A, std::size_t B, std::size_t C = 0>
typename J::sizes_type block_sizes(const sizes_t<A>& a, const sizes_t<B>& b, const sizes_t<C>& c = {}) {
  typename J::sizes_type s{};
  for (std::size_t d = 0; d < A; ++d) s[d] = a[d];
  for (std::size_t d = 0; d < B; ++d) s[A + d] = b[d];
  for (std::size_t d = 0; d < C; ++d) s[A + B + d] = c[d];
  return s;
}

/// The sizes of one sample of a batch-first physical tensor.
template <std::size_t R>
sizes_t<R - 1> sample_sizes(const sizes_t<R>& s) {
  sizes_t<R - 1> r{};
  for (std::size_t d = 0; d + 1 < R; ++d) r[d] = s[d + 1];
  return r;
}

/// f's output without vmap (its type fixes the Jacobian's: the batched path answers with it).
template <bool Aux, class F, class... A>
using unbatched_output_t = std::remove_cvref_t<decltype(split_output<Aux>(std::declval<const F&>()(std::declval<const A&>()...)).first)>;

template <class... A>
constexpr bool no_maps() {
  return (!std::is_same_v<std::remove_cvref_t<A>, tensor_map> && ...);
}

/// f's output where it does not read a differentiated argument (the same for every sample): its
/// Jacobian is 0.
template <class Y>
struct independent_output {
  Y y;
};
template <class X>
inline constexpr bool is_independent_v = false;
template <class Y>
inline constexpr bool is_independent_v<independent_output<Y>> = true;

/// f called once with the batched copies xs (batch first) at the argnums I..., the other arguments
/// as they are (the same for every sample), grad mode on: f's output (not its aux), physical,
/// batch first, or an independent_output.
template <bool Aux, class F, std::size_t... I, class... A, class... X>
auto call_batched(const F& f, argnums_t<I...>, const std::tuple<const A&...>& args, const std::tuple<X...>& xs) {
  const ag::grad_mode_guard on(true);
  auto out = [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto pick = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) -> decltype(auto) {
      constexpr int p = position<J, I...>();
      if constexpr (p >= 0) return batch_rules::wrap<true>(std::get<static_cast<std::size_t>(p)>(xs));  // copies: uniform
      else return std::get<J>(args);
    };
    return f(pick(std::integral_constant<std::size_t, K>{})...);
  }(std::index_sequence_for<A...>{});
  auto&& y = [&]() -> decltype(auto) {
    if constexpr (Aux) {
      static_assert(std::tuple_size<std::remove_cvref_t<decltype(out)>>::value == 2,
                    "tenet: func: with has_aux, f must return a pair (output, aux)");
      return std::get<0>(out);
    } else {
      return (out);
    }
  }();
  using Yb = std::remove_cvref_t<decltype(y)>;
  if constexpr (batch_rules::Batched<Yb>) {
    return eval(batch_rules::phys(y));
  } else {
    auto e = eval(y);
    return independent_output<decltype(e)>{std::move(e)};
  }
}

/// The batch size of a batched Jacobian: numel of f's output (jacrev), known from its type when
/// static, else from one run of f without vmap (which has_aux needs anyway, for the aux).
template <bool Aux, class Y, class F, class... A>
auto output_probe(const F& f, const A&... a) {
  if constexpr (Aux) {
    return split_output<Aux>(f(a...));
  } else if constexpr (Y::shape_type::is_static) {
    return std::make_pair(Y::shape_type::static_numel, std::monostate{});
  } else {
    const ag::grad_mode_guard off(false);
    return std::make_pair(split_output<Aux>(f(a...)).first.numel(), std::monostate{});
  }
}
template <class P>
std::int64_t numel_of_probe(const P& p) {
  if constexpr (std::is_integral_v<P>) return p;
  else return p.numel();
}

/// jacrev as one batched vjp: f runs once on m = numel(f(x)) copies of each differentiated
/// argument, and one backward pass from the identity basis of cotangents (sample i's cotangent is
/// e_i) gives the copies' gradients: row i is e_i^T J (no batching rule mixes samples), so the
/// gradient of the copies, (m, x...), is the Jacobian block as it lies.
template <bool Aux, class F, std::size_t... I, class... A>
auto jacrev_batched_at(const F& f, argnums_t<I...> nums, const A&... a) {
  check_argnums<true, A...>(nums);
  static_assert(no_maps<std::tuple_element_t<I, std::tuple<A...>>...>(),
                "tenet: func::jacrev(f, ..., func::batching) takes Tensor arguments; differentiate a tensor_map "
                "without func::batching");
  using Y = unbatched_output_t<Aux, F, A...>;
  using T = typename Y::value_type;
  check_jacobian_dtypes<Y, std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>...>();
  const std::tuple<const A&...> args(a...);
  level lv{ag::grad_mode(), {}};
  auto probe = output_probe<Aux, Y>(f, a...);
  const std::int64_t m = numel_of_probe(probe.first);
  auto xs = std::make_tuple(batched_copies(std::get<I>(args), m, lv, "jacrev")...);
  auto yp = call_batched<Aux>(f, nums, args, xs);
  bool graph = false;
  using Tp = std::tuple<jacobian_t<T, typename Y::shape_type,
                                   typename std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>::shape_type>...>;
  auto jac = [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto xsz = std::make_tuple(std::get<I>(args).sizes()...);
    if constexpr (is_independent_v<decltype(yp)>) {
      return Tp{as_block<std::tuple_element_t<K, Tp>>(
          zeros_of(std::get<K>(xs)), block_sizes<std::tuple_element_t<K, Tp>>(yp.y.sizes(), std::get<K>(xsz)))...};
    } else {
      const auto& y = yp;
      const auto ys = sample_sizes(y.sizes());
      graph = keeps_graph(lv.outer && reaches_outer(y.autograd_meta(), lv), "jacrev");
      auto g = gradients(y, xs, basis_rows(y, 0, m, [](std::int64_t r) { return r; }), graph, false);
      return Tp{as_block<std::tuple_element_t<K, Tp>>(std::get<K>(g).contiguous(),
                                                       block_sizes<std::tuple_element_t<K, Tp>>(ys, std::get<K>(xsz)))...};
    }
  }(std::index_sequence_for<decltype(I)...>{});
  if constexpr (Aux) {
    auto aux = std::move(probe.second);
    if (!graph) return std::make_pair(single_or_tuple(detach_all(std::move(jac))), detach_if_tensor(std::move(aux)));
    return std::make_pair(single_or_tuple(std::move(jac)), std::move(aux));
  } else {
    return std::make_pair(single_or_tuple(graph ? std::move(jac) : detach_all(std::move(jac))), std::monostate{});
  }
}

/// The block of type J filled with zeros (f does not read the argument, or a factor is empty).
template <class J>
J zero_block(const typename J::sizes_type& s, tenet::device d) {
  J z(s, d);
  z.zero_();
  return z;
}

/// Block B of a Jacobian from the output's tangents (N, y...): rows [off, off + n) are its n
/// columns of m values each, transposed into (y..., x...).
template <class B, class P, std::size_t RY, std::size_t RX>
B columns_block(const P& t, std::int64_t off, std::int64_t n, std::int64_t m, const sizes_t<RY>& ys,
                const sizes_t<RX>& xs) {
  auto rows = t.template narrow<0>(off, n).template reshape<dyn, dyn>(n, m);
  Tensor<typename B::value_type, dyn_shape<2>> cols = rows.t().contiguous();
  return as_block<B>(cols, block_sizes<B>(ys, xs));
}

/// jacfwd as one batched tangent pass: f runs once (recorded) on N = sum of numel(x_k) copies of
/// the differentiated arguments, rows [off_k, off_k + numel(x_k)) of argument k's copies carrying
/// the identity basis as tangents (the other arguments' tangents 0 there), and one forward-mode
/// pass gives the output's tangent, (N, y...): row off_k + j is J_k e_j, the column, so block k is
/// those rows transposed. Where an enclosing level differentiates through the call, the tangent is
/// taken in the double-VJP form (J t = d<J^T u, t>/du), which records every step.
template <class F, std::size_t... I, class... A>
auto jacfwd_batched_at(const F& f, argnums_t<I...> nums, const A&... a) {
  check_argnums<true, A...>(nums);
  static_assert(no_maps<std::tuple_element_t<I, std::tuple<A...>>...>(),
                "tenet: func::jacfwd(f, ..., func::batching) takes Tensor arguments; differentiate a tensor_map "
                "without func::batching");
  using Y = unbatched_output_t<false, F, A...>;
  using T = typename Y::value_type;
  check_jacobian_dtypes<Y, std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>...>();
  static_assert(is_floating_v<T>, "tenet: func: f must return a floating tensor");
  constexpr std::size_t k = sizeof...(I);
  const std::tuple<const A&...> args(a...);
  level lv{ag::grad_mode(), {}};
  const std::array<std::int64_t, k> n{std::get<I>(args).numel()...};
  std::array<std::int64_t, k> off{};
  std::int64_t total = 0;
  for (std::size_t j = 0; j < k; ++j) off[j] = std::exchange(total, total + n[j]);
  auto xs = std::make_tuple(batched_copies(std::get<I>(args), total, lv, "jacfwd")...);
  auto yp = call_batched<false>(f, nums, args, xs);
  using Tp = std::tuple<jacobian_t<T, typename Y::shape_type,
                                   typename std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>::shape_type>...>;
  const auto xsz = std::make_tuple(std::get<I>(args).sizes()...);
  bool graph = false;
  auto jac = [&]<std::size_t... K>(std::index_sequence<K...>) {
    if constexpr (is_independent_v<decltype(yp)>) {
      return Tp{zero_block<std::tuple_element_t<K, Tp>>(
          block_sizes<std::tuple_element_t<K, Tp>>(yp.y.sizes(), std::get<K>(xsz)), yp.y.device())...};
    } else {
      const auto& y = yp;
      using P = std::remove_cvref_t<decltype(y)>;
      const auto ys = sample_sizes(y.sizes());
      if (total == 0)
        return Tp{zero_block<std::tuple_element_t<K, Tp>>(
            block_sizes<std::tuple_element_t<K, Tp>>(ys, std::get<K>(xsz)), y.device())...};
      const std::int64_t m = y.numel() / total;
      graph = keeps_graph(lv.outer && reaches_outer(y.autograd_meta(), lv), "jacfwd");
      const auto seeds = std::make_tuple(basis_rows(std::get<K>(xs), off[K], n[K], [](std::int64_t r) { return r; })...);
      P t;
      if (!y.requires_grad()) {
        t = zeros_of(y);
      } else if (!graph) {
        ag::jvp_context ctx;
        ((ctx.seeds[std::get<K>(xs).autograd_meta().get()] =
              ag::grad_tensor<T, std::remove_cvref_t<decltype(std::get<K>(xs))>::rank>(std::get<K>(seeds))),
         ...);
        const ag::grad_mode_guard off_(false);
        const device_guard on_device(y.device());
        t = P(ag::meta_tangent<T, P::rank>(y.autograd_meta(), y.sizes(), ctx));
      } else {
        if constexpr (TENET_AUTOGRAD >= 2) {
          const ag::grad_mode_guard on(true);
          P u = zeros_of(y);
          u.requires_grad_();
          auto gq = gradients(y, xs, u, true, true);
          Tensor<T, shape<>> s(sizes_t<0>{}, y.device());
          s.zero_();
          ((s = Tensor<T, shape<>>(s + sum(std::get<K>(gq) * std::get<K>(seeds)))), ...);
          if (!s.requires_grad()) {
            t = zeros_of(y);
          } else {
            P jt = autograd::grad(s, u, {.retain_graph = true, .create_graph = true, .allow_unused = true});
            t = jt.defined() ? jt : zeros_of(y);
          }
        }
      }
      return Tp{columns_block<std::tuple_element_t<K, Tp>>(t, off[K], n[K], m, ys, std::get<K>(xsz))...};
    }
  }(std::index_sequence_for<decltype(I)...>{});
  return std::make_pair(single_or_tuple(graph ? std::move(jac) : detach_all(std::move(jac))), graph);
}

/// jacfwd(f, has_aux, batching): the aux from one run of f without vmap (the batched run's is
/// per sample), detached unless an enclosing level differentiates through the call.
template <class F, std::size_t... I, class... A>
auto jacfwd_batched_aux_at(const F& f, argnums_t<I...> nums, const A&... a) {
  using R = std::remove_cvref_t<decltype(f(a...))>;
  static_assert(std::tuple_size<R>::value == 2, "tenet: func: with has_aux, f must return a pair (output, aux)");
  auto aux = std::get<1>(f(a...));
  auto out = [&f](const auto&... x) { return std::get<0>(f(x...)); };
  auto jr = jacfwd_batched_at(out, nums, a...);
  return std::make_pair(std::move(jr.first), jr.second ? std::move(aux) : detach_if_tensor(std::move(aux)));
}

/// hessian as one batched reverse-over-reverse pass: f runs once on N = numel(y) * sum of
/// numel(x_r) copies of the arguments. Rows (r, i, a) (argnum r, output element i, element a of
/// x_r) take the cotangent e_i (one recorded backward: row (r, i, a) of the copies' gradient
/// g_r is grad y_i), and the second backward differentiates the sum over rows of g_r[a]: row
/// (r, i, a) of argument c's copies' gradient is d/dx_c of dy_i/dx_r[a], block (r, c) of the
/// Hessian at (i, a, ...) as it lies. torch's hessian is jacfwd(jacrev(f)): the same derivatives
/// (second derivatives commute) up to float reassociation.
template <class F, std::size_t... I, class... A>
auto hessian_batched_at(const F& f, argnums_t<I...> nums, const A&... a) {
  check_argnums<true, A...>(nums);
  static_assert(no_maps<std::tuple_element_t<I, std::tuple<A...>>...>(),
                "tenet: func::hessian(f, ..., func::batching) takes Tensor arguments");
  using Y = unbatched_output_t<false, F, A...>;
  using T = typename Y::value_type;
  check_jacobian_dtypes<Y, std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>...>();
  static_assert(is_floating_v<T>, "tenet: func: f must return a floating tensor");
  constexpr std::size_t k = sizeof...(I);
  const std::tuple<const A&...> args(a...);
  level lv{ag::grad_mode(), {}};
  const std::int64_t m = numel_of_probe(output_probe<false, Y>(f, a...).first);
  const std::array<std::int64_t, k> n{std::get<I>(args).numel()...};
  std::array<std::int64_t, k> off{};
  std::int64_t total = 0;
  for (std::size_t j = 0; j < k; ++j) off[j] = std::exchange(total, total + m * n[j]);
  auto xs = std::make_tuple(batched_copies(std::get<I>(args), total, lv, "hessian")...);
  auto yp = call_batched<false>(f, nums, args, xs);
  using Xs = std::tuple<std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>...>;
  const auto xsz = std::make_tuple(std::get<I>(args).sizes()...);
  auto ysz = [&] {
    if constexpr (is_independent_v<decltype(yp)>) return yp.y.sizes();
    else return sample_sizes(yp.sizes());
  }();
  const tenet::device dev = std::get<0>(xs).device();
  bool graph = false;
  // h[c]: the gradient of argument c's copies in the second backward (empty: zero blocks)
  std::tuple<std::optional<std::remove_cvref_t<decltype(std::get<I>(xs))>>...> h;
  if constexpr (!is_independent_v<decltype(yp)>) {
    const auto& y = yp;
    keeps_graph(total > 0 && y.requires_grad(), "hessian");  // the first backward is recorded
    graph = keeps_graph(lv.outer && reaches_outer(y.autograd_meta(), lv), "hessian");
    if constexpr (TENET_AUTOGRAD >= 2) {
      if (total > 0 && y.requires_grad()) {
        const ag::grad_mode_guard on(true);
        auto section = [&](std::int64_t row) {
          std::size_t r = 0;
          while (r + 1 < k && row >= off[r + 1]) ++r;
          return r;
        };
        auto g = gradients(y, xs, basis_rows(y, 0, total, [&](std::int64_t row) {
                             const std::size_t r = section(row);
                             return (row - off[r]) / n[r];  // output element i
                           }), true, true);
        Tensor<T, shape<>> s(sizes_t<0>{}, y.device());
        s.zero_();
        [&]<std::size_t... R>(std::index_sequence<R...>) {
          ((s = Tensor<T, shape<>>(s + sum(std::get<R>(g) * basis_rows(std::get<R>(xs), off[R], m * n[R], [&](std::int64_t row) {
                                                             return row % n[R];  // element a of x_r
                                                           })))),
           ...);
        }(std::index_sequence_for<decltype(I)...>{});
        if (s.requires_grad()) {
          Tensor<T, shape<>> one(sizes_t<0>{}, y.device());
          one.fill_(1);
          auto hh = gradients(s, xs, one, graph, false);
          [&]<std::size_t... C>(std::index_sequence<C...>) {
            ((std::get<C>(h) = std::get<C>(hh).contiguous()), ...);
          }(std::index_sequence_for<decltype(I)...>{});
        }
      }
    }
  }
  auto block = [&]<std::size_t R, std::size_t C>(std::integral_constant<std::size_t, R>, std::integral_constant<std::size_t, C>) {
    using Sy = typename Y::shape_type;
    using B = Tensor<T, tenet::detail::concat_shapes_t<tenet::detail::concat_shapes_t<Sy, typename std::tuple_element_t<R, Xs>::shape_type>,
                                                       typename std::tuple_element_t<C, Xs>::shape_type>>;
    const auto sz = block_sizes<B>(ysz, std::get<R>(xsz), std::get<C>(xsz));
    B b = std::get<C>(h) ? as_block<B>(std::get<C>(h)->template narrow<0>(off[R], m * n[R]), sz) : zero_block<B>(sz, dev);
    return graph ? b : b.detach();
  };
  if constexpr (k == 1) {
    return block(std::integral_constant<std::size_t, 0>{}, std::integral_constant<std::size_t, 0>{});
  } else {
    return [&]<std::size_t... R>(std::index_sequence<R...>) {
      auto row = [&]<std::size_t Rr>(std::integral_constant<std::size_t, Rr> r) {
        return [&]<std::size_t... C>(std::index_sequence<C...>) {
          return std::make_tuple(block(r, std::integral_constant<std::size_t, C>{})...);
        }(std::index_sequence_for<decltype(I)...>{});
      };
      return std::make_tuple(row(std::integral_constant<std::size_t, R>{})...);
    }(std::index_sequence_for<decltype(I)...>{});
  }
}

}  // namespace detail

/// jacrev(f[, argnums][, has_aux], func::batching): the Jacobian as one batched vjp. f runs once
/// on numel(f(x)) copies of each differentiated argument, through vmap's batching rules, and one
/// backward pass from the identity basis of cotangents gives every row; the result is
/// jacrev(f)'s (type, value up to float reassociation). Every op f applies to a differentiated
/// argument needs a batching rule (docs/func.md): an op without one is a compile error, and such
/// an f takes jacrev without func::batching.
template <class F, std::size_t... I>
auto jacrev(F f, argnums_t<I...> nums, batching_t) {
  return [f = std::move(f), nums](const auto&... a) { return detail::jacrev_batched_at<false>(f, nums, a...).first; };
}
template <class F, std::size_t... I>
auto jacrev(F f, argnums_t<I...> nums, has_aux_t, batching_t) {
  return [f = std::move(f), nums](const auto&... a) { return detail::jacrev_batched_at<true>(f, nums, a...); };
}
template <class F>
auto jacrev(F f, batching_t b) {
  return jacrev(std::move(f), argnums<0>, b);
}
template <class F>
auto jacrev(F f, has_aux_t, batching_t b) {
  return jacrev(std::move(f), argnums<0>, has_aux, b);
}

/// jacfwd(f[, argnums][, has_aux], func::batching): the Jacobian as one batched tangent pass (f
/// recorded once on numel(x) copies, the identity basis as their tangents); jacfwd(f)'s type and
/// values. The same batching-rule requirement as jacrev's.
template <class F, std::size_t... I>
auto jacfwd(F f, argnums_t<I...> nums, batching_t) {
  return [f = std::move(f), nums](const auto&... a) { return detail::jacfwd_batched_at(f, nums, a...).first; };
}
template <class F, std::size_t... I>
auto jacfwd(F f, argnums_t<I...> nums, has_aux_t, batching_t) {
  return [f = std::move(f), nums](const auto&... a) { return detail::jacfwd_batched_aux_at(f, nums, a...); };
}
template <class F>
auto jacfwd(F f, batching_t b) {
  return jacfwd(std::move(f), argnums<0>, b);
}
template <class F>
auto jacfwd(F f, has_aux_t, batching_t b) {
  return jacfwd(std::move(f), argnums<0>, has_aux, b);
}

/// hessian(f[, argnums], func::batching): every second derivative in one batched pass (f once on
/// numel(f(x)) * numel(x) copies, two backward passes, the first recorded: TENET_AUTOGRAD=2);
/// hessian(f)'s type and values.
template <class F, std::size_t... I>
auto hessian(F f, argnums_t<I...> nums, batching_t) {
  return [f = std::move(f), nums](const auto&... a) { return detail::hessian_batched_at(f, nums, a...); };
}
template <class F>
auto hessian(F f, batching_t b) {
  return hessian(std::move(f), argnums<0>, b);
}

}  // namespace tenet::func
