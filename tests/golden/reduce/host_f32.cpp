
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmath>
#if defined(JM_VECTOR_MATH) && defined(__GLIBC__) && defined(__x86_64__)
#if __GLIBC_PREREQ(2, 22)
#define JM_SIMD extern "C" __attribute__((simd("notinbranch")))
JM_SIMD double cos(double) noexcept; JM_SIMD float cosf(float) noexcept;
JM_SIMD double sin(double) noexcept; JM_SIMD float sinf(float) noexcept;
JM_SIMD double exp(double) noexcept; JM_SIMD float expf(float) noexcept;
JM_SIMD double log(double) noexcept; JM_SIMD float logf(float) noexcept;
JM_SIMD double pow(double, double) noexcept; JM_SIMD float powf(float, float) noexcept;
#if __GLIBC_PREREQ(2, 35)
JM_SIMD double acos(double) noexcept; JM_SIMD float acosf(float) noexcept;
JM_SIMD double acosh(double) noexcept; JM_SIMD float acoshf(float) noexcept;
JM_SIMD double asin(double) noexcept; JM_SIMD float asinf(float) noexcept;
JM_SIMD double asinh(double) noexcept; JM_SIMD float asinhf(float) noexcept;
JM_SIMD double atan(double) noexcept; JM_SIMD float atanf(float) noexcept;
JM_SIMD double atan2(double, double) noexcept; JM_SIMD float atan2f(float, float) noexcept;
JM_SIMD double atanh(double) noexcept; JM_SIMD float atanhf(float) noexcept;
JM_SIMD double cbrt(double) noexcept; JM_SIMD float cbrtf(float) noexcept;
JM_SIMD double cosh(double) noexcept; JM_SIMD float coshf(float) noexcept;
JM_SIMD double erf(double) noexcept; JM_SIMD float erff(float) noexcept;
JM_SIMD double erfc(double) noexcept; JM_SIMD float erfcf(float) noexcept;
JM_SIMD double exp10(double) noexcept; JM_SIMD float exp10f(float) noexcept;
JM_SIMD double exp2(double) noexcept; JM_SIMD float exp2f(float) noexcept;
JM_SIMD double expm1(double) noexcept; JM_SIMD float expm1f(float) noexcept;
JM_SIMD double hypot(double, double) noexcept; JM_SIMD float hypotf(float, float) noexcept;
JM_SIMD double log10(double) noexcept; JM_SIMD float log10f(float) noexcept;
JM_SIMD double log1p(double) noexcept; JM_SIMD float log1pf(float) noexcept;
JM_SIMD double log2(double) noexcept; JM_SIMD float log2f(float) noexcept;
JM_SIMD double sinh(double) noexcept; JM_SIMD float sinhf(float) noexcept;
JM_SIMD double tan(double) noexcept; JM_SIMD float tanf(float) noexcept;
JM_SIMD double tanh(double) noexcept; JM_SIMD float tanhf(float) noexcept;
#endif
#undef JM_SIMD
#endif
#endif
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
// IEEE half by integer and float operations with no branch, so that a loop over half elements
// vectorizes (GCC 12 does not vectorize _Float16 conversions): exact, rounding to nearest even.
JM_INLINE float jm_to_float(jm_half h) {
  // `twice`: the half's exponent and significand at the top of a word, the sign shifted out.
  const unsigned int w = (unsigned int)h.x << 16, sign = w & 0x80000000u, twice = w + w;
  // A normal half (or inf/nan): the bits moved into float's places and the exponent rebiased by
  // adding 224 to it and scaling by 2^-112, which leaves exponent 31 at 255 (inf/nan).
  const float normal = __uint_as_float((twice >> 4) + 0x70000000u) * 0x1.0p-112f;
  // A subnormal half (exponent 0) is m * 2^-24: m below the significand of 0.5f, then 0.5 taken off.
  const float subnormal = __uint_as_float((twice >> 17) | 0x3f000000u) - 0.5f;
  return __uint_as_float(sign | (twice < 0x08000000u ? __float_as_uint(subnormal) : __float_as_uint(normal)));
}
JM_INLINE jm_half jm_to_half(float f) {
  const unsigned int u = __float_as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  // Normal halves: rebias the exponent (127 - 15 = 112), drop 13 bits rounding to even; a carry
  // runs into the exponent, which is the right result up to 65504.
  const unsigned int r = a - 0x38000000u, normal = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
  // Below 2^-14 the half is subnormal: |f| * 2^24 (exact: a power of two) rounded to an integer, to
  // even, by the float addition of 2^23, which leaves that integer in the sum's low bits.
  const float scaled = __uint_as_float(a) * 0x1.0p24f;
  const unsigned int subnormal = __float_as_uint(scaled + 0x1.0p23f) - 0x4b000000u;
  unsigned int bits = a < 0x38800000u ? subnormal : normal;
  bits = a >= 0x477ff000u ? 0x7c00u : bits;  // rounds to infinity
  bits = a > 0x7f800000u ? 0x7e00u : bits;  // nan
  jm_half h;
  h.x = (unsigned short)(sign | bits);
  return h;
}
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
// Scratch buffers of a kernel thread (tiles, partials) come from the heap, never the stack: a
// Python thread or an OpenMP worker may have a stack of a few KiB (threading.stack_size,
// OMP_STACKSIZE). Allocated before the fault guard is set up and freed after it, so a fault never
// leaks them; named here, before the user's code, so no name of that code reaches them. Page-aligned:
// with malloc's 16-byte alignment the blocked loop's float32 transpose of 4096^2 ran up to 14% slower
// than with its tile on the stack (2-core development machine, one thread); page-aligned, as fast.
static inline void* jm_scratch_alloc(int64_t bytes) {
  const size_t page = 4096, size = bytes > 0 ? (size_t)bytes : 1;
  return aligned_alloc(page, (size + page - 1) / page * page);  // a multiple of the alignment, as C11 asks
}
static inline void jm_scratch_free(void* buffer) { free(buffer); }
// A kernel's body, kept out of the function that calls sigsetjmp (kernels/host_guard.py).
#define jm_noinline __attribute__((noinline))
// Whether this thread is a worker of a parallel region, not its thread 0: the thread that called
// the kernel, whose floating-point environment jm_kernel keeps for the whole call.
static inline int jm_is_worker(void) {
#ifdef _OPENMP
  return omp_get_thread_num() != 0;
#else
  return 0;
#endif
}
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

typedef float jm_acc_t;
typedef int64_t jm_index_t;
static inline double jm_inf() { return HUGE_VAL; }
static inline double jm_nan() { return NAN; }
#line 1 "jiterator"
template <typename T> T sq(T x) { return x * x; }
template <typename T> T add(T a, T b) { return a + b; }

#line 167 "jiter_magic_kernel"
struct jm_Args {
  alignas(8) float* jm_out;
  alignas(8) const float* jm_in0;
  alignas(8) jm_acc_t* jm_partials;
  alignas(8) int64_t jm_rows;
  alignas(8) int64_t jm_count;
  alignas(8) int64_t jm_blocks;
  alignas(8) int64_t jm_stage;
  alignas(8) int64_t jm_ksize[1];
  alignas(8) int64_t jm_kstride0[1];
  alignas(8) int64_t jm_kstride1[1];
  alignas(8) int64_t jm_rsize[1];
  alignas(8) int64_t jm_rstride0[1];
};
static_assert(sizeof(jm_Args) == 96, "jm_Args layout: does a macro in the code string redefine a type?");
static inline int jm_thread() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}
static inline int jm_max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
static inline jm_acc_t jm_fold(const jm_Args& jm_a, jm_index_t jm_b0, jm_index_t jm_begin, jm_index_t jm_end) {
  if (jm_begin >= jm_end) return ((jm_acc_t)(0.0));
  jm_acc_t jm_lane[32];
  for (int jm_l = 0; jm_l < 32; ++jm_l) jm_lane[jm_l] = ((jm_acc_t)(0.0));
  jm_index_t jm_c[1];
  jm_index_t jm_o0 = jm_b0, jm_rest = jm_begin;
  for (int jm_d = 0; jm_d < 1; ++jm_d) {
    jm_c[jm_d] = jm_rest % jm_a.jm_rsize[jm_d]; jm_rest /= jm_a.jm_rsize[jm_d];
    jm_o0 += jm_c[jm_d] * jm_a.jm_rstride0[jm_d];
  }
  const jm_index_t jm_s0 = jm_a.jm_rstride0[0];
  const jm_index_t jm_size0 = jm_a.jm_rsize[0];
  for (jm_index_t jm_r = jm_begin; jm_r < jm_end;) {
    const jm_index_t jm_len = jm_size0 - jm_c[0] < jm_end - jm_r ? jm_size0 - jm_c[0] : jm_end - jm_r;
    jm_index_t jm_j = 0;
    if (jm_s0 == 1) {
      for (; jm_j + 32 <= jm_len; jm_j += 32) {
        for (int jm_l = 0; jm_l < 32; ++jm_l) {
          jm_lane[jm_l] = (jm_acc_t)add<jm_acc_t>(jm_lane[jm_l], (jm_acc_t)sq<jm_acc_t>(jm_a.jm_in0[jm_o0 + (jm_j + jm_l) * 1]));
        }
      }
    } else {
      for (; jm_j + 32 <= jm_len; jm_j += 32) {
        for (int jm_l = 0; jm_l < 32; ++jm_l) {
          jm_lane[jm_l] = (jm_acc_t)add<jm_acc_t>(jm_lane[jm_l], (jm_acc_t)sq<jm_acc_t>(jm_a.jm_in0[jm_o0 + (jm_j + jm_l) * jm_s0]));
        }
      }
    }
    for (; jm_j < jm_len; ++jm_j) {
      jm_lane[0] = (jm_acc_t)add<jm_acc_t>(jm_lane[0], (jm_acc_t)sq<jm_acc_t>(jm_a.jm_in0[jm_o0 + jm_j * jm_s0]));
    }
    jm_r += jm_len; jm_c[0] += jm_len;
    jm_o0 += jm_len * jm_s0;
    for (int jm_d = 0; jm_d + 1 < 1 && jm_c[jm_d] == jm_a.jm_rsize[jm_d]; ++jm_d) {
      jm_o0 += jm_a.jm_rstride0[jm_d + 1] - jm_a.jm_rsize[jm_d] * jm_a.jm_rstride0[jm_d];
      jm_c[jm_d] = 0; ++jm_c[jm_d + 1];
    }
  }
  jm_acc_t jm_acc = jm_lane[0];
  for (int jm_l = 1; jm_l < 32; ++jm_l) jm_acc = (jm_acc_t)add<jm_acc_t>(jm_acc, jm_lane[jm_l]);
  return jm_acc;
}
static int jm_by_rows(const jm_Args& jm_a) {
  const jm_index_t jm_n = jm_a.jm_rows * (jm_a.jm_count > 0 ? jm_a.jm_count : 1);
  int jm_status = 0, jm_thrown = 0;
  char jm_what[512];
  #pragma omp parallel if (jm_n > 32768)
  {
    jm_index_t jm_begin, jm_end;
    jm_share(jm_a.jm_rows, &jm_begin, &jm_end);
    volatile int jm_failed = 0;
    jm_fenv_t jm_fenv;
    const int jm_own_fenv = jm_is_worker();
    if (jm_own_fenv) jm_fenv_save(&jm_fenv);
    sigjmp_buf* const jm_outer = jm_fault_jump;
    sigjmp_buf jm_jump;
    if (jm_failed == 0) {
      const int jm_signal = sigsetjmp(jm_jump, 0);
      if (jm_signal == 0) {
        jm_fault_jump = &jm_jump;
        try {
          for (jm_index_t jm_row = jm_begin; jm_row < jm_end; ++jm_row) {
            jm_index_t jm_k0 = 0, jm_k1 = 0, jm_krest = jm_row;
            { const jm_index_t jm_c = jm_krest;
              jm_k0 += jm_c * jm_a.jm_kstride0[0]; jm_k1 += jm_c * jm_a.jm_kstride1[0]; }
            const jm_acc_t jm_acc = jm_fold(jm_a, jm_k1, 0, jm_a.jm_count);
            jm_a.jm_out[jm_k0] = jm_acc;
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
    }
    jm_fault_jump = jm_outer;
    if (jm_own_fenv) jm_fenv_restore(&jm_fenv);
    if (jm_failed) {
      #pragma omp atomic write
      jm_status = jm_failed;
    }
  }
  if (jm_thrown) jm_fault_report(jm_what);
  return jm_status;
}
static int jm_split_row(const jm_Args& jm_a, jm_index_t jm_b0, jm_acc_t* jm_part) {
  const jm_index_t jm_n = jm_a.jm_count;
  int jm_status = 0, jm_thrown = 0;
  char jm_what[512];
  #pragma omp parallel if (jm_n > 32768)
  {
    jm_index_t jm_begin, jm_end;
    jm_share(jm_n, &jm_begin, &jm_end);
    volatile int jm_failed = 0;
    jm_fenv_t jm_fenv;
    const int jm_own_fenv = jm_is_worker();
    if (jm_own_fenv) jm_fenv_save(&jm_fenv);
    sigjmp_buf* const jm_outer = jm_fault_jump;
    sigjmp_buf jm_jump;
    if (jm_failed == 0) {
      const int jm_signal = sigsetjmp(jm_jump, 0);
      if (jm_signal == 0) {
        jm_fault_jump = &jm_jump;
        try {
          jm_part[jm_thread()] = jm_fold(jm_a, jm_b0, jm_begin, jm_end);
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
    }
    jm_fault_jump = jm_outer;
    if (jm_own_fenv) jm_fenv_restore(&jm_fenv);
    if (jm_failed) {
      #pragma omp atomic write
      jm_status = jm_failed;
    }
  }
  if (jm_thrown) jm_fault_report(jm_what);
  return jm_status;
}
static jm_noinline int jm_body(const jm_Args& jm_a, jm_acc_t* jm_part) {
  const int jm_threads = jm_max_threads();
  if (jm_a.jm_rows >= 2 * jm_threads || jm_a.jm_count < 4096) return jm_by_rows(jm_a);
  for (jm_index_t jm_row = 0; jm_row < jm_a.jm_rows; ++jm_row) {
    jm_index_t jm_k0 = 0, jm_k1 = 0, jm_krest = jm_row;
    { const jm_index_t jm_c = jm_krest;
      jm_k0 += jm_c * jm_a.jm_kstride0[0]; jm_k1 += jm_c * jm_a.jm_kstride1[0]; }
    for (int jm_t = 0; jm_t < jm_threads; ++jm_t) jm_part[jm_t] = ((jm_acc_t)(0.0));
    const int jm_status = jm_split_row(jm_a, jm_k1, jm_part);
    if (jm_status) return jm_status;
    jm_acc_t jm_acc = jm_part[0];
    for (int jm_t = 1; jm_t < jm_threads; ++jm_t) jm_acc = (jm_acc_t)add<jm_acc_t>(jm_acc, jm_part[jm_t]);
    jm_a.jm_out[jm_k0] = jm_acc;
  }
  return 0;
}
extern "C" int jm_kernel(const jm_Args* jm_args) {
  int jm_status = 0, jm_thrown = 0;
  char jm_what[512];
  {
    volatile int jm_failed = 0;
    jm_acc_t* const jm_part = (jm_acc_t*)jm_scratch_alloc((int64_t)sizeof(jm_acc_t) * (int64_t)(jm_max_threads()));
    if (!jm_part) jm_failed = -2;
    jm_fenv_t jm_fenv;
    const int jm_own_fenv = 1;
    if (jm_own_fenv) jm_fenv_save(&jm_fenv);
    sigjmp_buf* const jm_outer = jm_fault_jump;
    sigjmp_buf jm_jump;
    if (jm_failed == 0) {
      const int jm_signal = sigsetjmp(jm_jump, 0);
      if (jm_signal == 0) {
        jm_fault_jump = &jm_jump;
        try {
          jm_failed = jm_body(*jm_args, jm_part);
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
    }
    jm_fault_jump = jm_outer;
    if (jm_own_fenv) jm_fenv_restore(&jm_fenv);
    jm_scratch_free(jm_part);
    if (jm_failed) {
      #pragma omp atomic write
      jm_status = jm_failed;
    }
  }
  if (jm_thrown) jm_fault_report(jm_what);
  return jm_status;
}
