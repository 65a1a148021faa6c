// SHA-256 (FIPS 180-4) of files, for the bundle's provenance and integrity checks.
#pragma once

#include <string>

namespace reprise::gen {

// Lowercase hex digest of the file's bytes; throws UserError naming the file when it cannot be read.
std::string sha256_file(const std::string& path);
// Lowercase hex digest of `data`.
std::string sha256_text(const std::string& data);

}  // namespace reprise::gen
