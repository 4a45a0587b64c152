// Device-side readers of ggml weight blocks for the grouped mat-mul kernel
// (quant_matmul_kernel.h; compiled by nvcc, and by g++ with host_emulation.h
// in quant_matmul_emulation_test).
//
// Each weight type is a struct with the same shape:
//   kChunk   elements one lane decodes per step (a multiple of 4; a block is
//            a whole number of chunks, or, for plain types, any row length
//            with a scalar tail)
//   Raw      the chunk's bytes and scales, held in registers
//   Load     issues the global loads of chunk `c` of a row
//   Col      first column of the 4 consecutive elements of group g of chunk c
//   Decode   those 4 weights as floats
// The kernel decodes each chunk once and multiplies it with every activation
// row of its tile, so a weight byte is read from memory once per tile.
//
// Bit layouts are those of kernels/cpu/dequant.cc (docs/QUANT_FORMATS.md).
// Decoding here may fuse a multiply-add (unlike the CPU dequantizer): the
// products only promise F32 accuracy. DequantElement in quant_matmul_kernel.h
// is the bit-exact reader.
//
// Alignment: a weight row must start at an even address (every fp16 field is
// at an even offset); loads widen to 4/8/16 bytes where the address allows.
#ifndef SLUICE_KERNELS_CUDA_QUANT_BLOCKS_DEVICE_H_
#define SLUICE_KERNELS_CUDA_QUANT_BLOCKS_DEVICE_H_

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif  // elsewhere host_emulation.h, included first, stands in for it

namespace sluice::cuda::internal {

// 2^23: a float whose mantissa bits are a small integer v is 2^23 + v, so a
// bit-or and one subtraction convert v exactly (I2F runs at a quarter of the
// FP32 rate, which would cap decode below memory bandwidth): ByteAsFloat
// below, for the weights and the K-quants' 6-bit scales.
constexpr float kTwo23 = 8388608.0f;

__device__ __forceinline__ float HalfBits(uint32_t h) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h & 0xFFFF)));
}

// How the readers load weight bytes: __ldg unless the including file
// defines SLUICE_WEIGHT_LOAD first (the decode kernels pick an L2 policy).
#ifndef SLUICE_WEIGHT_LOAD
#define SLUICE_WEIGHT_LOAD(p) __ldg(p)
#endif

// Where the readers' bytes are: global memory (loaded with
// SLUICE_WEIGHT_LOAD) or shared memory (a plain load; the decode kernels
// that stream weights into shared memory first).
struct GlobalMem {
  static constexpr bool kAligned16 = false;
  template <class V>
  __device__ static V Load(const V* p) {
    return SLUICE_WEIGHT_LOAD(p);
  }
};
struct SharedMem {
  static constexpr bool kAligned16 = false;
  template <class V>
  __device__ static V Load(const V* p) {
    return *p;
  }
};
// Shared memory where every LoadWords<N % 4 == 0> address is 16-byte
// aligned (Q4_K/Q5_K rows of a multiple of 16 bytes staged at 16-byte
// offsets): the alignment test and its other paths are left out.
struct SharedAligned16 : SharedMem {
  static constexpr bool kAligned16 = true;
};

template <class M = GlobalMem>
__device__ __forceinline__ uint32_t LoadU16(const uint8_t* p) {
  return M::Load(reinterpret_cast<const unsigned short*>(p));
}

// Whether LoadWords reads an address that is not 16-byte aligned as 4-byte
// words shifted into place (one code path for every even address, so the
// lanes of a warp reading blocks of different alignment do not diverge)
// instead of the widest loads the address allows. A hook like
// SLUICE_WEIGHT_LOAD: the decode kernels make it a run-time switch.
#ifndef SLUICE_FUNNEL_LOADS
#define SLUICE_FUNNEL_LOADS false
#endif

// N little-endian 32-bit words from p (p even). The widest load the address
// allows: rows of Q4_K/Q5_K/F16/F32 in cudaMalloc'd or GGUF-aligned memory
// take the 16-byte path; Q8_0, Q6_K and Q1_0 blocks are only 2-byte aligned.
template <int N, class M = GlobalMem>
__device__ __forceinline__ void LoadWords(const uint8_t* p, uint32_t (&w)[N]) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if constexpr (N % 4 == 0) {
    if (M::kAligned16 || (a & 15) == 0) {
#pragma unroll
      for (int i = 0; i < N / 4; ++i) {
        const uint4 v = M::Load(reinterpret_cast<const uint4*>(p) + i);
        w[4 * i] = v.x;
        w[4 * i + 1] = v.y;
        w[4 * i + 2] = v.z;
        w[4 * i + 3] = v.w;
      }
      return;
    }
  }
  if (SLUICE_FUNNEL_LOADS) {
    // The N + 1 aligned words around p (the last only when p is 2 mod 4:
    // never a word past the N asked for), shifted by 0 or 16 bits.
    const uint32_t* q = reinterpret_cast<const uint32_t*>(p - (a & 3));
    const uint32_t shift = static_cast<uint32_t>(a & 2) * 8;
    uint32_t v[N + 1];
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = M::Load(q + i);
    v[N] = shift != 0 ? M::Load(q + N) : 0u;
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = __funnelshift_r(v[i], v[i + 1], shift);
    return;
  }
  if constexpr (N % 2 == 0) {
    if ((a & 7) == 0) {
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        const uint2 v = M::Load(reinterpret_cast<const uint2*>(p) + i);
        w[2 * i] = v.x;
        w[2 * i + 1] = v.y;
      }
      return;
    }
  }
  if ((a & 3) == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = M::Load(reinterpret_cast<const uint32_t*>(p) + i);
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i) w[i] = LoadU16<M>(p + 4 * i) | (LoadU16<M>(p + 4 * i + 2) << 16);
}

__device__ __forceinline__ uint32_t ByteOf(uint32_t w, int i) { return (w >> (8 * i)) & 0xFF; }

// Byte i of w as a float minus `offset`: one byte permute places the byte
// under the exponent bits of 2^23 (then one subtraction), instead of a shift,
// a mask and an or per element; decode is otherwise bound by the integer
// pipe at HBM rates for 4..6-bit types.
__device__ __forceinline__ float ByteAsFloat(uint32_t w, int i, float offset = 0.0f) {
  return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | static_cast<unsigned>(i))) -
         (kTwo23 + offset);
}

// ---- plain types ----------------------------------------------------------

struct F32Weights {
  static constexpr int kChunk = 16;
  static constexpr bool kPlain = true;
  struct Raw {
    uint32_t w[16];
  };
  template <class M = GlobalMem>
  __device__ static void Load(const uint8_t* row, int64_t c, Raw& r) {
    LoadWords<16, M>(row + c * 64, r.w);
  }
  __device__ static int64_t Col(int64_t c, int g) { return c * 16 + 4 * g; }
  __device__ static float4 Decode(const Raw& r, int g) {
    return make_float4(__uint_as_float(r.w[4 * g]), __uint_as_float(r.w[4 * g + 1]),
                       __uint_as_float(r.w[4 * g + 2]), __uint_as_float(r.w[4 * g + 3]));
  }
  template <class M = GlobalMem>
  __device__ static float Elem(const uint8_t* row, int64_t c) {
    return __uint_as_float(LoadU16<M>(row + 4 * c) | (LoadU16<M>(row + 4 * c + 2) << 16));
  }
};

// F16 and BF16: 32 halves (64 bytes) per chunk.
template <bool kBf16>
struct HalfWeights {
  static constexpr int kChunk = 32;
  static constexpr bool kPlain = true;
  struct Raw {
    uint32_t w[16];
  };
  __device__ static float Widen(uint32_t h) {
    return kBf16 ? __uint_as_float((h & 0xFFFF) << 16) : HalfBits(h);
  }
  template <class M = GlobalMem>
  __device__ static void Load(const uint8_t* row, int64_t c, Raw& r) {
    LoadWords<16, M>(row + c * 64, r.w);
  }
  __device__ static int64_t Col(int64_t c, int g) { return c * 32 + 4 * g; }
  __device__ static float4 Decode(const Raw& r, int g) {
    const uint32_t a = r.w[2 * g], b = r.w[2 * g + 1];
    return make_float4(Widen(a), Widen(a >> 16), Widen(b), Widen(b >> 16));
  }
  template <class M = GlobalMem>
  __device__ static float Elem(const uint8_t* row, int64_t c) {
    return Widen(LoadU16<M>(row + 2 * c));
  }
};

// ---- quantized types (no tail: a row is whole blocks) ---------------------

// Q8_0: 34-byte blocks of 32 (d:fp16, qs[32]:int8); a chunk is one block.
struct Q8_0Weights {
  static constexpr int kChunk = 32;
  static constexpr bool kPlain = false;
  struct Raw {
    uint32_t q[8];
    float d;
  };
  template <class M = GlobalMem>
  __device__ static void Load(const uint8_t* row, int64_t c, Raw& r) {
    const uint8_t* b = row + c * 34;
    r.d = HalfBits(LoadU16<M>(b));
    LoadWords<8, M>(b + 2, r.q);
  }
  __device__ static int64_t Col(int64_t c, int g) { return c * 32 + 4 * g; }
  __device__ static float4 Decode(const Raw& r, int g) {
    // Flipping the sign bit maps int8 q to q + 128 in 0..255.
    const uint32_t w = r.q[g] ^ 0x80808080u;
    return make_float4(ByteAsFloat(w, 0, 128.0f) * r.d, ByteAsFloat(w, 1, 128.0f) * r.d,
                       ByteAsFloat(w, 2, 128.0f) * r.d, ByteAsFloat(w, 3, 128.0f) * r.d);
  }
  template <class M = GlobalMem>
  __device__ static float Elem(const uint8_t*, int64_t) { return 0.0f; }
};

// Q1_0: 18-byte blocks of 128 (d:fp16, qs[16]); element j is +d where bit
// j%8 of qs[j/8] is set, else -d. A chunk is 32 elements (4 bytes of bits).
struct Q1_0Weights {
  static constexpr int kChunk = 32;
  static constexpr bool kPlain = false;
  struct Raw {
    uint32_t bits[1];
    float d;
  };
  template <class M = GlobalMem>
  __device__ static void Load(const uint8_t* row, int64_t c, Raw& r) {
    const uint8_t* b = row + (c >> 2) * 18;
    r.d = HalfBits(LoadU16<M>(b));
    LoadWords<1, M>(b + 2 + 4 * (c & 3), r.bits);
  }
  __device__ static int64_t Col(int64_t c, int g) { return c * 32 + 4 * g; }
  __device__ static float4 Decode(const Raw& r, int g) {
    const uint32_t s = r.bits[0] >> (4 * g);
    const float d = r.d;
    return make_float4((s & 1) ? d : -d, (s & 2) ? d : -d, (s & 4) ? d : -d, (s & 8) ? d : -d);
  }
  template <class M = GlobalMem>
  __device__ static float Elem(const uint8_t*, int64_t) { return 0.0f; }
};

// The 6-bit scales and mins of sub-blocks 2p and 2p + 1 (p 0..3) of a
// Q4_K/Q5_K block whose 12 scale bytes are the words s0, s1, s2 (the values
// of KScaleMin in kernels/cpu for j = 2p, 2p + 1): all eight 6-bit
// scales (and mins) of the block assembled four to a word, then the pair's
// two bytes placed as floats, with no branch on p's half.
__device__ __forceinline__ void KScaleMinPair(uint32_t s0, uint32_t s1, uint32_t s2, int p,
                                              float (&scale)[2], float (&min)[2]) {
  const bool high = p >= 2;
  const uint32_t sc = high ? ((s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u)) : (s0 & 0x3F3F3F3Fu);
  const uint32_t mn =
      high ? (((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u)) : (s1 & 0x3F3F3F3Fu);
  const int i = 2 * (p & 1);
  scale[0] = ByteAsFloat(sc, i);
  scale[1] = ByteAsFloat(sc, i + 1);
  min[0] = ByteAsFloat(mn, i);
  min[1] = ByteAsFloat(mn, i + 1);
}

// Q4_K (144 bytes: d, dmin, scales[12], qs[128]) and Q5_K (176 bytes: d,
// dmin, scales[12], qh[32], qs[128]). Element 64p + 32h + l is nibble h of
// qs[32p + l] (plus, for Q5_K, bit 2p+h of qh[l] as the fifth bit), scaled
// by sub-block 2p+h. Chunk k (0..7) of a block is p = k/2, l in l0..l0+16
// with l0 = 16(k%2): groups 0..3 are the low nibbles (sub-block 2p), 4..7 the
// high ones (2p+1).
template <bool kQ5>
struct KWeights {
  static constexpr int kChunk = 32;
  static constexpr bool kPlain = false;
  static constexpr int kBlockBytes = kQ5 ? 176 : 144;
  static constexpr int kQsOffset = kQ5 ? 48 : 16;
  struct Raw {
    uint32_t q[4];
    uint32_t h[kQ5 ? 4 : 1];
    int sub0;
    float d0, m0, d1, m1;
  };
  template <class M = GlobalMem>
  __device__ static void Load(const uint8_t* row, int64_t chunk, Raw& r) {
    const int c = static_cast<int>(chunk);  // a row has far fewer than 2^31 chunks
    const uint8_t* b = row + (c >> 3) * kBlockBytes;
    const int k = c & 7, p = k >> 1, l0 = (k & 1) * 16;
    LoadWords<4, M>(b + kQsOffset + 32 * p + l0, r.q);
    if constexpr (kQ5) LoadWords<4, M>(b + 16 + l0, r.h);
    uint32_t head[4];
    LoadWords<4, M>(b, head);
    const float d = HalfBits(head[0]), dmin = HalfBits(head[0] >> 16);
    float sc[2], m[2];
    KScaleMinPair(head[1], head[2], head[3], p, sc, m);
    r.d0 = d * sc[0];
    r.m0 = dmin * m[0];
    r.d1 = d * sc[1];
    r.m1 = dmin * m[1];
    r.sub0 = 2 * p;
  }
  __device__ static int64_t Col(int64_t c, int g) {
    const int k = static_cast<int>(c & 7);
    return (c >> 3) * 256 + 64 * (k >> 1) + (k & 1) * 16 + (g & 3) * 4 + (g >= 4 ? 32 : 0);
  }
  __device__ static float4 Decode(const Raw& r, int g) {
    const bool high = g >= 4;
    // Four 4-bit (or 5-bit) values, one per byte.
    uint32_t q = (r.q[g & 3] >> (high ? 4 : 0)) & 0x0F0F0F0Fu;
    if constexpr (kQ5) q |= ((r.h[g & 3] >> (r.sub0 + (high ? 1 : 0))) & 0x01010101u) << 4;
    const float d = high ? r.d1 : r.d0, m = high ? r.m1 : r.m0;
    float v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = fmaf(d, ByteAsFloat(q, i), -m);
    return make_float4(v[0], v[1], v[2], v[3]);
  }
  template <class M = GlobalMem>
  __device__ static float Elem(const uint8_t*, int64_t) { return 0.0f; }
};

// Q6_K (210 bytes: ql[128], qh[64], scales[16]:int8, d). Element
// 128h + 32k + l (k 0..3, l 0..31): low 4 bits from ql[64h + l + 32(k%2)]
// (low nibble for k < 2, high for k >= 2), two high bits 2k..2k+1 of
// qh[32h + l], minus 32, times d * scales[8h + l/16 + 2k]. Chunk c (0..7) of
// a block is h = c/4, l in l0..l0+8 with l0 = 8(c%4), all four k: group g is
// k = g/2, elements l0 + 4(g%2) .. +4.
struct Q6KWeights {
  static constexpr int kChunk = 32;
  static constexpr bool kPlain = false;
  struct Raw {
    uint32_t lo_a[2], lo_b[2], hi[2];
    float ds[4];
  };
  template <class M = GlobalMem>
  __device__ static void Load(const uint8_t* row, int64_t c, Raw& r) {
    const uint8_t* b = row + (c >> 3) * 210;
    const int k = static_cast<int>(c & 7), h = k >> 2, l0 = (k & 3) * 8, is = (k & 3) >> 1;
    LoadWords<2, M>(b + 64 * h + l0, r.lo_a);
    LoadWords<2, M>(b + 64 * h + 32 + l0, r.lo_b);
    LoadWords<2, M>(b + 128 + 32 * h + l0, r.hi);
    uint32_t sc[2];
    LoadWords<2, M>(b + 192 + 8 * h, sc);
    const float d = HalfBits(LoadU16<M>(b + 208));
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int i = is + 2 * kk;
      const int s = static_cast<int8_t>(ByteOf(i < 4 ? sc[0] : sc[1], i & 3));
      r.ds[kk] = d * static_cast<float>(s);  // small int: exact conversion
    }
  }
  __device__ static int64_t Col(int64_t c, int g) {
    const int k = static_cast<int>(c & 7);
    return (c >> 3) * 256 + 128 * (k >> 2) + 32 * (g >> 1) + (k & 3) * 8 + 4 * (g & 1);
  }
  __device__ static float4 Decode(const Raw& r, int g) {
    const int k = g >> 1, s = g & 1;
    const uint32_t lo = (k & 1) ? r.lo_b[s] : r.lo_a[s];
    // Four 6-bit values, one per byte.
    const uint32_t q = ((k < 2 ? lo : lo >> 4) & 0x0F0F0F0Fu) |
                       (((r.hi[s] >> (2 * k)) & 0x03030303u) << 4);
    float v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = r.ds[k] * ByteAsFloat(q, i, 32.0f);
    return make_float4(v[0], v[1], v[2], v[3]);
  }
  template <class M = GlobalMem>
  __device__ static float Elem(const uint8_t*, int64_t) { return 0.0f; }
};

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_QUANT_BLOCKS_DEVICE_H_
