// A checkpoint of any model that declares its tensors (tensor_decl.h), as users download it: a
// file, sharded index or folder (TensorSource); the model's layout detected from the names; each
// declared (official) name mapped to its file name; missing / unexpected / wrong-shape /
// bad-dtype tensors reported; get() by official name, zero-copy except ComfyUI scaled fp8
// (comfy_fp8.h). Model wrappers (DitCheckpoint, ...) supply layouts, declaration and config, in
// two steps so the config can be inferred from the layout's shapes before checking:
//   ck = Checkpoint::open(path, layouts, "not a X checkpoint: expected ...");
//   config = infer(ck.layout_shape);  ck.check(decls(config), options);
// Thread-safe after check() (read-only); each loader() function belongs to one thread.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "io/comfy_fp8.h"
#include "io/safetensors.h"
#include "io/tensor_decl.h"

namespace vidax {

// The names in a checkpoint, sorted, with set lookup.
struct CheckpointNames {
  explicit CheckpointNames(std::vector<std::string> names = {})
      : list(std::move(names)), set(list.begin(), list.end()) {}
  std::vector<std::string> list;
  std::set<std::string> set;
  bool contains(const std::string& name) const { return set.count(name) != 0; }
  bool any_starts_with(const std::string& prefix) const;
  // The prefix in front of the first name ending in `suffix`, if any.
  std::optional<std::string> prefix_of(const std::string& suffix) const;
};

// One way a model's tensors are named in files.
struct CheckpointLayout {
  int id = 0;        // the model's layout enum value
  std::string name;  // for reports: "official", "diffusers", ...
  // The prefix the names sit under ("" for none) when the file follows this layout, else
  // nullopt. The first matching layout of a table wins.
  std::function<std::optional<std::string>(const CheckpointNames&)> detect;
  // Official name -> file name, given the detected prefix and the file's names; empty means
  // prefix + official name.
  std::function<std::string(const std::string& official, const std::string& prefix,
                            const CheckpointNames&)>
      rename;
};

// The name of the layout `id` of a table ("?" when absent).
std::string checkpoint_layout_name(const std::vector<CheckpointLayout>& layouts, int id);

// A layout detector matching when any of `markers` is in the file (prefix "").
std::function<std::optional<std::string>(const CheckpointNames&)> any_marker(
    std::vector<std::string> markers);

struct ShapeMismatch {
  std::string name;  // file name of the tensor
  Shape expected, actual;
};

class Checkpoint {
 public:
  struct CheckOptions {
    bool scaled_fp8 = true;      // get() applies `.scale_weight`s; fp8 bookkeeping not reported
    bool vector_reshape = true;  // a kVector may be stored in any shape of its element count
    // File names that are neither weights nor problems (a tied copy, an embedded tokenizer).
    std::function<bool(const std::string&)> ignore;
    // Official -> file name when it depends on the config too; empty: the layout's rename.
    std::function<std::string(const std::string&)> to_file;
  };

  // Opens `path` and detects its layout; when none matches, throws InputError with
  // `not_recognised` and a few of the file's names.
  static Checkpoint open(const std::string& path, const std::vector<CheckpointLayout>& layouts,
                         const std::string& not_recognised);

  const std::string& path() const { return path_; }
  int layout_id() const { return layout_.id; }
  const std::string& prefix() const { return prefix_; }
  const TensorSource& source() const { return source_; }
  const CheckpointNames& names() const { return names_; }

  // Official name -> file name by the detected layout, and its stored shape (nullopt: absent).
  std::string layout_file_name(const std::string& official) const;
  std::optional<Shape> layout_shape(const std::string& official) const;

  // Checks every declared tensor; fills the problem lists below.
  void check(const std::vector<TensorDecl>& decls, const CheckOptions& options);

  // Problems found against the declaration (all empty for a loadable checkpoint).
  const std::vector<std::string>& missing() const { return missing_; }        // official names
  const std::vector<std::string>& unexpected() const { return unexpected_; }  // file names
  const std::vector<ShapeMismatch>& shape_mismatches() const { return mismatches_; }
  const std::vector<std::string>& unsupported_dtype() const { return bad_dtype_; }  // "n (I32)"
  // Shape and dtype problems as sentences, in declaration order ("tensor 'x' has shape ...").
  const std::vector<std::string>& problems() const { return problems_; }

  struct Wording {
    std::string problem;            // after the first shape problem, e.g. " for config {...}"
    std::string model;              // "N tensor(s) missing for a <model>: ..."
    std::string unexpected;         // "N unexpected tensor(s) for a <unexpected>: ..."
    bool dtype_is_problem = false;  // dtype problems reported with the shape ones (problems())
  };
  // Throws InputError naming the first problems: shape, missing, dtype, unexpected.
  void require_loadable(const Wording& wording) const;

  // The tensor for an official name, as stored (zero-copy) except fp8 tensors carrying a
  // ComfyUI `scale_weight` (with CheckOptions::scaled_fp8), which are dequantized to F32.
  Tensor get(const std::string& official) const;
  // The stored fp8 tensor and its scale when `official` is stored as fp8 (io/comfy_fp8.h), for
  // models that keep fp8 weights in memory; nullopt otherwise.
  std::optional<Fp8Tensor> get_fp8(const std::string& official) const;
  // get_fp8 as a function that drops the file's pages like loader() (its own count).
  std::function<std::optional<Fp8Tensor>(const std::string&)> fp8_loader() const;
  std::string file_name(const std::string& official) const;

  // A weight function over get() that drops the file's pages from the resident set every
  // ~256 MiB handed out: models pack weights into their own memory, and peak RSS would count
  // them twice otherwise. Safe at any time (read-only mappings fault pages back). Keeps `this`.
  std::function<Tensor(const std::string&)> loader() const;

 private:
  std::string path_;
  TensorSource source_;
  CheckpointNames names_;
  CheckpointLayout layout_;
  std::string prefix_;
  bool scaled_fp8_ = true;
  std::map<std::string, std::string> to_file_;  // official -> name in file
  std::vector<std::string> missing_, unexpected_, bad_dtype_, problems_;
  std::vector<ShapeMismatch> mismatches_;
};

// A config.json beside the checkpoint (or in its folder) that `accept` takes, else the first of
// `metadata_keys` in the file's metadata; nullopt: none (infer from the shapes).
struct ConfigText {
  std::string text, where;  // where: for parse errors
  std::string source;       // for reports: the json path or "file metadata"
  std::string key;          // the metadata key used ("" for a config.json)
};
std::optional<ConfigText> find_config_text(const Checkpoint& ck,
                                           const std::function<bool(const std::string&)>& accept,
                                           const std::vector<std::string>& metadata_keys);

}  // namespace vidax
