#include "config/flag_alias.h"

namespace sluice::config {

bool FlagGiven(const absl::CommandLineFlag& flag) {
  return flag.CurrentValue() != flag.DefaultValue();
}

std::string DeprecationLine(absl::string_view old_name, absl::string_view new_name) {
  return absl::StrCat("--", old_name, " is deprecated; use --", new_name, " (same meaning)");
}

std::string RenamedFlagConflict(absl::string_view new_name, absl::string_view new_value,
                                absl::string_view old_name, absl::string_view old_value) {
  return absl::StrCat("--", new_name, "=", new_value, " and --", old_name, "=", old_value,
                      ": --", old_name, " is the old name of --", new_name,
                      "; give one of them");
}

}  // namespace sluice::config
