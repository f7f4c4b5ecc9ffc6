// Training and evaluation data for the analyst model (scripts/train-analyst.sh), from the benchmark's own
// generator and questions, so that what the model learns is graded by the same rules the benchmark uses.
//
// One JSON object per line, one per stream window:
//   {"system": "...", "records": ["2024-01-02 10:00,O=...", ...],
//    "questions": [{"after": K, "type": "trend", "question": "...", "answer": "UP"}, ...]}
// A question with "after": K is about records[0..K] (the first K+1 records), as a session holding exactly those
// records is asked it. Stream i starts at a seeded random bar of the stream seeded seed + i, so windows start
// anywhere in a market phase.
//
// aoi-analyst-tokens turns these lines into the token ids a session decodes, for the model being trained.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/workload/ohlcv.h"
#include "aoi/workload/questions.h"

namespace {

struct Options {
  std::uint64_t seed = 1;
  int streams = 100;
  int min_bars = 10;
  int max_bars = 50;
  int first_after = 5;  // the first question comes after this many records
  int every = 4;        // then one set of questions every this many records
};

// splitmix64: the windows' lengths and starts, independent of the bars' own generator.
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int below(int n) { return n <= 0 ? 0 : static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
};

// The strings written here are ASCII without control characters but for the ones escaped.
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

int usage(const char* why) {
  std::fprintf(stderr,
               "aoi-analyst-data: %s\n"
               "usage: aoi-analyst-data [--seed N] [--streams N] [--min-bars N] [--max-bars N] [--first-after N] "
               "[--every N]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) return usage("every option takes a value");
    const long long value = std::atoll(argv[++i]);
    if (value < 0) return usage("values are not negative");
    if (arg == "--seed") {
      o.seed = static_cast<std::uint64_t>(value);
    } else if (arg == "--streams") {
      o.streams = static_cast<int>(value);
    } else if (arg == "--min-bars") {
      o.min_bars = static_cast<int>(value);
    } else if (arg == "--max-bars") {
      o.max_bars = static_cast<int>(value);
    } else if (arg == "--first-after") {
      o.first_after = static_cast<int>(value);
    } else if (arg == "--every") {
      o.every = static_cast<int>(value);
    } else {
      return usage("unknown option");
    }
  }
  if (o.min_bars < 1 || o.max_bars < o.min_bars || o.every < 1) return usage("bars: 1 <= min <= max, every >= 1");

  const std::string system = aoi::workload::instructions();
  for (int s = 0; s < o.streams; ++s) {
    Rng rng{o.seed * 1000003ull + static_cast<std::uint64_t>(s)};
    const int n = o.min_bars + rng.below(o.max_bars - o.min_bars + 1);
    aoi::workload::OhlcvGenerator gen({.seed = o.seed + static_cast<std::uint64_t>(s)});
    for (int skip = rng.below(400); skip > 0; --skip) (void)gen.next();
    const std::vector<aoi::workload::Bar> bars = gen.take(n);

    std::string line = "{\"system\":" + quoted(system) + ",\"records\":[";
    for (int i = 0; i < n; ++i) line += (i ? "," : "") + quoted(aoi::workload::format_bar(bars[i]));
    line += "],\"questions\":[";
    bool first = true;
    // The last record always gets its questions: a session is asked most often right after its newest data.
    std::vector<int> afters;
    for (int k = std::min(o.first_after, n - 1); k < n - 1; k += o.every) afters.push_back(k);
    afters.push_back(n - 1);
    for (const int k : afters) {
      const std::span<const aoi::workload::Bar> seen(bars.data(), static_cast<size_t>(k) + 1);
      for (int t = 0; t < aoi::workload::kQuestionTypes; ++t) {
        const auto q = aoi::workload::make_question(static_cast<aoi::workload::QuestionType>(t), seen);
        line += (first ? "" : ",") + std::string("{\"after\":") + std::to_string(k) +
                ",\"type\":" + quoted(aoi::workload::question_type_name(q.type)) + ",\"question\":" + quoted(q.text) +
                ",\"answer\":" + quoted(q.truth) + "}";
        first = false;
      }
    }
    line += "]}\n";
    if (std::fputs(line.c_str(), stdout) < 0) return 1;
  }
  return 0;
}
