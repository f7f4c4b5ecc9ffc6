#pragma once

#include <string>
#include <vector>

#include "serve_args.h"

namespace aoi::cli {

// Runs the server until SIGINT or SIGTERM; `warnings` (llama-server flags without effect) are logged first.
int run_serve(const ServeOptions& o, const std::vector<std::string>& warnings);

}  // namespace aoi::cli
