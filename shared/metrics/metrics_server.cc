#include "shared/metrics/metrics_server.h"

#include <httplib.h>

#include <cstdlib>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "prometheus/gauge.h"
#include "prometheus/text_serializer.h"
#include "shared/http/listen.h"

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
  s->server_ = std::make_unique<httplib::Server>();
  prometheus::Registry* r = s->registry_.get();
  s->server_->Get(
      "/metrics", [r](const httplib::Request&, httplib::Response& res) {
        res.set_content(Scrape(*r), "text/plain; version=0.0.4; charset=utf-8");
      });
  absl::StatusOr<int> bound =
      http::StartListening(s->server_.get(), host, port, &s->thread_);
  if (!bound.ok()) {
    return absl::Status(bound.status().code(),
                        absl::StrCat("metrics: ", bound.status().message()));
  }
  s->port_ = *bound;
  return s;
}

MetricsServer::~MetricsServer() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

double SampleValue(const std::string& scrape, const std::string& series) {
  const size_t at = scrape.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(scrape.c_str() + at + series.size() + 2, nullptr);
}

}  // namespace flotilla::metrics
