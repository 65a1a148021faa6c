// Checks across ranks before a bundle is written: every process group's members issue the same collective
// sequence (types, dtypes, sizes where the collective needs them equal), all_to_allv splits agree pairwise, and
// every role sees the same group membership. A failure throws UserError naming the ranks, the group and the
// collective.
#pragma once

#include "workspace.h"

namespace reprise::gen {

void check_ranks(const Workspace& ws);

}  // namespace reprise::gen
