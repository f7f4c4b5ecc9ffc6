// Sets up llama.cpp's backends once per process (its log into ours, the dynamically loaded backends), before
// anything asks for a device or loads a model.
#pragma once

namespace aoi::engine {

void init_backend();

}  // namespace aoi::engine
