// The one error type for what a user can fix: a malformed trace or config, a file that cannot be read or written,
// an option value out of range. The message names the place (file and byte offset, node id, YAML mark) and, inside
// libraries, never a command-line flag. The commands print it as one line and exit with status 2.
#pragma once

#include <stdexcept>

namespace reprise {

class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace reprise
