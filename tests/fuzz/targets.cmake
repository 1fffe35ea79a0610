# The parser fuzz targets, one tests/fuzz/<name>_fuzz.cpp each, and the libraries each links.
# Read by the fuzz build (tests/fuzz/CMakeLists.txt builds them) and by the main build
# (tests/fuzz/fuzz_tests.cmake registers one ctest per name).
set(SELFSPEC_FUZZ_TARGETS
  safetensors gguf model_config bpe_tokenizer sentencepiece gguf_tokenizer chat_template
  openai_request)
set(SELFSPEC_FUZZ_LIBS_safetensors selfspec_model_io)
set(SELFSPEC_FUZZ_LIBS_gguf selfspec_model_io)
set(SELFSPEC_FUZZ_LIBS_model_config selfspec_model_io nlohmann_json::nlohmann_json)
set(SELFSPEC_FUZZ_LIBS_bpe_tokenizer selfspec_tokenizer)
set(SELFSPEC_FUZZ_LIBS_sentencepiece selfspec_tokenizer)
set(SELFSPEC_FUZZ_LIBS_gguf_tokenizer selfspec_tokenizer)
set(SELFSPEC_FUZZ_LIBS_chat_template selfspec_tokenizer)
set(SELFSPEC_FUZZ_LIBS_openai_request selfspec_serve_api nlohmann_json::nlohmann_json)
