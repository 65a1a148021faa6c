// The bundle commands of reprise-torch (they dry-run roles through LibTorch).
#pragma once

namespace reprise::cli {

int cmd_generate(int argc, char** argv);
int cmd_verify(int argc, char** argv);

}  // namespace reprise::cli
