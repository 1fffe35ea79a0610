// CompletionText (see completion_text.hpp): streamed completion text cut at the stop strings.
//
// Why only the unsent text needs searching: every suffix of the decoded text that is a prefix of a
// stop string lies inside the held-back tail (it is held back precisely because it might grow into
// a stop string), so a stop string completed by new text starts inside the held-back tail or the
// new text, never in text already sent. The Knuth-Morris-Pratt states carry exactly that partial
// match from one token to the next.
#include "serve/completion_text.hpp"

#include "core/error.hpp"
#include "tokenizer/utf8.hpp"

#include <algorithm>
#include <utility>

namespace selfspec::serve {
namespace {

// failure[i]: length of the longest proper prefix of pattern[0, i] that is also its suffix.
std::vector<std::size_t> failure_function(std::string_view pattern) {
  std::vector<std::size_t> failure(pattern.size(), 0);
  std::size_t length = 0;
  for (std::size_t i = 1; i < pattern.size(); ++i) {
    while (length > 0 && pattern[i] != pattern[length]) length = failure[length - 1];
    if (pattern[i] == pattern[length]) ++length;
    failure[i] = length;
  }
  return failure;
}

}  // namespace

CompletionText::CompletionText(const Tokenizer& tokenizer, std::span<const std::int32_t> context,
                               std::vector<std::string> stops)
    : decoder_(tokenizer, context) {
  stops_.reserve(stops.size());
  for (std::string& stop : stops) {
    SELFSPEC_CHECK(!stop.empty(), "a stop string must not be empty");
    SELFSPEC_CHECK(utf8::is_valid(stop), "stop string is not valid UTF-8");
    Stop entry;
    entry.failure = failure_function(stop);
    entry.text = std::move(stop);
    stops_.push_back(std::move(entry));
  }
}

std::string CompletionText::take(std::string_view fresh) {
  const std::size_t searched = pending_.size();
  pending_.append(fresh);
  // Earliest start (in pending_) of a stop string that the new text completes.
  std::size_t stop_start = pending_.size();
  std::size_t held = 0;
  for (Stop& stop : stops_) {
    std::size_t matched = stop.matched;
    for (std::size_t i = searched; i < pending_.size(); ++i) {
      const char c = pending_[i];
      while (matched > 0 && stop.text[matched] != c) matched = stop.failure[matched - 1];
      if (stop.text[matched] == c) ++matched;
      if (matched == stop.text.size()) {
        // Only this stop string's first occurrence matters: any later one starts later.
        stop_start = std::min(stop_start, i + 1 - matched);
        break;
      }
    }
    stop.matched = matched;
    held = std::max(held, matched);
  }
  std::string out;
  if (stop_start < pending_.size()) {
    stopped_ = true;
    out = pending_.substr(0, stop_start);
    pending_.clear();
    return out;
  }
  // The held-back tail starts with a stop string's first byte, never a UTF-8 continuation byte, so
  // the text sent ends on a character boundary.
  const std::size_t send = pending_.size() - held;
  out = pending_.substr(0, send);
  pending_.erase(0, send);
  return out;
}

std::string CompletionText::push(std::int32_t token) {
  SELFSPEC_CHECK(!finished_, "CompletionText::push after finish");
  if (stopped_) return {};
  ++tokens_;
  std::string out = take(decoder_.push(token));
  text_ += out;
  return out;
}

std::string CompletionText::finish() {
  if (stopped_ || finished_) return {};
  finished_ = true;
  std::string out = take(decoder_.flush());
  if (!stopped_) {
    out += pending_;
    pending_.clear();
  }
  text_ += out;
  return out;
}

}  // namespace selfspec::serve
