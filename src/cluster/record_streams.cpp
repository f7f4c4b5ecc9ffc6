#include "aoi/cluster/record_streams.h"

#include <nats/nats.h>

#include <algorithm>

#include "aoi/cluster/kv_bucket.h"
#include "aoi/sources/nats_open.h"
#include "aoi/sources/source_url.h"
#include "nats_connection_impl.h"
#include "nats_status.h"

namespace aoi::cluster {

std::string RecordStreams::stream_name(std::string_view session) { return "AOI_REC_" + bucket_key(session); }

std::string RecordStreams::subject(std::string_view session) { return "aoi.rec." + bucket_key(session); }

std::string RecordStreams::source_url(std::string_view session) const {
  sources::SourceUrl url{.endpoints = nats_.servers()};
  return "nats://" + url.where() + "/" + subject(session) + "?stream=" + stream_name(session);
}

Result<std::uint64_t> RecordStreams::ensure(std::string_view session) {
  const std::string name = stream_name(session);
  const std::string subj = subject(session);
  const char* subjects[] = {subj.c_str()};
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = name.c_str();
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  cfg.Replicas = replicas_;
  jsStreamInfo* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_AddStream(&raw, nats_.impl().js, &cfg, nullptr, &code);
  // Created now, or by an earlier call with the same configuration (JetStream answers that as a success);
  // made with another configuration (an older replica's copies): asked for what it holds.
  if (s != NATS_OK && code == JSStreamNameExistErr) {
    jsStreamInfo_Destroy(raw);
    raw = nullptr;
    code = static_cast<jsErrCode>(0);
    s = js_GetStreamInfo(&raw, nats_.impl().js, name.c_str(), nullptr, &code);
  }
  sources::NatsPtr<jsStreamInfo> info(raw);
  if (s != NATS_OK || info == nullptr) {
    return Error::not_ready(nats_.where() + ": stream " + name + ": " + sources::nats_status_text(s));
  }
  return info->State.LastSeq;
}

Result<Published> RecordStreams::publish(std::string_view session, const std::vector<std::string>& messages,
                                         std::string_view idempotency_key) {
  const std::string subj = subject(session);
  const std::string name = stream_name(session);
  jsPubOptions opts;
  jsPubOptions_Init(&opts);
  opts.ExpectStream = name.c_str();
  Published out;
  // One at a time, each acknowledged before the next: the stream holds them in the order given, and an
  // error leaves a known prefix published.
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& m = messages[i];
    const std::string msg_id = idempotency_key.empty() ? "" : std::string(idempotency_key) + "/" + std::to_string(i);
    opts.MsgId = msg_id.empty() ? nullptr : msg_id.c_str();
    jsPubAck* ack = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus s =
        js_Publish(&ack, nats_.impl().js, subj.c_str(), m.data(), static_cast<int>(m.size()), &opts, &code);
    if (s != NATS_OK) {
      jsPubAck_Destroy(ack);
      // No responders too: the stream's servers may be electing a new leader (one of them died).
      return Error::not_ready(nats_.where() + ": publish to " + name + ": " + sources::nats_status_text(s) +
                              (out.last_seq != 0 ? " (after seq " + std::to_string(out.last_seq) + ")" : ""));
    }
    // A repeated message (its id seen) is acknowledged with the sequence the stream holds it at.
    if (out.first_seq == 0) out.first_seq = ack->Sequence;
    out.last_seq = std::max(out.last_seq, ack->Sequence);
    jsPubAck_Destroy(ack);
  }
  return out;
}

Status RecordStreams::remove(std::string_view session) {
  const std::string name = stream_name(session);
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_DeleteStream(nats_.impl().js, name.c_str(), nullptr, &code);
  if (s == NATS_OK || s == NATS_NOT_FOUND || code == JSStreamNotFoundErr) return {};
  return Error::not_ready(nats_.where() + ": delete stream " + name + ": " + sources::nats_status_text(s));
}

Result<StreamExtent> RecordStreams::extent(std::string_view session) {
  const std::string name = stream_name(session);
  jsStreamInfo* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetStreamInfo(&raw, nats_.impl().js, name.c_str(), nullptr, &code);
  sources::NatsPtr<jsStreamInfo> info(raw);
  if (s == NATS_NOT_FOUND || code == JSStreamNotFoundErr) return Error::not_found("no stream " + name);
  if (s != NATS_OK || info == nullptr) {
    return Error::not_ready(nats_.where() + ": stream " + name + ": " + sources::nats_status_text(s));
  }
  return StreamExtent{.first_seq = info->State.FirstSeq, .last_seq = info->State.LastSeq};
}

}  // namespace aoi::cluster
