// Stopping cleanly when the machine is taken away: Kubernetes (and every cloud's spot or
// preemptible instances) announces it with SIGTERM and a grace period before SIGKILL.
//
//   auto preemption = train::CheckpointOnSignal("run/checkpoints/ckpt-{step:08d}.safetensors");
//   trainer.fit(x, y, {.callbacks = {preemption}});
//   if (train::signal_received() != 0) ...   // fit stopped early: resume from the checkpoint
//
// While fit runs, SIGTERM and SIGINT only set a flag (a second SIGINT kills, as usual). After the
// current step the callback writes a checkpoint (Trainer::save_checkpoint, mid-epoch position
// included) and interrupts fit, which returns without finishing the epoch; after an epoch's end
// (a signal during validation) the checkpoint is that epoch's and fit stops.
#pragma once

#include <memory>
#include <string>

#include "nimbus/train/trainer.h"

namespace nimbus::train {

// `filepath` as ModelCheckpoint's: {step} (global step) and {epoch} are filled in.
std::shared_ptr<Callback> CheckpointOnSignal(const std::string& filepath);

// The signal the last fit with CheckpointOnSignal stopped for (SIGTERM, SIGINT), or 0.
int signal_received();

}  // namespace nimbus::train
