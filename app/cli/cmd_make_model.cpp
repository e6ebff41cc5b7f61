// Placeholder until this command is built; registers nothing.
#include "app/cli/commands.h"

namespace lazyscope::cli {

void add_make_model_command(CLI::App&) {}

}  // namespace lazyscope::cli
