// Keras's callbacks for fit (the progress bar is ProgressBar in trainer.h).
//
//   trainer.fit(x, y, {.epochs = 50, .validation_data = {{x_val, y_val}},
//                      .callbacks = {train::EarlyStopping({.monitor = "val_loss", .patience = 3}),
//                                    train::ReduceLROnPlateau({.factor = 0.5, .patience = 2}),
//                                    train::CSVLogger("training.csv"), train::TerminateOnNaN()}});
//
// "mode auto" watches for a rise in metrics named like accuracy or auc, a fall otherwise.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "nimbus/train/trainer.h"

namespace nimbus::train {

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0;
  int patience = 0;
  std::string mode = "auto";  // auto, min, max
  bool restore_best_weights = false;
};
// Stops fit when `monitor` has not improved by more than min_delta for `patience` epochs;
// optionally restores the weights of the best epoch. A missing monitor is an InvalidArgument
// naming the logged metrics.
std::shared_ptr<Callback> EarlyStopping(const EarlyStoppingOptions& options = {});

struct ReduceLROnPlateauOptions {
  std::string monitor = "val_loss";
  double factor = 0.1;
  int patience = 10;
  std::string mode = "auto";
  double min_delta = 1e-4;
  int cooldown = 0;
  double min_lr = 0;
};
// Multiplies the optimizer's (constant) learning rate by `factor` after `patience` epochs without improvement.
std::shared_ptr<Callback> ReduceLROnPlateau(const ReduceLROnPlateauOptions& options = {});

// Sets the learning rate at the start of each epoch: schedule(epoch from 0, current rate).
std::shared_ptr<Callback> LearningRateScheduler(std::function<double(int, double)> schedule);

// One CSV row per epoch: epoch (from 0, as Keras writes it), then the logs by name, sorted.
std::shared_ptr<Callback> CSVLogger(const std::string& path, bool append = false);

// Stops fit at the first batch whose loss is NaN or infinite.
std::shared_ptr<Callback> TerminateOnNaN();

struct ModelCheckpointOptions {
  // Where to write; fmt fields {epoch} (epochs done), {step} (global step) and any metric of the
  // logs ({val_loss:.4f}) are filled in, as Keras fills its filepath.
  std::string filepath;
  std::string monitor = "val_loss";
  // Write only when `monitor` improves on the best value so far.
  bool save_best_only = false;
  std::string mode = "auto";  // auto, min, max
  // 0: at the end of each epoch (Keras's save_freq="epoch"); N > 0: every N steps.
  int64_t save_freq = 0;
  // Keep only the newest N files the filepath pattern names (older ones are deleted once a newer
  // one is complete, those from an earlier process included); 0 keeps all.
  int max_to_keep = 0;
};
// Keras's ModelCheckpoint, writing full training checkpoints (Trainer::save_checkpoint).
std::shared_ptr<Callback> ModelCheckpoint(const ModelCheckpointOptions& options);

}  // namespace nimbus::train
