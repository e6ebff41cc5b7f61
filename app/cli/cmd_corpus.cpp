// Placeholder until this command is built; registers nothing.
#include "app/cli/commands.h"

namespace lazyscope::cli {

void add_corpus_command(CLI::App&) {}

}  // namespace lazyscope::cli
