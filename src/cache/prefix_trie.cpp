#include "aoi/cache/prefix_trie.h"

#include <algorithm>

#include "aoi/common/check.h"

namespace aoi::cache {

struct PrefixTrie::Node {
  std::vector<Token> edge;  // the tokens from the parent to here
  Node* parent = nullptr;
  int depth = 0;                                    // tokens from the root to the end of `edge`
  std::map<Token, std::unique_ptr<Node>> children;  // by the first token of their edge
  std::vector<SeqId> through;                       // donors that hold this node's whole path
  bool has(SeqId d) const { return std::find(through.begin(), through.end(), d) != through.end(); }
};

PrefixTrie::PrefixTrie() : root_(std::make_unique<Node>()) {}
PrefixTrie::~PrefixTrie() = default;

int PrefixTrie::length(SeqId donor) const {
  const auto it = donors_.find(donor);
  return it == donors_.end() ? 0 : it->second.length;
}

void PrefixTrie::touch(SeqId donor, std::uint64_t stamp) {
  const auto it = donors_.find(donor);
  if (it != donors_.end()) it->second.stamp = stamp;
}

PrefixTrie::Node* PrefixTrie::insert_path(std::span<const Token> tokens) {
  Node* node = root_.get();
  size_t i = 0;
  while (i < tokens.size()) {
    auto it = node->children.find(tokens[i]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->edge.assign(tokens.begin() + static_cast<std::ptrdiff_t>(i), tokens.end());
      leaf->parent = node;
      leaf->depth = static_cast<int>(tokens.size());
      Node* out = leaf.get();
      node->children.emplace(tokens[i], std::move(leaf));
      ++n_nodes_;
      return out;
    }
    Node* child = it->second.get();
    const auto rest = tokens.subspan(i);
    const size_t n = std::min(child->edge.size(), rest.size());
    size_t c = 0;
    while (c < n && child->edge[c] == rest[c]) ++c;
    if (c == child->edge.size()) {
      node = child;
      i += c;
      continue;
    }
    // The path ends or turns inside the child's edge: split the edge there.
    auto mid = std::make_unique<Node>();
    mid->edge.assign(child->edge.begin(), child->edge.begin() + static_cast<std::ptrdiff_t>(c));
    mid->parent = node;
    mid->depth = node->depth + static_cast<int>(c);
    mid->through = child->through;  // whoever holds the child's path holds its first c tokens
    std::unique_ptr<Node> moved = std::move(it->second);
    moved->edge.erase(moved->edge.begin(), moved->edge.begin() + static_cast<std::ptrdiff_t>(c));
    moved->parent = mid.get();
    Node* split = mid.get();
    split->children.emplace(moved->edge.front(), std::move(moved));
    it->second = std::move(mid);
    ++n_nodes_;
    node = split;
    i += c;
  }
  return node;
}

void PrefixTrie::set(SeqId donor, std::span<const Token> tokens, std::uint64_t stamp) {
  remove(donor);
  if (tokens.empty()) return;
  Node* end = insert_path(tokens);
  for (Node* n = end; n != root_.get(); n = n->parent) n->through.push_back(donor);
  donors_[donor] = Donor{end, static_cast<int>(tokens.size()), stamp};
}

void PrefixTrie::remove(SeqId donor) {
  const auto it = donors_.find(donor);
  if (it == donors_.end()) return;
  Node* end = it->second.end;
  donors_.erase(it);
  unlink(donor, end);
}

void PrefixTrie::unlink(SeqId donor, Node* end) {
  for (Node* n = end; n != root_.get(); n = n->parent) {
    auto& t = n->through;
    t.erase(std::remove(t.begin(), t.end(), donor), t.end());
  }
  prune(end);
}

size_t PrefixTrie::subtree_size(const Node& node) {
  size_t n = 1;
  for (const auto& [tok, c] : node.children) n += subtree_size(*c);
  return n;
}

// Removes the nodes nobody holds any more, from `node` up, and merges a node into its only child where no
// donor ends at it, so that the trie stays a radix trie.
void PrefixTrie::prune(Node* node) {
  while (node != root_.get()) {
    Node* parent = node->parent;
    if (node->through.empty()) {
      // Children hold subsets of their parent's donors: the whole subtree is empty.
      n_nodes_ -= subtree_size(*node);
      parent->children.erase(node->edge.front());
      node = parent;
      continue;
    }
    if (node->children.size() == 1) {
      Node* child = node->children.begin()->second.get();
      if (child->through.size() == node->through.size()) {
        // No donor ends here: the child's edge joins this one.
        for (auto& [id, d] : donors_) {
          if (d.end == child) d.end = node;
        }
        std::unique_ptr<Node> owned = std::move(node->children.begin()->second);
        node->children.clear();
        node->edge.insert(node->edge.end(), owned->edge.begin(), owned->edge.end());
        node->depth = owned->depth;
        node->children = std::move(owned->children);
        for (auto& [tok, c] : node->children) c->parent = node;
        --n_nodes_;
      }
    }
    break;
  }
}

PrefixTrie::Match PrefixTrie::longest(std::span<const Token> tokens, int max_length,
                                      const std::function<bool(SeqId)>& usable) const {
  const size_t limit = std::min(tokens.size(), static_cast<size_t>(std::max(0, max_length)));
  Match best;
  const Node* node = root_.get();
  size_t i = 0;
  while (i < limit) {
    const auto it = node->children.find(tokens[i]);
    if (it == node->children.end()) break;
    const Node* child = it->second.get();
    // The most recently used donor that may serve, among those holding the child's path.
    SeqId pick = -1;
    std::uint64_t pick_stamp = 0;
    for (SeqId d : child->through) {
      if (!usable(d)) continue;
      const std::uint64_t s = donors_.at(d).stamp;
      if (pick < 0 || s > pick_stamp) pick = d, pick_stamp = s;
    }
    if (pick < 0) break;
    size_t c = 0;
    while (c < child->edge.size() && i + c < limit && child->edge[c] == tokens[i + c]) ++c;
    best = Match{pick, static_cast<int>(i + c)};
    if (c < child->edge.size()) break;
    node = child;
    i += c;
  }
  return best;
}

std::optional<SeqId> PrefixTrie::eviction_victim(const std::function<bool(SeqId)>& candidate) const {
  std::optional<SeqId> victim;
  bool victim_redundant = false;
  std::uint64_t victim_stamp = 0;
  for (const auto& [id, d] : donors_) {
    if (!candidate(id)) continue;
    // Another donor holds this one's whole path (the same tokens or more): giving it up loses nothing.
    const bool redundant = d.end->through.size() > 1;
    const bool better =
        !victim || (redundant && !victim_redundant) || (redundant == victim_redundant && d.stamp < victim_stamp);
    if (better) {
      victim = id;
      victim_redundant = redundant;
      victim_stamp = d.stamp;
    }
  }
  return victim;
}

}  // namespace aoi::cache
