// The `mxdiff` subcommands. Each gets its positional arguments (main.cc has already set the
// flags its kCommands entry lists) and returns the exit status: 0 success, 1 a check failed, 2 bad input.
#pragma once

#include <span>
#include <string_view>

#include "reference/exit_status.h"
#include "tools/cli/command_line.h"

namespace mxdiff::cli {

// The contract's numbers, from their one home (reference/exit_status.h).
using ::mxdiff::kExitBadInput;
using ::mxdiff::kExitCheckFailed;
using ::mxdiff::kExitInconclusive;
using ::mxdiff::kExitOk;

int VectorsCommand(std::span<const std::string_view> args);         // vectors_command.cc
int TransformTableCommand(std::span<const std::string_view> args);  // transform_table_command.cc
int SelfCheckCommand(std::span<const std::string_view> args);       // self_check_command.cc
int CalibrateCommand(std::span<const std::string_view> args);       // calibrate_command.cc
int BenchCommand(std::span<const std::string_view> args);           // bench_command.cc
int AuditCommand(std::span<const std::string_view> args);           // audit_command.cc
// 0 MERGE, 1 DO-NOT-MERGE, 2 bad input, 3 INCONCLUSIVE (tools/gate/README.md).
int GateCommand(std::span<const std::string_view> args);            // gate_command.cc
// `mxdiff gate --help`: its text for the flags bench and calibrate define, and its exit statuses.
std::span<const OwnFlagHelp> GateOwnFlagHelp();
extern const std::string_view kGateExitStatuses;

}  // namespace mxdiff::cli
