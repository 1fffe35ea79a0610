// The outline of a Jinja template's source that chat-template recognition needs, without
// evaluating anything: the string literals inside its tags (unescaped as Jinja does, with
// Python's unicode-escape rules), the code of the tags with those literals blanked out, and any
// text outside the tags that rendering would output verbatim, under the environment HF's
// apply_chat_template renders with (trim_blocks, lstrip_blocks, no kept trailing newline).
// Written by hand: recognition needs only this lexical layer, not a template engine.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

struct JinjaOutline {
  // String literals inside {{ }} and {% %} tags, in source order, unescaped.
  std::vector<std::string> literals;
  // The contents of those tags, each literal replaced by "" and tags separated by a newline.
  std::string code;
  // The first piece of text outside the tags that survives whitespace control, if any.
  std::optional<std::string> raw_output;
  // Set when the source is not lexically well formed (an unterminated tag, comment or string).
  std::optional<std::string> error;

  bool has_literal(std::string_view text) const;
  bool any_literal_contains(std::string_view text) const;
  // Whether `word` appears in the code as a whole identifier (not inside a longer name).
  bool code_has_word(std::string_view word) const;
};

JinjaOutline outline_jinja(std::string_view source);

// A Jinja/Python string literal's body (between the quotes) with its escapes resolved:
// \\ \' \" \a \b \f \n \r \t \v, \ooo, \xhh, \uhhhh, \Uhhhhhhhh and backslash-newline; any
// other backslash stays as written, as Python keeps unknown escapes.
std::string unescape_jinja_string(std::string_view body);

}  // namespace selfspec
