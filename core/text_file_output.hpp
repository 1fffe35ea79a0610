// Writing a small text file (a manifest, a search state) atomically: the text goes to
// PATH.partial, which is then renamed over PATH, so a reader or a resumed run never sees half of
// it. Throws selfspec::Error naming `what` and the file when writing or renaming fails.
#pragma once

#include <filesystem>
#include <string_view>

namespace selfspec {

void write_text_file_atomically(const std::filesystem::path& path, std::string_view text,
                                std::string_view what);

}  // namespace selfspec
