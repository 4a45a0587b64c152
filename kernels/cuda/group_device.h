// GroupByExpert's device code (ops.h) as one block that ops.cu launches and
// g++ runs through host_emulation.h (group_by_expert_emulation_test): include
// host_emulation.h first there.
#ifndef SLUICE_KERNELS_CUDA_GROUP_DEVICE_H_
#define SLUICE_KERNELS_CUDA_GROUP_DEVICE_H_

#include <cstdint>

namespace sluice::cuda::internal {

constexpr int kGroupThreads = 1024;

// Shared memory GroupByExpertBlock needs: a count (then a cursor) per
// expert and a scan slot per thread.
inline int64_t GroupSharedBytes(int n_expert, int threads) {
  return static_cast<int64_t>(n_expert + threads) * sizeof(int32_t);
}

// The n_pairs (token, slot) pairs of `ids` (k a token) grouped by expert:
// begin[0..n_expert] the exclusive prefix sums of each expert's pairs,
// entry_token[entry] the token of each entry, slot_entry[pair] its entry,
// counts[e] each expert's pairs. Entries within a group come in no
// particular order (the products read each entry alone; the combine
// follows slot_entry). One block of any multiple of 32 threads: each
// thread counts a stride of the pairs and owns a run of consecutive
// experts, whose sums the block scans in shared memory (`s`,
// GroupSharedBytes).
__device__ inline void GroupByExpertBlock(const int32_t* ids, int n_pairs, int k, int n_expert,
                                          int32_t* counts, int32_t* begin, int32_t* entry_token,
                                          int32_t* slot_entry, int32_t* s) {
  int32_t* const count = s;            // [n_expert]: counts, then cursors
  int32_t* const scan = s + n_expert;  // [blockDim.x]
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int e = tid; e < n_expert; e += nt) count[e] = 0;
  __syncthreads();
  for (int i = tid; i < n_pairs; i += nt) atomicAdd(&count[ids[i]], 1);
  __syncthreads();
  const int run = (n_expert + nt - 1) / nt;
  const int lo = tid * run < n_expert ? tid * run : n_expert;
  const int hi = lo + run < n_expert ? lo + run : n_expert;
  int mine = 0;
  for (int e = lo; e < hi; ++e) mine += count[e];
  scan[tid] = mine;
  __syncthreads();
  for (int d = 1; d < nt; d <<= 1) {  // inclusive scan over the threads
    const int add = tid >= d ? scan[tid - d] : 0;
    __syncthreads();
    scan[tid] += add;
    __syncthreads();
  }
  int at = scan[tid] - mine;
  for (int e = lo; e < hi; ++e) {
    const int c = count[e];
    begin[e] = at;
    counts[e] = c;
    count[e] = at;  // the group's next free entry
    at += c;
  }
  if (tid == nt - 1) begin[n_expert] = scan[nt - 1];
  __syncthreads();
  for (int i = tid; i < n_pairs; i += nt) {
    const int entry = atomicAdd(&count[ids[i]], 1);
    entry_token[entry] = i / k;
    slot_entry[i] = entry;
  }
}

}  // namespace sluice::cuda::internal

#endif  // SLUICE_KERNELS_CUDA_GROUP_DEVICE_H_
