// Writes a seed corpus for torch_pickle_fuzz with the real writer: whole archives (every dtype,
// views, scalars, empty tensors, forced ZIP64) and, for the pickle mode of the target, the bare
// data.pkl streams of archives whose tensors are 64 bytes each (the size of the records the
// target wraps around a pickle). Usage: torch_pickle_fuzz_seeds <folder>.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "io/torch_checkpoint.h"
#include "io/zip_archive.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output folder>\n", argv[0]);
    return 2;
  }
  using vidax::DType;
  using vidax::Tensor;
  const std::string dir = argv[1];
  try {
    int n = 0;
    auto archive = [&](const std::vector<std::pair<std::string, Tensor>>& tensors,
                       bool zip64 = false) {
      vidax::TorchWriteOptions options;
      options.force_zip64 = zip64;
      const std::string path = dir + "/generated_" + std::to_string(n++) + ".pth";
      vidax::write_torch_checkpoint(path, tensors, options);
      return path;
    };
    auto pickle_of = [&](const std::string& path) {
      const vidax::ZipArchive zip = vidax::ZipArchive::open(path);
      const std::vector<std::byte> pkl = zip.read(*zip.find("archive/data.pkl"));
      std::ofstream(dir + "/generated_" + std::to_string(n++) + ".pkl", std::ios::binary)
          .write(reinterpret_cast<const char*>(pkl.data()),
                 static_cast<std::streamsize>(pkl.size()));
    };
    for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kF8E5M2,
                    DType::kI64, DType::kI32}) {
      archive({{std::string(vidax::dtype_name(d)), Tensor::zeros({2, 3}, d)}});
    }
    archive({{"scalar", Tensor::zeros(vidax::Shape{}, DType::kI64)},
             {"empty", Tensor::zeros({0, 4}, DType::kBF16)},
             {"vector", Tensor::zeros({5}, DType::kF16)}},
            /*zip64=*/true);
    archive({});
    // 64-byte tensors for the pickle mode.
    const std::string a = archive({{"blocks.0.self_attn.q.weight", Tensor::zeros({4, 4})},
                                   {"blocks.0.self_attn.q.bias", Tensor::zeros({32}, DType::kBF16)},
                                   {"step", Tensor::zeros({8}, DType::kI64)}});
    pickle_of(a);
    const Tensor m = Tensor::zeros({4, 4});
    pickle_of(archive({{"t", m.permute({1, 0})}, {"s", Tensor::zeros({2, 8})}}));
    std::printf("wrote %d seeds to %s\n", n, dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
