// lazyscope-cli: the command-line front end. Errors below surface here as exceptions.
#include <cstdio>
#include <exception>
#include <functional>
#include <string>

#include "app/cli/commands.h"
#include "base/data_dir.h"

namespace {

// --version: the version, and where the data folder was found (or why not).
std::string version_text() {
  std::string text = "lazyscope-cli " LAZYSCOPE_VERSION "\ndata folder: ";
  try {
    text += lazyscope::data_dir().string();
  } catch (const std::exception& e) {
    text += e.what();
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "lazyscope-cli: LazyAttention engine, corpora and cache experiments from a terminal"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every command");
  app.set_version_flag("--version", std::function<std::string()>(version_text),
                       "Show the version and the data folder in use");
  lazyscope::cli::add_all_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
