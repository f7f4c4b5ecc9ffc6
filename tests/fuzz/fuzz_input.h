// Records from fuzz input, shared by the template and renderer targets. After the template's line, each line
// gives the next field of the template its value; its first byte says what kind: 'i' an int64 (the rest, as
// decimal), 'd' a double (the rest, as from_chars reads it), 'n' a number's text (the rest, as a client wrote
// it), '!' the field is missing; any other line is text. Fields without a line are missing too.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/ingest/record_template.h"

namespace aoi::fuzz {

inline std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start <= s.size();) {
    size_t end = s.find('\n', start);
    if (end == std::string_view::npos) end = s.size();
    lines.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

inline ingest::FieldValue field_value(std::string_view line) {
  const std::string_view rest = line.empty() ? line : line.substr(1);
  if (!line.empty() && line[0] == 'i') {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
    if (ec == std::errc() && end == rest.data() + rest.size()) return v;
  } else if (!line.empty() && line[0] == 'd') {
    double v = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
    if (ec == std::errc() && end == rest.data() + rest.size()) return v;  // inf and nan included
  } else if (!line.empty() && line[0] == 'n') {
    return ingest::NumberText{std::string(rest)};
  }
  return std::string(line);
}

// The record for `tmpl` from value lines (see above).
inline ingest::Record make_record(const ingest::RecordTemplate& tmpl, const std::vector<std::string_view>& lines,
                                  size_t first_line) {
  ingest::Record record;
  const auto& names = tmpl.field_names();
  for (size_t i = 0; i < names.size() && first_line + i < lines.size(); ++i) {
    const std::string_view line = lines[first_line + i];
    if (!line.empty() && line[0] == '!') continue;
    record.set(names[i], field_value(line));
  }
  return record;
}

}  // namespace aoi::fuzz
