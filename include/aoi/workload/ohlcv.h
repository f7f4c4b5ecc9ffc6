// Synthetic OHLCV bars for one instrument: seeded market phases (uptrends with higher highs and higher lows,
// corrections with pullbacks, sideways consolidation, downtrends) with volume that follows them. The same
// seed always gives the same bars.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aoi::workload {

enum class Phase { kUptrend, kCorrection, kConsolidation, kDowntrend };
const char* phase_name(Phase phase);

struct Bar {
  std::int64_t minute = 0;  // minutes since 2024-01-01 00:00 UTC
  double open = 0, high = 0, low = 0, close = 0;
  std::int64_t volume = 0;
  Phase phase = Phase::kConsolidation;
};

struct OhlcvParams {
  std::uint64_t seed = 1;
  double start_price = 100.0;
  int bar_minutes = 60;
  std::int64_t base_volume = 12000;
};

class OhlcvGenerator {
 public:
  explicit OhlcvGenerator(OhlcvParams params);
  Bar next();
  std::vector<Bar> take(int n);

 private:
  double uniform();  // [0, 1)
  double normal();
  void start_phase();

  OhlcvParams params_;
  std::uint64_t state_;
  std::int64_t minute_ = 9 * 60;  // first bar at 09:00
  double price_;
  Phase phase_ = Phase::kConsolidation;
  int phase_left_ = 0;
  double drift_ = 0;       // mean return per bar
  double volatility_ = 0;  // return standard deviation per bar
  double volume_level_ = 1;
};

// "2024-01-02 10:00,O=101.25,H=102.10,L=100.80,C=101.90,V=12345"
std::string format_bar(const Bar& bar);

}  // namespace aoi::workload
