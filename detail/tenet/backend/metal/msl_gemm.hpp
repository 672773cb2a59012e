#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The Metal GEMM (docs/metal.md): out = act(A B + bias) for A (M x K) and B (K x N) of any strides
// (a transposed operand is its strides), out of any strides, with the epilogues of CUDA's GEMM
// (backend/cuda/gemm.hpp: none, bias, bias + relu, bias + tanh-GELU; the bias one value per
// column of out). Tiled on simdgroup matrices:
//   - a threadgroup computes a 32 x 32 tile of out with 4 simdgroups (128 threads), each a 16 x 16
//     quarter as 2 x 2 simdgroup_float8x8 accumulators;
//   - per step of 16 along K, the threads copy the 32 x 16 tile of A and the 16 x 32 tile of B into
//     threadgroup memory as float (zero past M, N or K: ragged edges need no other case), a
//     barrier, then each simdgroup loads its 8 x 8 fragments and multiply-accumulates, and a
//     barrier before the next step overwrites the tiles;
//   - the accumulators go to a 32 x 32 float tile in threadgroup memory, a barrier, and each
//     thread applies the epilogue in float to its elements and stores them rounded once to T.
// float32, float16 and bfloat16 operands (16-bit ones widened to float in threadgroup memory:
// products and sums in float, as the CPU's 16-bit GEMM, the result rounded once).
//
// Argument table: buffer(0) out, buffer(1) A, buffer(2) B, [bias: buffer(3) bias], then the
// parameters (long): M, N, K, A's row and column strides, B's row and column strides, out's row
// and column strides, the number of column tiles, bias's stride; threadgroup(0) the A tile (32 x
// 16 floats), threadgroup(1) the B tile (16 x 32), threadgroup(2) the out tile (32 x 32).
// Dispatch: one threadgroup of gemm_threads per tile, tiles row-major (gemm_tiles).
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <tenet/backend/metal/msl_common.hpp>
#include <tenet/tensor.hpp>

namespace tenet::detail::metal {

/// The epilogues of the GEMM: those of CUDA's (bias_act_pattern's).
enum class gemm_epilogue { none, bias, bias_relu, bias_gelu_tanh };

inline constexpr std::uint32_t gemm_tile = 32, gemm_step = 16, gemm_threads = 128;

/// The GEMM of T with epilogue Ep (see the top of the file).
template <class T, gemm_epilogue Ep = gemm_epilogue::none>
const kernel_source& gemm_kernel() {
  static const kernel_source k = [] {
    static_assert(std::is_same_v<T, float> || half_precision<T>, "tenet: the Metal GEMM takes float32, float16 and bfloat16");
    constexpr bool bias = Ep != gemm_epilogue::none;
    const std::string t(msl_type<T>());
    const std::string ep = Ep == gemm_epilogue::none ? "" : Ep == gemm_epilogue::bias ? ", + bias" : Ep == gemm_epilogue::bias_relu ? ", + bias, relu" : ", + bias, tanh-GELU";
    kernel_source out;
    out.description = std::string("GEMM of ") + (std::is_same_v<T, float> ? "float32" : std::is_same_v<T, float16> ? "float16" : "bfloat16") +
                      " on simdgroup matrices, 32 x 32 tiles" + ep;
    out.name = kernel_name("tenet_gemm", out.description);
    const std::string P = bias ? "4" : "3";
    std::string s = "[[kernel]] void " + out.name +
                    "(\n"
                    "    tenet_buffer<" + t + "> out [[buffer(0)]],\n"
                    "    tenet_buffer<const " + t + "> a [[buffer(1)]],\n"
                    "    tenet_buffer<const " + t + "> b [[buffer(2)]],\n";
    if (bias) s += "    tenet_buffer<const " + t + "> bias [[buffer(3)]],\n";
    s += "    tenet_buffer<const long> p [[buffer(" + P + ")]],\n"
         "    tenet_threadgroup<float> as [[threadgroup(0)]],\n"
         "    tenet_threadgroup<float> bs [[threadgroup(1)]],\n"
         "    tenet_threadgroup<float> cs [[threadgroup(2)]],\n" +
         std::string(builtin_parameters) + ") {\n  (void)gid, (void)lane;\n";
    s += "  const long M = p[0], N = p[1], K = p[2];\n";
    s += "  const long row0 = long(tgid) / p[9] * 32, col0 = long(tgid) % p[9] * 32;\n";
    s += "  // this simdgroup's 16 x 16 quarter of the tile: 2 x 2 accumulators of 8 x 8\n";
    s += "  const uint sr = (sg / 2) * 16, sc = (sg % 2) * 16;\n";
    s += "  simdgroup_float8x8 acc[2][2];\n";
    s += "  for (uint i = 0; i < 2; ++i)\n";
    s += "    for (uint j = 0; j < 2; ++j) acc[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);\n";
    s += "  for (long k0 = 0; k0 < K; k0 += 16) {\n";
    s += "    // the 32 x 16 tile of A and the 16 x 32 tile of B as float, zero outside the matrices\n";
    s += "    for (uint e = lid; e < 32 * 16; e += tgsize) {\n";
    s += "      const long r = row0 + long(e / 16), k = k0 + long(e % 16);\n";
    s += "      as[e] = r < M && k < K ? float(a[r * p[3] + k * p[4]]) : 0.0f;\n";
    s += "    }\n";
    s += "    for (uint e = lid; e < 16 * 32; e += tgsize) {\n";
    s += "      const long k = k0 + long(e / 32), c = col0 + long(e % 32);\n";
    s += "      bs[e] = k < K && c < N ? float(b[k * p[5] + c * p[6]]) : 0.0f;\n";
    s += "    }\n";
    s += "    threadgroup_barrier(mem_flags::mem_threadgroup);\n";
    s += "    for (uint kk = 0; kk < 16; kk += 8) {\n";
    s += "      simdgroup_float8x8 af[2], bf[2];\n";
    s += "      for (uint i = 0; i < 2; ++i) simdgroup_load(af[i], as + ((sr + 8 * i) * 16 + kk), 16);\n";
    s += "      for (uint j = 0; j < 2; ++j) simdgroup_load(bf[j], bs + (kk * 32 + sc + 8 * j), 32);\n";
    s += "      for (uint i = 0; i < 2; ++i)\n";
    s += "        for (uint j = 0; j < 2; ++j) simdgroup_multiply_accumulate(acc[i][j], af[i], bf[j], acc[i][j]);\n";
    s += "    }\n";
    s += "    threadgroup_barrier(mem_flags::mem_threadgroup);  // every simdgroup has read the tiles before they are reused\n";
    s += "  }\n";
    s += "  for (uint i = 0; i < 2; ++i)\n";
    s += "    for (uint j = 0; j < 2; ++j) simdgroup_store(acc[i][j], cs + ((sr + 8 * i) * 32 + sc + 8 * j), 32);\n";
    s += "  threadgroup_barrier(mem_flags::mem_threadgroup);\n";
    s += "  // the epilogue in float, each element rounded once\n";
    s += "  for (uint e = lid; e < 32 * 32; e += tgsize) {\n";
    s += "    const long r = row0 + long(e / 32), c = col0 + long(e % 32);\n";
    s += "    if (r >= M || c >= N) continue;\n";
    s += "    float v = cs[e];\n";
    if (bias) s += "    v += float(bias[c * p[10]]);\n";
    if (Ep == gemm_epilogue::bias_relu) s += "    v = v < 0.0f ? 0.0f : v;  // NaN stays NaN\n";
    if (Ep == gemm_epilogue::bias_gelu_tanh)
      s += "    v = 0.5f * v * (1.0f + metal::precise::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));\n";
    s += std::is_same_v<T, float> ? "    out[r * p[7] + c * p[8]] = v;\n" : "    out[r * p[7] + c * p[8]] = " + t + "(v);\n";
    s += "  }\n}\n";
    out.source = kernel_file(out.name, out.description, s);
    return out;
  }();
  return k;
}

/// The number of threadgroups (32 x 32 tiles) of an M x N product.
inline std::int64_t gemm_tiles(std::int64_t M, std::int64_t N) {
  return ((M + gemm_tile - 1) / gemm_tile) * ((N + gemm_tile - 1) / gemm_tile);
}

/// The parameters of gemm_kernel for out (M x N) = A (M x K) B (K x N); bias_stride: the bias's
/// element stride (0 without a bias).
template <class T, class SO, class SA, class SB>
std::vector<std::int64_t> gemm_params(const Tensor<T, SO>& out, const Tensor<T, SA>& a, const Tensor<T, SB>& b,
                                      std::int64_t bias_stride = 0) {
  static_assert(SO::rank == 2 && SA::rank == 2 && SB::rank == 2, "tenet: the Metal GEMM takes matrices (batches are not done)");
  const std::int64_t M = a.sizes()[0], K = a.sizes()[1], N = b.sizes()[1];
  return {M,
          N,
          K,
          a.strides()[0],
          a.strides()[1],
          b.strides()[0],
          b.strides()[1],
          out.strides()[0],
          out.strides()[1],
          (N + gemm_tile - 1) / gemm_tile,
          bias_stride};
}

/// The bytes of the three threadgroup tiles, in slot order.
inline constexpr std::size_t gemm_threadgroup_bytes[3] = {gemm_tile * gemm_step * sizeof(float), gemm_step * gemm_tile * sizeof(float),
                                                          gemm_tile * gemm_tile * sizeof(float)};

}  // namespace tenet::detail::metal
