
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

typedef float jm_acc_t;
typedef int64_t jm_index_t;
__device__ __forceinline__ double jm_inf() { return __longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ double jm_nan() { return __longlong_as_double(0x7ff8000000000000LL); }
#line 1 "jiterator"
template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {
  const bool take_b = (b != b && a == a) || b > a || ((b == a || (a != a && b != b)) && ib < ia);
  value = take_b ? b : a; index = take_b ? ib : ia;
}

#line 53 "jiter_magic_kernel"
struct jm_state_t { jm_acc_t v; int64_t i; };
__device__ __forceinline__ jm_state_t jm_pick(jm_state_t jm_a, jm_state_t jm_b) {
  if (jm_b.i < 0) return jm_a;
  if (jm_a.i < 0) return jm_b;
  jm_state_t jm_r = jm_a;
  keep_max<jm_acc_t>(jm_a.v, jm_a.i, jm_b.v, jm_b.i, jm_r.v, jm_r.i);
  return jm_r;
}
__device__ __forceinline__ jm_state_t jm_pick_element(jm_state_t jm_a, jm_state_t jm_b) {
  if (jm_a.i < 0) return jm_b;
  jm_state_t jm_r = jm_a;
  keep_max<jm_acc_t>(jm_a.v, jm_a.i, jm_b.v, jm_b.i, jm_r.v, jm_r.i);
  return jm_r;
}
__device__ __forceinline__ jm_state_t jm_shuffle_xor(jm_state_t jm_s, int jm_off) {
  return jm_state_t{__shfl_xor_sync(0xffffffffu, jm_s.v, jm_off), (int64_t)__shfl_xor_sync(0xffffffffu, (long long)jm_s.i, jm_off)};
}
struct jm_Args {
  alignas(8) float* jm_out;
  alignas(8) int64_t* jm_out_index;
  alignas(8) const float* jm_in0;
  alignas(8) jm_state_t* jm_partials;
  alignas(8) int64_t jm_rows;
  alignas(8) int64_t jm_count;
  alignas(8) int64_t jm_blocks;
  alignas(8) int64_t jm_stage;
  alignas(8) int64_t jm_ksize[1];
  alignas(8) int64_t jm_kstride0[1];
  alignas(8) int64_t jm_kstride1[1];
  alignas(8) int64_t jm_kstride2[1];
  alignas(8) int64_t jm_rsize[1];
  alignas(8) int64_t jm_rstride0[1];
};
static_assert(sizeof(jm_Args) == 112, "jm_Args layout: does a macro in the code string redefine a type?");
__device__ __forceinline__ jm_state_t jm_pick_next(jm_state_t jm_a, jm_state_t jm_b) {
  jm_state_t jm_r = jm_a;
  keep_max<jm_acc_t>(jm_a.v, jm_a.i, jm_b.v, jm_b.i, jm_r.v, jm_r.i);
  return jm_r;
}
__device__ __forceinline__ jm_state_t jm_warp_fold(jm_state_t jm_v) {
  #pragma unroll
  for (int jm_off = 16; jm_off > 0; jm_off >>= 1) {
    jm_v = jm_pick(jm_v, jm_shuffle_xor(jm_v, jm_off));
  }
  return jm_v;
}
__device__ __forceinline__ jm_state_t jm_block_fold(jm_state_t jm_v, jm_state_t* jm_shared) {
  const unsigned int jm_t = jm_thread_y() * 32 + jm_thread_x();
  jm_v = jm_warp_fold(jm_v);
  if (jm_t % 32 == 0) jm_shared[jm_t / 32] = jm_v;
  __syncthreads();
  if (jm_t < 32) {
    jm_v = jm_t < 8 ? jm_shared[jm_t] : jm_shared[0];
    #pragma unroll
    for (int jm_off = 4; jm_off > 0; jm_off >>= 1) {
      jm_v = jm_pick(jm_v, jm_shuffle_xor(jm_v, jm_off));
    }
  }
  return jm_v;
}
extern "C" __global__ void __launch_bounds__(256) jm_kernel(const jm_Args jm_a) {
  __shared__ jm_state_t jm_shared[264];
  if (jm_a.jm_stage == 1) {
    const jm_index_t jm_row = (jm_index_t)jm_block_x();
    jm_index_t jm_k0 = 0, jm_k2 = 0, jm_krest = jm_row;
    { const jm_index_t jm_c = jm_krest;
      jm_k0 += jm_c * jm_a.jm_kstride0[0]; jm_k2 += jm_c * jm_a.jm_kstride2[0]; }
    const jm_state_t* jm_p = jm_a.jm_partials + jm_row * jm_a.jm_blocks;
    jm_state_t jm_acc = jm_state_t{((jm_acc_t)(0.0)), -1};
    for (jm_index_t jm_g = jm_thread_x(); jm_g < jm_a.jm_blocks; jm_g += 256) jm_acc = jm_pick(jm_acc, jm_p[jm_g]);
    jm_acc = jm_block_fold(jm_acc, jm_shared);
    if (jm_thread_x() == 0) { jm_a.jm_out[jm_k0] = jm_acc.v; jm_a.jm_out_index[jm_k2] = jm_acc.i; }
    return;
  }
  const jm_index_t jm_row = (jm_index_t)jm_block_x() / jm_a.jm_blocks, jm_g = (jm_index_t)jm_block_x() % jm_a.jm_blocks;
  jm_index_t jm_k0 = 0, jm_k1 = 0, jm_k2 = 0, jm_krest = jm_row;
  { const jm_index_t jm_c = jm_krest;
    jm_k0 += jm_c * jm_a.jm_kstride0[0]; jm_k1 += jm_c * jm_a.jm_kstride1[0]; jm_k2 += jm_c * jm_a.jm_kstride2[0]; }
  jm_state_t jm_acc = jm_state_t{((jm_acc_t)(0.0)), -1};
  jm_vec<float, 4> jm_b0[4];
  jm_index_t jm_j = (jm_index_t)(jm_g * 256 + jm_thread_x()) * 4;
  if (jm_j < jm_a.jm_count) {
    jm_b0[0] = *reinterpret_cast<const jm_vec<float, 4>*>(jm_a.jm_in0 + jm_k1 + jm_j);
    jm_acc = jm_state_t{jm_b0[0].jm_v[0], (int64_t)(jm_j)};
    #pragma unroll
    for (int jm_e = 1; jm_e < 4; ++jm_e) {
      jm_acc = jm_pick_next(jm_acc, jm_state_t{jm_b0[0].jm_v[jm_e], (int64_t)(jm_j + jm_e)});
    }
    jm_j += (jm_index_t)(jm_a.jm_blocks * 256) * 4;
  }
  for (; jm_j + 3 * ((jm_index_t)(jm_a.jm_blocks * 256) * 4) < jm_a.jm_count; jm_j += 4 * ((jm_index_t)(jm_a.jm_blocks * 256) * 4)) {
    #pragma unroll
    for (int jm_u = 0; jm_u < 4; ++jm_u) {
      jm_b0[jm_u] = *reinterpret_cast<const jm_vec<float, 4>*>(jm_a.jm_in0 + jm_k1 + jm_j + jm_u * ((jm_index_t)(jm_a.jm_blocks * 256) * 4));
    }
    #pragma unroll
    for (int jm_u = 0; jm_u < 4; ++jm_u) {
      #pragma unroll
      for (int jm_e = 0; jm_e < 4; ++jm_e) {
        jm_acc = jm_pick_next(jm_acc, jm_state_t{jm_b0[jm_u].jm_v[jm_e], (int64_t)(jm_j + jm_u * ((jm_index_t)(jm_a.jm_blocks * 256) * 4) + jm_e)});
      }
    }
  }
  for (; jm_j < jm_a.jm_count; jm_j += (jm_index_t)(jm_a.jm_blocks * 256) * 4) {
    jm_b0[0] = *reinterpret_cast<const jm_vec<float, 4>*>(jm_a.jm_in0 + jm_k1 + jm_j);
    #pragma unroll
    for (int jm_e = 0; jm_e < 4; ++jm_e) {
      jm_acc = jm_pick_next(jm_acc, jm_state_t{jm_b0[0].jm_v[jm_e], (int64_t)(jm_j + jm_e)});
    }
  }
  jm_acc = jm_block_fold(jm_acc, jm_shared);
  if (jm_thread_x() == 0) {
    if (jm_a.jm_blocks == 1) { jm_a.jm_out[jm_k0] = jm_acc.v; jm_a.jm_out_index[jm_k2] = jm_acc.i; }
    else jm_a.jm_partials[jm_row * jm_a.jm_blocks + jm_g] = jm_acc;
  }
}
