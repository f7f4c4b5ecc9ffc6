// The analyst model's training windows as token ids, tokenized by aoi itself: the training script
// (scripts/train_analyst.py) pipes aoi-analyst-data's windows through this tool with a GGUF of the model being
// trained, so what the model learns from is exactly what a session decodes (Region 0, records, the question
// region), whatever the vocabulary, with no tokenizer of the script's own to drift from llama.cpp's.
//
//   aoi-analyst-data ... | aoi-analyst-tokens MODEL.gguf
//
// Reads aoi-analyst-data's lines and writes each one back with a "tokens" object added:
//   {"region0": [...], "records": [[...], ...], "prompts": [[...], ...], "answers": [[...], ...]}
// region0 is Session::region0_tokens; records[i] is record i with its newline; prompts[j] is question j's
// region (scaffold, question, question close); answers[j] is its answer's tokens (without the end-of-turn token).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aoi/engine/model.h"
#include "aoi/session/prompt_layout.h"
#include "aoi/session/session.h"

namespace {

using aoi::engine::Model;
using aoi::engine::Token;

void append(std::vector<Token>& to, const std::vector<Token>& tokens) {
  to.insert(to.end(), tokens.begin(), tokens.end());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: aoi-analyst-data ... | aoi-analyst-tokens MODEL.gguf\n");
    return 2;
  }
  auto loaded = Model::load({.path = argv[1]});
  if (!loaded) {
    std::fprintf(stderr, "aoi-analyst-tokens: %s\n", loaded.error().message.c_str());
    return 1;
  }
  const Model& model = **loaded;
  const auto layout = aoi::session::PromptLayout::for_model(model);
  const auto text = [&model](const std::string& s) { return model.tokenize(s, false, /*parse_special=*/false); };
  const auto marker = [&model](const std::string& s) { return model.tokenize(s, false, /*parse_special=*/true); };
  const std::vector<Token> scaffold = marker(layout.scaffold);
  const std::vector<Token> question_close = marker(layout.question_close);

  std::string line;
  while (std::getline(std::cin, line)) {
    nlohmann::json window = nlohmann::json::parse(line);
    const std::vector<Token> region0 =
        aoi::session::Session::region0_tokens(model, layout, window.at("system").get<std::string>());
    nlohmann::json records = nlohmann::json::array();
    for (const auto& r : window.at("records")) records.push_back(text(r.get<std::string>() + "\n"));
    nlohmann::json prompts = nlohmann::json::array();
    nlohmann::json answers = nlohmann::json::array();
    for (const auto& q : window.at("questions")) {
      std::vector<Token> prompt = scaffold;
      append(prompt, text(q.at("question").get<std::string>()));
      append(prompt, question_close);
      prompts.push_back(std::move(prompt));
      answers.push_back(text(q.at("answer").get<std::string>()));
    }
    window["tokens"] = {{"region0", region0}, {"records", records}, {"prompts", prompts}, {"answers", answers}};
    std::cout << window.dump() << '\n';
  }
  return std::cout.good() ? 0 : 1;
}
