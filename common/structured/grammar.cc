#include "common/structured/grammar.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace pagellm::structured {

GrammarBuilder::Sequence GrammarBuilder::Literal(std::string_view text) {
  Sequence seq;
  seq.reserve(text.size());
  for (char c : text) seq.push_back(Byte(static_cast<uint8_t>(c)));
  return seq;
}

uint32_t GrammarBuilder::NewRule(std::string name) {
  rules_.push_back(RuleDef{.name = std::move(name), .alternatives = {}});
  return static_cast<uint32_t>(rules_.size() - 1);
}

void GrammarBuilder::AddAlternative(uint32_t rule, Sequence sequence) {
  num_symbols_ += sequence.size() + 1;
  rules_[rule].alternatives.push_back(std::move(sequence));
}

uint32_t GrammarBuilder::Rule(std::string name, std::vector<Sequence> alternatives) {
  const uint32_t rule = NewRule(std::move(name));
  for (Sequence& alt : alternatives) AddAlternative(rule, std::move(alt));
  return rule;
}

absl::StatusOr<Grammar> GrammarBuilder::Build(uint32_t root, const GrammarLimits& limits) && {
  const size_t n = rules_.size();
  if (root >= n) return absl::InvalidArgumentError("grammar: no root rule");
  if (n > static_cast<size_t>(limits.max_rules) ||
      num_symbols_ > static_cast<size_t>(limits.max_elements)) {
    return absl::InvalidArgumentError(absl::StrCat("grammar: ", n, " rules and ", num_symbols_,
                                                   " symbols; at most ", limits.max_rules, " and ",
                                                   limits.max_elements));
  }
  for (const RuleDef& r : rules_) {
    if (r.alternatives.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("grammar: rule '", r.name, "' is empty"));
    }
    for (const Sequence& alt : r.alternatives) {
      for (const Symbol& s : alt) {
        if (s.is_rule && s.rule >= n) {
          return absl::InvalidArgumentError(
              absl::StrCat("grammar: rule '", r.name, "' references an undefined rule"));
        }
      }
    }
  }
  // Nullable rules (can match ""), to a fixed point.
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const Sequence& alt : rules_[r].alternatives) {
        bool all = true;
        for (const Symbol& s : alt) all = all && s.is_rule && nullable[s.rule];
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  // Left recursion: a cycle among "r may expand to s before consuming a byte" edges.
  std::vector<std::vector<uint32_t>> first(n);
  for (size_t r = 0; r < n; ++r) {
    for (const Sequence& alt : rules_[r].alternatives) {
      for (const Symbol& s : alt) {
        if (!s.is_rule) break;
        first[r].push_back(s.rule);
        if (!nullable[s.rule]) break;
      }
    }
  }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t start = 0; start < n; ++start) {
    if (color[start] != 0) continue;
    path.emplace_back(start, 0);
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == first[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t s = first[r][next++];
      if (color[s] == 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "grammar: rule '", rules_[s].name, "' refers to itself before matching anything"));
      }
      if (color[s] == 0) {
        color[s] = 1;
        path.emplace_back(s, 0);
      }
    }
  }

  Grammar g;
  g.root_ = root;
  g.elements_.reserve(num_symbols_);
  g.rule_alts_.reserve(n + 1);
  absl::flat_hash_map<std::array<uint64_t, 4>, uint32_t> set_index;
  for (RuleDef& r : rules_) {
    g.rule_alts_.push_back(static_cast<uint32_t>(g.alt_starts_.size()));
    for (const Sequence& alt : r.alternatives) {
      g.alt_starts_.push_back(static_cast<uint32_t>(g.elements_.size()));
      for (const Symbol& s : alt) {
        if (s.is_rule) {
          g.elements_.push_back({Grammar::Kind::kRule, s.rule});
          continue;
        }
        auto [it, inserted] =
            set_index.try_emplace(s.bytes.words, static_cast<uint32_t>(g.byte_sets_.size()));
        if (inserted) g.byte_sets_.push_back(s.bytes);
        g.elements_.push_back({Grammar::Kind::kBytes, it->second});
      }
      g.elements_.push_back({Grammar::Kind::kEnd, 0});
    }
    g.names_.push_back(std::move(r.name));
  }
  g.rule_alts_.push_back(static_cast<uint32_t>(g.alt_starts_.size()));
  return g;
}

}  // namespace pagellm::structured
