// The Prometheus API client against a loopback server that answers what a real server (or a
// misbehaving proxy in front of one) might answer.
#include <cmath>

#include <gtest/gtest.h>

#include "analyzer/tsdb/prom_client.h"
#include "common/time_util.h"
#include "tests/tsdb/fake_http.h"

namespace triage::tsdb::testing {
namespace {

std::string ok(const std::string& data) {
  return FakeHttp::response(200, R"({"status":"success","data":)" + data + "}");
}

TEST(PromClient, NanAndInfinityArriveAsStringsAndParse) {
  FakeHttp srv([](const std::string&) {
    return ok(R"({"resultType":"vector","result":[
      {"metric":{"host":"a","gpu":"0"},"value":[1763726400.5,"NaN"]},
      {"metric":{"host":"a","gpu":"1"},"value":[1763726400.5,"+Inf"]},
      {"metric":{"host":"b"},"value":[1763726400.5,"-Inf"]},
      {"metric":{"host":"c"},"value":[1763726400.5,"1.5e3"]}]})");
  });
  PromClient c(srv.url());
  const auto r = c.query("hw_gpu_power_watts", 1763726400.5);
  ASSERT_EQ(r.samples.size(), 4u);
  EXPECT_TRUE(std::isnan(r.samples[0].point.v));
  EXPECT_TRUE(std::isinf(r.samples[1].point.v) && r.samples[1].point.v > 0);
  EXPECT_TRUE(std::isinf(r.samples[2].point.v) && r.samples[2].point.v < 0);
  EXPECT_EQ(r.samples[3].point.v, 1500);
  EXPECT_EQ(r.samples[0].labels.at("gpu"), "0");
  EXPECT_DOUBLE_EQ(r.samples[0].point.t, 1763726400.5);
}

TEST(PromClient, AnEmptyResultIsNoSamplesNotAnError) {
  FakeHttp srv([](const std::string&) { return ok(R"({"resultType":"vector","result":[]})"); });
  PromClient c(srv.url());
  EXPECT_TRUE(c.query("up", 1).samples.empty());
}

TEST(PromClient, QueriesArePostedWithTheirBracketsEncoded) {
  FakeHttp srv([](const std::string&) { return ok(R"({"resultType":"matrix","result":[]})"); });
  PromClient c(srv.url());
  c.query_range("rate(hw_tcp_retransmits_total[5m])", 100, 200, 15);
  const auto reqs = srv.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].rfind("POST /api/v1/query_range ", 0), 0u) << reqs[0];
  EXPECT_NE(reqs[0].find("query=rate%28hw_tcp_retransmits_total%5B5m%5D%29"), std::string::npos)
      << reqs[0];
  EXPECT_NE(reqs[0].find("start=100.000"), std::string::npos);
  EXPECT_NE(reqs[0].find("step=15.000"), std::string::npos);
}

TEST(PromClient, ARangeSelectorAnswersWithTheRawSamples) {
  FakeHttp srv([](const std::string&) {
    return ok(
        R"({"resultType":"matrix","result":[{"metric":{"host":"a"},"values":[[10,"1"],[25,"2"],[40,"NaN"]]}]})");
  });
  PromClient c(srv.url());
  const auto r = c.query("tb_step{host=\"a\"}[1m]", 40);
  ASSERT_EQ(r.series.size(), 1u);
  ASSERT_EQ(r.series[0].points.size(), 3u);
  EXPECT_EQ(r.series[0].points[1].t, 25);
  EXPECT_TRUE(std::isnan(r.series[0].points[2].v));
}

TEST(PromClient, AnApiErrorNamesTheQueryAndTheServersReason) {
  FakeHttp srv([](const std::string&) {
    return FakeHttp::response(
        400,
        R"({"status":"error","errorType":"bad_data","error":"1:6: parse error: unexpected \"[\""})");
  });
  PromClient c(srv.url());
  try {
    c.query("rate(x[5m", 1);
    FAIL() << "no error";
  } catch (const PromError& e) {
    EXPECT_EQ(e.kind(), PromError::Kind::kApi);
    EXPECT_NE(std::string(e.what()).find("rate(x[5m"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad_data"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("parse error"), std::string::npos) << e.what();
  }
}

TEST(PromClient, AProxyErrorPageIsAnHttpErrorWithItsStatus) {
  FakeHttp srv([](const std::string&) {
    return FakeHttp::response(502, "<html>Bad Gateway</html>", "text/html");
  });
  PromClient c(srv.url());
  try {
    c.tsdb_status();
    FAIL() << "no error";
  } catch (const PromError& e) {
    EXPECT_EQ(e.kind(), PromError::Kind::kHttp);
    EXPECT_NE(std::string(e.what()).find("502"), std::string::npos) << e.what();
  }
}

TEST(PromClient, AServerThatNeverAnswersTimesOut) {
  FakeHttp srv([](const std::string&) { return FakeHttp::silence(); });
  PromClient c(srv.url(), {std::chrono::milliseconds(500), std::chrono::milliseconds(400)});
  const int64_t t0 = monotonic_usec();
  try {
    c.query("up", 1);
    ADD_FAILURE() << "no error";
  } catch (const PromError& e) {
    EXPECT_EQ(e.kind(), PromError::Kind::kTimeout) << e.what();
  }
  EXPECT_LT(monotonic_usec() - t0, 3'000'000);
}

TEST(PromClient, NobodyListeningIsAConnectionError) {
  uint16_t port = 0;
  {
    FakeHttp srv([](const std::string&) { return std::string(); });
    port = srv.port();
  }
  PromClient c("http://127.0.0.1:" + std::to_string(port));
  try {
    c.label_values("__name__");
    FAIL() << "no error";
  } catch (const PromError& e) {
    EXPECT_EQ(e.kind(), PromError::Kind::kConnect) << e.what();
  }
  EXPECT_FALSE(c.ready(std::chrono::milliseconds(300)));
}

TEST(PromClient, AnAnswerOverTheSizeCapIsRefused) {
  const std::string big(4096, 'x');
  FakeHttp srv([&](const std::string&) {
    return ok(R"({"resultType":"string","result":[1,")" + big + R"("]})");
  });
  PromClient c(srv.url(), {std::chrono::milliseconds(1000), std::chrono::milliseconds(5000), 1024});
  try {
    c.query("x", 1);
    FAIL() << "no error";
  } catch (const PromError& e) {
    EXPECT_EQ(e.kind(), PromError::Kind::kTooLarge) << e.what();
  }
}

TEST(PromClient, ShapesTheApiDoesNotDocumentAreDecodeErrors) {
  const std::vector<std::string> bodies = {
      R"({"resultType":"vector","result":[{"metric":{"host":"a"},"value":[1]}]})",
      R"({"resultType":"vector","result":[{"metric":{"host":7},"value":[1,"2"]}]})",
      R"({"resultType":"vector","result":[{"metric":{},"value":[1,"two"]}]})",
      R"({"resultType":"histogram","result":[]})",
      R"("just a string")",
  };
  for (const auto& b : bodies) {
    FakeHttp srv([&](const std::string&) { return ok(b); });
    PromClient c(srv.url());
    try {
      c.query("x", 1);
      ADD_FAILURE() << "accepted " << b;
    } catch (const PromError& e) {
      EXPECT_EQ(e.kind(), PromError::Kind::kDecode) << b << ": " << e.what();
    }
  }
  FakeHttp junk([](const std::string&) { return FakeHttp::response(200, "\xff\xfe not json"); });
  PromClient c(junk.url());
  EXPECT_THROW(c.query("x", 1), PromError);
}

TEST(PromClient, TsdbStatusWithAnEmptyHeadHasNoHeadRange) {
  FakeHttp srv([](const std::string& req) {
    if (req.find("/api/v1/status/tsdb") != std::string::npos) {
      return ok(R"({"headStats":{"numSeries":0,"minTime":1795255855001,"maxTime":1795255855001},
                   "seriesCountByMetricName":[{"name":"hw_gpu_power_watts","value":512}]})");
    }
    return ok(R"(["hw_gpu_power_watts","tb_step"])");
  });
  PromClient c(srv.url());
  const auto st = c.tsdb_status();
  EXPECT_FALSE(st.head_min_ms.has_value());
  ASSERT_EQ(st.series_by_metric.size(), 1u);
  EXPECT_EQ(st.series_by_metric[0].second, 512);
  const auto names = c.label_values("__name__", {"{host=\"a\"}"}, 10.0, 20.0);
  EXPECT_EQ(names, (std::vector<std::string>{"hw_gpu_power_watts", "tb_step"}));
  const auto reqs = srv.requests();
  EXPECT_NE(reqs.back().find("match%5B%5D=%7Bhost%3D%22a%22%7D"), std::string::npos) << reqs.back();
  EXPECT_EQ(c.requests(), 2);
}

TEST(PromClient, ValueParsingAcceptsThePrometheusSpellingsOnly) {
  EXPECT_TRUE(std::isnan(*parse_prom_value("NaN")));
  EXPECT_EQ(*parse_prom_value("-Inf"), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(*parse_prom_value("0.25"), 0.25);
  EXPECT_FALSE(parse_prom_value("12 W").has_value());
  EXPECT_FALSE(parse_prom_value("").has_value());
  EXPECT_EQ(format_prom_time(1763726400.1234), "1763726400.123");
}

}  // namespace
}  // namespace triage::tsdb::testing
