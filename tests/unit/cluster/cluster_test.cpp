// The cluster's coordination, against Debian's real nats-server started here on loopback (tests/support/
// nats_server.h): buckets and their compare-and-set, leases (taken, renewed, lapsed, fenced, released), the
// replicas' registry, and rendezvous hashing; one case runs a three-node NATS cluster and kills a node.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "aoi/cluster/event_id_bounds.h"
#include "aoi/cluster/kv_bucket.h"
#include "aoi/cluster/lease_table.h"
#include "aoi/cluster/membership.h"
#include "aoi/cluster/nats_connection.h"
#include "aoi/cluster/record_streams.h"
#include "aoi/cluster/rendezvous.h"
#include "aoi/cluster/session_catalogue.h"
#include "aoi/sources/nats_open.h"
#include "nats_connection_impl.h"
#include "nats_server.h"
#include "temp_dir.h"

namespace aoi::cluster {
namespace {

using namespace std::chrono_literals;

// After the last test: libnats's threads end before the process's statics (its callbacks log).
class NatsLibrary : public ::testing::Environment {
 public:
  void TearDown() override { sources::nats_close_library(std::chrono::seconds(5)); }
};
[[maybe_unused]] const auto* const kNatsLibrary = ::testing::AddGlobalTestEnvironment(new NatsLibrary);

std::vector<Replica> replicas(int n) {
  std::vector<Replica> out;
  for (int i = 0; i < n; ++i) out.push_back(Replica{.id = "replica-" + std::to_string(i), .url = ""});
  return out;
}

TEST(Rendezvous, EveryReplicaSeesTheSameOwnerInAnyOrder) {
  auto list = replicas(5);
  auto reversed = std::vector<Replica>(list.rbegin(), list.rend());
  EXPECT_EQ(rendezvous_owner("s", {}), nullptr);
  for (int i = 0; i < 200; ++i) {
    const std::string s = "session-" + std::to_string(i);
    EXPECT_EQ(rendezvous_owner(s, list)->id, rendezvous_owner(s, reversed)->id) << s;
  }
}

TEST(Rendezvous, SpreadsSessionsAndMovesOnlyWhatAReplicaGainsOrHeld) {
  constexpr int kSessions = 3000;
  const auto three = replicas(3);
  const auto four = replicas(4);
  std::map<std::string, int> per_replica;
  int moved = 0;
  for (int i = 0; i < kSessions; ++i) {
    const std::string s = "s" + std::to_string(i);
    const Replica* before = rendezvous_owner(s, three);
    const Replica* after = rendezvous_owner(s, four);
    ++per_replica[before->id];
    if (before->id != after->id) {
      ++moved;
      EXPECT_EQ(after->id, "replica-3") << s << ": a session moved between two replicas that stayed";
    }
    // Removing replica-1 moves only its own sessions.
    std::vector<Replica> without = {three[0], three[2]};
    if (before->id != "replica-1") {
      EXPECT_EQ(rendezvous_owner(s, without)->id, before->id) << s;
    }
  }
  for (const auto& [id, n] : per_replica) {
    EXPECT_GT(n, kSessions * 25 / 100) << id;
    EXPECT_LT(n, kSessions * 42 / 100) << id;
  }
  EXPECT_GT(moved, kSessions * 18 / 100);
  EXPECT_LT(moved, kSessions * 32 / 100);
}

TEST(BucketKey, EveryValidSessionIdHasAKeyAndComesBack) {
  for (const std::string id : {"a", "a.b", "a..b", "x.", "-_9", "S.1.2"}) {
    const std::string key = bucket_key(id);
    EXPECT_EQ(key.find('.'), std::string::npos) << id;
    EXPECT_EQ(id_of_key(key), id);
  }
}

TEST(NatsServers, ClusterUrlsAreParsedAndRefusalsNameTheField) {
  auto one = NatsConnection::parse_servers("nats://127.0.0.1");
  ASSERT_TRUE(one);
  EXPECT_EQ(sources::nats_where(*one), "nats 127.0.0.1:4222");
  auto three = NatsConnection::parse_servers("nats://a:1,b:2,[::1]:3");
  ASSERT_TRUE(three);
  EXPECT_EQ(sources::nats_where(*three), "nats a:1,b:2,[::1]:3");
  for (const char* bad : {"http://a:1", "nats://", "nats://a:99999", "nats://u:p@a:1", "nats://a:1/x"}) {
    auto r = NatsConnection::parse_servers(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().field, "cluster") << bad;
  }
}

// What the servers do in their own time (expire an entry): asked again until it succeeds, for 20 s at most.
template <class F>
auto eventually(F f) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  auto r = f();
  while (!r && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    r = f();
  }
  return r;
}

// A NATS server (or cluster) of this test's, and a connection to it.
class NatsTest : public ::testing::Test {
 protected:
  void start(int nodes) {
    cluster_ = std::make_unique<test::NatsCluster>(dir_.path(), nodes);
    std::string why;
    ASSERT_TRUE(cluster_->start(&why)) << why;
    conn_ = connect("test");
  }
  std::unique_ptr<NatsConnection> connect(const std::string& name) {
    auto servers = NatsConnection::parse_servers(cluster_->url());
    EXPECT_TRUE(servers);
    auto c = NatsConnection::connect(*servers, name, 2s);
    EXPECT_TRUE(c) << c.error().message;
    return c ? std::move(c).value() : nullptr;
  }
  // JetStream answers once its servers have elected their leader (a cluster takes seconds).
  std::unique_ptr<KvBucket> bucket(NatsConnection& conn, BucketSpec spec) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    for (;;) {
      auto b = conn.bucket(spec);
      if (b) return std::move(b).value();
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << b.error().message;
        return nullptr;
      }
      std::this_thread::sleep_for(200ms);
    }
  }

  test::TempDir dir_{"aoi-nats"};
  std::unique_ptr<test::NatsCluster> cluster_;
  std::unique_ptr<NatsConnection> conn_;
};

TEST_F(NatsTest, ABucketWritesOnlyWhatItsCompareAndSetAllows) {
  start(1);
  auto b = bucket(*conn_, {.name = "aoi-test"});
  ASSERT_TRUE(b);
  auto none = b->get("k");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  auto r1 = b->create("k", "one");
  ASSERT_TRUE(r1) << r1.error().message;
  auto again = b->create("k", "two");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().type, ErrorType::kConflict) << again.error().message;
  auto r2 = b->update("k", "two", *r1);
  ASSERT_TRUE(r2) << r2.error().message;
  EXPECT_GT(*r2, *r1);
  auto stale = b->update("k", "three", *r1);
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().type, ErrorType::kConflict);
  auto got = b->get("k");
  ASSERT_TRUE(got && *got);
  EXPECT_EQ((*got)->value, "two");
  EXPECT_EQ((*got)->revision, *r2);
  ASSERT_TRUE(b->put(bucket_key("x.y"), "z"));
  auto keys = b->keys();
  ASSERT_TRUE(keys);
  EXPECT_EQ(std::set<std::string>(keys->begin(), keys->end()), (std::set<std::string>{"k", "x=2Ey"}));
  ASSERT_TRUE(b->erase("k"));
  auto gone = b->get("k");
  ASSERT_TRUE(gone);
  EXPECT_FALSE(*gone);
  // A key deleted may be created again.
  EXPECT_TRUE(b->create("k", "four"));
}

TEST_F(NatsTest, ALeaseHasOneHolderWhoKeepsItByRenewingAndLosesItWhenItLapses) {
  start(1);
  auto b = bucket(*conn_, {.name = "aoi-leases", .ttl = 1500ms, .memory = true});
  ASSERT_TRUE(b);
  LeaseTable a(*b, 1500ms, "a", "http://a");
  LeaseTable c(*b, 1500ms, "c", "http://c");
  auto lease = a.acquire("s.1");
  ASSERT_TRUE(lease) << lease.error().message;
  EXPECT_TRUE(lease->valid());
  auto refused = c.acquire("s.1");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().type, ErrorType::kConflict);
  EXPECT_NE(refused.error().message.find("replica a"), std::string::npos) << refused.error().message;
  auto holder = c.holder("s.1");
  ASSERT_TRUE(holder && *holder);
  EXPECT_EQ((*holder)->replica, "a");
  EXPECT_EQ((*holder)->url, "http://a");
  EXPECT_EQ((*holder)->epoch, lease->epoch);
  // Renewed past the TTL several times over, it stays a's, with the same epoch.
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(500ms);
    ASSERT_TRUE(a.renew(*lease));
    EXPECT_TRUE(lease->valid());
  }
  EXPECT_FALSE(c.acquire("s.1"));
  holder = c.holder("s.1");
  ASSERT_TRUE(holder && *holder);
  EXPECT_EQ((*holder)->epoch, lease->epoch);
  // Not renewed, it lapses: a's own clock says so first, then the servers drop it and c takes it, with a
  // higher epoch; a's late renewal is refused.
  const Lease old = *lease;
  std::this_thread::sleep_for(1400ms);
  EXPECT_FALSE(old.valid());
  auto taken = eventually([&] { return c.acquire("s.1"); });
  ASSERT_TRUE(taken) << taken.error().message;
  EXPECT_GT(taken->epoch, old.epoch);
  Lease late = old;
  auto renewed = a.renew(late);
  ASSERT_FALSE(renewed);
  EXPECT_EQ(renewed.error().type, ErrorType::kConflict);
  // Released, it goes to the next taker at once, with a higher epoch still.
  ASSERT_TRUE(c.release(*taken));
  EXPECT_FALSE(taken->valid());
  auto back = a.acquire("s.1");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_GT(back->epoch, taken->epoch);
  // A release by a holder that lost the lease changes nothing.
  EXPECT_FALSE(c.release(*taken));
  holder = c.holder("s.1");
  ASSERT_TRUE(holder && *holder);
  EXPECT_EQ((*holder)->replica, "a");
}

TEST_F(NatsTest, ManyReplicasRacingForOneLeaseLeaveExactlyOneHolder) {
  start(1);
  auto b = bucket(*conn_, {.name = "aoi-leases", .ttl = 5s, .memory = true});
  ASSERT_TRUE(b);
  for (int round = 0; round < 10; ++round) {
    const std::string session = "race-" + std::to_string(round);
    std::vector<std::thread> threads;
    std::atomic<int> won{0};
    std::atomic<int> refused{0};
    for (int t = 0; t < 6; ++t) {
      threads.emplace_back([&, t] {
        LeaseTable table(*b, 5s, "r" + std::to_string(t), "");
        auto l = table.acquire(session);
        if (l) {
          ++won;
        } else if (l.error().type == ErrorType::kConflict) {
          ++refused;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(won.load(), 1) << session;
    EXPECT_EQ(refused.load(), 5) << session;
  }
}

TEST_F(NatsTest, TheCatalogueCountsATenantsSessionsAcrossTheCluster) {
  start(1);
  auto b = bucket(*conn_, {.name = "aoi-sessions"});
  ASSERT_TRUE(b);
  SessionCatalogue catalogue(*b);
  auto none = catalogue.owned_by("acme");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(*none, 0);
  for (const auto& [id, owner] : std::vector<std::pair<std::string, std::string>>{
           {"a.1", "acme"}, {"a.2", "acme"}, {"b.1", "beta"}, {"admin", ""}}) {
    ASSERT_TRUE(catalogue.define(id, {.request = {{"id", id}}, .owner = owner}));
  }
  EXPECT_EQ(*catalogue.owned_by("acme"), 2);
  EXPECT_EQ(*catalogue.owned_by("beta"), 1);
  ASSERT_TRUE(catalogue.remove("a.1"));
  EXPECT_EQ(*catalogue.owned_by("acme"), 1) << "a deleted session counts no more";
}

TEST_F(NatsTest, AStreamsExtentIsTheRecordsItHolds) {
  start(1);
  RecordStreams streams(*conn_, 1);
  ASSERT_TRUE(streams.ensure("s.1"));
  auto published = streams.publish("s.1", {"\"a\"", "\"b\"", "\"c\""});
  ASSERT_TRUE(published) << published.error().message;
  auto extent = streams.extent("s.1");
  ASSERT_TRUE(extent) << extent.error().message;
  EXPECT_EQ(extent->first_seq, 1u);
  EXPECT_EQ(extent->last_seq, 3u);
  EXPECT_EQ(streams.extent("nobody").error().type, ErrorType::kNotFound);
}

TEST_F(NatsTest, AnEventIdBoundOnlyRisesAndRacingRaisesKeepTheHighest) {
  start(1);
  auto b = bucket(*conn_, {.name = "aoi-event-ids"});
  ASSERT_TRUE(b);
  EventIdBounds bounds(*b);
  auto none = bounds.bound("s.1");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(*none, 0u);
  EXPECT_EQ(bounds.raise("s.1", 4096), 4096u);
  // A stale holder's lower raise leaves the bound where it is.
  EXPECT_EQ(bounds.raise("s.1", 100), 4096u);
  EXPECT_EQ(*bounds.bound("s.1"), 4096u);
  std::vector<std::thread> threads;
  for (int t = 1; t <= 6; ++t) {
    threads.emplace_back([&, t] { bounds.raise("s.1", 4096u * static_cast<std::uint64_t>(t + 1)); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*bounds.bound("s.1"), 4096u * 7);
  ASSERT_TRUE(bounds.forget("s.1"));
  EXPECT_EQ(*bounds.bound("s.1"), 0u);
}

TEST_F(NatsTest, AReplicaDropsOutOfTheListWhenItStopsBeating) {
  start(1);
  auto b = bucket(*conn_, {.name = "aoi-replicas", .ttl = 1s, .memory = true});
  ASSERT_TRUE(b);
  Membership one(*b, Replica{.id = "one", .url = "http://127.0.0.1:1"});
  Membership two(*b, Replica{.id = "two.b", .url = "http://127.0.0.1:2"});
  Membership three(*b, Replica{.id = "three", .url = "http://127.0.0.1:3"});
  ASSERT_TRUE(one.heartbeat());
  ASSERT_TRUE(two.heartbeat());
  ASSERT_TRUE(three.heartbeat());
  auto live = one.live();
  ASSERT_TRUE(live);
  ASSERT_EQ(live->size(), 3u);
  EXPECT_EQ((*live)[0], (Replica{.id = "one", .url = "http://127.0.0.1:1"}));
  EXPECT_EQ((*live)[2].id, "two.b");
  ASSERT_TRUE(three.leave());
  // one keeps beating; two stops, and drops out.
  live = eventually([&]() -> Result<std::vector<Replica>> {
    std::this_thread::sleep_for(200ms);
    if (auto s = one.heartbeat(); !s) return s.error();
    auto l = one.live();
    if (l && l->size() != 1) return Error::conflict(std::to_string(l->size()) + " replicas live");
    return l;
  });
  ASSERT_TRUE(live) << live.error().message;
  EXPECT_EQ((*live)[0].id, "one");
}

TEST_F(NatsTest, WithTheServerAwayCallsSayNotReadyAndWorkAgainWhenItIsBack) {
  start(1);
  auto b = bucket(*conn_, {.name = "aoi-leases", .ttl = 10s});
  ASSERT_TRUE(b);
  LeaseTable a(*b, 10s, "a", "");
  auto lease = a.acquire("s");
  ASSERT_TRUE(lease);
  cluster_->node(0).stop();
  auto renewed = a.renew(*lease);
  ASSERT_FALSE(renewed);
  EXPECT_EQ(renewed.error().type, ErrorType::kNotReady) << renewed.error().message;
  std::string why;
  ASSERT_TRUE(cluster_->node(0).start(&why)) << why;  // the same port and data: the connection comes back
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  Status s = a.renew(*lease);
  while (!s && s.error().type == ErrorType::kNotReady && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
    s = a.renew(*lease);
  }
  EXPECT_TRUE(s) << s.error().message;
}

TEST_F(NatsTest, ABucketIsReadFromItsLeaderSoEveryServerSeesTheLastWrite) {
  // A session created through one replica and asked about through another at once: the bucket's reads must see
  // every acknowledged write whichever server a replica reaches. libnats makes buckets whose reads any of the
  // stream's servers answers ("direct get", a follower behind its leader included); aoi's are read from the
  // leader.
  start(3);
  ASSERT_TRUE(bucket(*conn_, {.name = "aoi-sessions", .replicas = 3}));
  jsStreamInfo* raw = nullptr;
  ASSERT_EQ(js_GetStreamInfo(&raw, conn_->impl().js, "KV_aoi-sessions", nullptr, nullptr), NATS_OK);
  EXPECT_FALSE(raw->Config->AllowDirect);
  jsStreamInfo_Destroy(raw);
  std::vector<std::unique_ptr<NatsConnection>> conns;
  std::vector<std::unique_ptr<KvBucket>> buckets;
  for (int i = 0; i < 3; ++i) {
    auto servers = NatsConnection::parse_servers(cluster_->node(i).url());
    ASSERT_TRUE(servers);
    auto c = NatsConnection::connect(*servers, "node" + std::to_string(i), 2s);
    ASSERT_TRUE(c) << c.error().message;
    conns.push_back(std::move(c).value());
    buckets.push_back(bucket(*conns.back(), {.name = "aoi-sessions", .replicas = 3}));
    ASSERT_TRUE(buckets.back());
  }
  for (int i = 0; i < 30; ++i) {
    const std::string key = "k" + std::to_string(i);
    auto written = buckets[static_cast<size_t>(i % 3)]->create(key, "v");
    ASSERT_TRUE(written) << written.error().message;
    for (int r = 1; r <= 2; ++r) {
      auto got = buckets[static_cast<size_t>((i + r) % 3)]->get(key);
      ASSERT_TRUE(got && *got) << key;
      EXPECT_EQ((*got)->revision, *written) << key;
    }
  }
}

TEST_F(NatsTest, AThreeNodeClusterKeepsLeasesAndTheirOrderWhenANodeIsKilled) {
  start(3);
  auto b = bucket(*conn_, {.name = "aoi-leases", .ttl = 10s, .replicas = 3});
  ASSERT_TRUE(b);
  LeaseTable a(*b, 10s, "a", "http://a");
  std::vector<Lease> leases;
  for (int i = 0; i < 20; ++i) {
    auto l = a.acquire("s" + std::to_string(i));
    ASSERT_TRUE(l) << l.error().message;
    leases.push_back(*l);
  }
  // The first node (the one a connected to first, most likely) dies; the rest go on.
  cluster_->node(0).kill();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (auto& l : leases) {
    Status s = a.renew(l);
    while (!s && s.error().type == ErrorType::kNotReady && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(200ms);
      s = a.renew(l);
    }
    ASSERT_TRUE(s) << l.session << ": " << s.error().message;
  }
  auto other = connect("other");
  ASSERT_TRUE(other);
  auto b2 = bucket(*other, {.name = "aoi-leases", .ttl = 10s, .replicas = 3});
  ASSERT_TRUE(b2);
  LeaseTable c(*b2, 10s, "c", "");
  for (const auto& l : leases) {
    auto h = c.holder(l.session);
    ASSERT_TRUE(h && *h) << l.session;
    EXPECT_EQ((*h)->replica, "a");
    EXPECT_EQ((*h)->epoch, l.epoch);
    EXPECT_FALSE(c.acquire(l.session));
  }
  // A new session's lease, taken on the two nodes left, has an epoch above every earlier one.
  auto fresh = c.acquire("fresh");
  ASSERT_TRUE(fresh) << fresh.error().message;
  for (const auto& l : leases) EXPECT_GT(fresh->epoch, l.epoch);
}

}  // namespace
}  // namespace aoi::cluster
