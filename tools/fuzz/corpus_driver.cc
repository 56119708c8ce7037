// corpus_driver.cc: the main of a fuzz target's corpus test (fuzz.bzl). Each argument is a
// file, or a directory whose files are taken in name order; each file is one input to
// LLVMFuzzerTestOneInput (and LLVMFuzzerInitialize first, when the target has one), as
// libFuzzer would run it. A crash or a failed FUZZ_CHECK fails the test; so does running no
// input at all (a corpus that went missing).

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

// The files `path` stands for: itself, or a directory's regular files in name order.
std::vector<std::string> InputFiles(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return {};
  if (!S_ISDIR(st.st_mode)) return {path};
  std::vector<std::string> files;
  if (DIR* dir = opendir(path.c_str()); dir != nullptr) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      files.push_back(path + "/" + name);
    }
    closedir(dir);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  int inputs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::vector<std::string> files = InputFiles(argv[i]);
    if (files.empty()) {
      std::fprintf(stderr, "corpus_driver: %s: no such file, or an empty directory\n", argv[i]);
      return 1;
    }
    for (const std::string& file : files) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "corpus_driver: cannot read %s\n", file.c_str());
        return 1;
      }
      const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
      std::fprintf(stderr, "corpus_driver: %s (%zu bytes)\n", file.c_str(), bytes.size());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++inputs;
    }
  }
  if (inputs == 0) {
    std::fprintf(stderr, "corpus_driver: no input given\n");
    return 1;
  }
  std::fprintf(stderr, "corpus_driver: %d inputs, none crashed\n", inputs);
  return 0;
}
