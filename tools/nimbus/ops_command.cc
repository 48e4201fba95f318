// nimbus ops: every op as a Markdown table (docs/ops.md is its output).
#include <iostream>

#include "commands.h"
#include "nimbus/ops/registry.h"

namespace nimbus::cli {

Command add_ops_command(CLI::App& app) {
  app.add_subcommand("ops", "print every op as a Markdown table (docs/ops.md)");
  return [] {
    std::cout << op_list_markdown();
    return 0;
  };
}

}  // namespace nimbus::cli
