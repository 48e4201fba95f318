// Packed token files, memory-mapped: the output of llm.c's and nanoGPT's
// data preparation scripts, read in place without loading them.
//   llm.c    a header of 256 little-endian int32 (header[0] = 20240520, the
//            magic; header[1] = 1, the version; header[2] = the token count),
//            then the tokens as uint16.
//   nanoGPT  the tokens as uint16, nothing else (train.bin, val.bin).
// kAuto takes llm.c when the file starts with the magic, else nanoGPT. Several
// files are one sequence, in the order given.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nimbus/data/token_sequence.h"

namespace nimbus::data {

enum class PackedTokenFormat { kAuto, kLlmc, kNanoGpt };

inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;
inline constexpr int64_t kLlmcHeaderInts = 256;

// "auto", "llmc", "nanogpt"; another name is an InvalidArgument listing these.
PackedTokenFormat packed_token_format(const std::string& name);

// The files' tokens. A file whose size does not match its header (llm.c), or is not a whole number of
// uint16 (nanoGPT), or that claims llm.c with another magic or version, is a DataError naming it.
std::shared_ptr<const TokenSequence> map_packed_tokens(const std::vector<std::string>& paths,
                                                       PackedTokenFormat format = PackedTokenFormat::kAuto);

}  // namespace nimbus::data
