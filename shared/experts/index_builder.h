// Internal: accumulates validated expert locations and turns them into an
// ExpertIndex. Shared by the safetensors and pack-manifest builders so both
// enforce the same invariants (one format and shape set per index, config
// completeness). Not part of the public API.
#ifndef FLOTILLA_SHARED_EXPERTS_INDEX_BUILDER_H_
#define FLOTILLA_SHARED_EXPERTS_INDEX_BUILDER_H_

#include <array>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/experts/expert_index.h"
#include "shared/experts/expert_tensors.h"

namespace flotilla::experts {

class IndexBuilder {
 public:
  // `what` names the expert's first tensor (or manifest entry) and its file
  // for errors. The first expert added fixes the index's format and shapes;
  // a later expert that differs is refused.
  absl::Status Add(const ExpertKey& key, const std::string& file_path,
                   ExpertLocation location, ExpertFormat format,
                   const std::array<MatrixShape, 3>& shapes,
                   const std::string& what);

  // `source` names where the experts came from (a path) for messages.
  // Experts served as a span with gap bytes (reported by the index).
  void set_noncontiguous(size_t n) { index_.noncontiguous_ = n; }

  absl::StatusOr<ExpertIndex> Finish(const model::MoeSpec* config,
                                     int only_layer, const std::string& source);

 private:
  absl::Status CheckConfig(const model::MoeSpec& config, int only_layer,
                           const std::string& source) const;

  ExpertIndex index_;
  bool have_format_ = false;
  std::map<std::string, uint32_t> file_ids_;
  std::map<ExpertKey, ExpertLocation> experts_;
};

}  // namespace flotilla::experts

#endif  // FLOTILLA_SHARED_EXPERTS_INDEX_BUILDER_H_
