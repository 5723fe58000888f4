// Helpers for tests that read the reference fixture pack (tests/fixtures/k3).
#ifndef FLOTILLA_SHARED_TESTING_FIXTURE_H_
#define FLOTILLA_SHARED_TESTING_FIXTURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace flotilla::testutil {

// Absolute path of a file under tests/fixtures.
std::string DataPath(const std::string& relative);

// Absolute path of an embedded model folder, e.g. "stories260k-moe".
std::string ModelPath(const std::string& name);

// Parses a JSON file; fails the test (ADD_FAILURE) and returns null JSON on
// error.
nlohmann::json LoadJson(const std::string& path);

// A "JSON tensor" {shape, data} as flat floats; `shape` receives the shape.
std::vector<float> JsonTensor(const nlohmann::json& j, const std::string& key,
                              std::vector<int64_t>* shape = nullptr);

// Raw little-endian float32 file.
std::vector<float> ReadF32File(const std::string& path);

// Checks |got - want| <= abs_tol + rel_tol * |want| elementwise; on failure
// reports the count of violations and the worst element.
::testing::AssertionResult AllClose(const std::vector<float>& got,
                                    const std::vector<float>& want,
                                    double abs_tol, double rel_tol);

// max |got - want| / max |want|; infinity when either side holds a NaN
// (std::max would drop it, and a NaN output would pass every tolerance).
double MaxRelativeError(const float* got, const float* want, size_t n);

// max |a - b| over equal-length vectors; infinity on a length mismatch or
// a NaN on either side.
double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b);

// Copies the checkpoint files of fixture checkpoint `name` (e.g. "ckpt_A":
// config.json, model.safetensors and its index) into directory `dir`,
// which must exist; existing files are overwritten. Tests damage or swap
// these copies, never tests/fixtures.
void CopyFixtureCheckpoint(const std::string& name, const std::string& dir);

// Index of the maximum (first on ties).
int32_t ArgMax(const float* v, size_t n);

}  // namespace flotilla::testutil

#endif  // FLOTILLA_SHARED_TESTING_FIXTURE_H_
