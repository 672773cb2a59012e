#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The Metal pointwise kernel (docs/metal.md): MSL source for a fused tree of elementwise prims,
// the equivalent of backend/cuda/pointwise.cuh's run_pointwise as a type walker that prints code.
//
// `pointwise_kernel<Out, E>()` is the kernel for `out[i...] = e(i...)` where out is a Tensor<Out,
// S> of rank R = S::rank (at least 1) and e a tree of elementwise prim nodes over Tensor leaves
// (any strides, broadcast to out's sizes), scalars and shared nodes (decompose<B>'s output). One
// thread per output element (1-D grid, `gid` < n); the thread turns gid into an index over the R
// dims, reads each leaf at the dot product of that index and the leaf's strides (0 on broadcast
// dims), evaluates the tree in SSA form and stores. Generated once per (Out, R, E) type and
// cached; its name is a stable hash of the tree's description.
//
// Argument table: buffer(0) out, buffer(1 ... L) the tensor leaves in tree order (left to right,
// a shared subtree once per use), buffer(L + 1) the parameters, an array of long:
//   p[0]                    n, the number of output elements
//   p[1 ... R]              out's sizes
//   p[R + 1 ... 2R]         out's strides
//   p[(2 + k)R + 1 ...]     leaf k's strides over out's dims (0 where it broadcasts)
//   then one long per scalar leaf, in tree order: its bits (a float's as int, a half's or bfloat's
//   as ushort, zero-extended)
// 16-bit floats (half, bfloat) are loaded and stored as such and every node computes in float and
// rounds its result to its own type, as the prims' scalar `apply` does.
// `pointwise_arguments(out, e)` builds that table on the host.
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <tenet/backend/metal/msl_common.hpp>
#include <tenet/expr/node.hpp>
#include <tenet/expr/shared.hpp>
#include <tenet/prims/elementwise.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::metal {

/// The MSL expression of prim P on operands `a`, `b`, `c` (SSA value names), with value types
/// In... and result type Out. Float math follows the prims' scalar `apply` (prims/elementwise.hpp):
/// maximum / minimum propagate NaN, round is to nearest even, remainder takes the divisor's sign.
template <class P, class Out, class... In>
std::string prim_expression(const std::string& a, const std::string& b = {}, const std::string& c = {}) {
  using namespace tenet::prim;
  using A = std::tuple_element_t<0, std::tuple<In...>>;
  constexpr bool fl = std::is_same_v<A, float>;
  constexpr bool bo = std::is_same_v<A, bool>;
  constexpr bool in = std::is_same_v<A, std::int32_t>;  // int32: wraps modulo 2^32 as the prims (through uint)
  auto wrap = [&](std::string_view op) {
    return "as_type<int>(as_type<uint>(" + a + ") " + std::string(op) + " as_type<uint>(" + b + "))";
  };
  auto call = [&](std::string_view f) { return std::string(f) + "(" + a + ")"; };
  auto call2 = [&](std::string_view f) { return std::string(f) + "(" + a + ", " + b + ")"; };
  auto infix = [&](std::string_view op) { return "(" + a + " " + std::string(op) + " " + b + ")"; };
  // float unary
  if constexpr (fl && std::is_same_v<P, neg_>) return "(-" + a + ")";
  else if constexpr (fl && std::is_same_v<P, abs_>) return call("metal::abs");
  else if constexpr (fl && std::is_same_v<P, exp_>) return call("metal::precise::exp");
  else if constexpr (fl && std::is_same_v<P, exp2_>) return call("metal::precise::exp2");
  else if constexpr (fl && std::is_same_v<P, expm1_>) return call("tenet_expm1");
  else if constexpr (fl && std::is_same_v<P, log_>) return call("metal::precise::log");
  else if constexpr (fl && std::is_same_v<P, log2_>) return call("metal::precise::log2");
  else if constexpr (fl && std::is_same_v<P, log1p_>) return call("tenet_log1p");
  else if constexpr (fl && std::is_same_v<P, sqrt_>) return call("metal::precise::sqrt");
  else if constexpr (fl && std::is_same_v<P, rsqrt_>) return "(1.0f / metal::precise::sqrt(" + a + "))";
  else if constexpr (fl && std::is_same_v<P, sin_>) return call("metal::precise::sin");
  else if constexpr (fl && std::is_same_v<P, cos_>) return call("metal::precise::cos");
  else if constexpr (fl && std::is_same_v<P, tan_>) return call("metal::precise::tan");
  else if constexpr (fl && std::is_same_v<P, tanh_>) return call("metal::precise::tanh");
  else if constexpr (fl && std::is_same_v<P, erf_>) return call("tenet_erf");
  else if constexpr (fl && std::is_same_v<P, floor_>) return call("metal::floor");
  else if constexpr (fl && std::is_same_v<P, ceil_>) return call("metal::ceil");
  else if constexpr (fl && std::is_same_v<P, round_>) return call("metal::rint");  // half to even
  else if constexpr (fl && std::is_same_v<P, trunc_>) return call("metal::trunc");
  else if constexpr (fl && std::is_same_v<P, reciprocal_>) return "(1.0f / " + a + ")";
  else if constexpr (fl && std::is_same_v<P, sign_>) return "float(int(0.0f < " + a + ") - int(" + a + " < 0.0f))";
  else if constexpr (fl && std::is_same_v<P, isnan_>) return call("metal::isnan");
  else if constexpr (bo && std::is_same_v<P, bitwise_not_>) return "(!" + a + ")";
  // float binary
  else if constexpr (fl && std::is_same_v<P, add_>) return infix("+");
  else if constexpr (fl && std::is_same_v<P, sub_>) return infix("-");
  else if constexpr (fl && std::is_same_v<P, mul_>) return infix("*");
  else if constexpr (fl && std::is_same_v<P, div_>) return infix("/");
  else if constexpr (fl && std::is_same_v<P, remainder_>) return call2("tenet_remainder");
  else if constexpr (fl && std::is_same_v<P, fmod_>) return call2("metal::precise::fmod");
  else if constexpr (fl && std::is_same_v<P, pow_>) return call2("tenet_pow");
  else if constexpr (fl && std::is_same_v<P, atan2_>) return call2("metal::precise::atan2");
  else if constexpr (fl && std::is_same_v<P, maximum_>)
    return "(" + a + " != " + a + " ? " + a + " : (" + b + " != " + b + " ? " + b + " : (" + a + " < " + b + " ? " + b + " : " + a + ")))";
  else if constexpr (fl && std::is_same_v<P, minimum_>)
    return "(" + a + " != " + a + " ? " + a + " : (" + b + " != " + b + " ? " + b + " : (" + b + " < " + a + " ? " + b + " : " + a + ")))";
  // int32 (no division, remainder or fmod: a zero divisor must raise, and kernels have no fault
  // channel yet)
  else if constexpr (in && std::is_same_v<P, neg_>) return "as_type<int>(0u - as_type<uint>(" + a + "))";
  else if constexpr (in && std::is_same_v<P, abs_>) return "(" + a + " < 0 ? as_type<int>(0u - as_type<uint>(" + a + ")) : " + a + ")";
  else if constexpr (in && std::is_same_v<P, sign_>) return "(int(0 < " + a + ") - int(" + a + " < 0))";
  else if constexpr (in && std::is_same_v<P, add_>) return wrap("+");
  else if constexpr (in && std::is_same_v<P, sub_>) return wrap("-");
  else if constexpr (in && std::is_same_v<P, mul_>) return wrap("*");
  else if constexpr (in && std::is_same_v<P, pow_>) return call2("tenet_ipow");
  else if constexpr (in && std::is_same_v<P, maximum_>) return "(" + a + " < " + b + " ? " + b + " : " + a + ")";
  else if constexpr (in && std::is_same_v<P, minimum_>) return "(" + b + " < " + a + " ? " + b + " : " + a + ")";
  else if constexpr (in && std::is_same_v<P, bitwise_and_>) return infix("&");
  else if constexpr (in && std::is_same_v<P, bitwise_or_>) return infix("|");
  else if constexpr (in && std::is_same_v<P, bitwise_xor_>) return infix("^");
  else if constexpr (in && std::is_same_v<P, bitwise_not_>) return "(~" + a + ")";
  // comparisons (float, int32 or bool operands)
  else if constexpr ((fl || bo || in) && std::is_same_v<P, eq_>) return infix("==");
  else if constexpr ((fl || bo || in) && std::is_same_v<P, ne_>) return infix("!=");
  else if constexpr ((fl || in) && std::is_same_v<P, lt_>) return infix("<");
  else if constexpr ((fl || in) && std::is_same_v<P, le_>) return infix("<=");
  else if constexpr ((fl || in) && std::is_same_v<P, gt_>) return infix(">");
  else if constexpr ((fl || in) && std::is_same_v<P, ge_>) return infix(">=");
  // logical (bool)
  else if constexpr (bo && std::is_same_v<P, bitwise_and_>) return infix("&&");
  else if constexpr (bo && std::is_same_v<P, bitwise_or_>) return infix("||");
  else if constexpr (bo && std::is_same_v<P, bitwise_xor_>) return infix("!=");
  // where(c, a, b): a, b of the result type
  else if constexpr (std::is_same_v<P, where_> && bo && msl_element<Out>)
    return "(" + a + " ? " + b + " : " + c + ")";
  // casts (C++'s rules; nonzero is true)
  else if constexpr (is_convert_element_type<P>) {
    if constexpr (std::is_same_v<Out, A>) return a;
    else if constexpr (std::is_same_v<Out, bool>) return "(" + a + " != " + std::string(msl_type<A>()) + "(0))";
    else if constexpr (std::is_same_v<Out, float> && (bo || std::is_integral_v<A>)) return "float(" + a + ")";
    else static_assert(sizeof(P) == 0, "tenet: the Metal generator has no cast between these dtypes yet");
  } else {
    static_assert(sizeof(P) == 0,
                  "tenet: the Metal generator has no MSL for this prim on these dtypes (float math, int32 arithmetic "
                  "without division, bool logic; see docs/metal.md)");
  }
}

/// The type walker: for each node of E, the MSL statements that compute it.
template <class E>
struct msl_tree;

/// Code being generated for one kernel.
struct emitter {
  std::size_t rank = 1;
  std::string buffers;     // the tensor leaves' parameters
  std::string body;        // SSA statements
  int values = 0;          // SSA values so far
  int tensors = 0;         // tensor leaves so far
  int scalars = 0;         // scalar leaves so far
  std::string fresh() { return "v" + std::to_string(values++); }
  /// p's index of leaf k's stride over dim d.
  std::size_t leaf_stride(int k, std::size_t d) const { return (2 + static_cast<std::size_t>(k)) * rank + 1 + d; }
};

template <class T, class S>
struct msl_tree<Tensor<T, S>> {
  using value_type = T;
  static_assert(msl_element<T>, "tenet: the Metal generator handles float32, bool, int32 and int64 tensors");
  static std::string describe() { return "tensor<" + std::string(msl_type<T>()) + "," + std::to_string(S::rank) + ">"; }
  static std::string emit(emitter& em) {
    const int k = em.tensors++;
    const std::string in = "in" + std::to_string(k);
    em.buffers += "    tenet_buffer<const " + std::string(msl_type<T>()) + "> " + in + " [[buffer(" + std::to_string(k + 1) + ")]],\n";
    std::string off;
    for (std::size_t d = 0; d < em.rank; ++d) {
      if (d) off += " + ";
      off += "i" + std::to_string(d) + " * p[" + std::to_string(em.leaf_stride(k, d)) + "]";
    }
    const std::string v = em.fresh();
    em.body += "  const " + std::string(msl_type<T>()) + " " + v + " = " + in + "[" + off + "];\n";
    return v;
  }
};

template <class T>
struct msl_tree<scalar<T>> {
  using value_type = T;
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bool> || std::is_same_v<T, std::int32_t> || half_precision<T>,
                "tenet: the Metal generator takes float32, float16, bfloat16, int32 and bool scalars");
  static std::string describe() { return "scalar<" + std::string(msl_type<T>()) + ">"; }
  static std::string emit(emitter& em) {
    const int k = em.scalars++;
    const std::string v = em.fresh();
    // p_scalar(k): resolved once the number of tensor leaves is known (see pointwise_kernel)
    const std::string at = "p[TENET_SCALAR_" + std::to_string(k) + "_]";
    if constexpr (std::is_same_v<T, float>)
      em.body += "  const float " + v + " = as_type<float>(int(" + at + "));\n";
    else if constexpr (std::is_same_v<T, bool>)
      em.body += "  const bool " + v + " = " + at + " != 0;\n";
    else if constexpr (half_precision<T>)
      em.body += "  const " + std::string(msl_type<T>()) + " " + v + " = as_type<" + std::string(msl_type<T>()) + ">(ushort(" + at + "));\n";
    else
      em.body += "  const int " + v + " = int(" + at + ");\n";
    return v;
  }
};

template <class E, class S>
struct msl_tree<shared_node<E, S>> {
  static_assert(std::is_same_v<S, shape_of<E>>, "tenet: the Metal generator takes shared nodes of their expression's shape");
  using value_type = typename msl_tree<E>::value_type;
  static std::string describe() { return msl_tree<E>::describe(); }
  static std::string emit(emitter& em) { return msl_tree<E>::emit(em); }
};

/// An SSA value of type T as its compute type (float for 16-bit floats).
template <class T>
std::string as_compute(const std::string& v) {
  if constexpr (half_precision<T>) return "float(" + v + ")";
  else return v;
}

template <class P, class... C>
struct msl_tree<node<P, C...>> {
  using value_type = typename node<P, C...>::value_type;
  static_assert(P::is_prim && std::is_base_of_v<prim::elementwise_group, typename P::group>,
                "tenet: the Metal pointwise generator takes elementwise prims only (decompose the expression first)");
  static std::string describe() {
    std::string s(P::name);
    if constexpr (prim::is_convert_element_type<P>) s += "<" + std::string(msl_type<typename P::target>()) + ">";
    s += "(";
    int i = 0;
    ((s += (i++ ? "," : "") + msl_tree<C>::describe()), ...);
    return s + ")";
  }
  static std::string emit(emitter& em) {
    // 16-bit float operands compute in float and the result rounds to its 16-bit type, as the
    // prims' apply does (prims/elementwise.hpp: compute_t)
    std::array<std::string, sizeof...(C)> kid{as_compute<typename msl_tree<C>::value_type>(msl_tree<C>::emit(em))...};  // braced: left to right
    const std::string v = em.fresh();
    std::string e;
    if constexpr (sizeof...(C) == 1)
      e = prim_expression<P, compute_t<value_type>, compute_t<typename msl_tree<C>::value_type>...>(kid[0]);
    else if constexpr (sizeof...(C) == 2)
      e = prim_expression<P, compute_t<value_type>, compute_t<typename msl_tree<C>::value_type>...>(kid[0], kid[1]);
    else
      e = prim_expression<P, compute_t<value_type>, compute_t<typename msl_tree<C>::value_type>...>(kid[0], kid[1], kid[2]);
    if constexpr (half_precision<value_type>) e = std::string(msl_type<value_type>()) + "(" + e + ")";
    em.body += "  const " + std::string(msl_type<value_type>()) + " " + v + " = " + e + ";  // " + std::string(P::name) + "\n";
    return v;
  }
};

/// The description of the pointwise kernel out<Out, R> = E (its name hashes it).
template <class Out, std::size_t R, class E>
std::string pointwise_description() {
  return "pointwise " + std::string(msl_type<Out>()) + "[rank " + std::to_string(R) + "] = " + msl_tree<E>::describe();
}

/// The kernel's source, generated once per type.
template <class Out, std::size_t R, class E>
const kernel_source& pointwise_kernel() {
  static const kernel_source k = [] {
    static_assert(R >= 1);
    emitter em;
    em.rank = R;
    const std::string result = msl_tree<E>::emit(em);
    // the scalars follow the tensor leaves' strides
    std::string body = em.body;
    for (int s = 0; s < em.scalars; ++s) {
      const std::string key = "TENET_SCALAR_" + std::to_string(s) + "_";  // delimited: 1_ is no prefix of 10_
      const std::string at = std::to_string((2 + static_cast<std::size_t>(em.tensors)) * R + 1 + static_cast<std::size_t>(s));
      for (std::size_t pos; (pos = body.find(key)) != std::string::npos;) body.replace(pos, key.size(), at);
    }
    kernel_source out;
    out.description = pointwise_description<Out, R, E>();
    out.name = kernel_name("tenet_pointwise", out.description);
    std::string s;
    s += "[[kernel]] void " + out.name + "(\n";
    s += "    tenet_buffer<" + std::string(msl_type<Out>()) + "> out [[buffer(0)]],\n";
    s += em.buffers;
    s += "    tenet_buffer<const long> p [[buffer(" + std::to_string(em.tensors + 1) + ")]],\n";
    s += std::string(builtin_parameters) + ") {\n";
    s += "  (void)tgid, (void)lid, (void)tgsize, (void)lane, (void)sg;\n";
    s += "  if (long(gid) >= p[0]) return;\n";
    s += "  // this thread's index over the " + std::to_string(R) + " output dims (sizes p[1 ... " + std::to_string(R) + "])\n";
    s += "  long rem = long(gid);\n";
    for (std::size_t d = R; d-- > 1;)
      s += "  const long i" + std::to_string(d) + " = rem % p[" + std::to_string(1 + d) + "];\n  rem /= p[" +
           std::to_string(1 + d) + "];\n";
    s += "  const long i0 = rem;\n";
    s += body;
    std::string off;
    for (std::size_t d = 0; d < R; ++d) off += (d ? " + i" : "i") + std::to_string(d) + " * p[" + std::to_string(R + 1 + d) + "]";
    if constexpr (std::is_same_v<Out, typename msl_tree<E>::value_type>)
      s += "  out[" + off + "] = " + result + ";\n";
    else
      s += "  out[" + off + "] = " + std::string(msl_type<Out>()) + "(" + result + ");\n";
    s += "}\n";
    out.source = kernel_file(out.name, out.description, s);
    return out;
  }();
  return k;
}

/// A buffer the host binds: its first element and its extent in bytes.
struct buffer_view {
  const void* data = nullptr;
  std::size_t bytes = 0;
};

/// The bytes a view of these sizes and strides reaches from its first element.
template <class T, class S>
buffer_view view_extent(const Tensor<T, S>& t) {
  if (t.numel() == 0) return {nullptr, 0};
  std::int64_t last = 0;
  for (std::size_t d = 0; d < S::rank; ++d) last += (t.sizes()[d] - 1) * t.strides()[d];
  return {t.data(), static_cast<std::size_t>(last + 1) * sizeof(T)};
}

/// The host side of pointwise_kernel: the argument table (buffers of the tensor leaves in tree
/// order, then the parameters) for out = e.
struct pointwise_arguments {
  std::vector<buffer_view> inputs;
  std::vector<std::int64_t> params;
  std::vector<std::int64_t> scalars;
  std::int64_t n = 0;

  template <class Out, class S, class E>
  pointwise_arguments(const Tensor<Out, S>& out, const E& e) {
    constexpr std::size_t R = S::rank == 0 ? 1 : S::rank;
    std::array<std::int64_t, R> sizes{}, st{};
    sizes.fill(1);
    for (std::size_t d = 0; d < S::rank; ++d) sizes[d] = out.sizes()[d], st[d] = out.strides()[d];
    n = out.numel();
    params.push_back(n);
    for (auto s : sizes) params.push_back(s);
    for (auto s : st) params.push_back(s);
    collect<R>(e, sizes);
    for (auto s : scalars) params.push_back(s);
  }

 private:
  template <std::size_t R, class X>
  void collect(const X& x, const std::array<std::int64_t, R>& sizes) {
    if constexpr (SharedNode<X>) {
      collect<R>(x.expr, sizes);
    } else if constexpr (detail::is_node<X>::value) {
      std::apply([&](const auto&... c) { (collect<R>(c, sizes), ...); }, x.children);
    } else if constexpr (detail::is_scalar_leaf<X>::value) {
      using T = typename X::value_type;
      if constexpr (std::is_same_v<T, float>) {
        std::uint32_t bits;
        std::memcpy(&bits, &x.value, sizeof bits);
        scalars.push_back(static_cast<std::int64_t>(bits));
      } else if constexpr (half_precision<T>) {
        scalars.push_back(static_cast<std::int64_t>(x.value.bits));
      } else {
        scalars.push_back(static_cast<std::int64_t>(x.value));
      }
    } else {  // a tensor leaf, right-aligned against out's dims
      constexpr std::size_t r = X::rank;
      static_assert(r <= R);
      inputs.push_back(view_extent(x));
      for (std::size_t i = 0; i < R; ++i) {
        if (i + r < R) {
          params.push_back(0);
          continue;
        }
        const std::size_t k = i + r - R;
        params.push_back(x.sizes()[k] == sizes[i] ? x.strides()[k] : 0);
      }
    }
  }
};

}  // namespace tenet::detail::metal
