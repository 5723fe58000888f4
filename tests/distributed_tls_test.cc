// Mutual TLS between coordinator and workers, with certificates made by
// openssl in the test: a fleet on mTLS generates the single-process ids;
// a client without a client certificate, with one from another CA, or in
// plaintext is rejected by the worker; a worker whose certificate another
// CA signed is rejected by the coordinator.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/distributed_test_util.h"

namespace flotilla::dtest {
namespace {

using ::testing::HasSubstr;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string d = dir_->path();
    // EC keys: fast to generate. Leaf certificates carry the SAN gRPC
    // checks (we dial 127.0.0.1).
    const std::string script = absl::StrCat(
        "set -e; cd ", d, "\n",
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n"
        "extendedKeyUsage=serverAuth,clientAuth\\n' > leaf.ext\n",
        "for ca in ca rogue; do\n"
        "  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1"
        " -nodes -keyout $ca.key -out $ca.pem -days 2 -subj /CN=flotilla-$ca\n"
        "done\n",
        "leaf() {  # name ca\n"
        "  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
        " -keyout $1.key -out $1.csr -subj /CN=$1\n"
        "  openssl x509 -req -in $1.csr -CA $2.pem -CAkey $2.key"
        " -CAcreateserial -out $1.pem -days 2 -extfile leaf.ext\n"
        "}\n",
        "leaf server ca; leaf client ca; leaf rogue-client rogue;"
        " leaf rogue-server rogue\n");
    std::string out;
    ASSERT_EQ(
        RunCommand(absl::StrCat("sh -c '", EscapeQuotes(script), "'"), &out), 0)
        << out;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static std::string EscapeQuotes(const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    return out;
  }
  static std::string F(const std::string& name) {
    return dir_->path() + "/" + name;
  }

  // A worker serving mutual TLS with `cert` (signed by ca or rogue).
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> StartTlsWorker(
      const std::string& cert, const std::string& shard) {
    return WorkerProcess::Start(
        {"--model=" + CkptA(), "--shard=" + shard, "--threads=1", "--mem=256M",
         "--tls-cert=" + F(cert + ".pem"), "--tls-key=" + F(cert + ".key"),
         "--tls-ca=" + F("ca.pem")},
        F(cert + shard[0] + ".log"));
  }

  static absl::Status ConnectWith(const std::string& address,
                                  const transport::TlsFiles& tls) {
    coordinator::RemoteExpertsOptions options;
    options.workers = {address};
    options.tls = tls;
    options.connect_timeout_ms = 1500;
    return OpenRemoteModel(CkptA(), options).status();
  }

  static TempDir* dir_;
};

TempDir* TlsTest::dir_ = nullptr;

TEST_F(TlsTest, MutualTlsFleetMatchesSingleProcess) {
  auto want = GenerateLocal(CkptA(), kPrompt, 6);
  ASSERT_TRUE(want.ok()) << want.status();
  auto w0 = StartTlsWorker("server", "0/2");
  auto w1 = StartTlsWorker("server", "1/2");
  ASSERT_TRUE(w0.ok()) << w0.status();
  ASSERT_TRUE(w1.ok()) << w1.status();
  EXPECT_THAT((*w0)->Log(), HasSubstr("(mutual TLS)"));
  EXPECT_THAT((*w1)->Log(), HasSubstr("(mutual TLS)"));
  coordinator::RemoteExpertsOptions options;
  options.workers = {(*w0)->address(), (*w1)->address()};
  options.tls = {F("ca.pem"), F("client.pem"), F("client.key")};
  auto model = OpenRemoteModel(CkptA(), options);
  ASSERT_TRUE(model.ok()) << model.status();
  auto got = GenerateWith(**model, kPrompt, 6);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ids, want->ids);
  EXPECT_TRUE(got->logits == want->logits);
}

TEST_F(TlsTest, ClientsWithoutAGoodClientCertificateAreRejected) {
  auto worker = StartTlsWorker("server", "0/1");
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::string address = (*worker)->address();
  const struct {
    const char* name;
    transport::TlsFiles tls;
  } cases[] = {
      {"no client certificate", {F("ca.pem"), "", ""}},
      {"client certificate from another CA",
       {F("ca.pem"), F("rogue-client.pem"), F("rogue-client.key")}},
      {"plaintext", {}},
  };
  for (const auto& c : cases) {
    const absl::Status s = ConnectWith(address, c.tls);
    std::printf("%s -> %s\n", c.name, s.ToString().c_str());
    EXPECT_FALSE(s.ok()) << c.name;
    EXPECT_THAT(std::string(s.message()), HasSubstr(address)) << c.name;
  }
  // The worker is unharmed: a proper client still gets in.
  EXPECT_TRUE(
      ConnectWith(address, {F("ca.pem"), F("client.pem"), F("client.key")})
          .ok());
}

TEST_F(TlsTest, WorkerWithAForeignCertificateIsRejected) {
  auto rogue = StartTlsWorker("rogue-server", "0/1");
  ASSERT_TRUE(rogue.ok()) << rogue.status();
  const absl::Status s = ConnectWith(
      (*rogue)->address(), {F("ca.pem"), F("client.pem"), F("client.key")});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr((*rogue)->address()));
}

}  // namespace
}  // namespace flotilla::dtest
