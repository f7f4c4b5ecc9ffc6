#include "aoi/workload/ohlcv.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace aoi::workload {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kUptrend: return "uptrend";
    case Phase::kCorrection: return "correction";
    case Phase::kConsolidation: return "consolidation";
    case Phase::kDowntrend: return "downtrend";
  }
  return "consolidation";
}

OhlcvGenerator::OhlcvGenerator(OhlcvParams params)
    : params_(params), state_(params.seed * 0x9E3779B97F4A7C15ull + 0xD1B54A32D192ED03ull), price_(params.start_price) {}

double OhlcvGenerator::uniform() {
  // splitmix64
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

double OhlcvGenerator::normal() {
  const double u1 = std::max(uniform(), 1e-12);
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

void OhlcvGenerator::start_phase() {
  // Trends run longer than the pauses between them; an uptrend is usually followed by a correction.
  const double r = uniform();
  const Phase previous = phase_;
  if (previous == Phase::kUptrend) {
    phase_ = r < 0.6 ? Phase::kCorrection : Phase::kConsolidation;
  } else if (previous == Phase::kDowntrend) {
    phase_ = r < 0.6 ? Phase::kConsolidation : Phase::kUptrend;
  } else {
    phase_ = r < 0.5 ? Phase::kUptrend : (r < 0.75 ? Phase::kDowntrend : Phase::kConsolidation);
  }
  switch (phase_) {
    case Phase::kUptrend:
      phase_left_ = 20 + static_cast<int>(uniform() * 30);
      drift_ = 0.0025 + uniform() * 0.002;
      volatility_ = 0.004;
      volume_level_ = 1.3;
      break;
    case Phase::kCorrection:
      phase_left_ = 6 + static_cast<int>(uniform() * 10);
      drift_ = -(0.003 + uniform() * 0.002);
      volatility_ = 0.005;
      volume_level_ = 0.9;
      break;
    case Phase::kConsolidation:
      phase_left_ = 12 + static_cast<int>(uniform() * 20);
      drift_ = 0.0;
      volatility_ = 0.0015;
      volume_level_ = 0.6;
      break;
    case Phase::kDowntrend:
      phase_left_ = 15 + static_cast<int>(uniform() * 25);
      drift_ = -(0.002 + uniform() * 0.002);
      volatility_ = 0.005;
      volume_level_ = 1.2;
      break;
  }
}

Bar OhlcvGenerator::next() {
  if (phase_left_ <= 0) start_phase();
  --phase_left_;
  Bar bar;
  bar.minute = minute_;
  bar.phase = phase_;
  minute_ += params_.bar_minutes;
  bar.open = price_;
  const double ret = drift_ + volatility_ * normal();
  bar.close = std::max(0.01, bar.open * (1.0 + ret));
  const double wick = volatility_ * 0.6;
  bar.high = std::max(bar.open, bar.close) * (1.0 + std::fabs(normal()) * wick);
  bar.low = std::min(bar.open, bar.close) * (1.0 - std::fabs(normal()) * wick);
  // Volume follows the phase, rises with the size of the move, and spikes now and then.
  const double move = std::fabs(ret) / std::max(volatility_, 1e-6);
  double volume = static_cast<double>(params_.base_volume) * volume_level_ * (0.7 + 0.3 * move) *
                  std::exp(0.25 * normal());
  if (uniform() < 0.03) volume *= 2.5 + uniform() * 2.0;
  bar.volume = std::max<std::int64_t>(100, std::llround(volume));
  price_ = bar.close;
  return bar;
}

std::vector<Bar> OhlcvGenerator::take(int n) {
  std::vector<Bar> bars;
  bars.reserve(static_cast<size_t>(std::max(n, 0)));
  for (int i = 0; i < n; ++i) bars.push_back(next());
  return bars;
}

std::string format_bar(const Bar& bar) {
  // Civil date from days since 2024-01-01 (a leap year; good for the years a benchmark spans).
  static constexpr int kDaysIn[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  std::int64_t day = bar.minute / (24 * 60);
  const int minute_of_day = static_cast<int>(bar.minute % (24 * 60));
  int year = 2024;
  for (;;) {
    const int days_in_year = (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) ? 366 : 365;
    if (day < days_in_year) break;
    day -= days_in_year;
    ++year;
  }
  const bool leap = (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0));
  int month = 0;
  for (; month < 12; ++month) {
    const int n = kDaysIn[month] - (month == 1 && !leap ? 1 : 0);
    if (day < n) break;
    day -= n;
  }
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02d %02d:%02d,O=%.2f,H=%.2f,L=%.2f,C=%.2f,V=%lld", year, month + 1,
                static_cast<int>(day) + 1, minute_of_day / 60, minute_of_day % 60, bar.open, bar.high, bar.low,
                bar.close, static_cast<long long>(bar.volume));
  return buf;
}

}  // namespace aoi::workload
