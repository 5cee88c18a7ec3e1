
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <cmath>
#define __device__
#define __host__
#define __global__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define JM_INLINE inline __attribute__((always_inline))
using std::abs; using std::sqrt; using std::exp; using std::log; using std::sin; using std::cos;
using std::tan; using std::pow; using std::floor; using std::ceil; using std::round; using std::trunc;
using std::fabs; using std::fmin; using std::fmax; using std::isnan; using std::isinf; using std::isfinite;
// CUDA's mixed-type min/max, in the global namespace as device code sees them
template <typename A, typename B> JM_INLINE auto min(A a, B b) -> decltype(a + b) { return b < a ? b : a; }
template <typename A, typename B> JM_INLINE auto max(A a, B b) -> decltype(a + b) { return a < b ? b : a; }
JM_INLINE float rsqrtf(float x) { return 1.0f / sqrtf(x); }
JM_INLINE double rsqrt(double x) { return 1.0 / sqrt(x); }
JM_INLINE float __expf(float x) { return expf(x); }
JM_INLINE float __logf(float x) { return logf(x); }
JM_INLINE float __sinf(float x) { return sinf(x); }
JM_INLINE float __cosf(float x) { return cosf(x); }
JM_INLINE float __fdividef(float a, float b) { return a / b; }
JM_INLINE float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
JM_INLINE int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
JM_INLINE float __uint_as_float(unsigned int i) { float f; memcpy(&f, &i, 4); return f; }
JM_INLINE unsigned int __float_as_uint(float f) { unsigned int i; memcpy(&i, &f, 4); return i; }
struct jm_half { unsigned short x; };
struct jm_bfloat16 { unsigned short x; };
#if defined(__FLT16_MAX__) && !defined(JM_SOFT_HALF)
JM_INLINE float jm_to_float(jm_half h) { _Float16 f; memcpy(&f, &h.x, 2); return (float)f; }
JM_INLINE jm_half jm_to_half(float f) { _Float16 g = (_Float16)f; jm_half h; memcpy(&h.x, &g, 2); return h; }
#else  // compilers without _Float16 (GCC < 12 on x86): IEEE half by bit manipulation, round to nearest even
JM_INLINE float jm_to_float(jm_half h) {
  unsigned int sign = (h.x & 0x8000u) << 16, exp = (h.x >> 10) & 0x1fu, man = h.x & 0x3ffu, u;
  if (exp == 0x1f) u = sign | 0x7f800000u | (man << 13);
  else if (exp) u = sign | ((exp + 112) << 23) | (man << 13);
  else if (!man) u = sign;
  else { exp = 113; while (!(man & 0x400u)) { man <<= 1; --exp; } u = sign | (exp << 23) | ((man & 0x3ffu) << 13); }
  float f; memcpy(&f, &u, 4); return f;
}
JM_INLINE jm_half jm_to_half(float f) {
  unsigned int u; memcpy(&u, &f, 4);
  unsigned int sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  jm_half h;
  if (a > 0x7f800000u) { h.x = (unsigned short)(sign | 0x7e00u); return h; }
  if (a >= 0x477ff000u) { h.x = (unsigned short)(sign | 0x7c00u); return h; }  // rounds to infinity
  if (a < 0x38800000u) {  // a subnormal half, or zero: significand shifted right, rounded to even
    if (a < 0x33000000u) { h.x = (unsigned short)sign; return h; }
    unsigned int man = (a & 0x7fffffu) | 0x800000u, shift = 126 - (a >> 23);
    unsigned int mant = man >> shift, rem = man & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (mant & 1u))) ++mant;
    h.x = (unsigned short)(sign | mant); return h;
  }
  unsigned int r = a - 0x38000000u;  // rebias the exponent: 127 - 15 = 112
  unsigned int mant = r >> 13, rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (mant & 1u))) ++mant;
  h.x = (unsigned short)(sign | mant); return h;
}
#endif
JM_INLINE float jm_to_float(jm_bfloat16 b) { return __uint_as_float(((unsigned int)b.x) << 16); }
JM_INLINE jm_bfloat16 jm_to_bfloat16(float f) {
  unsigned int u = __float_as_uint(f);
  jm_bfloat16 b;
  if ((u & 0x7fffffffu) > 0x7f800000u) { b.x = (unsigned short)((u >> 16) | 0x40u); return b; }
  u += 0x7fffu + ((u >> 16) & 1u);
  b.x = (unsigned short)(u >> 16);
  return b;
}
namespace jm { typedef ::jm_half half; typedef ::jm_bfloat16 bfloat16; }  // the storage types, for users
#include <setjmp.h>
#include <fenv.h>
#include <exception>
#ifdef _OPENMP
#include <omp.h>
#endif
// jiter_magic's fault guard (a runtime library loaded once a process): a thread computing a
// kernel says where a fault in the functor jumps back to, so the fault becomes a Python exception.
extern "C" {
extern __thread sigjmp_buf* volatile jm_fault_jump;
void jm_fault_note(char* text, int* taken, const char* what);
void jm_fault_report(const char* text);
}
// Each kernel thread's floating-point environment, kept across its share: a functor that enables
// traps (feenableexcept) or changes the rounding mode leaves them behind neither after the call nor
// after a fault the guard caught.
typedef fenv_t jm_fenv_t;
static inline void jm_fenv_save(jm_fenv_t* env) { fegetenv(env); }
static inline void jm_fenv_restore(const jm_fenv_t* env) { fesetenv(env); }
// This thread's share of n iterations: contiguous static chunks, as schedule(static) gives.
static inline void jm_share(int64_t n, int64_t* begin, int64_t* end) {
#ifdef _OPENMP
  const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
#else
  const int64_t threads = 1, me = 0;
#endif
  const int64_t chunk = (n + threads - 1) / threads;
  *begin = me * chunk < n ? me * chunk : n;
  *end = *begin + chunk < n ? *begin + chunk : n;
}

typedef float jm_compute_t;
#line 1 "jiterator"
template <typename T> void sum_diff(T x, T y, T& sum, T& diff) { sum = x + y; diff = x - y; }
#line 108 "jiter_magic_kernel"
struct jm_Args {
  alignas(8) float* jm_out0;
  alignas(8) float* jm_out1;
  alignas(8) const float* jm_in1;
  alignas(8) int64_t jm_n;
  alignas(8) float jm_scalar0;
  alignas(8) int64_t jm_sizes[2];
  alignas(8) int64_t jm_strides0[2];
  alignas(8) int64_t jm_strides1[2];
  alignas(8) int64_t jm_strides2[2];
};
static_assert(sizeof(jm_Args) == 104, "jm_Args layout: does a macro in the code string redefine a type?");
static_assert(sizeof(*((jm_Args*)0)->jm_out0) == 4, "jm_Args layout: does a macro in the code string redefine a type?");
static_assert(sizeof(*((jm_Args*)0)->jm_out1) == 4, "jm_Args layout: does a macro in the code string redefine a type?");
static_assert(sizeof(*((jm_Args*)0)->jm_in1) == 4, "jm_Args layout: does a macro in the code string redefine a type?");
static_assert(sizeof(((jm_Args*)0)->jm_n) == 8, "jm_Args layout: does a macro in the code string redefine a type?");
static_assert(sizeof(((jm_Args*)0)->jm_scalar0) == 4, "jm_Args layout: does a macro in the code string redefine a type?");
static_assert(sizeof(((jm_Args*)0)->jm_sizes) == 16, "jm_Args layout: does a macro in the code string redefine a type?");
static_assert(sizeof(((jm_Args*)0)->jm_strides0) == 16, "jm_Args layout: does a macro in the code string redefine a type?");
static_assert(sizeof(((jm_Args*)0)->jm_strides1) == 16, "jm_Args layout: does a macro in the code string redefine a type?");
static_assert(sizeof(((jm_Args*)0)->jm_strides2) == 16, "jm_Args layout: does a macro in the code string redefine a type?");
extern "C" int jm_kernel(const jm_Args* jm_args) {
  const jm_Args& jm_a = *jm_args;
  typedef int64_t jm_index_t;
  const jm_index_t jm_n = (jm_index_t)jm_a.jm_n;
  const jm_index_t jm_inner = (jm_index_t)jm_a.jm_sizes[0];
  int jm_status = 0, jm_thrown = 0;
  char jm_what[512];
  #pragma omp parallel if (jm_n > 32768)
  {
    jm_index_t jm_begin, jm_end;
    jm_share(jm_n, &jm_begin, &jm_end);
    volatile int jm_failed = 0;
    jm_fenv_t jm_fenv;
    jm_fenv_save(&jm_fenv);
    sigjmp_buf jm_jump;
    const int jm_signal = sigsetjmp(jm_jump, 0);
    if (jm_signal == 0) {
      jm_fault_jump = &jm_jump;
      try {
        for (jm_index_t jm_i = jm_begin; jm_i < jm_end;) {
          const jm_index_t jm_row = jm_i / jm_inner, jm_j0 = jm_i - jm_row * jm_inner;
          const jm_index_t jm_j1 = jm_end - jm_i < jm_inner - jm_j0 ? jm_j0 + (jm_end - jm_i) : jm_inner;
          jm_index_t jm_rem = jm_row * jm_inner;
          jm_index_t jm_o0 = 0, jm_o1 = 0, jm_o2 = 0;
          const jm_index_t jm_q0 = jm_rem / (jm_index_t)jm_a.jm_sizes[0];
          { const jm_index_t jm_idx = jm_rem - jm_q0 * (jm_index_t)jm_a.jm_sizes[0];
            jm_o0 += jm_idx * (jm_index_t)jm_a.jm_strides0[0];
            jm_o1 += jm_idx * (jm_index_t)jm_a.jm_strides1[0];
            jm_o2 += jm_idx * (jm_index_t)jm_a.jm_strides2[0];
            jm_rem = jm_q0; }
          const jm_index_t jm_idx = jm_rem;
          jm_o0 += jm_idx * (jm_index_t)jm_a.jm_strides0[1];
          jm_o1 += jm_idx * (jm_index_t)jm_a.jm_strides1[1];
          jm_o2 += jm_idx * (jm_index_t)jm_a.jm_strides2[1];
          jm_o0 += jm_j0 * (jm_index_t)jm_a.jm_strides0[0];
          jm_o1 += jm_j0 * (jm_index_t)jm_a.jm_strides1[0];
          jm_o2 += jm_j0 * (jm_index_t)jm_a.jm_strides2[0];
          for (jm_index_t jm_j = jm_j0; jm_j < jm_j1; ++jm_j) {
            const jm_compute_t jm_v0 = jm_a.jm_scalar0;
            const jm_compute_t jm_v1 = jm_a.jm_in1[jm_o2];
            jm_compute_t jm_r0, jm_r1;
            sum_diff<jm_compute_t>(jm_v0, jm_v1, jm_r0, jm_r1);
            jm_a.jm_out0[jm_o0] = jm_r0;
            jm_a.jm_out1[jm_o1] = jm_r1;
            jm_o0 += (jm_index_t)jm_a.jm_strides0[0];
            jm_o1 += (jm_index_t)jm_a.jm_strides1[0];
            jm_o2 += (jm_index_t)jm_a.jm_strides2[0];
          }
          jm_i += jm_j1 - jm_j0;
        }
      } catch (const std::exception& jm_error) {
        jm_fault_note(jm_what, &jm_thrown, jm_error.what());
        jm_failed = -1;
      } catch (...) {
        jm_fault_note(jm_what, &jm_thrown, "an exception that is not a std::exception");
        jm_failed = -1;
      }
    } else {
      jm_failed = jm_signal;
    }
    jm_fault_jump = 0;
    jm_fenv_restore(&jm_fenv);
    if (jm_failed) {
      #pragma omp atomic write
      jm_status = jm_failed;
    }
  }
  if (jm_status == -1) jm_fault_report(jm_what);
  return jm_status;
}
