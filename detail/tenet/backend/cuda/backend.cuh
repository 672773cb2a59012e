#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The CUDA backend, cuda_gpu (nvcc only; backend/backends.hpp includes it in CUDA translation
// units). Its policy type and decomposition rules are in native.hpp; this file is what it gives the
// evaluator (docs/adding_a_backend.md), the kernels being in the headers beside it:
//   run_pointwise_kernel   every elementwise tree is one fused kernel (pointwise.cuh); random
//                          draws are leaves of those kernels (random.cuh)
//   run_kernel             the node kernels, one overload per op: reductions (reduce.cuh), argmax /
//                          argmin and scans (scan_argreduce.cuh), sort (sort.cuh), gather / scatter
//                          (indexing.cuh), pad (a fill and a strided copy), conv2d and max_pool2d
//                          (conv.cuh), matmul (cuBLASLt, gemm.hpp), softmax / log_softmax /
//                          layer_norm / rms_norm / var (one-pass row kernels, row_kernels.cuh); any other
//                          node throws device_error naming it
//   run_pattern            linear + bias (+ relu / tanh-gelu) as one cuBLASLt call (bias_act_pattern)
//   run_sort_both          sort's values and indices from one sort
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>
#include <type_traits>

#include <tenet/autocast.hpp>
#include <tenet/backend/cuda/attention.cuh>
#include <tenet/backend/cuda/autograd.cuh>  // the training kernels (backend/training.hpp)
#include <tenet/backend/cuda/conv.cuh>
#include <tenet/backend/cuda/cross_entropy.cuh>
#include <tenet/backend/cuda/native.hpp>
#include <tenet/backend/cuda/gemm.hpp>
#include <tenet/backend/cuda/indexing.cuh>
#include <tenet/backend/cuda/scan_argreduce.cuh>
#include <tenet/backend/cuda/pointwise.cuh>
#include <tenet/backend/cuda/random.cuh>
#include <tenet/backend/cuda/reduce.cuh>
#include <tenet/backend/cuda/row_kernels.cuh>
#include <tenet/backend/cuda/runtime.hpp>
#include <tenet/backend/cuda/sort.cuh>
#include <tenet/backend/registry.hpp>
#include <tenet/backend/views.hpp>
#include <tenet/schedule/lower.hpp>

namespace tenet::detail::cuda {

/// Calls f(src, aligned) with the row kernels' input for the producer m of a row node, m's index
/// space read in row-major order: a contiguous tensor, or a pointwise tree whose leaves are
/// contiguous in that order or broadcast scalars (fused into the row kernel); anything else is
/// evaluated into a contiguous tensor first.
template <class M, class F>
void with_row_source(const M& m, F&& f) {
  using T = value_type_of<M>;
  constexpr std::size_t R = rank_of<M> == 0 ? 1 : rank_of<M>;
  if constexpr (!TensorType<M> && rank_of<M> >= 1) {
    using tree_t = pointwise_tree<M, R>;
    const auto sizes = m.sizes();
    const tree_t tree(m, sizes);
    const auto cs = contiguous_strides(sizes);
    bool flat = true, aligned = true;
    tree.for_each_leaf([&](const void* p, std::size_t, const std::int64_t* st) {
      bool all_zero = true, contiguous = true;
      for (std::size_t d = 0; d < R; ++d) {
        all_zero = all_zero && st[d] == 0;
        contiguous = contiguous && st[d] == cs[d];  // (then st[0] != 0: pointwise_tree's flat loads read base + i)
      }
      if (!all_zero && !contiguous) flat = false;
      if (!all_zero && !aligned16(p)) aligned = false;
    });
    if (flat) {
      f(tree, aligned);
      return;
    }
  }
  // m is an operand: a tensor (copied when not contiguous), or an elementwise tree over lowered
  // values (one pointwise kernel)
  if constexpr (TensorType<M>) {
    const auto xc = m.is_contiguous() ? m : m.contiguous();
    f(ptr_src<T>{xc.data()}, aligned16(xc.data()));
  } else {
    Tensor<T, shape_of<M>> xc(m.sizes(), expr_device(m));
    run_pointwise(xc, m);
    ++kernels_launched();
    f(ptr_src<T>{xc.data()}, aligned16(xc.data()));
  }
}

/// A row composite of node e into out (fresh, contiguous): the row kernels of row_kernels.cuh, with the
/// pointwise producer of the input fused in when its layout allows.
template <row_kind K, class E, class Out, class M, class... P>
void run_row_node(const E& e, const Out& out, const M& m, const P&... params) {
  using T = value_type_of<E>;
  const std::int64_t n = out.numel();
  if (n == 0) return;
  device_context ctx(out.device());
  row_args<T> a{out.data(), nullptr, nullptr, 0, 0, 0.0};
  auto go = [&](const auto& src, bool aligned) { launch_rows<K, T>(a, src, aligned); };
  if constexpr (K == row_kind::softmax || K == row_kind::log_softmax) {
    a.cols = rank_of<E> == 0 ? 1 : out.sizes()[rank_of<E> == 0 ? 0 : rank_of<E> - 1];
    a.rows = a.cols == 0 ? 0 : n / a.cols;
    with_row_source(m, go);
  } else {
    const auto w = std::get<0>(std::tie(params...)).contiguous();
    a.w = w.data();
    a.cols = w.numel();
    a.rows = a.cols == 0 ? 0 : n / a.cols;
    a.eps = e.op.eps;
    if constexpr (K == row_kind::layer_norm) {
      const auto b = std::get<1>(std::tie(params...)).contiguous();
      a.b = b.data();
      with_row_source(m, go);
    } else {
      with_row_source(m, go);
    }
  }
}

/// layer_norm's (rms_norm's) input gradient into out (fresh, contiguous): one row kernel.
template <bool Rms, class E, class Out, class X, class W, class G>
void run_norm_grad_node(const E& e, const Out& out, const X& x, const W& w, const G& g) {
  using T = value_type_of<E>;
  if (out.numel() == 0) return;
  device_context ctx(out.device());
  const auto xc = x.is_contiguous() ? x : x.contiguous();
  const auto gc = g.is_contiguous() ? g : g.contiguous();
  const auto wc = w.is_contiguous() ? w : w.contiguous();
  const std::int64_t cols = wc.numel();
  norm_grad_args<T> a{out.data(), xc.data(), gc.data(), wc.data(), out.numel() / cols, cols, e.op.eps};
  launch_norm_grad<Rms>(a);
}

/// M is the cast of a 16-bit tensor to its compute type (float): low is that 16-bit type.
template <class M>
struct ce_widened {};
template <class To, class L, class S>
  requires(half_precision<L> && std::is_same_v<To, compute_t<L>>)
struct ce_widened<node<prim::convert_element_type_<To>, Tensor<L, S>>> {
  using low = L;
};

/// cross_entropy over rows (native.hpp) into out [N, 1] (fresh, contiguous): a block per row of
/// the row source of m (a pointwise producer such as the float cast of bf16 logits is read while
/// loading).
template <class E, class Out, class M, class Tt>
void run_cross_entropy_node(const E& e, const Out& out, const M& m, const Tt& t) {
  using T = value_type_of<M>;
  const std::int64_t rows = out.numel();
  if (rows == 0) return;
  device_context ctx(out.device());
  const auto tc = t.device() == out.device() ? t : t.to(out.device());
  ce_args<compute_t<T>> a{out.data(), tc.data(), tc.strides()[0], nullptr, 0, rows, m.sizes()[1], e.op.ignore_index};
  if constexpr (requires { typename ce_widened<M>::low; }) {
    // the float cast of contiguous 16-bit logits: the kernel reads them as they are (16-byte
    // vectors of 8, ex2.approx) and widens each value, as the cast would have
    using L = typename ce_widened<M>::low;
    const auto& x = std::get<0>(m.children);
    if (x.is_contiguous()) {
      launch_ce_forward<L>(a, ptr_src<L>{x.data()}, aligned16(x.data()));
      return;
    }
  }
  with_row_source(m, [&](const auto& src, bool aligned) { launch_ce_forward<T>(a, src, aligned); });
}
/// Its gradient into out [N, C] (fresh, contiguous) from x [N, C], t and g [N, 1].
template <class E, class Out, class X, class Tt, class G>
void run_cross_entropy_grad_node(const E& e, const Out& out, const X& x, const Tt& t, const G& g) {
  using T = value_type_of<X>;
  const std::int64_t rows = out.sizes()[0];
  if (out.numel() == 0) return;
  device_context ctx(out.device());
  const auto xc = x.is_contiguous() ? x : x.contiguous();
  const auto tc = t.device() == out.device() ? t : t.to(out.device());
  const auto gc = g.device() == out.device() ? g : g.to(out.device());
  ce_args<compute_t<T>> a{nullptr, tc.data(), tc.strides()[0], gc.data(), gc.strides()[0], rows, out.sizes()[1],
                          e.op.ignore_index};
  launch_ce_backward<T>(a, xc.data(), out.data());
}

/// var over the last dim (runs_natively<cuda_gpu, aten::var_>, native.hpp) into out (fresh,
/// contiguous, one element per row): the var row kernel, its input read once. Few long float or
/// double rows (fewer than two per SM, over 16 Ki elements each) would leave most SMs idle with a
/// block per row: they take the decomposition's reductions instead, which split long rows over the
/// card; so do empty rows (NaN: 0 / 0, as torch). 16-bit rows always take the row kernel (one pass;
/// the decomposition of 16-bit inputs computes in float too, ops.hpp var_impl, but reads x twice).
template <class E, class Out, class M>
void run_var_node(const E& e, const Out& out, const M& m) {
  using T = value_type_of<E>;
  const auto& child = std::get<0>(e.children);
  using C = std::remove_cvref_t<decltype(child)>;
  const std::int64_t rows = out.numel();
  if (rows == 0) return;
  const auto in = child.sizes();
  const std::int64_t cols = in[rank_of<C> - 1];
  device_context ctx(out.device());
  if (cols == 0 || (!half_precision<T> && rows < 2LL * sm_count(out.device().index) && cols > 16384)) {
    assign(out, e.op.decompose(m));
    return;
  }
  const double denom = std::max(0.0, static_cast<double>(cols) - e.op.correction);
  row_args<T> a{out.data(), nullptr, nullptr, rows, cols, denom};
  with_row_source(m, [&](const auto& src, bool aligned) { launch_rows<row_kind::var, T>(a, src, aligned); });
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

template <class E, class Out, class A, class B>
void run_matmul_node(const E&, const Out& out, const A& a, const B& b) {
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

}  // namespace tenet::detail::cuda

namespace tenet::detail {

/// The rows x cols strides of x [R, K] or, for x [B, T, K], of its first two dims taken as one
/// (R = B T): possible when they merge (B or T is 1, or x's dim 0 steps over whole dim-1 rows).
struct gemm_rows_view {
  bool ok;
  std::int64_t rows, srow, scol;
};
template <class X>
gemm_rows_view merge_gemm_rows(const X& x) {
  const auto xs = x.sizes();
  const auto st = x.strides();
  if constexpr (rank_of<X> == 2) {
    return {true, xs[0], st[0], st[1]};
  } else {
    static_assert(rank_of<X> == 3);
    const std::int64_t rows = xs[0] * xs[1];
    if (xs[1] == 1) return {true, rows, st[0], st[2]};
    if (xs[0] == 1 || st[0] == xs[1] * st[1]) return {true, rows, st[1], st[2]};
    return {false, rows, 0, 0};
  }
}

/// linear + bias (+ relu / tanh-gelu) as one cuBLASLt call with an epilogue (native.hpp: bias_act):
/// when the run-time sizes allow it (neither the product nor the bias is broadcast, K > 0, no
/// empty product, relu's scalar is 0) and the operands are on a CUDA device. The product may be
/// of x [B, T, K] (a Transformer's linear): its rows are B T, copied first where x's leading dims
/// do not merge.
struct bias_act_pattern {
  static constexpr const char* kind = "gemm+bias_act";
  template <class E>
  static constexpr bool candidate() {
    return cuda::bias_act<E>::kind != cuda::bias_act_kind::none;
  }
  template <class E>
  static auto parts(const E& e) {
    using P = cuda::bias_act<E>;
    const auto& add = P::add(e);
    using Add = std::remove_cvref_t<decltype(add)>;
    constexpr std::size_t im = cuda::bias_add<Add>::mm;
    return std::tie(std::get<im>(add.children), std::get<1 - im>(add.children));  // (matmul, bias)
  }
  template <class E>
  static bool applies(const E& e) {
    using P = cuda::bias_act<E>;
    if constexpr (P::kind == cuda::bias_act_kind::relu) {
      if (!(static_cast<double>(std::get<1>(e.children).value) == 0.0)) return false;  // maximum(x + b, c), c != 0
    }
    const auto [mm, bias] = parts(e);
    const auto es = e.sizes();
    constexpr std::size_t R = rank_of<E>;
    const std::int64_t K = std::get<0>(mm.children).sizes()[R - 1];
    if (mm.sizes() != es || bias.sizes()[0] != es[R - 1] || K == 0) return false;
    for (std::size_t i = 0; i < R; ++i)
      if (es[i] == 0) return false;
    return expr_device(e).type == device_type::cuda;
  }
  /// For the kernel plan: the ops it fuses and its FLOPs (the GEMM's 2 M N K, the bias and the
  /// activation one per element each).
  template <class E>
  static void describe(const E& e, std::vector<std::string>& fused, double& flops) {
    const auto [mm, bias] = parts(e);
    constexpr std::size_t R = rank_of<E>;
    const double K = static_cast<double>(std::get<0>(mm.children).sizes()[R - 1]);
    double n = 1;
    for (std::size_t i = 0; i < R; ++i) n *= static_cast<double>(e.sizes()[i]);
    constexpr auto act = cuda::bias_act<E>::kind;
    fused.insert(fused.end(), {"matmul", "add"});
    if constexpr (act == cuda::bias_act_kind::relu) fused.push_back("relu");
    if constexpr (act == cuda::bias_act_kind::gelu_tanh) fused.push_back("gelu_tanh");
    flops += 2.0 * n * K + (act == cuda::bias_act_kind::bias ? 1.0 : 2.0) * n;
  }
  template <class B, class S, class E>
  static auto lower(const E& e, S& s) {
    const auto [mm, bias] = parts(e);
    auto out = s.output(e);
    auto a = s.operand(lower_value<B>(std::get<0>(mm.children), s));
    auto b = s.operand(lower_value<B>(std::get<1>(mm.children), s));
    return s.template pattern<bias_act_pattern>(B{}, e, out, a, b, s.input(bias));
  }
};

template <class E, class Out, class A, class Bm, class Bias>
void run_pattern(cuda_gpu, bias_act_pattern, const E& e, const Out& out, A a, Bm b, const Bias& bias) {
  using namespace cuda;
  using P = bias_act<E>;
  using T = value_type_of<E>;
  constexpr std::size_t R = rank_of<E>;
  const auto es = e.sizes();
  const std::int64_t K = a.sizes()[R - 1];
  const device dev = out.device();
  const auto bc = bias.contiguous();
  const std::int64_t N = es[R - 1];
  device_context ctx(dev);
  gemm_rows_view ar = merge_gemm_rows(a);
  if (!ar.ok) a = a.contiguous(), ar = merge_gemm_rows(a);
  const std::int64_t M = ar.rows;
  auto av = column_major_view(M, K, ar.srow, ar.scol);
  if (!av.ok) a = a.contiguous(), ar = merge_gemm_rows(a), av = column_major_view(M, K, ar.srow, ar.scol);
  auto bv = column_major_view(K, N, b.strides()[0], b.strides()[1]);
  if (!bv.ok) b = b.contiguous(), bv = column_major_view(K, N, b.strides()[0], b.strides()[1]);
  const epilogue ep = P::kind == bias_act_kind::relu        ? epilogue::bias_relu
                      : P::kind == bias_act_kind::gelu_tanh ? epilogue::bias_gelu_tanh
                                                            : epilogue::bias;
  if (with_autocast_dtype<T>([&](auto low) {
        // autocast (torch's autocast linear): operands and bias in L, one rounding of act(x w + b) to L
        using L = decltype(low);
        const auto al = cast_on_device<L>(a);  // (two declarations: a and b may differ in static shape)
        const auto bl = cast_on_device<L>(b);
        const auto biasl = cast_on_device<L>(bc);
        Tensor<L, shape_of<Out>> tmp(es, dev);
        const gemm_rows_view alr = merge_gemm_rows(al);  // contiguous copies
        const auto alv = column_major_view(M, K, alr.srow, alr.scol);
        const auto blv = column_major_view(K, N, bl.strides()[0], bl.strides()[1]);
        lt_matmul<L>(dev.index, N, M, K, lt_operand{bl.data(), blv.trans, blv.ld, 0},
                     lt_operand{al.data(), alv.trans, alv.ld, 0}, tmp.data(), N, M * N, 1, biasl.data(), ep);
        run_pointwise(out, cast_to<T>(tmp));
      }))
    return;
  // C' (N x M) = op(b') (N x K) * op(a') (K x M), the bias along C's rows (N)
  lt_matmul<T>(dev.index, N, M, K, lt_operand{b.data(), bv.trans, bv.ld, 0}, lt_operand{a.data(), av.trans, av.ld, 0},
               out.data(), N, M * N, 1, bc.data(), ep);
}

}  // namespace tenet::detail

namespace tenet::detail::cuda {

/// conv2d (im2col + cuBLASLt); under autocast, fp32 operands run in the low dtype (as matmul).
template <class E, class Out, class X, class W>
void run_conv2d_node(const E& e, const Out& out, const X& x, const W& w0) {
  using T = value_type_of<E>;
  const auto w = w0.contiguous();
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
template <class E, class Out, class X, class G>
void run_conv2d_weight_node(const E& e, const Out& out, const X& x, const G& g) {
  using T = value_type_of<E>;
  const auto gp = g.template permute<1, 0, 2, 3>().contiguous();  // (O, N, oh, ow)
  const auto geo = e.op.forward.geometry(x.sizes(), e.op.weight_sizes);
  run_conv2d_weight<T>(out.data(), x.data(), x.strides(), gp.data(), geo, out.device());
}

template <class E, class Out, class X>
void run_max_pool2d_node(const E& e, const Out& out, const X& x) {
  using T = value_type_of<E>;
  run_max_pool2d<T>(out.data(), x.data(), x.sizes(), x.strides(), e.op.plan,
                    static_cast<T>(E::op_type::template lowest<T>()), out.device());
}

}  // namespace tenet::detail::cuda

namespace tenet::detail {

// --- the evaluator's entry points (out: fresh, contiguous, on a CUDA device) ------------------
template <class Out, class M>
void run_pointwise_kernel(cuda_gpu, const Out& out, const M& tree) {
  cuda::run_pointwise(out, tree);
}

template <class Kind, bool Keep, auto... D, class E, class Out, class X>
void run_kernel(cuda_gpu, const prim::reduce_<Kind, Keep, D...>&, const E&, const Out& out, const X& x) {
  using Op = prim::reduce_<Kind, Keep, D...>;
  using C = std::remove_cvref_t<std::tuple_element_t<0, decltype(std::declval<const E&>().children)>>;
  if constexpr (prim::is_arg_kind<Kind>)
    cuda::run_arg_reduce<Kind>(out, x, Op::template mask<C>());  // (a value: takes_prologue below)
  else
    cuda::run_reduce<Kind>(out, x, Op::template mask<C>());
}

template <class Kind, std::int64_t Dim, class E, class Out, class X>
void run_kernel(cuda_gpu, const prim::scan_<Kind, Dim>&, const E&, const Out& out, const X& x) {
  using C = std::remove_cvref_t<std::tuple_element_t<0, decltype(std::declval<const E&>().children)>>;
  cuda::run_scan<Kind>(out, x, prim::scan_<Kind, Dim>::template dim<C>);
}

template <std::int64_t Dim, prim::sort_output Output, class E, class Out, class X>
void run_kernel(cuda_gpu, const prim::sort_<Dim, Output>& op, const E&, const Out& out, const X& x) {
  using C = std::remove_cvref_t<std::tuple_element_t<0, decltype(std::declval<const E&>().children)>>;
  constexpr std::size_t d = prim::sort_<Dim, Output>::template dim<C>;
  if constexpr (Output == prim::sort_output::values)
    cuda::run_sort(x, d, op.descending, &out, static_cast<const Tensor<std::int64_t, shape_of<Out>>*>(nullptr));
  else
    cuda::run_sort(x, d, op.descending, static_cast<const Tensor<value_type_of<C>, shape_of<Out>>*>(nullptr), &out);
}

template <class X, class V, class I>
void run_sort_both(cuda_gpu, const X& x, std::size_t dim, bool descending, const V& values, const I& indices) {
  cuda::run_sort(x, dim, descending, &values, &indices);
}

template <std::int64_t D, class E, class Out, class X, class I>
void run_kernel(cuda_gpu, const prim::gather_<D>&, const E&, const Out& out, const X& x, const I& idx) {
  constexpr std::size_t d = prim::detail_indexing::norm_dim<X::rank, D>();
  cuda::run_gather(at_least_1d(out), at_least_1d(x), at_least_1d(idx), d);
}

template <std::int64_t D, prim::scatter_op Op, class E, class Out, class X, class I, class Src0>
void run_kernel(cuda_gpu, const prim::scatter_<D, Op>& op, const E&, const Out& out, const X& self, const I& idx,
                const Src0& src0) {
  // a number (torch.scatter's value form) evaluates to a host tensor: one element to copy over
  auto src = src0.device() == out.device() ? src0 : src0.to(out.device());
  constexpr std::size_t d = prim::detail_indexing::norm_dim<X::rank, D>();
  cuda::run_pointwise(out, self);
  if constexpr (decltype(src)::rank == 0 && X::rank != 0)
    cuda::run_scatter<Op>(at_least_1d(out), at_least_1d(idx), src, d, op.include_self);
  else
    cuda::run_scatter<Op>(at_least_1d(out), at_least_1d(idx), at_least_1d(src), d, op.include_self);
}

template <std::size_t R, class E, class Out, class X>
void run_kernel(cuda_gpu, const prim::pad_<R>& op, const E&, const Out& out, const X& x) {
  pad_into(op, x, out, [](const auto& dst, const auto& src) { cuda::run_pointwise(dst, src); });  // as on the CPU
}

template <class E, class Out, class A, class B>
void run_kernel(cuda_gpu, const prim::matmul_&, const E& e, const Out& out, const A& a, const B& b) {
  cuda::run_matmul_node(e, out, a, b);
}

template <class E, class Out, class X, class W>
void run_kernel(cuda_gpu, const aten::conv2d&, const E& e, const Out& out, const X& x, const W& w) {
  cuda::run_conv2d_node(e, out, x, w);
}
template <class E, class Out, class X, class G>
void run_kernel(cuda_gpu, const aten::conv2d_weight&, const E& e, const Out& out, const X& x, const G& g) {
  cuda::run_conv2d_weight_node(e, out, x, g);
}
template <class E, class Out, class X>
void run_kernel(cuda_gpu, const aten::max_pool2d&, const E& e, const Out& out, const X& x) {
  cuda::run_max_pool2d_node(e, out, x);
}

template <std::int64_t D, class E, class Out, class X>
void run_kernel(cuda_gpu, const aten::softmax<D>&, const E& e, const Out& out, const X& x) {
  cuda::run_row_node<cuda::row_kind::softmax>(e, out, x);
}
template <std::int64_t D, class E, class Out, class X>
void run_kernel(cuda_gpu, const aten::log_softmax<D>&, const E& e, const Out& out, const X& x) {
  cuda::run_row_node<cuda::row_kind::log_softmax>(e, out, x);
}
template <std::size_t K, bool Rms, class E, class Out, class X, class... P>
void run_kernel(cuda_gpu, const aten::norm_last<K, Rms>&, const E& e, const Out& out, const X& x, const P&... p) {
  cuda::run_row_node<Rms ? cuda::row_kind::rms_norm : cuda::row_kind::layer_norm>(e, out, x, p...);
}
template <std::size_t K, bool Rms, class E, class Out, class X, class W, class G>
void run_kernel(cuda_gpu, const aten::norm_last_grad<K, Rms>&, const E& e, const Out& out, const X& x, const W& w,
                const G& g) {
  cuda::run_norm_grad_node<Rms>(e, out, x, w, g);
}
template <class E, class Out, class X, class Tt>
void run_kernel(cuda_gpu, const aten::cross_entropy_rows&, const E& e, const Out& out, const X& x, const Tt& t) {
  cuda::run_cross_entropy_node(e, out, x, t);
}
template <class E, class Out, class X, class Tt, class G>
void run_kernel(cuda_gpu, const aten::cross_entropy_rows_grad&, const E& e, const Out& out, const X& x, const Tt& t,
                const G& g) {
  cuda::run_cross_entropy_grad_node(e, out, x, t, g);
}
template <bool Keep, auto... D, class E, class Out, class X>
void run_kernel(cuda_gpu, const aten::var_<Keep, D...>&, const E& e, const Out& out, const X& x) {
  cuda::run_var_node(e, out, x);
}

/// scaled_dot_product_attention and its backward: the variant select_sdpa picks; flash and
/// memory_efficient run the tensor-core kernels (attention.cuh), math its decomposition in stages
/// (aten::sdpa::math_with).
struct cuda_evaluate_stage {
  device where;  // a stage without a device of its own (the causal mask's indices) moves here
  template <class X>
  auto operator()(const X& x) const {
    auto t = evaluate_untracked(x);
    return t.device() == where ? t : t.to(where);
  }
};
/// lse2: where the kernel writes each score row's log-sum-exp (base 2, +inf for a row with no key)
/// for the backward; null: nowhere.
template <class Forced, class Out, class Q, class K, class V, class... M>
void run_sdpa(cuda_gpu, const aten::sdpa<Forced>& op, sdpa_backend variant, float* lse2, const Out& out, const Q& q,
              const K& k, const V& v, const M&... m) {
  using T = value_type_of<Q>;
  if (variant == sdpa_backend::math) {
    assign(out, op.math_with(cuda_evaluate_stage{out.device()}, q, k, v, m...));
    return;
  }
  if constexpr (half_precision<T>) {
    cuda::attn::params p = cuda::attn::params_of(op, q, k, v, m...);
    p.out = out.data();
    p.lse2 = lse2;
    using MT = cuda::attn::mask_traits<M...>;
    cuda::attn::forward<std::is_same_v<T, bfloat16>, MT::kind, typename MT::type>(p);
    ++kernels_launched();
  }
}
/// Attention of float32 operands written under autocast (op.autocast: float16 / bfloat16): run(out2,
/// x2...) with x's floating operands cast to that dtype and out2 a buffer of it, then out2 cast into
/// out, as torch's autocast runs attention (forward and backward) in its low dtype. False, and run
/// not called, when the node was not autocast.
template <class Forced, class Out, class F, class... X>
bool run_sdpa_autocast(const aten::sdpa<Forced>& op, const Out& out, F&& run, const X&... x) {
  if constexpr (!std::is_same_v<value_type_of<Out>, float>) {
    return false;
  } else {
    auto in = [&]<class L>() {
      const auto low = [](const auto& t) {  // a bool mask stays as it is
        if constexpr (std::is_same_v<value_type_of<decltype(t)>, float>) return cuda::cast_on_device<L>(t);
        else return t;
      };
      Tensor<L, dyn_shape<rank_of<Out>>> tmp(out.sizes(), out.device());
      run(tmp, low(x)...);
      cuda::run_pointwise(out, cast_to<float>(tmp));
    };
    if (op.autocast == dtype::bfloat16) in.template operator()<bfloat16>();
    else if (op.autocast == dtype::float16) in.template operator()<float16>();
    else return false;
    return true;
  }
}
template <class Forced, class E, class Out, class Q, class K, class V, class... M>
void run_kernel(cuda_gpu b, const aten::sdpa<Forced>& op, const E& e, const Out& out, const Q& q, const K& k,
                const V& v, const M&... m) {
  const sdpa_backend variant = select_sdpa<cuda_gpu>(e).variant;  // for the autocast dtype, if any
  float* lse2 = nullptr;  // kept for the backward inside a recorded forward (a row per (batch, head, query))
  if (variant != sdpa_backend::math && v.sizes()[rank_of<V> - 1] > 0) {
    std::int64_t rows = 1;
    for (std::size_t i = 0; i + 1 < rank_of<Q>; ++i) rows *= q.sizes()[i];
    lse2 = sdpa_lse_buffer<float>(e, rows, out.device());
  }
  auto run = [&](const auto& o2, const auto& q2, const auto& k2, const auto& v2, const auto&... m2) {
    run_sdpa(b, op, variant, lse2, dyn_view(o2), dyn_view(q2), dyn_view(k2), dyn_view(v2), dyn_view(m2)...);
  };
  if (!run_sdpa_autocast(op, out, run, q, k, v, m...)) run(out, q, k, v, m...);
}
template <class Forced, class Out, class Q, class K, class V, class O, class G, class... M>
void run_sdpa_grad(cuda_gpu, const aten::sdpa_grad<Forced>& op, sdpa_backend variant, const Out& out, const Q& q,
                   const K& k, const V& v, const O& o, const G& g, const M&... m) {
  using T = value_type_of<Q>;
  if (variant == sdpa_backend::math) {
    assign(out, op.decompose_with(cuda_evaluate_stage{out.device()}, q, k, v, o, g, m...));
    return;
  }
  if constexpr (half_precision<T>) {
    cuda::attn::params p = cuda::attn::params_of(op.forward, q, k, v, m...);
    constexpr std::size_t R = rank_of<Q>;
    p.o = cuda::attn::operand_of<R>(o, p.Ev), p.dout = cuda::attn::operand_of<R>(g, p.Ev);
    const std::int64_t rows = std::max<std::int64_t>(cuda::attn::batch_heads(p, p.hq) * p.L, 1);
    // the forward's log-sum-exp when it kept one (a recorded forward), else recomputed into lse
    const float* saved = sdpa_saved_lse<float>(op, cuda::attn::batch_heads(p, p.hq) * p.L, out.device());
    Tensor<float, dyn_shape<1>> lse(sizes_t<1>{saved ? 1 : rows}, out.device()), delta(sizes_t<1>{rows}, out.device());
    p.lse2 = saved ? const_cast<float*>(saved) : lse.data(), p.delta = delta.data();  // the kernels only read a saved one
    T* dq = out.data();
    p.dq = dq, p.dk = dq + q.numel(), p.dv = dq + q.numel() + k.numel();
    using MT = cuda::attn::mask_traits<M...>;
    cuda::attn::backward<std::is_same_v<T, bfloat16>, MT::kind, typename MT::type>(p, saved != nullptr);
    ++kernels_launched();
    if constexpr (sizeof...(M) == 1) {
      // an additive mask's slot: its gradient is not wanted here (else math was selected)
      const std::int64_t used = q.numel() + k.numel() + v.numel();
      if (out.numel() > used)
        cuda::check(cudaMemsetAsync(dq + used, 0, static_cast<std::size_t>(out.numel() - used) * sizeof(T), cuda::current_stream()),
              "cudaMemsetAsync");
    }
  }
}
template <class Forced, class E, class Out, class Q, class K, class V, class O, class G, class... M>
void run_kernel(cuda_gpu b, const aten::sdpa_grad<Forced>& op, const E& e, const Out& out, const Q& q, const K& k,
                const V& v, const O& o, const G& g, const M&... m) {
  const sdpa_backend variant = select_sdpa<cuda_gpu>(e).variant;  // for the autocast dtype, if any
  auto run = [&](const auto& out2, const auto& q2, const auto& k2, const auto& v2, const auto& o2, const auto& g2,
                 const auto&... m2) {
    run_sdpa_grad(b, op, variant, dyn_view(out2), dyn_view(q2), dyn_view(k2), dyn_view(v2), dyn_view(o2),
                  dyn_view(g2), dyn_view(m2)...);
  };
  if (!run_sdpa_autocast(op.forward, out, run, q, k, v, o, g, m...)) run(out, q, k, v, o, g, m...);
}

/// Any other node: a composite the CPU runs natively (layer_norm, rms_norm, ...) and CUDA does
/// not yet runs its decomposition, which holds prims only; a prim without a CUDA kernel throws.
template <class Op, class E, class Out, class... O>
void run_kernel(cuda_gpu, const Op& op, const E&, const Out& out, const O&... operands) {
  if constexpr (!Op::is_prim) {
    assign(out, op.decompose(operands...));
  } else {
    throw device_error(std::string("tenet: the op '") + std::string(Op::name) +
                       "' is not implemented on CUDA yet; move its input to the CPU (t.cpu()) for it");
  }
}
}  // namespace tenet::detail
