#pragma once
// vmap's batching rules (issue 33): the batched tensor that a function mapped with
// func::vmap(f, ..., func::batching) receives in place of one sample, and the rule of each op it
// supports. A batched value holds the whole batch as one physical expression with the batch dim
// first; its type answers as one sample's (shape_type, rank, sizes() are the sample's), so shape
// errors in f stay compile errors. Each op below applies its rule to the physical operands and
// returns a batched result: pointwise ops broadcast against the batch dim (an unbatched operand
// aligns with the sample's trailing dims, a batched one of lower rank gets size-1 dims after the
// batch dim), dims given to reductions / softmax / views shift by one (negative dims count from
// the end and stay), matmul batches. No op ever mixes samples, which is what makes the results
// exact and the per-sample gradients of vmap(grad(f)) exact (func.hpp).
//
// The rules are found by argument-dependent lookup, as overloads beside tenet's own (which take
// Expressions; a batched value is not one): an unqualified call `sum(x)`, `linear(x, w, b)` in f
// reaches them, a qualified `tenet::sum(x)` does not.
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <tenet/autograd.hpp>  // custom_function (uniform_rows_matmul)
#include <tenet/error.hpp>
#include <tenet/losses.hpp>
#include <tenet/nn_functional.hpp>
#include <tenet/ops.hpp>
#include <tenet/tensor.hpp>

namespace tenet::func::batch_rules {

template <class P, bool Uniform = false>
struct batched;

template <class Slot>
struct tied;

template <class X>
inline constexpr bool is_batched_v = false;
template <class P, bool U>
inline constexpr bool is_batched_v<batched<P, U>> = true;
template <class Slot>
inline constexpr bool is_batched_v<tied<Slot>> = true;

/// A batched value (vmap's batching rules).
template <class X>
concept Batched = is_batched_v<std::remove_cvref_t<X>>;
/// An operand beside a batched one: an unbatched expression (the same for every sample) or a number.
template <class X>
concept Plain = Expression<X> || Scalar<X>;
template <class X>
concept Operand = Batched<X> || Plain<X>;

template <bool Uniform = false, class P>
batched<P, Uniform> wrap(P p) {
  return batched<P, Uniform>{std::move(p)};
}

/// Whether every sample of x holds the same values (a batched value marked uniform, an unbatched
/// operand), so that an op may compute one sample's values for all. The batched Jacobians
/// (func.hpp: jacrev / jacfwd / hessian with func::batching) pass copies of one argument, marked
/// uniform: the ops below keep the mark where all their batched operands have it, and matmul
/// uses it to compute the forward of one sample (uniform_rows_matmul). vmap's values are not
/// uniform.
template <class X>
constexpr bool uniform_v() {
  using Y = std::remove_cvref_t<X>;
  if constexpr (requires { Y::uniform; }) return Y::uniform;
  else return !is_batched_v<Y>;
}

/// Dim D of a sample of rank R as a dim of the physical value (batch dim first): D + 1 for D >= 0,
/// D itself for D < 0 (it counts from the end, which the batch dim does not change).
template <std::int64_t D>
constexpr std::int64_t phys_dim() {
  return D >= 0 ? D + 1 : D;
}
/// D of a sample of rank R, checked against [-R, R) at compile time.
template <std::int64_t D, std::size_t R>
constexpr std::int64_t checked_dim() {
  static_assert(D >= -static_cast<std::int64_t>(R) && D < static_cast<std::int64_t>(R),
                "tenet: func::vmap: a dim is outside the sample's dims (the batching rules check dims against "
                "one sample's rank, as f would see it without vmap)");
  return phys_dim<D>();
}

template <class P, bool Uniform>
struct batched {
  static_assert(Expression<P>, "tenet: func::vmap: a batched value holds an expression");
  P p;  // the whole batch, batch dim first
  static constexpr bool uniform = Uniform;  // every sample the same values (uniform_v)

  using value_type = value_type_of<P>;
  using physical_shape = shape_of<P>;
  using shape_type = tenet::detail::take_extents_t<physical_shape, 1, physical_shape::rank>;
  static constexpr std::size_t rank = shape_type::rank;

  /// One sample's sizes.
  sizes_t<rank> sizes() const {
    const auto s = p.sizes();
    sizes_t<rank> r{};
    for (std::size_t i = 0; i < rank; ++i) r[i] = s[i + 1];
    return r;
  }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto e : sizes()) n *= e;
    return n;
  }
  std::int64_t batch_size() const { return p.sizes()[0]; }

  // --- views: the sample's dims shifted past the batch dim ---------------------------------
  template <std::int64_t D>
  auto unsqueeze() const {
    static_assert(D >= -static_cast<std::int64_t>(rank) - 1 && D <= static_cast<std::int64_t>(rank),
                  "tenet: func::vmap: unsqueeze's dim is outside the sample's dims");
    return wrap(p.template unsqueeze<phys_dim<D>()>());
  }
  template <std::int64_t D>
  auto squeeze() const {
    return wrap(p.template squeeze<checked_dim<D, rank>()>());
  }
  template <std::int64_t D0, std::int64_t D1>
  auto transpose() const {
    return wrap(p.template transpose<checked_dim<D0, rank>(), checked_dim<D1, rank>()>());
  }
  auto t() const {
    static_assert(rank <= 2, "tenet: t() needs rank <= 2; use transpose<d0, d1>()");
    if constexpr (rank < 2) return *this;
    else return transpose<0, 1>();
  }
  auto mT() const {
    static_assert(rank >= 2, "tenet: mT needs rank >= 2");
    return transpose<-2, -1>();
  }
  template <std::int64_t... Q>
  auto permute() const {
    static_assert(sizeof...(Q) == rank, "tenet: func::vmap: permute needs one entry per dim of the sample");
    return wrap(p.template permute<0, (checked_dim<Q, rank>() < 0 ? checked_dim<Q, rank>() + static_cast<std::int64_t>(rank) + 1
                                                                  : checked_dim<Q, rank>())...>());
  }
  /// reshape<E...>(n...) of each sample: the batch dim is kept (dyn in the physical type; the
  /// result of vmap has the batch extent's type again).
  template <auto... E, std::integral... N>
  auto reshape(N... n) const {
    // the sample's reshape type (a -1 of a static sample is a static extent there, as without vmap)
    using R = shape_of<decltype(std::declval<Tensor<value_type, shape_type>>().template reshape<E...>(n...))>;
    if constexpr (R::is_static) {
      return [&]<auto... F>(shape<F...>*) {
        return wrap(p.template reshape<dyn, F...>(batch_size()));
      }(static_cast<R*>(nullptr));
    } else {
      return wrap(p.template reshape<dyn, E...>(batch_size(), n...));
    }
  }
  template <auto... E, std::integral... N>
  auto view(N... n) const {
    return reshape<E...>(n...);
  }
  template <std::int64_t Start = 0, std::int64_t End = -1>
  auto flatten() const {
    static_assert(rank >= 1, "tenet: func::vmap: flatten of a rank-0 sample");
    return wrap(p.template flatten<checked_dim<Start, rank>(), checked_dim<End, rank>()>());
  }
  template <std::int64_t D>
  auto select(std::int64_t index) const {
    return wrap(p.template select<checked_dim<D, rank>()>(index));
  }
  template <std::int64_t D>
  auto narrow(std::int64_t start, std::int64_t length) const {
    return wrap(p.template narrow<checked_dim<D, rank>()>(start, length));
  }
  template <std::int64_t D>
  auto slice(std::int64_t start, std::int64_t end, std::int64_t step = 1) const {
    return wrap(p.template slice<checked_dim<D, rank>()>(start, end, step));
  }
  template <class U>
  auto to() const {
    return wrap(p.template to<U>());
  }
  auto contiguous() const { return wrap(eval(p)); }
};

/// x batched when M >= 0 (a mapped argument, batch dim first), else x as it is.
template <int M, class X>
decltype(auto) wrap_if(X&& x) {
  if constexpr (M >= 0) return wrap(std::remove_cvref_t<X>(std::forward<X>(x)));
  else return std::forward<X>(x);
}

/// An unmapped argument that vmap(grad(f), batching) differentiates: one value for every sample,
/// a gradient per sample. Slot (func.hpp, tie_slot) holds the value and collects the per-sample
/// gradient: linear's rule takes it as a weight or bias without copying it per sample (the
/// gradient of sample i is g_i^T x_i, from the gradient g of the layer's output); any other op
/// gets the value as a batched leaf (one copy per sample, made once) and its gradient joins in.
template <class Slot>
struct tied {
  std::shared_ptr<Slot> slot;
  using value_type = typename Slot::value_type;
  using shape_type = typename Slot::shape_type;
  static constexpr std::size_t rank = shape_type::rank;
  sizes_t<rank> sizes() const { return slot->w.sizes(); }
  std::int64_t batch_size() const { return slot->n; }
  auto as_batched() const { return wrap(slot->leaf()); }
  template <std::int64_t D>
  auto unsqueeze() const { return as_batched().template unsqueeze<D>(); }
  template <std::int64_t D>
  auto squeeze() const { return as_batched().template squeeze<D>(); }
  template <std::int64_t D0, std::int64_t D1>
  auto transpose() const { return as_batched().template transpose<D0, D1>(); }
  auto t() const { return as_batched().t(); }
  auto mT() const { return as_batched().mT(); }
  template <std::int64_t... Q>
  auto permute() const { return as_batched().template permute<Q...>(); }
  template <auto... E, std::integral... N>
  auto reshape(N... n) const { return as_batched().template reshape<E...>(n...); }
  template <std::int64_t D>
  auto select(std::int64_t index) const { return as_batched().template select<D>(index); }
  template <std::int64_t D>
  auto narrow(std::int64_t start, std::int64_t length) const { return as_batched().template narrow<D>(start, length); }
};

/// The physical value (batch dim first) of a batched operand.
template <class P, bool U>
const P& phys(const batched<P, U>& x) {
  return x.p;
}
template <class Slot>
decltype(auto) phys(const tied<Slot>& x) {
  return x.slot->leaf();
}

// --- operands brought to one rank -----------------------------------------------------------

template <class X>
constexpr std::size_t logical_rank() {
  using Y = std::remove_cvref_t<X>;
  if constexpr (Batched<Y>) return Y::rank;
  else if constexpr (Expression<Y>) return rank_of<Y>;
  else return 0;
}

/// p with N size-1 dims inserted after the batch dim.
template <std::size_t N, class P>
auto lift(const P& p) {
  if constexpr (N == 0) return p;
  else return lift<N - 1>(p.template unsqueeze<1>());
}

/// The physical operand of x for an op whose sample result has rank R: a batched value lifted to
/// rank R + 1 (batch dim first), an unbatched one as it is (it aligns with the trailing dims).
template <std::size_t R, class X>
decltype(auto) operand(const X& x) {
  if constexpr (Batched<X>) return lift<R - X::rank>(phys(x));
  else return (x);
}

template <class... X>
constexpr std::size_t max_rank() {
  std::size_t r = 0;
  ((r = logical_rank<X>() > r ? logical_rank<X>() : r), ...);
  return r;
}

// --- pointwise ------------------------------------------------------------------------------

#define TENET_BATCH_UNARY(NAME)          \
  template <Batched X>                   \
  auto NAME(const X& x) {                \
    return wrap<uniform_v<X>()>(tenet::NAME(phys(x))); \
  }
TENET_BATCH_UNARY(neg)
TENET_BATCH_UNARY(abs)
TENET_BATCH_UNARY(sign)
TENET_BATCH_UNARY(square)
TENET_BATCH_UNARY(relu)
TENET_BATCH_UNARY(sigmoid)
TENET_BATCH_UNARY(silu)
TENET_BATCH_UNARY(gelu)
TENET_BATCH_UNARY(exp)
TENET_BATCH_UNARY(exp2)
TENET_BATCH_UNARY(expm1)
TENET_BATCH_UNARY(log)
TENET_BATCH_UNARY(log2)
TENET_BATCH_UNARY(log1p)
TENET_BATCH_UNARY(sqrt)
TENET_BATCH_UNARY(rsqrt)
TENET_BATCH_UNARY(sin)
TENET_BATCH_UNARY(cos)
TENET_BATCH_UNARY(tan)
TENET_BATCH_UNARY(tanh)
TENET_BATCH_UNARY(erf)
TENET_BATCH_UNARY(reciprocal)
TENET_BATCH_UNARY(floor)
TENET_BATCH_UNARY(ceil)
TENET_BATCH_UNARY(round)
TENET_BATCH_UNARY(trunc)
#undef TENET_BATCH_UNARY

/// eval of a batched value: the physical value evaluated (a has_aux output, a cached intermediate).
template <Batched X>
auto eval(const X& x) {
  return wrap<uniform_v<X>()>(tenet::eval(phys(x)));
}

template <Batched X>
auto operator-(const X& x) {
  return wrap<uniform_v<X>()>(-phys(x));
}

/// A pointwise op of operands of which at least one is batched.
template <class A, class B>
concept batched_pair = Operand<A> && Operand<B> && (Batched<A> || Batched<B>);

#define TENET_BATCH_BINARY(NAME, EXPR)                                   \
  template <class A, class B>                                            \
    requires batched_pair<A, B>                                          \
  auto NAME(const A& a0, const B& b0) {                                  \
    constexpr std::size_t r = max_rank<A, B>();                          \
    const auto& a = operand<r>(a0);                                      \
    const auto& b = operand<r>(b0);                                      \
    return wrap<uniform_v<A>() && uniform_v<B>()>(EXPR);                 \
  }
TENET_BATCH_BINARY(operator+, a + b)
TENET_BATCH_BINARY(operator-, a - b)
TENET_BATCH_BINARY(operator*, a * b)
TENET_BATCH_BINARY(operator/, a / b)
TENET_BATCH_BINARY(operator<, a < b)
TENET_BATCH_BINARY(operator<=, a <= b)
TENET_BATCH_BINARY(operator>, a > b)
TENET_BATCH_BINARY(operator>=, a >= b)
TENET_BATCH_BINARY(add, tenet::add(a, b))
TENET_BATCH_BINARY(sub, tenet::sub(a, b))
TENET_BATCH_BINARY(mul, tenet::mul(a, b))
TENET_BATCH_BINARY(div, tenet::div(a, b))
TENET_BATCH_BINARY(pow, tenet::pow(a, b))
TENET_BATCH_BINARY(maximum, tenet::maximum(a, b))
TENET_BATCH_BINARY(minimum, tenet::minimum(a, b))
TENET_BATCH_BINARY(eq, tenet::eq(a, b))
TENET_BATCH_BINARY(ne, tenet::ne(a, b))
#undef TENET_BATCH_BINARY

template <class C, class A, class B>
  requires Operand<C> && Operand<A> && Operand<B> && (Batched<C> || Batched<A> || Batched<B>)
auto where(const C& c0, const A& a0, const B& b0) {
  constexpr std::size_t r = max_rank<C, A, B>();
  return wrap(tenet::where(operand<r>(c0), operand<r>(a0), operand<r>(b0)));
}

template <Batched X, class L, class H>
  requires Plain<L> && Plain<H>
auto clamp(const X& x, const L& lo, const H& hi) {
  return wrap(tenet::clamp(phys(x), lo, hi));
}

// --- reductions -----------------------------------------------------------------------------

/// The physical dims of every dim of a sample of rank R: 1 .. R.
template <class X, class Fn>
auto over_sample(const X& x, Fn fn) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return fn.template operator()<static_cast<std::int64_t>(I + 1)...>(phys(x));
  }(std::make_index_sequence<X::rank>{});
}

#define TENET_BATCH_REDUCTION(NAME)                                                                        \
  template <auto... D, Batched X>                                                                          \
  auto NAME(const X& x) {                                                                                  \
    if constexpr (sizeof...(D) == 0) {                                                                     \
      if constexpr (X::rank == 0) return wrap(tenet::NAME<0>(phys(x).template unsqueeze<1>()));               \
      else return wrap(over_sample(x, []<std::int64_t... P>(const auto& p) { return tenet::NAME<P...>(p); })); \
    } else {                                                                                               \
      return wrap(tenet::NAME<checked_dim<static_cast<std::int64_t>(D), X::rank>()...>(phys(x)));             \
    }                                                                                                      \
  }                                                                                                        \
  template <auto... D, Batched X>                                                                          \
  auto NAME(const X& x, keepdim_t) {                                                                       \
    if constexpr (sizeof...(D) == 0)                                                                       \
      return wrap(over_sample(x, []<std::int64_t... P>(const auto& p) { return tenet::NAME<P...>(p, keepdim); })); \
    else                                                                                                   \
      return wrap(tenet::NAME<checked_dim<static_cast<std::int64_t>(D), X::rank>()...>(phys(x), keepdim));    \
  }
TENET_BATCH_REDUCTION(sum)
TENET_BATCH_REDUCTION(mean)
TENET_BATCH_REDUCTION(prod)
TENET_BATCH_REDUCTION(amax)
TENET_BATCH_REDUCTION(amin)
TENET_BATCH_REDUCTION(logsumexp)
#undef TENET_BATCH_REDUCTION

template <std::int64_t D, Batched X>
auto softmax(const X& x) {
  return wrap(tenet::softmax<checked_dim<D, X::rank>()>(phys(x)));
}
template <std::int64_t D, Batched X>
auto log_softmax(const X& x) {
  return wrap(tenet::log_softmax<checked_dim<D, X::rank>()>(phys(x)));
}

// --- matmul, linear, layer_norm -------------------------------------------------------------

/// x b for a batch of rows x (n, k) that are all equal (a uniform batched vector) and an unbatched
/// b (k, p): the forward is one row's product, expanded over the batch (one matrix-vector product,
/// not a GEMM), the backward and the tangent are the batch's (x's gradient g b^T, one GEMM; b's,
/// x^T g, only where b is tracked: GradB). What a batched Jacobian's forward costs is then f's
/// forward once plus pointwise ops over the batch, as torch.func's vmap over vjp / jvp.
template <bool GradB, class X, class B>
struct uniform_rows_matmul {
  static auto forward(const X& x, const B& b) {
    auto row = eval(tenet::matmul(x.template narrow<0>(0, 1), b));  // (1, p)
    // materialized (m x p values): custom_function copies an output whose elements share storage
    // anyway (a view taken of it later got its gradient through storage positions, summed over
    // the rows: autograd/functions.hpp)
    return row.template expand<dyn, -1>(x.sizes()[0]).contiguous();
  }
  template <class G>
  static auto backward(const G& g, const X& x, const B& b) {
    X gx = tenet::matmul(g, b.template transpose<0, 1>());
    if constexpr (GradB) return std::make_tuple(gx, B(tenet::matmul(x.template transpose<0, 1>(), g)));
    else return std::make_tuple(gx, B());
  }
  // not a template: custom_function finds a jvp by taking its address
  static auto jvp(const X& x, const B& b, const X& tx, const B& tb) {
    if constexpr (GradB) return eval(tenet::matmul(tx, b) + tenet::matmul(x, tb));
    else return eval(tenet::matmul(tx, b));
  }
};
/// x b as above, for a uniform x (n, k) with n > 0.
template <class X, class B>
auto uniform_matmul(const X& x, const B& b) {
  using Y = decltype(custom_function<uniform_rows_matmul<false, X, B>>::apply(x, b));
  if (x.sizes()[0] == 0) return Y(tenet::matmul(x, b));
  if (tenet::detail::ag::is_tracked(b)) return Y(custom_function<uniform_rows_matmul<true, X, B>>::apply(x, b));
  return custom_function<uniform_rows_matmul<false, X, B>>::apply(x, b);
}

/// torch.matmul of one sample, batched: a batched vector becomes a matrix (a row on the left, a
/// column on the right) and is squeezed back after; batched operands are lifted to the rank of
/// the other operand so that their batch dims line up; tenet's matmul broadcasts the rest.
template <class A, class B>
  requires Operand<A> && Operand<B> && (Batched<A> || Batched<B>) && (!Scalar<A>) && (!Scalar<B>)
auto matmul(const A& a, const B& b) {
  constexpr std::size_t ra = logical_rank<A>(), rb = logical_rank<B>();
  static_assert(ra >= 1 && rb >= 1, "tenet: matmul needs operands of rank >= 1");
  if constexpr (Batched<A> && ra == 1 && !Batched<B> && rb == 2) {
    if constexpr (uniform_v<A>()) return wrap<true>(uniform_matmul(eval(phys(a)), eval(b)));
    else return wrap(tenet::matmul(phys(a), b));  // (n, k) @ (k, p): one GEMM for the batch
  } else if constexpr (Batched<B> && rb == 1 && !Batched<A> && ra == 2) {
    // a b_i for every sample: the rows b_i times a^T, one GEMM (not n matrix-vector products)
    if constexpr (uniform_v<B>()) return wrap<true>(uniform_matmul(eval(phys(b)), eval(eval(a).template transpose<0, 1>())));
    else return wrap(tenet::matmul(phys(b), eval(a).template transpose<0, 1>()));
  } else if constexpr (Batched<A> && ra == 1) {
    auto r = matmul(wrap(phys(a).template unsqueeze<-2>()), b);  // (1, k) @ b
    if constexpr (rb == 1) return r.template squeeze<-1>();
    else return r.template squeeze<-2>();
  } else if constexpr (Batched<B> && rb == 1) {
    auto r = matmul(a, wrap(phys(b).template unsqueeze<-1>()));  // a @ (k, 1)
    return r.template squeeze<-1>();
  } else {
    // batched operands are matrices (rank >= 2) here; an unbatched one may be a vector
    constexpr std::size_t r = ra > rb ? ra : rb;
    if constexpr (Batched<A> && Batched<B>) return wrap(tenet::matmul(lift<r - ra>(phys(a)), lift<r - rb>(phys(b))));
    else if constexpr (Batched<A>) return wrap(tenet::matmul(lift<(rb > ra ? rb - ra : 0)>(phys(a)), b));
    else return wrap(tenet::matmul(a, lift<(ra > rb ? ra - rb : 0)>(phys(b))));
  }
}

template <class X, class W>
  requires Operand<X> && Operand<W> && (Batched<X> || Batched<W>)
auto linear(const X& x, const W& w) {
  static_assert(logical_rank<W>() == 2, "tenet: linear needs a weight of rank 2, [out_features, in_features]");
  if constexpr (Batched<W>) {
    // each sample its own weight (vmap(grad) over a weight): x wT as (w xT)T, so that the
    // weight's gradient comes out of the backward as g^T x in the weight's own layout (no
    // transposed copy of a per-sample weight gradient)
    if constexpr (logical_rank<X>() == 1) return matmul(w, x);
    else return matmul(w, x.template transpose<-2, -1>()).template transpose<-2, -1>();
  } else {
    return matmul(x, eval(w).template transpose<0, 1>());
  }
}
struct no_bias {};

/// linear with a tied weight (and bias): the layer runs with the one weight for the whole batch
/// (one GEMM), plus a zero "probe" whose gradient is the gradient g of the layer's output; from
/// it the slots make each sample's weight gradient, g_i^T x_i summed over the sample's rows (the
/// weight's per-sample gradient, exactly: sample i's output reads the weight through this product
/// alone), and the bias's, g_i summed over the rows. The input's gradient flows as without vmap.
template <class X, class Slot, class B>
auto tied_linear(const X& x, const tied<Slot>& w, const B& b) {
  auto xv = eval(phys(x));  // (n, ..., in)
  auto yv = eval(tenet::matmul(xv, w.slot->w.template transpose<0, 1>()));  // (n, ..., out)
  using Y = std::remove_cvref_t<decltype(yv)>;
  Y probe(yv.sizes(), yv.device());
  probe.zero_();
  probe.requires_grad_();
  const std::int64_t n = yv.sizes()[0];
  const std::int64_t out = yv.sizes()[Y::rank - 1];
  const std::int64_t rows = yv.numel() / (n * out);
  auto flat = [n, rows](const auto& t) {  // (n, rows, last)
    return t.template reshape<dyn, dyn, dyn>(n, rows, t.sizes()[std::remove_cvref_t<decltype(t)>::rank - 1]);
  };
  w.slot->add(probe, [xd = xv.detach(), flat](const auto& g) { return tenet::matmul(flat(g).mT(), flat(xd)); });
  auto y = wrap(yv + probe);
  if constexpr (std::is_same_v<B, no_bias>) {
    return y;
  } else if constexpr (is_batched_v<B> && requires { b.slot; }) {
    b.slot->add(probe, [flat](const auto& g) { return tenet::sum<1>(flat(g)); });
    return y + b.slot->w;
  } else {
    return y + b;
  }
}
template <Batched X, class Slot>
auto linear(const X& x, const tied<Slot>& w) {
  static_assert(tied<Slot>::rank == 2, "tenet: linear needs a weight of rank 2, [out_features, in_features]");
  return tied_linear(x, w, no_bias{});
}
template <Batched X, class Slot, class B>
  requires Operand<B>
auto linear(const X& x, const tied<Slot>& w, const B& b) {
  static_assert(tied<Slot>::rank == 2, "tenet: linear needs a weight of rank 2, [out_features, in_features]");
  return tied_linear(x, w, b);
}

template <class X, class W, class B>
  requires Operand<X> && Operand<W> && Operand<B> && (Batched<X> || Batched<W> || Batched<B>)
auto linear(const X& x, const W& w, const B& b) {
  if constexpr (Batched<X> || Batched<W>) return linear(x, w) + b;
  else return tenet::linear(x, w) + b;
}

template <Batched X, Expression W, Expression B>
auto layer_norm(const X& x, const W& w, const B& b, double eps = 1e-5) {
  static_assert(rank_of<W> <= X::rank, "tenet: layer_norm: the weight must cover 1..rank trailing dims of the input");
  return wrap(tenet::layer_norm(phys(x), w, b, eps));
}

// --- losses ---------------------------------------------------------------------------------

/// The physical value of x with the batch dim first for a batch of n: a batched value's own, an
/// unbatched one expanded (a view, no copy).
template <class X>
auto physical(const X& x, std::int64_t n) {
  if constexpr (Batched<X>) {
    return phys(x);
  } else {
    auto e = eval(x);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return e.template unsqueeze<0>().template expand<dyn, ((void)I, -1)...>(n);
    }(std::make_index_sequence<rank_of<X>>{});
  }
}

/// Extent I of shape S (a number or dyn).
template <class S, std::size_t I>
constexpr auto extent_at() {
  return []<auto E0, auto... E>(shape<E0, E...>*) {
    return std::get<I>(std::make_tuple(E0, E...));
  }(static_cast<S*>(nullptr));
}

/// The batch size of the first batched operand.
template <class A, class B>
std::int64_t batch_of(const A& a, const B& b) {
  if constexpr (Batched<A>) return a.batch_size();
  else return b.batch_size();
}

/// cross_entropy of one sample's logits [C] or [N, C] and its class-index targets [] or [N] (or
/// class probabilities of the logits' shape), batched: the batch is folded into N, the losses
/// taken unreduced and each sample's reduced on its own (mean: over its targets that are not
/// ignore_index, as torch's mean).
template <reduction R = reduction::mean, class X, class Tg>
  requires Operand<X> && Operand<Tg> && (Batched<X> || Batched<Tg>) && (!Scalar<X>) && (!Scalar<Tg>)
auto cross_entropy(const X& input, const Tg& target, std::int64_t ignore_index = -100, double label_smoothing = 0.0) {
  constexpr std::size_t rx = logical_rank<X>(), rt = logical_rank<Tg>();
  static_assert(rx == 1 || rx == 2,
                "tenet: func::vmap: the batching rule of cross_entropy takes one sample's logits [C] or [N, C]; "
                "for [N, C, d1, ...] map f without func::batching (per sample)");
  const std::int64_t n = batch_of(input, target);
  auto x = physical(input, n);
  auto t = physical(target, n);
  using T = value_type_of<decltype(x)>;
  if constexpr (rx == 1) {
    // one position per sample: the unreduced loss is the sample's loss under every reduction
    auto l = tenet::cross_entropy<reduction::none>(x, t, ignore_index, label_smoothing);  // (batch)
    if constexpr (R == reduction::none || R == reduction::sum) {
      return wrap(l);
    } else {
      // mean over one position, or over none when its target is ignored (nan, as torch)
      if constexpr (is_floating_v<value_type_of<decltype(t)>>) {
        return wrap(l);
      } else {
        auto kept = tenet::ne(t, ignore_index).template to<T>();
        return wrap(eval(l / kept));
      }
    }
  } else {
    static_assert(rt == 1 || rt == 2, "tenet: cross_entropy: targets [N] (class indices) or [N, C] (probabilities)");
    const auto s = x.sizes();  // (batch, N, C)
    auto xf = eval(x).template reshape<dyn, dyn>(s[0] * s[1], s[2]);
    auto tf = [&] {
      if constexpr (rt == 1) return eval(t).template reshape<dyn>(s[0] * s[1]);
      else return eval(t).template reshape<dyn, dyn>(s[0] * s[1], s[2]);
    }();
    Tensor<T, shape<dyn>> lf = tenet::cross_entropy<reduction::none>(xf, tf, ignore_index, label_smoothing);
    // (batch, N), N of the logits' type
    auto l = [&] {
      constexpr auto N = extent_at<shape_of<decltype(x)>, 1>();
      if constexpr (tenet::detail::is_static_extent<N>) return lf.template reshape<dyn, N>(s[0]);
      else return lf.template reshape<dyn, dyn>(s[0], s[1]);
    }();
    if constexpr (R == reduction::none) {
      return wrap(l);
    } else if constexpr (R == reduction::sum) {
      return wrap(tenet::sum<1>(l));
    } else if constexpr (rt == 2) {
      return wrap(tenet::sum<1>(l) / static_cast<T>(s[1]));
    } else {
      auto kept = tenet::sum<1>(tenet::ne(t, ignore_index).template to<T>());
      return wrap(tenet::sum<1>(l) / kept);
    }
  }
}

/// mse_loss of one sample, batched: each sample's squared differences reduced on their own.
template <reduction R = reduction::mean, class X, class Y>
  requires Operand<X> && Operand<Y> && (Batched<X> || Batched<Y>) && (!Scalar<X>) && (!Scalar<Y>)
auto mse_loss(const X& input, const Y& target) {
  auto d = input - target;
  auto d2 = d * d;
  if constexpr (R == reduction::none) return d2;
  else if constexpr (R == reduction::sum) return sum(d2);
  else return mean(d2);
}

}  // namespace tenet::func::batch_rules
