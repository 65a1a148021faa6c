// Subcommands kept in files of their own (NAME_command.cc), each a few lines over a library call.
#pragma once

namespace reprise::cli {

int cmd_predict(int argc, char** argv);   // predict_command.cc
int cmd_validate(int argc, char** argv);  // validate_command.cc
int cmd_analyze(int argc, char** argv);   // analyze_command.cc

}  // namespace reprise::cli
