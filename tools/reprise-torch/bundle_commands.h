// The commands of reprise-torch besides replay and capture: the bundle commands (they dry-run roles through
// LibTorch) and calibrate (it replays its microbenchmarks).
#pragma once

#include <string>

namespace reprise::cli {

int cmd_generate(int argc, char** argv);
int cmd_verify(int argc, char** argv);
int cmd_calibrate(int argc, char** argv);        // calibrate_command.cc
int cmd_analyze_train(int argc, char** argv);    // analyze_train_command.cc: reprise analyze --train
int cmd_analyze_measure(int argc, char** argv);  // analyze_measure_command.cc: reprise analyze --measure

}  // namespace reprise::cli
