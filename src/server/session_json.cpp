#include "session_json.h"

#include "aoi/server/server.h"

#include <regex>

#include "aoi/engine/model.h"
#include "aoi/sources/sink_url.h"
#include "aoi/sources/source_url.h"
#include "json_fields.h"
#include "sampling_json.h"

namespace aoi::server {

using nlohmann::json;

Result<session::SessionConfig> parse_session_config(const nlohmann::json& body) {
  session::SessionConfig c;
  Fields f(body);
  auto id = f.string("id");
  if (!id) return id.error();
  if (*id) c.id = **id;
  auto system = f.string("system");
  if (!system) return system.error();
  if (*system) c.system = **system;
  auto tmpl = f.string("template");
  if (!tmpl) return tmpl.error();
  c.record_template = *tmpl;
  auto scaffold = f.string("scaffold");
  if (!scaffold) return scaffold.error();
  c.scaffold = *scaffold;
  auto suffix = f.string("question_suffix");
  if (!suffix) return suffix.error();
  c.question_suffix = *suffix;
  auto mode = f.string("mode");
  if (!mode) return mode.error();
  if (*mode) {
    if (**mode == "stateful") {
      c.mode = session::SessionMode::kStateful;
    } else if (**mode == "naive") {
      c.mode = session::SessionMode::kNaive;
    } else {
      return Error::invalid("mode", "must be \"stateful\" or \"naive\"");
    }
  }
  auto budget = f.integer("query_budget", 2, 1 << 20);
  if (!budget) return budget.error();
  if (*budget) c.query_budget = static_cast<int>(**budget);

  auto retention = f.object("retention");
  if (!retention) return retention.error();
  if (*retention) {
    Fields r(**retention, "retention");
    auto max_tokens = r.integer("max_tokens", 1, 1 << 24);
    if (!max_tokens) return max_tokens.error();
    if (*max_tokens) c.retention.max_tokens = static_cast<int>(**max_tokens);
    auto max_records = r.integer("max_records", 1, 1 << 30);
    if (!max_records) return max_records.error();
    if (*max_records) c.retention.max_records = static_cast<int>(**max_records);
    auto eviction = r.string("eviction");
    if (!eviction) return eviction.error();
    if (*eviction) {
      if (**eviction == "recompute") {
        c.retention.policy = session::EvictionPolicy::kRecompute;
      } else if (**eviction == "shift") {
        c.retention.policy = session::EvictionPolicy::kShift;
      } else {
        return Error::invalid("retention.eviction", "must be \"recompute\" or \"shift\"");
      }
    }
    auto fraction = r.number("evict_fraction", 0.0, 0.99);
    if (!fraction) return fraction.error();
    if (*fraction) c.retention.evict_fraction = **fraction;
    if (Status st = r.no_unknown_fields(); !st) return st.error();
  }

  auto ready = f.object("ready");
  if (!ready) return ready.error();
  if (*ready) {
    Fields r(**ready, "ready");
    session::ReadyQuestion q;
    auto question = r.string("question");
    if (!question) return question.error();
    if (!*question || (*question)->empty()) return Error::invalid("ready.question", "a ready question is needed");
    q.question = **question;
    const json* vocab_value = r.raw("vocab");
    if (vocab_value == nullptr || !vocab_value->is_array() || vocab_value->empty()) {
      return Error::invalid("ready.vocab", "must be a non-empty array of fast-answer words");
    }
    auto vocab = r.strings("vocab", 64);
    if (!vocab) return vocab.error();
    q.vocab = *vocab;
    auto tau = r.number("tau", 0.0, 1000.0);
    if (!tau) return tau.error();
    if (*tau) q.tau = static_cast<float>(**tau);
    if (Status st = r.no_unknown_fields(); !st) return st.error();
    c.ready = std::move(q);
  }
  auto source = f.object("source");
  if (!source) return source.error();
  if (*source) {
    Fields r(**source, "source");
    session::SourceConfig sc;
    auto url = r.string("url");
    if (!url) return url.error();
    if (!*url)
      return Error::invalid("source.url",
                            "a source needs its url (redis://HOST:PORT/STREAM-KEY, kafka://HOST:PORT/TOPIC, "
                            "mqtt://HOST:PORT/TOPIC-FILTER, nats://HOST:PORT/SUBJECT?stream=NAME)");
    sc.url = **url;
    if (auto parsed = sources::parse_source_url(sc.url); !parsed) return parsed.error();
    auto format = r.string("format");
    if (!format) return format.error();
    if (*format) sc.format = **format;
    auto header = r.strings("csv_header", 4096);
    if (!header) return header.error();
    sc.csv_header = *header;
    auto fields = r.string("fields");
    if (!fields) return fields.error();
    if (*fields) sc.fields = **fields;
    auto overflow = r.string("overflow");
    if (!overflow) return overflow.error();
    if (*overflow) {
      if (**overflow == "lag") {
        sc.overflow = session::Overflow::kLag;
      } else if (**overflow == "drop_oldest") {
        sc.overflow = session::Overflow::kDropOldest;
      } else {
        return Error::invalid("source.overflow", "must be \"lag\" or \"drop_oldest\"");
      }
    }
    if (auto options = sources::decoder_options(sc); !options) return options.error();
    if (Status st = r.no_unknown_fields(); !st) return st.error();
    c.source = std::move(sc);
  }
  if (Status st = f.no_unknown_fields(); !st) return st.error();
  return c;
}

Result<service::QueryRequest> parse_query(const nlohmann::json& body, AnswerForm& form) {
  service::QueryRequest q;
  Fields f(body);
  auto question = f.string("question");
  if (!question) return question.error();
  if (!*question || (*question)->empty()) return Error::invalid("question", "a question is needed");
  q.question = **question;
  auto max_tokens = f.integer("max_tokens", 0, 1 << 20);
  if (!max_tokens) return max_tokens.error();
  q.generation.max_tokens = max_tokens->value_or(64);
  auto stop = f.strings("stop", 16);
  if (!stop) return stop.error();
  q.generation.stop = *stop;
  auto temperature = f.number("temperature", 0.0, 5.0);
  if (!temperature) return temperature.error();
  q.generation.sampling.temperature = static_cast<float>(temperature->value_or(0.0));
  auto top_p = f.number("top_p", 0.0, 1.0);
  if (!top_p) return top_p.error();
  q.generation.sampling.top_p = static_cast<float>(top_p->value_or(1.0));
  auto top_k = f.integer("top_k", 0, 1 << 20);
  if (!top_k) return top_k.error();
  q.generation.sampling.top_k = static_cast<int>(top_k->value_or(0));
  auto seed = f.integer("seed", 0, UINT32_MAX);
  if (!seed) return seed.error();
  q.generation.sampling.seed = static_cast<std::uint32_t>(seed->value_or(0));
  if (const json* schema = f.raw("json_schema")) {
    auto grammar = schema_grammar(*schema, "json_schema");
    if (!grammar) return grammar.error();
    q.generation.sampling.grammar = std::move(grammar).value();
  }
  auto min_seq = f.integer("min_seq", 0, INT64_MAX);
  if (!min_seq) return min_seq.error();
  if (*min_seq && **min_seq > 0) q.min_seq = static_cast<std::uint64_t>(**min_seq);
  auto wait_ms = f.integer("wait_ms", 0, 3600 * 1000);
  if (!wait_ms) return wait_ms.error();
  if (*wait_ms) q.wait_timeout = std::chrono::milliseconds(**wait_ms);
  auto streamed = f.boolean("stream");
  if (!streamed) return streamed.error();
  q.stream = streamed->value_or(false);
  auto details = f.boolean("details");
  if (!details) return details.error();
  form.details = details->value_or(false);
  if (Status st = f.no_unknown_fields(); !st) return st.error();
  return q;
}

namespace {

// A source session's source: its configuration, and its consumer's state when it runs.
json source_json(const session::SourceConfig& config, const service::SessionHandle& h,
                 const std::optional<sources::SourceStatus>& status) {
  json out = {{"url", config.url},
              {"format", config.format},
              {"overflow", session::overflow_name(config.overflow)},
              {"position", h.source_position()}};
  if (!config.fields.empty()) out["fields"] = config.fields;
  if (!config.csv_header.empty()) out["csv_header"] = config.csv_header;
  out["connected"] = status && status->connected;
  if (status) {
    out["messages"] = status->messages;
    out["rejected"] = status->rejected;
    out["reconnects"] = status->reconnects;
    out["lag_seconds"] = status->lag_seconds;
    out["lag_records"] = status->lag_records ? json(*status->lag_records) : json(nullptr);
    out["waiting_for_room"] = status->waiting_for_room;
    out["error"] = status->error.empty() ? json(nullptr) : json(status->error);
  }
  return out;
}

}  // namespace

json session_json(const service::SessionView& s, const service::SessionHandle& h,
                  const sources::SourceManager* sources) {
  const service::SessionCounters& c = h.counters();
  json flash = json::array();
  for (const auto& f : h.flash().list()) flash.push_back(flash_json(f));
  json out = {
      {"id", s.id},
      {"tenant", h.config().owner},
      {"residency", service::residency_name(s.residency)},
      {"mode", session::session_mode_name(s.mode)},
      {"eviction", session::eviction_policy_name(s.eviction)},
      {"data_version", s.data_version},
      {"regions",
       {{"system_tokens", s.region0_tokens},
        {"data_tokens", s.data_tokens},
        {"scaffold_tokens", s.scaffold_tokens},
        {"records", s.records}}},
      {"retention",
       {{"max_tokens", s.max_data_tokens},
        {"max_records", s.max_records > 0 ? json(s.max_records) : json(nullptr)},
        {"evict_fraction", s.evict_fraction}}},
      {"last_seq_pushed", h.last_seq_pushed()},
      {"last_seq_ingested", s.last_seq_ingested},
      {"pending", h.unaccounted()},
      {"records",
       {{"pushed", c.records_pushed.load()},
        {"ingested", c.records_ingested.load()},
        {"dropped", c.records_dropped.load()},
        {"rejected", c.records_rejected.load()},
        {"evicted", s.records_evicted}}},
      {"tokens_ingested", c.tokens_ingested.load()},
      {"kv", {{"cells_used", s.kv_cells_used}, {"cells_reserved", s.kv_cells_reserved}, {"bytes", s.kv_bytes}}},
      {"query_budget", s.query_budget},
      {"queries", c.queries.load()},
      {"flash", flash},
      {"created", s.created_unix},
      {"budget",
       {{"ingest_ms", s.ingest_ms},
        {"flash_ms", s.flash_ms},
        {"background_ms", s.ingest_ms + s.flash_ms},
        {"data_interval_ms", s.data_interval_ms},
        {"flash_rounds", s.flash_rounds}}},
  };
  if (!s.damage.empty()) out["damage"] = s.damage;
  if (const auto& source = h.config().source) {
    out["source"] = source_json(*source, h, sources != nullptr ? sources->status(h) : std::nullopt);
  }
  return out;
}

json flash_json(const service::FlashQuery& f) {
  // Not evaluated yet: the answer fields are null.
  const bool evaluated = f.answer.finish != engine::FinishReason::kNone;
  json out = {{"fid", f.fid},
              {"question", f.question},
              {"max_tokens", f.max_tokens},
              {"answer", evaluated ? json(f.answer.text) : json(nullptr)},
              {"logit_gap", evaluated ? json(f.answer.logit_gap) : json(nullptr)},
              {"version", evaluated ? json(f.answer.version) : json(nullptr)},
              {"eval_ms", evaluated ? json(f.answer.eval_ms) : json(nullptr)}};
  if (f.schema) out["json_schema"] = json::parse(f.schema->json);
  if (f.sink) {
    out["sink"] = {{"url", f.sink->url},
                   {"notify", f.sink->notify == service::FlashSink::Notify::kChange ? "change" : "always"},
                   {"match", f.sink->match.empty() ? json(nullptr) : json(f.sink->match)}};
  }
  return out;
}

Result<service::AddFlash> parse_flash(const json& body) {
  Fields f(body);
  service::AddFlash out;
  auto question = f.string("question");
  if (!question) return question.error();
  if (!*question || (*question)->empty()) return Error::invalid("question", "a question is needed");
  out.question = **question;
  auto max_tokens = f.integer("max_tokens", 1, service::kMaxFlashTokens);
  if (!max_tokens) return max_tokens.error();
  out.max_tokens = static_cast<int>(max_tokens->value_or(8));
  if (const json* schema = f.raw("json_schema")) {
    auto grammar = schema_grammar(*schema, "json_schema");
    if (!grammar) return grammar.error();
    out.schema = service::AnswerSchema{.json = schema->dump(), .grammar = std::move(grammar).value()};
  }
  auto sink = f.object("sink");
  if (!sink) return sink.error();
  if (*sink) {
    Fields s(**sink, "sink");
    service::FlashSink fs;
    auto url = s.string("url");
    if (!url) return url.error();
    if (!*url) {
      return Error::invalid("sink.url",
                            "a sink needs its url (kafka://HOST:PORT/TOPIC, redis://HOST:PORT/STREAM-KEY, "
                            "mqtt://HOST:PORT/TOPIC or http://HOST:PORT/PATH)");
    }
    fs.url = **url;
    if (auto parsed = sources::parse_sink_url(fs.url); !parsed) return parsed.error();
    auto notify = s.string("notify");
    if (!notify) return notify.error();
    if (*notify && **notify == "change") {
      fs.notify = service::FlashSink::Notify::kChange;
    } else if (*notify && **notify != "always") {
      return Error::invalid("sink.notify", "must be \"always\" or \"change\"");
    }
    auto match = s.string("match");
    if (!match) return match.error();
    if (*match) {
      try {
        std::regex check(**match, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return Error::invalid("sink.match", std::string("not a regular expression: ") + e.what());
      }
      fs.match = **match;
    }
    if (Status st = s.no_unknown_fields(); !st) return st.error();
    out.sink = std::move(fs);
  }
  if (Status st = f.no_unknown_fields(); !st) return st.error();
  return out;
}

json prompt_json(const service::SessionPrompt& p, const engine::Model& model) {
  return {{"data_version", p.data_version},
          {"tokens", p.context},
          {"question_tokens", p.question},
          {"text", model.detokenize(p.context, /*special=*/true) + model.detokenize(p.question, true)}};
}

json push_json(const service::PushResult& p) {
  return {{"accepted", p.accepted}, {"first_seq", p.first_seq}, {"last_seq", p.last_seq}, {"dropped", p.dropped}};
}

json answer_json(const service::QueryOutcome& o, bool details) {
  const session::Answer& a = o.answer;
  json out = {
      {"answer", a.text},
      {"path", o.path},
      {"data_version", a.data_version},
      {"tokens", {{"question", a.n_question_tokens}, {"answer", a.tokens.size()}}},
      {"finish_reason", engine::finish_reason_name(a.finish)},
      {"logit_gap", a.first_gap},
      {"timings",
       {{"queue_ms", o.queue_ms},
        {"prompt_ms", a.prompt_ms},
        {"generate_ms", a.generate_ms},
        {"total_ms", o.total_ms}}},
  };
  if (details) {
    // Every sampled step, the end-of-generation token's included: what the strict rule compares.
    json steps = json::array();
    for (const engine::Top2& t : a.details.top) {
      steps.push_back(
          {{"token", t.token}, {"logit", t.logit}, {"runner_up", t.second}, {"runner_up_logit", t.second_logit}});
    }
    out["details"] = {{"token_ids", a.tokens}, {"steps", steps}};
  }
  return out;
}

Result<session::SessionConfig> session_config_from_request(const nlohmann::json& body) {
  return parse_session_config(body);
}

}  // namespace aoi::server
