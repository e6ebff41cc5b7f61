// Fuzzes lazyscope-cli's command lines: every command and option, value conversions and the
// range checks that run while parsing. The input is the argument list, one argument per line.
// Commands are parsed, not run: the top-level parse-complete callback runs after every option is
// converted and validated and before any command's callback, and stops there. (Clearing the
// commands' callbacks instead would free the option storage they own.)
// The command tree is built once: CLI::App::parse clears every option's results and every
// subcommand's parse state before it parses again, and the checks see only this input's strings.
// (Building all commands for every input took most of each execution.)
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "base/error.h"

namespace {

struct ParsedOnly {};

CLI::App& command_tree() {
  static CLI::App app{"lazyscope-cli"};
  static const bool built = [] {
    app.require_subcommand(1);
    lazyscope::cli::add_all_commands(app);  // the same commands as lazyscope-cli
    app.parse_complete_callback([] { throw ParsedOnly{}; });
    return true;
  }();
  (void)built;
  return app;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"lazyscope-cli"};
  std::string current;
  for (std::size_t i = 0; i < size && args.size() < 24; ++i) {
    if (data[i] == '\n') {
      args.push_back(current);
      current.clear();
    } else {
      current += char(data[i]);
    }
  }
  if (!current.empty()) args.push_back(current);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  try {
    command_tree().parse(int(argv.size()), argv.data());
  } catch (const ParsedOnly&) {
  } catch (const CLI::Error&) {
  } catch (const lazyscope::Error&) {
  }
  return 0;
}
