#include "shared/testing/fixture.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace flotilla::testutil {

void CopyFixtureCheckpoint(const std::string& name, const std::string& dir) {
  namespace fs = std::filesystem;
  for (const char* f :
       {"config.json", "model.safetensors", "model.safetensors.index.json"}) {
    std::error_code ec;
    fs::copy_file(DataPath("k3/" + name + "/" + f), fs::path(dir) / f,
                  fs::copy_options::overwrite_existing, ec);
    if (ec)
      ADD_FAILURE() << "copying " << name << "/" << f << ": " << ec.message();
  }
}

std::string ModelPath(const std::string& name) {
  return std::string(FLOTILLA_MODELS_DIR) + "/" + name;
}

std::string DataPath(const std::string& relative) {
  return std::string(FLOTILLA_TEST_DATA_DIR) + "/" + relative;
}

nlohmann::json LoadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "cannot open " << path;
    return nullptr;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(buf.str(), nullptr, false);
  if (j.is_discarded()) {
    ADD_FAILURE() << "bad JSON in " << path;
    return nullptr;
  }
  return j;
}

std::vector<float> JsonTensor(const nlohmann::json& j, const std::string& key,
                              std::vector<int64_t>* shape) {
  std::vector<float> out;
  if (!j.contains(key) || !j[key].is_object() || !j[key].contains("data")) {
    ADD_FAILURE() << "fixture has no tensor " << key;
    return out;
  }
  for (const auto& x : j[key]["data"]) out.push_back(x.get<float>());
  if (shape != nullptr) {
    shape->clear();
    for (const auto& d : j[key]["shape"]) shape->push_back(d.get<int64_t>());
  }
  return out;
}

std::vector<float> ReadF32File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot open " << path;
    return {};
  }
  in.seekg(0, std::ios::end);
  const size_t bytes = static_cast<size_t>(in.tellg());
  in.seekg(0);
  std::vector<float> v(bytes / 4);
  in.read(reinterpret_cast<char*>(v.data()), v.size() * 4);
  return v;
}

::testing::AssertionResult AllClose(const std::vector<float>& got,
                                    const std::vector<float>& want,
                                    double abs_tol, double rel_tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "size " << got.size() << " != " << want.size();
  }
  size_t bad = 0, worst = 0;
  double worst_ratio = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double{got[i]} - want[i]);
    const double tol = abs_tol + rel_tol * std::fabs(double{want[i]});
    if (!(err <= tol)) ++bad;
    const double ratio = err / tol;
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (bad == 0) {
    return ::testing::AssertionSuccess()
           << "worst error/tolerance " << worst_ratio;
  }
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements out of tolerance; worst"
         << " at " << worst << ": got " << got[worst] << " want " << want[worst]
         << " (error/tolerance " << worst_ratio << ")";
}

double MaxRelativeError(const float* got, const float* want, size_t n) {
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < n; ++i) {
    const double err = std::fabs(double{got[i]} - want[i]);
    // std::max(acc, NaN) keeps acc: a NaN on either side would pass every
    // tolerance. It is an infinite error instead.
    if (std::isnan(err)) return std::numeric_limits<double>::infinity();
    max_err = std::max(max_err, err);
    max_ref = std::max(max_ref, std::fabs(double{want[i]}));
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, d);
  }
  return worst;
}

int32_t ArgMax(const float* v, size_t n) {
  int32_t best = 0;
  for (size_t i = 1; i < n; ++i) {
    if (v[i] > v[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

}  // namespace flotilla::testutil
