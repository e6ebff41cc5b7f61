// lazyscope-cli: the command-line front end. Errors below surface here as exceptions.
#include <cstdio>
#include <exception>

#include "app/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"lazyscope-cli: LazyAttention engine, corpora and cache experiments from a terminal"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every command");
  lazyscope::cli::add_make_model_command(app);
  lazyscope::cli::add_models_command(app);
  lazyscope::cli::add_tokenize_commands(app);
  lazyscope::cli::add_generate_command(app);
  lazyscope::cli::add_cache_demo_command(app);
  lazyscope::cli::add_corpus_command(app);
  lazyscope::cli::add_session_command(app);
  lazyscope::cli::add_eval_command(app);
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
