// sluicectl: the command-line client of sluiced.
//
//   sluicectl [--addr=HOST:PORT] [--timeout=SECONDS] COMMAND [flags] [args]
//
// Commands: health, load PATH, unload [MODEL_ID], models, generate PROMPT...,
// tokenize TEXT..., metrics. `sluicectl help` lists the flags of each.
// Exit status: 0 on success, 1 when the daemon answered with an error (the
// gRPC status is printed as CODE: message), 2 for bad usage.
#ifndef SLUICE_CLIENTS_SLUICECTL_H_
#define SLUICE_CLIENTS_SLUICECTL_H_

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::ctl {

struct Args {
  std::string command;
  std::map<std::string, std::string> flags;  // --k=v, --k v, --flag ("true")
  std::vector<std::string> positional;
};

// Splits argv (without argv[0]) by sluicectl's rules: flags before and after
// the command, --k=v or --k v, a flag in `boolean_flags` bare (its text
// "true"), "--" ends the flags, and "-5" is a positional. InvalidArgument for
// a flag not in `known` (names without "--") or one that needs a value at
// the end. The texts are parsed by SetFlags (sluicectl_flags.h).
absl::StatusOr<Args> ParseArgs(const std::vector<std::string>& argv,
                               const std::vector<std::string>& known_flags,
                               const std::vector<std::string>& boolean_flags);

// Runs one command, printing to `out` (results, streamed text) and `err`
// (diagnostics). Returns the exit status. Every call starts from the flags'
// defaults (SetFlags); the flags are the process's, so one call at a time.
int Run(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err);

}  // namespace sluice::ctl

#endif  // SLUICE_CLIENTS_SLUICECTL_H_
