// Whole text files through InputStream (zlib for gzip).
#include "nimbus/data/text_files.h"

#include "src/data/file_stream.h"

namespace nimbus::data {

std::string read_text_file(const std::string& path) {
  detail::InputStream in(path, detail::sniff_compression(path));
  std::string text;
  char chunk[1 << 16];
  while (const size_t got = in.read(chunk, sizeof(chunk))) text.append(chunk, got);
  return text;
}

std::string read_text_files(const std::vector<std::string>& paths) {
  std::string text;
  for (const std::string& path : paths) text += read_text_file(path);
  return text;
}

}  // namespace nimbus::data
