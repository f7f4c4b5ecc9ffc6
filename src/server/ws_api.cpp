// GET /v1/sessions/{id}/ws: one socket that pushes records, asks questions and receives the session's events.
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>

#include "aoi/server/http_error.h"
#include "aoi/service/service.h"
#include "async.h"
#include "event_json.h"
#include "http.h"
#include "json_fields.h"
#include "records_body.h"
#include "session_json.h"

namespace aoi::server {
namespace {

namespace websocket = beast::websocket;
using nlohmann::json;
using Socket = websocket::stream<beast::tcp_stream>;

struct Outbox {
  std::shared_ptr<Mailbox<std::string>> frames;
  std::shared_ptr<std::atomic<bool>> closed;  // the socket is gone: its queries stop
  void send(const json& frame) const { frames->put(dump(frame)); }
};

json with_ref(json frame, const json& ref) {
  if (!ref.is_null()) frame["ref"] = ref;
  return frame;
}

void send_error(const Outbox& out, const Error& e, const json& ref) {
  out.send(with_ref({{"op", "error"}, {"error", error_object(e)}}, ref));
}

// A quota refusal on the socket: the error names the quota and carries retry_after (seconds), as HTTP's 429
// carries Retry-After.
void send_refusal(const Outbox& out, const QuotaRefusal& refusal, const json& ref) {
  json error = error_object(Error{ErrorType::kQuotaExceeded, refusal.message, refusal.quota});
  error["retry_after"] = refusal.retry_after_s;
  out.send(with_ref({{"op", "error"}, {"error", std::move(error)}}, ref));
}

// Every frame acts on the session the socket was opened on (call.session), never on whichever has its id later.
void handle_frame(Call& call, const std::string& text, const Outbox& out) {
  service::Service& svc = call.service;
  const auto& session = call.session;
  auto frame = parse_object(text);
  if (!frame) return send_error(out, frame.error(), nullptr);
  const json ref = frame->contains("ref") ? (*frame)["ref"] : json(nullptr);
  const std::string op = frame->contains("op") && (*frame)["op"].is_string() ? (*frame)["op"].get<std::string>() : "";
  if (op == "push") {
    auto records = parse_records_json(text, {"op", "ref"});
    if (!records) return send_error(out, records.error(), ref);
    if (auto refused = call.quotas.take_records(*call.tenant, static_cast<double>(records->size()))) {
      return send_refusal(out, *refused, ref);
    }
    auto pushed = svc.push(session, std::move(records).value());
    if (!pushed) return send_error(out, pushed.error(), ref);
    json reply = push_json(*pushed);
    reply["op"] = "pushed";
    return out.send(with_ref(std::move(reply), ref));
  }
  if (op == "query") {
    json body = *frame;
    body.erase("op");
    body.erase("ref");
    AnswerForm form;
    auto request = parse_query(body, form);
    if (!request) return send_error(out, request.error(), ref);
    if (auto refused = call.quotas.take_query(*call.tenant)) return send_refusal(out, *refused, ref);
    request->cancelled = out.closed;
    svc.query(session, std::move(request).value(),
              [out, ref, details = form.details](service::AnswerEvent<service::QueryOutcome> event) {
                if (auto* piece = std::get_if<service::TextPiece>(&event)) {
                  return out.send(with_ref({{"op", "token"}, {"text", piece->text}}, ref));
                }
                auto& r = std::get<Result<service::QueryOutcome>>(event);
                if (!r) return send_error(out, r.error(), ref);
                json reply = answer_json(*r, details);
                reply["op"] = "answer";
                out.send(with_ref(std::move(reply), ref));
              });
    return;
  }
  if (op == "flash_add") {
    json body = *frame;
    body.erase("op");
    body.erase("ref");
    auto flash = parse_flash(body);
    if (!flash) return send_error(out, flash.error(), ref);
    if (auto refused = call.quotas.take_query(*call.tenant)) return send_refusal(out, *refused, ref);
    auto added = svc.add_flash(session, std::move(flash).value());
    if (!added) return send_error(out, added.error(), ref);
    json reply = flash_json(*added);
    reply["op"] = "flash_added";
    return out.send(with_ref(std::move(reply), ref));
  }
  if (op == "flash_list") {
    auto list = svc.list_flash(session);
    if (!list) return send_error(out, list.error(), ref);
    json items = json::array();
    for (const auto& f : *list) items.push_back(flash_json(f));
    return out.send(with_ref({{"op", "flash_list"}, {"flash", items}}, ref));
  }
  if (op == "flash_remove") {
    const std::string fid = frame->value("fid", "");
    if (Status st = svc.remove_flash(session, fid); !st) return send_error(out, st.error(), ref);
    return out.send(with_ref({{"op", "flash_removed"}, {"fid", fid}}, ref));
  }
  send_error(out, Error::invalid("op", op.empty() ? "a frame needs \"op\"" : "unknown op \"" + op + "\""), ref);
}

net::awaitable<void> write_loop(std::shared_ptr<Socket> ws, std::shared_ptr<Mailbox<std::string>> frames) {
  for (;;) {
    auto batch = co_await frames->take(std::chrono::seconds(30));
    for (const auto& text : batch) {
      boost::system::error_code ec;
      ws->text(true);
      co_await ws->async_write(net::buffer(text), net::redirect_error(net::use_awaitable, ec));
      if (ec) {
        frames->close();
        co_return;
      }
    }
    if (batch.empty() && frames->closed()) {
      // Closed by session_moved (not by the reader, which has stopped): the socket goes too, so that the client
      // connects again and reaches the session where it is now.
      boost::system::error_code ec;
      if (ws->is_open()) {
        co_await ws->async_close(websocket::close_reason(websocket::close_code::service_restart, "session moved"),
                                 net::redirect_error(net::use_awaitable, ec));
      }
      co_return;
    }
  }
}

}  // namespace

net::awaitable<void> serve_websocket(Call& call) {
  const auto handle = call.session;
  boost::system::error_code ec;
  auto ws = std::make_shared<Socket>(std::move(call.stream));
  ws->set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws->read_message_max(call.options.max_body_bytes);

  // Subscribed before the handshake completes: a client that pushes once the socket is open must see that
  // push's events (they wait in the mailbox until the writer starts).
  const auto executor = co_await net::this_coro::executor;
  Outbox out{std::make_shared<Mailbox<std::string>>(executor), std::make_shared<std::atomic<bool>>(false)};
  auto frames = out.frames;
  const auto token = handle->events().subscribe([frames](const service::Event& e) {
    frames->put(dump({{"op", "event"}, {"event", event_name(e.body)}, {"id", e.id}, {"data", event_data(e.body)}}));
    if (e.as<service::SessionMoved>()) frames->close();
  });
  co_await ws->async_accept(call.request, net::redirect_error(net::use_awaitable, ec));
  if (ec) {
    handle->events().unsubscribe(token);
    co_return;
  }
  net::co_spawn(executor, write_loop(ws, frames), net::detached);

  beast::flat_buffer buffer;
  for (;;) {
    buffer.clear();
    co_await ws->async_read(buffer, net::redirect_error(net::use_awaitable, ec));
    if (ec) break;
    if (!ws->got_text()) {
      send_error(out, Error::malformed("frames are JSON text"), nullptr);
      continue;
    }
    handle_frame(call, beast::buffers_to_string(buffer.data()), out);
  }
  handle->events().unsubscribe(token);
  out.closed->store(true);
  frames->close();
}

}  // namespace aoi::server
