#include "kernels/cpu/matvec.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matvec_internal.h"

namespace sluice::kernels {
namespace internal {
namespace {

absl::Status CheckArgs(GgmlType wtype, int64_t rows, int64_t cols, int64_t n_tok) {
  if (!IsMatMulSupported(wtype)) {
    return absl::UnimplementedError(absl::StrCat(TypeName(wtype), ": matmul not supported"));
  }
  if (rows < 0 || cols < 0 || n_tok < 0) {
    return absl::InvalidArgumentError(absl::StrCat(TypeName(wtype), ": negative shape rows=",
                                                   rows, " cols=", cols, " n_tok=", n_tok));
  }
  const int64_t block = std::max<int64_t>(TraitsOf(wtype).block_size,
                                          ActBlock(ActFormatFor(wtype)));
  if (cols % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        TypeName(wtype), ": cols=", cols, " is not a multiple of the block size ", block));
  }
  return absl::OkStatus();
}

using DotF32Fn = float (*)(const float*, const float*, int64_t);

// Rows [begin, end) for every token, weight row decoded to f32 once.
void GenericRows(GgmlType wtype, const uint8_t* w, int64_t row_bytes, int64_t rows,
                 int64_t cols, const float* act, int64_t n_tok, float* y, DotF32Fn dot,
                 int64_t begin, int64_t end) {
  std::vector<float> wrow(cols);
  for (int64_t r = begin; r < end; ++r) {
    // Cannot fail: type and cols were validated by CheckArgs.
    DequantizeRow(wtype, w + r * row_bytes, cols, wrow.data()).IgnoreError();
    for (int64_t t = 0; t < n_tok; ++t) {
      y[t * rows + r] = dot(wrow.data(), act + t * cols, cols);
    }
  }
}

// The generic path's activation: the 8-bit blocks decoded back to f32, so
// it carries exactly the rounding the dedicated kernels see.
std::vector<float> DecodeActivations(ActFormat format, const uint8_t* act, int64_t act_bytes,
                                     int64_t cols, int64_t n_tok) {
  std::vector<float> out(static_cast<size_t>(cols * n_tok));
  const GgmlType act_type = format == ActFormat::kQ8_0   ? GgmlType::kQ8_0
                            : format == ActFormat::kQ8_1 ? GgmlType::kQ8_1
                                                         : GgmlType::kQ8_K;
  for (int64_t t = 0; t < n_tok; ++t) {
    // Cannot fail: cols is a multiple of the activation block.
    DequantizeRow(act_type, act + t * act_bytes, cols, out.data() + t * cols)
        .IgnoreError();
  }
  return out;
}

// Rows split over the pool in groups of 4 (little per-task overhead, still
// balanced), or all on the caller without a pool.
void RunOverRows(ThreadPool* pool, int64_t rows,
                 absl::FunctionRef<void(int64_t, int64_t)> body) {
  if (pool != nullptr) {
    pool->ParallelForGrain(rows, 4, body);
  } else {
    body(0, rows);
  }
}

}  // namespace

bool IsaSupported(Isa isa) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return avx2;
    case Isa::kAvx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  }
  return false;
#else
  return isa == Isa::kScalar;
#endif
}

Isa DetectIsa() {
  static const Isa isa = IsaSupported(Isa::kAvx512) ? Isa::kAvx512
                         : IsaSupported(Isa::kAvx2) ? Isa::kAvx2
                                                    : Isa::kScalar;
  return isa;
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    default: return "scalar";
  }
}

VecDotFn FindVecDot(GgmlType wtype, Isa isa) {
  if (isa == Isa::kAvx512) {
    if (VecDotFn fn = FindVecDotAvx512(wtype)) return fn;
  }
  if (isa != Isa::kScalar) {
    if (VecDotFn fn = FindVecDotAvx2(wtype)) return fn;
  }
  return FindVecDotScalar(wtype);
}

VecDot4Fn FindVecDot4(GgmlType wtype, Isa isa) {
  // Only beside the AVX2 one-row kernel it reproduces: an AVX-512 kernel for
  // the type sums in another order.
  if (isa == Isa::kScalar) return nullptr;
  if (isa == Isa::kAvx512 && FindVecDotAvx512(wtype) != nullptr) return nullptr;
  return FindVecDot4Avx2(wtype);
}

VecDot4x2Fn FindVecDot4x2(GgmlType wtype, Isa isa) {
  return FindVecDot4(wtype, isa) != nullptr ? FindVecDot4x2Avx2(wtype) : nullptr;
}

VecDot8Fn FindVecDot8(GgmlType wtype, Isa isa) {
  return FindVecDot4(wtype, isa) != nullptr ? FindVecDot8Avx2(wtype) : nullptr;
}

// The product on activations already converted for wtype (checked by the
// caller).
void MatMulCore(Isa isa, GgmlType wtype, const void* w, int64_t rows, int64_t cols,
                const PreparedActivations& act, float* y, ThreadPool* pool) {
  const int64_t n_tok = act.n_tok();
  if (rows == 0 || n_tok == 0) return;
  if (cols == 0) {
    std::fill(y, y + rows * n_tok, 0.f);
    return;
  }
  const int64_t act_bytes = act.row_bytes();
  const uint8_t* a = act.data();
  const int64_t row_bytes = *RowBytes(wtype, cols);
  const auto* wb = static_cast<const uint8_t*>(w);
  if (const VecDotFn dot = FindVecDot(wtype, isa)) {
    const VecDot4Fn dot4 = FindVecDot4(wtype, isa);
    const VecDot4x2Fn dot4x2 = FindVecDot4x2(wtype, isa);
    const VecDot8Fn dot8 = n_tok == 1 ? FindVecDot8(wtype, isa) : nullptr;
    RunOverRows(pool, rows, [&](int64_t begin, int64_t end) {
      int64_t r = begin;
      if (dot8 != nullptr) {
        for (; r + 8 <= end; r += 8) dot8(wb + r * row_bytes, row_bytes, a, cols, y + r);
      }
      if (dot4 != nullptr) {
        float out[4];
        for (; r + 4 <= end; r += 4) {
          const uint8_t* w4 = wb + r * row_bytes;
          int64_t t = 0;
          if (dot4x2 != nullptr) {
            for (; t + 2 <= n_tok; t += 2) {
              dot4x2(w4, row_bytes, a + t * act_bytes, act_bytes, cols, y + t * rows + r, rows);
            }
          }
          for (; t < n_tok; ++t) {
            dot4(w4, row_bytes, a + t * act_bytes, cols, out);
            std::memcpy(y + t * rows + r, out, sizeof(out));
          }
        }
      }
      for (; r < end; ++r) {
        const uint8_t* wrow = wb + r * row_bytes;
        for (int64_t t = 0; t < n_tok; ++t) {
          y[t * rows + r] = dot(wrow, a + t * act_bytes, cols);
        }
      }
    });
    return;
  }
  const ActFormat format = act.format();
  const std::vector<float> act_f32 = DecodeActivations(format, a, act_bytes, cols, n_tok);
  const DotF32Fn fdot = isa == Isa::kScalar ? DotF32Scalar : DotF32Avx2;
  RunOverRows(pool, rows, [&](int64_t begin, int64_t end) {
    GenericRows(wtype, wb, row_bytes, rows, cols, act_f32.data(), n_tok, y, fdot, begin, end);
  });
}

absl::Status MatMulWithIsa(Isa isa, GgmlType wtype, const void* w, int64_t rows, int64_t cols,
                           const float* x, int64_t n_tok, float* y, ThreadPool* pool) {
  if (absl::Status status = CheckArgs(wtype, rows, cols, n_tok); !status.ok()) return status;
  if (rows == 0 || n_tok == 0) return absl::OkStatus();
  // Per thread, so decode steps reuse the buffer instead of allocating.
  thread_local PreparedActivations act;
  if (absl::Status status = act.Prepare(wtype, x, cols, n_tok); !status.ok()) return status;
  MatMulCore(isa, wtype, w, rows, cols, act, y, pool);
  return absl::OkStatus();
}

}  // namespace internal

absl::Status PreparedActivations::Prepare(GgmlType wtype, const float* x, int64_t cols,
                                          int64_t n_tok) {
  if (absl::Status status = internal::CheckArgs(wtype, 0, cols, n_tok); !status.ok()) {
    return status;
  }
  format_ = internal::ActFormatFor(wtype);
  cols_ = cols;
  n_tok_ = n_tok;
  row_bytes_ = internal::ActRowBytes(format_, cols);
  prepared_ = true;
  data_.resize(static_cast<size_t>(row_bytes_ * n_tok));
  if (cols == 0) return absl::OkStatus();
  for (int64_t t = 0; t < n_tok; ++t) {
    internal::ConvertActivation(format_, x + t * cols, cols, data_.data() + t * row_bytes_);
  }
  return absl::OkStatus();
}

void PreparedActivations::Gather(const PreparedActivations& src,
                                 absl::Span<const int64_t> rows) {
  format_ = src.format_;
  prepared_ = src.prepared_;
  cols_ = src.cols_;
  n_tok_ = static_cast<int64_t>(rows.size());
  row_bytes_ = src.row_bytes_;
  data_.resize(static_cast<size_t>(row_bytes_ * n_tok_));
  for (int64_t i = 0; i < n_tok_; ++i) {
    std::memcpy(data_.data() + i * row_bytes_, src.data_.data() + rows[i] * row_bytes_,
                row_bytes_);
  }
}

bool PreparedActivations::CompatibleWith(GgmlType wtype, int64_t cols) const {
  return prepared_ && IsMatMulSupported(wtype) && cols == cols_ &&
         internal::ActFormatFor(wtype) == format_;
}

absl::Status MatMulPrepared(GgmlType wtype, const void* w, int64_t rows, int64_t cols,
                            const PreparedActivations& act, float* y, ThreadPool* pool) {
  if (!act.CompatibleWith(wtype, cols)) {
    return absl::InvalidArgumentError(absl::StrCat(
        TypeName(wtype), ": activations prepared for another format or width"));
  }
  absl::Status status = internal::CheckArgs(wtype, rows, cols, act.n_tok());
  if (!status.ok()) return status;
  internal::MatMulCore(internal::DetectIsa(), wtype, w, rows, cols, act, y, pool);
  return absl::OkStatus();
}

bool IsMatMulSupported(GgmlType wtype) {
  return IsDequantizable(wtype) && wtype != GgmlType::kQ8_1 && wtype != GgmlType::kQ8_K;
}

absl::Status MatMul(GgmlType wtype, const void* w, int64_t rows, int64_t cols, const float* x,
                    int64_t n_tok, float* y, ThreadPool* pool) {
  return internal::MatMulWithIsa(internal::DetectIsa(), wtype, w, rows, cols, x, n_tok, y, pool);
}

absl::Status MatMulReference(GgmlType wtype, const void* w, int64_t rows, int64_t cols,
                             const float* x, int64_t n_tok, float* y) {
  absl::Status status = internal::CheckArgs(wtype, rows, cols, n_tok);
  if (!status.ok()) return status;
  if (rows == 0 || n_tok == 0) return absl::OkStatus();
  const int64_t row_bytes = *RowBytes(wtype, cols);
  std::vector<float> wrow(cols);
  for (int64_t r = 0; r < rows; ++r) {
    // Cannot fail: type and cols were validated by CheckArgs.
    DequantizeRow(wtype, static_cast<const uint8_t*>(w) + r * row_bytes, cols, wrow.data())
        .IgnoreError();
    for (int64_t t = 0; t < n_tok; ++t) {
      double sum = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        sum += static_cast<double>(wrow[c]) * static_cast<double>(x[t * cols + c]);
      }
      y[t * rows + r] = static_cast<float>(sum);
    }
  }
  return absl::OkStatus();
}

float DotF32GgmlOrder(const float* a, const float* b, int64_t n) {
  return internal::DetectIsa() == internal::Isa::kScalar ? internal::DotF32Scalar(a, b, n)
                                                         : internal::DotF32Avx2(a, b, n);
}

const char* MatMulIsa() { return internal::IsaName(internal::DetectIsa()); }

}  // namespace sluice::kernels
