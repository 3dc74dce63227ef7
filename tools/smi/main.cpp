// strata-smi: every device this process can use, like nvidia-smi, with Strata's own allocator figures.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>

#include "tools/smi/report.h"
#include "tools/tool_output.h"

int main(int argc, char** argv) {
  CLI::App app{
      "strata-smi: the devices Strata can use (the CPU and each CUDA GPU), their memory, and this process's "
      "allocator figures. When CUDA is unavailable, says why."};
  bool as_json = false;
  app.add_flag("--json", as_json, "print the report as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "strata-smi: %s\nRun 'strata-smi --help' for the options.\n", e.what());
    return 2;
  }
  try {
    const strata::smi::Report report = strata::smi::collect_report();
    if (as_json) {
      std::cout << strata::smi::to_json(report).dump(2) << "\n";
    } else {
      std::cout << strata::smi::format_table(report);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-smi: %s\n", e.what());
    return 1;
  }
  return strata::tools::stdout_written("strata-smi") ? 0 : 1;
}
