// The timeout error every Collectives implementation throws, worded once.
// Internal to the library.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "nimbus/distribute/collectives.h"

namespace nimbus::distribute {

// "all_reduce timed out after 2s (runtime.strategy.collective_timeout) on rank 0 of 2 at step 12:
//  rank 1 did not arrive", with a hint. `missing`: the ranks that never called the collective; when
// every rank called it but it never completed, `stuck` names the peers one of which stopped in it.
CollectiveTimeout collective_timeout(const std::string& collective, int rank, int size, const std::vector<int>& missing,
                                     std::chrono::milliseconds timeout, const std::string& context,
                                     const std::vector<int>& stuck = {});

}  // namespace nimbus::distribute
