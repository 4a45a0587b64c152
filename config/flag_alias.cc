#include "config/flag_alias.h"

namespace sluice::config {

bool FlagGiven(const absl::CommandLineFlag& flag) {
  return flag.CurrentValue() != flag.DefaultValue();
}

std::string DeprecationLine(absl::string_view old_name, absl::string_view new_name) {
  return absl::StrCat("--", old_name, " is deprecated; use --", new_name, " (same meaning)");
}

}  // namespace sluice::config
