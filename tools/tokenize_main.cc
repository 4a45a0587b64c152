// tokenize: the token ids the model's own tokenizer gives each text.
//
//   tokenize --model M.gguf < texts      (texts separated by NUL bytes)
//
// Prints one line per text: its ids separated by spaces (no BOS/EOS added,
// special tokens not parsed: Tokenizer::Encode(text, false)). Lets a
// trainer check its tokenization against Sluice's (train/check_tokenizer.py).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "loader/model_files.h"
#include "model/tokenizer_gguf.h"

ABSL_FLAG(std::string, model, "", "GGUF model (or any shard of a split set)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto files = sluice::ModelFiles::Open(absl::GetFlag(FLAGS_model));
  if (!files.ok()) {
    std::fprintf(stderr, "tokenize: %s\n", std::string(files.status().message()).c_str());
    return 1;
  }
  auto tokenizer = sluice::TokenizerFromGguf((*files)->metadata());
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "tokenize: %s\n", std::string(tokenizer.status().message()).c_str());
    return 1;
  }
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  for (absl::string_view text : absl::StrSplit(input, '\0')) {
    std::printf("%s\n", absl::StrJoin((*tokenizer)->Encode(std::string_view(text.data(), text.size()), false), " ").c_str());
  }
  return 0;
}
