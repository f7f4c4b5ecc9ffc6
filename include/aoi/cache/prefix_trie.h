// The radix prefix cache's index (paper §3.10.2): a radix trie of token sequences whose nodes name the donor
// sequences whose KV cells hold them. A donor holds its tokens from position 0 (a finished completion's prompt
// and answer, a running completion's prompt, a session's Region 0). A new prompt looks up the longest prefix
// some donor holds, and restores it from that donor instead of decoding it again.
//
// Edges carry runs of tokens (a radix trie: a node with one child and no donor ending at it is merged into
// it), so a lookup costs the length of the prompt, whatever the number of donors. Each node lists every donor
// that holds the node's whole path; a donor's path ends at a node of its own depth (edges are split there).
// Eviction is leaf-oldest: the donor to give up is the one whose tokens others hold too, else the one used
// longest ago, so that branches many donors share (system prompts) outlive the tails only one holds.
//
// Pure: no model, no cache, no threads (the inference loop owns it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "aoi/engine/types.h"

namespace aoi::cache {

using engine::SeqId;
using engine::Token;

class PrefixTrie {
 public:
  PrefixTrie();
  ~PrefixTrie();
  PrefixTrie(const PrefixTrie&) = delete;
  PrefixTrie& operator=(const PrefixTrie&) = delete;

  struct Match {
    SeqId donor = -1;  // -1: no donor holds even the first token
    int length = 0;    // leading tokens of the prompt the donor holds
  };

  // `donor` now holds exactly `tokens` (from position 0); what it held before is forgotten. `stamp` orders
  // uses (larger: more recent). Empty tokens: the donor is removed.
  void set(SeqId donor, std::span<const Token> tokens, std::uint64_t stamp);
  void remove(SeqId donor);
  bool holds(SeqId donor) const { return donors_.contains(donor); }
  int length(SeqId donor) const;  // tokens it holds; 0 when not a donor
  // Marks the donor used at `stamp` (leaf-oldest eviction spares what was used last).
  void touch(SeqId donor, std::uint64_t stamp);
  size_t donors() const { return donors_.size(); }
  size_t nodes() const { return n_nodes_; }

  // The longest leading part of `tokens` that a donor `usable` accepts holds (at most max_length tokens),
  // and the most recently used such donor (touch() marks it used when it is).
  Match longest(std::span<const Token> tokens, int max_length, const std::function<bool(SeqId)>& usable) const;

  // The donor to give up first among those `candidate` accepts: one whose whole path another donor holds
  // too (nothing is lost), else the one whose last use is oldest; nothing when no donor is a candidate.
  std::optional<SeqId> eviction_victim(const std::function<bool(SeqId)>& candidate) const;

 private:
  struct Node;
  struct Donor {
    Node* end = nullptr;  // the node its path ends at (depth == its length)
    int length = 0;
    std::uint64_t stamp = 0;
  };

  Node* insert_path(std::span<const Token> tokens);
  void unlink(SeqId donor, Node* end);
  void prune(Node* node);
  static size_t subtree_size(const Node& node);

  std::unique_ptr<Node> root_;
  std::map<SeqId, Donor> donors_;
  size_t n_nodes_ = 1;
};

}  // namespace aoi::cache
