#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Matrix products on CUDA through cuBLASLt (nvcc only; link CUDA::cublasLt).
//
// tenet's tensors are row-major; cuBLASLt's matrices column-major. A row-major [M, N] result is
// the column-major N x M matrix C' = op(B') op(A'), so the operands swap places: the kernel sees
// m = N, n = M. A row-major operand whose last dim has stride 1 is its column-major transpose
// read without a transpose flag; one whose second-to-last dim has stride 1 (a transposed view)
// takes the flag; any other layout is copied contiguous first.
// fp32 runs in fp32 (CUBLAS_COMPUTE_32F) or TF32 when tenet::cuda::set_allow_tf32(true);
// fp16/bf16 accumulate in fp32; fp64 in fp64. Batched products use cuBLASLt's strided batch; an
// operand whose batch dims one stride cannot express (heads split from a wider tensor, a
// broadcast over some batch dims only) is first copied contiguous (evaluate.hpp, run_matmul).
// Algorithm choice: cuBLASLt's heuristic's first candidate, kept per problem; with matmul tuning
// (tenet::cuda::set_matmul_tuning(true), or inside a max_autotune class's first call) the first
// call of a problem times up to 16 candidates and keeps the fastest (PyTorch's TunableOp idea).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <cublasLt.h>

#include <tenet/backend/cuda/pointwise.cuh>

namespace tenet::detail::cuda {

inline std::atomic<bool>& allow_tf32_flag() {
  static std::atomic<bool> f{false};  // PyTorch's default for matmul since 1.12
  return f;
}

/// Matmul tuning (tenet::cuda::set_matmul_tuning, PyTorch's torch.cuda.tunable): the first call of
/// each problem times cuBLASLt's candidate algorithms and keeps the fastest for the process.
inline std::atomic<bool>& matmul_tuning_flag() {
  static std::atomic<bool> f{false};
  return f;
}
/// tenet::compile's max_autotune turns tuning on for the GEMMs of a class's first call only.
inline int& matmul_tuning_depth() {
  thread_local int d = 0;
  return d;
}
struct matmul_tuning_scope {
  matmul_tuning_scope() { ++matmul_tuning_depth(); }
  ~matmul_tuning_scope() { --matmul_tuning_depth(); }
  matmul_tuning_scope(const matmul_tuning_scope&) = delete;
  matmul_tuning_scope& operator=(const matmul_tuning_scope&) = delete;
};
inline bool matmul_tuning_on() { return matmul_tuning_flag().load() || matmul_tuning_depth() > 0; }
/// How many of cuBLASLt's heuristic candidates tuning times, and the runs timed per candidate.
inline constexpr int tuning_candidates = 16;
inline constexpr int tuning_runs = 3;

inline void check_lt(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw device_error(std::string("tenet: cuBLASLt error in ") + what + ": status " +
                       std::to_string(static_cast<int>(st)));
}

/// cuBLASLt's handle and a workspace per device (created on first use, kept for the process).
struct lt_context {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = std::size_t{32} << 20;
};
inline lt_context& lt_for(int dev) {
  static std::mutex m;
  static std::unordered_map<int, lt_context>* all = new std::unordered_map<int, lt_context>;
  std::lock_guard<std::mutex> lock(m);
  auto& c = (*all)[dev];
  if (!c.handle) {
    check_lt(cublasLtCreate(&c.handle), "cublasLtCreate");
    TENET_CUDA_CHECK(cudaMalloc(&c.workspace, c.workspace_bytes));
  }
  return c;
}

template <class T>
struct lt_types;
template <>
struct lt_types<float> {
  static constexpr cudaDataType_t data = CUDA_R_32F, scale = CUDA_R_32F;
  static cublasComputeType_t compute() {
    return allow_tf32_flag().load() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  }
  using scale_t = float;
};
template <>
struct lt_types<double> {
  static constexpr cudaDataType_t data = CUDA_R_64F, scale = CUDA_R_64F;
  static cublasComputeType_t compute() { return CUBLAS_COMPUTE_64F; }
  using scale_t = double;
};
template <>
struct lt_types<float16> {
  static constexpr cudaDataType_t data = CUDA_R_16F, scale = CUDA_R_32F;
  static cublasComputeType_t compute() { return CUBLAS_COMPUTE_32F; }
  using scale_t = float;
};
template <>
struct lt_types<bfloat16> {
  static constexpr cudaDataType_t data = CUDA_R_16BF, scale = CUDA_R_32F;
  static cublasComputeType_t compute() { return CUBLAS_COMPUTE_32F; }
  using scale_t = float;
};
template <class T>
inline constexpr bool lt_supported = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                     std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

/// bias_grad (cuBLASLt's BGRADB): the bias pointer is an output, the sums over k of op(B), one per
/// column of D (a linear layer's bias gradient, written by its weight-gradient GEMM).
enum class epilogue { none, bias, bias_relu, bias_gelu_tanh, bias_grad };
/// How many bias gradients came from a GEMM's epilogue (tests check that the fused path ran).
inline std::atomic<std::int64_t>& bias_grad_epilogues() {
  static std::atomic<std::int64_t> n{0};
  return n;
}
/// Whether linear's backward may use it (on by default; off: the GEMM and a separate sum, for A/B
/// measurements).
inline std::atomic<bool>& bias_grad_epilogue_enabled() {
  static std::atomic<bool> on{true};
  return on;
}

/// Every parameter that decides cuBLASLt's algorithm choice.
struct algo_key {
  std::array<std::int64_t, 21> v;
  bool operator<(const algo_key& o) const { return v < o.v; }
};
/// An algorithm chosen for one problem, and whether it was chosen by timing (matmul tuning) or is
/// the heuristic's first.
struct lt_choice {
  cublasLtMatmulAlgo_t algo{};
  bool tuned = false;
  bool none = false;  // cuBLASLt has no algorithm for this problem (an optional epilogue: the caller falls back)
};
class lt_algo_cache {
 public:
  bool find(const algo_key& k, lt_choice& out) const {
    std::lock_guard<std::mutex> lock(m_);
    auto it = map_.find(k);
    if (it == map_.end()) return false;
    out = it->second;
    return true;
  }
  void put(const algo_key& k, const lt_choice& a) {
    std::lock_guard<std::mutex> lock(m_);
    if (map_.size() > 4096) map_.clear();  // a bound for programs with ever-changing shapes
    map_[k] = a;
  }

 private:
  mutable std::mutex m_;
  std::map<algo_key, lt_choice> map_;
};
inline lt_algo_cache& algo_cache() {
  static lt_algo_cache* c = new lt_algo_cache;
  return *c;
}

/// The index of the fastest of cuBLASLt's candidates: each runs once to warm up, then
/// tuning_runs times between CUDA events on stream s; its median counts. A candidate that fails
/// to run is skipped (the first one always runs: the heuristic's choice is the fallback).
template <class Run>
int fastest_algo(const cublasLtMatmulHeuristicResult_t* results, int found, Run& run, cudaStream_t s) {
  struct timing_events {
    cudaEvent_t a = nullptr, b = nullptr;
    timing_events() {
      TENET_CUDA_CHECK(cudaEventCreate(&a));
      TENET_CUDA_CHECK(cudaEventCreate(&b));
    }
    ~timing_events() {
      (void)cudaEventDestroy(a);
      (void)cudaEventDestroy(b);
    }
  } ev;
  const cudaEvent_t a = ev.a, b = ev.b;
  int best = 0;
  float best_ms = -1;
  for (int i = 0; i < found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS || run(results[i].algo) != CUBLAS_STATUS_SUCCESS) continue;
    float ms[tuning_runs];
    for (float& t : ms) {
      TENET_CUDA_CHECK(cudaEventRecord(a, s));
      (void)run(results[i].algo);
      TENET_CUDA_CHECK(cudaEventRecord(b, s));
      TENET_CUDA_CHECK(cudaEventSynchronize(b));
      TENET_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    }
    std::sort(ms, ms + tuning_runs);
    if (best_ms < 0 || ms[tuning_runs / 2] < best_ms) {
      best_ms = ms[tuning_runs / 2];
      best = i;
    }
  }
  return best;
}

/// cuBLASLt's matmul descriptor and matrix layouts for one problem (types, shapes, transposes,
/// leading dims, batch strides, epilogue), made on a thread's first call of the problem and kept:
/// creating them and setting their attributes costs several microseconds of host time per call,
/// which nanoGPT-sized steps (hundreds of small GEMMs) feel. Per thread, because a call sets the
/// descriptor's bias pointer.
struct lt_plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  lt_plan() = default;
  lt_plan(const lt_plan&) = delete;
  lt_plan& operator=(const lt_plan&) = delete;
  ~lt_plan() {
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};
using lt_plan_key = std::array<std::int64_t, 15>;
/// The calling thread's plan for key, made by make(plan) on first use (a plan that make leaves
/// half-made, by throwing, is dropped).
template <class Make>
lt_plan& lt_plan_for(const lt_plan_key& key, Make&& make) {
  thread_local std::map<lt_plan_key, std::unique_ptr<lt_plan>> plans;
  auto it = plans.find(key);
  if (it != plans.end()) return *it->second;
  if (plans.size() >= 1024) plans.clear();  // a bound for programs with ever-changing shapes
  auto p = std::make_unique<lt_plan>();
  make(*p);
  return *plans.emplace(key, std::move(p)).first->second;
}

/// One column-major operand as cuBLASLt reads it: op(X) is rows x cols.
struct lt_operand {
  const void* p;
  bool trans;           // stored as cols x rows
  std::int64_t ld;      // leading dim of the stored matrix
  std::int64_t stride;  // between batch entries
};

/// D (m x n, column-major, ldd, stride_d) = op(A) (m x k) * op(B) (k x n) [+ bias (m), act]
/// (+ D itself when accumulate); with epilogue::bias_grad, bias (n) = the sums of op(B) over k.
/// With `unsupported` given, a problem cuBLASLt has no algorithm for sets it true and computes
/// nothing (the caller takes another path) instead of throwing device_error.
template <class T>
void lt_matmul(int dev, std::int64_t m, std::int64_t n, std::int64_t k, const lt_operand& A, const lt_operand& B,
               T* D, std::int64_t ldd, std::int64_t stride_d, int batch, const T* bias, epilogue ep,
               bool accumulate = false, bool* unsupported = nullptr) {
  static_assert(lt_supported<T>);
  using L = lt_types<T>;
  auto& ctx = lt_for(dev);
  const cudaStream_t s = current_stream();
  lt_plan& plan = lt_plan_for(
      {static_cast<std::int64_t>(L::data), static_cast<std::int64_t>(L::compute()), m, n, k, A.trans, B.trans, A.ld,
       B.ld, ldd, A.stride, B.stride, stride_d, batch, static_cast<std::int64_t>(ep)},
      [&](lt_plan& p) {
        check_lt(cublasLtMatmulDescCreate(&p.desc, L::compute(), L::scale), "cublasLtMatmulDescCreate");
        const cublasOperation_t ta = A.trans ? CUBLAS_OP_T : CUBLAS_OP_N, tb = B.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
        check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "TRANSA");
        check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "TRANSB");
        if (ep != epilogue::none) {
          const cublasLtEpilogue_t e = ep == epilogue::bias             ? CUBLASLT_EPILOGUE_BIAS
                                       : ep == epilogue::bias_relu      ? CUBLASLT_EPILOGUE_RELU_BIAS
                                       : ep == epilogue::bias_gelu_tanh ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                                        : CUBLASLT_EPILOGUE_BGRADB;
          check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)), "EPILOGUE");
          const cudaDataType_t bt = L::data;
          check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)),
                   "BIAS_DATA_TYPE");
        }
        auto layout = [&](cublasLtMatrixLayout_t& l, std::int64_t rows, std::int64_t cols, std::int64_t ldx,
                          std::int64_t stride) {
          check_lt(cublasLtMatrixLayoutCreate(&l, L::data, static_cast<std::uint64_t>(rows),
                                              static_cast<std::uint64_t>(cols), ldx),
                   "cublasLtMatrixLayoutCreate");
          if (batch > 1) {
            check_lt(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)),
                     "BATCH_COUNT");
            check_lt(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                      sizeof(stride)),
                     "STRIDED_BATCH_OFFSET");
          }
        };
        layout(p.la, A.trans ? k : m, A.trans ? m : k, A.ld, A.stride);
        layout(p.lb, B.trans ? n : k, B.trans ? k : n, B.ld, B.stride);
        layout(p.ld, m, n, ldd, stride_d);
      });
  const cublasLtMatmulDesc_t desc = plan.desc;
  const cublasLtMatrixLayout_t la = plan.la, lb = plan.lb, ld = plan.ld;
  if (ep != epilogue::none)  // the one attribute that changes between calls of a problem
    check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
             "BIAS_POINTER");
  // the heuristic's choice is kept per problem (it costs tens of microseconds per query); the
  // pointers' alignment is part of the key because cuBLASLt's choice may depend on it
  auto align = [](const void* p) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return static_cast<std::int64_t>(a % 256 == 0 ? 256 : a % 16 == 0 ? 16 : a % 8 == 0 ? 8 : a % 4 == 0 ? 4 : 2);
  };
  const algo_key key{{static_cast<std::int64_t>(L::data), static_cast<std::int64_t>(L::compute()), dev, m, n, k,
                      A.trans, B.trans, A.ld, B.ld, ldd, A.stride, B.stride, stride_d, batch,
                      static_cast<std::int64_t>(ep), align(A.p), align(B.p), align(D), align(bias), accumulate}};
  const typename L::scale_t alpha = 1, beta = accumulate ? 1 : 0;
  auto run = [&](const cublasLtMatmulAlgo_t& a) {
    return cublasLtMatmul(ctx.handle, desc, &alpha, A.p, la, B.p, lb, &beta, D, ld, D, ld, &a, ctx.workspace,
                          ctx.workspace_bytes, s);
  };
  lt_choice choice;
  const bool cached = algo_cache().find(key, choice);
  if (cached && choice.none && unsupported) {  // (stored only for callers that take another path)
    *unsupported = true;
    return;
  }
  // Tuning runs the product several times into D: never for an accumulating product (D is an
  // input) nor while a CUDA graph is being captured (no timing there); such calls take the
  // heuristic's first choice.
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  const bool tune = !choice.tuned && !choice.none && matmul_tuning_on() && !accumulate &&
                    cudaStreamIsCapturing(s, &capturing) == cudaSuccess && capturing == cudaStreamCaptureStatusNone;
  if (!cached || choice.none || tune) {
    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    struct pref_guard {
      cublasLtMatmulPreference_t p;
      ~pref_guard() { cublasLtMatmulPreferenceDestroy(p); }
    } pg{pref};
    const std::uint64_t ws = ctx.workspace_bytes;
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
             "MAX_WORKSPACE_BYTES");
    cublasLtMatmulHeuristicResult_t results[tuning_candidates] = {};
    int found = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(ctx.handle, desc, la, lb, ld, ld, pref,
                                                             tune ? tuning_candidates : 1, results, &found);
    if (unsupported && (hs != CUBLAS_STATUS_SUCCESS || found == 0)) {
      lt_choice no;
      no.none = true;
      algo_cache().put(key, no);
      *unsupported = true;
      return;
    }
    check_lt(hs, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0)
      throw device_error("tenet: cuBLASLt has no algorithm for this matmul (m=" + std::to_string(m) + ", n=" +
                         std::to_string(n) + ", k=" + std::to_string(k) + ", batch=" + std::to_string(batch) + ")");
    choice = {results[0].algo, tune};
    if (tune && found > 1) choice.algo = results[fastest_algo(results, found, run, s)].algo;
    algo_cache().put(key, choice);
  }
  const cublasStatus_t rs = run(choice.algo);
  if (unsupported && rs == CUBLAS_STATUS_NOT_SUPPORTED) {
    *unsupported = true;
    return;
  }
  check_lt(rs, "cublasLtMatmul");
}

/// The column-major reading of the last two dims of a row-major operand (rows r, cols c):
/// ok=false when no leading dim cuBLASLt accepts describes it (neither dim has stride 1, or the
/// other dim's stride is below the extent it must step over: an expanded row (stride 0), rows
/// that overlap, a negative stride); the caller then copies it contiguous. A size-1 dim's stride
/// is meaningless and never taken as the leading dim; the other dim's stride always is.
struct cm_view {
  bool ok;
  bool trans;
  std::int64_t ld;
};
inline cm_view column_major_view(std::int64_t rows, std::int64_t cols, std::int64_t srow, std::int64_t scol) {
  const std::int64_t c1 = std::max<std::int64_t>(cols, 1), r1 = std::max<std::int64_t>(rows, 1);
  // op N: a cols x rows column-major matrix, element (i, j) of the operand at j + i * ld
  if ((scol == 1 || cols <= 1) && (rows <= 1 || srow >= c1)) return {true, false, rows <= 1 ? c1 : srow};
  // op T: a rows x cols column-major matrix, element (i, j) at i + j * ld
  if ((srow == 1 || rows <= 1) && (cols <= 1 || scol >= r1)) return {true, true, cols <= 1 ? r1 : scol};
  return {false, false, 0};
}

/// The single batch stride of an operand whose batch dims (right-aligned to `bat`) broadcast
/// into `bat`, or -1 when one stride cannot express them.
template <std::size_t NB, std::size_t RX>
std::int64_t batch_stride(const sizes_t<NB>& bat, const sizes_t<RX>& xs, const sizes_t<RX>& xst) {
  constexpr std::size_t xb = RX - 2;
  std::int64_t stride = -2;  // unknown
  // walk batch dims from the innermost; stride of index b must be b * s
  std::int64_t span = 1;  // product of the batch sizes inside
  for (std::size_t i = NB; i-- > 0;) {
    if (bat[i] == 1) continue;
    const std::size_t off = NB - i;
    std::int64_t st = 0;
    if (off <= xb) {
      const std::size_t j = xb - off;
      st = xs[j] == 1 ? 0 : xst[j];
    }
    if (stride == -2) {
      stride = st;
    } else if (st != stride * span) {
      return -1;
    }
    span *= bat[i];
  }
  return stride == -2 ? 0 : stride;
}

/// A linear layer's weight and bias gradients in one cuBLASLt call: dw (out x in, row-major,
/// contiguous) = g^T x and db (out) = the column sums of g, for x (rows x in) and g (rows x out)
/// on the device (the bias-gradient epilogue, BGRADB, on the weight-gradient GEMM). Returns false,
/// having written nothing, where cuBLASLt offers no algorithm with that epilogue (the caller then
/// runs the GEMM and the sum on their own).
template <class T>
bool linear_weight_bias_grad(const Tensor<T, dyn_shape<2>>& x, const Tensor<T, dyn_shape<2>>& g,
                             const Tensor<T, dyn_shape<2>>& dw, const Tensor<T, dyn_shape<1>>& db) {
  if constexpr (!lt_supported<T>) {
    return false;
  } else {
    const std::int64_t rows = x.sizes()[0], in = x.sizes()[1], out = g.sizes()[1];
    if (rows == 0 || in == 0 || out == 0 || g.sizes()[0] != rows || !bias_grad_epilogue_enabled()) return false;
    const device dev = g.device();
    device_context ctx(dev);
    // row-major dw (out x in) = g^T (out x rows) x (rows x in): cuBLASLt's D (in x out) =
    // x' (in x rows) (g^T)' (rows x out), whose columns are dw's rows; op(B) = (g^T)' is summed
    // over k = rows into db
    const auto xv = column_major_view(rows, in, x.strides()[0], x.strides()[1]);
    const auto gv = column_major_view(out, rows, g.strides()[1], g.strides()[0]);
    if (!xv.ok || !gv.ok) return false;
    bool unsupported = false;
    lt_matmul<T>(dev.index, in, out, rows, lt_operand{x.data(), xv.trans, xv.ld, 0},
                 lt_operand{g.data(), gv.trans, gv.ld, 0}, dw.data(), in, in * out, 1, db.data(), epilogue::bias_grad,
                 false, &unsupported);
    if (!unsupported) ++bias_grad_epilogues();
    return !unsupported;
  }
}

}  // namespace tenet::detail::cuda
