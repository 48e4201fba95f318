// nimbus info: the devices and libraries this build can use.
#include <iostream>

#include "commands.h"
#include "nimbus/nimbus.h"

namespace nimbus::cli {

Command add_info_command(CLI::App& app) {
  app.add_subcommand("info", "show the devices and libraries this build can use");
  return [] {
    for (DeviceType type : {DeviceType::kCPU, DeviceType::kCUDA}) {
      if (!has_backend(type)) {
        try {
          backend(type);
        } catch (const Unavailable& missing) {  // no backend in this build, or no driver or device
          std::cout << type.name() << ": not available: " << missing.message() << "\n";
        }
        continue;
      }
      Backend& device_backend = backend(type);
      for (int i = 0; i < device_backend.device_count(); ++i) std::cout << device_backend.describe(i) << "\n";
    }
    return 0;
  };
}

}  // namespace nimbus::cli
