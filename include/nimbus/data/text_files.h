// Text files read whole, plain or gzip (detected by its magic bytes), as
// language-model corpora are: the files one after another, as one byte stream.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nimbus::data {

// The bytes of `path`, decompressed when it is gzip; a missing file is NotFound, corrupt gzip a DataError
// naming the file.
std::string read_text_file(const std::string& path);
// The files' bytes concatenated in the order given.
std::string read_text_files(const std::vector<std::string>& paths);

}  // namespace nimbus::data
