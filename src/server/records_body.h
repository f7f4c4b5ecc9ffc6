// Record bodies of POST /v1/sessions/{id}/data: JSON {"records": [...]}, NDJSON, or text lines. Object records
// are decoded as ingest::FlatRecordBuilder does (record_decoder.h): nested fields flattened to "a.b" and
// "a.0", booleans and null as text, numbers keeping the client's spelling ("101.250" stays "101.250").
#pragma once

#include <string_view>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/service/session_handle.h"

namespace aoi::server {

// ignored_keys: other top-level keys of the object whose scalar values are skipped (a WebSocket frame's "op").
Result<std::vector<service::RecordInput>> parse_records_json(std::string_view body,
                                                             std::vector<std::string> ignored_keys = {});
Result<std::vector<service::RecordInput>> parse_records_ndjson(std::string_view body);
// One record per line (without its "\r\n" or "\n"); blank lines (spaces, tabs, carriage returns) are skipped.
// Errors: the body is not UTF-8.
Result<std::vector<service::RecordInput>> parse_records_text(std::string_view body);

}  // namespace aoi::server
