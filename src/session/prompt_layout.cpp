#include "aoi/session/prompt_layout.h"

#include <array>

#include "aoi/engine/model.h"

namespace aoi::session {

PromptLayout PromptLayout::plain() { return {"", "\nQuestion: ", "\nAnswer:"}; }

PromptLayout PromptLayout::for_model(const engine::Model& model) {
  // Render [system: S, user: U] with the assistant opener and cut the text at the markers:
  // "<open>S<scaffold>U<close>". Markers are control bytes no template emits by itself.
  static constexpr std::string_view kSystem = "\x01system\x01";
  static constexpr std::string_view kUser = "\x01user\x01";
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
  // A leading BOS rendered by the template would be doubled by the tokenizer's own BOS.
  const std::string bos_text = model.token_to_piece(model.bos(), /*special=*/true);
  if (model.adds_bos() && !bos_text.empty() && layout.system_open.rfind(bos_text, 0) == 0) {
    layout.system_open.erase(0, bos_text.size());
  }
  return layout;
}

}  // namespace aoi::session
