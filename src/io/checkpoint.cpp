#include "io/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/error.h"
#include "io/comfy_fp8.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "a, b, c, d and 3 more": the first four names of a problem list.
std::string first_names(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 4; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > 4) s += str_cat(" and ", v.size() - 4, " more");
  return s;
}

}  // namespace

bool CheckpointNames::any_starts_with(const std::string& prefix) const {
  for (const auto& n : list)
    if (n.starts_with(prefix)) return true;
  return false;
}

std::optional<std::string> CheckpointNames::prefix_of(const std::string& suffix) const {
  for (const auto& n : list)
    if (n.ends_with(suffix)) return n.substr(0, n.size() - suffix.size());
  return std::nullopt;
}

std::string checkpoint_layout_name(const std::vector<CheckpointLayout>& layouts, int id) {
  for (const auto& l : layouts)
    if (l.id == id) return l.name;
  return "?";
}

std::function<std::optional<std::string>(const CheckpointNames&)> any_marker(
    std::vector<std::string> markers) {
  return
      [markers = std::move(markers)](const CheckpointNames& names) -> std::optional<std::string> {
        for (const auto& m : markers)
          if (names.contains(m)) return std::string();
        return std::nullopt;
      };
}

Checkpoint Checkpoint::open(const std::string& path, const std::vector<CheckpointLayout>& layouts,
                            const std::string& not_recognised) {
  Checkpoint ck;
  ck.path_ = path;
  ck.source_ = TensorSource::open(path);
  ck.names_ = CheckpointNames(ck.source_.names());
  for (const CheckpointLayout& layout : layouts) {
    if (auto prefix = layout.detect(ck.names_)) {
      ck.layout_ = layout;
      ck.prefix_ = *prefix;
      return ck;
    }
  }
  const auto& names = ck.names_.list;
  std::string some;
  for (size_t i = 0; i < names.size() && i < 3; ++i) some += (i ? ", " : "") + names[i];
  throw_input_error(path, ": ", not_recognised, "; found ", names.size(), " tensors such as ",
                    some.empty() ? "(none)" : some);
}

std::string Checkpoint::layout_file_name(const std::string& official) const {
  if (!layout_.rename) return prefix_ + official;
  return layout_.rename(official, prefix_, names_);
}

std::optional<Shape> Checkpoint::layout_shape(const std::string& official) const {
  const std::string n = layout_file_name(official);
  if (!source_.contains(n)) return std::nullopt;
  return source_.entry(n).shape;
}

void Checkpoint::check(const std::vector<TensorDecl>& decls, const CheckOptions& options) {
  scaled_fp8_ = options.scaled_fp8;
  std::set<std::string> used;
  for (const TensorDecl& d : decls) {
    const std::string fname = options.to_file ? options.to_file(d.name) : layout_file_name(d.name);
    if (!source_.contains(fname)) {
      missing_.push_back(d.name);
      continue;
    }
    used.insert(fname);
    to_file_[d.name] = fname;
    const TensorEntry& e = source_.entry(fname);
    const bool reshaped = options.vector_reshape && d.role == TensorRole::kVector &&
                          e.shape.numel() == d.shape.numel();
    if (e.shape != d.shape && !reshaped) {
      mismatches_.push_back({fname, d.shape, e.shape});
      problems_.push_back(
          str_cat("tensor '", fname, "' has shape ", e.shape.str(), ", expected ", d.shape.str()));
    }
    if (!dtype_accepted(d.dtype, e.dtype)) {
      bad_dtype_.push_back(fname + " (" + std::string(dtype_name(e.dtype)) + ")");
      problems_.push_back(str_cat("tensor '", fname, "' has dtype ", dtype_name(e.dtype),
                                  ", expected a float type"));
    }
    if (!options.scaled_fp8) continue;
    if (auto scale = scale_weight_name(fname); scale && source_.contains(*scale))
      used.insert(*scale);  // ComfyUI scaled fp8: consumed by get()
  }
  for (const auto& n : names_.list) {
    if (used.count(n)) continue;
    if (options.scaled_fp8 && is_scaled_fp8_bookkeeping(n)) continue;
    if (options.ignore && options.ignore(n)) continue;
    unexpected_.push_back(n);
  }
}

void Checkpoint::require_loadable(const Wording& w) const {
  const size_t problems = w.dtype_is_problem ? problems_.size() : mismatches_.size();
  if (problems > 0) {
    std::string first = problems_.front();  // shape and dtype problems in declaration order
    if (!w.dtype_is_problem) {
      const auto& m = mismatches_.front();
      first = str_cat("tensor '", m.name, "' has shape ", m.actual.str(), ", expected ",
                      m.expected.str());
    }
    throw_input_error(path_, ": ", first, w.problem,
                      problems > 1 ? str_cat(" (", problems - 1, " more)") : "");
  }
  if (!missing_.empty())
    throw_input_error(path_, ": ", missing_.size(), " tensor(s) missing for a ", w.model, ": ",
                      first_names(missing_));
  if (!bad_dtype_.empty() && !w.dtype_is_problem)
    throw_input_error(path_,
                      ": unsupported dtype (expected a float type): ", first_names(bad_dtype_));
  if (!unexpected_.empty())
    throw_input_error(path_, ": ", unexpected_.size(), " unexpected tensor(s) for a ", w.unexpected,
                      ": ", first_names(unexpected_));
}

std::string Checkpoint::file_name(const std::string& official) const {
  auto it = to_file_.find(official);
  VIDAX_CHECK(it != to_file_.end(), "tensor ", official, " not resolved");
  return it->second;
}

Tensor Checkpoint::get(const std::string& official) const {
  if (!scaled_fp8_) return source_.tensor(file_name(official));
  return read_scaled_weight(source_, file_name(official), path_);
}

std::optional<Fp8Tensor> Checkpoint::get_fp8(const std::string& official) const {
  return read_fp8_weight(source_, file_name(official), path_);
}

std::function<std::optional<Fp8Tensor>(const std::string&)> Checkpoint::fp8_loader() const {
  auto handed_out = std::make_shared<size_t>(0);
  return [this, handed_out](const std::string& official) {
    constexpr size_t kReleaseEvery = size_t{256} << 20;
    if (*handed_out >= kReleaseEvery) {
      source_.release_resident_pages();
      *handed_out = 0;
    }
    std::optional<Fp8Tensor> f = get_fp8(official);
    if (f) *handed_out += f->codes.nbytes();
    return f;
  };
}

std::function<Tensor(const std::string&)> Checkpoint::loader() const {
  auto handed_out = std::make_shared<size_t>(0);
  return [this, handed_out](const std::string& official) {
    constexpr size_t kReleaseEvery = size_t{256} << 20;
    if (*handed_out >= kReleaseEvery) {
      source_.release_resident_pages();
      *handed_out = 0;
    }
    Tensor t = get(official);
    *handed_out += t.nbytes();
    return t;
  };
}

std::optional<ConfigText> find_config_text(const Checkpoint& ck,
                                           const std::function<bool(const std::string&)>& accept,
                                           const std::vector<std::string>& metadata_keys) {
  const fs::path p(ck.path());
  fs::path dir = fs::is_directory(p) ? p : p.parent_path();
  if (dir.empty()) dir = ".";
  const fs::path json = dir / "config.json";
  if (fs::is_regular_file(json)) {
    std::string text = read_text(json);
    if (accept(text)) return ConfigText{std::move(text), json.string(), json.string(), ""};
  }
  const auto& meta = ck.source().metadata();
  for (const auto& key : metadata_keys)
    if (meta.count(key))
      return ConfigText{meta.at(key), ck.path() + " (safetensors metadata)", "file metadata", key};
  return std::nullopt;
}

}  // namespace vidax
