// The umT5 prompt tokenizer: the reference cleaning (whitespace, HTML entities, quotes), ids
// against the sentencepiece CLI for a tiny real model (tests/data/tokenizer, made by
// tools/make_test_tokenizer.sh), </s>, truncation, padding, and refusals.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/safetensors.h"
#include "models/wan/tokenizer.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

using vidax::testing::TempDir;

const std::string kDataDir = std::string(VIDAX_SOURCE_DIR) + "/tests/data/tokenizer";
const std::string kModel = kDataDir + "/spiece.model";

std::vector<int64_t> parse_ids(const std::string& line) {
  std::vector<int64_t> ids;
  std::istringstream in(line);
  int64_t v;
  while (in >> v) ids.push_back(v);
  return ids;
}

// Committed "text<TAB>ids" lines written by tools/make_test_tokenizer.sh with spm_encode.
std::vector<std::pair<std::string, std::vector<int64_t>>> committed_ids() {
  std::ifstream in(kDataDir + "/expected_ids.tsv");
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    out.emplace_back(line.substr(0, tab), parse_ids(line.substr(tab + 1)));
  }
  return out;
}

// Ids from the spm_encode CLI when it is installed (nullopt otherwise).
std::optional<std::vector<int64_t>> spm_encode_ids(const std::string& text) {
  if (!std::filesystem::exists("/usr/bin/spm_encode")) return std::nullopt;
  TempDir dir;
  {
    std::ofstream f(dir.file("in.txt"));
    f << text << "\n";
  }
  const std::string cmd = "/usr/bin/spm_encode --model=" + kModel + " --output_format=id < " +
                          dir.file("in.txt") + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) return std::nullopt;
  return parse_ids(out);
}

std::vector<int64_t> real_ids(const TokenizedText& t) {
  return std::vector<int64_t>(t.ids.data<int64_t>(), t.ids.data<int64_t>() + t.count);
}

TEST(T5Tokenizer, CleanPromptCollapsesWhitespaceAndKeepsCase) {
  EXPECT_EQ(clean_prompt("  A  Cat\t\twalks\n\non   GRASS.  "), "A Cat walks on GRASS.");
  // Unicode whitespace (no-break space, ideographic space, line separator) collapses too.
  EXPECT_EQ(clean_prompt("a\u00a0\u3000b\u2028c"), "a b c");
  // Information separators are not \s for the regex module, but strip() removes them at ends.
  EXPECT_EQ(clean_prompt("\x1c"
                         "a b\x1f"),
            "a b");
  EXPECT_EQ(clean_prompt(" \t\n "), "");
  EXPECT_EQ(clean_prompt("No punctuation removal: (a), b; c!"),
            "No punctuation removal: (a), b; c!");
}

TEST(T5Tokenizer, CleanPromptUnescapesHtmlTwiceAndUncurlsQuotes) {
  EXPECT_EQ(clean_prompt("fish &amp; chips"), "fish & chips");
  EXPECT_EQ(clean_prompt("fish &amp;amp; chips"), "fish & chips");  // twice
  EXPECT_EQ(clean_prompt("&lt;b&gt; &#65;&#x42;&#X63; caf&eacute;"), "<b> ABc café");
  EXPECT_EQ(clean_prompt("a&nbsp;&nbsp;b"), "a b");  // unescaped, then whitespace-collapsed
  // Legacy names work without ';' (longest prefix), others need it; unknown names stay.
  EXPECT_EQ(clean_prompt("&ampx &copy2023 &hellip &bogus;"), "&x ©2023 &hellip &bogus;");
  // Numeric: cp1252 meanings for 0x80-0x9f, U+FFFD for 0 / surrogates / out of range, invalid
  // code points dropped.
  EXPECT_EQ(html_unescape("&#150;&#0;&#xD800;&#1114112;x&#1;y"), "\u2013\ufffd\ufffd\ufffdxy");
  // ftfy uncurls quotes before the unescaping, so an escaped curly quote stays curly.
  EXPECT_EQ(clean_prompt("\u201cquoted\u201d \u2018single\u2019 &ldquo;x&rdquo;"),
            "\"quoted\" 'single' \u201cx\u201d");
  // Control characters ftfy removes; invalid UTF-8 is passed through, not a crash.
  EXPECT_EQ(clean_prompt("a\x01"
                         "b\xef\xbb\xbf"
                         "c"),
            "abc");
  EXPECT_EQ(clean_prompt("a\xff"
                         "b"),
            "a\xff"
            "b");
}

TEST(T5Tokenizer, EncodeMatchesSentencepieceIdsPlusEos) {
  const Tokenizer tok = Tokenizer::open(kModel);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_EQ(tok.pad_id(), 0);
  // Raw prompts and the cleaned text they must tokenize as (the cleaned texts are the lines of
  // expected_ids.tsv).
  const std::vector<std::pair<std::string, std::string>> prompts = {
      {"  A cat walks on   the grass,\trealistic style. ",
       "A cat walks on the grass, realistic style."},
      {"Two cats &quot;fight&quot; on a stage &amp;amp; the crowd cheers &lt;loudly&gt;.",
       "Two cats \"fight\" on a stage & the crowd cheers <loudly>."},
      {"Un chat noir dort sur le rebord de la fen&ecirc;tre.",
       "Un chat noir dort sur le rebord de la fenêtre."},
      {"一只小猫在草地上玩耍。\n", "一只小猫在草地上玩耍。"},
      {"A robot\u2019s cup of coffee,\u00a04K 🚀 caf&#233;", "A robot's cup of coffee, 4K 🚀 café"},
      {"zzz   qqq xylophone", "zzz qqq xylophone"},
  };
  const auto committed = committed_ids();
  ASSERT_EQ(committed.size(), prompts.size()) << "regenerate with tools/make_test_tokenizer.sh";
  int checked_cli = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& [raw, cleaned] = prompts[i];
    ASSERT_EQ(clean_prompt(raw), cleaned);
    ASSERT_EQ(committed[i].first, cleaned);
    std::vector<int64_t> expected = committed[i].second;
    if (auto cli = spm_encode_ids(cleaned)) {
      EXPECT_EQ(*cli, expected) << "spm_encode disagrees with expected_ids.tsv for: " << cleaned;
      ++checked_cli;
    }
    EXPECT_EQ(tok.piece_ids(cleaned), expected) << cleaned;
    expected.push_back(1);  // </s>
    const TokenizedText t = tok.encode(raw, 64);
    EXPECT_EQ(real_ids(t), expected) << raw;
    ASSERT_EQ(t.ids.shape(), Shape{64});
    ASSERT_EQ(t.mask.shape(), Shape{64});
    for (int64_t k = 0; k < 64; ++k) {
      EXPECT_EQ(t.mask.data<int64_t>()[k], k < t.count ? 1 : 0);
      if (k >= t.count) {
        EXPECT_EQ(t.ids.data<int64_t>()[k], 0);
      }
    }
  }
  if (checked_cli == 0) std::printf("spm_encode not installed: compared with expected_ids.tsv\n");
}

TEST(T5Tokenizer, TruncationKeepsEosLastAndDefaultLengthIs512) {
  const Tokenizer tok = Tokenizer::open(kModel);
  const std::string prompt = "A cat walks on the grass, realistic style.";
  const std::vector<int64_t> pieces = tok.piece_ids(prompt);
  ASSERT_GT(pieces.size(), 6u);
  const TokenizedText t = tok.encode(prompt, 6);
  EXPECT_EQ(t.count, 6);
  std::vector<int64_t> expected(pieces.begin(), pieces.begin() + 5);
  expected.push_back(1);
  EXPECT_EQ(real_ids(t), expected);
  EXPECT_EQ(tok.encode(prompt, 1).count, 1);
  EXPECT_EQ(tok.encode(prompt, 1).ids.data<int64_t>()[0], 1);
  const TokenizedText full = tok.encode(prompt);
  EXPECT_EQ(full.ids.numel(), 512);
  EXPECT_EQ(full.count, static_cast<int64_t>(pieces.size()) + 1);
  // An empty prompt is just </s>, as transformers gives.
  EXPECT_EQ(real_ids(tok.encode("   ", 8)), std::vector<int64_t>{1});
  EXPECT_THROW(tok.encode(prompt, 0), InputError);
}

TEST(T5Tokenizer, OpensFoldersAndRefusesTokenizerJsonOnly) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("tokenizer"));
  std::filesystem::copy_file(kModel, dir.file("tokenizer/spiece.model"));
  EXPECT_EQ(Tokenizer::open(dir.file("tokenizer")).vocab_size(),
            Tokenizer::open(kModel).vocab_size());

  std::filesystem::create_directories(dir.file("fast_only"));
  std::ofstream(dir.file("fast_only/tokenizer.json")) << "{}";
  try {
    Tokenizer::open(dir.file("fast_only"));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("spiece.model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tokenizer::open(dir.file("fast_only/tokenizer.json")), InputError);
  EXPECT_THROW(Tokenizer::open(dir.file("missing.model")), InputError);
  std::ofstream(dir.file("garbage.model")) << "not a model";
  try {
    Tokenizer::open(dir.file("garbage.model"));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("garbage.model"), std::string::npos) << e.what();
  }
}

TEST(T5Tokenizer, FromSerializedBytesEqualsFile) {
  std::ifstream f(kModel, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const Tokenizer a = Tokenizer::from_serialized(bytes, "embedded");
  const Tokenizer b = Tokenizer::open(kModel);
  const std::string p = "Snow falls on a quiet village.";
  EXPECT_EQ(real_ids(a.encode(p, 32)), real_ids(b.encode(p, 32)));
  EXPECT_THROW(Tokenizer::from_serialized("junk", "embedded"), InputError);
}

// ComfyUI's umt5_xxl_*.safetensors embed the tokenizer as a U8 tensor "spiece_model".
TEST(T5Tokenizer, OpensTheModelEmbeddedInAComfyUiFile) {
  std::ifstream f(kModel, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Tensor blob = Tensor::zeros(Shape{static_cast<int64_t>(bytes.size())}, DType::kU8);
  std::memcpy(blob.raw_mutable_data(), bytes.data(), bytes.size());
  TempDir dir;
  write_safetensors(dir.file("umt5.safetensors"),
                    {{"shared.weight", Tensor::zeros(Shape{4, 2})}, {"spiece_model", blob}});
  const Tokenizer a = Tokenizer::open(dir.file("umt5.safetensors"));
  const std::string p = "A drone shot of a rocky coastline.";
  EXPECT_EQ(real_ids(a.encode(p, 32)), real_ids(Tokenizer::open(kModel).encode(p, 32)));
  write_safetensors(dir.file("none.safetensors"), {{"shared.weight", Tensor::zeros(Shape{4, 2})}});
  EXPECT_THROW(Tokenizer::open(dir.file("none.safetensors")), InputError);
}

}  // namespace
}  // namespace vidax::wan
