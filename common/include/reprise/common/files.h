// Reading a whole input file with one-line errors, and removing a folder tree without std::filesystem::remove_all: the
// torch 2.x wheels' libtorch.so exports its own copy of std::filesystem, which the dynamic linker binds a program's
// calls to when libtorch comes first among its libraries, and that copy's remove_all jumps to address 0 (seen on
// torch 2.11 with CUDA: the test binaries' clean-up at exit, `reprise analyze --measure`'s work folder). POSIX's nftw
// has no such copy.
#pragma once

#include <string>

namespace reprise {

// Removes `path` and everything under it (symbolic links are removed, never followed). Missing paths and entries
// that cannot be removed are passed over: returns false when anything is left.
bool remove_tree(const std::string& path) noexcept;

// The bytes of the file at `path`. Throws UserError "PATH: is a folder, not a file" or "PATH: cannot read (why)"
// (a missing file, no permission, a read error), so a folder or a device given for an input file is one line, not
// the C++ library's stream error.
std::string read_text_file(const std::string& path);

}  // namespace reprise
