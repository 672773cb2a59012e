#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CUDA side of evaluation (nvcc only; included by backend/evaluate.hpp in CUDA translation
// units). The plan is the CPU's, decomposed for cuda_gpu (native.hpp): decompose -> materialize
// -> fused pointwise; every pointwise tree becomes one kernel (pointwise.hpp); the non-pointwise
// nodes run here: reductions (reduce.hpp), argmax / argmin and scans (lines.hpp), sort (sort.hpp),
// gather / scatter (indexing.hpp), pad (a fill and a strided copy), conv2d and max_pool2d
// (conv.hpp), matmul (cuBLASLt, gemm.hpp), softmax / log_softmax / layer_norm / rms_norm
// (one-pass row kernels, rows.hpp). Random draws are leaves of those kernels (random.hpp). Any
// other non-pointwise op throws device_error naming it.
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include <tenet/autocast.hpp>
#include <tenet/backend/cuda/conv.hpp>
#include <tenet/backend/cuda/gemm.hpp>
#include <tenet/backend/cuda/indexing.hpp>
#include <tenet/backend/cuda/lines.hpp>
#include <tenet/backend/cuda/pointwise.hpp>
#include <tenet/backend/cuda/random.hpp>
#include <tenet/backend/cuda/reduce.hpp>
#include <tenet/backend/cuda/rows.hpp>
#include <tenet/backend/cuda/runtime.hpp>
#include <tenet/backend/cuda/sort.hpp>

namespace tenet::detail::cuda {

template <class Op>
inline constexpr bool is_reduce_op = false;
template <class Kind, bool KeepDim, auto... Dims>
inline constexpr bool is_reduce_op<prim::reduce_<Kind, KeepDim, Dims...>> = true;
template <class Op>
inline constexpr bool is_scan_op = false;
template <class Kind, std::int64_t Dim>
inline constexpr bool is_scan_op<prim::scan_<Kind, Dim>> = true;
template <class Op>
inline constexpr bool is_gather_op = false;
template <std::int64_t D>
inline constexpr bool is_gather_op<prim::gather_<D>> = true;
template <class Op>
inline constexpr bool is_pad_op = false;
template <std::size_t R>
inline constexpr bool is_pad_op<prim::pad_<R>> = true;
template <class Op>
inline constexpr bool is_scatter_op = false;
template <std::int64_t D, prim::scatter_op O>
inline constexpr bool is_scatter_op<prim::scatter_<D, O>> = true;

/// t viewed with rank max(R, 1) (a 0-dim tensor as one element of a 1-D one).
template <class T, class S>
auto at_least_1d(const Tensor<T, S>& t) {
  if constexpr (S::rank == 0)
    return t.template reshape<1>();
  else
    return t;
}

template <class Op>
struct softmax_kind : std::false_type {};
template <std::int64_t D>
struct softmax_kind<aten::softmax<D>> : std::true_type {
  static constexpr bool log = false;
};
template <std::int64_t D>
struct softmax_kind<aten::log_softmax<D>> : std::true_type {
  static constexpr bool log = true;
};

template <class Op>
struct var_kind : std::false_type {};
template <bool Keep, auto... D>
struct var_kind<aten::var_<Keep, D...>> : std::true_type {};

template <class Op>
struct norm_kind : std::false_type {};
template <std::size_t K, bool Rms>
struct norm_kind<aten::norm_last<K, Rms>> : std::true_type {
  static constexpr bool rms = Rms;
};

/// Calls f(src, aligned) with the row kernels' input for the producer m of a row node, m's index
/// space read in row-major order: a contiguous tensor, or a pointwise tree whose leaves are
/// contiguous in that order or broadcast scalars (fused into the row kernel); anything else is
/// evaluated into a contiguous tensor first.
template <class M, class F>
void with_row_source(const M& m, F&& f) {
  using T = value_type_of<M>;
  constexpr std::size_t R = rank_of<M> == 0 ? 1 : rank_of<M>;
  if constexpr (!TensorType<M> && rank_of<M> >= 1) {
    using tree_t = dpw<M, R>;
    const auto sizes = m.sizes();
    const tree_t tree(m, sizes);
    const auto cs = contiguous_strides(sizes);
    bool flat = true, aligned = true;
    tree.for_each_leaf([&](const void* p, std::size_t, const std::int64_t* st) {
      bool all_zero = true, contiguous = true;
      for (std::size_t d = 0; d < R; ++d) {
        all_zero = all_zero && st[d] == 0;
        contiguous = contiguous && st[d] == cs[d];  // (then st[0] != 0: dpw's flat loads read base + i)
      }
      if (!all_zero && !contiguous) flat = false;
      if (!all_zero && !aligned16(p)) aligned = false;
    });
    if (flat) {
      f(tree, aligned);
      return;
    }
  }
  auto x = to_tensor(m);
  const auto xc = x.is_contiguous() ? x : x.contiguous();
  f(ptr_src<T>{xc.data()}, aligned16(xc.data()));
}

/// A row composite of node e into out (fresh, contiguous): the row kernels of rows.hpp, with the
/// pointwise producer of the input fused in when its layout allows.
template <row_kind K, class E, class Out>
void run_row_node(const E& e, const Out& out) {
  using T = value_type_of<E>;
  const std::int64_t n = out.numel();
  if (n == 0) return;
  device_context ctx(out.device());
  row_args<T> a{out.data(), nullptr, nullptr, 0, 0, 0.0};
  auto go = [&](const auto& src, bool aligned) { launch_rows<K, T>(a, src, aligned); };
  const auto m = materialize(std::get<0>(e.children));
  if constexpr (K == row_kind::softmax || K == row_kind::log_softmax) {
    a.cols = rank_of<E> == 0 ? 1 : out.sizes()[rank_of<E> == 0 ? 0 : rank_of<E> - 1];
    a.rows = a.cols == 0 ? 0 : n / a.cols;
    with_row_source(m, go);
  } else {
    const auto w = to_tensor(std::get<1>(e.children)).contiguous();
    a.w = w.data();
    a.cols = w.numel();
    a.rows = a.cols == 0 ? 0 : n / a.cols;
    a.eps = e.op.eps;
    if constexpr (K == row_kind::layer_norm) {
      const auto b = to_tensor(std::get<2>(e.children)).contiguous();
      a.b = b.data();
      with_row_source(m, go);
    } else {
      with_row_source(m, go);
    }
  }
}

/// var over the last dim (runs_natively<cuda_gpu, aten::var_>, native.hpp) into out (fresh,
/// contiguous, one element per row): the var row kernel, its input read once. Few long float or
/// double rows (fewer than two per SM, over 16 Ki elements each) would leave most SMs idle with a
/// block per row: they take the decomposition's reductions instead, which split long rows over the
/// card; so do empty rows (NaN: 0 / 0, as torch). 16-bit rows always take the row kernel (one pass;
/// the decomposition of 16-bit inputs computes in float too, ops.hpp var_impl, but reads x twice).
template <class E, class Out>
void run_var_node(const E& e, const Out& out) {
  using T = value_type_of<E>;
  const auto& child = std::get<0>(e.children);
  using C = std::remove_cvref_t<decltype(child)>;
  const std::int64_t rows = out.numel();
  if (rows == 0) return;
  const auto in = child.sizes();
  const std::int64_t cols = in[rank_of<C> - 1];
  device_context ctx(out.device());
  if (cols == 0 || (!half_precision<T> && rows < 2LL * sm_count(out.device().index) && cols > 16384)) {
    assign(out, e.op.decompose(child));
    return;
  }
  const double denom = std::max(0.0, static_cast<double>(cols) - e.op.correction);
  row_args<T> a{out.data(), nullptr, nullptr, rows, cols, denom};
  with_row_source(materialize(child), [&](const auto& src, bool aligned) { launch_rows<row_kind::var, T>(a, src, aligned); });
}

// --- matmul ------------------------------------------------------------------------------------
/// out [batch..., M, N] (fresh, contiguous) = a [.., M, K] @ b [.., K, N], batch dims broadcast.
template <class T, class SO, class SA, class SB>
void run_matmul(const Tensor<T, SO>& out, Tensor<T, SA> a, Tensor<T, SB> b) {
  if constexpr (!lt_supported<T>) {
    throw device_error(std::string("tenet: matmul of ") + std::string(tenet::name(dtype_of<T>)) +
                       " tensors is not implemented on CUDA (cuBLASLt path: float, double, float16, bfloat16)");
  } else {
    constexpr std::size_t RO = SO::rank, RA = SA::rank, RB = SB::rank;
    static_assert(RO >= 2 && RA >= 2 && RB >= 2);
    device_context ctx(out.device());
    const int dev = out.device().index;
    const std::int64_t M = out.sizes()[RO - 2], N = out.sizes()[RO - 1], K = a.sizes()[RA - 1];
    if (out.numel() == 0) return;
    if (K == 0) {
      run_pointwise(out, scalar<T>{T(0)});
      return;
    }
    auto av = column_major_view(M, K, a.strides()[RA - 2], a.strides()[RA - 1]);
    if (!av.ok) {
      a = a.contiguous();
      av = column_major_view(M, K, a.strides()[RA - 2], a.strides()[RA - 1]);
    }
    auto bv = column_major_view(K, N, b.strides()[RB - 2], b.strides()[RB - 1]);
    if (!bv.ok) {
      b = b.contiguous();
      bv = column_major_view(K, N, b.strides()[RB - 2], b.strides()[RB - 1]);
    }
    constexpr std::size_t NB = RO - 2;
    sizes_t<NB> bat{};
    std::int64_t batch = 1;
    for (std::size_t i = 0; i < NB; ++i) bat[i] = out.sizes()[i], batch *= bat[i];
    std::int64_t sa = batch_stride<NB, RA>(bat, a.sizes(), a.strides());
    std::int64_t sb = batch_stride<NB, RB>(bat, b.sizes(), b.strides());
    const T* pa = a.data();
    const T* pb = b.data();
    Tensor<T, dyn_shape<RO>> ka, kb;  // operands copied for the strided batch (kept alive here)
    if (batch <= (std::int64_t{1} << 30)) {
      // A batch layout one stride cannot express (heads split from a wider tensor, as attention's
      // q / k / v views of one qkv projection; a broadcast over some batch dims only): that
      // operand is copied into a contiguous [batch..., rows, cols] tensor by one pointwise kernel,
      // so that the product stays one strided-batched call. (It was one cuBLASLt call per batch
      // index: 128 calls for q @ k^T at batch 32 with 4 heads, each paying the host's work.)
      auto expanded = [&](const auto& x, std::int64_t rows, std::int64_t cols) {
        sizes_t<RO> s{};
        for (std::size_t i = 0; i < NB; ++i) s[i] = bat[i];
        s[RO - 2] = rows;
        s[RO - 1] = cols;
        Tensor<T, dyn_shape<RO>> t(s, out.device());
        run_pointwise(t, x);
        return t;
      };
      if (sa < 0) {
        ka = expanded(a, M, K);
        pa = ka.data();
        av = column_major_view(M, K, K, 1);
        sa = M * K;
      }
      if (sb < 0) {
        kb = expanded(b, K, N);
        pb = kb.data();
        bv = column_major_view(K, N, N, 1);
        sb = K * N;
      }
      // C' (N x M) = op(b') (N x K) * op(a') (K x M)
      lt_matmul<T>(dev, N, M, K, lt_operand{pb, bv.trans, bv.ld, sb}, lt_operand{pa, av.trans, av.ld, sa},
                   out.data(), N, M * N, static_cast<int>(batch), nullptr, epilogue::none);
      return;
    }
    // more than 2^30 batch entries (cuBLASLt's batch count is an int): one call per batch index
    for (std::int64_t i = 0; i < batch; ++i) {
      std::int64_t rem = i, oa = 0, ob = 0;
      for (std::size_t d = NB; d-- > 0;) {
        const std::int64_t id = rem % bat[d];
        rem /= bat[d];
        const std::size_t off = NB - d;
        if (off <= RA - 2 && a.sizes()[RA - 2 - off] != 1) oa += id * a.strides()[RA - 2 - off];
        if (off <= RB - 2 && b.sizes()[RB - 2 - off] != 1) ob += id * b.strides()[RB - 2 - off];
      }
      lt_matmul<T>(dev, N, M, K, lt_operand{b.data() + ob, bv.trans, bv.ld, 0},
                   lt_operand{a.data() + oa, av.trans, av.ld, 0}, out.data() + i * M * N, N, M * N, 1, nullptr,
                   epilogue::none);
    }
  }
}

/// torch.matmul's 1-D cases mapped onto run_matmul.
template <class Out, class A, class B>
void run_matmul_ranks(const Out& out, const A& a, const B& b) {
  if constexpr (A::rank == 1 && B::rank == 1) {
    run_matmul(out.template reshape<1, 1>(), a.template unsqueeze<0>(), b.template unsqueeze<1>());
  } else if constexpr (A::rank == 1) {
    run_matmul(out.template unsqueeze<-2>(), a.template unsqueeze<0>(), b);
  } else if constexpr (B::rank == 1) {
    run_matmul(out.template unsqueeze<-1>(), a, b.template unsqueeze<1>());
  } else {
    run_matmul(out, a, b);
  }
}

/// t converted to L on its device (one pointwise kernel).
template <class L, class T, class S>
Tensor<L, S> cast_on_device(const Tensor<T, S>& t) {
  Tensor<L, S> r(t.sizes(), t.device());
  run_pointwise(r, cast_to<L>(t));
  return r;
}

/// Calls f(L{}) with the autocast dtype L (float16 or bfloat16) when autocast is on and the
/// operands are float32; false: autocast does not apply (include/tenet/autocast.hpp).
template <class T, class F>
bool with_autocast_dtype(F&& f) {
  if constexpr (std::is_same_v<T, float>) {
    const auto& ac = cuda_autocast_slot();
    if (!ac.enabled) return false;
    if (ac.low == dtype::bfloat16)
      f(bfloat16{});
    else
      f(float16{});
    return true;
  } else {
    return false;
  }
}

template <class E, class Out>
void run_matmul_node(const E& e, const Out& out) {
  auto a = to_tensor(std::get<0>(e.children));
  auto b = to_tensor(std::get<1>(e.children));
  using T = value_type_of<E>;
  // autocast: fp32 operands in float16 / bfloat16, the product rounded to it, stored as fp32
  const bool cast = with_autocast_dtype<T>([&](auto low) {
    using L = decltype(low);
    using SO = shape_of<Out>;
    Tensor<L, SO> tmp(out.sizes(), out.device());
    run_matmul_ranks(tmp, cast_on_device<L>(a), cast_on_device<L>(b));
    run_pointwise(out, cast_to<T>(tmp));
  });
  if (!cast) run_matmul_ranks(out, a, b);
}

template <class E, class Out>
bool try_bias_act_gemm(const E& e, Out& out) {
  using P = bias_act<E>;
  static_assert(P::kind != bias_act_kind::none);
  using T = value_type_of<E>;
  const auto& add = P::add(e);
  using Add = std::remove_cvref_t<decltype(add)>;
  constexpr std::size_t im = bias_add<Add>::mm;
  const auto& mm = std::get<im>(add.children);
  const auto& bias = std::get<1 - im>(add.children);
  if constexpr (P::kind == bias_act_kind::relu) {
    if (!(static_cast<double>(std::get<1>(e.children).value) == 0.0)) return false;  // maximum(x + b, c), c != 0
  }
  const auto es = e.sizes();
  const auto ms = mm.sizes();
  const std::int64_t K = std::get<0>(mm.children).sizes()[1];
  // neither the product nor the bias is broadcast; no empty product
  if (ms != es || bias.sizes()[0] != es[1] || K == 0 || es[0] == 0 || es[1] == 0) return false;
  const device dev = expr_device(e);
  if (dev.type != device_type::cuda) return false;
  auto a = to_tensor(std::get<0>(mm.children));
  auto b = to_tensor(std::get<1>(mm.children));
  const auto bc = bias.contiguous();
  const std::int64_t M = es[0], N = es[1];
  device_context ctx(dev);
  auto av = column_major_view(M, K, a.strides()[0], a.strides()[1]);
  if (!av.ok) a = a.contiguous(), av = column_major_view(M, K, a.strides()[0], a.strides()[1]);
  auto bv = column_major_view(K, N, b.strides()[0], b.strides()[1]);
  if (!bv.ok) b = b.contiguous(), bv = column_major_view(K, N, b.strides()[0], b.strides()[1]);
  out = Out(es, dev);
  if (with_autocast_dtype<T>([&](auto low) {
        // autocast (torch's autocast linear): operands and bias in L, one rounding of act(x w + b) to L
        using L = decltype(low);
        const auto al = cast_on_device<L>(a);  // (two declarations: a and b may differ in static shape)
        const auto bl = cast_on_device<L>(b);
        const auto biasl = cast_on_device<L>(bc);
        Tensor<L, shape_of<Out>> tmp(es, dev);
        const epilogue ep = P::kind == bias_act_kind::relu        ? epilogue::bias_relu
                            : P::kind == bias_act_kind::gelu_tanh ? epilogue::bias_gelu_tanh
                                                                  : epilogue::bias;
        const auto alv = column_major_view(M, K, al.strides()[0], al.strides()[1]);  // contiguous copies
        const auto blv = column_major_view(K, N, bl.strides()[0], bl.strides()[1]);
        lt_matmul<L>(dev.index, N, M, K, lt_operand{bl.data(), blv.trans, blv.ld, 0},
                     lt_operand{al.data(), alv.trans, alv.ld, 0}, tmp.data(), N, M * N, 1, biasl.data(), ep);
        run_pointwise(out, cast_to<T>(tmp));
      })) {
    ++kernels_launched();
    return true;
  }
  const epilogue ep = P::kind == bias_act_kind::relu        ? epilogue::bias_relu
                      : P::kind == bias_act_kind::gelu_tanh ? epilogue::bias_gelu_tanh
                                                            : epilogue::bias;
  // C' (N x M) = op(b') (N x K) * op(a') (K x M), the bias along C's rows (N)
  lt_matmul<T>(dev.index, N, M, K, lt_operand{b.data(), bv.trans, bv.ld, 0}, lt_operand{a.data(), av.trans, av.ld, 0},
               out.data(), N, M * N, 1, bc.data(), ep);
  ++kernels_launched();
  return true;
}

/// conv2d (im2col + cuBLASLt); under autocast, fp32 operands run in the low dtype (as matmul).
template <class E, class Out>
void run_conv2d_node(const E& e, const Out& out) {
  using T = value_type_of<E>;
  const auto x = to_tensor(std::get<0>(e.children));
  const auto w = to_tensor(std::get<1>(e.children)).contiguous();
  const auto g = e.op.geometry(x.sizes(), w.sizes());
  const bool cast = with_autocast_dtype<T>([&](auto low) {
    using L = decltype(low);
    const auto xl = cast_on_device<L>(x);
    const auto wl = cast_on_device<L>(w);
    Tensor<L, shape_of<Out>> tmp(out.sizes(), out.device());
    run_conv2d<L>(tmp.data(), xl.data(), xl.strides(), wl.data(), g, out.device());
    run_pointwise(out, cast_to<T>(tmp));
  });
  if (!cast) run_conv2d<T>(out.data(), x.data(), x.strides(), w.data(), g, out.device());
}

/// conv2d's weight gradient (autograd): x's columns and one GEMM per group.
template <class E, class Out>
void run_conv2d_weight_node(const E& e, const Out& out) {
  using T = value_type_of<E>;
  const auto x = to_tensor(std::get<0>(e.children));
  const auto gp = to_tensor(std::get<1>(e.children)).template permute<1, 0, 2, 3>().contiguous();  // (O, N, oh, ow)
  const auto geo = e.op.forward.geometry(x.sizes(), e.op.weight_sizes);
  run_conv2d_weight<T>(out.data(), x.data(), x.strides(), gp.data(), geo, out.device());
}

template <class E, class Out>
void run_max_pool2d_node(const E& e, const Out& out) {
  using T = value_type_of<E>;
  const auto x = to_tensor(std::get<0>(e.children));
  run_max_pool2d<T>(out.data(), x.data(), x.sizes(), x.strides(), e.op.plan,
                    static_cast<T>(E::op_type::template lowest<T>()), out.device());
}

/// The non-pointwise node e written into out (fresh, contiguous, on a CUDA device).
template <class E, class Out>
void run_into(const E& e, const Out& out) {
  using Op = typename E::op_type;
  if constexpr (is_reduce_op<Op>) {
    const auto& child = std::get<0>(e.children);
    using C = std::remove_cvref_t<decltype(child)>;
    if constexpr (prim::is_arg_kind<typename Op::kind>)
      run_arg_reduce<typename Op::kind>(out, to_tensor(child), Op::template mask<C>());
    else
      run_reduce<typename Op::kind>(out, materialize(child), Op::template mask<C>());
  } else if constexpr (is_scan_op<Op>) {
    const auto& child = std::get<0>(e.children);
    using C = std::remove_cvref_t<decltype(child)>;
    run_scan<typename Op::kind>(out, to_tensor(child), Op::template dim<C>);
  } else if constexpr (sort_op<Op>::value) {  // sort / argsort / msort (backend/cuda/sort.hpp)
    const auto& child = std::get<0>(e.children);
    using C = std::remove_cvref_t<decltype(child)>;
    const auto x = to_tensor(child);
    if constexpr (sort_op<Op>::values)
      run_sort(x, Op::template dim<C>, e.op.descending, &out, static_cast<const Tensor<std::int64_t, shape_of<Out>>*>(nullptr));
    else
      run_sort(x, Op::template dim<C>, e.op.descending, static_cast<const Tensor<value_type_of<C>, shape_of<Out>>*>(nullptr), &out);
  } else if constexpr (is_gather_op<Op>) {
    auto x = to_tensor(std::get<0>(e.children));
    auto idx = to_tensor(std::get<1>(e.children));
    constexpr std::size_t d = prim::detail_indexing::norm_dim<decltype(x)::rank, Op::dim>();
    run_gather(at_least_1d(out), at_least_1d(x), at_least_1d(idx), d);
  } else if constexpr (is_scatter_op<Op>) {
    auto self = to_tensor(std::get<0>(e.children));
    auto idx = to_tensor(std::get<1>(e.children));
    auto src0 = to_tensor(std::get<2>(e.children));
    // a number (torch.scatter's value form) evaluates to a host tensor: one element to copy over
    auto src = src0.device() == out.device() ? src0 : src0.to(out.device());
    constexpr std::size_t d = prim::detail_indexing::norm_dim<decltype(self)::rank, Op::dim>();
    run_pointwise(out, self);
    if constexpr (decltype(src)::rank == 0 && decltype(self)::rank != 0)
      run_scatter<Op::op>(at_least_1d(out), at_least_1d(idx), src, d, e.op.include_self);
    else
      run_scatter<Op::op>(at_least_1d(out), at_least_1d(idx), at_least_1d(src), d, e.op.include_self);
  } else if constexpr (is_pad_op<Op>) {  // a fill and a strided copy, as on the CPU
    pad_into(e, out, [](const auto& dst, const auto& src) { run_pointwise(dst, src); });
  } else if constexpr (std::is_same_v<Op, prim::matmul_>) {
    run_matmul_node(e, out);
  } else if constexpr (std::is_same_v<Op, aten::conv2d>) {
    run_conv2d_node(e, out);
  } else if constexpr (std::is_same_v<Op, aten::conv2d_weight>) {
    run_conv2d_weight_node(e, out);
  } else if constexpr (std::is_same_v<Op, aten::max_pool2d>) {
    run_max_pool2d_node(e, out);
  } else if constexpr (softmax_kind<Op>::value) {
    run_row_node<softmax_kind<Op>::log ? row_kind::log_softmax : row_kind::softmax>(e, out);
  } else if constexpr (norm_kind<Op>::value) {
    run_row_node<norm_kind<Op>::rms ? row_kind::rms_norm : row_kind::layer_norm>(e, out);
  } else if constexpr (var_kind<Op>::value) {
    run_var_node(e, out);
  } else if constexpr (!Op::is_prim) {
    // a composite the CPU runs natively (layer_norm, rms_norm, ...) and CUDA does not yet: its
    // decomposition, which holds prims only
    assign(out, detail::apply_tuple([&](const auto&... c) { return e.op.decompose(c...); }, e.children));
  } else {
    throw device_error(std::string("tenet: the op '") + std::string(Op::name) +
                       "' is not implemented on CUDA yet; move its input to the CPU (t.cpu()) for it");
  }
}

}  // namespace tenet::detail::cuda
