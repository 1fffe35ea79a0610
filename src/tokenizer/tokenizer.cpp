// load_tokenizer / find_tokenizer (see tokenizer.hpp): picks the implementation for a file by
// its name and content: a GGUF file (by its magic) -> its metadata's tokenizer, tokenizer.json
// (HF, JSON text) -> BpeTokenizer, tokenizer.model (SentencePiece protobuf) ->
// SentencePieceTokenizer. Meta's original LLaMA-3 tokenizer.model is a tiktoken text file, which
// is recognised and rejected with a pointer to tokenizer.json.
#include "tokenizer/tokenizer.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "model_io/gguf_file.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "tokenizer/gguf_tokenizer.hpp"
#include "tokenizer/hf_chat_template.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"

#include <array>
#include <cctype>
#include <fstream>
#include <system_error>

namespace selfspec {
namespace {

enum class FileKind { kJson, kTiktoken, kSentencePiece };

// Looks at the first bytes: JSON starts with '{'; a tiktoken file is lines of
// "<base64> <rank>"; anything else is handed to SentencePiece.
FileKind sniff(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("{}: cannot open tokenizer file", file.string());
  std::array<char, 256> head{};
  in.read(head.data(), head.size());
  const std::string_view text(head.data(), static_cast<std::size_t>(in.gcount()));
  std::size_t pos = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;  // UTF-8 byte order mark
  while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  if (pos < text.size() && text[pos] == '{') return FileKind::kJson;
  const std::size_t line_end = text.find('\n');
  if (line_end != std::string_view::npos && line_end > 0) {
    const std::string_view line = text.substr(0, line_end);
    const std::size_t space = line.find(' ');
    bool tiktoken = space != std::string_view::npos && space > 0 && space + 1 < line.size();
    for (std::size_t i = 0; tiktoken && i < line.size(); ++i) {
      const auto c = static_cast<unsigned char>(line[i]);
      tiktoken = i < space    ? (std::isalnum(c) || c == '+' || c == '/' || c == '=')
                 : i == space ? true
                              : std::isdigit(c) != 0;
    }
    if (tiktoken) return FileKind::kTiktoken;
  }
  return FileKind::kSentencePiece;
}

// tokenizer.json (HF) or tokenizer.model (SentencePiece), by content.
std::unique_ptr<Tokenizer> load_hf_tokenizer_file(const std::filesystem::path& file) {
  switch (sniff(file)) {
    case FileKind::kJson:
      return std::make_unique<BpeTokenizer>(file);
    case FileKind::kTiktoken:
      fail(
          "{}: this is a tiktoken BPE file (Meta's original LLaMA-3 format), which is not "
          "supported; use the Hugging Face tokenizer.json instead",
          file.string());
    case FileKind::kSentencePiece:
      break;
  }
  if (file.extension() == ".json") {
    fail("{}: not a tokenizer.json (the file does not start with a JSON object)", file.string());
  }
  return std::make_unique<SentencePieceTokenizer>(file);
}

// The chat template of the HF files next to a tokenizer (tokenizer_config.json,
// chat_template.jinja). A broken tokenizer_config.json costs only the template, which --chat
// alone needs.
void attach_hf_chat_template(Tokenizer& tokenizer, const std::filesystem::path& dir) {
  try {
    if (std::optional<ChatTemplate> chat = find_hf_chat_template(dir)) {
      tokenizer.set_chat_template(std::move(*chat));
    }
  } catch (const Error& e) {
    log::warn("no chat template: {}", e.what());
  }
}

// tokenizer.json, else tokenizer.model, of a HF model directory (with the directory's chat
// template); nullptr when it has neither.
std::unique_ptr<Tokenizer> find_hf_tokenizer(const std::filesystem::path& model_dir) {
  std::error_code ec;
  const std::filesystem::path json = model_dir / "tokenizer.json";
  const std::filesystem::path model = model_dir / "tokenizer.model";
  const bool have_json = std::filesystem::is_regular_file(json, ec);
  const bool have_model = std::filesystem::is_regular_file(model, ec);
  if (have_json) {
    try {
      return load_tokenizer(json);
    } catch (const Error& json_error) {
      // LLaMA-2 style directories ship a SentencePiece-emulating tokenizer.json next to the
      // original tokenizer.model; the latter is the reference there.
      if (!have_model) throw;
      try {
        auto tokenizer = load_tokenizer(model);
        log::info("using {} ({})", model.string(), json_error.what());
        return tokenizer;
      } catch (const Error& model_error) {
        fail("no usable tokenizer in {}: {}; {}", model_dir.string(), json_error.what(),
             model_error.what());
      }
    }
  }
  if (have_model) return load_tokenizer(model);
  return nullptr;
}

// The tokenizer of a GGUF file; nullptr when its metadata describes none (no
// tokenizer.ggml.model: the model runs on --prompt-ids).
std::unique_ptr<Tokenizer> find_gguf_tokenizer(const std::filesystem::path& path) {
  const GgufFile file(path);
  if (!file.has("tokenizer.ggml.model")) return nullptr;
  return load_gguf_tokenizer(file);
}

// The directory's single .gguf file; nullopt when it has none or several.
std::optional<std::filesystem::path> only_gguf_file(const std::filesystem::path& dir) {
  std::optional<std::filesystem::path> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".gguf" || !is_gguf_file(entry.path())) continue;
    if (found) return std::nullopt;
    found = entry.path();
  }
  return found;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    fail("{}: no such tokenizer file", file.string());
  if (is_gguf_file(file)) return load_gguf_tokenizer(GgufFile(file));
  std::unique_ptr<Tokenizer> tokenizer = load_hf_tokenizer_file(file);
  attach_hf_chat_template(*tokenizer, file.parent_path());
  return tokenizer;
}

std::unique_ptr<Tokenizer> find_tokenizer(const std::filesystem::path& model_path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(model_path, ec)) {
    return is_gguf_file(model_path) ? find_gguf_tokenizer(model_path) : nullptr;
  }
  if (std::unique_ptr<Tokenizer> tokenizer = find_hf_tokenizer(model_path)) return tokenizer;
  if (const std::optional<std::filesystem::path> gguf = only_gguf_file(model_path)) {
    return find_gguf_tokenizer(*gguf);
  }
  return nullptr;
}

}  // namespace selfspec
