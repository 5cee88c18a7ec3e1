"""The C++ prelude placed before the user's code, for NVRTC and for the host compiler.

Kept small on purpose (no CUDA headers): it is what makes a cold compile cheap. It
provides the fixed-width integer names, half and bfloat16 storage types with their
conversions, a complex type (`jm::complex<T>`, also reachable as `c10::complex<T>`)
that works in device and host code alike, and, for the host, the CUDA qualifiers and
the global-namespace math overloads that CUDA code relies on. What generated kernels use
(`jm_half`, `jm_vec`, `jm_to_float`, `jm_complex`, ...) carries the reserved `jm_` prefix,
so a macro in the user's code (`#define half ...`, `#define v ...`) cannot reach it.
"""
from __future__ import annotations

CUDA_BASE = r"""
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define JM_INLINE __host__ __device__ __forceinline__
struct jm_half { unsigned short x; };
struct jm_bfloat16 { unsigned short x; };
__device__ __forceinline__ float jm_to_float(jm_half h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.x)); return f;
}
__device__ __forceinline__ jm_half jm_to_half(float f) {
  jm_half h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(f)); return h;
}
__device__ __forceinline__ float jm_to_float(jm_bfloat16 b) { return __uint_as_float(((unsigned int)b.x) << 16); }
__device__ __forceinline__ jm_bfloat16 jm_to_bfloat16(float f) {
  jm_bfloat16 b;
#if __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.x) : "f"(f));
#else
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) { b.x = (unsigned short)((u >> 16) | 0x40u); return b; }
  u += 0x7fffu + ((u >> 16) & 1u);
  b.x = (unsigned short)(u >> 16);
#endif
  return b;
}
template <typename T, int N> struct alignas(sizeof(T) * N) jm_vec { T jm_v[N]; };
namespace jm { typedef ::jm_half half; typedef ::jm_bfloat16 bfloat16; }  // the storage types, for users
// Thread coordinates, read here so that a user's `#define x ...` cannot reach `threadIdx.x` in the kernel.
__device__ __forceinline__ unsigned int jm_thread_x() { return threadIdx.x; }
__device__ __forceinline__ unsigned int jm_thread_y() { return threadIdx.y; }
__device__ __forceinline__ unsigned int jm_block_x() { return blockIdx.x; }
__device__ __forceinline__ unsigned int jm_block_y() { return blockIdx.y; }
__device__ __forceinline__ unsigned int jm_block_z() { return blockIdx.z; }
__device__ __forceinline__ unsigned int jm_grid_z() { return gridDim.z; }
"""

HOST_BASE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmath>
JM_VECTOR_MATH_DECLARATIONS
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
"""

COMPLEX = r"""
namespace jm {
template <typename T> struct alignas(2 * sizeof(T)) complex {
  T re, im;
  JM_INLINE complex(T r = T(0), T i = T(0)) : re(r), im(i) {}
  template <typename U> JM_INLINE complex(const complex<U>& o) : re(T(o.real())), im(T(o.imag())) {}
  JM_INLINE T real() const { return re; }
  JM_INLINE T imag() const { return im; }
  JM_INLINE complex& operator+=(const complex& o) { re += o.re; im += o.im; return *this; }
  JM_INLINE complex& operator-=(const complex& o) { re -= o.re; im -= o.im; return *this; }
  JM_INLINE complex& operator*=(const complex& o) { *this = *this * o; return *this; }
  JM_INLINE complex& operator/=(const complex& o) { *this = *this / o; return *this; }
  JM_INLINE complex& operator+=(T r) { re += r; return *this; }
  JM_INLINE complex& operator-=(T r) { re -= r; return *this; }
  JM_INLINE complex& operator*=(T r) { re *= r; im *= r; return *this; }
  JM_INLINE complex& operator/=(T r) { re /= r; im /= r; return *this; }
  JM_INLINE explicit operator bool() const { return re != T(0) || im != T(0); }
  friend JM_INLINE complex operator+(const complex& a) { return a; }
  friend JM_INLINE complex operator-(const complex& a) { return complex(-a.re, -a.im); }
  friend JM_INLINE complex operator+(const complex& a, const complex& b) { return complex(a.re + b.re, a.im + b.im); }
  friend JM_INLINE complex operator-(const complex& a, const complex& b) { return complex(a.re - b.re, a.im - b.im); }
  friend JM_INLINE complex operator*(const complex& a, const complex& b) {
    return complex(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
  }
  // Smith's algorithm, as c10::complex (and NumPy) divide, so results match torch's: the divisor's
  // larger part scales the other, so large and small magnitudes neither overflow nor underflow in
  // c*c + d*d, and a zero divisor gives each part divided by zero (inf, or nan for a zero part).
  // fabs, not a comparison with 0: a divisor of -0 divides by +0 there, as in c10. The sums of
  // products are fused (fma) where torch's CPU build contracts them, so results agree bit for bit.
  friend JM_INLINE complex operator/(const complex& a, const complex& b) {
    const T c = b.re, d = b.im, abs_c = ::fabs(c), abs_d = ::fabs(d);
    if (abs_c >= abs_d) {
      if (abs_c == T(0) && abs_d == T(0)) return complex(a.re / abs_c, a.im / abs_d);
      const T rat = d / c, scl = T(1) / ::fma(d, rat, c);
      return complex(::fma(a.im, rat, a.re) * scl, ::fma(-a.re, rat, a.im) * scl);
    }
    const T rat = c / d, scl = T(1) / ::fma(c, rat, d);
    return complex(::fma(a.re, rat, a.im) * scl, ::fma(a.im, rat, -a.re) * scl);
  }
  // With a real operand c10 acts on each part (an inf part times 0 would otherwise make a nan).
  friend JM_INLINE complex operator+(const complex& a, T r) { return complex(a.re + r, a.im); }
  friend JM_INLINE complex operator+(T r, const complex& a) { return complex(r + a.re, a.im); }
  friend JM_INLINE complex operator-(const complex& a, T r) { return complex(a.re - r, a.im); }
  friend JM_INLINE complex operator-(T r, const complex& a) { return complex(r - a.re, -a.im); }
  friend JM_INLINE complex operator*(const complex& a, T r) { return complex(a.re * r, a.im * r); }
  friend JM_INLINE complex operator*(T r, const complex& a) { return complex(r * a.re, r * a.im); }
  friend JM_INLINE complex operator/(const complex& a, T r) { return complex(a.re / r, a.im / r); }
  friend JM_INLINE complex operator/(T r, const complex& a) { return complex(r) / a; }
  friend JM_INLINE bool operator==(const complex& a, const complex& b) { return a.re == b.re && a.im == b.im; }
  friend JM_INLINE bool operator!=(const complex& a, const complex& b) { return !(a == b); }
};
template <typename T> JM_INLINE T real(const complex<T>& z) { return z.re; }
template <typename T> JM_INLINE T imag(const complex<T>& z) { return z.im; }
template <typename T> JM_INLINE complex<T> conj(const complex<T>& z) { return complex<T>(z.re, -z.im); }
template <typename T> JM_INLINE T norm(const complex<T>& z) { return z.re * z.re + z.im * z.im; }
template <typename T> JM_INLINE T abs(const complex<T>& z) { return ::hypot(z.re, z.im); }
template <typename T> JM_INLINE T arg(const complex<T>& z) { return ::atan2(z.im, z.re); }
template <typename T> JM_INLINE complex<T> exp(const complex<T>& z) {
  T e = ::exp(z.re); return complex<T>(e * ::cos(z.im), e * ::sin(z.im));
}
template <typename T> JM_INLINE complex<T> log(const complex<T>& z) { return complex<T>(::log(abs(z)), arg(z)); }
template <typename T> JM_INLINE complex<T> sqrt(const complex<T>& z) {
  T r = abs(z);
  T re = ::sqrt((r + z.re) / T(2));
  T im = ::sqrt((r - z.re) / T(2));
  return complex<T>(re, z.im < T(0) ? -im : im);
}
}  // namespace jm
namespace c10 { template <typename T> using complex = jm::complex<T>; }
template <typename T> using jm_complex = jm::complex<T>;  // the names generated kernels use
template <typename T> JM_INLINE T jm_real(const jm::complex<T>& z) { return z.re; }
using jm::real; using jm::imag; using jm::conj; using jm::norm; using jm::arg;
"""


# glibc's vector math library (libmvec) has SIMD versions of these <cmath> functions, each within
# 4 ulp of the exact result (glibc's bound; the scalar ones are within 1-3), and GCC calls them from
# a vectorized loop once a function is declared `simd`: the math-heavy loops then run 5-40 times
# faster a core. glibc declares them so only under -ffast-math, which jiter_magic never builds with,
# so the prelude declares them (for float and double) where the host compiler found libmvec and
# defines JM_VECTOR_MATH (compilers/cxx.py). 2.22 brought the first six, 2.35 the rest.
_VECTOR_MATH_GLIBC_2_22 = ("cos", "sin", "exp", "log", "pow:2")
_VECTOR_MATH_GLIBC_2_35 = ("acos", "acosh", "asin", "asinh", "atan", "atan2:2", "atanh", "cbrt", "cosh", "erf",
                           "erfc", "exp10", "exp2", "expm1", "hypot:2", "log10", "log1p", "log2", "sinh", "tan",
                           "tanh")


def _simd_declarations(names: tuple[str, ...]) -> str:
    lines = []
    for entry in names:
        name, _, arity = entry.partition(":")
        pair = [f"JM_SIMD {ctype} {name}{suffix}({', '.join([ctype] * int(arity or 1))}) noexcept;"
                for ctype, suffix in (("double", ""), ("float", "f"))]
        lines.append(" ".join(pair))
    return "\n".join(lines)


VECTOR_MATH = f"""#if defined(JM_VECTOR_MATH) && defined(__GLIBC__) && defined(__x86_64__)
#if __GLIBC_PREREQ(2, 22)
#define JM_SIMD extern "C" __attribute__((simd("notinbranch")))
{_simd_declarations(_VECTOR_MATH_GLIBC_2_22)}
#if __GLIBC_PREREQ(2, 35)
{_simd_declarations(_VECTOR_MATH_GLIBC_2_35)}
#endif
#undef JM_SIMD
#endif
#endif"""
HOST_BASE = HOST_BASE.replace("JM_VECTOR_MATH_DECLARATIONS", VECTOR_MATH)


def prelude(target: str, needs_complex: bool) -> str:
    """The prelude for 'cuda' or 'host', with the complex type only when a kernel needs it."""
    base = CUDA_BASE if target == "cuda" else HOST_BASE
    return base + (COMPLEX if needs_complex else "")
