// Forked flash evaluation: the session's sequence is aliased into k scratch sequences (metadata only in a
// unified KV cache) and k questions are answered together, greedy, sharing forward passes: the questions'
// tokens are packed into as few batches as fit, then every step decodes one token for each answer still
// growing. The session's own sequence is only read. Inference thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/engine/batch.h"
#include "aoi/engine/generation.h"
#include "aoi/session/session.h"

namespace aoi::session {

struct ForkQuestion {
  std::string question;
  int max_tokens = 8;
};

struct ForkAnswer {
  std::string text;
  std::vector<Token> tokens;
  engine::FinishReason finish = engine::FinishReason::kNone;
  float first_gap = 0;  // top-1 minus top-2 logit of the first answer token
};

class FlashFork {
 public:
  // scratch: one free sequence per question (emptied here, and again when the fork ends). Fails on a bad
  // question (field "question").
  static Result<std::unique_ptr<FlashFork>> start(Session& session, std::vector<ForkQuestion> questions,
                                                  std::vector<SeqId> scratch);
  ~FlashFork();
  FlashFork(const FlashFork&) = delete;
  FlashFork& operator=(const FlashFork&) = delete;

  // One forward pass.
  Result<StepResult> step();
  bool done() const { return done_; }
  const std::vector<ForkAnswer>& answers() const { return answers_; }
  std::uint64_t data_version() const { return version_; }

 private:
  struct Lane {
    SeqId seq = -1;
    std::vector<Token> prompt;  // question (+ scaffold when the session's is not decoded)
    size_t prompt_done = 0;
    Pos pos = 0;  // next position
    int max_tokens = 0;
    Token next = engine::kNoToken;  // sampled, to be decoded
    bool finished = false;
    engine::TextStream text{{}};
    int batch_row = -1;  // index in the current batch of the token whose logits this lane reads
  };

  FlashFork(Session& session, std::vector<SeqId> scratch);
  void sample(Lane& lane, ForkAnswer& answer);

  Session& session_;
  std::vector<SeqId> scratch_;
  std::vector<Lane> lanes_;
  std::vector<ForkAnswer> answers_;
  engine::Batch batch_;
  std::uint64_t version_ = 0;
  bool done_ = false;
};

}  // namespace aoi::session
