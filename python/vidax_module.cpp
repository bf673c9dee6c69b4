// The Python module `vidax` (pybind11): the generation pipeline the way diffusers users call one.
//
//   import vidax
//   pipe = vidax.Pipeline.from_pretrained("models/vidax-tiny", precision="fp32")
//   out = pipe(prompt="...", num_frames=17, height=256, width=256, num_inference_steps=20,
//              guidance_scale=5.0, generator_seed=42)
//   out.frames   # numpy.ndarray (F, H, W, 3) uint8, the frames `vidax generate` would encode
//   out.sidecar  # dict: what `vidax generate` writes beside its video
//
// The pipeline keeps its models loaded between calls (pipeline/resident_models.h). The GIL is
// released while a video is made; `callback` (a callable taking one dict: phase, unit, done,
// total, seconds_per_unit, eta_seconds) runs with the GIL held, and an exception it raises stops
// the run and propagates. Ctrl-C stops the run at the next step (KeyboardInterrupt). Errors:
// vidax.InputError (a ValueError) with the CLI's messages; vidax.Cancelled; RuntimeError for
// internal errors. Docs: docs/python.md.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <omp.h>

#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/exec_context.h"
#include "io/video_writer.h"
#include "kernels/cpu/kernel_choices.h"
#include "pipeline/text_to_video.h"

namespace py = pybind11;

namespace vidax::python {
namespace {

// Python objects as nlohmann::json (the sidecar) -> dict, recursively.
py::object to_python(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    case nlohmann::json::value_t::string:
      return py::str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      py::list out;
      for (const auto& v : j) out.append(to_python(v));
      return out;
    }
    case nlohmann::json::value_t::object: {
      py::dict out;
      for (const auto& [k, v] : j.items()) out[py::str(k)] = to_python(v);
      return out;
    }
    default:
      return py::none();
  }
}

class Pipeline {
 public:
  Pipeline(GenerateOptions base, bool keep_models) : base_(std::move(base)) {
    if (keep_models) base_.resident = std::make_shared<ResidentModels>();
  }

  static std::unique_ptr<Pipeline> from_pretrained(const std::string& path,
                                                   const std::string& precision,
                                                   std::optional<std::string> vae_precision,
                                                   int threads, bool keep_models,
                                                   bool hash_models) {
    GenerateOptions o;
    o.files = resolve_model_files(path, {});
    o.precision = wan::parse_precision(precision, "precision");
    o.vae_precision =
        vae_precision ? wan::parse_precision(*vae_precision, "vae_precision") : o.precision;
    if (threads < 0) throw_input_error("threads: expected >= 0 (0: all cores), got ", threads);
    o.ctx = ExecContext::from_environment();
    if (threads > 0) o.ctx.threads = threads;
    o.hash_models = hash_models;
    apply_exec_context(o.ctx);  // the kernel choices (process-wide) and the threads
    o.command_line = {"python", "vidax.Pipeline.from_pretrained", path};
    return std::make_unique<Pipeline>(std::move(o), keep_models);
  }

  py::object call(const std::string& prompt, std::optional<std::string> negative_prompt,
                  std::optional<int64_t> num_frames, std::optional<int64_t> height,
                  std::optional<int64_t> width, std::optional<int> num_inference_steps,
                  std::optional<double> guidance_scale, std::optional<uint64_t> generator_seed,
                  const std::string& sampler, std::optional<double> shift,
                  const std::string& attention, const std::string& accel, const std::string& image,
                  const std::string& last_image, const std::string& output, py::object callback) {
    // One video at a time per pipeline (its models are shared). A second caller waits without
    // the GIL, which the running call needs at each step.
    std::unique_lock lock(mutex_, std::defer_lock);
    {
      py::gil_scoped_release release;
      lock.lock();
    }
    GenerateOptions o = base_;
    if (o.ctx.threads > 0) omp_set_num_threads(o.ctx.threads);  // this thread's OpenMP team
    if (prompt.find_first_not_of(" \t\r\n") == std::string::npos)
      throw_input_error("prompt: the prompt is empty");
    o.prompt = prompt;
    o.negative_prompt = negative_prompt;
    o.frames = num_frames;
    o.height = height;
    o.width = width;
    if (height.has_value() != width.has_value())
      throw_input_error("height and width: give both or neither");
    if (num_inference_steps) {
      if (*num_inference_steps < 1 || *num_inference_steps > 1000)
        throw_input_error("num_inference_steps: expected 1..1000, got ", *num_inference_steps);
      o.denoise.steps = *num_inference_steps;
    }
    o.denoise_given.steps = num_inference_steps.has_value();
    if (guidance_scale) {
      if (!(*guidance_scale >= 0))
        throw_input_error("guidance_scale: expected a number >= 0, got ", *guidance_scale);
      o.denoise.guide_scale = *guidance_scale;
    }
    o.denoise_given.guide_scale = guidance_scale.has_value();
    if (shift) {
      if (!(*shift > 0)) throw_input_error("shift: expected a positive number, got ", *shift);
      o.denoise.shift = *shift;
    }
    o.denoise_given.shift = shift.has_value();
    if (sampler != "unipc" && sampler != "dpm++" && sampler != "euler")
      throw_input_error("sampler: expected unipc, dpm++ or euler, got '", sampler, "'");
    o.denoise.sampler = sampler;
    // No seed: a random one, as the CLI (recorded in the sidecar).
    o.seed = generator_seed
                 ? *generator_seed
                 : (static_cast<uint64_t>(std::random_device{}()) << 31) ^ std::random_device{}();
    o.attention = attention;
    o.accel = accel;
    o.image = image;
    o.last_image = last_image;
    if (!last_image.empty() && image.empty())
      throw_input_error("last_image: give the first frame as image too");
    o.output = output;

    std::vector<uint8_t> rgb;  // [F, H, W, 3]
    int64_t frames = 0;
    o.on_frames = [&](const Tensor& chunk) {  // [3, n, H, W]
      const std::vector<uint8_t> bytes = to_uint8_rgb(chunk);
      rgb.insert(rgb.end(), bytes.begin(), bytes.end());
      frames += chunk.dim(1);
    };
    // Ctrl-C and callback exceptions: noted under the GIL, then the run stops at the next unit.
    std::optional<py::error_already_set> callback_error;
    bool interrupted = false;
    o.cancelled = [&] {
      if (callback_error || interrupted) return true;
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) {
        PyErr_Clear();
        interrupted = true;
      }
      return interrupted;
    };
    Progress progress(nullptr, false);
    if (!callback.is_none()) {
      progress.set_listener([&](const ProgressEvent& e) {
        if (callback_error) return;
        static const char* kinds[] = {"begin", "tick", "end", "message"};
        py::gil_scoped_acquire gil;
        try {
          py::dict event;
          event["event"] = kinds[static_cast<int>(e.kind)];
          event["phase"] = e.phase;
          event["unit"] = e.unit;
          event["done"] = e.done;
          event["total"] = e.total;
          event["seconds_per_unit"] = e.seconds_per_unit;
          event["eta_seconds"] = e.eta_seconds;
          if (e.kind == ProgressEvent::Kind::kMessage) event["text"] = e.text;
          callback(event);
        } catch (py::error_already_set& err) {
          callback_error.emplace(std::move(err));
        }
      });
    }
    GenerationResult result;
    try {
      py::gil_scoped_release release;
      const GenerationPlan plan = plan_generation(o);
      if (o.resident)
        require_fits_resident(plan, *o.resident, plan.available_bytes);
      else
        require_fits(plan.memory, plan.available_bytes);
      result = generate(o, plan, progress);
    } catch (const Cancelled&) {
      if (callback_error) throw std::move(*callback_error);
      if (interrupted) {
        PyErr_SetNone(PyExc_KeyboardInterrupt);
        throw py::error_already_set();
      }
      throw;
    }
    if (callback_error) throw std::move(*callback_error);

    const int64_t h =
        result.sidecar_json.contains("size") ? result.sidecar_json["size"][1].get<int64_t>() : 0;
    const int64_t w =
        result.sidecar_json.contains("size") ? result.sidecar_json["size"][0].get<int64_t>() : 0;
    auto* buffer = new std::vector<uint8_t>(std::move(rgb));
    py::capsule owner(buffer, [](void* p) { delete static_cast<std::vector<uint8_t>*>(p); });
    py::array_t<uint8_t> array({frames, h, w, int64_t{3}}, buffer->data(), owner);
    py::dict sidecar = to_python(result.sidecar_json);
    return py::reinterpret_borrow<py::object>(output_type_)(array, sidecar);
  }

  // The VideoOutput namedtuple; kept for the life of the process (never released, so nothing
  // touches Python at exit).
  // Models loaded so far (the tokenizer counts as one); stays put across calls.
  int models_loaded() const { return base_.resident ? base_.resident->loads() : -1; }

  static void set_output_type(const py::object& t) { output_type_ = t.inc_ref().ptr(); }

 private:
  GenerateOptions base_;
  std::mutex mutex_;
  static inline PyObject* output_type_ = nullptr;
};

}  // namespace
}  // namespace vidax::python

PYBIND11_MODULE(vidax, m) {
  using vidax::python::Pipeline;
  m.doc() = "vidax: Wan video diffusion on the CPU (docs/python.md)";
  m.attr("__version__") = "0.1.0";
  static py::exception<vidax::InputError> input_error(m, "InputError", PyExc_ValueError);
  static py::exception<vidax::Cancelled> cancelled(m, "Cancelled", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const vidax::InputError& e) {
      input_error(e.what());
    } catch (const vidax::Cancelled& e) {
      cancelled(e.what());
    }
  });
  py::object namedtuple = py::module_::import("collections").attr("namedtuple");
  py::object output = namedtuple("VideoOutput", py::make_tuple("frames", "sidecar"));
  output.attr("__module__") = "vidax";
  m.attr("VideoOutput") = output;
  Pipeline::set_output_type(output);
  py::class_<Pipeline>(m, "Pipeline")
      .def_static("from_pretrained", &Pipeline::from_pretrained, py::arg("path"),
                  py::arg("precision") = "bf16", py::arg("vae_precision") = py::none(),
                  py::arg("threads") = 0, py::arg("keep_models") = true,
                  py::arg("hash_models") = false,
                  "A pipeline over a model folder (official, diffusers or ComfyUI layout).")
      .def("__call__", &Pipeline::call, py::kw_only(), py::arg("prompt"),
           py::arg("negative_prompt") = py::none(), py::arg("num_frames") = py::none(),
           py::arg("height") = py::none(), py::arg("width") = py::none(),
           py::arg("num_inference_steps") = py::none(), py::arg("guidance_scale") = py::none(),
           py::arg("generator_seed") = py::none(), py::arg("sampler") = "unipc",
           py::arg("shift") = py::none(), py::arg("attention") = "dense", py::arg("accel") = "none",
           py::arg("image") = "", py::arg("last_image") = "", py::arg("output") = "",
           py::arg("callback") = py::none(),
           "Generates one video: VideoOutput(frames (F, H, W, 3) uint8, sidecar dict).")
      .def_property_readonly("models_loaded", &Pipeline::models_loaded,
                             "Model loads so far (-1 with keep_models=False)");
}
