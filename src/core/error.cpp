#include "core/error.h"

#include <cstdio>
#include <cstdlib>
#include <typeinfo>

#include <cxxabi.h>

namespace vidax {

std::string describe_internal_error(const std::string& command, const std::exception& e) {
  std::string type;
  if (dynamic_cast<const InternalError*>(&e) == nullptr) {
    int status = 0;
    char* name = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
    type = status == 0 && name != nullptr ? name : typeid(e).name();
    std::free(name);
  }
  std::string what = e.what();
  for (char& ch : what)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return "internal error" + (command.empty() ? std::string() : " in `" + command + "`") +
         (type.empty() ? std::string() : " (" + type + ")") + ": " + what +
         " (a bug in vidax, not in the input: please report it with the command line)";
}

void throw_internal_error(const char* file, int line, const std::string& message) {
  throw InternalError(str_cat(file, ":", line, ": ", message));
}

void check_failed(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "vidax internal error at %s:%d: CHECK(%s) failed%s%s\n", file, line,
               condition, message.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace vidax
