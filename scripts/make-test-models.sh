#!/usr/bin/env bash
# Writes the models the tests use into DIR (skipping those already there and up to date):
#   test-micro.gguf   generated, F16 (so that batch-shape noise stays ~0.01 logits), Llama 3 tokenizer
#   test-micro-no-chat-template.gguf   the same weights and tokenizer without a chat template (the fallback)
#   family-<name>.gguf  test-micro's size in each other model family (mistral qwen2 qwen3 phi3 gemma2 gemma3),
#                       F16, with the family's tokenizer; Gemma 3's with six layers (five sliding-window, one full);
#                       family-mamba.gguf, a recurrent model, for the test that aoi refuses it
#   copy-micro.gguf   a model whose weights copy from its prompt (--weights copy), Q8_0, 3 layers 384 wide (114 MB,
#                     nearly all of it the 128K-token embeddings and output)
#   stories260K.gguf  the real tiny model from shared/models, converted with llama.cpp's converter
#   analyst.gguf      the committed analyst model (models/analyst.gguf), copied
# usage: make-test-models.sh DIR GEN_MODEL CONVERTER SHARED_MODELS_DIR
set -euo pipefail
dir=$1 gen=$2 converter=$3 shared=$4
mkdir -p "$dir"

fresh() { [ -f "$1" ] && [ "$1" -nt "$2" ]; }

analyst=$(cd "$(dirname "$0")/.." && pwd)/models/analyst.gguf
fresh "$dir/analyst.gguf" "$analyst" || cp "$analyst" "$dir/analyst.gguf"

fresh "$dir/test-micro.gguf" "$gen" || "$gen" --shape test-micro --type f16 -o "$dir/test-micro.gguf"
fresh "$dir/test-micro-no-chat-template.gguf" "$gen" ||
  "$gen" --shape test-micro --type f16 --no-chat-template -o "$dir/test-micro-no-chat-template.gguf"

fresh "$dir/copy-micro.gguf" "$gen" || "$gen" --shape copy-micro --weights copy --type q8_0 -o "$dir/copy-micro.gguf"

for family in mistral qwen2 qwen3 phi3 gemma2 gemma3 mamba; do
  layers=()
  [ "$family" = gemma3 ] && layers=(--n-layer 6)
  fresh "$dir/family-$family.gguf" "$gen" ||
    "$gen" --family "$family" --shape test-micro "${layers[@]}" --type f16 -o "$dir/family-$family.gguf"
done

src="$shared/stories260K"
if [ -f "$src/stories260K.bin" ] && [ -f "$src/tok512.bin" ]; then
  if ! fresh "$dir/stories260K.gguf" "$converter"; then
    # The converter writes in the working directory when given a bare name; keep it in a temp dir.
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    (cd "$work" && "$converter" --copy-vocab-from-model "$src/tok512.bin" --llama2c-model "$src/stories260K.bin" \
        --llama2c-output-model "$work/stories260K.gguf" >"$work/convert.log" 2>&1) || {
      cat "$work/convert.log" >&2
      exit 1
    }
    mv "$work/stories260K.gguf" "$dir/stories260K.gguf"
    echo "make-test-models: $dir/stories260K.gguf converted from $src"
  fi
else
  echo "make-test-models: $src not found; tests that need the real model will be skipped" >&2
fi
