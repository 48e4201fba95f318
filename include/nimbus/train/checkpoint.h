// Training checkpoints on disk: finding the newest checkpoint that is intact (what
// `nimbus train --resume RUN_DIR` continues from). ModelCheckpoint (callbacks.h) writes them.
//
//   trainer.fit(x, y, {.epochs = 10, .callbacks = {train::ModelCheckpoint({
//       .filepath = "ckpts/ckpt-{step:08d}.safetensors", .save_freq = 500, .max_to_keep = 3})}});
//
//   // later, in a new process, with the same model and compile settings:
//   train::CheckpointInfo last = train::restore_latest_checkpoint(trainer, "ckpts", std::cerr);
//   trainer.fit(x, y, train::Trainer::resumed({.epochs = 10}, last.position));
//
// A checkpoint (Trainer::save_checkpoint) is one safetensors file written atomically (temporary
// file, fsync, rename, fsync of the folder), so a process killed at any instant leaves either the
// old file or the new one. Its metadata holds a CRC-32C of its tensors and metadata: a file
// corrupted later (disk, copy) fails the check and is refused with a DataError naming it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "nimbus/train/trainer.h"

namespace nimbus::train {

struct CheckpointInfo {
  std::string path;
  TrainingPosition position;
};

// The checkpoints in `folder` (*.safetensors files whose metadata says nimbus-checkpoint), newest
// (highest global step, then latest written) first. Files whose header cannot be read are reported
// to `warnings` and left out. An absent folder has none.
std::vector<CheckpointInfo> list_checkpoints(const std::string& folder, std::ostream& warnings);

// Checks a checkpoint's checksum and returns its position; DataError naming the file and what is
// wrong otherwise.
TrainingPosition verify_checkpoint(const std::string& path);

// Restores the newest intact checkpoint of `folder` into `trainer`; a checkpoint that fails its
// checksum (or does not fit the model) is reported to `warnings`, naming the file and the reason,
// and the next older one is tried. NotFound when none can be restored.
CheckpointInfo restore_latest_checkpoint(Trainer& trainer, const std::string& folder, std::ostream& warnings);

}  // namespace nimbus::train
