#pragma once
// Each lazyscope-cli command lives in its own cmd_*.cpp and registers itself here.
#include <CLI/CLI.hpp>

namespace lazyscope::cli {

void add_make_model_command(CLI::App& app);   // cmd_make_model.cpp
void add_models_command(CLI::App& app);       // cmd_models.cpp
void add_tokenize_commands(CLI::App& app);    // cmd_tokenize.cpp (tokenize, detokenize)
void add_generate_command(CLI::App& app);     // cmd_generate.cpp
void add_cache_demo_command(CLI::App& app);   // cmd_cache_demo.cpp
void add_corpus_command(CLI::App& app);       // cmd_corpus.cpp
void add_session_command(CLI::App& app);      // cmd_session.cpp
void add_eval_command(CLI::App& app);         // cmd_eval.cpp
void add_workload_command(CLI::App& app);     // cmd_workload.cpp
void add_overhead_command(CLI::App& app);     // cmd_overhead.cpp

// Every command above, in --help order (lazyscope-cli and fuzz/fuzz_cli.cpp both use it).
void add_all_commands(CLI::App& app);         // commands.cpp

}  // namespace lazyscope::cli
