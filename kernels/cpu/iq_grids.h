// Lattice tables of the ggml IQ1/IQ2/IQ3 formats (internal to kernels/cpu).
//
// An IQ code word selects one point of a fixed codebook ("grid") of 8 (IQ1,
// IQ2) or 4 (IQ3) small magnitudes; signs and scales come from elsewhere in
// the block. The codebooks are format data; iq_grids.cc stores them packed
// as level indices and this header exposes them expanded to bytes, in the
// exact order ggml's index bits address them.
//
// Thread-safety: IqGrids() builds the tables once (thread-safe static
// initialization) and returns an immutable reference.
#ifndef SLUICE_KERNELS_CPU_IQ_GRIDS_H_
#define SLUICE_KERNELS_CPU_IQ_GRIDS_H_

#include <cstdint>

namespace sluice::kernels::internal {

struct IqGridTables {
  uint8_t iq2xxs[256][8];  // magnitudes in {8, 25, 43}
  uint8_t iq2xs[512][8];
  uint8_t iq2s[1024][8];
  uint8_t iq3xxs[256][4];  // magnitudes in {4, 12, ..., 52, 62}
  uint8_t iq3s[512][4];    // magnitudes in {1, 3, ..., 15}
  int8_t iq1s[2048][8];    // values in {-1, 0, +1}
  // Sign patterns of IQ2/IQ3: 7 stored bits, the 8th makes the count of
  // negative signs even.
  uint8_t signs[128];
};

const IqGridTables& IqGrids();

}  // namespace sluice::kernels::internal

#endif  // SLUICE_KERNELS_CPU_IQ_GRIDS_H_
