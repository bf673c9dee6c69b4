#include "sparse/west_prior.h"

#include <nlohmann/json.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "io/atomic_file.h"
#include "sparse/estimator_math.h"
#include "sparse/policy_options.h"

namespace vidax::sparse {
namespace {

constexpr char kMagic[8] = {'V', 'I', 'D', 'A', 'X', 'W', 'S', 'T'};
constexpr uint64_t kMaxHeader = 1 << 20;

int64_t checked_int(const nlohmann::json& h, const char* key, int64_t lo, int64_t hi,
                    const std::string& path) {
  if (!h.contains(key) || !h[key].is_number_integer())
    throw_input_error("WEST prior ", path, ": header needs integer \"", key, "\"");
  const auto v = h[key].get<int64_t>();
  if (v < lo || v > hi)
    throw_input_error("WEST prior ", path, ": \"", key, "\" = ", v, " must be in [", lo, ", ", hi,
                      "]");
  return v;
}

}  // namespace

void write_west_prior(const std::string& path, const WestPrior& p) {
  VIDAX_CHECK(static_cast<int64_t>(p.mass.size()) == p.layers * p.heads * p.cells() * p.cells());
  nlohmann::json h = {{"format", "vidax-west"},
                      {"version", 1},
                      {"layers", p.layers},
                      {"heads", p.heads},
                      {"grid", {p.grid[0], p.grid[1], p.grid[2]}},
                      {"dtype", "F32"},
                      {"calibration", nlohmann::json::parse(p.calibration)}};
  const std::string text = h.dump();
  const uint64_t n = text.size();
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  AtomicFile f(path);
  f.write_all(kMagic, 8);
  f.write_all(len, 8);
  f.write_all(text.data(), text.size());
  static_assert(std::endian::native == std::endian::little, "the .west payload is little-endian");
  f.write_all(p.mass.data(), p.mass.size() * sizeof(float));
  f.commit();
}

WestPrior read_west_prior(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error("WEST prior ", path, ": cannot open the file");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 16 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    throw_input_error("WEST prior ", path,
                      ": not a .west file (expected the 8-byte magic VIDAXWST and a header "
                      "length)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
  if (n > kMaxHeader || n > bytes.size() - 16)
    throw_input_error("WEST prior ", path, ": header length ", n, " runs past the file (",
                      bytes.size(), " bytes)");
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(bytes.begin() + 16, bytes.begin() + 16 + static_cast<int64_t>(n));
  } catch (const nlohmann::json::exception& e) {
    throw_input_error("WEST prior ", path, ": header is not valid JSON (", e.what(), ")");
  }
  if (!h.is_object() || h.value("format", "") != "vidax-west")
    throw_input_error("WEST prior ", path, ": header \"format\" must be \"vidax-west\"");
  if (checked_int(h, "version", 1, 1000, path) != 1)
    throw_input_error("WEST prior ", path, ": version ", h["version"].get<int64_t>(),
                      " is not supported (this vidax reads version 1)");
  if (h.value("dtype", "") != "F32")
    throw_input_error("WEST prior ", path, ": \"dtype\" must be \"F32\"");
  WestPrior p;
  p.layers = checked_int(h, "layers", 1, 4096, path);
  p.heads = checked_int(h, "heads", 1, 1024, path);
  if (!h.contains("grid") || !h["grid"].is_array() || h["grid"].size() != 3)
    throw_input_error("WEST prior ", path, ": \"grid\" must be [cells_t, cells_h, cells_w]");
  for (int a = 0; a < 3; ++a) {
    if (!h["grid"][a].is_number_integer() || h["grid"][a].get<int64_t>() < 1 ||
        h["grid"][a].get<int64_t>() > 64)
      throw_input_error("WEST prior ", path, ": \"grid\" entries must be integers in [1, 64]");
    p.grid[static_cast<size_t>(a)] = h["grid"][a].get<int64_t>();
  }
  if (p.cells() > 4096)
    throw_input_error("WEST prior ", path, ": ", p.cells(), " grid cells exceed 4096");
  if (h.contains("calibration")) p.calibration = h["calibration"].dump();
  const auto values = static_cast<uint64_t>(p.layers * p.heads * p.cells() * p.cells());
  const uint64_t payload = bytes.size() - 16 - n;
  if (payload != values * 4)
    throw_input_error("WEST prior ", path, ": payload has ", payload, " bytes, the header (",
                      p.layers, " layers x ", p.heads, " heads x ", p.cells(), "^2 cells) needs ",
                      values * 4);
  p.mass.resize(values);
  std::memcpy(p.mass.data(), bytes.data() + 16 + n, values * 4);
  const int64_t c = p.cells();
  for (int64_t l = 0; l < p.layers; ++l)
    for (int64_t hd = 0; hd < p.heads; ++hd)
      for (int64_t r = 0; r < c; ++r) {
        const float* row = p.row(l, hd, r);
        double s = 0;
        for (int64_t j = 0; j < c; ++j) {
          if (!std::isfinite(row[j]) || row[j] < 0.0f || row[j] > 1.0f)
            throw_input_error("WEST prior ", path, ": layer ", l, " head ", hd, " cell ", r,
                              " holds ", row[j], " (mass must be in [0, 1])");
          s += row[j];
        }
        if (std::abs(s - 1.0) > 1e-3)
          throw_input_error("WEST prior ", path, ": layer ", l, " head ", hd, " cell ", r,
                            " sums to ", s, " (rows must sum to 1)");
      }
  return p;
}

int64_t west_token_cell(const TokenGrid& g, const std::array<int64_t, 3>& cells, int64_t n) {
  // By the token's centre, as blocks are mapped: floor((2 i + 1) * cells / (2 E)).
  const auto c = token_coords(g, n);
  const int64_t ct = (2 * c[0] + 1) * cells[0] / (2 * g.frames),
                ch = (2 * c[1] + 1) * cells[1] / (2 * g.height),
                cw = (2 * c[2] + 1) * cells[2] / (2 * g.width);
  return (ct * cells[1] + ch) * cells[2] + cw;
}

int64_t west_block_cell(const TokenGrid& g, const std::array<int64_t, 3>& cells,
                        const TokenLayout& layout, int64_t block) {
  // The block's box from its first and last token (blocks are boxes in raster order).
  const auto a = token_coords(g, layout.original(layout.blocks.begin(block)));
  const auto b =
      token_coords(g, layout.original(layout.blocks.begin(block) + layout.blocks.size(block) - 1));
  const int64_t extent[3] = {g.frames, g.height, g.width};
  int64_t cell[3];
  for (int ax = 0; ax < 3; ++ax) {
    // Centre (a + b + 1) / 2 in token units, scaled to cells: floor((a + b + 1) * cells / (2 E)).
    cell[ax] = std::min(cells[static_cast<size_t>(ax)] - 1,
                        (a[static_cast<size_t>(ax)] + b[static_cast<size_t>(ax)] + 1) *
                            cells[static_cast<size_t>(ax)] / (2 * extent[ax]));
  }
  return (cell[0] * cells[1] + cell[1]) * cells[2] + cell[2];
}

WestAccumulator::WestAccumulator(std::array<int64_t, 3> cells, int64_t samples, uint64_t seed)
    : cells_(cells), samples_(samples), seed_(seed) {
  for (const int64_t c : cells)
    if (c < 1 || c > 64) throw_input_error("WEST calibration: grid cells must be in [1, 64]");
}

void WestAccumulator::add(const AttentionCall& call) {
  validate_call(call, "WEST calibration");
  const int64_t c = cells_[0] * cells_[1] * cells_[2], n = call.grid.tokens();
  if (calls_ == 0) {
    layers_ = call.layers;
    heads_ = call.heads;
    sum_.assign(static_cast<size_t>(layers_ * heads_ * c * c), 0.0);
    count_.assign(static_cast<size_t>(layers_ * heads_ * c), 0);
  } else if (call.layers != layers_ || call.heads != heads_) {
    throw_input_error("WEST calibration: calls disagree on the model (", layers_, " layers x ",
                      heads_, " heads, then ", call.layers, " x ", call.heads, ")");
  }
  VIDAX_CHECK(call.layer >= 0 && call.layer < layers_);
  ++calls_;
  std::vector<int32_t> cell(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t)
    cell[static_cast<size_t>(t)] = static_cast<int32_t>(west_token_cell(call.grid, cells_, t));
  std::vector<int64_t> rows;
  if (samples_ <= 0) {
    for (int64_t t = 0; t < n; ++t) rows.push_back(t);
  } else {
    uint64_t state = mix64(seed_ ^ mix64(static_cast<uint64_t>(calls_)));
    for (int64_t i = 0; i < samples_; ++i) {
      state = mix64(state);
      rows.push_back(static_cast<int64_t>(state % static_cast<uint64_t>(n)));
    }
  }
  std::vector<float> probs;  // [tokens, rows]
  const auto nr = static_cast<int64_t>(rows.size());
  std::vector<double> acc;
  for (int64_t h = 0; h < call.heads; ++h) {
    const int64_t base = call.layer * heads_ + h;
    sampled_attention_rows(call, h, rows, probs);
    // Per sampled row its mass per key cell [rows, cells], then summed by query cell.
    acc.assign(static_cast<size_t>(nr * c), 0.0);
    for (int64_t t = 0; t < n; ++t) {
      const float* p = &probs[static_cast<size_t>(t * nr)];
      const int64_t kc = cell[static_cast<size_t>(t)];
      for (int64_t i = 0; i < nr; ++i) acc[static_cast<size_t>(i * c + kc)] += p[i];
    }
    for (int64_t i = 0; i < nr; ++i) {
      const int64_t qc = cell[static_cast<size_t>(rows[static_cast<size_t>(i)])];
      double* dst = &sum_[static_cast<size_t>((base * c + qc) * c)];
      for (int64_t j = 0; j < c; ++j) dst[j] += acc[static_cast<size_t>(i * c + j)];
      ++count_[static_cast<size_t>(base * c + qc)];
    }
  }
}

WestPrior WestAccumulator::prior(const std::string& calibration_json) const {
  if (calls_ == 0) throw_input_error("WEST calibration: no attention call was recorded");
  WestPrior p;
  p.layers = layers_;
  p.heads = heads_;
  p.grid = cells_;
  p.calibration = calibration_json;
  const int64_t c = p.cells();
  p.mass.resize(sum_.size());
  for (int64_t r = 0; r < layers_ * heads_ * c; ++r) {
    const int64_t cnt = count_[static_cast<size_t>(r)];
    double s = 0;
    for (int64_t j = 0; j < c; ++j) s += sum_[static_cast<size_t>(r * c + j)];
    for (int64_t j = 0; j < c; ++j)
      p.mass[static_cast<size_t>(r * c + j)] =
          cnt > 0 && s > 0 ? static_cast<float>(sum_[static_cast<size_t>(r * c + j)] / s)
                           : 1.0f / static_cast<float>(c);
  }
  return p;
}

}  // namespace vidax::sparse
