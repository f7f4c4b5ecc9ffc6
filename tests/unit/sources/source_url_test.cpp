// A source's URL: what it may name, and every way it is refused (naming source.url), credentials never in it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "aoi/sources/nats_stream.h"
#include "aoi/sources/redis_stream.h"
#include "aoi/sources/sink_url.h"
#include "aoi/sources/source_url.h"
#include "temp_dir.h"

namespace aoi::sources {
namespace {

TEST(SourceUrl, ARedisStreamWithItsOptions) {
  auto u = parse_source_url("redis://10.0.0.7:6380/market%3Aticks?start=$&username=reader&password_env=AOI_T_PW");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->broker, SourceUrl::Broker::kRedis);
  EXPECT_EQ(u->where(), "10.0.0.7:6380");
  EXPECT_EQ(u->topic, "market:ticks");
  EXPECT_EQ(u->start, "$");
  EXPECT_EQ(u->username, "reader");
  EXPECT_EQ(u->password_env, "AOI_T_PW");

  auto plain = parse_source_url("redis://localhost/ticks");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->where(), "localhost:6379");
  EXPECT_EQ(plain->start, "0");
  EXPECT_EQ(plain->group, "");
}

TEST(SourceUrl, AKafkaPartitionWithItsOptions) {
  auto u = parse_source_url(
      "kafka://k1:9093,k2,[::1]:9094/market.ticks?partition=3&key=BTC%2FUSD&start=$&group=desk&"
      "security_protocol=sasl_ssl&sasl_mechanism=SCRAM-SHA-512&username=reader&password_file=/run/pw");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->broker, SourceUrl::Broker::kKafka);
  EXPECT_EQ(u->where(), "k1:9093,k2:9092,[::1]:9094");
  EXPECT_EQ(u->topic, "market.ticks");
  EXPECT_EQ(u->partition, 3);
  EXPECT_EQ(u->key, "BTC/USD");
  EXPECT_EQ(u->start, "$");
  EXPECT_EQ(u->group, "desk");
  EXPECT_EQ(u->security_protocol, "sasl_ssl");
  EXPECT_EQ(u->sasl_mechanism, "SCRAM-SHA-512");
  EXPECT_EQ(u->username, "reader");

  auto plain = parse_source_url("kafka://broker/ticks");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->where(), "broker:9092");
  EXPECT_EQ(plain->partition, 0);
  EXPECT_FALSE(plain->key.has_value());
}

TEST(SourceUrl, AnMqttTopicFilterWithItsOptions) {
  auto u = parse_source_url("mqtt://10.0.0.9/plant/+/temperature/#?qos=0&username=meter&password_env=AOI_T_PW");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->broker, SourceUrl::Broker::kMqtt);
  EXPECT_EQ(u->where(), "10.0.0.9:1883");
  EXPECT_EQ(u->topic, "plant/+/temperature/#");
  EXPECT_EQ(u->qos, 0);
  EXPECT_EQ(u->username, "meter");
  EXPECT_EQ(parse_source_url("mqtt://b:1884/s%23").value().topic, "s#");
  EXPECT_EQ(parse_source_url("mqtt://b:1884/s").value().qos, 1);
}

TEST(SourceUrl, ANatsSubjectOfAJetStreamStreamWithItsOptions) {
  auto u = parse_source_url(
      "nats://n1:4223,n2,[::1]:4224/ticks.*.trade?stream=TICKS&start=$&username=reader&password_env=AOI_T_PW");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->broker, SourceUrl::Broker::kNats);
  EXPECT_EQ(u->where(), "n1:4223,n2:4222,[::1]:4224");
  EXPECT_EQ(u->topic, "ticks.*.trade");
  EXPECT_EQ(u->stream, "TICKS");
  EXPECT_EQ(u->start, "$");
  EXPECT_EQ(u->username, "reader");
  EXPECT_EQ(u->password_env, "AOI_T_PW");

  auto plain = parse_source_url("nats://localhost/plant.>?stream=PLANT");
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->where(), "localhost:4222");
  EXPECT_EQ(plain->topic, "plant.>");
  EXPECT_EQ(plain->start, "0");
  EXPECT_EQ(plain->group, "");

  auto token = parse_source_url("nats://h/s?stream=S&token_file=/run/token");
  ASSERT_TRUE(token.ok()) << token.error().message;
  EXPECT_EQ(token->token_file, "/run/token");
}

TEST(SourceUrl, NatsRefusalsSayWhy) {
  const auto why = [](const char* url) {
    auto u = parse_source_url(url);
    EXPECT_FALSE(u.ok()) << url;
    if (u.ok()) return std::string();
    EXPECT_EQ(u.error().field, "source.url") << url;
    EXPECT_EQ(u.error().type, ErrorType::kInvalidValue) << url;
    return u.error().message;
  };
  EXPECT_NE(why("nats://h/s").find("stream=NAME"), std::string::npos);
  EXPECT_NE(why("nats://h/s?stream=S&group=g").find("takes no group"), std::string::npos);
  EXPECT_NE(why("nats://h/s?stream=S&partition=1").find("unknown option 'partition'"), std::string::npos);
  EXPECT_NE(why("nats://h/s?stream=S&token_env=T&username=u").find("not both"), std::string::npos);
  EXPECT_NE(why("nats://h/s?stream=S&token_env=T&password_file=/f").find("not both"), std::string::npos);
  EXPECT_NE(why("nats://h/s?stream=S&token_env=T&token_file=/f").find("one of them"), std::string::npos);
  for (const char* bad :
       {"nats://h", "nats://h/", "nats://h/a..b?stream=S", "nats://h/.a?stream=S", "nats://h/a.?stream=S",
        "nats://h/a.>.b?stream=S", "nats://h/a%20b?stream=S", "nats://h/s?stream=", "nats://h/s?stream=a.b",
        "nats://h/s?stream=a*", "nats://h/s?stream=S&start=1", "nats://u:p@h/s?stream=S", "nats://h:0/s?stream=S"}) {
    why(bad);
  }
  // The stream and the token are NATS's alone.
  why("redis://h/k?stream=S");
  why("kafka://h/t?token_env=T");
  why("mqtt://h/t?token_file=/f");
}

TEST(SourceUrl, ANatsTokenComesFromTheEnvironmentOrAFile) {
  ::setenv("AOI_T_NATS_TOKEN", "t0ken", 1);
  EXPECT_EQ(source_token(parse_source_url("nats://h/s?stream=S&token_env=AOI_T_NATS_TOKEN").value()).value(), "t0ken");
  ::unsetenv("AOI_T_NATS_TOKEN");
  auto unset = source_token(parse_source_url("nats://h/s?stream=S&token_env=AOI_T_NATS_TOKEN").value());
  ASSERT_FALSE(unset.ok());
  EXPECT_EQ(unset.error().field, "source.url");
  test::TempDir dir;
  const auto file = dir.path() / "token";
  std::ofstream(file) << "from-file\r\n";
  EXPECT_EQ(source_token(parse_source_url("nats://h/s?stream=S&token_file=" + file.string()).value()).value(),
            "from-file");
  auto missing = source_token(parse_source_url("nats://h/s?stream=S&token_file=/nonexistent/t").value());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("token file /nonexistent/t"), std::string::npos);
  EXPECT_EQ(source_token(parse_source_url("nats://h/s?stream=S").value()).value(), "");
}

TEST(SourceUrl, NatsIsASourceNotASink) {
  auto sink = parse_sink_url("nats://h/s?stream=S");
  ASSERT_FALSE(sink.ok());
  EXPECT_EQ(sink.error().field, "sink.url");
  EXPECT_NE(sink.error().message.find("a source, not a sink"), std::string::npos);
}

TEST(SourceUrl, AStreamsSubjectsCoverASubjectOrFilterThatTheyMatchWhole) {
  EXPECT_TRUE(nats_subject_covers("ticks", "ticks"));
  EXPECT_TRUE(nats_subject_covers("ticks.*", "ticks.btc"));
  EXPECT_TRUE(nats_subject_covers("ticks.*", "ticks.*"));
  EXPECT_TRUE(nats_subject_covers("ticks.>", "ticks.btc.trade"));
  EXPECT_TRUE(nats_subject_covers("ticks.>", "ticks.*.trade"));
  EXPECT_TRUE(nats_subject_covers("ticks.>", "ticks.>"));
  EXPECT_TRUE(nats_subject_covers(">", "anything.at.all"));
  EXPECT_TRUE(nats_subject_covers("*.trade", "btc.trade"));

  EXPECT_FALSE(nats_subject_covers("ticks", "ticks.btc"));
  EXPECT_FALSE(nats_subject_covers("ticks.btc", "ticks"));
  EXPECT_FALSE(nats_subject_covers("ticks.*", "ticks"));
  EXPECT_FALSE(nats_subject_covers("ticks.*", "ticks.btc.trade"));
  EXPECT_FALSE(nats_subject_covers("ticks.*", "ticks.>"));  // more than one token
  EXPECT_FALSE(nats_subject_covers("ticks.>", "ticks"));    // `>` is one token or more
  EXPECT_FALSE(nats_subject_covers("ticks.btc", "ticks.*"));
  EXPECT_FALSE(nats_subject_covers("ticks.*.trade", "ticks.>"));
  EXPECT_FALSE(nats_subject_covers("other", "ticks"));
}

TEST(SourceUrl, EverythingElseIsRefusedNamingTheUrl) {
  for (const char* bad : {"ticks",
                          "kafka://b:9092",
                          "kafka://b:9092/t?partition=-1",
                          "kafka://b:9092/t?partition=x",
                          "kafka://b,:9092/t",
                          "kafka://b/t?security_protocol=tls",
                          "redis://a,b/k",
                          "redis://h/k?partition=1",
                          "kafka://u:p@b/t",
                          "mqtt://b/s?qos=2",
                          "mqtt://b/s?start=0",
                          "mqtt://b/s?group=g",
                          "mqtt://b",
                          "http://x/y",
                          "redis://h:6379",
                          "redis://h:6379/",
                          "redis://:6379/k",
                          "redis://h:0/k",
                          "redis://h:70000/k",
                          "redis://h:x/k",
                          "redis://u:p@h:6379/k",
                          "redis://h/k?start=now",
                          "redis://h/k?colour=blue",
                          "redis://h/k?password_env=A&password_file=/f",
                          "redis://h/k%zz"}) {
    auto u = parse_source_url(bad);
    ASSERT_FALSE(u.ok()) << bad;
    EXPECT_EQ(u.error().field, "source.url") << bad;
    EXPECT_EQ(u.error().type, ErrorType::kInvalidValue) << bad;
  }
  EXPECT_NE(parse_source_url("amqp://b/q").error().message.find("unknown scheme"), std::string::npos);
}

TEST(SourceUrl, APasswordComesFromTheEnvironmentOrAFileAndIsNeverEchoed) {
  ::setenv("AOI_T_SOURCE_PW", "s3cret", 1);
  auto from_env = source_password(parse_source_url("redis://h/k?password_env=AOI_T_SOURCE_PW").value());
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ(*from_env, "s3cret");
  ::unsetenv("AOI_T_SOURCE_PW");
  auto unset = source_password(parse_source_url("redis://h/k?password_env=AOI_T_SOURCE_PW").value());
  ASSERT_FALSE(unset.ok());
  EXPECT_EQ(unset.error().message.find("s3cret"), std::string::npos);

  test::TempDir dir;
  const auto file = dir.path() / "pw";
  std::ofstream(file) << "from-file\n";
  auto from_file = source_password(parse_source_url("redis://h/k?password_file=" + file.string()).value());
  ASSERT_TRUE(from_file.ok());
  EXPECT_EQ(*from_file, "from-file");
  EXPECT_EQ(source_password(parse_source_url("redis://h/k").value()).value(), "");
  EXPECT_EQ(source_password(parse_source_url("kafka://h/t?password_file=" + file.string()).value()).value(),
            "from-file");
}

TEST(SourceUrl, EntryIdsReadAsMilliseconds) {
  EXPECT_EQ(entry_ms("1700000000123-4"), 1700000000123u);
  EXPECT_EQ(entry_ms("0-0"), 0u);
  EXPECT_EQ(entry_ms("x"), 0u);
}

}  // namespace
}  // namespace aoi::sources
