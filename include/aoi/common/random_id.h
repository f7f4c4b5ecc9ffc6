// Ids for what a reply names once and a client quotes back: completions ("chatcmpl-…"), messages ("msg_…") and
// tool calls ("call_…"). Unpredictable enough not to collide, not secrets.
#pragma once

#include <string>
#include <string_view>

namespace aoi {

// prefix followed by 24 random hex digits. Thread-safe (one generator per thread).
std::string random_id(std::string_view prefix);

}  // namespace aoi
