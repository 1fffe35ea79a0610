// StreamingDecoder (see tokenizer.hpp): incremental detokenisation in the manner of HF
// tokenizers' DecodeStream (step_decode_stream): decode a small window of already shown ids plus
// the pending ones, emit the text beyond the window's shown part once it does not end in an
// incomplete character (U+FFFD), then slide the window to start at the ids just emitted. The
// shown ids in front keep the decode from stripping a SentencePiece word's leading space.
#include "tokenizer/tokenizer.hpp"

#include "tokenizer/utf8.hpp"

#include <algorithm>

namespace selfspec {
namespace {

// Context ids kept in front of the first generated id; any positive number gives SentencePiece
// the context it needs for leading spaces.
constexpr std::size_t kContextIds = 16;

}  // namespace

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer,
                                   std::span<const std::int32_t> context, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {
  const std::size_t keep = std::min(context.size(), kContextIds);
  ids_.assign(context.end() - static_cast<std::ptrdiff_t>(keep), context.end());
  prefix_ids_ = ids_.size();
  prefix_text_ = tokenizer_.decode(ids_, skip_special_tokens_);
}

std::string StreamingDecoder::advance(bool hold_incomplete) {
  const std::string text = tokenizer_.decode(ids_, skip_special_tokens_);
  if (text.size() <= prefix_text_.size() && text.starts_with(prefix_text_)) return {};
  if (hold_incomplete && text.ends_with(utf8::kReplacementCharacter)) return {};
  // Normally text extends prefix_text_; if the new ids changed the end of the shown text (a
  // character completed across the boundary), emit from where they differ.
  const auto mismatch =
      std::mismatch(prefix_text_.begin(), prefix_text_.end(), text.begin(), text.end());
  std::string fresh(mismatch.second, text.end());
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_ids_));
  prefix_ids_ = ids_.size();
  prefix_text_ = tokenizer_.decode(ids_, skip_special_tokens_);
  return fresh;
}

std::string StreamingDecoder::push(std::int32_t id) {
  ids_.push_back(id);
  return advance(/*hold_incomplete=*/true);
}

std::string StreamingDecoder::flush() {
  return advance(/*hold_incomplete=*/false);
}

}  // namespace selfspec
