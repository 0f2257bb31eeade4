// Errors inside the engine are splash::Error {code, message}; the addon turns them into JS Errors
// carrying `code`. No exception crosses the N-API boundary.
#pragma once
#include <stdexcept>
#include <string>

namespace splash {

struct Error : std::runtime_error {
  std::string code;
  Error(std::string c, const std::string& msg) : std::runtime_error(msg), code(std::move(c)) {}
};

}  // namespace splash
