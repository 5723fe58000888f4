#include "shared/metrics/metrics_server.h"

#include <cstdlib>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "prometheus/gauge.h"
#include "prometheus/text_serializer.h"

namespace flotilla::metrics {

std::string Scrape(const prometheus::Registry& registry) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry.Collect());
  return out.str();
}

prometheus::Counter& AddCounter(prometheus::Registry& registry,
                                const std::string& name,
                                const std::string& help,
                                const prometheus::Labels& labels) {
  return prometheus::BuildCounter()
      .Name(name)
      .Help(help)
      .Register(registry)
      .Add(labels);
}

prometheus::Histogram& AddHistogram(
    prometheus::Registry& registry, const std::string& name,
    const std::string& help,
    const prometheus::Histogram::BucketBoundaries& buckets,
    const prometheus::Labels& labels) {
  return prometheus::BuildHistogram()
      .Name(name)
      .Help(help)
      .Register(registry)
      .Add(labels, buckets);
}

void AddBuildInfo(prometheus::Registry& registry,
                  const std::string& component) {
  prometheus::BuildGauge()
      .Name("flotilla_build_info")
      .Help(
          "Always 1; the labels say which Flotilla binary and version this is")
      .Register(registry)
      .Add({{"component", component}, {"version", FLOTILLA_VERSION}})
      .Set(1);
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& host, int port,
    std::shared_ptr<prometheus::Registry> registry) {
  auto s = std::unique_ptr<MetricsServer>(new MetricsServer());
  s->registry_ = std::move(registry);
  http::HttpServiceOptions o;
  o.host = host;
  o.port = port;
  o.max_body_bytes = 0;  // scrapes are GETs
  s->server_ = std::make_unique<http::HttpService>(std::move(o));
  prometheus::Registry* r = s->registry_.get();
  s->server_->Route(
      "GET", "/metrics",
      [r](const http::HttpRequest&, http::HttpResponse* res) {
        res->Set(200, "text/plain; version=0.0.4; charset=utf-8", Scrape(*r));
      });
  if (absl::Status started = s->server_->Start(); !started.ok()) {
    return absl::Status(started.code(),
                        absl::StrCat("metrics: ", started.message()));
  }
  return s;
}

MetricsServer::~MetricsServer() {
  if (server_ != nullptr) server_->Stop();
}

double SampleValue(const std::string& scrape, const std::string& series) {
  const size_t at = scrape.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(scrape.c_str() + at + series.size() + 2, nullptr);
}

}  // namespace flotilla::metrics
