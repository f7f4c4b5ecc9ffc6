#include "session_codec.h"

#include <cstring>
#include <limits>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "aoi/engine/grammar.h"
#include "aoi/engine/sampling.h"
#include "aoi/store/bytes.h"

namespace aoi::service {

using nlohmann::json;

json config_to_json(const session::SessionConfig& c) {
  json j = {{"id", c.id},
            {"system", c.system},
            {"mode", session::session_mode_name(c.mode)},
            {"query_budget", c.query_budget},
            {"retention",
             {{"eviction", session::eviction_policy_name(c.retention.policy)},
              {"evict_fraction", c.retention.evict_fraction}}}};
  if (c.retention.max_tokens) j["retention"]["max_tokens"] = *c.retention.max_tokens;
  if (c.retention.max_records) j["retention"]["max_records"] = *c.retention.max_records;
  if (c.scaffold) j["scaffold"] = *c.scaffold;
  if (c.question_suffix) j["question_suffix"] = *c.question_suffix;
  if (c.record_template) j["template"] = *c.record_template;
  if (!c.owner.empty()) j["owner"] = c.owner;
  if (c.ready) j["ready"] = {{"question", c.ready->question}, {"vocab", c.ready->vocab}, {"tau", c.ready->tau}};
  if (c.source) {
    j["source"] = {{"url", c.source->url},
                   {"format", c.source->format},
                   {"csv_header", c.source->csv_header},
                   {"fields", c.source->fields},
                   {"overflow", session::overflow_name(c.source->overflow)}};
  }
  return j;
}

Result<session::SessionConfig> config_from_json(const json& j) {
  try {
    session::SessionConfig c;
    c.id = j.at("id").get<std::string>();
    c.system = j.at("system").get<std::string>();
    c.mode =
        j.at("mode").get<std::string>() == "naive" ? session::SessionMode::kNaive : session::SessionMode::kStateful;
    c.query_budget = j.at("query_budget").get<int>();
    const json& r = j.at("retention");
    c.retention.policy = r.at("eviction").get<std::string>() == "shift" ? session::EvictionPolicy::kShift
                                                                        : session::EvictionPolicy::kRecompute;
    c.retention.evict_fraction = r.at("evict_fraction").get<double>();
    if (r.contains("max_tokens")) c.retention.max_tokens = r["max_tokens"].get<int>();
    if (r.contains("max_records")) c.retention.max_records = r["max_records"].get<int>();
    if (j.contains("scaffold")) c.scaffold = j["scaffold"].get<std::string>();
    if (j.contains("question_suffix")) c.question_suffix = j["question_suffix"].get<std::string>();
    if (j.contains("template")) c.record_template = j["template"].get<std::string>();
    if (j.contains("owner")) c.owner = j["owner"].get<std::string>();
    if (j.contains("ready")) {
      const json& q = j["ready"];
      c.ready = session::ReadyQuestion{q.at("question").get<std::string>(),
                                       q.at("vocab").get<std::vector<std::string>>(), q.at("tau").get<float>()};
    }
    if (j.contains("source")) {
      const json& src = j["source"];
      c.source = session::SourceConfig{.url = src.at("url").get<std::string>(),
                                       .format = src.at("format").get<std::string>(),
                                       .csv_header = src.at("csv_header").get<std::vector<std::string>>(),
                                       .fields = src.at("fields").get<std::string>(),
                                       .overflow = src.at("overflow").get<std::string>() == "lag"
                                                       ? session::Overflow::kLag
                                                       : session::Overflow::kDropOldest};
    }
    return c;
  } catch (const json::exception& e) {
    return Error::damaged(std::string("the session's stored configuration is not readable: ") + e.what());
  }
}

namespace {

// A record from a source is kPositioned: its position in the broker (a string), then the record itself.
enum : std::uint8_t { kText = 'T', kObject = 'O', kPositioned = 'P' };
enum : std::uint8_t { kString = 0, kInt = 1, kDouble = 2, kNumber = 3 };

// Tokens as a blob: int32 each.
store::Bytes token_bytes(std::span<const engine::Token> tokens) {
  store::Bytes out(tokens.size() * sizeof(engine::Token));
  if (!tokens.empty()) std::memcpy(out.data(), tokens.data(), out.size());
  return out;
}

}  // namespace

store::Bytes encode_record(const RecordInput& record, std::string_view position) {
  store::Bytes out;
  if (!position.empty()) {
    store::ByteWriter w(out);
    w.put<std::uint8_t>(kPositioned);
    w.string(position);
  }
  if (const auto* text = std::get_if<std::string>(&record)) {
    out.reserve(1 + text->size());
    out.push_back(kText);
    out.insert(out.end(), text->begin(), text->end());
    return out;
  }
  const auto& rec = std::get<ingest::Record>(record);
  store::ByteWriter w(out);  // appends after a position
  w.put<std::uint8_t>(kObject);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(rec.fields().size()));
  for (const auto& [name, value] : rec.fields()) {
    w.string(name);
    if (const auto* s = std::get_if<std::string>(&value)) {
      w.put<std::uint8_t>(kString);
      w.string(*s);
    } else if (const auto* i = std::get_if<std::int64_t>(&value)) {
      w.put<std::uint8_t>(kInt);
      w.put<std::int64_t>(*i);
    } else if (const auto* d = std::get_if<double>(&value)) {
      w.put<std::uint8_t>(kDouble);
      w.put<double>(*d);
    } else {
      w.put<std::uint8_t>(kNumber);
      w.string(std::get<ingest::NumberText>(value).lexeme);
    }
  }
  return out;
}

Result<LogRecord> decode_record(std::span<const std::uint8_t> bytes) {
  const auto bad = Error::damaged("a logged record cannot be decoded");
  if (bytes.empty()) return bad;
  LogRecord out;
  if (bytes[0] == kPositioned) {
    store::ByteReader p(bytes.subspan(1));
    if (!p.string(out.position) || out.position.empty()) return bad;
    bytes = bytes.subspan(1 + p.pos());
    if (bytes.empty()) return bad;
  }
  if (bytes[0] == kText) {
    out.record = std::string(bytes.begin() + 1, bytes.end());
    return out;
  }
  if (bytes[0] != kObject) return bad;
  store::ByteReader r(bytes.subspan(1));
  std::uint32_t n = 0;
  if (!r.get(n)) return bad;
  ingest::Record rec;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::string name;
    std::uint8_t type = 0;
    if (!r.string(name) || !r.get(type)) return bad;
    switch (type) {
      case kString: {
        std::string s;
        if (!r.string(s)) return bad;
        rec.set(std::move(name), std::move(s));
        break;
      }
      case kInt: {
        std::int64_t v = 0;
        if (!r.get(v)) return bad;
        rec.set(std::move(name), v);
        break;
      }
      case kDouble: {
        double v = 0;
        if (!r.get(v)) return bad;
        rec.set(std::move(name), v);
        break;
      }
      case kNumber: {
        std::string s;
        if (!r.string(s)) return bad;
        rec.set(std::move(name), ingest::NumberText{std::move(s)});
        break;
      }
      default: return bad;
    }
  }
  if (!r.at_end()) return bad;
  out.record = std::move(rec);
  return out;
}

namespace {

json flash_sink_json(const FlashSink& sink) {
  return {{"url", sink.url},
          {"notify", sink.notify == FlashSink::Notify::kChange ? "change" : "always"},
          {"match", sink.match}};
}

std::optional<FlashSink> flash_sink_from_json(const json& j) {
  if (!j.is_object() || !j.contains("url") || !j["url"].is_string()) return std::nullopt;
  FlashSink sink;
  sink.url = j["url"].get<std::string>();
  const json notify = j.value("notify", json("always"));
  sink.notify = notify == "change" ? FlashSink::Notify::kChange : FlashSink::Notify::kAlways;
  if (const json match = j.value("match", json()); match.is_string()) sink.match = match.get<std::string>();
  return sink;
}

}  // namespace

json flash_query_json(const FlashQuery& f) {
  json q = {{"fid", f.fid}, {"question", f.question}, {"max_tokens", f.max_tokens}};
  if (f.sink) q["sink"] = flash_sink_json(*f.sink);
  if (f.schema) q["json_schema"] = json::parse(f.schema->json);
  return q;
}

std::optional<FlashQuery> flash_query_from_json(const json& j) {
  if (!j.is_object()) return std::nullopt;
  const json fid = j.value("fid", json());
  const json question = j.value("question", json());
  if (!fid.is_string() || !question.is_string()) return std::nullopt;
  FlashQuery q;
  q.fid = fid.get<std::string>();
  q.question = question.get<std::string>();
  if (q.fid.empty() || q.question.empty()) return std::nullopt;
  if (const json n = j.value("max_tokens", json()); n.is_number_integer()) {
    q.max_tokens = std::clamp(n.get<int>(), 1, kMaxFlashTokens);
  }
  if (j.contains("sink")) q.sink = flash_sink_from_json(j["sink"]);
  if (j.contains("json_schema")) {
    const std::string schema = j["json_schema"].dump();
    // The grammar is built again rather than stored: it is what this build's converter makes of the schema.
    auto grammar = engine::grammar_from_json_schema(schema, "json_schema");
    if (!grammar) {
      spdlog::warn("flash query {} loses its json_schema: {}", q.fid, grammar.error().message);
    } else {
      q.schema = AnswerSchema{.json = schema, .grammar = std::move(grammar).value()};
    }
  }
  return q;
}

store::SnapshotData encode_session_snapshot(const SnapshotMeta& m, session::SessionImage image) {
  store::SnapshotData d;
  json flash = json::array();
  for (const auto& f : m.flash) {
    json q = flash_query_json(f);
    if (f.answer.version != 0) {
      q["answer"] = {{"text", f.answer.text},
                     {"tokens", f.answer.tokens},
                     {"finish", static_cast<int>(f.answer.finish)},
                     {"logit_gap", f.answer.logit_gap},
                     {"version", f.answer.version},
                     {"context_tokens", f.answer.n_context_tokens},
                     {"question_tokens", f.answer.n_question_tokens},
                     {"eval_ms", f.answer.eval_ms}};
    }
    flash.push_back(std::move(q));
  }
  std::vector<std::uint64_t> record_seqs;
  std::vector<std::uint32_t> record_sizes;
  std::vector<engine::Token> record_tokens;
  for (const auto& r : image.records) {
    record_seqs.push_back(r.seq);
    record_sizes.push_back(static_cast<std::uint32_t>(r.tokens.size()));
    record_tokens.insert(record_tokens.end(), r.tokens.begin(), r.tokens.end());
  }
  d.meta = {{"kind", "aoi session"},
            {"model_fingerprint", m.model_fingerprint},
            {"kv_layout", m.kv_layout},
            {"config", config_to_json(m.config)},
            {"created_unix", m.created_unix},
            {"consumed_seq", m.consumed_seq},
            {"source_position", m.source_position},
            {"counters",
             {{"records_ingested", m.records_ingested},
              {"records_rejected", m.records_rejected},
              {"records_dropped", m.records_dropped},
              {"tokens_ingested", m.tokens_ingested},
              {"queries", m.queries},
              {"rebuilds", m.rebuilds},
              {"flash_rounds", m.flash_rounds}}},
            {"last_event_id", m.last_event_id},
            {"flash", flash},
            {"next_flash_id", m.next_flash_id},
            {"data_version", image.version},
            {"session",
             {{"version", image.version},
              {"last_record_seq", image.last_record_seq},
              {"records_evicted", image.records_evicted},
              {"tokens_evicted", image.tokens_evicted},
              {"scaffold_ready", image.scaffold_ready},
              {"tail_decoded", image.tail_decoded},
              {"kv_positions", image.kv_positions},
              {"records", record_seqs},
              {"record_sizes", record_sizes}}}};
  d.blobs["region0"] = token_bytes(image.region0);
  d.blobs["record_tokens"] = token_bytes(record_tokens);
  // The ready choice: its top two (the speculative path's verdict) and the vocabulary they come from.
  if (image.ready.token != engine::kNoToken) {
    const engine::Top2& top = image.ready;
    d.meta["session"]["ready_top2"] = {{"n_vocab", image.ready_n_vocab},
                                       {"first", {top.token, top.logit}},
                                       {"second", {top.second, top.second_logit}}};
  }
  d.blobs["kv"] = std::move(image.kv);
  return d;
}

Result<SnapshotMeta> decode_snapshot_meta(const json& j) {
  try {
    if (j.value("kind", "") != "aoi session") return Error::damaged("not a session snapshot");
    SnapshotMeta m;
    m.model_fingerprint = j.at("model_fingerprint").get<std::string>();
    m.kv_layout = j.at("kv_layout").get<std::string>();
    auto config = config_from_json(j.at("config"));
    if (!config) return config.error();
    m.config = std::move(config).value();
    m.created_unix = j.at("created_unix").get<double>();
    m.consumed_seq = j.at("consumed_seq").get<std::uint64_t>();
    m.source_position = j.value("source_position", std::string());
    const json& c = j.at("counters");
    m.records_ingested = c.at("records_ingested").get<std::uint64_t>();
    m.records_rejected = c.at("records_rejected").get<std::uint64_t>();
    m.records_dropped = c.at("records_dropped").get<std::uint64_t>();
    m.tokens_ingested = c.at("tokens_ingested").get<std::uint64_t>();
    m.queries = c.at("queries").get<std::uint64_t>();
    m.rebuilds = c.at("rebuilds").get<std::uint64_t>();
    m.flash_rounds = c.at("flash_rounds").get<std::uint64_t>();
    m.last_event_id = j.at("last_event_id").get<std::uint64_t>();
    m.next_flash_id = j.at("next_flash_id").get<std::uint64_t>();
    m.data_version = j.at("data_version").get<std::uint64_t>();
    for (const json& q : j.at("flash")) {
      auto query = flash_query_from_json(q);
      if (!query) return Error::damaged("a flash query of the snapshot has no id or question");
      FlashQuery f = std::move(query).value();
      if (q.contains("answer")) {
        const json& a = q["answer"];
        f.answer.text = a.at("text").get<std::string>();
        f.answer.tokens = a.at("tokens").get<std::vector<engine::Token>>();
        f.answer.finish = static_cast<engine::FinishReason>(a.at("finish").get<int>());
        f.answer.logit_gap = a.at("logit_gap").get<float>();
        f.answer.version = a.at("version").get<std::uint64_t>();
        f.answer.eval_ms = a.at("eval_ms").get<double>();
        // Absent from snapshots written before they were kept.
        f.answer.n_context_tokens = a.value("context_tokens", 0);
        f.answer.n_question_tokens = a.value("question_tokens", 0);
      }
      m.flash.push_back(std::move(f));
    }
    return m;
  } catch (const json::exception& e) {
    return Error::damaged(std::string("the snapshot's metadata is not readable: ") + e.what());
  }
}

Result<std::pair<SnapshotMeta, session::SessionImage>> decode_session_snapshot(store::SnapshotData d) {
  auto meta = decode_snapshot_meta(d.meta);
  if (!meta) return meta.error();
  try {
    const json& s = d.meta.at("session");
    session::SessionImage img;
    img.version = s.at("version").get<std::uint64_t>();
    img.last_record_seq = s.at("last_record_seq").get<std::uint64_t>();
    img.records_evicted = s.at("records_evicted").get<std::uint64_t>();
    img.tokens_evicted = s.at("tokens_evicted").get<std::uint64_t>();
    img.scaffold_ready = s.at("scaffold_ready").get<bool>();
    img.tail_decoded = s.at("tail_decoded").get<bool>();
    img.kv_positions = s.at("kv_positions").get<int>();
    const auto seqs = s.at("records").get<std::vector<std::uint64_t>>();
    const auto sizes = s.at("record_sizes").get<std::vector<std::uint32_t>>();
    const auto tokens_of = [&d](const char* name) -> Result<std::vector<engine::Token>> {
      const auto it = d.blobs.find(name);
      if (it == d.blobs.end() || it->second.size() % sizeof(engine::Token) != 0) {
        return Error::damaged(std::string("the snapshot has no readable ") + name);
      }
      std::vector<engine::Token> out(it->second.size() / sizeof(engine::Token));
      if (!out.empty()) std::memcpy(out.data(), it->second.data(), it->second.size());
      return out;
    };
    auto region0 = tokens_of("region0");
    if (!region0) return region0.error();
    img.region0 = std::move(region0).value();
    auto tokens = tokens_of("record_tokens");
    if (!tokens) return tokens.error();
    if (seqs.size() != sizes.size()) return Error::damaged("the snapshot's record list is inconsistent");
    size_t at = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (sizes[i] == 0 || tokens->size() - at < sizes[i]) return Error::damaged("the snapshot's records run short");
      img.records.push_back({seqs[i], std::vector<engine::Token>(tokens->begin() + static_cast<long>(at),
                                                                 tokens->begin() + static_cast<long>(at + sizes[i]))});
      at += sizes[i];
    }
    if (at != tokens->size()) return Error::damaged("the snapshot has record tokens no record owns");
    if (s.contains("ready_top2")) {
      const json& t = s["ready_top2"];
      img.ready_n_vocab = t.at("n_vocab").get<int>();
      img.ready = {.token = t.at("first").at(0).get<engine::Token>(),
                   .logit = t.at("first").at(1).get<float>(),
                   .second = t.at("second").at(0).get<engine::Token>(),
                   .second_logit = t.at("second").at(1).get<float>()};
      for (const engine::Token token : {img.ready.token, img.ready.second}) {
        if (token < 0 || token >= img.ready_n_vocab) {
          return Error::damaged("the snapshot's ready choice names a token outside the vocabulary");
        }
      }
    }
    img.kv = std::move(d.blobs["kv"]);
    return std::make_pair(std::move(meta).value(), std::move(img));
  } catch (const json::exception& e) {
    return Error::damaged(std::string("the snapshot's session part is not readable: ") + e.what());
  }
}

}  // namespace aoi::service
