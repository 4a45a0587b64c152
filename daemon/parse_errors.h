// Turns a request that does not parse into INVALID_ARGUMENT with a message.
//
// Why: gRPC's synchronous server answers a request it cannot deserialize
// (malformed protobuf, or a proto3 string that is not valid UTF-8) with
// INTERNAL and an empty message, which blames the daemon for the client's
// bytes. This server interceptor notices the failed deserialization and
// rewrites the status the call ends with (docs/API.md promises
// INVALID_ARGUMENT).
//
// Thread-safety: one interceptor per call, as gRPC creates them.
#ifndef SLUICE_DAEMON_PARSE_ERRORS_H_
#define SLUICE_DAEMON_PARSE_ERRORS_H_

#include <memory>

#include "grpcpp/support/server_interceptor.h"

namespace sluice::daemon {

// Register with ServerBuilder::experimental().SetInterceptorCreators().
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewParseErrorInterceptorFactory();

}  // namespace sluice::daemon

#endif  // SLUICE_DAEMON_PARSE_ERRORS_H_
