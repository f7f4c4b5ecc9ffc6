// What a benchmark's output names first, so that a table in the docs always says where it came from: the
// command that produced it, verbatim, and the commit it was measured at ("Measured at commit `abc1234`:
// `build/bench/aoi-bench-flash -m ...`"). The commit has one definition for every benchmark and script,
// bench/benchlib.py (run from the repository root, as the docs' commands are): `abc1234+changes` when tracked
// files differ from the commit, which bench/update_docs.py refuses. $AOI_BENCH_COMMIT overrides it (a script
// that took the commit before building). Main thread only (runs a process).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace aoi::bench {

// The arguments as a shell shows them: each quoted only where it needs to be (as bench/benchlib.py's command).
inline std::string command_line(int argc, char** argv) {
  const char* plain_chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=,+@%-";
  std::string out;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool plain = !arg.empty() && arg.find_first_not_of(plain_chars) == std::string::npos;
    if (!out.empty()) out += ' ';
    if (plain) {
      out += arg;
      continue;
    }
    out += '\'';
    for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

// The commit this run is measured at, or "unknown" (which bench/update_docs.py refuses).
inline std::string run_commit() {
  if (const char* env = std::getenv("AOI_BENCH_COMMIT"); env != nullptr && *env != '\0') return env;
  std::string out;
  if (FILE* p = popen("python3 bench/benchlib.py commit", "r")) {
    char buf[128];
    while (std::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
    if (pclose(p) != 0) out.clear();
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out.empty() ? "unknown" : out;
}

inline std::string measured_line(const std::string& commit, const std::string& command) {
  return "Measured at commit `" + commit + "`: `" + command + "`";
}

// The line a benchmark prints first: this process's commit and command line.
inline std::string measured_line(int argc, char** argv) {
  return measured_line(run_commit(), command_line(argc, argv));
}

}  // namespace aoi::bench
