#include "eval/suite.h"

#include <fstream>

#include "core/error.h"

namespace vidax::eval {
namespace {

Suite synthetic_suite(const std::string& name, int prompts, int seeds) {
  Suite s;
  s.name = name;
  for (int i = 0; i < prompts; ++i) {
    const uint64_t scene_seed = kSuiteSceneSeed + static_cast<uint64_t>(i);
    const synth::SceneSpec scene = synth::sample_scene(scene_seed);
    s.prompts.push_back({synth::caption(scene), synth::attributes(scene), scene_seed});
  }
  s.seeds = suite_seeds(seeds);
  return s;
}

}  // namespace

std::vector<uint64_t> suite_seeds(int count) {
  if (count < 1 || count > 1000)
    throw_input_error("--seeds: expected 1..1000 generation seeds, got ", count);
  std::vector<uint64_t> out;
  out.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) out.push_back(kSuiteNoiseSeed + static_cast<uint64_t>(i));
  return out;
}

Suite builtin_suite(const std::string& name) {
  if (name == "default") return synthetic_suite(name, 24, 2);
  if (name == "ci") return synthetic_suite(name, 3, 1);
  throw_input_error("--suite: expected default or ci, got '", name, "'");
}

Suite prompt_file_suite(const std::string& path, int seeds) {
  std::ifstream in(path);
  if (!in) throw_input_error(path, ": cannot read the prompt file");
  Suite s;
  s.name = path;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    SuitePrompt p;
    p.text = line.substr(first);
    try {
      p.expected = synth::parse_caption(p.text);
    } catch (const InputError&) {
      p.expected.reset();  // not a synthetic-world caption: no adherence for this prompt
    }
    s.prompts.push_back(std::move(p));
  }
  if (s.prompts.empty()) throw_input_error(path, ": no prompt in the file (one per line)");
  s.seeds = suite_seeds(seeds);
  return s;
}

}  // namespace vidax::eval
