#include "nimbus/train/preemption.h"

#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <iostream>

namespace nimbus::train {

namespace {

volatile std::sig_atomic_t pending_signal = 0;
// The signal the last fit stopped for.
int stopped_for_signal = 0;

extern "C" void record_signal(int signal) { pending_signal = signal; }

class CheckpointOnSignalCallback : public Callback {
 public:
  explicit CheckpointOnSignalCallback(std::string filepath) : filepath_(std::move(filepath)) {}
  ~CheckpointOnSignalCallback() override { restore_handlers(); }

  void on_train_begin(Trainer&) override {
    pending_signal = 0;
    stopped_for_signal = 0;
    struct sigaction action {};
    action.sa_handler = record_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;  // a second signal does what it would have done
    sigaction(SIGTERM, &action, &previous_term_);
    sigaction(SIGINT, &action, &previous_int_);
    installed_ = true;
  }
  void on_train_batch_end(Trainer& trainer, int64_t, const Logs&) override {
    if (pending_signal == 0) return;
    checkpoint(trainer);
    trainer.interrupt_training = true;
  }
  void on_epoch_end(Trainer& trainer, int, const Logs&) override {
    if (pending_signal == 0) return;
    checkpoint(trainer);
    trainer.stop_training = true;
  }
  void on_train_end(Trainer&) override { restore_handlers(); }

 private:
  void checkpoint(Trainer& trainer) {
    const TrainingPosition& position = trainer.position();
    const std::string path = fmt::format(fmt::runtime(filepath_), fmt::arg("step", position.global_step),
                                         fmt::arg("epoch", position.epochs_done + (position.steps_in_epoch > 0)));
    const std::filesystem::path folder = std::filesystem::path(path).parent_path();
    if (!folder.empty()) std::filesystem::create_directories(folder);
    trainer.save_checkpoint(path);
    std::cerr << fmt::format("nimbus: {} received: checkpoint {} written at step {} (epoch {}, step {} of it)\n",
                             pending_signal == SIGTERM ? "SIGTERM" : "SIGINT", path, position.global_step,
                             position.epochs_done + 1, position.steps_in_epoch);
    stopped_for_signal = pending_signal;
  }
  void restore_handlers() {
    if (!installed_) return;
    sigaction(SIGTERM, &previous_term_, nullptr);
    sigaction(SIGINT, &previous_int_, nullptr);
    installed_ = false;
  }

  std::string filepath_;
  struct sigaction previous_term_ {};
  struct sigaction previous_int_ {};
  bool installed_ = false;
};

}  // namespace

std::shared_ptr<Callback> CheckpointOnSignal(const std::string& filepath) {
  return std::make_shared<CheckpointOnSignalCallback>(filepath);
}

int signal_received() { return stopped_for_signal; }

}  // namespace nimbus::train
