// Errors. Kept apart on purpose:
//  - InputError: something the user handed us is wrong (a file, a tensor, a flag, a size). The
//    message names the thing and what was expected; the CLI prints it on one line and exits 1.
//  - InternalError (VIDAX_INTERNAL_ERROR): vidax's own code called a kernel or layer with
//    arguments its caller validates and should never produce. A bug in vidax, reported as
//    "internal error at file:line" with a non-zero exit (tests can catch it).
//  - VIDAX_CHECK: an internal invariant. Failing it is a bug in vidax; it aborts with file:line.
// Never abort on input. Thread-safe (no shared state).
#pragma once

#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace vidax {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

// An InputError that every process of a multi-process job raises alike (a bad --mesh, ranks
// started differently): the CLI prints it once, from rank 0, instead of once per rank.
class JobInputError : public InputError {
 public:
  using InputError::InputError;
};

// A run stopped because its caller asked it to (a cancelled server job, Ctrl-C in Python): not
// an error of the input nor of vidax.
class Cancelled : public std::runtime_error {
 public:
  explicit Cancelled(const std::string& message) : std::runtime_error(message) {}
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

// Concatenates anything streamable: str_cat("tensor ", name, " has ", n, " dims").
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  ((os << std::forward<Args>(args)), ...);
  return os.str();
}

template <typename... Args>
[[noreturn]] void throw_input_error(Args&&... args) {
  throw InputError(str_cat(std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void throw_job_input_error(Args&&... args) {
  throw JobInputError(str_cat(std::forward<Args>(args)...));
}

// The one line the CLI prints for an exception that is not an InputError:
// "internal error in `COMMAND` (TYPE): WHAT (a bug in vidax, ...)"; TYPE is the exception's
// demangled type, left out for InternalError (whose message starts with file:line). Newlines in
// WHAT become spaces.
std::string describe_internal_error(const std::string& command, const std::exception& e);

// Throws InternalError("file:line: message").
[[noreturn]] void throw_internal_error(const char* file, int line, const std::string& message);

[[noreturn]] void check_failed(const char* file, int line, const char* condition,
                               const std::string& message);

}  // namespace vidax

#define VIDAX_INTERNAL_ERROR(...) \
  ::vidax::throw_internal_error(__FILE__, __LINE__, ::vidax::str_cat(__VA_ARGS__))

#define VIDAX_CHECK(cond, ...)                                                         \
  do {                                                                                 \
    if (!(cond)) [[unlikely]] {                                                        \
      ::vidax::check_failed(__FILE__, __LINE__, #cond, ::vidax::str_cat(__VA_ARGS__)); \
    }                                                                                  \
  } while (0)
