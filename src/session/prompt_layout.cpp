#include "aoi/session/prompt_layout.h"

#include <array>
#include <optional>
#include <string_view>

#include "aoi/engine/model.h"

namespace aoi::session {

PromptLayout PromptLayout::plain() { return {"", "\nQuestion: ", "\nAnswer:", "\nAnswer:", "\nQuestion: "}; }

namespace {

// Markers are control bytes no template emits by itself.
constexpr std::string_view kSystem = "\x01system\x01";
constexpr std::string_view kUser = "\x01user\x01";
constexpr std::string_view kAnswer = "\x01answer\x01";
constexpr std::string_view kNext = "\x01next\x01";

// The text between two markers of a rendering: nullopt when either is missing, they are out of order, or another
// message's text sits between them.
std::optional<std::string> between(const std::string& text, std::string_view from, std::string_view to) {
  const size_t a = text.find(from);
  const size_t b = text.find(to);
  if (a == std::string::npos || b == std::string::npos || b < a + from.size()) return std::nullopt;
  std::string piece = text.substr(a + from.size(), b - a - from.size());
  if (piece.find('\x01') != std::string::npos) return std::nullopt;
  return piece;
}

}  // namespace

PromptLayout PromptLayout::for_model(const engine::Model& model) {
  // Render [system: S, user: U] with the assistant opener and cut the text at the markers:
  // "<open>S<scaffold>U<close>".
  const std::array<engine::ChatMessage, 2> chat = {
      engine::ChatMessage{"system", std::string(kSystem)},
      engine::ChatMessage{"user", std::string(kUser)},
  };
  auto rendered = model.apply_chat_template(chat, /*add_assistant=*/true);
  if (!rendered) return plain();
  const std::string& text = *rendered;
  const size_t s = text.find(kSystem);
  const size_t u = text.find(kUser);
  if (s == std::string::npos || u == std::string::npos || u < s) return plain();
  PromptLayout layout;
  layout.system_open = text.substr(0, s);
  layout.scaffold = text.substr(s + kSystem.size(), u - s - kSystem.size());
  layout.question_close = text.substr(u + kUser.size());
  // Then the turns of a conversation, [user: U, assistant: A, user: V]: "...U<answer_open>A<turn_reopen>V...".
  // Without a system message: some templates move it into the last user turn (Mistral's), and a session's
  // system text is in Region 0 whatever the template does with it. A template that renders no such
  // conversation gets the one-question layout's pieces.
  layout.answer_open = layout.question_close;
  layout.turn_reopen = layout.scaffold;
  const std::array<engine::ChatMessage, 3> conversation = {
      engine::ChatMessage{"user", std::string(kUser)},
      engine::ChatMessage{"assistant", std::string(kAnswer)},
      engine::ChatMessage{"user", std::string(kNext)},
  };
  if (auto turns = model.apply_chat_template(conversation, /*add_assistant=*/true)) {
    auto answer_open = between(*turns, kUser, kAnswer);
    auto turn_reopen = between(*turns, kAnswer, kNext);
    if (answer_open && turn_reopen) {
      layout.answer_open = std::move(*answer_open);
      layout.turn_reopen = std::move(*turn_reopen);
    }
  }
  // A leading BOS rendered by the template would be doubled by the tokenizer's own BOS.
  const std::string bos_text = model.token_to_piece(model.bos(), /*special=*/true);
  if (model.adds_bos() && !bos_text.empty() && layout.system_open.rfind(bos_text, 0) == 0) {
    layout.system_open.erase(0, bos_text.size());
  }
  return layout;
}

}  // namespace aoi::session
