// Runs fork() on one thread that lives as long as the process.
//
// Why: PR_SET_PDEATHSIG fires when the *thread* that forked the child exits,
// not the parent process. A worker forked on a short-lived thread (a gRPC
// handler serving LoadModel) was killed as soon as that thread went away.
// Forking on a thread that never exits makes the parent-death signal mean
// what it should: the worker dies exactly when sluiced does.
//
// Thread-safety: Fork() may be called from any thread; calls run one at a
// time on the forking thread.
#ifndef SLUICE_DAEMON_FORKER_H_
#define SLUICE_DAEMON_FORKER_H_

#include <sys/types.h>

#include "absl/functional/function_ref.h"

namespace sluice::daemon {

// Forks on the process-wide forking thread (started on first use, never
// stopped). In the child, `child` runs and must not return (it execs or
// _exits); it must only do async-signal-safe work. Returns the child's pid,
// or -errno when fork failed.
pid_t ForkOnLongLivedThread(absl::FunctionRef<void()> child);

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_FORKER_H_
