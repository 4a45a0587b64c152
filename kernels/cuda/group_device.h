// GroupByExpert's device code (ops.h) as one block that ops.cu launches and
// g++ runs through host_emulation.h (group_by_expert_emulation_test): include
// host_emulation.h first there.
#ifndef SLUICE_KERNELS_CUDA_GROUP_DEVICE_H_
#define SLUICE_KERNELS_CUDA_GROUP_DEVICE_H_

#include <cstdint>

namespace sluice::cuda::internal {

constexpr int kGroupThreads = 1024;

// Shared memory GroupByExpertBlock needs: a count (then a cursor) per
// expert and two scan slots per thread.
inline int64_t GroupSharedBytes(int n_expert, int threads) {
  return static_cast<int64_t>(n_expert + 2 * threads) * sizeof(int32_t);
}

// Inclusive sums over the block's threads of x[tid] and y[tid] in place
// (shared memory; every thread calls it).
__device__ inline void BlockScanPair(int32_t* x, int32_t* y) {
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int d = 1; d < nt; d <<= 1) {
    const int add_x = tid >= d ? x[tid - d] : 0;
    const int add_y = tid >= d ? y[tid - d] : 0;
    __syncthreads();
    x[tid] += add_x;
    y[tid] += add_y;
    __syncthreads();
  }
}

// The n_pairs (token, slot) pairs of `ids` (k a token) grouped by expert,
// as ops.h's GroupByExpert says: begin[0..n_expert] the exclusive prefix
// sums of each expert's pairs, entry_token[entry] the token of each entry,
// slot_entry[pair] its entry, and the non-empty groups compacted into
// active / active_begin. Entries within a group come in no particular
// order (the products read each entry alone; the combine follows
// slot_entry). One block of any multiple of 32 threads: each thread counts
// a stride of the pairs and owns a run of consecutive experts, whose pair
// and non-empty counts the block scans in shared memory (`s`,
// GroupSharedBytes).
__device__ inline void GroupByExpertBlock(const int32_t* ids, int n_pairs, int k, int n_expert,
                                          int32_t* begin, int32_t* active, int32_t* active_begin,
                                          int32_t* entry_token, int32_t* slot_entry,
                                          int32_t* s) {
  const int tid = threadIdx.x, nt = blockDim.x;
  int32_t* const count = s;                 // [n_expert]: counts, then cursors
  int32_t* const pairs = s + n_expert;      // [nt]: pairs of each thread's run
  int32_t* const used = pairs + nt;         // [nt]: non-empty experts of it
  for (int e = tid; e < n_expert; e += nt) count[e] = 0;
  __syncthreads();
  for (int i = tid; i < n_pairs; i += nt) atomicAdd(&count[ids[i]], 1);
  __syncthreads();
  const int run = (n_expert + nt - 1) / nt;
  const int lo = tid * run < n_expert ? tid * run : n_expert;
  const int hi = lo + run < n_expert ? lo + run : n_expert;
  int my_pairs = 0, my_used = 0;
  for (int e = lo; e < hi; ++e) {
    my_pairs += count[e];
    my_used += count[e] > 0 ? 1 : 0;
  }
  pairs[tid] = my_pairs;
  used[tid] = my_used;
  __syncthreads();
  BlockScanPair(pairs, used);
  int at = pairs[tid] - my_pairs, rank = used[tid] - my_used;
  for (int e = lo; e < hi; ++e) {
    const int c = count[e];
    begin[e] = at;
    if (c > 0) {
      active[rank] = e;
      active_begin[rank] = at;
      ++rank;
    }
    count[e] = at;  // the group's next free entry
    at += c;
  }
  if (tid == nt - 1) begin[n_expert] = pairs[nt - 1];
  // Past the last non-empty group: empty groups of expert 0.
  for (int j = used[nt - 1] + tid; j <= n_expert; j += nt) {
    if (j < n_expert) active[j] = 0;
    active_begin[j] = pairs[nt - 1];
  }
  __syncthreads();
  for (int i = tid; i < n_pairs; i += nt) {
    const int entry = atomicAdd(&count[ids[i]], 1);
    entry_token[entry] = i / k;
    slot_entry[i] = entry;
  }
}

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_GROUP_DEVICE_H_
