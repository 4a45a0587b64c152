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

// Splits argv (without argv[0]); flags are accepted before and after the
// command. InvalidArgument for a flag not in `known` (names without "--").
absl::StatusOr<Args> ParseArgs(const std::vector<std::string>& argv,
                               const std::vector<std::string>& known_flags,
                               const std::vector<std::string>& boolean_flags);

// Runs one command, printing to `out` (results, streamed text) and `err`
// (diagnostics). Returns the exit status.
int Run(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err);

}  // namespace sluice::ctl

#endif  // SLUICE_CLIENTS_SLUICECTL_H_
