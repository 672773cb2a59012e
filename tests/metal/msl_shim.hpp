#pragma once
// The MSL shim: what a generated Metal Shading Language kernel needs to compile as C++ and run in
// the emulator (emulator.hpp). Include it before a generated .metal file.
//
// - Namespace `metal` holds the part of the Metal standard library the generator emits (math in
//   metal::, metal::precise:: and metal::fast::, select, clamp, isnan, as_type, the simdgroup
//   functions, threadgroup_barrier) and nothing else, so a generated kernel that calls a function
//   MSL lacks (erf, expm1, log1p are not in MSL) fails to compile here as it would on a Mac.
// - Address spaces: generated kernels name their buffers through three aliases that the generated
//   file defines for MSL (`tenet_buffer<T>` = `device T*`, `tenet_threadgroup<T>` =
//   `threadgroup T*`) and this shim defines as the emulator's checked types, so every device access
//   is bounds-checked and every threadgroup access is race-checked. `device`, `constant` and
//   `thread` themselves are defined empty for hand-written kernel code; `threadgroup` is not (it
//   would break the [[threadgroup(n)]] attribute): threadgroup memory is a kernel parameter.
// - Attributes ([[kernel]], [[buffer(n)]], [[thread_position_in_grid]] ...) are unknown to C++:
//   ignored, and the warning is silenced for the translation unit that includes this header.
// - Vector types float2 / float4 (and int, uint) with elementwise arithmetic.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <climits>
#include <limits>
#include <type_traits>

#include "emulator.hpp"

#pragma GCC diagnostic ignored "-Wattributes"
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wunknown-attributes"
#endif

#define TENET_MSL_EMULATION 1
#define device
#define constant
#define thread

template <class T>
using tenet_buffer = ::tenet::metal_emu::buffer_ptr<T>;
template <class T>
using tenet_threadgroup = ::tenet::metal_emu::threadgroup_ptr<T>;

namespace metal {

using uint = std::uint32_t;
using ushort = std::uint16_t;
using uchar = std::uint8_t;
using ulong = std::uint64_t;

// ---------------------------------------------------------------------------------------------
// half and bfloat: 16-bit storage, float arithmetic (every operation converts to float, as MSL's
// generated code here always does explicitly); float to 16 bits rounds to nearest even, as a
// conversion on the GPU. bfloat is MSL 3.1's (macOS 14).
namespace detail {
inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline std::uint16_t float_to_half_bits(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));  // inf, NaN
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to at least 2^16: inf
  if (a < 0x38800000u) {  // below 2^-14: a subnormal half (or zero), in units of 2^-24
    const float m = bits_float(a) * 16777216.0f;  // exact: a scaling by 2^24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(m)));  // to nearest even
  }
  const std::uint32_t lsb = (a >> 13) & 1u;
  const std::uint32_t r = a + 0xfffu + lsb;  // round the 13 dropped bits to nearest even
  return static_cast<std::uint16_t>(sign | ((r - 0x38000000u) >> 13));
}
inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) return bits_float(sign) + (sign ? -1.0f : 1.0f) * static_cast<float>(m) * 5.9604644775390625e-8f;  // m 2^-24
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}
inline std::uint16_t float_to_bfloat_bits(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // NaN stays NaN
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
}  // namespace detail

struct half {
  std::uint16_t bits = 0;
  half() = default;
  half(float f) : bits(detail::float_to_half_bits(f)) {}
  operator float() const { return detail::half_bits_to_float(bits); }
};
struct bfloat {
  std::uint16_t bits = 0;
  bfloat() = default;
  bfloat(float f) : bits(detail::float_to_bfloat_bits(f)) {}
  operator float() const { return detail::bits_float(static_cast<std::uint32_t>(bits) << 16); }
};

// ---------------------------------------------------------------------------------------------
// vector types: float2, float4, int2, int4, uint2, uint4 with .x .y .z .w, [i] and elementwise
// + - * / (a vector and a vector or a scalar)
template <class T>
struct vec2 {
  T x{}, y{};
  T& operator[](int i) { return i == 0 ? x : y; }
};
template <class T>
struct vec4 {
  T x{}, y{}, z{}, w{};
  T& operator[](int i) { return i == 0 ? x : i == 1 ? y : i == 2 ? z : w; }
};
#define TENET_MSL_VEC_OP(OP)                                                                         \
  template <class T>                                                                                 \
  vec2<T> operator OP(vec2<T> a, vec2<T> b) { return {a.x OP b.x, a.y OP b.y}; }                     \
  template <class T>                                                                                 \
  vec2<T> operator OP(vec2<T> a, T b) { return {a.x OP b, a.y OP b}; }                               \
  template <class T>                                                                                 \
  vec4<T> operator OP(vec4<T> a, vec4<T> b) { return {a.x OP b.x, a.y OP b.y, a.z OP b.z, a.w OP b.w}; } \
  template <class T>                                                                                 \
  vec4<T> operator OP(vec4<T> a, T b) { return {a.x OP b, a.y OP b, a.z OP b, a.w OP b}; }
TENET_MSL_VEC_OP(+)
TENET_MSL_VEC_OP(-)
TENET_MSL_VEC_OP(*)
TENET_MSL_VEC_OP(/)
#undef TENET_MSL_VEC_OP
using float2 = vec2<float>;
using float4 = vec4<float>;
using int2 = vec2<int>;
using int4 = vec4<int>;
using uint2 = vec2<uint>;
using uint4 = vec4<uint>;

// ---------------------------------------------------------------------------------------------
// math: precise:: is IEEE (the C library's float functions); fast:: may be less accurate on the
// GPU and is the same here; the unqualified names are the default (fast) variants.
namespace precise {
inline float exp(float x) { return std::exp(x); }
inline float exp2(float x) { return std::exp2(x); }
inline float log(float x) { return std::log(x); }
inline float log2(float x) { return std::log2(x); }
inline float sqrt(float x) { return std::sqrt(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float sin(float x) { return std::sin(x); }
inline float cos(float x) { return std::cos(x); }
inline float tan(float x) { return std::tan(x); }
inline float tanh(float x) { return std::tanh(x); }
inline float atan2(float y, float x) { return std::atan2(y, x); }
inline float pow(float x, float y) { return std::pow(x, y); }
inline float fmod(float x, float y) { return std::fmod(x, y); }
inline float divide(float x, float y) { return x / y; }
}  // namespace precise
namespace fast {
using precise::atan2;
using precise::cos;
using precise::divide;
using precise::exp;
using precise::exp2;
using precise::fmod;
using precise::log;
using precise::log2;
using precise::pow;
using precise::rsqrt;
using precise::sin;
using precise::sqrt;
using precise::tan;
using precise::tanh;
}  // namespace fast
using fast::atan2;
using fast::cos;
using fast::divide;
using fast::exp;
using fast::exp2;
using fast::fmod;
using fast::log;
using fast::log2;
using fast::pow;
using fast::rsqrt;
using fast::sin;
using fast::sqrt;
using fast::tan;
using fast::tanh;

inline float abs(float x) { return std::fabs(x); }
inline int abs(int x) { return x < 0 ? -x : x; }
inline float fabs(float x) { return std::fabs(x); }
inline float floor(float x) { return std::floor(x); }
inline float ceil(float x) { return std::ceil(x); }
inline float trunc(float x) { return std::trunc(x); }
inline float rint(float x) { return std::nearbyint(x); }  // to nearest even, as MSL's rint
inline float round(float x) { return std::round(x); }     // half away from zero, as MSL's round
inline float copysign(float x, float y) { return std::copysign(x, y); }
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
inline bool isnan(float x) { return std::isnan(x); }
inline bool isinf(float x) { return std::isinf(x); }
inline bool isfinite(float x) { return std::isfinite(x); }
inline bool signbit(float x) { return std::signbit(x); }
inline float fmax(float a, float b) { return std::fmax(a, b); }
inline float fmin(float a, float b) { return std::fmin(a, b); }
template <class T>
T max(T a, T b) {
  return a < b ? b : a;
}
template <class T>
T min(T a, T b) {
  return b < a ? b : a;
}
template <class T>
T clamp(T x, T lo, T hi) {
  return min(max(x, lo), hi);
}
/// select(a, b, c): c ? b : a, as MSL.
template <class T>
T select(T a, T b, bool c) {
  return c ? b : a;
}

/// as_type<To>(x): the bits of x as To (same size).
template <class To, class From>
To as_type(const From& x) {
  static_assert(sizeof(To) == sizeof(From), "as_type: the types differ in size");
  To r;
  std::memcpy(static_cast<void*>(&r), static_cast<const void*>(&x), sizeof(To));
  return r;
}

template <class T>
constexpr const char* msl_type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, int>) return "int";
  else if constexpr (std::is_same_v<T, uint>) return "uint";
  else if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, long>) return "long";
  else return "(other type)";
}

// ---------------------------------------------------------------------------------------------
// threadgroup and simdgroup synchronization

enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
inline void threadgroup_barrier(mem_flags) { ::tenet::metal_emu::current_group("threadgroup_barrier").barrier(); }

namespace emu = ::tenet::metal_emu;

template <class T>
T simd_sum(T v) {
  return emu::current_group("simd_sum").simd_exchange(
      emu::simd_kind::sum, v, 0, msl_type_name<T>(),
      [](const T* in, std::uint32_t lanes, std::uint32_t, std::int64_t, const emu::thread_ids&) {
        T s = in[0];
        for (std::uint32_t l = 1; l < lanes; ++l) s = s + in[l];
        return s;
      });
}
template <class T>
T simd_max(T v) {
  return emu::current_group("simd_max").simd_exchange(
      emu::simd_kind::max, v, 0, msl_type_name<T>(),
      [](const T* in, std::uint32_t lanes, std::uint32_t, std::int64_t, const emu::thread_ids&) {
        T s = in[0];
        for (std::uint32_t l = 1; l < lanes; ++l) s = max(s, in[l]);
        return s;
      });
}
template <class T>
T simd_min(T v) {
  return emu::current_group("simd_min").simd_exchange(
      emu::simd_kind::min, v, 0, msl_type_name<T>(),
      [](const T* in, std::uint32_t lanes, std::uint32_t, std::int64_t, const emu::thread_ids&) {
        T s = in[0];
        for (std::uint32_t l = 1; l < lanes; ++l) s = min(s, in[l]);
        return s;
      });
}

namespace detail {
/// Lane `from`'s value for lane `lane`, checking that lane `from` exists in the simdgroup.
template <class T>
T lane_value(const T* in, std::uint32_t lanes, std::uint32_t lane, std::int64_t from, const char* op,
             const emu::thread_ids& ids) {
  if (from < 0 || from >= static_cast<std::int64_t>(lanes))
    emu::fail(std::string(op) + " in kernel '" + std::string(emu::current.kernel) + "', threadgroup " +
              std::to_string(ids.group) + ", simdgroup " + std::to_string(ids.simdgroup) + ": lane " + std::to_string(lane) +
              " reads lane " + std::to_string(from) + ", but the simdgroup has lanes 0 to " + std::to_string(lanes - 1));
  return in[from];
}
}  // namespace detail

template <class T>
T simd_shuffle(T v, ushort from) {
  return emu::current_group("simd_shuffle").simd_exchange(
      emu::simd_kind::shuffle, v, from, msl_type_name<T>(),
      [](const T* in, std::uint32_t lanes, std::uint32_t lane, std::int64_t p, const emu::thread_ids& ids) {
        return detail::lane_value(in, lanes, lane, p, "simd_shuffle", ids);
      });
}
template <class T>
T simd_broadcast(T v, ushort from) {
  return emu::current_group("simd_broadcast").simd_exchange(
      emu::simd_kind::broadcast, v, from, msl_type_name<T>(),
      [](const T* in, std::uint32_t lanes, std::uint32_t lane, std::int64_t p, const emu::thread_ids& ids) {
        return detail::lane_value(in, lanes, lane, p, "simd_broadcast", ids);
      });
}
/// simd_shuffle_down(v, d): lane l gets lane l + d's value; the upper d lanes of the 32 keep
/// their own (MSL does not wrap). Reading a lane past a partial simdgroup's last is reported.
template <class T>
T simd_shuffle_down(T v, ushort delta) {
  return emu::current_group("simd_shuffle_down").simd_exchange(
      emu::simd_kind::shuffle_down, v, delta, msl_type_name<T>(),
      [](const T* in, std::uint32_t lanes, std::uint32_t lane, std::int64_t d, const emu::thread_ids& ids) {
        const std::int64_t from = lane + d;
        if (from >= static_cast<std::int64_t>(emu::simd_width)) return in[lane];
        return detail::lane_value(in, lanes, lane, from, "simd_shuffle_down", ids);
      });
}
template <class T>
T simd_shuffle_up(T v, ushort delta) {
  return emu::current_group("simd_shuffle_up").simd_exchange(
      emu::simd_kind::shuffle_up, v, delta, msl_type_name<T>(),
      [](const T* in, std::uint32_t lanes, std::uint32_t lane, std::int64_t d, const emu::thread_ids& ids) {
        const std::int64_t from = static_cast<std::int64_t>(lane) - d;
        if (from < 0) return in[lane];
        return detail::lane_value(in, lanes, lane, from, "simd_shuffle_up", ids);
      });
}
template <class T>
T simd_shuffle_xor(T v, ushort mask) {
  return emu::current_group("simd_shuffle_xor").simd_exchange(
      emu::simd_kind::shuffle_xor, v, mask, msl_type_name<T>(),
      [](const T* in, std::uint32_t lanes, std::uint32_t lane, std::int64_t m, const emu::thread_ids& ids) {
        return detail::lane_value(in, lanes, lane, static_cast<std::int64_t>(lane ^ static_cast<std::uint32_t>(m)),
                                  "simd_shuffle_xor", ids);
      });
}

// ---------------------------------------------------------------------------------------------
// simdgroup matrices (simdgroup_float8x8): an 8 x 8 matrix held by the 32 lanes of a simdgroup,
// two elements a lane, as on Apple GPUs: lane l holds row ((l / 4) & 4) + (l / 2) % 4, columns
// ((l / 4) & 2) * 2 + (l % 2) * 2 and the next (the layout MLX's steel kernels rely on).
// A lane's object holds only its two elements (thread_elements()), so every operation is
// cooperative: simdgroup_load and simdgroup_store have each lane read or write its own two
// elements of threadgroup memory (race-checked per lane) after all 32 lanes arrived, and
// simdgroup_multiply_accumulate gathers every lane's elements of A, B and C, computes
// D = A B + C in float (k in order) and hands each lane its two elements of D. They need a
// full simdgroup and uniform control flow, as on the GPU; a lane that does not arrive is a stall
// the emulator reports.
template <class T, int Rows, int Cols>
struct simdgroup_matrix {
  static_assert(Rows == 8 && Cols == 8 && std::is_same_v<T, float>, "the shim models simdgroup_float8x8 only");
  T e[2]{};
  T* thread_elements() { return e; }
};
using simdgroup_float8x8 = simdgroup_matrix<float, 8, 8>;

namespace detail {
inline uint matrix_row(uint lane) { return ((lane / 4) & 4u) + (lane / 2) % 4; }
inline uint matrix_col(uint lane) { return ((lane / 4) & 2u) * 2 + (lane % 2) * 2; }
/// Waits for the simdgroup's 32 lanes at a simdgroup_matrix operation of kind k.
inline void matrix_rendezvous(emu::simd_kind k) {
  struct none {
    char c = 0;
  };
  emu::current_group(emu::simd_name(k)).simd_exchange(
      k, none{}, 0, "simdgroup_float8x8", [](const none*, std::uint32_t lanes, std::uint32_t, std::int64_t, const emu::thread_ids&) {
        if (lanes != emu::simd_width)
          emu::fail("simdgroup_matrix operation in kernel '" + std::string(emu::current.kernel) + "' on a simdgroup of " +
                    std::to_string(lanes) + " lanes: it needs all 32 (threads per threadgroup a multiple of 32)");
        return none{};
      });
}
}  // namespace detail

template <class T, int Rows, int Cols>
simdgroup_matrix<T, Rows, Cols> make_filled_simdgroup_matrix(T v) {
  simdgroup_matrix<T, Rows, Cols> m;
  m.e[0] = m.e[1] = v;
  return m;
}
/// d = the 8 x 8 matrix at src, rows `elements_per_row` apart.
inline void simdgroup_load(simdgroup_float8x8& d, emu::threadgroup_ptr<float> src, ulong elements_per_row = 8) {
  detail::matrix_rendezvous(emu::simd_kind::matrix_load);
  const uint lane = emu::current.ids.lane, r = detail::matrix_row(lane), c = detail::matrix_col(lane);
  const auto at = static_cast<std::int64_t>(r * elements_per_row + c);
  d.e[0] = src[at];
  d.e[1] = src[at + 1];
}
/// The 8 x 8 matrix a to dst, rows `elements_per_row` apart.
inline void simdgroup_store(const simdgroup_float8x8& a, emu::threadgroup_ptr<float> dst, ulong elements_per_row = 8) {
  detail::matrix_rendezvous(emu::simd_kind::matrix_store);
  const uint lane = emu::current.ids.lane, r = detail::matrix_row(lane), c = detail::matrix_col(lane);
  const auto at = static_cast<std::int64_t>(r * elements_per_row + c);
  dst[at] = a.e[0];
  dst[at + 1] = a.e[1];
}
/// d = a b + c.
inline void simdgroup_multiply_accumulate(simdgroup_float8x8& d, const simdgroup_float8x8& a, const simdgroup_float8x8& b,
                                          const simdgroup_float8x8& c) {
  struct lane_parts {
    float a[2], b[2], c[2];
  };
  const lane_parts mine{{a.e[0], a.e[1]}, {b.e[0], b.e[1]}, {c.e[0], c.e[1]}};
  const lane_parts r = emu::current_group("simdgroup_multiply_accumulate")
                           .simd_exchange(emu::simd_kind::matrix_multiply_accumulate, mine, 0, "simdgroup_float8x8",
                                          [](const lane_parts* in, std::uint32_t lanes, std::uint32_t lane, std::int64_t,
                                             const emu::thread_ids&) {
                                            if (lanes != emu::simd_width)
                                              emu::fail("simdgroup_multiply_accumulate in kernel '" + std::string(emu::current.kernel) +
                                                        "' on a simdgroup of " + std::to_string(lanes) + " lanes: it needs all 32");
                                            float A[8][8], B[8][8], C[8][8];
                                            for (uint l = 0; l < emu::simd_width; ++l)
                                              for (uint j = 0; j < 2; ++j) {
                                                const uint row = detail::matrix_row(l), col = detail::matrix_col(l) + j;
                                                A[row][col] = in[l].a[j], B[row][col] = in[l].b[j], C[row][col] = in[l].c[j];
                                              }
                                            lane_parts out{};
                                            const uint row = detail::matrix_row(lane);
                                            for (uint j = 0; j < 2; ++j) {
                                              const uint col = detail::matrix_col(lane) + j;
                                              float s = C[row][col];
                                              for (uint k = 0; k < 8; ++k) s += A[row][k] * B[k][col];
                                              out.a[j] = s;
                                            }
                                            return out;
                                          });
  d.e[0] = r.a[0];
  d.e[1] = r.a[1];
}

// ---------------------------------------------------------------------------------------------
// atomics on device memory: atomic_uint, atomic_int and atomic_float (MSL 3) with relaxed order,
// the only order MSL gives device atomics. The fibers of the emulator never run at the same time,
// so each operation is indivisible; the buffer records it for the device race check (an element
// updated atomically by one thread and accessed plainly by another is a race).
enum memory_order { memory_order_relaxed };
struct atomic_uint {
  uint value;
};
struct atomic_int {
  int value;
};
struct atomic_float {
  float value;
};
template <class A>
using atomic_value_t = decltype(A::value);

template <class A>
atomic_value_t<A> atomic_load_explicit(emu::buffer_ptr<A> obj, memory_order) {
  return obj.atomic_element().value;
}
template <class A>
void atomic_store_explicit(emu::buffer_ptr<A> obj, atomic_value_t<A> v, memory_order) {
  obj.atomic_element().value = v;
}
/// The old value; integers wrap modulo 2^32.
template <class A>
atomic_value_t<A> atomic_fetch_add_explicit(emu::buffer_ptr<A> obj, atomic_value_t<A> v, memory_order) {
  A& a = obj.atomic_element();
  const atomic_value_t<A> old = a.value;
  if constexpr (std::is_same_v<A, atomic_float>) a.value = old + v;
  else a.value = static_cast<atomic_value_t<A>>(static_cast<uint>(old) + static_cast<uint>(v));
  return old;
}

}  // namespace metal
