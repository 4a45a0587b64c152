// Status propagation macros shared by every layer.
//
// Debian's Abseil 20220623 predates absl/status/status_macros.h, so the
// project carries this one pair. Both macros evaluate their argument once.
//
//   RETURN_IF_ERROR(DoThing());
//   ASSIGN_OR_RETURN(auto file, OpenFile(path));
//   ASSIGN_OR_RETURN(std::unique_ptr<Foo> foo, MakeFoo());
#ifndef SLUICE_BASE_STATUS_MACROS_H_
#define SLUICE_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SLUICE_CONCAT_INNER_(a, b) a##b
#define SLUICE_CONCAT_(a, b) SLUICE_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                         \
  do {                                                \
    ::absl::Status sluice_status_ = (expr);           \
    if (!sluice_status_.ok()) return sluice_status_;  \
  } while (false)

#define SLUICE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  SLUICE_ASSIGN_OR_RETURN_IMPL_(SLUICE_CONCAT_(sluice_statusor_, __LINE__), lhs, expr)

#endif  // SLUICE_BASE_STATUS_MACROS_H_
