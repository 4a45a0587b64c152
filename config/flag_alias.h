// A flag renamed across the tree keeps its old name working: both are
// defined, the binary reads the value through ResolveRenamedFlag, and the
// old spelling logs one deprecation line. docs/OPERATIONS.md lists the
// aliases.
#ifndef SLUICE_CONFIG_FLAG_ALIAS_H_
#define SLUICE_CONFIG_FLAG_ALIAS_H_

#include <functional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace sluice::config {

// Whether `flag` was given a value other than its default (on the command
// line, or in sluiced's config file, which becomes command-line arguments).
// A flag given its default value reads as not given: Debian's Abseil keeps
// "was it on the command line" private, and for an alias the two cases
// mean the same.
bool FlagGiven(const absl::CommandLineFlag& flag);

// "--OLD is deprecated; use --NEW (same meaning)".
std::string DeprecationLine(absl::string_view old_name, absl::string_view new_name);

// "--NEW=A and --OLD=B: --OLD is the old name of --NEW; give one of them":
// both spellings given, with different values.
std::string RenamedFlagConflict(absl::string_view new_name, absl::string_view new_value,
                                absl::string_view old_name, absl::string_view old_value);

// The value of `current`, or of `deprecated` (its old name) when only that
// was given; then `log` gets DeprecationLine. Both given with different
// values: InvalidArgument "--NEW=A and --OLD=B: --OLD is the old name of
// --NEW; give one of them".
template <typename T>
absl::StatusOr<T> ResolveRenamedFlag(const absl::Flag<T>& current, const absl::Flag<T>& deprecated,
                                     const std::function<void(const std::string&)>& log) {
  const absl::CommandLineFlag& now = absl::GetFlagReflectionHandle(current);
  const absl::CommandLineFlag& old = absl::GetFlagReflectionHandle(deprecated);
  if (!FlagGiven(old)) return absl::GetFlag(current);
  if (FlagGiven(now) && now.CurrentValue() != old.CurrentValue()) {
    return absl::InvalidArgumentError(
        RenamedFlagConflict(now.Name(), now.CurrentValue(), old.Name(), old.CurrentValue()));
  }
  if (log) log(DeprecationLine(old.Name(), now.Name()));
  return absl::GetFlag(deprecated);
}

}  // namespace sluice::config

#endif  // SLUICE_CONFIG_FLAG_ALIAS_H_
