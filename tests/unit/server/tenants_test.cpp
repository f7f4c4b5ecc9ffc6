// The key book's file format and the quota gate's arithmetic (time given, so nothing here waits).
#include "aoi/server/tenants.h"

#include <gtest/gtest.h>

namespace aoi::server {
namespace {

using namespace std::chrono_literals;

TEST(KeyBook, MapsKeysToTenantsWithTheirQuotas) {
  auto book = KeyBook::parse(
      "# comment\n"
      "k1 acme sessions=2 cells=8192   # trailing comment\n"
      "\n"
      "  k2\tacme records_per_s=2.5\n"
      "k3 beta queries_per_s=1\n",
      "keys");
  ASSERT_TRUE(book) << book.error().message;
  book->add_admin_key("root");
  EXPECT_EQ(book->size(), 4u);
  const auto a1 = book->find("k1");
  const auto a2 = book->find("k2");
  ASSERT_TRUE(a1 && a2);
  EXPECT_EQ(a1, a2) << "two keys of one tenant share its quotas";
  EXPECT_EQ(a1->name, "acme");
  EXPECT_EQ(a1->quotas.sessions, 2);
  EXPECT_EQ(a1->quotas.cells, 8192);
  EXPECT_EQ(a1->quotas.records_per_s, 2.5);
  EXPECT_FALSE(a1->quotas.queries_per_s);
  EXPECT_FALSE(a1->admin);
  EXPECT_EQ(book->find("k3")->name, "beta");
  EXPECT_TRUE(book->find("root")->admin);
  EXPECT_EQ(book->find("k"), nullptr);
  EXPECT_EQ(book->find("k11"), nullptr);
  EXPECT_EQ(book->find(""), nullptr);
}

TEST(KeyBook, NamesTheLineAndTheMistake) {
  const std::pair<const char*, const char*> cases[] = {
      {"k1\n", "f:1: expected KEY TENANT"},
      {"k1 a\nk1 b\n", "f:2: this key is given twice"},
      {"k1 a sessions=x\n", "f:1: sessions must be a whole number"},
      {"k1 a sessions=1.5\n", "f:1: sessions must be a whole number"},
      {"k1 a records_per_s=0\n", "f:1: records_per_s must be a number > 0"},
      {"k1 a nope=1\n", "f:1: unknown quota \"nope\""},
      {"k1 a sessions\n", "f:1: expected name=value"},
      {"k1 a sessions=1\nk2 a sessions=2\n", "f:2: sessions is given another value"},
      {"k1 a/b\n", "f:1: a tenant name is"},
  };
  for (const auto& [text, message] : cases) {
    auto book = KeyBook::parse(text, "f");
    ASSERT_FALSE(book) << text;
    EXPECT_NE(book.error().message.find(message), std::string::npos) << text << " -> " << book.error().message;
    EXPECT_EQ(book.error().field, "api_keys");
  }
}

TEST(KeyBook, AnEmptyBookIsAnOpenServer) {
  auto book = KeyBook::parse("# nobody yet\n", "f");
  ASSERT_TRUE(book);
  EXPECT_TRUE(book->open());
}

TEST(QuotaGate, RateBucketsHoldOneSecondAndRefillAtTheRate) {
  QuotaGate gate;
  Tenant t{"t", false, {}};
  t.quotas.records_per_s = 10;
  const auto t0 = QuotaGate::Clock::now();
  EXPECT_FALSE(gate.take_records(t, 10, t0));
  const auto refused = gate.take_records(t, 1, t0);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->quota, "records_per_s");
  EXPECT_NEAR(refused->retry_after_s, 0.1, 1e-9);
  EXPECT_FALSE(gate.take_records(t, 1, t0 + 100ms));
  // A body larger than the bucket comes in when the bucket holds a unit, and its debt is waited out.
  EXPECT_FALSE(gate.take_records(t, 1, t0 + 2s));
  EXPECT_FALSE(gate.take_records(t, 29, t0 + 2s));  // 10 - 1 - 29 = -20
  const auto debt = gate.take_records(t, 1, t0 + 2s);
  ASSERT_TRUE(debt);
  EXPECT_NEAR(debt->retry_after_s, 2.1, 1e-9);
  EXPECT_TRUE(gate.take_records(t, 1, t0 + 4s));
  EXPECT_FALSE(gate.take_records(t, 1, t0 + 4100ms));
  // Other tenants, admins and unlimited tenants are untouched.
  Tenant other{"u", false, {}};
  other.quotas.records_per_s = 10;
  EXPECT_FALSE(gate.take_records(other, 5, t0 + 2s));
  EXPECT_FALSE(gate.take_records(Tenant{"", true, {}}, 1e9, t0));
  EXPECT_FALSE(gate.take_query(t, t0));
  const auto counted = gate.refusals();
  EXPECT_EQ((counted.at({"t", "records_per_s"})), 3u);
}

TEST(QuotaGate, CreationsInFlightCountAgainstTheSessionsQuota) {
  QuotaGate gate;
  Tenant t{"t", false, {}};
  t.quotas.sessions = 2;
  {
    QuotaGate::CreateTicket a;
    EXPECT_FALSE(gate.begin_create(t, 0, a));
    QuotaGate::CreateTicket b;
    EXPECT_FALSE(gate.begin_create(t, 0, b));
    QuotaGate::CreateTicket c;
    const auto refused = gate.begin_create(t, 0, c);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->quota, "sessions");
  }
  QuotaGate::CreateTicket d;
  EXPECT_FALSE(gate.begin_create(t, 1, d)) << "the tickets went with their creations";
  QuotaGate::CreateTicket e;
  EXPECT_TRUE(gate.begin_create(t, 1, e));
}

}  // namespace
}  // namespace aoi::server
