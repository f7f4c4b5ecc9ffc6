#!/usr/bin/python3
"""Trains the analyst model (models/analyst.gguf) on this machine's CPU: a small Llama-architecture transformer
with a vocabulary of characters or one made for bars (Vocab) and ChatML turns, from the benchmark's own OHLCV
streams and questions (aoi-analyst-data, tokenized by aoi-analyst-tokens), then writes it as a GGUF with
llama.cpp's gguf-py and prints its held-out accuracy.

    scripts/train-analyst.sh            the whole recipe (installs, builds the data tools, trains, exports)
    train_analyst.py --data-tool BIN --tokens-tool BIN --gguf-py DIR --out FILE [--steps N] [--seed S]

Each training sequence is one window of bars as a session holds it (Region 0: the chat template's system
opener, the system text and `\n`; then one record per line), followed by question blocks asked after some of
its records. A block is aoi's Region 2 (the scaffold `<|im_end|>\n<|im_start|>user\n`, the question, the
question close `<|im_end|>\n<|im_start|>assistant\n`) with the answer and `<|im_end|>`, placed at the
positions right after the record it is asked after, and it sees only the records up to there and itself: one
pass over a window teaches many questions at many points of it, exactly as aoi's ephemeral question region sees
the session. The loss is the answers' and the records' next-token loss beside it (--record-weight).
"""
import argparse
import json
import math
import random
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

# The chat template in the GGUF: ChatML, which llama.cpp's llama_chat_apply_template recognises.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>'"
    " + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


class Vocab:
    """The model's tokens, with llama.cpp's SentencePiece ("llama") conventions: a space is U+2581, and anything
    unlisted goes through byte tokens. Two kinds (--vocab):

    chars: one token per printable ASCII character and nothing longer, so llama.cpp's tokenizer makes one token
           per character: a bar is about 59 tokens, a price 6.
    bars:  the characters, then pieces llama.cpp's tokenizer puts together the way bars and questions need:
           digit runs of two and three, the field openers (",O", ",O=" ...), and the chat roles and the words of
           the system text and the questions, alone and after a space, each with all its prefixes. A piece's
           score is its length, so the tokenizer's highest-score-then-leftmost merging builds digit groups of
           three from the left and each listed word whole: a price is `101` `.` `25`, a bar about 30 tokens and
           a question block a third of its characters.

    The script never tokenizes by itself: aoi-analyst-tokens does, with llama.cpp, as a session does, from a
    GGUF with these tokens."""
    SPECIAL = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    KINDS = ("chars", "bars")

    def __init__(self, kind, words):
        self.tokens = list(self.SPECIAL)
        self.types = [2, 3, 3, 3, 3]  # UNKNOWN, CONTROL...
        self.scores = [0.0] * len(self.SPECIAL)
        for b in range(256):
            self._add(f"<0x{b:02X}>", 6)  # BYTE
        pieces = ["\u2581"] + [chr(c) for c in range(0x21, 0x7F)]
        if kind == "bars":
            pieces += [f"{n:02d}" for n in range(100)] + [f"{n:03d}" for n in range(1000)]
            pieces += [p for f in "OHLCV" for p in (f",{f}", f",{f}=")]
            for w in sorted(words):
                pieces += [w[:k] for k in range(2, len(w) + 1)] + ["\u2581" + w[:k] for k in range(1, len(w) + 1)]
        for p in dict.fromkeys(pieces):  # in order, once each
            self._add(p, 1)  # NORMAL
        self.im_end = self.tokens.index("<|im_end|>")

    def _add(self, piece, token_type):
        self.tokens.append(piece)
        self.types.append(token_type)
        self.scores.append(float(len(piece)) if token_type == 1 and len(piece) > 1 else 0.0)

    @staticmethod
    def words_of(streams):
        """The chat template's roles and the words of the system text, the questions and the answers."""
        texts = [streams[0]["system"]] + [q["question"] + " " + q["answer"] for s in streams for q in s["questions"]]
        return {"system", "user", "assistant"} | {w for t in texts for w in re.findall(r"[A-Za-z]+", t)}


class Config:
    def __init__(self, **kw):
        self.n_vocab = kw.get("n_vocab", 0)
        self.d = kw.get("d", 128)
        self.layers = kw.get("layers", 4)
        self.heads = kw.get("heads", 4)
        self.ff = kw.get("ff", 384)
        self.tied = kw.get("tied", True)  # the output matrix is the token embeddings'
        self.ctx = kw.get("ctx", 8192)
        self.rope_base = 10000.0
        self.eps = 1e-5


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, pos, base):
    """llama.cpp's LLAMA_ROPE_TYPE_NORM: dimension pairs (2i, 2i+1) rotate by pos * base^(-2i/d)."""
    d = x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    ang = pos[:, None].float() * inv[None, :]  # [T, d/2]
    cos, sin = ang.cos(), ang.sin()
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
    return out.flatten(-2)


class Model(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, ff = cfg.d, cfg.ff
        self.emb = torch.nn.Parameter(torch.randn(cfg.n_vocab, d) * 0.02)
        self.blocks = torch.nn.ModuleList()
        for _ in range(cfg.layers):
            b = torch.nn.Module()
            b.attn_norm = torch.nn.Parameter(torch.ones(d))
            b.wq = torch.nn.Linear(d, d, bias=False)
            b.wk = torch.nn.Linear(d, d, bias=False)
            b.wv = torch.nn.Linear(d, d, bias=False)
            b.wo = torch.nn.Linear(d, d, bias=False)
            b.ffn_norm = torch.nn.Parameter(torch.ones(d))
            b.gate = torch.nn.Linear(d, ff, bias=False)
            b.up = torch.nn.Linear(d, ff, bias=False)
            b.down = torch.nn.Linear(ff, d, bias=False)
            for lin in (b.wo, b.down):  # residual branches start small
                torch.nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * cfg.layers))
            self.blocks.append(b)
        self.out_norm = torch.nn.Parameter(torch.ones(d))
        # Untied, a copied price token can come out as itself rather than as a token of about its size, which is
        # what the smooth numeric part of shared embeddings carries through a head (models/analyst.md).
        if not cfg.tied:
            self.out = torch.nn.Parameter(torch.randn(cfg.n_vocab, d) * 0.02)

    def init_numbers(self, vocab, dims):
        """Gives each digit-group token's embedding a smooth code of its value in its first `dims` dimensions, so
        that 99 starts next to 101 and far from 150: comparing prices (a range, a trend) is then learned from an
        order the embeddings already have, instead of from 1,100 unrelated vectors (--number-init)."""
        with torch.no_grad():
            for i, piece in enumerate(vocab.tokens):
                if not piece.isdigit() or vocab.types[i] != 1:
                    continue
                v = float(piece)
                code = [v / 500.0 - 1.0]
                period = 8000.0
                while len(code) + 2 <= dims:
                    code += [math.sin(2 * math.pi * v / period), math.cos(2 * math.pi * v / period)]
                    period /= 3.0
                self.emb[i, :len(code)] = 0.05 * torch.tensor(code)

    def output_matrix(self):
        return self.emb if self.cfg.tied else self.out

    def forward(self, tokens, pos, mask):
        """tokens, pos: [T]; mask: [T, T] bool, True where a row may attend a column. Returns logits [T, V]."""
        cfg = self.cfg
        h, hd = cfg.heads, cfg.d // cfg.heads
        x = self.emb[tokens]
        bias = torch.zeros(mask.shape, dtype=torch.float32).masked_fill_(~mask, float("-inf"))
        for b in self.blocks:
            y = rms_norm(x, b.attn_norm, cfg.eps)
            t = y.shape[0]
            q = b.wq(y).view(t, h, hd).transpose(0, 1)  # [h, T, hd]
            k = b.wk(y).view(t, h, hd).transpose(0, 1)
            v = b.wv(y).view(t, h, hd).transpose(0, 1)
            q, k = rope(q, pos, cfg.rope_base), rope(k, pos, cfg.rope_base)
            att = torch.baddbmm(bias.expand(h, t, t), q, k.transpose(1, 2), alpha=1.0 / math.sqrt(hd))
            att = torch.softmax(att, dim=-1)
            x = x + b.wo((att @ v).transpose(0, 1).reshape(t, cfg.d))
            y = rms_norm(x, b.ffn_norm, cfg.eps)
            x = x + b.down(F.silu(b.gate(y)) * b.up(y))
        return rms_norm(x, self.out_norm, cfg.eps) @ self.output_matrix().t()


class Window:
    """One training (or evaluation) sequence: a window's main tokens and question blocks, with the positions,
    the attention mask and the targets."""

    def __init__(self, vocab, stream, questions):
        """questions: indices into stream["questions"]."""
        tok = stream["tokens"]
        main = list(tok["region0"])
        rec_end = []  # main length after each record and its newline
        rec_targets = []
        for r in tok["records"]:
            start = len(main)
            main += r
            rec_end.append(len(main))
            rec_targets.extend(range(start, len(main)))
        tokens, pos, limit, block = list(main), list(range(len(main))), [i + 1 for i in range(len(main))], \
            [0] * len(main)
        ans_at, ans_tok, ans_q = [], [], []  # logits row, target token, question index
        ans_kind, kinds = [], {}  # each answer token's question type, numbered in this window
        for qi, q in enumerate(questions):
            start = rec_end[stream["questions"][q]["after"]]
            prompt = tok["prompts"][q]
            answer = tok["answers"][q] + [vocab.im_end]
            ids = prompt + answer
            first = len(tokens)
            tokens += ids
            pos += range(start, start + len(ids))
            limit += [start] * len(ids)
            block += [qi + 1] * len(ids)
            for j in range(len(answer)):  # the row before each answer token predicts it
                ans_at.append(first + len(prompt) - 1 + j)
                ans_tok.append(answer[j])
                ans_q.append(qi)
                ans_kind.append(kinds.setdefault(stream["questions"][q]["type"], len(kinds)))
        self.tokens = torch.tensor(tokens)
        self.pos = torch.tensor(pos)
        lim = torch.tensor(limit)
        blk = torch.tensor(block)
        idx = torch.arange(len(tokens))
        main_part = (blk[None, :] == 0) & (idx[None, :] < lim[:, None])
        own_block = (blk[None, :] == blk[:, None]) & (blk[:, None] > 0) & (idx[None, :] <= idx[:, None])
        self.mask = main_part | own_block
        self.rec_at = torch.tensor([t - 1 for t in rec_targets])
        self.rec_tok = self.tokens[torch.tensor(rec_targets)]
        self.ans_at = torch.tensor(ans_at, dtype=torch.long)
        self.ans_tok = torch.tensor(ans_tok, dtype=torch.long)
        self.ans_q = torch.tensor(ans_q, dtype=torch.long)
        self.ans_kind = torch.tensor(ans_kind, dtype=torch.long)
        self.kinds = len(kinds)
        self.questions = [stream["questions"][q] for q in questions]


class Data:
    """Windows from aoi-analyst-data, tokenized by aoi-analyst-tokens with a GGUF of the vocabulary (written once
    the vocabulary is known: set_vocab)."""

    def __init__(self, data_tool, tokens_tool):
        self.data_tool, self.tokens_tool, self.gguf = data_tool, tokens_tool, None

    def set_vocab(self, gguf_path):
        self.gguf = gguf_path

    def streams(self, seed, streams, min_bars, max_bars, first_after=5, every=4):
        out = subprocess.run([self.data_tool, "--seed", str(seed), "--streams", str(streams), "--min-bars",
                              str(min_bars), "--max-bars", str(max_bars), "--first-after", str(first_after),
                              "--every", str(every)], check=True, capture_output=True, text=True).stdout
        if self.gguf:
            out = subprocess.run([self.tokens_tool, self.gguf], input=out, check=True, capture_output=True,
                                 text=True).stdout
        return [json.loads(line) for line in out.splitlines()]


BINARY = {"trend": ("UP", "DOWN"), "pullback": ("YES", "NO"), "recent_high": ("YES", "NO"),
          "consolidation": ("YES", "NO"), "volume": ("YES", "NO")}


def balance(streams):
    """Keep-probabilities that give each yes/no type's answers equal shares in training."""
    counts = {}
    for s in streams:
        for q in s["questions"]:
            if q["type"] in BINARY:
                counts.setdefault(q["type"], {}).setdefault(q["answer"], 0)
                counts[q["type"]][q["answer"]] += 1
    keep = {}
    for t, c in counts.items():
        low = min(c.values())
        keep[t] = {a: low / n for a, n in c.items()}
    return keep


def pick_questions(stream, keep, per_window, rng):
    """Indices of up to per_window of the stream's questions, the yes/no ones kept as balance() says."""
    qs = [i for i, q in enumerate(stream["questions"])
          if q["type"] not in keep or rng.random() < keep[q["type"]][q["answer"]]]
    rng.shuffle(qs)
    return qs[:per_window]


def evaluate(model, vocab, streams):
    """Greedy exactness of every question of every stream: an answer is right when, at each of its positions,
    the model's top token is the answer's (so greedy decoding writes exactly the answer, then <|im_end|>)."""
    right, total = {}, {}
    model.eval()
    with torch.no_grad():
        for s in streams:
            w = Window(vocab, s, range(len(s["questions"])))
            logits = model(w.tokens, w.pos, w.mask)
            ok = logits[w.ans_at].argmax(-1) == w.ans_tok
            for qi, q in enumerate(s["questions"]):
                good = bool(ok[w.ans_q == qi].all())
                right[q["type"]] = right.get(q["type"], 0) + good
                total[q["type"]] = total.get(q["type"], 0) + 1
    model.train()
    return {t: right[t] / total[t] for t in total}, total


def baselines(streams):
    """Trivial answers, for comparison: each yes/no type's most common answer, and for the prices the last
    bar's open (a close is near the open of its bar)."""
    counts, total, hit_open = {}, {}, {}
    for s in streams:
        for q in s["questions"]:
            t = q["type"]
            total[t] = total.get(t, 0) + 1
            counts.setdefault(t, {}).setdefault(q["answer"], 0)
            counts[t][q["answer"]] += 1
            if t in ("value", "last_close"):
                rec = s["records"][q["after"]]
                open_ = rec.split(",O=")[1].split(",")[0]
                hit_open[t] = hit_open.get(t, 0) + (open_ == q["answer"])
    out = {}
    for t in total:
        if t in BINARY:
            a, n = max(counts[t].items(), key=lambda kv: kv[1])
            out[t] = (f"always {a}", n / total[t])
        else:
            out[t] = ("the last open", hit_open.get(t, 0) / total[t])
    return out


def export(model, vocab, path, gguf_py, description):
    sys.path.insert(0, gguf_py)
    import gguf  # noqa: E402 (llama.cpp's pinned gguf-py)
    cfg = model.cfg
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("aoi analyst")
    w.add_description(description)
    w.add_context_length(cfg.ctx)
    w.add_embedding_length(cfg.d)
    w.add_block_count(cfg.layers)
    w.add_feed_forward_length(cfg.ff)
    w.add_rope_dimension_count(cfg.d // cfg.heads)
    w.add_head_count(cfg.heads)
    w.add_head_count_kv(cfg.heads)
    w.add_layer_norm_rms_eps(cfg.eps)
    w.add_rope_freq_base(cfg.rope_base)
    w.add_vocab_size(cfg.n_vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("llama")
    w.add_token_list(vocab.tokens)
    w.add_token_scores(vocab.scores)
    w.add_token_types(vocab.types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(vocab.im_end)
    w.add_eot_token_id(vocab.im_end)
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)
    w.add_chat_template(CHAT_TEMPLATE)

    def mat(t):  # matrices in F16, norms in F32 (as llama.cpp's converters write them)
        return t.detach().numpy().astype(np.float16)

    def vec(t):
        return t.detach().numpy().astype(np.float32)

    w.add_tensor("token_embd.weight", mat(model.emb))
    for i, b in enumerate(model.blocks):
        w.add_tensor(f"blk.{i}.attn_norm.weight", vec(b.attn_norm))
        w.add_tensor(f"blk.{i}.attn_q.weight", mat(b.wq.weight))
        w.add_tensor(f"blk.{i}.attn_k.weight", mat(b.wk.weight))
        w.add_tensor(f"blk.{i}.attn_v.weight", mat(b.wv.weight))
        w.add_tensor(f"blk.{i}.attn_output.weight", mat(b.wo.weight))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", vec(b.ffn_norm))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", mat(b.gate.weight))
        w.add_tensor(f"blk.{i}.ffn_up.weight", mat(b.up.weight))
        w.add_tensor(f"blk.{i}.ffn_down.weight", mat(b.down.weight))
    w.add_tensor("output_norm.weight", vec(model.out_norm))
    if not cfg.tied:
        w.add_tensor("output.weight", mat(model.out))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def train(model, vocab, data, args, rng):
    # The curriculum: windows grow from a few bars to the longest over the first 45% of the windows; in the last
    # stage, a share of the windows (--long-share) are of the benchmark's length and a little around it.
    stages = [(6, 16), (8, 28), (10, 40), (12, args.window)]
    long_bars = (args.long_window - 24, args.long_window + 4)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    keep = balance(data.streams(999, 400, 10, args.window))
    t0 = last_print = time.monotonic()
    seen_tokens, pool, pool_stage, long_pool, data_seed = 0, [], None, [], args.seed * 1000
    ans_loss_avg = rec_loss_avg = None
    for step in range(args.steps):
        frac = step / args.steps
        stage = stages[min(len(stages) - 1, int(frac / 0.6 * len(stages)))]
        if args.long_share > 0 and stage == stages[-1] and rng.random() < args.long_share:
            if not long_pool:
                long_pool = data.streams(data_seed, 16, *long_bars)
                data_seed += 1
            stream = long_pool.pop()
        else:
            if not pool or pool_stage != stage:
                pool, pool_stage = data.streams(data_seed, 64, stage[0], stage[1]), stage
                data_seed += 1
            stream = pool.pop()
        w = Window(vocab, stream, pick_questions(stream, keep, args.per_window, rng))
        lr = args.lr * min(1.0, (step + 1) / 200) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        logits = model(w.tokens, w.pos, w.mask)
        if args.answer_loss == "type":
            # Each question type's answers weigh the same, however many tokens its answers are (a price is four
            # with its <|im_end|>, a YES two): per token, the yes/no types got what the prices left.
            per = F.cross_entropy(logits[w.ans_at], w.ans_tok, reduction="none")
            ans_loss = torch.stack([per[w.ans_kind == k].mean() for k in range(w.kinds)]).mean()
        else:
            ans_loss = F.cross_entropy(logits[w.ans_at], w.ans_tok)
        rec_loss = F.cross_entropy(logits[w.rec_at], w.rec_tok)
        loss = ans_loss + args.record_weight * rec_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        seen_tokens += len(w.tokens)
        ans_loss_avg = ans_loss.item() if ans_loss_avg is None else 0.98 * ans_loss_avg + 0.02 * ans_loss.item()
        rec_loss_avg = rec_loss.item() if rec_loss_avg is None else 0.98 * rec_loss_avg + 0.02 * rec_loss.item()
        now = time.monotonic()
        if now - last_print >= 60 or step + 1 == args.steps:
            last_print = now
            elapsed = now - t0
            left = elapsed / (step + 1) * (args.steps - step - 1)
            longs = args.long_share > 0 and stage == stages[-1]
            longs = f" (+{args.long_share:.0%} of {long_bars[0]}-{long_bars[1]})" if longs else ""
            print(f"train-analyst: {elapsed / 60:5.1f} min  window {step + 1:5d}/{args.steps}  bars {stage[0]}-{stage[1]}"
                  f"{longs}  "
                  f"answer loss {ans_loss_avg:.3f}  record loss {rec_loss_avg:.3f}  lr {lr:.2e}  "
                  f"{seen_tokens / elapsed:.0f} tokens/s  ~{left / 60:.0f} min left", flush=True)
    print(f"train-analyst: trained {args.steps} windows, {seen_tokens} tokens in {(time.monotonic() - t0) / 60:.1f} min",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-tool", required=True, help="aoi-analyst-data")
    ap.add_argument("--tokens-tool", required=True, help="aoi-analyst-tokens")
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py directory")
    ap.add_argument("--out", required=True, help="the GGUF to write")
    ap.add_argument("--steps", type=int, default=6000, help="training windows (the curriculum scales to them)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--window", type=int, default=52, help="the longest window of the curriculum, in bars")
    ap.add_argument("--long-window", type=int, default=100,
                    help="the benchmark's window: the last stage's long windows are of 24 bars fewer to 4 more")
    ap.add_argument("--long-share", type=float, default=0.1, help="the last stage's share of long windows")
    ap.add_argument("--eval-streams", type=int, default=200)
    ap.add_argument("--per-window", type=int, default=28, help="question blocks per training window")
    ap.add_argument("--record-weight", type=float, default=0.3, help="the records' loss weight (answers: 1)")
    ap.add_argument("--answer-loss", choices=("token", "type"), default="type",
                    help="token: the mean over answer tokens; type: the mean over question types of theirs")
    ap.add_argument("--number-init", type=int, default=16, metavar="DIMS",
                    help="digit-group tokens' embeddings start with a code of their value in DIMS dimensions (0: none)")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=384)
    ap.add_argument("--vocab", choices=Vocab.KINDS, default="bars", help="the vocabulary's kind (Vocab)")
    ap.add_argument("--output", choices=("tied", "untied"), default="untied",
                    help="tied: the output matrix is the token embeddings; untied: a matrix of its own")
    ap.add_argument("--eval-windows", default="52,100", help="held-out window lengths in bars, comma-separated")
    ap.add_argument("--checkpoint", help="where to keep the PyTorch weights (also read back with --eval-only)")
    ap.add_argument("--eval-only", action="store_true", help="evaluate and export the checkpoint, no training")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    data = Data(args.data_tool, args.tokens_tool)
    vocab = Vocab(args.vocab, Vocab.words_of(data.streams(999, 50, 10, 20)))
    cfg = Config(n_vocab=len(vocab.tokens), d=args.d, layers=args.layers, heads=args.heads, ff=args.ff,
                 tied=args.output == "tied")
    model = Model(cfg)
    if args.number_init:
        model.init_numbers(vocab, args.number_init)
    work = tempfile.TemporaryDirectory(prefix="aoi-analyst-vocab.")  # removed when main returns
    data.set_vocab(f"{work.name}/vocab.gguf")  # the untrained model: only its vocabulary and template matter here
    export(model, vocab, data.gguf, args.gguf_py, "aoi's analyst model, untrained")
    n_params = sum(p.numel() for p in model.parameters())
    print(f"train-analyst: {n_params / 1e6:.2f}M parameters ({cfg.layers} layers, width {cfg.d}, {cfg.heads} heads, "
          f"feed-forward {cfg.ff}, vocabulary {cfg.n_vocab} ({args.vocab}), {args.output} output), "
          f"{args.steps} windows, seed {args.seed}, {args.threads} threads; answer loss per {args.answer_loss}, "
          f"record weight {args.record_weight}, number code {args.number_init or 'none'}", flush=True)

    if args.eval_only:
        model.load_state_dict(torch.load(args.checkpoint))
    else:
        train(model, vocab, data, args, rng)
        if args.checkpoint:
            torch.save(model.state_dict(), args.checkpoint)

    # Held out: other seeds than any training window's, every question at the window's last record (as a session
    # is asked right after its newest data).
    for bars in (int(b) for b in args.eval_windows.split(",")):
        held = data.streams(7_000_000 + args.seed, args.eval_streams, bars, bars, first_after=bars - 1, every=bars)
        acc, total = evaluate(model, vocab, held)
        base = baselines(held)
        print(f"train-analyst: held-out accuracy, {len(held)} windows of {bars} bars (seed {7_000_000 + args.seed}), "
              f"greedy answer exact:", flush=True)
        for t in acc:
            print(f"  {t:14s} {acc[t] * 100:5.1f}%   trivial ({base[t][0]}): {base[t][1] * 100:5.1f}%   n={total[t]}",
                  flush=True)
    export(model, vocab, args.out, args.gguf_py,
           f"aoi's analyst model: answers the streaming benchmark's questions about hourly OHLCV bars "
           f"(scripts/train-analyst.sh: {args.steps} windows, seed {args.seed})")
    print(f"train-analyst: wrote {args.out}")


if __name__ == "__main__":
    main()
