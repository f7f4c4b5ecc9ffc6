// Where a session's text goes around the model's chat template:
//
//   [BOS] system_open + system + "\n"  | record "\n" record "\n" ... | scaffold | question + question_close | answer
//   ------------ Region 0 ------------   --------- Region 1 ---------   -------------- Region 2 ------------------
//
// For a chat model the data sits in the system turn and the question is the user turn, e.g. for Llama 3:
//   system_open    = "<|start_header_id|>system<|end_header_id|>\n\n"
//   scaffold       = "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
//   question_close = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
// A conversation asked of a session puts its earlier exchanges in Region 2 as the template lays out turns:
//   question + answer_open + answer + turn_reopen + ... + question + question_close
// answer_open closes an earlier question and opens the assistant's turn (question_close's text for most
// templates); turn_reopen ends the assistant's turn and opens the next user turn (Llama 3:
// "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n", the scaffold's text, but not for every template:
// Gemma's system text shares the first user turn).
// A model without a chat template gets a plain "Question:/Answer:" layout.
#pragma once

#include <string>

namespace aoi::engine {
class Model;
}

namespace aoi::session {

struct PromptLayout {
  std::string system_open;
  std::string scaffold;
  std::string question_close;
  std::string answer_open;
  std::string turn_reopen;

  // Derived by rendering a marker conversation through the model's chat template.
  static PromptLayout for_model(const engine::Model& model);
  static PromptLayout plain();
};

}  // namespace aoi::session
