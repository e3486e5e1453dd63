#pragma once
// The harness's errors. Both exit 2 (loom's "bad input"): the command line or the machine
// cannot give a measurement, and the message says what to do about it.
#include <string>

#include "common/error.hpp"

namespace loom::harness {

/// A bad command line or shapes file.
class UsageError : public Error {
 public:
  explicit UsageError(std::string message) : Error(std::move(message), ExitCode::BAD_INPUT) {}
};

/// The machine cannot run a measurement: no GPU, too little memory, NCCL cannot start.
class DeviceError : public Error {
 public:
  explicit DeviceError(std::string message) : Error(std::move(message), ExitCode::BAD_INPUT) {}
};

}  // namespace loom::harness
