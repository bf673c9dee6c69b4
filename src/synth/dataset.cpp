// Dataset export (shards + manifest + preview) and reading it back.
#include "synth/dataset.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "synth/synth_png.h"

namespace vidax::synth {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr const char* kFormat = "vidax-synth";
constexpr int64_t kPreviewColumns = 5;
constexpr int64_t kPreviewGap = 2;  // pixels between tiles

std::string shard_name(int64_t shard) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "clips-%05" PRId64 ".safetensors", shard);
  return buf;
}

std::string hex64(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

Json point(int32_t x, int32_t y, int32_t size) { return Json{{"x", x}, {"y", y}, {"size", size}}; }

Json clip_entry(const SceneSpec& s, int64_t index, int64_t shard, int64_t row, uint64_t sum) {
  Json objects = Json::array();
  for (const auto& o : s.objects) {
    objects.push_back(Json{{"color", object_colors()[static_cast<size_t>(o.color)].name},
                           {"shape", shape_name(o.shape)},
                           {"motion", motion_name(o.motion)},
                           {"start", point(o.x0, o.y0, o.size0)},
                           {"end", point(o.x1, o.y1, o.size1)},
                           {"bounce_depth", o.bounce_depth}});
  }
  return Json{{"index", index},
              {"seed", s.seed},
              {"caption", caption(s)},
              {"background", background_colors()[static_cast<size_t>(s.background)].name},
              {"objects", objects},
              {"shard", shard},
              {"row", row},
              {"fnv1a64", hex64(sum)}};
}

void write_text_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      throw_input_error(path, ": cannot write file");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw_input_error(path, ": cannot write file");
  }
}

// Rows: clips; columns: kPreviewColumns frames spread over the clip.
void write_preview(const std::string& path, const std::vector<Tensor>& clips,
                   const ClipGeometry& g) {
  const int64_t cols = std::min(kPreviewColumns, g.frames);
  const int64_t pw = cols * g.width + (cols - 1) * kPreviewGap;
  const int64_t ph = static_cast<int64_t>(clips.size()) * (g.height + kPreviewGap) - kPreviewGap;
  std::vector<uint8_t> img(static_cast<size_t>(pw * ph * 3), 128);
  for (size_t r = 0; r < clips.size(); ++r) {
    const uint8_t* src = clips[r].data<uint8_t>();
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t f = cols > 1 ? (c * (g.frames - 1) + (cols - 1) / 2) / (cols - 1) : 0;
      for (int64_t y = 0; y < g.height; ++y) {
        const int64_t oy = static_cast<int64_t>(r) * (g.height + kPreviewGap) + y;
        const int64_t ox = c * (g.width + kPreviewGap);
        std::memcpy(&img[static_cast<size_t>((oy * pw + ox) * 3)],
                    src + (f * g.height + y) * g.width * 3, static_cast<size_t>(g.width * 3));
      }
    }
  }
  write_png_rgb8(path, img.data(), pw, ph);
}

}  // namespace

DatasetSummary write_dataset(const DatasetOptions& o,
                             const std::function<void(int64_t done)>& progress) {
  if (o.count <= 0)
    throw_input_error("--count: expected a positive number of clips, got ", o.count);
  if (o.shard_size <= 0)
    throw_input_error("--shard-size: expected a positive number of clips, got ", o.shard_size);
  if (o.preview < 0 || o.preview > 64)
    throw_input_error("--preview: expected 0..64 clips, got ", o.preview);
  const ClipGeometry& g = o.geometry;
  const int64_t tokens = dit_tokens(g, "--size/--frames");
  if (o.out_dir.empty()) throw_input_error("--out: expected a folder");
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec || !fs::is_directory(o.out_dir))
    throw_input_error("--out ", o.out_dir, ": cannot create folder (", ec.message(), ")");
  if (::access(o.out_dir.c_str(), W_OK) != 0)
    throw_input_error("--out ", o.out_dir, ": folder is not writable");

  DatasetSummary summary;
  Json clips = Json::array(), shards = Json::array();
  std::vector<Tensor> preview;
  const int64_t clip_bytes = g.frames * g.height * g.width * 3;
  for (int64_t first = 0, shard = 0; first < o.count; first += o.shard_size, ++shard) {
    const int64_t n = std::min(o.shard_size, o.count - first);
    Tensor pixels = Tensor::zeros(Shape{n, g.frames, g.height, g.width, 3}, DType::kU8);
    Tensor seeds = Tensor::zeros(Shape{n}, DType::kI64);  // [n]
    for (int64_t row = 0; row < n; ++row) {
      const int64_t index = first + row;
      const SceneSpec s = sample_scene(o.seed + static_cast<uint64_t>(index), o.layout);
      const Tensor clip = render_rgb8(s, g);  // [F, H, W, 3]
      std::memcpy(pixels.mutable_data<uint8_t>() + row * clip_bytes, clip.data<uint8_t>(),
                  static_cast<size_t>(clip_bytes));
      seeds.mutable_data<int64_t>()[row] = static_cast<int64_t>(s.seed);
      clips.push_back(clip_entry(s, index, shard, row, fnv1a64(clip)));
      if (index < o.preview) preview.push_back(clip);
    }
    const std::string name = shard_name(shard);
    write_safetensors((fs::path(o.out_dir) / name).string(), {{"clips", pixels}, {"seeds", seeds}},
                      {{"format", kFormat},
                       {"format_version", std::to_string(kDatasetFormatVersion)},
                       {"generator_version", std::to_string(kGeneratorVersion)},
                       {"first_index", std::to_string(first)}});
    shards.push_back(Json{{"file", name}, {"first", first}, {"count", n}});
    summary.files.push_back(name);
    summary.clips += n;
    if (progress) progress(summary.clips);
  }
  if (!preview.empty()) {
    write_preview((fs::path(o.out_dir) / "preview.png").string(), preview, g);
    summary.files.push_back("preview.png");
  }

  Json colors = Json::object(), backgrounds = Json::object();
  for (const auto& c : object_colors()) colors[std::string(c.name)] = {c.rgb.r, c.rgb.g, c.rgb.b};
  for (const auto& c : background_colors())
    backgrounds[std::string(c.name)] = {c.rgb.r, c.rgb.g, c.rgb.b};
  const Json manifest = {{"format", kFormat},
                         {"format_version", kDatasetFormatVersion},
                         {"generator_version", kGeneratorVersion},
                         {"seed", o.seed},
                         {"layout", layout_name(o.layout)},
                         {"count", o.count},
                         {"geometry",
                          {{"width", g.width},
                           {"height", g.height},
                           {"frames", g.frames},
                           {"latent", {(g.frames - 1) / 4 + 1, g.height / 8, g.width / 8}},
                           {"dit_tokens", tokens}}},
                         {"pixels",
                          {{"tensor", "clips"},
                           {"dtype", "U8"},
                           {"layout", "[N, F, H, W, 3] RGB"},
                           {"to_model", "(v - 127.5) / 127.5, then [3, F, H, W]"}}},
                         {"palette", {{"objects", colors}, {"backgrounds", backgrounds}}},
                         {"shards", shards}};
  // Indented header, then one line per clip: readable, and small for tens of thousands of clips.
  std::string text = manifest.dump(1);
  text.resize(text.size() - 2);  // the closing "\n}"
  text += ",\n \"clips\": [";
  for (size_t i = 0; i < clips.size(); ++i) text += (i ? ",\n  " : "\n  ") + clips[i].dump();
  text += "\n ]\n}\n";
  write_text_atomic((fs::path(o.out_dir) / "manifest.json").string(), text);
  summary.files.push_back("manifest.json");
  return summary;
}

SynthDataset SynthDataset::open(const std::string& dir) {
  const std::string path = (fs::path(dir) / "manifest.json").string();
  std::ifstream f(path);
  if (!f) throw_input_error(path, ": cannot open (not a vidax synth dataset folder?)");
  Json m;
  try {
    m = Json::parse(f);
  } catch (const std::exception& e) {
    throw_input_error(path, ": invalid JSON (", e.what(), ")");
  }
  SynthDataset d;
  try {
    if (m.at("format").get<std::string>() != kFormat ||
        m.at("format_version").get<int>() != kDatasetFormatVersion)
      throw_input_error(path, ": expected format ", kFormat, " version ", kDatasetFormatVersion);
    const Json& g = m.at("geometry");
    d.geometry_ = {g.at("width").get<int64_t>(), g.at("height").get<int64_t>(),
                   g.at("frames").get<int64_t>()};
    check_geometry(d.geometry_, path);
    if (m.contains("layout"))
      d.layout_ = parse_layout(m.at("layout").get<std::string>(), path + ": layout");
    for (const Json& s : m.at("shards")) {
      d.shards_.push_back(
          SafetensorsFile::open((fs::path(dir) / s.at("file").get<std::string>()).string()));
      const Shape want{s.at("count").get<int64_t>(), d.geometry_.frames, d.geometry_.height,
                       d.geometry_.width, 3};
      const TensorEntry& e = d.shards_.back().entry("clips");
      if (e.dtype != DType::kU8 || e.shape != want)
        throw_input_error(d.shards_.back().path(), ": tensor clips is ", dtype_name(e.dtype), " ",
                          e.shape.str(), ", expected U8 ", want.str());
    }
    for (const Json& c : m.at("clips")) {
      const auto shard = c.at("shard").get<size_t>();
      const auto row = c.at("row").get<int64_t>();
      if (shard >= d.shards_.size() || row < 0 || row >= d.shards_[shard].entry("clips").shape[0])
        throw_input_error(path, ": clip ", d.seeds_.size(), " points outside the shards");
      d.seeds_.push_back(c.at("seed").get<uint64_t>());
      d.captions_.push_back(c.at("caption").get<std::string>());
      d.where_.emplace_back(shard, row);
    }
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(path, ": missing or mistyped field (", e.what(), ")");
  }
  return d;
}

Tensor SynthDataset::clip(int64_t index) const {
  if (index < 0 || index >= size())
    throw_input_error("dataset clip ", index, " out of range (", size(), " clips)");
  const auto [shard, row] = where_[static_cast<size_t>(index)];
  return shards_[shard].tensor("clips").select(0, row);
}

}  // namespace vidax::synth
