// quant.h: the weight formats Lily reads, defined once for C and CUDA.
//
// Dense weights are F32, F16 or BF16. Quantised weights are MLX "affine" groups (spec §3.3):
// each row of `cols` inputs is split into groups of `group` consecutive values; each group has one
// scale s and one bias b (dtype `sdtype`, bf16 in the community checkpoints) and the value is
//     w = s * q + b,   q an unsigned `bits`-bit code.
// Codes are a little-endian bit stream per row: element j occupies bits [j*bits, (j+1)*bits) of the
// row's bytes, which is the same as "uint32 words filled from the least significant bits up" for
// bits 2, 4 and 8, and matches MLX's byte packing for bits 3, 5 and 6. A row holds cols*bits/32
// uint32 words, so cols*bits must be a multiple of 32 and cols a multiple of `group`.
//
// The inline helpers here compile as host code in C and as __host__ __device__ code under nvcc.
#ifndef LILY_QUANT_H
#define LILY_QUANT_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define LILY_HD __host__ __device__ __forceinline__ static
#else
#define LILY_HD static inline
#endif

// Element types of tensors on disk and in memory.
enum lily_dtype {
    LILY_DT_F32 = 0,
    LILY_DT_F16 = 1,
    LILY_DT_BF16 = 2,
    LILY_DT_U32 = 3, // packed quantised codes
    LILY_DT_Q = 4,   // a whole matrix in MLX affine format (codes + scales + biases)
    LILY_DT_I64 = 5,
    LILY_DT_I32 = 6,
    LILY_DT_U8 = 7,
    LILY_DT_COUNT
};

// Bytes per element of the plain dtypes (0 for LILY_DT_Q).
LILY_HD int lily_dtype_size(int dt) {
    switch (dt) {
    case LILY_DT_F32: case LILY_DT_U32: case LILY_DT_I32: return 4;
    case LILY_DT_F16: case LILY_DT_BF16: return 2;
    case LILY_DT_I64: return 8;
    case LILY_DT_U8: return 1;
    default: return 0;
    }
}

// ---------------------------------------------------------------------------------------------
// Scalar conversions. bf16 rounding is round-to-nearest-even (as PyTorch and MLX do), NaN kept.
LILY_HD float lily_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

LILY_HD uint16_t lily_f32_to_bf16(float f) {
#ifdef __CUDA_ARCH__
    // On the GPU one instruction, the same rounding (subnormals too); a NaN becomes the canonical NaN
    // instead of keeping its payload. The software form below cost ~8 instructions a value, ~10 % of
    // a decode GEMV's issue slots (ncu, docs/PERF.md). tests/gpu checks the two bitwise.
    uint16_t h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
#endif
}

// Round a float to the nearest bf16 value and back (what storing an activation in bf16 does).
LILY_HD float lily_round_bf16(float f) { return lily_bf16_to_f32(lily_f32_to_bf16(f)); }

LILY_HD float lily_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { // subnormal: normalise
            exp = 127 - 15 + 1;
            while (!(man & 0x400u)) {
                man <<= 1;
                exp--;
            }
            man &= 0x3ffu;
            u = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

LILY_HD uint16_t lily_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    int32_t exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
    uint32_t man = u & 0x7fffffu;
    if (((u >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)h;
}

// Read element i of a dense vector of dtype dt as float.
LILY_HD float lily_load_f32(const void *p, int dt, long i) {
    switch (dt) {
    case LILY_DT_F32: return ((const float *)p)[i];
    case LILY_DT_F16: return lily_f16_to_f32(((const uint16_t *)p)[i]);
    case LILY_DT_BF16: return lily_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return 0.0f;
    }
}

// ---------------------------------------------------------------------------------------------
// Affine codes. Code j of a packed row (little-endian bit stream).
LILY_HD uint32_t lily_q_code(const uint8_t *row, long j, int bits) {
    long bit = j * bits;
    const uint8_t *p = row + (bit >> 3);
    uint32_t sh = (uint32_t)(bit & 7);
    // At most 8 bits of code + 7 bits of shift = 15 bits: two bytes suffice, but the second
    // byte may lie past the row's end for the last element, so only read it when needed.
    uint32_t v = p[0];
    if (sh + (uint32_t)bits > 8) v |= (uint32_t)p[1] << 8;
    return (v >> sh) & ((1u << bits) - 1u);
}

// Bytes of one packed row of `cols` codes at `bits` bits.
LILY_HD long lily_q_row_bytes(long cols, int bits) { return cols * bits / 8; }

// Is (bits, group) a format Lily reads?
LILY_HD int lily_q_supported(int bits, int group) {
    return (bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8) &&
           (group == 32 || group == 64 || group == 128);
}

// ---------------------------------------------------------------------------------------------
// One 2-D weight matrix, [rows, cols] = PyTorch [out, in]: y = W x. Views into the mmapped
// checkpoint (or into memory the loader owns); never freed through this struct.
struct lily_mat {
    int rows, cols;
    int dtype;        // LILY_DT_F32 / F16 / BF16 (dense) or LILY_DT_Q (affine)
    int bits, group;  // LILY_DT_Q only
    int sdtype;       // LILY_DT_Q only: dtype of scales and biases
    const void *w;    // dense: rows*cols elements, row-major; Q: rows * cols*bits/8 bytes
    const void *scales; // Q only: rows * (cols/group)
    const void *biases; // Q only: rows * (cols/group)
};

// Bytes the matrix occupies (codes + scales + biases, or dense elements).
LILY_HD long lily_mat_bytes(const struct lily_mat *m) {
    if (m->dtype == LILY_DT_Q)
        return (long)m->rows * lily_q_row_bytes(m->cols, m->bits) +
               2L * m->rows * (m->cols / m->group) * lily_dtype_size(m->sdtype);
    return (long)m->rows * m->cols * lily_dtype_size(m->dtype);
}

// Element (r, c) as float. Slow: for references and tests.
LILY_HD float lily_mat_get(const struct lily_mat *m, long r, long c) {
    if (m->dtype != LILY_DT_Q) return lily_load_f32(m->w, m->dtype, r * m->cols + c);
    long ng = m->cols / m->group;
    const uint8_t *row = (const uint8_t *)m->w + r * lily_q_row_bytes(m->cols, m->bits);
    float s = lily_load_f32(m->scales, m->sdtype, r * ng + c / m->group);
    float b = lily_load_f32(m->biases, m->sdtype, r * ng + c / m->group);
    return s * (float)lily_q_code(row, c, m->bits) + b;
}

// ---------------------------------------------------------------------------------------------
// Host reference helpers (quant.c).
#ifndef __CUDACC__
// Dequantise (or convert) row r into out[cols] as float.
void lily_mat_row(const struct lily_mat *m, long r, float *out);
// y[rows] = W x[cols] with fp32 accumulation; the plain reference loop, no SIMD.
void lily_mat_vec_ref(const struct lily_mat *m, const float *x, float *y);

// Quantise one row of `cols` floats into MLX affine format: per group s = (max-min)/(2^bits-1),
// b = min (both rounded to bf16), q = clamp(round((w-b)/s)).
// Writes cols*bits/8 code bytes and cols/group scales and biases (as bf16).
void lily_quantize_row(const float *w, long cols, int bits, int group, uint8_t *codes,
                       uint16_t *scales, uint16_t *biases);
#endif

#endif
