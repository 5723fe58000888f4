// Prometheus metrics over HTTP: a prometheus-cpp Registry served in the text
// exposition format at GET /metrics on its own port (--metrics-port), by
// shared/http's HttpService (prometheus-cpp's own exposer reports a port in
// use by throwing; this one returns a Status). Every component registers its
// families in one Registry and hands it here.
#ifndef FLOTILLA_SHARED_METRICS_METRICS_SERVER_H_
#define FLOTILLA_SHARED_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/labels.h"
#include "prometheus/registry.h"
#include "shared/http/http_service.h"

namespace flotilla::metrics {

class MetricsServer {
 public:
  // Listens on host:port (0: any free port). `registry` must outlive the
  // server. Unavailable, naming the address, when it cannot listen.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& host, int port,
      std::shared_ptr<prometheus::Registry> registry);
  ~MetricsServer();

  int port() const { return server_->port(); }

 private:
  MetricsServer() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<http::HttpService> server_;
};

// The registry's families in the text exposition format.
std::string Scrape(const prometheus::Registry& registry);

// The value of the sample `series` (its exact text, e.g.
// `name{a="1",b="2"}` with labels in the order Scrape prints them, sorted)
// in a scrape, or -1 when it is absent. For tests and tools.
double SampleValue(const std::string& scrape, const std::string& series);

// The counter `name{labels}` of `registry` (its family made on first use).
prometheus::Counter& AddCounter(prometheus::Registry& registry,
                                const std::string& name,
                                const std::string& help,
                                const prometheus::Labels& labels = {});

// The histogram `name{labels}` with `buckets` (its family made on first
// use).
prometheus::Histogram& AddHistogram(
    prometheus::Registry& registry, const std::string& name,
    const std::string& help,
    const prometheus::Histogram::BucketBoundaries& buckets,
    const prometheus::Labels& labels = {});

// flotilla_build_info{component, version} 1: which binary this is.
void AddBuildInfo(prometheus::Registry& registry, const std::string& component);

}  // namespace flotilla::metrics

#endif  // FLOTILLA_SHARED_METRICS_METRICS_SERVER_H_
