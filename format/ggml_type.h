// The ggml tensor element types found in GGUF files, and their block layout.
//
// This is format data only: it knows nothing of files. kernels/ depends on it
// to name the blocks it decodes; loader/ uses it to size tensors.
//
// Thread-safety: everything here is immutable and safe to call concurrently.
#ifndef SLUICE_FORMAT_GGML_TYPE_H_
#define SLUICE_FORMAT_GGML_TYPE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice {

// Values are the ids stored in GGUF tensor infos. Gaps are ids that ggml has
// retired (Q4_2, Q4_3, the Q4_0_4_4 family, the IQ4_NL_4_4 family).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
  kQ2_0 = 42,
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;     // lower-case ggml name, e.g. "q4_k"
  uint32_t block_size;       // elements per block (1 for plain types)
  uint32_t bytes_per_block;  // bytes one block occupies
  bool quantized;
};

// Traits for a raw GGUF type id; nullopt for ids that are unknown or retired.
std::optional<GgmlTypeTraits> LookupGgmlType(uint32_t id);

// Traits for a known enum value. Precondition: `type` is a declared enumerator.
const GgmlTypeTraits& TraitsOf(GgmlType type);

// Traits by lower-case ggml name ("q8_0", "iq2_xxs"); nullopt if unknown.
std::optional<GgmlTypeTraits> LookupGgmlTypeByName(std::string_view name);

// Every declared type, in id order.
const GgmlTypeTraits* AllGgmlTypes(int* count);

// The set of types a comma-separated list of names gives ("q4_k,Q6_K";
// spaces around a name and empty items ignored), bit id set for each, or
// nullopt naming the first unknown name in *unknown. Every id is below 64.
std::optional<uint64_t> GgmlTypeSet(std::string_view names, std::string* unknown);

}  // namespace sluice

#endif  // SLUICE_FORMAT_GGML_TYPE_H_
