#include "aoi/server/metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/version.h"

namespace aoi::server {
namespace {

std::string escape_label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, std::string_view name, std::string_view labels, double value) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  out += ' ';
  out += number(value);
  out += '\n';
}

void render_histogram(std::string& out, std::string_view name, std::string_view labels,
                      const service::LatencyHistogram::Snapshot& h) {
  const std::string sep = labels.empty() ? "" : std::string(labels) + ",";
  const std::string bucket = std::string(name) + "_bucket";
  std::uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.buckets[i];
    sample(out, bucket, sep + "le=\"" + number(h.bounds[i]) + "\"", static_cast<double>(cumulative));
  }
  const std::uint64_t count = cumulative + h.buckets.back();
  sample(out, bucket, sep + "le=\"+Inf\"", static_cast<double>(count));
  sample(out, std::string(name) + "_sum", labels, h.sum);
  sample(out, std::string(name) + "_count", labels, static_cast<double>(count));
}

// The process' own figures, as Prometheus' client libraries export them (from /proc; absent where it is not).
void render_process(std::string& out) {
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const auto paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return;
  std::istringstream fields(stat.substr(paren + 2));
  std::vector<std::string> f;  // f[0] is field 3 (state) of proc(5)
  for (std::string x; fields >> x;) f.push_back(x);
  if (f.size() < 22) return;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const double cpu = (std::stod(f[11]) + std::stod(f[12])) / ticks;  // utime + stime
  double boot = 0;
  std::ifstream proc_stat("/proc/stat");
  for (std::string line; std::getline(proc_stat, line);) {
    if (line.rfind("btime ", 0) == 0) boot = std::stod(line.substr(6));
  }
  header(out, "process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.");
  sample(out, "process_cpu_seconds_total", "", cpu);
  header(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  sample(out, "process_resident_memory_bytes", "", std::stod(f[21]) * page);
  header(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  sample(out, "process_virtual_memory_bytes", "", std::stod(f[20]));
  header(out, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, in seconds.");
  sample(out, "process_start_time_seconds", "", boot + std::stod(f[19]) / ticks);
  if (DIR* dir = opendir("/proc/self/fd")) {
    int n = 0;
    while (const dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(dir);
    header(out, "process_open_fds", "gauge", "Open file descriptors.");
    sample(out, "process_open_fds", "", n - 1);  // not the one reading the directory
  }
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    header(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
    sample(out, "process_max_fds", "", static_cast<double>(lim.rlim_cur));
  }
}

}  // namespace

void Histogram::observe(double seconds) {
  for (size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) {
      ++buckets_[i];
      break;
    }
  }
  ++count_;
  sum_ += seconds;
}

void Histogram::render(std::string& out, std::string_view name, std::string_view labels) const {
  const std::string sep = labels.empty() ? "" : std::string(labels) + ",";
  std::uint64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += buckets_[i];
    sample(out, std::string(name) + "_bucket", sep + "le=\"" + number(kBounds[i]) + "\"",
           static_cast<double>(cumulative));
  }
  sample(out, std::string(name) + "_bucket", sep + "le=\"+Inf\"", static_cast<double>(count_));
  sample(out, std::string(name) + "_sum", labels, sum_);
  sample(out, std::string(name) + "_count", labels, static_cast<double>(count_));
}

void Metrics::observe_request(std::string_view route, std::string_view method, int status, std::string_view tenant,
                              double seconds) {
  std::lock_guard lock(mu_);
  ++requests_[{std::string(route), std::string(method), status, std::string(tenant)}];
  request_seconds_[std::string(route)].observe(seconds);
}

void Metrics::observe_query(std::string_view path, double seconds) {
  std::lock_guard lock(mu_);
  query_seconds_[std::string(path)].observe(seconds);
}

void Metrics::observe_completion(std::string_view api, double seconds) {
  std::lock_guard lock(mu_);
  completion_seconds_[std::string(api)].observe(seconds);
}

std::string Metrics::render(const service::ServiceStats& st, const std::vector<service::SessionView>& sessions,
                            const TenantView& tenants, std::size_t per_session, const BrokerMetrics* sources) const {
  auto tenant_of = [&](const std::string& id) {
    const auto it = tenants.owner.find(id);
    return it == tenants.owner.end() ? std::string() : it->second;
  };
  // A session's labels: its id and its tenant.
  auto session_labels = [&](const std::string& id) {
    return "session=\"" + escape_label(id) + "\",tenant=\"" + escape_label(tenant_of(id)) + "\"";
  };
  std::string out;
  header(out, "aoi_build_info", "gauge",
         "1, labelled with aoi's version and commit, llama.cpp's build number and commit, and the backend.");
  sample(out, "aoi_build_info",
         std::string("version=\"") + escape_label(AOI_VERSION_NUMBER) + "\",commit=\"" + escape_label(AOI_GIT_COMMIT) +
             "\",llama_build_number=\"" + escape_label(AOI_LLAMA_BUILD_NUMBER) + "\",llama_commit=\"" +
             escape_label(AOI_LLAMA_COMMIT) + "\",devices=\"" + escape_label(st.devices) + "\"",
         1);
  render_process(out);
  {
    std::lock_guard lock(mu_);
    header(out, "aoi_http_requests_total", "counter",
           "HTTP requests by route, method, status and tenant (\"\": an admin key or an open server).");
    for (const auto& [key, n] : requests_) {
      const auto& [route, method, status, tenant] = key;
      sample(out, "aoi_http_requests_total",
             "route=\"" + escape_label(route) + "\",method=\"" + escape_label(method) + "\",status=\"" +
                 std::to_string(status) + "\",tenant=\"" + escape_label(tenant) + "\"",
             static_cast<double>(n));
    }
    header(out, "aoi_http_connections", "gauge", "Open HTTP connections, event streams and WebSockets included.");
    sample(out, "aoi_http_connections", "", static_cast<double>(open_connections()));
    header(out, "aoi_http_connections_refused_total", "counter", "Connections refused over --max-connections.");
    sample(out, "aoi_http_connections_refused_total", "",
           static_cast<double>(refused_connections_.load(std::memory_order_relaxed)));
    header(out, "aoi_http_request_duration_seconds", "histogram", "HTTP request latency by route.");
    for (const auto& [route, h] : request_seconds_) {
      h.render(out, "aoi_http_request_duration_seconds", "route=\"" + escape_label(route) + "\"");
    }
    header(out, "aoi_query_duration_seconds", "histogram",
           "Session query latency by answer path (flash, speculative, standard).");
    for (const auto& [path, h] : query_seconds_) {
      h.render(out, "aoi_query_duration_seconds", "path=\"" + escape_label(path) + "\"");
    }
    header(out, "aoi_completion_duration_seconds", "histogram", "Stateless completion latency by API.");
    for (const auto& [api, h] : completion_seconds_) {
      h.render(out, "aoi_completion_duration_seconds", "api=\"" + escape_label(api) + "\"");
    }
  }
  header(out, "aoi_records_pushed_total", "counter", "Records accepted by pushes.");
  sample(out, "aoi_records_pushed_total", "", static_cast<double>(st.records_pushed));
  header(out, "aoi_records_ingested_total", "counter", "Records decoded into sessions.");
  sample(out, "aoi_records_ingested_total", "", static_cast<double>(st.records_ingested));
  header(out, "aoi_records_dropped_total", "counter",
         "Records dropped before ingestion (queue overflow, failed batches, deleted sessions).");
  sample(out, "aoi_records_dropped_total", "", static_cast<double>(st.records_dropped));
  header(out, "aoi_records_rejected_total", "counter", "Records refused at ingestion (longer than the window).");
  sample(out, "aoi_records_rejected_total", "", static_cast<double>(st.records_rejected));
  header(out, "aoi_tokens_ingested_total", "counter", "Record tokens decoded into sessions.");
  sample(out, "aoi_tokens_ingested_total", "", static_cast<double>(st.tokens_ingested));
  header(out, "aoi_session_queries_total", "counter", "Session queries submitted.");
  sample(out, "aoi_session_queries_total", "", static_cast<double>(st.queries));
  header(out, "aoi_inference_passes_total", "counter", "Forward passes run by the inference loop.");
  sample(out, "aoi_inference_passes_total", "", static_cast<double>(st.loop.passes));
  header(out, "aoi_inference_tokens_total", "counter", "Rows (tokens) decoded by the inference loop, all lanes.");
  sample(out, "aoi_inference_tokens_total", "", static_cast<double>(st.loop.tokens));
  header(out, "aoi_inference_backoffs_total", "counter",
         "Passes built again because the KV cache had no slot for the batch.");
  sample(out, "aoi_inference_backoffs_total", "", static_cast<double>(st.loop.backoffs));
  header(out, "aoi_grouped_prefill_tokens_total", "counter",
         "Prefill tokens copied from a group leader instead of decoded again.");
  sample(out, "aoi_grouped_prefill_tokens_total", "", static_cast<double>(st.loop.grouped_tokens));
  header(out, "aoi_last_pass_tokens", "gauge", "Rows in the last forward pass.");
  sample(out, "aoi_last_pass_tokens", "", st.loop.last_pass_tokens);
  header(out, "aoi_pass_seconds", "gauge",
         "Duration of forward passes: the last one, and the longest of the last 64 (what a question may wait).");
  sample(out, "aoi_pass_seconds", "stat=\"last\"", st.loop.last_pass_ms / 1000);
  sample(out, "aoi_pass_seconds", "stat=\"max_recent\"", st.loop.max_recent_pass_ms / 1000);
  sample(out, "aoi_pass_seconds", "stat=\"predicted_last\"", st.loop.last_predicted_ms / 1000);
  header(out, "aoi_budgeted_passes_total", "counter",
         "Passes whose background or flash prefill the pass-time budget cut (--interactive-budget-ms).");
  sample(out, "aoi_budgeted_passes_total", "", static_cast<double>(st.loop.budgeted_passes));
  header(out, "aoi_lanes", "gauge", "Lanes (units of inference work, waiting ones included) by priority class.");
  for (int p = 0; p < sched::kPriorityCount; ++p) {
    sample(out, "aoi_lanes", std::string("priority=\"") + sched::priority_name(static_cast<sched::Priority>(p)) + "\"",
           st.loop.lanes[static_cast<size_t>(p)]);
  }
  header(out, "aoi_kv_cells_used", "gauge", "KV cache cells in use.");
  sample(out, "aoi_kv_cells_used", "", st.kv_cells_used);
  header(out, "aoi_kv_cells_capacity", "gauge", "KV cache cells in all.");
  sample(out, "aoi_kv_cells_capacity", "", st.kv_cells_total);
  header(out, "aoi_kv_cache_usage_ratio", "gauge", "KV cache cells in use over cells in all (0 to 1).");
  sample(out, "aoi_kv_cache_usage_ratio", "",
         st.kv_cells_total > 0 ? static_cast<double>(st.kv_cells_used) / st.kv_cells_total : 0.0);
  header(out, "aoi_kv_cells", "gauge",
         "Deprecated (usage and capacity in one series): aoi_kv_cells_used and aoi_kv_cells_capacity.");
  sample(out, "aoi_kv_cells", "state=\"used\"", st.kv_cells_used);
  sample(out, "aoi_kv_cells", "state=\"total\"", st.kv_cells_total);
  header(out, "aoi_kv_cells_per_sequence", "gauge",
         "Cells of each sequence's stream: what one session or completion may hold.");
  sample(out, "aoi_kv_cells_per_sequence", "", st.kv_cells_per_seq);
  header(out, "aoi_kv_cache_bytes_per_token", "gauge",
         "KV cache bytes one token occupies (all layers, K and V), by the cache's element types.");
  sample(out, "aoi_kv_cache_bytes_per_token",
         std::string("type_k=\"") + engine::kv_type_name(st.kv_type_k) + "\",type_v=\"" +
             engine::kv_type_name(st.kv_type_v) + "\"",
         st.kv_bytes_per_token);
  header(out, "aoi_sessions", "gauge", "Live sessions.");
  sample(out, "aoi_sessions", "", st.sessions);
  header(out, "aoi_sessions_by_residency", "gauge",
         "Sessions by where their state is: in the KV cache, on disk (restoring included), damaged.");
  sample(out, "aoi_sessions_by_residency", "residency=\"resident\"", st.sessions_resident);
  sample(out, "aoi_sessions_by_residency", "residency=\"on_disk\"", st.sessions_on_disk);
  sample(out, "aoi_sessions_by_residency", "residency=\"damaged\"", st.sessions_damaged);
  if (st.durable) {
    header(out, "aoi_snapshots_written_total", "counter", "Session snapshots written to the data directory.");
    sample(out, "aoi_snapshots_written_total", "", static_cast<double>(st.snapshots_written));
    header(out, "aoi_snapshot_errors_total", "counter", "Session snapshots that could not be written.");
    sample(out, "aoi_snapshot_errors_total", "", static_cast<double>(st.snapshot_errors));
    header(out, "aoi_snapshot_bytes", "gauge", "Size of the last snapshot written.");
    sample(out, "aoi_snapshot_bytes", "", static_cast<double>(st.snapshot_bytes));
    header(out, "aoi_log_syncs_total", "counter", "fdatasync calls on session logs.");
    sample(out, "aoi_log_syncs_total", "", static_cast<double>(st.log_syncs));
  }
  // Requests that ran inference, by kind: what vLLM's and llama-server's dashboards read.
  const auto by_kind = [&](const char* name, const char* type, const char* help, auto&& each) {
    header(out, name, type, help);
    for (int k = 0; k < service::kRequestKindCount; ++k) {
      each(std::string("kind=\"") + service::request_kind_name(static_cast<service::RequestKind>(k)) + "\"",
           st.requests[static_cast<size_t>(k)]);
    }
  };
  using Kind = service::RequestKindStats;
  by_kind("aoi_time_to_first_token_seconds", "histogram",
          "Submission to the first sampled token, by kind (question, completion, flash).",
          [&](const std::string& l, const Kind& k) {
            render_histogram(out, "aoi_time_to_first_token_seconds", l, k.time_to_first_token);
          });
  by_kind("aoi_inter_token_latency_seconds", "histogram",
          "Time per generated token after the first: each request's decode time over its tokens - 1, observed once "
          "per token.",
          [&](const std::string& l, const Kind& k) {
            render_histogram(out, "aoi_inter_token_latency_seconds", l, k.inter_token);
          });
  by_kind("aoi_e2e_request_latency_seconds", "histogram", "Submission to the complete answer, by kind.",
          [&](const std::string& l, const Kind& k) {
            render_histogram(out, "aoi_e2e_request_latency_seconds", l, k.end_to_end);
          });
  by_kind("aoi_request_queue_time_seconds", "histogram",
          "Submission to the first step (a sequence, the session's primary, the data asked for), by kind.",
          [&](const std::string& l, const Kind& k) {
            render_histogram(out, "aoi_request_queue_time_seconds", l, k.queue);
          });
  by_kind("aoi_prompt_tokens_total", "counter", "Prompt tokens decoded for requests (cached ones not), by kind.",
          [&](const std::string& l, const Kind& k) {
            sample(out, "aoi_prompt_tokens_total", l, static_cast<double>(k.prompt_tokens));
          });
  by_kind("aoi_generation_tokens_total", "counter", "Answer tokens generated, by kind.",
          [&](const std::string& l, const Kind& k) {
            sample(out, "aoi_generation_tokens_total", l, static_cast<double>(k.generated_tokens));
          });
  // Flash questions are the sessions' background work, not requests anyone waits on: no gauges.
  const auto gauge = [&](const char* name, const char* help, int Kind::*field) {
    header(out, name, "gauge", help);
    for (const auto kind : {service::RequestKind::kQuestion, service::RequestKind::kCompletion}) {
      sample(out, name, std::string("kind=\"") + service::request_kind_name(kind) + "\"",
             st.requests[static_cast<size_t>(kind)].*field);
    }
  };
  gauge("aoi_requests_running", "Questions and completions the inference loop is working on.", &Kind::running);
  gauge("aoi_requests_waiting",
        "Questions and completions waiting for their turn (a completion slot, the session's primary, data).",
        &Kind::waiting);

  // Series of their own for the per_session most active sessions only.
  std::vector<const service::SessionView*> shown;
  for (const auto& s : sessions) shown.push_back(&s);
  const size_t n_shown = std::min(per_session, shown.size());
  std::partial_sort(shown.begin(), shown.begin() + static_cast<std::ptrdiff_t>(n_shown), shown.end(),
                    [](const service::SessionView* a, const service::SessionView* b) {
                      return a->data_version != b->data_version ? a->data_version > b->data_version : a->id < b->id;
                    });
  shown.resize(n_shown);
  header(out, "aoi_session_background_seconds", "gauge",
         "Background work per data version (ingestion, scaffold, flash round), by session and kind.");
  for (const service::SessionView* sp : shown) {
    const service::SessionView& s = *sp;
    const std::string id = session_labels(s.id);
    sample(out, "aoi_session_background_seconds", id + ",kind=\"ingest\"", s.ingest_ms / 1000);
    sample(out, "aoi_session_background_seconds", id + ",kind=\"flash\"", s.flash_ms / 1000);
  }
  header(out, "aoi_session_data_interval_seconds", "gauge", "Smoothed time between pushes, by session.");
  for (const service::SessionView* s : shown) {
    sample(out, "aoi_session_data_interval_seconds", session_labels(s->id), s->data_interval_ms / 1000);
  }
  header(out, "aoi_session_data_version", "gauge", "Data version, by session.");
  for (const service::SessionView* s : shown) {
    sample(out, "aoi_session_data_version", session_labels(s->id), static_cast<double>(s->data_version));
  }
  if (sources != nullptr) {
    const sources::SourceTotals& t = sources->totals;
    header(out, "aoi_sources", "gauge", "Source sessions' consumers by state.");
    sample(out, "aoi_sources", "state=\"connected\"", t.connected);
    sample(out, "aoi_sources", "state=\"disconnected\"", t.disconnected);
    header(out, "aoi_sources_waiting_for_room", "gauge",
           "Connected sources paused because their session's queue is full (overflow lag).");
    sample(out, "aoi_sources_waiting_for_room", "", t.waiting_for_room);
    header(out, "aoi_source_messages_total", "counter", "Messages the sources read from their brokers.");
    sample(out, "aoi_source_messages_total", "", static_cast<double>(t.messages));
    header(out, "aoi_source_rejected_total", "counter",
           "Source messages that could not be decoded or that their session refused (each an error event).");
    sample(out, "aoi_source_rejected_total", "", static_cast<double>(t.rejected));
    header(out, "aoi_source_reconnects_total", "counter", "Source connections lost or refused, and tried again.");
    sample(out, "aoi_source_reconnects_total", "", static_cast<double>(t.reconnects));
    header(out, "aoi_source_lag_seconds", "gauge",
           "The most any source session is behind its source's end, in seconds.");
    sample(out, "aoi_source_lag_seconds", "", t.max_lag_seconds);
    header(out, "aoi_source_lag_records", "gauge",
           "The most messages any source session has yet to read (Kafka; brokers that tell it).");
    sample(out, "aoi_source_lag_records", "", static_cast<double>(t.max_lag_records));
    // Of the sessions shown above, those with a source.
    std::map<std::string, const sources::SourceStatus*> by_id;
    for (const auto& [id, status] : sources->by_session) by_id[id] = &status;
    const auto per_source = [&](const char* name, const char* help, auto value) {
      header(out, name, "gauge", help);
      for (const service::SessionView* sp : shown) {
        if (const auto it = by_id.find(sp->id); it != by_id.end()) {
          sample(out, name, session_labels(sp->id), value(*it->second));
        }
      }
    };
    if (sources->sinks) {
      const sources::SinkTotals& k = *sources->sinks;
      header(out, "aoi_sinks", "gauge", "Flash queries' sinks by state (failing: an error since the last success).");
      sample(out, "aoi_sinks", "state=\"ok\"", k.sinks - k.failing);
      sample(out, "aoi_sinks", "state=\"failing\"", k.failing);
      header(out, "aoi_sink_published_total", "counter", "Flash answers the sinks have (acknowledged).");
      sample(out, "aoi_sink_published_total", "", static_cast<double>(k.published));
      header(out, "aoi_sink_skipped_total", "counter", "Flash answers the sinks' notify rules left out.");
      sample(out, "aoi_sink_skipped_total", "", static_cast<double>(k.skipped));
      header(out, "aoi_sink_failures_total", "counter", "Publishes to sinks that failed (each tried again).");
      sample(out, "aoi_sink_failures_total", "", static_cast<double>(k.failures));
      header(out, "aoi_sink_dropped_total", "counter", "Flash answers dropped from a sink's full queue.");
      sample(out, "aoi_sink_dropped_total", "", static_cast<double>(k.dropped));
      header(out, "aoi_sink_pending", "gauge", "Flash answers waiting for their sinks.");
      sample(out, "aoi_sink_pending", "", static_cast<double>(k.pending));
    }
    per_source("aoi_session_source_lag_seconds", "How far behind its stream, by session.",
               [](const sources::SourceStatus& source) { return source.lag_seconds; });
    per_source("aoi_session_source_lag_records", "Messages the session's source has yet to read, by session.",
               [](const sources::SourceStatus& source) { return static_cast<double>(source.lag_records.value_or(0)); });
    per_source("aoi_session_source_connected", "1 while the session's source is connected, by session.",
               [](const sources::SourceStatus& source) { return source.connected ? 1.0 : 0.0; });
  }
  // By tenant: what each holds, and what its quotas refused.
  std::map<std::string, std::array<double, 3>> held;  // sessions, cells used, cells of the windows
  for (const auto& s : sessions) {
    auto& h = held[tenant_of(s.id)];
    h[0] += 1;
    h[1] += s.kv_cells_used;
    h[2] += static_cast<double>(s.window_cells());
  }
  header(out, "aoi_tenant_sessions", "gauge", "Sessions by tenant (\"\": an admin's).");
  for (const auto& [tenant, h] : held)
    sample(out, "aoi_tenant_sessions", "tenant=\"" + escape_label(tenant) + "\"", h[0]);
  header(out, "aoi_tenant_kv_cells", "gauge",
         "KV cells by tenant: used now, and what its sessions' windows may grow to (what the cells quota bounds).");
  for (const auto& [tenant, h] : held) {
    const std::string t = "tenant=\"" + escape_label(tenant) + "\"";
    sample(out, "aoi_tenant_kv_cells", t + ",state=\"used\"", h[1]);
    sample(out, "aoi_tenant_kv_cells", t + ",state=\"window\"", h[2]);
  }
  header(out, "aoi_quota_refusals_total", "counter", "Requests refused by a tenant's quota, by tenant and quota.");
  for (const auto& [key, n] : tenants.refusals) {
    sample(out, "aoi_quota_refusals_total",
           "tenant=\"" + escape_label(key.first) + "\",quota=\"" + escape_label(key.second) + "\"",
           static_cast<double>(n));
  }
  header(out, "aoi_pool_slots", "gauge", "Stateless completion slots: busy and total.");
  sample(out, "aoi_pool_slots", "state=\"busy\"", st.pool_busy);
  sample(out, "aoi_pool_slots", "state=\"total\"", st.pool_slots);
  const cache::PrefixCacheStats& pc = st.prefix_cache;
  header(out, "aoi_prefix_cache_lookups_total", "counter", "Completion slots handed out by the prefix cache.");
  sample(out, "aoi_prefix_cache_lookups_total", "", static_cast<double>(pc.lookups));
  header(out, "aoi_prefix_cache_hits_total", "counter", "Completions that started from a cached prefix.");
  sample(out, "aoi_prefix_cache_hits_total", "", static_cast<double>(pc.hits));
  header(out, "aoi_prefix_cache_tokens_total", "counter", "Prompt tokens restored from cached prefixes, not decoded.");
  sample(out, "aoi_prefix_cache_tokens_total", "", static_cast<double>(pc.tokens_restored));
  header(out, "aoi_prefix_cache_copies_total", "counter",
         "Cached prefixes copied from another sequence (the others were used in place).");
  sample(out, "aoi_prefix_cache_copies_total", "", static_cast<double>(pc.copies));
  header(out, "aoi_prefix_cache_evictions_total", "counter", "Cached prefixes given up for room.");
  sample(out, "aoi_prefix_cache_evictions_total", "", static_cast<double>(pc.evictions));
  header(out, "aoi_prefix_cache_cells", "gauge", "KV cells idle completion slots keep as cached prefixes.");
  sample(out, "aoi_prefix_cache_cells", "", pc.cached_cells);
  const auto lru = [&](const char* name, const char* help, const cache::LruStats& c) {
    header(out, name, "counter", help);
    const std::string n(name);
    sample(out, name, "result=\"hit\"", static_cast<double>(c.hits));
    sample(out, name, "result=\"miss\"", static_cast<double>(c.misses));
  };
  lru("aoi_response_cache_lookups_total", "Cacheable completion requests, answered from the response cache or not.",
      st.response_cache);
  lru("aoi_render_cache_lookups_total", "Chat-template renderings looked up by their messages.", st.render_cache);
  lru("aoi_token_cache_lookups_total", "Prompt tokenizations looked up by their text.", st.token_cache);
  header(out, "aoi_draft_tokens_total", "counter",
         "Prompt-lookup draft tokens verified beside sampled tokens (completions and session questions).");
  sample(out, "aoi_draft_tokens_total", "", static_cast<double>(st.draft_tokens));
  header(out, "aoi_draft_accepted_total", "counter", "Draft tokens the model then sampled: each saved a pass.");
  sample(out, "aoi_draft_accepted_total", "", static_cast<double>(st.draft_accepted));
  return out;
}

}  // namespace aoi::server
