// Mat-vec throughput per weight type, in weight bytes per second, next to a
// plain read of the same number of bytes.
//
//   bazel run -c opt //bench:matvec_bench -- --benchmark_min_time=0.1
//
// Each benchmark multiplies a ~64 MiB weight matrix (4096 columns) by one
// activation row (decode) with 1 or 2 threads. Counters:
//   bytes_per_second          weight bytes / wall second (all threads)
//   GB/s/thread               the same divided by the thread count
// BM_MemRead reads a buffer of the same size with the same thread pool;
// comparing the two shows how close a kernel gets to memory bandwidth.
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "format/ggml_type.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matvec.h"
#include "kernels/cpu/test_util.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sluice::kernels {
namespace {

constexpr int64_t kCols = 4096;
// Larger than the last-level cache of common x86 parts (32 MiB here), so
// weights stream from DRAM as they do in a real model.
constexpr int64_t kTargetBytes = int64_t{64} << 20;

void SetCounters(benchmark::State& state, int64_t bytes, int threads) {
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["GB/s/thread"] = benchmark::Counter(
      static_cast<double>(bytes) / 1e9 / threads, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
}

void BM_MatVec(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const int64_t row_bytes = *RowBytes(type, kCols);
  const int64_t rows = kTargetBytes / row_bytes;
  std::mt19937 rng(42);
  const std::vector<uint8_t> w = testing_util::RandomWeights(type, rows, kCols, rng);
  std::vector<float> x(kCols), y(rows);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);
  ThreadPool pool(threads);
  for (auto _ : state) {
    absl::Status s = MatMul(type, w.data(), rows, kCols, x.data(), 1, y.data(), &pool);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(TypeName(type) + " " + MatMulIsa());
  SetCounters(state, rows * row_bytes, threads);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t SumBytes(const uint8_t* p, int64_t n) {
  __m256i acc = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc = _mm256_add_epi64(acc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
  }
  uint64_t lanes[4];
  std::memcpy(lanes, &acc, 32);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#else
uint64_t SumBytes(const uint8_t* p, int64_t n) {
  uint64_t sum = 0;
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    sum += v;
  }
  return sum;
}
#endif

void BM_MemRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<uint8_t> buf(kTargetBytes, 1);
  ThreadPool pool(threads);
  std::vector<uint64_t> sink(threads * 8);
  for (auto _ : state) {
    pool.ParallelForGrain(kTargetBytes, 4096, [&](int64_t begin, int64_t end) {
      sink[(begin * threads / kTargetBytes) * 8] += SumBytes(buf.data() + begin, end - begin);
    });
    benchmark::DoNotOptimize(sink.data());
  }
  SetCounters(state, kTargetBytes, threads);
}

void MatVecArgs(benchmark::internal::Benchmark* b) {
  const GgmlType types[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                            GgmlType::kQ1_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                            GgmlType::kQ4_0, GgmlType::kQ2_K, GgmlType::kIQ4_XS,
                            GgmlType::kIQ2_XXS};
  for (GgmlType t : types) {
    for (int threads : {1, 2}) b->Args({static_cast<int64_t>(t), threads});
  }
}

BENCHMARK(BM_MemRead)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_MatVec)->Apply(MatVecArgs)->UseRealTime();

}  // namespace
}  // namespace sluice::kernels
