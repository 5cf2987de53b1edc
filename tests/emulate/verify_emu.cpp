// A CPU emulation of kernels/verify.cu (tests/emulate.rs builds and runs it), launched in the
// order crates/klab-cuda/src/gpu.rs launches it on a GPU:
//
//   verify_emu check GOT WANT MAG BLOCKS P0 ... P12
//       judges the raw little-endian file GOT against WANT (MAG: f64 magnitudes, or "-") with
//       the 13 parameter words P (VP_* in verify.cu) on a grid of BLOCKS blocks: the reduce
//       kernel, then the compaction when it found failures. Prints the summary words.
//   verify_emu batch JOBS
//       one `check` per line of the file JOBS, one summary line each.
//   verify_emu generate OUT PATCHES W0 ... Wn
//       writes the generated input (GP_* words W) to OUT, then applies the (index, bits)
//       pairs of the raw u64 file PATCHES ("-": none).
//
// Build with -DKLAB_VERIFY_MUTANT=N for a wrong checker.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cuda_emu.h"
#include "verify.cu"

static std::vector<unsigned char> read_file(const char* path) {
  std::vector<unsigned char> v;
  if (std::string(path) == "-") return v;
  FILE* f = std::fopen(path, "rb");
  if (!f) {
    std::perror(path);
    std::exit(1);
  }
  unsigned char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) v.insert(v.end(), buf, buf + got);
  std::fclose(f);
  return v;
}

static u64 word(const char* s) { return std::strtoull(s, nullptr, 0); }

// One judgement: args are GOT WANT MAG BLOCKS P0 ... P12. Prints the summary words on one line.
static int check(const std::vector<std::string>& a) {
  if (a.size() != 4 + VP_WORDS) {
    std::fprintf(stderr, "check GOT WANT MAG BLOCKS and %d words\n", VP_WORDS);
    return 1;
  }
  std::vector<unsigned char> got = read_file(a[0].c_str()), want = read_file(a[1].c_str());
  std::vector<unsigned char> mag = read_file(a[2].c_str());
  const int blocks = std::atoi(a[3].c_str());
  std::vector<u64> p(VP_WORDS);
  for (int k = 0; k < VP_WORDS; ++k) p[k] = word(a[4 + k].c_str());
  std::vector<u64> out(VO_FIRST + 3 * p[VP_K], 0), counts(blocks, 0);
  const double* m = mag.empty() ? nullptr : reinterpret_cast<const double*>(mag.data());
  // Empty files still need a valid pointer.
  got.push_back(0);
  want.push_back(0);
  emu_launch(klab_verify_reduce, blocks, VERIFY_THREADS, (const void*)got.data(),
             (const void*)want.data(), m, (const u64*)p.data(), out.data(), counts.data());
  if (out[VO_FAILS] > 0) {
    emu_launch(klab_verify_compact, blocks, VERIFY_THREADS, (const void*)got.data(),
               (const void*)want.data(), m, (const u64*)p.data(), out.data(),
               (const u64*)counts.data());
  }
  for (size_t k = 0; k < out.size(); ++k) std::printf(k ? " %llu" : "%llu", out[k]);
  std::printf("\n");
  return 0;
}

// `batch JOBS`: one judgement per line of the file JOBS (the arguments of `check`).
static int batch(const char* path) {
  std::vector<unsigned char> text = read_file(path);
  std::string line;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != '\n') {
      line.push_back((char)text[i]);
      continue;
    }
    if (line.empty()) continue;
    std::vector<std::string> a;
    std::string w;
    for (char c : line + " ") {
      if (c == ' ') {
        if (!w.empty()) a.push_back(w);
        w.clear();
      } else {
        w.push_back(c);
      }
    }
    if (check(a) != 0) return 1;
    line.clear();
  }
  return 0;
}

static int generate(int argc, char** argv) {
  if (argc < 4 + GP_WORDS) {
    std::fprintf(stderr, "generate OUT PATCHES and at least %d words\n", GP_WORDS);
    return 1;
  }
  std::vector<u64> p;
  for (int k = 4; k < argc; ++k) p.push_back(word(argv[k]));
  const u64 n = p[GP_N];
  const int size = dt_size((int)p[GP_DTYPE]);
  std::vector<unsigned char> out(n * size + 1);
  emu_launch(klab_generate, 4, 64, (void*)out.data(), (const u64*)p.data());
  std::vector<unsigned char> pairs = read_file(argv[3]);
  const u64 count = pairs.size() / 16;
  if (count) {
    emu_launch(klab_patch, 1, 64, (void*)out.data(), (const u64*)pairs.data(), count, (u64)size);
  }
  FILE* f = std::fopen(argv[2], "wb");
  if (!f || std::fwrite(out.data(), 1, n * size, f) != n * size) {
    std::perror(argv[2]);
    return 1;
  }
  std::fclose(f);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "check") {
    return check(std::vector<std::string>(argv + 2, argv + argc));
  }
  if (argc == 3 && std::string(argv[1]) == "batch") return batch(argv[2]);
  if (argc > 1 && std::string(argv[1]) == "generate") return generate(argc, argv);
  std::fprintf(stderr, "usage: verify_emu check ... | generate ...\n");
  return 1;
}
