#include "format/ggml_type.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

namespace sluice {
namespace {

constexpr uint32_t kQK = 256;  // K-quant super-block

// Block sizes and byte counts are those of ggml's block structs.
constexpr GgmlTypeTraits kTypes[] = {
    {GgmlType::kF32, "f32", 1, 4, false},
    {GgmlType::kF16, "f16", 1, 2, false},
    {GgmlType::kQ4_0, "q4_0", 32, 18, true},
    {GgmlType::kQ4_1, "q4_1", 32, 20, true},
    {GgmlType::kQ5_0, "q5_0", 32, 22, true},
    {GgmlType::kQ5_1, "q5_1", 32, 24, true},
    {GgmlType::kQ8_0, "q8_0", 32, 34, true},
    {GgmlType::kQ8_1, "q8_1", 32, 36, true},
    {GgmlType::kQ2_K, "q2_k", kQK, 84, true},
    {GgmlType::kQ3_K, "q3_k", kQK, 110, true},
    {GgmlType::kQ4_K, "q4_k", kQK, 144, true},
    {GgmlType::kQ5_K, "q5_k", kQK, 176, true},
    {GgmlType::kQ6_K, "q6_k", kQK, 210, true},
    {GgmlType::kQ8_K, "q8_k", kQK, 292, true},
    {GgmlType::kIQ2_XXS, "iq2_xxs", kQK, 66, true},
    {GgmlType::kIQ2_XS, "iq2_xs", kQK, 74, true},
    {GgmlType::kIQ3_XXS, "iq3_xxs", kQK, 98, true},
    {GgmlType::kIQ1_S, "iq1_s", kQK, 50, true},
    {GgmlType::kIQ4_NL, "iq4_nl", 32, 18, true},
    {GgmlType::kIQ3_S, "iq3_s", kQK, 110, true},
    {GgmlType::kIQ2_S, "iq2_s", kQK, 82, true},
    {GgmlType::kIQ4_XS, "iq4_xs", kQK, 136, true},
    {GgmlType::kI8, "i8", 1, 1, false},
    {GgmlType::kI16, "i16", 1, 2, false},
    {GgmlType::kI32, "i32", 1, 4, false},
    {GgmlType::kI64, "i64", 1, 8, false},
    {GgmlType::kF64, "f64", 1, 8, false},
    {GgmlType::kIQ1_M, "iq1_m", kQK, 56, true},
    {GgmlType::kBF16, "bf16", 1, 2, false},
    {GgmlType::kTQ1_0, "tq1_0", kQK, 54, true},
    {GgmlType::kTQ2_0, "tq2_0", kQK, 66, true},
    {GgmlType::kMXFP4, "mxfp4", 32, 17, true},
    {GgmlType::kNVFP4, "nvfp4", 64, 36, true},
    {GgmlType::kQ1_0, "q1_0", 128, 18, true},
    {GgmlType::kQ2_0, "q2_0", 64, 18, true},
};

}  // namespace

std::optional<GgmlTypeTraits> LookupGgmlType(uint32_t id) {
  for (const GgmlTypeTraits& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == id) return t;
  }
  return std::nullopt;
}

const GgmlTypeTraits& TraitsOf(GgmlType type) {
  for (const GgmlTypeTraits& t : kTypes) {
    if (t.type == type) return t;
  }
  std::abort();  // precondition violated: not a declared enumerator
}

std::optional<GgmlTypeTraits> LookupGgmlTypeByName(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (const GgmlTypeTraits& t : kTypes) {
    if (t.name == lower) return t;
  }
  return std::nullopt;
}

std::optional<uint64_t> GgmlTypeSet(std::string_view names, std::string* unknown) {
  uint64_t set = 0;
  while (!names.empty()) {
    const size_t comma = names.find(',');
    std::string_view name = names.substr(0, comma);
    names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.front()))) {
      name.remove_prefix(1);
    }
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) {
      name.remove_suffix(1);
    }
    if (name.empty()) continue;
    const std::optional<GgmlTypeTraits> t = LookupGgmlTypeByName(name);
    if (!t.has_value()) {
      if (unknown != nullptr) *unknown = std::string(name);
      return std::nullopt;
    }
    set |= uint64_t{1} << static_cast<uint32_t>(t->type);
  }
  return set;
}

const GgmlTypeTraits* AllGgmlTypes(int* count) {
  *count = static_cast<int>(sizeof(kTypes) / sizeof(kTypes[0]));
  return kTypes;
}

}  // namespace sluice
