// MXDIFF_RETURN_IF_ERROR(expression): returns the absl::Status `expression` gives when it is not
// OK. One definition for every library and tool of the project.
#pragma once

#include "absl/status/status.h"

#define MXDIFF_RETURN_IF_ERROR(expression)                                  \
  do {                                                                      \
    if (absl::Status _status = (expression); !_status.ok()) return _status; \
  } while (false)
