// Session types on the wire: JSON request bodies to service requests, service results to JSON. Shared by the
// HTTP routes and the WebSocket frames.
#pragma once

#include <nlohmann/json.hpp>

#include "aoi/common/error.h"
#include "aoi/service/service.h"
#include "aoi/sources/source_manager.h"

namespace aoi::server {

Result<session::SessionConfig> parse_session_config(const nlohmann::json& body);
// How a query's answer is written: with its token ids and each step's top two logits ("details", for
// comparisons with a recompute). Whether it streams ("stream") is part of the request.
struct AnswerForm {
  bool details = false;
};
// form: set from the "details" field. Unknown fields are refused.
Result<service::QueryRequest> parse_query(const nlohmann::json& body, AnswerForm& form);

// sources: the consumers of source sessions, for their state (null: none run, e.g. in a tool).
nlohmann::json session_json(const service::SessionView& snapshot, const service::SessionHandle& handle,
                            const sources::SourceManager* sources);
nlohmann::json push_json(const service::PushResult& pushed);
nlohmann::json flash_json(const service::FlashQuery& query);
nlohmann::json prompt_json(const service::SessionPrompt& prompt, const engine::Model& model);
// A flash registration: {"question", "max_tokens"?, "sink"?: {"url", "notify"?, "match"?}}. Unknown fields are
// refused; the sink's URL is checked as the sink will read it (nothing connects yet).
Result<service::AddFlash> parse_flash(const nlohmann::json& body);
nlohmann::json answer_json(const service::QueryOutcome& outcome, bool details);

}  // namespace aoi::server
